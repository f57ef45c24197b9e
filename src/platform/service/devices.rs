//! A device's keys: RegisterBotDevice (one more device of an existing bot account, proven by
//! the bot identity key), GetPrekeyBundles, GetDeviceCertificates, UploadPrekeys; and ListDevices (a bot's devices,
//! for a gateway to see the other runtimes of its bot).

use super::super::auth::Caller;
use super::super::convert::{
    bundle_to_wire, invalid, key32, one_time_prekeys, profile, removal_from_wire, removal_to_wire, sig64,
    verified_device, verified_signed_prekey,
};
use super::super::error::{PlatformError, Result};
use super::super::inbox::InboxHub;
use super::super::store::{CertificateV2, DeviceAddr, Removal, Store};
use crate::clock::unix_now;
use crate::crypto::identity;
use crate::wire::platform as pb;

/// How far a bot registration timestamp may be from the server clock, in seconds.
pub const REGISTRATION_WINDOW_SECS: i64 = 300;

pub(super) fn register_bot_device(
    store: &Store,
    caller: Caller,
    req: pb::RegisterBotDeviceRequest,
) -> Result<pb::RegisterBotDeviceResponse> {
    let bot_id = caller.user_id;
    let now = unix_now();
    let skew = req.timestamp.saturating_sub(now).saturating_abs();
    if skew > REGISTRATION_WINDOW_SECS {
        return Err(PlatformError::PermissionDenied(format!(
            "registration timestamp is {skew} s away from the server clock (at most {REGISTRATION_WINDOW_SECS} s allowed)"
        )));
    }
    let credential = store
        .bot_credential(bot_id)?
        .ok_or_else(|| PlatformError::Unauthenticated(crate::wire::rpc::TOKEN_REVOKED.into()))?;
    let keys = req.device.as_ref().ok_or_else(|| invalid("device is required"))?;
    let statement = identity::bot_registration_statement(bot_id, &keys.device_key, req.timestamp);
    if !identity::verify_signature(&credential.identity_key, &statement, &req.proof) {
        return Err(PlatformError::PermissionDenied(format!(
            "identity proof does not match this bot ({bot_id}): the recovery secret belongs to another bot"
        )));
    }
    let device = verified_device(&credential.identity_key, keys, || {
        PlatformError::PermissionDenied(format!(
            "identity proof does not match this bot ({bot_id}): the device certificate is not signed by its identity key"
        ))
    })?;
    let device_id = store.register_bot_device(bot_id, &device, now)?;
    log::info!("registered device {device_id} of bot {bot_id}");
    Ok(pb::RegisterBotDeviceResponse { bot_user_id: bot_id, device_id, ..Default::default() })
}

pub(super) fn get_prekey_bundles(
    store: &Store,
    req: pb::GetPrekeyBundlesRequest,
) -> Result<pb::GetPrekeyBundlesResponse> {
    let account = store
        .account_by_id(req.user_id)?
        .ok_or_else(|| PlatformError::NotFound(format!("no user with id {}", req.user_id)))?;
    let bundles = store.take_prekey_bundles(req.user_id, &req.device_ids)?;
    let removals = store.signed_removals(req.user_id)?;
    Ok(pb::GetPrekeyBundlesResponse {
        profile: Some(profile(account)).into(),
        bundles: bundles.into_iter().map(bundle_to_wire).collect(),
        removals: removals.into_iter().map(removal_to_wire).collect(),
        ..Default::default()
    })
}

pub(super) fn upload_prekeys(
    store: &Store,
    addr: DeviceAddr,
    req: pb::UploadPrekeysRequest,
) -> Result<pb::UploadPrekeysResponse> {
    let keys = one_time_prekeys(&req.one_time_prekeys)?;
    let signed_prekey = match req.signed_prekey.as_ref() {
        None => None,
        Some(spk) => {
            let device = store.device(addr)?.ok_or_else(|| {
                PlatformError::NotFound(format!("no device {} of user {}", addr.device_id, addr.user_id))
            })?;
            let device_key = key32(&device.device_key, "stored device key")?;
            Some(verified_signed_prekey(&device_key, spk)?)
        }
    };
    let remaining = store.upload_prekeys(addr, &keys, signed_prekey.as_ref(), req.replace_one_time_prekeys)?;
    Ok(pb::UploadPrekeysResponse { one_time_prekeys_remaining: remaining, server_time: crate::clock::unix_now(), ..Default::default() })
}

