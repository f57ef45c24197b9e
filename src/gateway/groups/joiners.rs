//! Joiners the platform did not announce. A commit that brings a new user into a group's tree
//! (a device joining by external commit, a key package a member added) makes them a reader at
//! once; an honest platform announces their membership right after that commit (both are
//! delivered in one transaction), and that notice becomes the bot's `chat_member` update.
//! So that a platform cannot add a silent reader by leaving its notice out, `import` notes
//! every user a commit brings in and crosses them off when the platform speaks about them;
//! one still unannounced `GRACE_SECS` later (checked when the import's `JoinersNoted` is due, and
//! on the hourly upkeep) becomes a `chat_member` update made from the tree all the same, with a
//! warning and a security alert.

use rusqlite::Connection;

use crate::clock::unix_now;
use crate::e2e::group::Device;
use crate::gateway::ctx::Ctx;
use crate::gateway::port::StepError;
use crate::gateway::store::groups::{self, GroupChat, Joiner, Membership};
use crate::gateway::store::Result as StoreResult;
use crate::gateway::updates;
use crate::wire::platform::{GroupMember, GroupRequest, GroupRole, MembershipChange, Profile};
use crate::e2e::posters;
use crate::wire::roles::{is_seated, may_post_in_channel};

/// How long a joiner may wait for the platform's notice; the notice follows its commit at once,
/// so this only covers a batch boundary between them and a slow import.
pub const GRACE_SECS: i64 = 60;

/// Notes the users a merged commit of `committer` brought into the tree (`new_users` of
/// `Received::Commit`: with no other leaf in it; a member's further device is no new member),
/// but this bot. Whether it noted any.
pub(super) fn note_new_members(c: &Connection, group_id: &[u8], new_users: &[u64], committer: u64, me: u64, date: i64) -> StoreResult<bool> {
    let now = unix_now();
    let mut noted = false;
    for &user in new_users.iter().filter(|u| **u != me) {
        groups::note_joiner(c, &Joiner { group_id: group_id.to_vec(), user_id: user, actor_id: committer, date }, now)?;
        noted = true;
    }
    Ok(noted)
}

/// After a join by external commit was accepted: the users in the tree new to this device
/// (on a first join every member, on a rejoin those its last verified tree did not hold,
/// `e2e::rejoin`) that the platform's member list does not seat are noted as joiners, so they
/// are reported and alerted after `GRACE_SECS` like any reader the platform never announced.
/// (The platform announces no one who was in before the bot, and a rejoin's newcomers were
/// announced while this device could not follow: the member list is the announcement.) When
/// the list cannot be read, a rejoin notes them all; a first join only logs them.
pub(super) fn joined_tree(cx: &Ctx, group: &GroupChat, rejoined: bool, newcomers: &[Device]) {
    let me = cx.user_id;
    let mut users: Vec<u64> = newcomers.iter().map(|d| d.0).filter(|u| *u != me).collect();
    users.sort_unstable();
    users.dedup();
    if users.is_empty() {
        return;
    }
    if rejoined {
        log::warn!("bot @{}: rejoined {:?}; its tree holds users the verified one did not: {users:?}", cx.name, group.title);
    } else {
        // A channel may hold thousands: the count, and the first few.
        let first: Vec<u64> = users.iter().take(20).copied().collect();
        log::info!("bot @{}: {} {:?} has {} other users in its tree (first: {first:?})", cx.name, group.kind, group.title, users.len());
    }
    let req = GroupRequest { group_id: group.group_id.clone(), ..Default::default() };
    let (unseated, posters): (Vec<u64>, Option<Vec<u64>>) = match cx.port.get_group(&req) {
        Ok(g) => {
            // A set, not a scan per user: a group of thousands.
            let seated_users: std::collections::HashSet<u64> =
                g.members.iter().filter(|m| is_seated(m.role.enum_value_or_default())).map(|m| m.user.user_id).collect();
            let seated = |u: &u64| seated_users.contains(u);
            // A channel's posters come from the same list (else `join::know_channel_posters`
            // reads it again).
            let posters = group.is_channel().then(|| g.members.iter().filter(|m| may_post_in_channel(m)).map(|m| m.user.user_id).collect());
            (users.into_iter().filter(|u| !seated(u)).collect(), posters)
        }
        Err(e) => {
            let e = StepError::group_call("GetGroup", &group.group_id, e);
            log::warn!("bot @{}: reading who the platform seats in {:?} after a join failed: {e}", cx.name, group.title);
            if !rejoined {
                return;
            }
            (users, None)
        }
    };
    if unseated.is_empty() && posters.is_none() {
        return;
    }
    let gid = group.group_id.clone();
    let noted = cx.store.write(move |c| {
        if let Some(posters) = posters {
            posters::set_posters(c, &gid, &posters)?;
        }
        let now = unix_now();
        for user in unseated {
            // Who let them in is unknown here: the joiner is named.
            groups::note_joiner(c, &Joiner { group_id: gid.clone(), user_id: user, actor_id: user, date: now }, now)?;
        }
        Ok(())
    });
    if let Err(e) = noted {
        log::warn!("bot @{}: noting the unannounced members of {:?}: {e}", cx.name, group.title);
    }
}

