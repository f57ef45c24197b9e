//! Accounts and credentials: RegisterUser (a user account with its first device), LookupUser,
//! VerifyCredential.

use super::super::auth::Caller;
use super::super::convert::{invalid, key32, profile, verified_device};
use super::super::error::{PlatformError, Result};
use super::super::rules;
use super::super::store::Store;
use crate::clock::unix_now;
use crate::wire::platform as pb;

pub(super) fn register_user(store: &Store, req: pb::RegisterUserRequest) -> Result<pb::RegisterUserResponse> {
    rules::validate_username(&req.username)?;
    rules::validate_display_name(&req.display_name)?;
    let identity_key = key32(&req.identity_key, "identity_key")?;
    let keys = req.device.as_ref().ok_or_else(|| invalid("device is required"))?;
    let device =
        verified_device(&identity_key, keys, || invalid("device certificate is not signed by the given identity key"))?;
    let secret = crate::crypto::random_bytes::<32>();
    let addr = store.register_user(
        &req.username,
        &req.display_name,
        &identity_key,
        &device,
        &crate::crypto::digest(&secret),
        unix_now(),
    )?;
    log::info!("registered user {} (@{})", addr.user_id, req.username);
    Ok(pb::RegisterUserResponse {
        user_id: addr.user_id,
        device_id: addr.device_id,
        device_secret: secret.to_vec(),
        ..Default::default()
    })
}

pub(super) fn lookup_user(store: &Store, req: pb::LookupUserRequest) -> Result<pb::Profile> {
    let account = if !req.username.is_empty() {
        let name = rules::strip_at(req.username.trim());
        store.account_by_username(name)?.ok_or_else(|| PlatformError::NotFound(format!("no user @{name}")))?
    } else if req.user_id != 0 {
        store
            .account_by_id(req.user_id)?
            .ok_or_else(|| PlatformError::NotFound(format!("no user with id {}", req.user_id)))?
    } else {
        return Err(invalid("give a username or a user_id"));
    };
    Ok(profile(account))
}

/// Who the credential belongs to; a bot that gave no device id gets device 0.
pub(super) fn verify_credential(store: &Store, caller: Caller) -> Result<pb::VerifyCredentialResponse> {
    let account = store.account_by_id(caller.user_id)?;
    Ok(pb::VerifyCredentialResponse {
        user_id: caller.user_id,
        device_id: caller.device_id.unwrap_or(0),
        capabilities: account.filter(|a| a.is_bot).and_then(|a| a.capabilities).unwrap_or_default(),
        ..Default::default()
    })
}
