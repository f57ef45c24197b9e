//! Wire ↔ store conversions and the checks on keys that arrive from outside: key and signature
//! lengths, device certificates, signed prekey signatures, the one-time prekey bound.
//!
//! Shared by the gRPC service (`service`) and the management bot (`manager`), which registers
//! its own device and starts sessions from stored bundles without going through gRPC, so both
//! apply the same checks and build the same wire shapes.

use super::error::{PlatformError, Result};
use super::store::{Account, Bundle, CertificateV2, NewDevice, SignedPrekey, SignedRemoval, Store};
use crate::crypto::identity;
use crate::wire::platform as pb;

/// Most one-time prekeys accepted in one request.
pub const PREKEYS_PER_REQUEST_MAX: usize = 1000;

/// A malformed or out-of-range request field.
pub(super) fn invalid(msg: impl Into<String>) -> PlatformError {
    PlatformError::InvalidArgument(msg.into())
}

pub(super) fn key32(bytes: &[u8], what: &str) -> Result<[u8; 32]> {
    bytes.try_into().map_err(|_| invalid(format!("{what} must be 32 bytes, got {}", bytes.len())))
}

pub(super) fn sig64(bytes: &[u8], what: &str) -> Result<[u8; 64]> {
    bytes.try_into().map_err(|_| invalid(format!("{what} must be 64 bytes, got {}", bytes.len())))
}

/// Checks a signed prekey's shape and its signature by the device key (over
/// `crypto::prekeys::signed_prekey_statement`, the same check X3DH initiators make).
pub(super) fn verified_signed_prekey(device_key: &[u8; 32], spk: &pb::SignedPrekey) -> Result<SignedPrekey> {
    let public_key = key32(&spk.public_key, "signed prekey public_key")?;
    let signature = sig64(&spk.signature, "signed prekey signature")?;
    if crate::crypto::prekeys::verify_signed_prekey(device_key, &public_key, &signature).is_err() {
        return Err(invalid(format!("signed prekey {} is not signed by the device key", spk.id)));
    }
    Ok(SignedPrekey { id: spk.id, public_key, signature })
}

/// Checks one-time prekeys: at most `PREKEYS_PER_REQUEST_MAX`, each key 32 bytes.
pub(super) fn one_time_prekeys(keys: &[pb::OneTimePrekey]) -> Result<Vec<(u32, [u8; 32])>> {
    if keys.len() > PREKEYS_PER_REQUEST_MAX {
        return Err(invalid(format!(
            "{} one-time prekeys in one request; the limit is {PREKEYS_PER_REQUEST_MAX}",
            keys.len()
        )));
    }
    keys.iter().map(|k| Ok((k.id, key32(&k.public_key, &format!("one-time prekey {}", k.id))?))).collect()
}

/// Checks a device's keys: lengths, the certificate by the account identity key (a failure
/// becomes `bad_certificate`), and the signed prekey's signature.
pub(super) fn verified_device(
    identity_key: &[u8],
    keys: &pb::DeviceKeys,
    bad_certificate: impl FnOnce() -> PlatformError,
) -> Result<NewDevice> {
    let device_key = key32(&keys.device_key, "device_key")?;
    let certificate = sig64(&keys.device_certificate, "device_certificate")?;
    if identity::verify_device_certificate(identity_key, &device_key, &certificate).is_err() {
        return Err(bad_certificate());
    }
    let spk = keys.signed_prekey.as_ref().ok_or_else(|| invalid("device.signed_prekey is required"))?;
    let signed_prekey = verified_signed_prekey(&device_key, spk)?;
    let one_time_prekeys = one_time_prekeys(&keys.one_time_prekeys)?;
    Ok(NewDevice { device_key, certificate, signed_prekey, one_time_prekeys })
}

/// The public profile of an account (what LookupUser answers).
pub(super) fn profile(a: Account) -> pb::Profile {
    pb::Profile {
        user_id: a.id,
        username: a.username,
        display_name: a.display_name,
        is_bot: a.is_bot,
        identity_key: a.identity_key,
        ..Default::default()
    }
}

/// A stored prekey bundle as sent on the wire.
pub(super) fn bundle_to_wire(b: Bundle) -> pb::PrekeyBundle {
    pb::PrekeyBundle {
        device_id: b.device_id,
        device_key: b.device_key,
        device_certificate: b.certificate,
        signed_prekey: Some(pb::SignedPrekey {
            id: b.signed_prekey.id,
            public_key: b.signed_prekey.public_key.to_vec(),
            signature: b.signed_prekey.signature.to_vec(),
            ..Default::default()
        })
        .into(),
        one_time_prekey: b
            .one_time_prekey
            .map(|(id, key)| pb::OneTimePrekey { id, public_key: key.to_vec(), ..Default::default() })
            .into(),
        certificate_v2: b.certificate_v2.map(certificate_v2_to_wire).into(),
        ..Default::default()
    }
}

pub(super) fn certificate_v2_to_wire(c: CertificateV2) -> pb::DeviceCertificateV2 {
    pb::DeviceCertificateV2 { created_at: c.created_at, signature: c.signature.to_vec(), ..Default::default() }
}

pub(super) fn removal_to_wire(r: SignedRemoval) -> pb::DeviceRemoval {
    pb::DeviceRemoval {
        device_id: r.device_id,
        device_key: r.device_key.to_vec(),
        removed_at: r.removed_at,
        signature: r.signature.to_vec(),
        ..Default::default()
    }
}

/// A signed removal as it arrives: lengths checked, the signature not yet.
pub(super) fn removal_from_wire(r: &pb::DeviceRemoval) -> Result<SignedRemoval> {
    Ok(SignedRemoval {
        device_id: r.device_id,
        device_key: key32(&r.device_key, "removal.device_key")?,
        removed_at: r.removed_at,
        signature: sig64(&r.signature, "removal.signature")?,
    })
}

/// Most device ids one GetDeviceCertificates may name (an account has a handful).
pub const MAX_CERTIFICATES_PER_CALL: usize = 64;

/// GetDeviceCertificates, for the service and for the management bot (which reads the store
/// directly).
pub(super) fn device_certificates(
    store: &Store,
    req: pb::GetDeviceCertificatesRequest,
) -> Result<pb::GetDeviceCertificatesResponse> {
    if req.device_ids.is_empty() || req.device_ids.len() > MAX_CERTIFICATES_PER_CALL {
        return Err(invalid(format!(
            "device_ids must name 1 to {MAX_CERTIFICATES_PER_CALL} devices (got {})",
            req.device_ids.len()
        )));
    }
    let account = store
        .account_by_id(req.user_id)?
        .ok_or_else(|| PlatformError::NotFound(format!("no user with id {}", req.user_id)))?;
    let devices = store
        .device_certificates(req.user_id, &req.device_ids)?
        .into_iter()
        .map(|d| pb::DeviceCertificate {
            device_id: d.device_id,
            device_key: d.device_key,
            device_certificate: d.certificate,
            certificate_v2: d.certificate_v2.map(certificate_v2_to_wire).into(),
            removal: d.removal.map(removal_to_wire).into(),
            ..Default::default()
        })
        .collect();
    Ok(pb::GetDeviceCertificatesResponse { profile: Some(profile(account)).into(), devices, ..Default::default() })
}