/// Reports the joiners still unannounced `GRACE_SECS` before `now` (the project's clock; a
/// test passes a later time).
pub fn report_unannounced_joiners(cx: &Ctx, now: i64) {
    // Read first: after almost every batch there is nothing to report, and no write job is due.
    match cx.store.read(move |c| groups::unannounced_joiners_due(c, now - GRACE_SECS)) {
        Ok(true) => {}
        Ok(false) => return,
        Err(e) => return log::warn!("bot @{}: reading unannounced group joiners: {e}", cx.name),
    }
    let me = cx.me();
    let reported = cx.store.write(move |c| {
        let mut reported = Vec::new();
        for j in groups::take_unannounced_joiners(c, now - GRACE_SECS)? {
            let Some(group) = groups::by_group_id(c, &j.group_id)? else { continue };
            if group.status != Membership::Member {
                continue; // no longer ours to report
            }
            updates::store(c, updates::member_change_updates(&me, &group, &joined_change(c, &j)?, j.date))?;
            reported.push(format!(
                "group {:?}: user {} joined (let in by user {}) and the platform never announced it",
                group.title, j.user_id, j.actor_id
            ));
        }
        Ok(reported)
    });
    match reported {
        Ok(reported) => {
            for what in reported {
                log::warn!("bot @{}: {what}; reported as a chat_member update from the group's tree", cx.name);
                cx.security_alert(&what);
            }
        }
        Err(e) => log::warn!("bot @{}: reporting unannounced group joiners: {e}", cx.name),
    }
}

/// The change the platform left out: the user, from outside the group to member, by the one
/// who let them in; named as last seen in a group (an unknown user by number only).
fn joined_change(c: &Connection, j: &Joiner) -> StoreResult<MembershipChange> {
    let profile = |user_id: u64| -> StoreResult<Profile> {
        let known = groups::user(c, user_id)?;
        Ok(match known {
            Some(u) => Profile { user_id, username: u.username, display_name: u.first_name, is_bot: u.is_bot, ..Default::default() },
            None => Profile { user_id, display_name: format!("user {user_id}"), ..Default::default() },
        })
    };
    let member = |role: GroupRole| -> StoreResult<GroupMember> {
        Ok(GroupMember { user: Some(profile(j.user_id)?).into(), role: role.into(), ..Default::default() })
    };
    Ok(MembershipChange {
        old: Some(member(GroupRole::LEFT)?).into(),
        new: Some(member(GroupRole::MEMBER)?).into(),
        actor: Some(profile(j.actor_id)?).into(),
        ..Default::default()
    })
}
