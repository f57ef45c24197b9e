//! The responder's check of a device that starts a session with this one (X3DH): before the
//! first message of a sender device this device has not recorded is opened, the caller fetches
//! that device's certificate (`GetDeviceCertificates`, which uses up no one-time prekey) and
//! hands it here. A device is recorded only when its certificate verifies under the account
//! identity key the platform serves, and that key is the one pinned for the user (or becomes
//! it, the first time). `open_envelope` starts no session with a device not recorded
//! (`E2eError::UnverifiedDevice`), so a caller that skips this step loses the message rather
//! than trusting a key nobody vouched for.

use std::collections::BTreeMap;

use rusqlite::Connection;

use super::leaf::{pin_identity, repin_identity, Pin};
use super::{store, Result};
use crate::crypto::{identity, x3dh};
use crate::wire::platform::{DeviceCertificateV2, GetDeviceCertificatesRequest, GetDeviceCertificatesResponse, InboxEnvelope};

/// Whether a private (not group) envelope starts a session: it carries an X3DH header. The
/// one test for the receivers (which count them to top up one-time prekeys, and check their
/// senders) and for `devices_to_certify`.
pub fn starts_session(envelope: &InboxEnvelope) -> bool {
    envelope.group.is_none() && matches!(x3dh::peek_prekey_header(&envelope.ciphertext), Ok(Some(_)))
}

/// The private (not group) envelopes that start a session from a sender device whose key this
/// device has not recorded: one request per sender user, naming those devices. Reads nothing
/// when no envelope starts a session (a group batch, a dialog under way).
pub fn devices_to_certify(conn: &Connection, envelopes: &[InboxEnvelope]) -> Result<Vec<GetDeviceCertificatesRequest>> {
    let mut wanted: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
    for env in envelopes.iter().filter(|e| starts_session(e)) {
        let (user_id, device_id) = (env.sender_user_id, env.sender_device_id);
        if wanted.get(&user_id).is_some_and(|d| d.contains(&device_id)) {
            continue;
        }
        if store::peer_device_key(conn, user_id, device_id)?.is_none() {
            wanted.entry(user_id).or_default().push(device_id);
        }
    }
    Ok(wanted
        .into_iter()
        .map(|(user_id, device_ids)| GetDeviceCertificatesRequest { user_id, device_ids, ..Default::default() })
        .collect())
}

/// What to do when the platform serves another identity key for a user than the pinned one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnIdentityChange {
    /// Record nothing: the user's new devices start no session until someone accepts the key.
    Refuse,
    /// Pin the served key and go on (a gateway configured so for its bot), with a warning.
    Accept,
}

/// Why a sender device was not recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Its certificate does not verify under the account identity key served with it: the
    /// platform made the device up, or damaged it. A security alert.
    BadCertificate,
    /// The account identity key served is not the one pinned for the user.
    IdentityChanged,
    /// The platform did not serve the device at all.
    NotServed,
    /// Its account removed it, or a device with its key, in a signed removal (`removals`).
    Removed,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refusal::BadCertificate => "its device certificate does not verify under the account's identity key",
            Refusal::IdentityChanged => "the platform serves another identity key for the user than the pinned one",
            Refusal::NotServed => "the platform serves no certificate for it",
            Refusal::Removed => "its account removed it (a removal signed by the account's identity key)",
        })
    }
}

/// What checking one answer came to: the devices recorded and the ones refused, with why.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Certified {
    pub user_id: u64,
    pub recorded: Vec<u32>,
    pub refused: Vec<(u32, Refusal)>,
    /// The served identity key differed from the pinned one and was pinned in its place
    /// (`OnIdentityChange::Accept`).
    pub repinned: bool,
}

