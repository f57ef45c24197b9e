//! Self-updates (on `in/<n>`, after a Welcome join, when a retry is due, and on the hourly upkeep):
//! the bot replaces its own leaf in each group right after a Welcome join and then every
//! `group_self_update_days`, by a commit with a path sent like every other commit of ours.
//! This is the groups' post-compromise security, and a leaf made from a key package never
//! stays long enough to expire.

use super::commit::{commit, CommitAnswer};
use crate::e2e::group as mls_group;
use crate::gateway::ctx::Ctx;
use crate::gateway::store::groups;
use crate::wire::platform::send_group_message_response::Status as GroupStatus;

/// Self-updates every group whose leaf of ours is older than the period at `now` (the
/// project's clock; a test passes a later time). Failures are logged and tried again later;
/// false when one is left for soon (another member's commit came first, or the platform was
/// unreachable).
pub fn self_update_due(cx: &Ctx, now: i64) -> bool {
    let period = i64::try_from(cx.group_self_update.as_secs()).unwrap_or(i64::MAX);
    let due = match cx.store.read(move |c| groups::self_update_due(c, now, period)) {
        Ok(due) => due,
        Err(e) => {
            log::warn!("bot @{}: reading the groups due for a self-update: {e}", cx.name);
            return false;
        }
    };
    let mut all = true;
    for gid in due {
        let g = gid.clone();
        let answer = commit(cx, &gid, move |c| {
            if mls_group::epoch(c, &g)?.is_none() {
                return Ok(None); // not in the group (any more)
            }
            Ok(Some((mls_group::self_update(c, &g)?, false)))
        });
        let short = mls_group::short_id(&gid);
        let done = match answer {
            Ok(CommitAnswer::Accepted) => {
                log::debug!("bot @{}: updated its leaf in group {short}", cx.name);
                true
            }
            Ok(CommitAnswer::Nothing) => true,
            // Another member's commit came first: ours is derived again after the inbox
            // has processed it (a retry soon, `inbox::follow_up`).
            Ok(CommitAnswer::Refused(r)) if r.status.enum_value_or_default() == GroupStatus::STALE_EPOCH => false,
            Ok(CommitAnswer::Refused(r)) => {
                // Not tried again before the next period, rather than at every check.
                log::warn!("bot @{}: the platform refused our self-update in group {short}: {}", cx.name, r.error);
                true
            }
            Err(e) => {
                log::warn!("bot @{}: self-update in group {short} failed (tried again later): {e}", cx.name);
                false
            }
        };
        if done {
            let g = gid.clone();
            if let Err(e) = cx.store.write(move |c| groups::set_self_updated(c, &g, now)) {
                log::warn!("bot @{}: recording the self-update of group {short}: {e}", cx.name);
            }
        }
        all &= done;
    }
    all
}
