//! Joining (on `in/<n>` when an import asks for it, `FollowUp::Join`/`Rejoin`, at start, and
//! when a failed join is due again): checks the bot's `groups` capability (a
//! bot without it leaves at once, so the adding user sees a refusal), fetches the GroupInfo and
//! joins by an external commit. And the stock of key packages for members who add the bot by
//! Welcome, replaced before it ages (docs/groups.md, "Lifetimes").

use super::commit::{commit, CommitAnswer};
use super::joiners;
use crate::gateway::port::StepError;
use crate::clock::unix_now;
use crate::e2e::group as mls_group;
use crate::e2e::{posters, E2eError};
use crate::wire::roles::may_post_in_channel;
use crate::gateway::ctx::Ctx;
use crate::gateway::store::groups::{self, GroupChat, Membership};
use crate::gateway::store::StoreError;
use crate::wire::platform::{
    send_group_message_response::Status as GroupStatus, GroupRequest, KeyPackagesUpload, VerifyCredentialRequest,
};

/// How often a join is tried again at once after the group moved on under it (STALE_EPOCH).
const JOIN_TRIES: usize = 5;

/// Joins every group the bot was added to and has not joined yet. False when one failed for
/// a reason that may pass (the platform unreachable): its caller tries again soon. (A join
/// refused for the group's tree is alerted and waits for the hourly upkeep.)
pub fn join_invited(cx: &Ctx) -> bool {
    let invited = match cx.store.read(groups::invited) {
        Ok(g) => g,
        Err(e) => {
            log::warn!("bot @{}: reading the groups to join: {e}", cx.name);
            return false;
        }
    };
    if invited.is_empty() {
        return true;
    }
    // The bot's capabilities as the platform holds them now (@BotManager may change them).
    let capabilities = match cx.port.verify_credential(&VerifyCredentialRequest::new()) {
        Ok(r) => r.capabilities,
        Err(e) => {
            log::warn!("bot @{}: reading its capabilities before joining groups failed (tried again later): {e}", cx.name);
            return false;
        }
    };
    let mut all = true;
    for group in invited {
        match join(cx, &group, &capabilities) {
            Ok(()) => {}
            Err(StepError::Store(StoreError::E2e(e @ (E2eError::UntrustedLeaf { .. } | E2eError::RejoinRefused { .. })))) => {
                cx.security_alert(&format!("joining group {:?}: {e}; not joined (tried again later)", group.title))
            }
            Err(e) => {
                log::warn!("bot @{}: joining group {:?} failed (tried again later): {e}", cx.name, group.title);
                all = false;
            }
        }
    }
    know_channel_posters(cx);
    all
}

/// Joins one group, or leaves it when the bot lacks the capability.
fn join(cx: &Ctx, group: &GroupChat, capabilities: &str) -> Result<(), StepError> {
    let p = &cx.port;
    let gid = group.group_id.clone();
    let needed = if group.kind == "channel" { "channels" } else { "groups" };
    if !capabilities.split(',').any(|c| c.trim().eq_ignore_ascii_case(needed)) {
        log::warn!(
            "bot @{}: added to {} {:?}, but the bot lacks the `{needed}` capability (set it with @BotManager); leaving it",
            cx.name,
            group.kind,
            group.title
        );
        let req = GroupRequest { group_id: gid.clone(), ..Default::default() };
        p.leave_group(&req).map_err(|e| StepError::group_call("LeaveGroup", &gid, e))?;
        let g = gid.clone();
        return Ok(cx.store.write(move |c| groups::set_status(c, &g, Membership::Gone, unix_now()))?);
    }
    for _ in 0..JOIN_TRIES {
        let req = GroupRequest { group_id: gid.clone(), ..Default::default() };
        let info = p.get_group_info(&req).map_err(|e| StepError::group_call("GetGroupInfo", &gid, e))?.group_info;
        let g = gid.clone();
        // What the join found in the tree, for after the answer (the commit job owns its
        // closure; a resent recorded join finds nothing here and reports nobody).
        let found = std::sync::Arc::new(std::sync::OnceLock::new());
        let tree = found.clone();
        let answer = commit(cx, &gid, move |c| {
            let out = mls_group::join_external_to(c, &g, &info)?;
            let _ = tree.set((out.rejoined, out.newcomers.clone()));
            Ok(Some((out, true)))
        })?;
        match answer {
            CommitAnswer::Accepted | CommitAnswer::Nothing => {
                log::info!("bot @{}: joined {} {:?}", cx.name, group.kind, group.title);
                if let Some((rejoined, newcomers)) = found.get() {
                    joiners::joined_tree(cx, group, *rejoined, newcomers);
                }
                return Ok(());
            }
            CommitAnswer::Refused(r) if r.status.enum_value_or_default() == GroupStatus::STALE_EPOCH => continue,
            CommitAnswer::Refused(r) => {
                let g = gid.clone();
                cx.store.write(move |c| groups::set_status(c, &g, Membership::Gone, unix_now()))?;
                return Err(StepError::Refused(format!("the platform refused the join: {}", r.error)));
            }
        }
    }
    Err(StepError::Refused(format!("the group kept moving on ({JOIN_TRIES} tries)")))
}

