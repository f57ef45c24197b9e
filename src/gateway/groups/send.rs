//! Sending (on `out/<n>`): a group message is encrypted in the current epoch and committed
//! before its first send; STALE_EPOCH means the inbox has commits to process first: the
//! ciphertext is dropped (never resent for a stale epoch) and the message is encrypted again
//! later; REMOVALS_PENDING makes this device commit those removals first.


use super::commit::{commit, CommitAnswer};
use crate::gateway::port::StepError;
use crate::clock::unix_now;
use crate::e2e::group as mls_group;
use crate::gateway::history::record_in_history;
use crate::gateway::keyboard;
use crate::gateway::ctx::Ctx;
use crate::gateway::send_wait::{SendFailure, Sent};
use crate::gateway::store::groups::{self, Membership};
use crate::gateway::store::outbox;
use crate::wire::Invalid;
use crate::wire::platform::{
    send_group_message_response::Status as GroupStatus, MessageIdReservation, ReserveMessageIdsRequest, SendGroupMessageRequest,
};

/// What happened to one outbox message of a group.
pub enum GroupSend {
    /// Acknowledged: left the outbox.
    Sent(Sent),
    /// Given up and recorded (`outbox::give_up`): left the outbox unsent; why is its caller's
    /// answer.
    GaveUp(outbox::GivenUp, SendFailure),
    /// Its caller withdrew it before it was handed to the platform: nothing was sent.
    Withdrawn,
    /// Not sent this time (the epoch moved on, removals were due): tried again later.
    Later(String),
    /// Not sent this time, but what held it back is done (the bot committed the removals the
    /// platform asked for first): tried again at once, not after the outbox's backoff.
    Again(String),
}

/// Gives `entry` up in a writer job: recorded, removed; `Withdrawn` when its caller was first.
fn give_up(cx: &Ctx, entry: &outbox::OutboxEntry, failure: SendFailure) -> Result<GroupSend, StepError> {
    let (e, reason) = (entry.clone(), failure.reason().to_string());
    let record = cx.store.write(move |c| outbox::give_up(c, &e, &reason, unix_now()))?;
    Ok(record.map_or(GroupSend::Withdrawn, |r| GroupSend::GaveUp(r, failure)))
}

