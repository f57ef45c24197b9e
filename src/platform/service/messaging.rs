//! Messaging: SendMessages (idempotent by client message id, one ciphertext per recipient
//! device), ReserveMessageIds (ids taken before sealing) and Ack. The Inbox stream is `super::super::inbox`.

use super::super::convert::invalid;
use super::super::error::Result;
use super::super::inbox::InboxHub;
use super::super::store::{DeviceAddr, Outgoing, Reserved, SendOutcome, Store};
use crate::clock::unix_now;
use crate::wire::platform::{self as pb, send_result::Status as SendStatus};

/// Most messages in one SendMessages request.
pub const MESSAGES_PER_REQUEST_MAX: usize = 1000;
/// Most seqs in one Ack request.
pub const ACKS_PER_REQUEST_MAX: usize = 10_000;

/// Refuses a SendMessages or SendGroupMessages request of more than
/// [`MESSAGES_PER_REQUEST_MAX`] messages.
pub(super) fn check_batch_len(n: usize, what: &str) -> Result<()> {
    if n > MESSAGES_PER_REQUEST_MAX {
        return Err(invalid(format!("{n} {what} in one request; the limit is {MESSAGES_PER_REQUEST_MAX}")));
    }
    Ok(())
}

pub(super) fn send_messages(
    store: &Store,
    hub: &InboxHub,
    sender: DeviceAddr,
    req: pb::SendMessagesRequest,
) -> Result<pb::SendMessagesResponse> {
    check_batch_len(req.messages.len(), "messages")?;
    let named: Vec<String> = req.messages.iter().flat_map(|m| m.file_refs.iter().cloned()).collect();
    store.name_files(sender, req.names_files, &named)?;
    let messages: Vec<Outgoing> = req
        .messages
        .into_iter()
        .map(|m| Outgoing {
            client_message_id: m.client_message_id,
            recipient_id: m.recipient_user_id,
            ciphertexts: m.ciphertexts.into_iter().map(|c| (c.device_id, c.ciphertext)).collect(),
            inline_session_id: m.inline_session_id,
        })
        .collect();
    let batch = store.send_messages(sender, &messages, unix_now())?;
    // Wake the streams only after the commit, so they find the entries.
    hub.notify(&batch.delivered_to);
    log::debug!(
        "device {} of user {} sent {} messages to {} devices",
        sender.device_id,
        sender.user_id,
        messages.len(),
        batch.delivered_to.len()
    );
    let results = messages
        .iter()
        .zip(batch.outcomes)
        .map(|(m, outcome)| {
            let mut r = pb::SendResult { client_message_id: m.client_message_id.clone(), ..Default::default() };
            match outcome {
                SendOutcome::Ok { message_id, date, .. } => {
                    r.status = SendStatus::OK.into();
                    r.message_id = message_id;
                    r.date = date;
                }
                SendOutcome::StaleDevices { missing, removed } => {
                    r.status = SendStatus::STALE_DEVICES.into();
                    r.missing_devices = missing;
                    r.removed_devices = removed;
                }
                SendOutcome::UnknownRecipient => {
                    r.status = SendStatus::UNKNOWN_RECIPIENT.into();
                    r.error = format!("no user with id {}", m.recipient_id);
                }
                SendOutcome::Rejected(error) => {
                    r.status = SendStatus::REJECTED.into();
                    r.error = error;
                }
            }
            r
        })
        .collect();
    Ok(pb::SendMessagesResponse { results, ..Default::default() })
}

pub(super) fn reserve_message_ids(
    store: &Store,
    sender: DeviceAddr,
    req: pb::ReserveMessageIdsRequest,
) -> Result<pb::ReserveMessageIdsResponse> {
    if req.reservations.len() > MESSAGES_PER_REQUEST_MAX {
        return Err(invalid(format!(
            "{} reservations in one request; the limit is {MESSAGES_PER_REQUEST_MAX}",
            req.reservations.len()
        )));
    }
    let wanted: Vec<(String, u64, Vec<u8>)> =
        req.reservations.into_iter().map(|r| (r.client_message_id, r.recipient_user_id, r.group_id)).collect();
    let reserved = store.reserve_message_ids(sender, &wanted, unix_now())?;
    let ids = wanted
        .into_iter()
        .zip(reserved)
        .map(|((client_message_id, _, _), r)| {
            let mut id = pb::ReservedMessageId { client_message_id, ..Default::default() };
            match r {
                Reserved::Id { message_id, date } => {
                    id.message_id = message_id;
                    id.date = date;
                }
                Reserved::Refused(error) => id.error = error,
            }
            id
        })
        .collect();
    Ok(pb::ReserveMessageIdsResponse { ids, ..Default::default() })
}

pub(super) fn ack(store: &Store, addr: DeviceAddr, req: pb::AckRequest) -> Result<pb::AckResponse> {
    if req.seqs.len() > ACKS_PER_REQUEST_MAX {
        return Err(invalid(format!("{} seqs in one Ack; the limit is {ACKS_PER_REQUEST_MAX}", req.seqs.len())));
    }
    store.ack(addr, &req.seqs)?;
    Ok(pb::AckResponse::default())
}