/// Reads who may post in each channel this device joined and has no list for yet (the join by
/// external commit, a Welcome): from then on a post from anyone else is dropped (`import`).
pub fn know_channel_posters(cx: &Ctx) {
    let channels = match cx.store.read(groups::channels_without_posters) {
        Ok(c) => c,
        Err(e) => {
            log::warn!("bot @{}: reading the channels to learn the posters of: {e}", cx.name);
            return;
        }
    };
    for channel in channels {
        let req = GroupRequest { group_id: channel.group_id.clone(), ..Default::default() };
        let group = match cx.port.get_group(&req) {
            Ok(g) => g,
            Err(e) => {
                let e = StepError::group_call("GetGroup", &channel.group_id, e);
                log::warn!("bot @{}: learning who posts in channel {:?} failed (tried again later): {e}", cx.name, channel.title);
                continue;
            }
        };
        let posters: Vec<u64> =
            group.members.iter().filter(|m| may_post_in_channel(m)).map(|m| m.user.user_id).collect();
        let gid = channel.group_id.clone();
        if let Err(e) = cx.store.write(move |c| Ok(posters::set_posters(c, &gid, &posters)?)) {
            log::warn!("bot @{}: storing who posts in channel {:?}: {e}", cx.name, channel.title);
        }
    }
}

/// How many unused key packages the platform should hold for this device (members adding the
/// bot by key package — the Welcome path — take one each).
const KEY_PACKAGE_TARGET: u32 = 20;

/// Tops this device's key packages on the platform back up to `KEY_PACKAGE_TARGET`, and
/// replaces them all once they are older than half their lifetime.
pub fn keep_key_packages(cx: &Ctx) {
    keep_key_packages_at(cx, unix_now());
}

/// `keep_key_packages` at the time `now` (the project's clock; a test passes a later time).
pub fn keep_key_packages_at(cx: &Ctx, now: i64) {
    if let Err(e) = top_up_key_packages(cx, now) {
        log::warn!("bot @{}: key package top-up failed (tried again later): {e}", cx.name);
    }
}

fn top_up_key_packages(cx: &Ctx, now: i64) -> Result<(), StepError> {
    let p = &cx.port;
    let failed = |e| StepError::platform("UploadKeyPackages", e);
    let remaining = p.upload_key_packages(&KeyPackagesUpload::new()).map_err(failed)?.remaining;
    let made_at = cx.store.read(groups::key_packages_made_at)?;
    // The platform hands out the newest first and deletes expired ones, so a fresh batch
    // replaces the old.
    let (count, renew) = mls_group::key_packages_due(remaining, made_at, now, KEY_PACKAGE_TARGET / 2, KEY_PACKAGE_TARGET);
    if count == 0 {
        return Ok(());
    }
    let fresh = cx.store.write(move |c| Ok(mls_group::key_packages(c, count)?))?;
    let req = KeyPackagesUpload { key_packages: fresh, ..Default::default() };
    p.upload_key_packages(&req).map_err(failed)?;
    if renew {
        cx.store.write(move |c| groups::set_key_packages_made_at(c, now))?;
    }
    Ok(())
}