/// The caller's bot's devices, each with whether it holds an Inbox stream now.
pub(super) fn list_devices(store: &Store, hub: &InboxHub, caller: Caller) -> Result<pb::ListDevicesResponse> {
    if !caller.is_bot {
        return Err(PlatformError::PermissionDenied("ListDevices is for bot runtimes (a bot token)".into()));
    }
    let devices = store
        .account_devices(caller.user_id)?
        .into_iter()
        .map(|d| pb::BotDevice {
            device_id: d.device_id,
            registered_at: d.registered_at,
            last_seen: d.last_seen.unwrap_or(0),
            connected: hub.is_connected(DeviceAddr { user_id: caller.user_id, device_id: d.device_id }),
            active: d.active,
            removed_at: d.removed_at.unwrap_or(0),
            device_key: d.device_key,
            removal_signed: d.removal_signed,
            ..Default::default()
        })
        .collect();
    Ok(pb::ListDevicesResponse { devices, ..Default::default() })
}

/// CertifyDevice: the caller's device's second-version certificate, checked against the
/// account identity key, the caller's ids and the stored device key before it is stored.
pub(super) fn certify_device(store: &Store, addr: DeviceAddr, req: pb::CertifyDeviceRequest) -> Result<pb::CertifyDeviceResponse> {
    let certificate = req.certificate.as_ref().ok_or_else(|| invalid("certificate is required"))?;
    let signature = sig64(&certificate.signature, "certificate.signature")?;
    let account = store
        .account_by_id(addr.user_id)?
        .ok_or_else(|| PlatformError::NotFound(format!("no user with id {}", addr.user_id)))?;
    let device = store
        .device(addr)?
        .ok_or_else(|| PlatformError::NotFound(format!("no device {} of user {}", addr.device_id, addr.user_id)))?;
    let binding = identity::DeviceBinding { user_id: addr.user_id, device_id: addr.device_id, created_at: certificate.created_at };
    if identity::verify_device_certificate_v2(&account.identity_key, &device.device_key, binding, &signature).is_err() {
        return Err(PlatformError::PermissionDenied(format!(
            "the certificate of device {} of user {} is not the account identity key's signature over this device",
            addr.device_id, addr.user_id
        )));
    }
    store.certify_device(addr, &CertificateV2 { created_at: certificate.created_at, signature })?;
    Ok(pb::CertifyDeviceResponse::default())
}

/// RemoveDevice: a bot runtime's signed removal of a device of its bot, checked against the
/// bot's identity key and the stored device key; the device is removed if still active.
pub(super) fn remove_device(store: &Store, hub: &InboxHub, caller: Caller, req: pb::RemoveDeviceRequest) -> Result<pb::RemoveDeviceResponse> {
    if !caller.is_bot {
        return Err(PlatformError::PermissionDenied("RemoveDevice is for bot runtimes (a bot token)".into()));
    }
    let removal = removal_from_wire(req.removal.as_ref().ok_or_else(|| invalid("removal is required"))?)?;
    let addr = DeviceAddr { user_id: caller.user_id, device_id: removal.device_id };
    let account = store
        .account_by_id(caller.user_id)?
        .ok_or_else(|| PlatformError::NotFound(format!("no user with id {}", caller.user_id)))?;
    let device = store
        .device(addr)?
        .ok_or_else(|| PlatformError::NotFound(format!("no device {} of bot {}", removal.device_id, caller.user_id)))?;
    let identity_key = key32(&account.identity_key, "stored identity key")?;
    let statement =
        identity::device_removal_statement(&identity_key, caller.user_id, removal.device_id, &removal.device_key, removal.removed_at);
    if device.device_key.as_slice() != removal.device_key.as_slice()
        || !identity::verify_signature(&identity_key, &statement, &removal.signature)
    {
        return Err(PlatformError::PermissionDenied(format!(
            "the removal of device {} of bot {} is not the bot identity's signature over that device",
            removal.device_id, caller.user_id
        )));
    }
    let outcome = store.remove_device_signed(caller.user_id, &removal, unix_now())?;
    hub.remove_device(addr);
    log::info!("device {} of bot {} removed, its removal signed by the bot", removal.device_id, caller.user_id);
    Ok(pb::RemoveDeviceResponse { already_removed: outcome == Removal::AlreadyRemoved, ..Default::default() })
}
