//! The prekey bundles a batch needs, fetched before a writer job and never inside one: for
//! recipients no device of which is known (and, through `fetch_bundles`, for the devices an
//! answer named as missing, `record`).

use std::collections::BTreeSet;

use rusqlite::Connection;

use crate::gateway::ctx::Ctx;
use crate::gateway::store::{outbox, StoreError};
use crate::e2e;
use super::SendError;
use crate::wire::platform::{
    GetPrekeyBundlesRequest, GetPrekeyBundlesResponse, Profile,
};

/// Starts sessions from fetched bundles inside a writer job. Bundles that are refused (a
/// certificate that does not verify, a changed device key) start nothing and write nothing:
/// that recipient's devices stay without a session, the platform names them as missing, and
/// `MAX_DEVICE_REFRESHES` ends the message. Only a failing database fails the job.
pub(super) fn start_sessions(c: &Connection, fetched: &[GetPrekeyBundlesResponse], bot: &str) -> Result<(), StoreError> {
    for resp in fetched {
        match e2e::start_sessions(c, resp) {
            Ok(()) => {}
            Err(e2e::E2eError::Db(e)) => return Err(e.into()),
            Err(e) => log::warn!("bot @{bot}: prekey bundles of user {} refused: {e}", resp.profile.user_id),
        }
    }
    Ok(())
}

/// Bundles of every recipient of an unsealed entry we know no device of, fetched once each.
pub(super) fn bundles_of_new_recipients(
    cx: &Ctx,
    entries: &[outbox::OutboxEntry],
) -> Result<Vec<GetPrekeyBundlesResponse>, SendError> {
    let peers: BTreeSet<u64> = entries.iter().filter(|e| e.sealed.is_none()).map(|e| e.chat_id as u64).collect();
    if peers.is_empty() {
        return Ok(Vec::new());
    }
    let unknown = cx.store.read(|c| {
        let mut unknown = Vec::new();
        for peer in peers {
            if e2e::known_devices(c, peer)?.is_empty() {
                unknown.push(peer);
            }
        }
        Ok(unknown)
    })?;
    unknown.into_iter().map(|peer| fetch_bundles(cx, peer, Vec::new())).collect()
}

/// Prekey bundles for `devices` of `peer` (all devices when empty).
pub(super) fn fetch_bundles(cx: &Ctx, peer: u64, devices: Vec<u32>) -> Result<GetPrekeyBundlesResponse, SendError> {
    let mut req = GetPrekeyBundlesRequest::new();
    req.user_id = peer;
    req.device_ids = devices;
    let resp = cx
        .port
        .get_prekey_bundles(&req)
        .map_err(|e| SendError::Platform(format!("prekey bundles of user {peer}: {e}")))?;
    if cx.on_identity_change == e2e::OnIdentityChange::Accept {
        accept_changed_identity(cx, &resp.profile)?;
    }
    Ok(resp)
}

/// With `accept_identity_changes`: a served identity key other than the pinned one is pinned in
/// its place (with a warning), so `add_sessions` starts sessions under it.
pub(super) fn accept_changed_identity(cx: &Ctx, profile: &Profile) -> Result<(), SendError> {
    let (user_id, Ok(served)) = (profile.user_id, <[u8; 32]>::try_from(profile.identity_key.as_slice())) else {
        return Ok(());
    };
    let pinned = cx.store.read(|c| Ok(e2e::leaf::pinned_identity(c, user_id)?))?;
    if pinned.is_some_and(|p| p != served) {
        log::warn!("bot @{}: user {user_id} now has another identity key; pinned it (accept_identity_changes)", cx.name);
        cx.store.write(move |c| Ok(e2e::leaf::repin_identity(c, user_id, &served)?))?;
    }
    Ok(())
}
