//! What keeps a bot device's keys and groups up, beside its inbox: the signed prekey's
//! rotation (checked at start and hourly), one-time prekeys topped up, and the hourly upkeep.

use std::time::{Duration, Instant};

use crate::e2e;
use crate::gateway::groups;
use crate::gateway::port::StepError;
use crate::gateway::ctx::Ctx;
use crate::wire::platform::UploadPrekeysRequest;

/// After this many prekey messages, ask the platform how many one-time prekeys remain.
pub(super) const PREKEY_CHECK_EVERY: u32 = 20;
/// How often `in/<n>` asks whether the signed prekey is due; it wakes for this when no
/// envelope arrives.
const SIGNED_PREKEY_CHECK_EVERY: Duration = Duration::from_secs(3600);

/// The hourly upkeep beside the signed prekey's: one-time prekeys topped up (and the clock
/// compared with the platform's); skipped message keys older than 30 days deleted; in groups,
/// key packages replaced before they age; devices the owner removed since get their removal
/// signed. (`in/<n>` runs the timed group checks after it, `follow_up::checks`.)
pub(super) fn hourly_upkeep(cx: &Ctx) {
    // Tops up what a quiet inbox never triggers, and its answer says the platform's time.
    if let Err(e) = replenish_prekeys(cx) {
        log::warn!("bot @{}: one-time prekey top-up failed: {e}", cx.name);
    }
    let now = crate::clock::unix_now();
    match cx.store.write(move |c| Ok(e2e::expire_skipped_keys(c, now)?)) {
        Ok(0) => {}
        Ok(n) => log::info!("bot @{}: deleted the skipped message keys older than 30 days of {n} sessions", cx.name),
        Err(e) => log::warn!("bot @{}: deleting old skipped message keys: {e}", cx.name),
    }
    groups::keep_key_packages(cx);
    let at = format!("bot @{}", cx.name);
    crate::gateway::registration::sign_new_removals(&*cx.port, &cx.store, &cx.identity, cx.user_id, &at);
}


/// Tops the platform's stock of this device's one-time prekeys back up. A state restored from
/// a backup replaces the whole stock first: the platform may hold keys this device made after
/// the backup, whose secrets it no longer has (`store::backup::prepare_restored`).
pub fn replenish_prekeys(cx: &Ctx) -> Result<(), StepError> {
    use crate::gateway::store::backup::RESTORED_FROM_BACKUP;
    let p = &cx.port;
    if cx.store.meta(RESTORED_FROM_BACKUP)?.is_some() {
        let fresh = cx.store.write(move |c| Ok(e2e::replenish_one_time_prekeys(c, 0)?))?;
        let req = UploadPrekeysRequest { one_time_prekeys: fresh, replace_one_time_prekeys: true, ..Default::default() };
        let answer = p.upload_prekeys(&req).map_err(|e| StepError::platform("UploadPrekeys", e))?;
        cx.status.note_platform_time(&cx.name, answer.server_time, crate::clock::unix_now());
        cx.store.write(|c| Ok(crate::gateway::store::meta_delete(c, RESTORED_FROM_BACKUP)?))?;
        log::info!("bot @{}: restored from a backup: replaced the one-time prekeys the platform held for it", cx.name);
        return Ok(());
    }
    let answer = p.upload_prekeys(&UploadPrekeysRequest::new()).map_err(|e| StepError::platform("UploadPrekeys", e))?;
    cx.status.note_platform_time(&cx.name, answer.server_time, crate::clock::unix_now());
    let remaining = answer.one_time_prekeys_remaining;
    let fresh = cx.store.write(move |c| Ok(e2e::replenish_one_time_prekeys(c, remaining)?))?;
    if fresh.is_empty() {
        return Ok(());
    }
    let mut req = UploadPrekeysRequest::new();
    req.one_time_prekeys = fresh;
    p.upload_prekeys(&req).map_err(|e| StepError::platform("UploadPrekeys", e))?;
    Ok(())
}

/// The signed prekey of one bot device, rotated on `e2e::SignedPrekeySchedule::DEFAULT`
/// (docs/decisions.md, "Transport and state"): checked at start-up, then every
/// `SIGNED_PREKEY_CHECK_EVERY` by `in/<n>`. A new key is committed before it is
/// published, so the platform never serves a key this device does not hold; a publish that
/// failed is repeated at the next check.
pub struct SignedPrekeyUpkeep {
    pub(super) next_check: Instant,
    /// The newest key may not be what the platform serves: publish it at the next check.
    unpublished: bool,
}

impl SignedPrekeyUpkeep {
    /// The start-up check. It publishes the newest signed prekey even when none is due: a
    /// crash between a rotation's commit and its upload leaves nothing else to tell.
    pub fn at_start(cx: &Ctx) -> SignedPrekeyUpkeep {
        let mut upkeep = SignedPrekeyUpkeep { next_check: Instant::now(), unpublished: true };
        upkeep.check(cx);
        upkeep
    }

    pub(super) fn check(&mut self, cx: &Ctx) {
        self.next_check = Instant::now() + SIGNED_PREKEY_CHECK_EVERY;
        if cx.is_revoked() {
            return;
        }
        match rotate_signed_prekey(cx, self.unpublished) {
            Ok(()) => self.unpublished = false,
            Err(e) => {
                self.unpublished = true;
                log::warn!("bot @{}: signed prekey upkeep failed (tried again in {SIGNED_PREKEY_CHECK_EVERY:?}): {e}", cx.name);
            }
        }
    }
}

/// Replaces the signed prekey when it is due and publishes the new one; with `publish`, the
/// current one is published when none is due.
fn rotate_signed_prekey(cx: &Ctx, publish: bool) -> Result<(), StepError> {
    let schedule = e2e::SignedPrekeySchedule::DEFAULT;
    let due = cx.store.read(|c| Ok(e2e::signed_prekey_due(c, &schedule)?))?;
    let key = if due {
        cx.store.write(move |c| Ok(e2e::rotate_signed_prekey_if_due(c, &schedule)?))?
    } else {
        None
    };
    let key = match key {
        Some(fresh) => {
            log::info!("bot @{}: new signed prekey {}", cx.name, fresh.id);
            fresh
        }
        None if publish => cx.store.read(|c| Ok(e2e::current_signed_prekey(c)?))?,
        None => return Ok(()),
    };
    let mut req = UploadPrekeysRequest::new();
    req.signed_prekey = protobuf::MessageField::some(key);
    let answer = cx.port.upload_prekeys(&req).map_err(|e| StepError::platform("UploadPrekeys", e))?;
    cx.status.note_platform_time(&cx.name, answer.server_time, crate::clock::unix_now());
    Ok(())
}
