//! Reserving the message ids of a batch (one ReserveMessageIds call): each content vouches
//! for its id and date; an entry whose reservation is refused is given up.

use std::collections::BTreeMap;


use crate::gateway::ctx::Sending;
use crate::gateway::runtime::unix_now;
use crate::gateway::send_wait::SendFailure;
use crate::gateway::port::PlatformPort;
use crate::gateway::store::outbox;
use super::{gave_up, SendError};
use crate::wire::platform::{
    MessageIdReservation, ReserveMessageIdsRequest,
};

/// Message ids reserved for the entries to seal, by client message id: (message id, date),
/// which the content vouches for and a keyboard's signed context names.
pub(super) type Reservations = BTreeMap<String, (u64, i64)>;

/// Reserves the message ids of every unsealed entry (one ReserveMessageIds call per batch):
/// every content vouches for its id and date (`e2e::vouch`), and a keyboard's signed context
/// names them too. A repeat after a failed seal answers the same ids.
pub(super) fn reserve_ids(platform: &dyn PlatformPort, entries: &[outbox::OutboxEntry]) -> Result<(Reservations, Vec<(String, String)>), SendError> {
    let mut req = ReserveMessageIdsRequest::new();
    for e in entries.iter().filter(|e| e.sealed.is_none()) {
        let mut r = MessageIdReservation::new();
        r.client_message_id = e.client_message_id.clone();
        r.recipient_user_id = e.chat_id as u64;
        req.reservations.push(r);
    }
    if req.reservations.is_empty() {
        return Ok((Reservations::new(), Vec::new()));
    }
    let resp = platform
        .reserve_message_ids(&req)
        .map_err(|e| SendError::Platform(format!("reserving message ids: {e}")))?;
    let (ok, refused): (Vec<_>, Vec<_>) = resp.ids.into_iter().partition(|r| r.message_id != 0);
    Ok((
        ok.into_iter().map(|r| (r.client_message_id, (r.message_id, r.date))).collect(),
        refused.into_iter().map(|r| (r.client_message_id, r.error)).collect(),
    ))
}

/// Ends the entries whose reservation the platform refused (an unknown recipient), as a
/// refused send would, and returns the others.
pub(super) fn give_up_refused(
    out: &Sending,
    entries: Vec<outbox::OutboxEntry>,
    refused: Vec<(String, String)>,
) -> Result<Vec<outbox::OutboxEntry>, SendError> {
    if refused.is_empty() {
        return Ok(entries);
    }
    let (gone, kept): (Vec<_>, Vec<_>) =
        entries.into_iter().partition(|e| refused.iter().any(|(cmid, _)| *cmid == e.client_message_id));
    let gone: Vec<(outbox::OutboxEntry, SendFailure)> = gone
        .into_iter()
        .map(|e| {
            let why = refused.iter().find(|(cmid, _)| *cmid == e.client_message_id).map(|(_, w)| w.as_str()).unwrap_or("");
            (e, SendFailure::Refused(format!("the platform refused a message id for the message: {why}")))
        })
        .collect();
    let now = unix_now();
    let records = out.store.write(move |c| {
        let mut records = Vec::new();
        for (e, failure) in gone {
            if let Some(r) = outbox::give_up(c, &e, failure.reason(), now)? {
                records.push((e.id, r, failure));
            }
        }
        Ok(records)
    })?;
    for (row, record, failure) in records {
        gave_up(out, row, &record, failure);
    }
    Ok(kept)
}
