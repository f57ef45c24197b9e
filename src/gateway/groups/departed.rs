//! Users the platform said left a group or were banned from it. Their leaves must leave the
//! tree, or they go on reading: a platform that announces a departure but never asks anyone to
//! commit the removal would keep a reader the members believe gone. So `import` notes each
//! such user (a later seating notice clears them), and
//! - before the bot posts into the group, the removal of every noted user who still has a
//!   leaf is committed first; the post waits while the platform refuses it (an alert);
//! - one still noted `GRACE_SECS` after the notice (the platform asks the next sender to commit
//!   it, REMOVALS_PENDING, so an honest one has by then) is committed by the bot itself, when
//!   the import's `FollowUp::DepartedNoted` is due and on the hourly upkeep.

use rusqlite::Connection;

use super::commit::{commit, CommitAnswer};
use crate::e2e::group as mls_group;
use crate::gateway::port::StepError;
use crate::gateway::ctx::Ctx;
use crate::gateway::store::groups;
use crate::gateway::store::Result as StoreResult;
use crate::wire::platform::send_group_message_response::Status as GroupStatus;

/// How long the platform has to ask for a departed user's removal before the bot commits it.
pub const GRACE_SECS: i64 = 60;

/// Commits the removal of the departed users of a group who still have a leaf, once its
/// caller found one noted (the post's read of its group, the overdue list). `Ok(None)`: none
/// is left, the bot may post; `Ok(Some(why))`: one stays (the platform refused the removal, or
/// the epoch moved on under it), nothing may be posted yet.
pub(super) fn remove_departed(cx: &Ctx, group_id: &[u8]) -> Result<Option<String>, StepError> {
    let g = group_id.to_vec();
    let staying = cx.store.write(move |c| staying(c, &g))?;
    if staying.is_empty() {
        return Ok(None);
    }
    let (g, users) = (group_id.to_vec(), staying.clone());
    let answer = commit(cx, group_id, move |c| Ok(mls_group::remove_users(c, &g, &users)?.map(|out| (out, false))))?;
    let short = mls_group::short_id(group_id);
    match answer {
        CommitAnswer::Accepted => {
            log::info!("bot @{}: committed the removal of users {staying:?}, who left group {short} or were banned", cx.name);
            Ok(None)
        }
        // Another commit (the import's removal of the bot's bans, a member's) took them first.
        CommitAnswer::Nothing => Ok(None),
        CommitAnswer::Refused(r) if r.status.enum_value_or_default() == GroupStatus::STALE_EPOCH => {
            Ok(Some(format!("group {short}: removing users {staying:?} who left: the epoch moved on, tried again")))
        }
        CommitAnswer::Refused(r) => {
            let what = format!(
                "group {short}: the platform said users {staying:?} left or were banned, yet refused the commit removing their leaves ({}); the bot posts nothing there until they are gone",
                r.error
            );
            cx.security_alert(&what);
            Ok(Some(what))
        }
    }
}

/// The departed users of a group who still have a leaf; the others are crossed off.
fn staying(c: &Connection, group_id: &[u8]) -> StoreResult<Vec<u64>> {
    let departed = groups::departed(c, group_id)?;
    if departed.is_empty() {
        return Ok(departed);
    }
    // Not in the group (any more): nothing to remove.
    let with_leaves = mls_group::users_with_leaves(c, group_id, &departed)?.unwrap_or_default();
    let mut staying = Vec::new();
    for user in departed {
        if with_leaves.contains(&user) {
            staying.push(user);
        } else {
            groups::clear_departed(c, group_id, user)?;
        }
    }
    Ok(staying)
}

/// Commits the removals the platform has not asked for within `GRACE_SECS` before `now` (the
/// project's clock; a test passes a later time).
pub fn remove_overdue_departed(cx: &Ctx, now: i64) {
    let due = match cx.store.read(move |c| groups::groups_with_departed_before(c, now - GRACE_SECS)) {
        Ok(due) => due,
        Err(e) => return log::warn!("bot @{}: reading the departed users to remove: {e}", cx.name),
    };
    for gid in due {
        match remove_departed(cx, &gid) {
            Ok(None) => {}
            Ok(Some(why)) => log::warn!("bot @{}: {why}", cx.name),
            Err(e) => log::warn!(
                "bot @{}: removing the departed users of group {} failed (tried again later): {e}",
                cx.name,
                mls_group::short_id(&gid)
            ),
        }
    }
}
