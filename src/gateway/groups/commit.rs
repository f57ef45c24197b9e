//! The bot's own commits: made and recorded in one writer job with a client message id, then
//! sent; a retry or a restart resends exactly the recorded commit, so a lost answer never
//! leaves this device and the platform at different epochs. Accepted → merged; refused →
//! discarded (an external join: the group is forgotten; a rejoin's verified tree stays, see
//! `e2e::rejoin`).

use protobuf::Message as _;
use rusqlite::Connection;

use crate::gateway::port::StepError;
use crate::clock::unix_now;
use crate::crypto;
use crate::e2e::group::{self as mls_group, CommitOut};
use crate::gateway::ctx::Ctx;
use crate::gateway::store::groups::{self, Membership, PendingCommit};
use crate::gateway::store::{Result as StoreResult, StoreError};
use crate::wire::platform::{
    group_delivery::Kind as DeliveryKind, send_group_message_response::Status as GroupStatus, InboxEnvelope,
    SendGroupMessageRequest, SendGroupMessageResponse,
};

/// How the platform answered one of our commits.
#[derive(Debug)]
pub(super) enum CommitAnswer {
    Accepted,
    /// STALE_EPOCH, REJECTED or REMOVALS_PENDING: discarded here.
    Refused(SendGroupMessageResponse),
    /// Nothing to commit.
    Nothing,
}

/// Makes (unless one is recorded already) and sends our commit of a group, and settles it.
pub(super) fn commit(
    cx: &Ctx,
    gid: &[u8],
    make: impl FnOnce(&Connection) -> StoreResult<Option<(CommitOut, bool)>> + Send + 'static,
) -> Result<CommitAnswer, StepError> {
    let g = gid.to_vec();
    let pending = cx.store.write(move |c| {
        if let Some(p) = groups::pending_commit(c, &g)? {
            return Ok(Some(p));
        }
        let Some((out, external)) = make(c)? else { return Ok(None) };
        let req = SendGroupMessageRequest {
            group_id: g.clone(),
            client_message_id: crypto::hex_encode(&crypto::random_bytes::<16>()),
            message: out.message,
            group_info: out.group_info,
            welcome: out.welcome,
            ..Default::default()
        };
        let request = req.write_to_bytes().map_err(|e| StoreError::Corrupt(format!("encode commit: {e}")))?;
        let p = PendingCommit { client_message_id: req.client_message_id, request, external };
        groups::set_pending_commit(c, &g, &p)?;
        Ok(Some(p))
    })?;
    match pending {
        Some(p) => settle(cx, gid, p),
        None => Ok(CommitAnswer::Nothing),
    }
}

/// Sends a recorded commit (again) and records the answer: merged when accepted, discarded
/// when refused. A failed call leaves it recorded for the next try.
fn settle(cx: &Ctx, gid: &[u8], p: PendingCommit) -> Result<CommitAnswer, StepError> {
    let req = SendGroupMessageRequest::parse_from_bytes(&p.request)
        .map_err(|e| StoreError::Corrupt(format!("stored commit of group {}: {e}", mls_group::short_id(gid))))?;
    let resp = cx.port.send_group_message(&req).map_err(|e| StepError::group_call("SendGroupMessage (a commit)", gid, e))?;
    let accepted = resp.status.enum_value_or_default() == GroupStatus::OK;
    let (g, cmid, external, group_seq) = (gid.to_vec(), p.client_message_id, p.external, resp.group_seq);
    cx.store.write(move |c| {
        if !groups::clear_pending_commit(c, &g, &cmid)? {
            return Ok(()); // settled meanwhile (a retry's answer, or a commit that lost)
        }
        match (accepted, external) {
            (true, true) => {
                // An external join brings a leaf of our own making: nothing to update yet.
                mls_group::join_accepted(c, &g)?;
                groups::set_self_updated(c, &g, unix_now())?;
                groups::set_status(c, &g, Membership::Member, unix_now())
            }
            (true, false) => {
                // Merged ahead of what the inbox has not read yet: the past epochs stay
                // until it has passed this commit (`import`, forward secrecy).
                groups::own_commit_accepted(c, &g, group_seq)?;
                Ok(mls_group::commit_accepted(c, &g)?)
            }
            (false, true) => Ok(mls_group::forget(c, &g)?),
            (false, false) => Ok(mls_group::commit_refused(c, &g)?),
        }
    })?;
    Ok(if accepted { CommitAnswer::Accepted } else { CommitAnswer::Refused(resp) })
}

/// Before the inbox processes a group's messages: a commit of ours still awaiting its answer
/// (a lost reply, a crash) is settled first, or the messages of the epoch it started would not
/// open. `Err` when one could not be settled (the platform unreachable): the batch must wait.
pub fn settle_pending(cx: &Ctx, envelopes: &[InboxEnvelope]) -> Result<(), StepError> {
    let mut seen: Vec<&[u8]> = Vec::new();
    for d in envelopes.iter().filter_map(|e| e.group.as_ref()) {
        let gid = d.group_id.as_slice();
        if d.kind.enum_value_or_default() != DeliveryKind::MLS_MESSAGE || seen.contains(&gid) {
            continue;
        }
        seen.push(gid);
        let owned = gid.to_vec();
        if let Some(p) = cx.store.read(move |c| groups::pending_commit(c, &owned))? {
            settle(cx, gid, p)?;
        }
    }
    Ok(())
}

/// Commits the removal of the leaves of users this bot removed, so that they read nothing sent
/// after it: one commit per group for all of its users due together (each commit of ours is
/// a past epoch to keep until the inbox passes it). A failure is only logged: the platform
/// refuses application messages until the leaves are gone (REMOVALS_PENDING), so the next
/// sender commits them then.
pub fn commit_removals(cx: &Ctx, due: Vec<(Vec<u8>, u64)>) {
    let mut by_group: Vec<(Vec<u8>, Vec<u64>)> = Vec::new();
    for (gid, user) in due {
        match by_group.iter_mut().find(|(g, _)| *g == gid) {
            Some((_, users)) => users.push(user),
            None => by_group.push((gid, vec![user])),
        }
    }
    for (gid, users) in by_group {
        let (g, u) = (gid.clone(), users.clone());
        let answer = commit(cx, &gid, move |c| {
            if mls_group::epoch(c, &g)?.is_none() {
                return Ok(None); // not in the group (any more)
            }
            Ok(mls_group::remove_users(c, &g, &u)?.map(|out| (out, false)))
        });
        match answer {
            Ok(a) => log::debug!("bot @{}: removal of users {users:?} from group {}: {a:?}", cx.name, mls_group::short_id(&gid)),
            Err(e) => log::warn!(
                "bot @{}: committing the removal of users {users:?} from group {} failed (the next sender commits it): {e}",
                cx.name,
                mls_group::short_id(&gid)
            ),
        }
    }
}