/// Checks the platform's answer to `request` and records the devices that pass. Writes only
/// on the caller's connection (a pin, the device keys), in its transaction.
pub fn record_certified_devices(
    conn: &Connection,
    request: &GetDeviceCertificatesRequest,
    answer: &GetDeviceCertificatesResponse,
    on_change: OnIdentityChange,
) -> Result<Certified> {
    let user_id = request.user_id;
    let mut outcome = Certified { user_id, ..Default::default() };
    let identity_key = answer
        .profile
        .as_ref()
        .filter(|p| p.user_id == user_id)
        .and_then(|p| <[u8; 32]>::try_from(p.identity_key.as_slice()).ok());
    let Some(identity_key) = identity_key else {
        log::warn!("user {user_id}: the platform answered device certificates without the user's identity key");
        outcome.refused = request.device_ids.iter().map(|&d| (d, Refusal::NotServed)).collect();
        return Ok(outcome);
    };
    let removals: Vec<_> = answer.devices.iter().filter_map(|d| d.removal.as_ref().cloned()).collect();
    super::removals::record_removals(conn, user_id, &identity_key, &removals)?;
    let mut verified = Vec::new();
    for &device_id in &request.device_ids {
        match answer.devices.iter().find(|d| d.device_id == device_id) {
            None => outcome.refused.push((device_id, Refusal::NotServed)),
            Some(d) if super::store::is_removed(conn, user_id, device_id, &d.device_key)? => {
                outcome.refused.push((device_id, Refusal::Removed));
            }
            Some(d) if !certificate_holds(&identity_key, user_id, device_id, &d.device_key, &d.device_certificate, d.certificate_v2.as_ref()) => {
                log::warn!("user {user_id} device {device_id}: its certificate does not verify under the account's identity key");
                outcome.refused.push((device_id, Refusal::BadCertificate));
            }
            Some(d) => verified.push((device_id, d.device_key.clone())),
        }
    }
    if verified.is_empty() {
        return Ok(outcome);
    }
    if let Pin::Changed { .. } = pin_identity(conn, user_id, &identity_key)? {
        match on_change {
            OnIdentityChange::Refuse => {
                log::warn!("user {user_id}: the platform serves another identity key than the pinned one; their new devices are refused");
                outcome.refused.extend(verified.iter().map(|(d, _)| (*d, Refusal::IdentityChanged)));
                return Ok(outcome);
            }
            OnIdentityChange::Accept => {
                log::warn!("user {user_id}: the platform serves another identity key than the pinned one; accepted by configuration");
                repin_identity(conn, user_id, &identity_key)?;
                outcome.repinned = true;
            }
        }
    }
    for (device_id, device_key) in verified {
        // Recorded meanwhile (we started a session with it): the recorded key stays, and
        // `open_envelope` refuses a first message under another one.
        if store::peer_device_key(conn, user_id, device_id)?.is_none() {
            store::upsert_peer_device(conn, user_id, device_id, &device_key)?;
        }
        outcome.recorded.push(device_id);
    }
    Ok(outcome)
}