/// Sends one outbox message to a group: reserves its message id, signs its keyboard (with that
/// id) and encrypts it, committed first, unless a ciphertext of the current attempt is recorded; sends;
/// records the answer.
pub fn send(cx: &Ctx, entry: &outbox::OutboxEntry) -> Result<GroupSend, StepError> {
    let (id, chat_id) = (entry.id, entry.chat_id);
    // The group, and whether anyone it lost is noted, in one read: almost every post finds no
    // one departed, and needs no write job for them.
    let found = cx.store.read(move |c| match groups::by_chat_id(c, chat_id)? {
        Some(g) => {
            let departed = !groups::departed(c, &g.group_id)?.is_empty();
            Ok(Some((g, departed)))
        }
        None => Ok(None),
    })?;
    let Some((group, departed)) = found.filter(|(g, _)| g.status == Membership::Member) else {
        return give_up(cx, entry, SendFailure::Refused(format!("chat {chat_id} is a group the bot is not a member of")));
    };
    // No post while a user the platform said left still has a leaf (`departed`).
    if departed {
        if let Some(why) = super::departed::remove_departed(cx, &group.group_id)? {
            return Ok(GroupSend::Later(why));
        }
    }
    let mut entry = entry.clone();
    // Every message's id is reserved first, not only a keyboard's (whose signed context names
    // it): so the platform cannot tell which messages carry buttons. Idempotent per client
    // message id, so a retry gets the same id.
    let (message_id, date) = match reserve_id(cx, &group.group_id, &entry.client_message_id)? {
        Ok(reserved) => reserved,
        Err(refused) => {
            return give_up(cx, &entry, SendFailure::Refused(format!("the platform refused the message: {refused}")));
        }
    };
    if keyboard::needs_context(&entry.content) {
        // Stored with the number below, in the job that hands the message over: a retry signs
        // the same context again (same id, date and key), and finds it stored.
        let chat = keyboard::KeyboardChat::Group(&group.group_id);
        keyboard::attach_context(&cx.identity, cx.user_id, chat, message_id, date, &mut entry.content);
    }
    let (gid, mut content, cmid) = (group.group_id.clone(), entry.content.clone(), entry.client_message_id.clone());
    let req = cx
        .store
        .write(move |c| {
            // Committed with what is sent: from now on its caller can no longer withdraw it.
            if !outbox::mark_handed(c, id, unix_now())? {
                return Ok(None);
            }
            if let Some(req) = outbox::group_sealed(c, id)? {
                return Ok(Some(req));
            }
            // Numbered and vouched for once, and stored with its keyboard's context: a message
            // encrypted again after a stale epoch keeps its number, and its reservation
            // answers the same id.
            if content.sender_seq == 0 {
                crate::e2e::sequence::number(c, crate::e2e::sequence::Conversation::Group(&gid), &mut content)?;
                crate::e2e::vouch::vouch(&mut content, message_id, date);
                outbox::set_content(c, id, &content)?;
            }
            let (message, _epoch) = mls_group::encrypt_content(c, &gid, &content)?;
            let req = SendGroupMessageRequest { group_id: gid, client_message_id: cmid, message, ..Default::default() };
            outbox::set_group_sealed(c, id, Some(&req))?;
            Ok(Some(req))
        })?;
    let Some(mut req) = req else { return Ok(GroupSend::Withdrawn) };
    // The files it carries (the platform sweeps uploads that no message named).
    req.file_refs = crate::e2e::file::refs_in(&entry.content);
    req.names_files = true;
    let resp = cx.port.send_group_message(&req).map_err(|e| StepError::group_call("SendGroupMessage", &req.group_id, e))?;
    let bot_user_id = cx.user_id;
    match resp.status.enum_value_or_default() {
        GroupStatus::OK => {
            let sent = Sent { message_id: resp.message_id as i64, date: resp.date };
            cx
                .store
                .write(move |c| {
                    outbox::remove(c, entry.id)?;
                    record_in_history(c, bot_user_id, &entry, &sent)
                })?;
            Ok(GroupSend::Sent(sent))
        }
        GroupStatus::STALE_EPOCH => {
            // Never resent: encrypted again once the inbox has processed the newer epoch.
            encrypt_again_later(cx, id, "the group's epoch moved on")?;
            Ok(GroupSend::Later(format!("group {}: epoch {} is current; catching up", mls_group::short_id(&req.group_id), resp.epoch)))
        }
        GroupStatus::REMOVALS_PENDING => {
            encrypt_again_later(cx, id, "removals were due first")?;
            let (users, gid) = (resp.pending_removals.clone(), req.group_id.clone());
            let devices: Vec<mls_group::Device> = resp.pending_device_removals.iter().map(|d| (d.user_id, d.device_id)).collect();
            let g = gid.clone();
            let answer =
                commit(cx, &gid, move |c| Ok(mls_group::remove_leaves(c, &g, &users, &devices)?.map(|out| (out, false))))?;
            let why = format!("group {}: committed the removals due first ({answer:?})", mls_group::short_id(&gid));
            Ok(match answer {
                CommitAnswer::Accepted | CommitAnswer::Nothing => GroupSend::Again(why),
                CommitAnswer::Refused(_) => GroupSend::Later(why),
            })
        }
        GroupStatus::REJECTED => {
            let mut handed = entry.clone();
            handed.handed = true;
            give_up(cx, &handed, SendFailure::Refused(format!("the platform rejected the message: {}", resp.error)))
        }
    }
}

/// Drops the recorded ciphertext of an outbox message the platform did not take, so that the
/// next try encrypts it anew (in the epoch the inbox has reached by then).
fn encrypt_again_later(cx: &Ctx, id: i64, why: &'static str) -> Result<(), StepError> {
    Ok(cx.store.write(move |c| {
        outbox::set_group_sealed(c, id, None)?;
        outbox::note_failure(c, id, why)
    })?)
}

/// The message id (and date) the platform reserves in a group for one client message id (the
/// content vouches for it, a keyboard's signed context names it); `Ok(Err(why))` when the
/// platform refuses.
fn reserve_id(cx: &Ctx, group_id: &[u8], cmid: &str) -> Result<Result<(u64, i64), Invalid>, StepError> {
    let req = ReserveMessageIdsRequest {
        reservations: vec![MessageIdReservation {
            client_message_id: cmid.to_string(),
            group_id: group_id.to_vec(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let resp = cx.port.reserve_message_ids(&req).map_err(|e| StepError::group_call("ReserveMessageIds", group_id, e))?;
    let r = resp.ids.into_iter().next().ok_or_else(|| StepError::Refused("the platform answered no reservation".into()))?;
    Ok(if r.message_id != 0 { Ok((r.message_id, r.date)) } else { Err(Invalid(r.error)) })
}