/// Whether the account identity key vouches for `device_key` as device `device_id` of
/// `user_id`: by the second-version certificate when the platform serves one (it must then
/// verify, bound to that user and device), else by the first version, still read for devices
/// that have not given a second one (docs/security.md, "Device certificates").
pub(super) fn certificate_holds(
    identity_key: &[u8],
    user_id: u64,
    device_id: u32,
    device_key: &[u8],
    certificate_v1: &[u8],
    certificate_v2: Option<&DeviceCertificateV2>,
) -> bool {
    match certificate_v2 {
        Some(v2) => {
            let binding = identity::DeviceBinding { user_id, device_id, created_at: v2.created_at };
            identity::verify_device_certificate_v2(identity_key, device_key, binding, &v2.signature).is_ok()
        }
        None => identity::verify_device_certificate(identity_key, device_key, certificate_v1).is_ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::testing::{open_text, Device};
    use super::super::{add_sessions, open_envelope, E2eError};

    #[test]
    fn a_first_message_opens_only_from_a_device_whose_certificate_verifies() {
        let alice = Device::new(1, 1);
        let bob = Device::new(2, 1);
        add_sessions(&alice.conn, &bob.profile(), &[bob.bundle(Some(0))]).expect("session");
        let first = alice.seal_only(&bob, "hello");

        // Unchecked: no session starts.
        assert!(matches!(
            open_envelope(&bob.conn, &first),
            Err(E2eError::UnverifiedDevice { user_id: 1, device_id: 1 })
        ));
        let wanted = devices_to_certify(&bob.conn, std::slice::from_ref(&first)).expect("wanted");
        assert_eq!(wanted.len(), 1);
        assert_eq!((wanted[0].user_id, wanted[0].device_ids.clone()), (1, vec![1]));

        // A certificate by another account (the platform made the device up): refused.
        let mallory = Device::new(1, 1);
        let mut forged = alice.certificates();
        forged.devices[0].device_certificate = mallory.keys.device_certificate.clone();
        let outcome = record_certified_devices(&bob.conn, &wanted[0], &forged, OnIdentityChange::Refuse).expect("check");
        assert_eq!(outcome.refused, vec![(1, Refusal::BadCertificate)]);
        assert!(open_envelope(&bob.conn, &first).is_err(), "still refused");

        // A device the platform does not serve.
        let mut empty = alice.certificates();
        empty.devices.clear();
        let outcome = record_certified_devices(&bob.conn, &wanted[0], &empty, OnIdentityChange::Refuse).expect("check");
        assert_eq!(outcome.refused, vec![(1, Refusal::NotServed)]);

        // The real certificate: recorded, and the message opens.
        let outcome =
            record_certified_devices(&bob.conn, &wanted[0], &alice.certificates(), OnIdentityChange::Refuse).expect("check");
        assert_eq!(outcome.recorded, vec![1]);
        assert_eq!(open_text(&bob, &first), "hello");
        assert!(devices_to_certify(&bob.conn, &[first]).expect("wanted").is_empty(), "known now");
    }

    #[test]
    fn a_changed_identity_key_records_nothing_unless_accepted() {
        let alice = Device::new(1, 1);
        let bob = Device::new(2, 1);
        bob.introduce(&alice);
        // Alice's account comes back under another identity key with a new device.
        let alice2 = Device::new(1, 2);
        add_sessions(&alice2.conn, &bob.profile(), &[bob.bundle(Some(0))]).expect("session");
        let first = alice2.seal_only(&bob, "it is me");
        let wanted = devices_to_certify(&bob.conn, std::slice::from_ref(&first)).expect("wanted");
        let refused = record_certified_devices(&bob.conn, &wanted[0], &alice2.certificates(), OnIdentityChange::Refuse)
            .expect("check");
        assert_eq!(refused.refused, vec![(2, Refusal::IdentityChanged)]);
        assert!(open_envelope(&bob.conn, &first).is_err());

        let accepted = record_certified_devices(&bob.conn, &wanted[0], &alice2.certificates(), OnIdentityChange::Accept)
            .expect("check");
        assert_eq!((accepted.recorded.clone(), accepted.repinned), (vec![2], true));
        assert_eq!(open_text(&bob, &first), "it is me");
    }

    #[test]
    fn a_removed_or_relabelled_sender_device_is_not_recorded() {
        let alice = Device::new(1, 2);
        let bob = Device::new(2, 1);
        let key: [u8; 32] = alice.keys.device_key.as_slice().try_into().expect("32");
        let request = GetDeviceCertificatesRequest { user_id: 1, device_ids: vec![2], ..Default::default() };
        // A second-version certificate made for device 7 and served for device 2.
        let mut relabelled = alice.certificates();
        let binding = identity::DeviceBinding { user_id: 1, device_id: 7, created_at: 5 };
        relabelled.devices[0].certificate_v2 = protobuf::MessageField::some(DeviceCertificateV2 {
            created_at: 5,
            signature: identity::sign_device_certificate_v2(&alice.account, &key, binding).to_vec(),
            ..Default::default()
        });
        let outcome = record_certified_devices(&bob.conn, &request, &relabelled, OnIdentityChange::Refuse).expect("check");
        assert_eq!(outcome.refused, vec![(2, Refusal::BadCertificate)]);
        // The account's signed removal of device 2, served with its certificate.
        let mut removed = alice.certificates();
        removed.devices[0].removal = protobuf::MessageField::some(super::super::removals::signed_removal(&alice.account, 1, 2, &key, 9));
        let outcome = record_certified_devices(&bob.conn, &request, &removed, OnIdentityChange::Refuse).expect("check");
        assert_eq!(outcome.refused, vec![(2, Refusal::Removed)]);
        // Served again without it: still refused.
        let outcome = record_certified_devices(&bob.conn, &request, &alice.certificates(), OnIdentityChange::Refuse).expect("check");
        assert_eq!(outcome.refused, vec![(2, Refusal::Removed)]);
    }
}
