//! Sending: sessions with peer devices (started from prekey bundles), sealing a message for
//! them, and mending a send the platform refused as stale.

use rusqlite::Connection;

use super::device::device_key;
use super::{store, E2eError, Result};
use crate::crypto::x3dh;
use crate::crypto::{CryptoError, Session};
use crate::wire::e2e::Content;
use crate::wire::platform::{DeviceCiphertext, GetPrekeyBundlesResponse, PrekeyBundle, Profile};

/// Devices of `peer_user` we know of (from bundles or received messages).
pub fn known_devices(conn: &Connection, peer_user: u64) -> Result<Vec<u32>> {
    Ok(store::peer_devices(conn, peer_user)?)
}

/// Devices of `peer_user` we know of and hold a session with (the ones `seal` encrypts for).
pub fn devices_with_session(conn: &Connection, peer_user: u64) -> Result<Vec<u32>> {
    Ok(store::devices_with_session(conn, peer_user)?)
}

/// Verifies each bundle's device certificate against `peer.identity_key`, starts sessions
/// (X3DH initiator) and records the devices. Replaces an existing session for the same device.
///
/// All bundles are checked before anything is written: one bad certificate, a device key that
/// differs from the one recorded for that device, or a bad signed prekey fails the whole call.
pub fn add_sessions(conn: &Connection, peer: &Profile, bundles: &[PrekeyBundle]) -> Result<()> {
    let own = device_key(conn)?;
    let mut started = Vec::with_capacity(bundles.len());
    for b in bundles {
        let (user_id, device_id) = (peer.user_id, b.device_id);
        if super::store::is_removed(conn, user_id, device_id, &b.device_key)? {
            log::warn!("user {user_id} device {device_id}: served again after its account removed it (signed); refused");
            return Err(E2eError::RemovedDevice { user_id, device_id });
        }
        let v2 = b.certificate_v2.as_ref();
        if !super::certify::certificate_holds(&peer.identity_key, user_id, device_id, &b.device_key, &b.device_certificate, v2) {
            log::warn!("device certificate of user {user_id} device {device_id} does not verify");
            return Err(E2eError::BadCertificate { user_id, device_id });
        }
        if let Some(recorded) = store::peer_device_key(conn, user_id, device_id)? {
            if recorded != b.device_key {
                log::warn!("bundle of user {user_id} device {device_id} has a key other than the recorded one");
                return Err(E2eError::DeviceKeyChanged { user_id, device_id });
            }
        }
        let bundle = crypto_bundle(b)?;
        let session = x3dh::initiate_session(&own, &bundle)?;
        started.push((device_id, bundle.device_key, session));
    }
    // Every certificate verified under the served identity key: it must be the pinned one (or
    // becomes it, the first time).
    if let Ok(identity_key) = <[u8; 32]>::try_from(peer.identity_key.as_slice()) {
        if let super::leaf::Pin::Changed { .. } = super::leaf::pin_identity(conn, peer.user_id, &identity_key)? {
            log::warn!("user {}: the platform serves another identity key than the pinned one; no session started", peer.user_id);
            return Err(E2eError::IdentityChanged { user_id: peer.user_id });
        }
    }
    for (device_id, device_key, session) in started {
        // A session that only receives (a restored state's) is not kept as the previous: a
        // peer's message on it would promote it back to sending, on keys used before.
        let demoted = store::sending_sessions(conn, peer.user_id, device_id)?.map(|(current, _)| current);
        store::upsert_peer_device(conn, peer.user_id, device_id, &device_key)?;
        store::put_sessions(conn, peer.user_id, device_id, &session.to_bytes(), demoted.as_deref().map(Vec::as_slice))?;
        store::sends_again(conn, peer.user_id, device_id)?;
    }
    Ok(())
}

/// `add_sessions` for a whole `GetPrekeyBundles` answer: the signed removals it carries are
/// checked and recorded first (`removals`), so a device its account removed is refused.
pub fn start_sessions(conn: &Connection, answer: &GetPrekeyBundlesResponse) -> Result<()> {
    let peer = answer.profile.get_or_default();
    super::removals::record_removals(conn, peer.user_id, &peer.identity_key, &answer.removals)?;
    add_sessions(conn, peer, &answer.bundles)
}

/// The crypto view of a wire bundle; length checks here, signature checks in `x3dh`.
fn crypto_bundle(b: &PrekeyBundle) -> Result<x3dh::PrekeyBundle> {
    let signed = b
        .signed_prekey
        .as_ref()
        .ok_or(CryptoError::Malformed("prekey bundle without a signed prekey"))?;
    let one_time_prekey = match b.one_time_prekey.as_ref() {
        Some(p) => Some((p.id, key32(&p.public_key, "one-time prekey")?)),
        None => None,
    };
    Ok(x3dh::PrekeyBundle {
        device_key: key32(&b.device_key, "device key")?,
        signed_prekey_id: signed.id,
        signed_prekey: key32(&signed.public_key, "signed prekey")?,
        signed_prekey_signature: signed.signature.clone(),
        one_time_prekey,
    })
}

pub(super) fn key32(bytes: &[u8], what: &'static str) -> Result<[u8; 32]> {
    Ok(bytes.try_into().map_err(|_| CryptoError::InvalidKey(what))?)
}

/// Forgets devices the platform reported as removed (their sessions too).
pub fn remove_devices(conn: &Connection, peer_user: u64, device_ids: &[u32]) -> Result<()> {
    for &device_id in device_ids {
        store::delete_peer_device(conn, peer_user, device_id)?;
    }
    Ok(())
}

/// The devices among `device_ids` we hold no session with: the ones whose prekey bundles a
/// sender must fetch (and pass to `add_sessions`) before `reseal_after_stale`.
pub fn devices_without_session(conn: &Connection, peer_user: u64, device_ids: &[u32]) -> Result<Vec<u32>> {
    let have = store::devices_with_session(conn, peer_user)?;
    Ok(device_ids.iter().copied().filter(|d| !have.contains(d)).collect())
}

/// The one way every sender (gateway outbox, user client, management bot) mends a message the
/// platform refused with STALE_DEVICES, keeping the ciphertexts it already committed for the
/// devices that did not change: forgets the `removed` devices, drops their ciphertexts, and
/// adds ciphertexts for the `missing` devices we now hold a session with. A missing device
/// still without a session (its bundle was not served or did not verify) is left out; the
/// platform names it again on the next send, and the sender's round limit ends that.
/// Returns the missing devices left out.
pub fn reseal_after_stale(
    conn: &Connection,
    peer_user: u64,
    ciphertexts: &mut Vec<DeviceCiphertext>,
    missing: &[u32],
    removed: &[u32],
    content: &Content,
) -> Result<Vec<u32>> {
    remove_devices(conn, peer_user, removed)?;
    ciphertexts.retain(|ct| !removed.contains(&ct.device_id) && !missing.contains(&ct.device_id));
    let left_out = devices_without_session(conn, peer_user, missing)?;
    let ready: Vec<u32> = missing.iter().copied().filter(|d| !left_out.contains(d)).collect();
    ciphertexts.extend(seal_for(conn, peer_user, &ready, content)?);
    Ok(left_out)
}

/// Encrypts `content` once for every known device of `peer_user`, storing advanced sessions.
/// Commit this transaction before sending the ciphertexts: if the state were rolled back after a
/// send, the next `seal` would use the same message keys for a different plaintext.
/// Devices without a session are skipped; an empty result means no session at all yet.
pub fn seal(conn: &Connection, peer_user: u64, content: &Content) -> Result<Vec<DeviceCiphertext>> {
    let devices = store::devices_with_session(conn, peer_user)?;
    seal_for(conn, peer_user, &devices, content)
}

/// Encrypts `content` for the given devices of `peer_user` only (say the ones a send was
/// missing), storing advanced sessions. A device without a session is `NoSession`.
pub fn seal_for(conn: &Connection, peer_user: u64, device_ids: &[u32], content: &Content) -> Result<Vec<DeviceCiphertext>> {
    let plaintext = super::padding::padded_bytes(content);
    let mut sealed = Vec::with_capacity(device_ids.len());
    let mut advanced = Vec::with_capacity(device_ids.len());
    for &device_id in device_ids {
        let (current, previous) =
            store::sending_sessions(conn, peer_user, device_id)?.ok_or(E2eError::NoSession { user_id: peer_user, device_id })?;
        let mut session = Session::from_bytes(&current)?;
        let mut ct = DeviceCiphertext::new();
        ct.device_id = device_id;
        ct.ciphertext = session.encrypt(&plaintext);
        sealed.push(ct);
        advanced.push((device_id, session.to_bytes(), previous));
    }
    for (device_id, session, previous) in advanced {
        store::put_sessions(conn, peer_user, device_id, &session, previous.as_deref().map(Vec::as_slice))?;
    }
    Ok(sealed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::testing::{open_text, Device};
    use crate::crypto::identity;
    use super::super::text_content;
    use crate::crypto::IdentityKeyPair;

    #[test]
    fn bad_certificate_is_refused_and_nothing_recorded() {
        let alice = Device::new(1, 1);
        let bob = Device::new(2, 1);
        let other_account = IdentityKeyPair::generate();
        let mut bundle = bob.bundle(Some(0));
        let device_key = key32(&bundle.device_key, "device key").expect("32 bytes");
        bundle.device_certificate = identity::sign_device_certificate(&other_account, &device_key).to_vec();
        match add_sessions(&alice.conn, &bob.profile(), &[bob.bundle(Some(1)), bundle]) {
            Err(E2eError::BadCertificate { user_id: 2, device_id: 1 }) => {}
            other => panic!("expected BadCertificate, got {other:?}"),
        }
        assert!(known_devices(&alice.conn, 2).expect("known").is_empty());
        assert!(seal(&alice.conn, 2, &text_content("x")).expect("seal").is_empty());

        // A truncated certificate too.
        let mut short = bob.bundle(None);
        short.device_certificate.truncate(10);
        assert!(matches!(add_sessions(&alice.conn, &bob.profile(), &[short]), Err(E2eError::BadCertificate { .. })));
        assert_eq!(crate::e2e::leaf::pinned_identity(&alice.conn, 2).expect("read"), None, "nothing pinned either");
    }

    #[test]
    fn another_identity_key_for_a_known_user_starts_no_session_until_trusted() {
        let alice = Device::new(1, 1);
        let bob = Device::new(2, 1);
        add_sessions(&alice.conn, &bob.profile(), &[bob.bundle(Some(0))]).expect("first contact pins bob's key");
        let pinned = crate::e2e::leaf::pinned_identity(&alice.conn, 2).expect("read").expect("pinned");
        assert_eq!(pinned.to_vec(), bob.profile().identity_key);
        // The platform now serves a device of another account as bob's.
        let impostor = Device::new(2, 2);
        match add_sessions(&alice.conn, &impostor.profile(), &[impostor.bundle(Some(0))]) {
            Err(E2eError::IdentityChanged { user_id: 2 }) => {}
            other => panic!("expected IdentityChanged, got {other:?}"),
        }
        assert_eq!(known_devices(&alice.conn, 2).expect("known"), vec![1], "no session with the impostor");
        // The person accepts the change: from then on the new key is the pinned one.
        let new_key: [u8; 32] = impostor.profile().identity_key.try_into().expect("32 bytes");
        crate::e2e::leaf::repin_identity(&alice.conn, 2, &new_key).expect("trust");
        add_sessions(&alice.conn, &impostor.profile(), &[impostor.bundle(Some(0))]).expect("accepted now");
        assert_eq!(known_devices(&alice.conn, 2).expect("known"), vec![1, 2]);
    }

    #[test]
    fn a_restored_state_receives_on_its_sessions_and_sends_only_on_new_ones() {
        let bot = Device::new(1, 1);
        let bob = Device::new(2, 1);
        add_sessions(&bot.conn, &bob.profile(), &[bob.bundle(Some(0))]).expect("session");
        let first = seal(&bot.conn, 2, &text_content("before the backup")).expect("seal");
        bob.introduce(&bot);
        assert_eq!(open_text(&bob, &bot.envelope(first[0].ciphertext.clone())), "before the backup");

        assert_eq!(crate::e2e::sessions_receive_only_after_restore(&bot.conn).expect("restored"), 1);
        assert!(seal(&bot.conn, 2, &text_content("x")).expect("seal").is_empty(), "no session to send on");
        assert!(matches!(seal_for(&bot.conn, 2, &[1], &text_content("x")), Err(E2eError::NoSession { .. })));
        assert_eq!(devices_without_session(&bot.conn, 2, &[1]).expect("without"), vec![1], "its bundle is fetched");
        // Bob's next message on the old session still opens.
        let reply = bob.send(&bot, "still there?");
        assert_eq!(open_text(&bot, &reply), "still there?");
        assert!(seal(&bot.conn, 2, &text_content("x")).expect("seal").is_empty(), "still only receiving");

        // A new session from Bob's bundle: the bot sends again, and Bob opens it.
        add_sessions(&bot.conn, &bob.profile(), &[bob.bundle(Some(1))]).expect("new session");
        let fresh = seal(&bot.conn, 2, &text_content("after the restore")).expect("seal");
        assert_eq!(fresh.len(), 1);
        assert_eq!(open_text(&bob, &bot.envelope(fresh[0].ciphertext.clone())), "after the restore");
    }

    #[test]
    fn removed_devices_and_seal_for() {
        let alice = Device::new(1, 1);
        let bob1 = Device::new(2, 1);
        let bob2 = Device::new(2, 2);
        // Both bob devices share one account in reality; give bob2 bob1's account certificate.
        let mut b2 = bob2.bundle(Some(0));
        b2.device_certificate =
            identity::sign_device_certificate(&bob1.account, &key32(&b2.device_key, "k").expect("32")).to_vec();
        add_sessions(&alice.conn, &bob1.profile(), &[bob1.bundle(Some(0)), b2]).expect("add sessions");
        assert_eq!(seal(&alice.conn, 2, &text_content("both")).expect("seal").len(), 2);
        let only2 = seal_for(&alice.conn, 2, &[2], &text_content("two")).expect("seal_for");
        assert_eq!(only2.len(), 1);
        bob2.introduce(&alice);
        assert_eq!(open_text(&bob2, &alice.envelope(only2[0].ciphertext.clone())), "two");
        remove_devices(&alice.conn, 2, &[1]).expect("remove");
        assert_eq!(known_devices(&alice.conn, 2).expect("known"), vec![2]);
        assert!(matches!(
            seal_for(&alice.conn, 2, &[1], &text_content("x")),
            Err(E2eError::NoSession { user_id: 2, device_id: 1 })
        ));
    }

    #[test]
    fn a_stale_answer_keeps_good_ciphertexts_and_reseals_for_missing_devices_only() {
        let alice = Device::new(1, 1);
        let bob1 = Device::new(2, 1);
        let bob2 = Device::new(2, 2);
        let bob3 = Device::new(2, 3);
        let certified = |d: &Device| {
            let mut b = d.bundle(Some(0));
            b.device_certificate =
                identity::sign_device_certificate(&bob1.account, &key32(&b.device_key, "k").expect("32")).to_vec();
            b
        };
        add_sessions(&alice.conn, &bob1.profile(), &[bob1.bundle(Some(0))]).expect("session with bob1");
        let content = text_content("mended");
        let mut sealed = seal(&alice.conn, 2, &content).expect("seal");
        let kept = sealed[0].ciphertext.clone();
        assert_eq!(sealed.len(), 1);

        // The platform says: devices 2 and 3 are missing. Only device 2's bundle was fetched.
        assert_eq!(devices_without_session(&alice.conn, 2, &[2, 3]).expect("without"), vec![2, 3]);
        add_sessions(&alice.conn, &bob1.profile(), &[certified(&bob2)]).expect("session with bob2");
        let left_out = reseal_after_stale(&alice.conn, 2, &mut sealed, &[2, 3], &[], &content).expect("reseal");
        assert_eq!(left_out, vec![3]);
        let devices: Vec<u32> = sealed.iter().map(|c| c.device_id).collect();
        assert_eq!(devices, vec![1, 2]);
        assert_eq!(sealed[0].ciphertext, kept, "the committed ciphertext of an unchanged device is kept");
        bob2.introduce(&alice);
        assert_eq!(open_text(&bob2, &alice.envelope(sealed[1].ciphertext.clone())), "mended");

        // Then: device 1 was removed and device 3 is back with a bundle.
        add_sessions(&alice.conn, &bob1.profile(), &[certified(&bob3)]).expect("session with bob3");
        let left_out = reseal_after_stale(&alice.conn, 2, &mut sealed, &[3], &[1], &content).expect("reseal");
        assert!(left_out.is_empty());
        let devices: Vec<u32> = sealed.iter().map(|c| c.device_id).collect();
        assert_eq!(devices, vec![2, 3]);
        assert_eq!(known_devices(&alice.conn, 2).expect("known"), vec![2, 3], "device 1 is forgotten");
        bob3.introduce(&alice);
        assert_eq!(open_text(&bob3, &alice.envelope(sealed[1].ciphertext.clone())), "mended");
    }

    /// What a dishonest platform tries with the second-version certificate and a signed
    /// removal: a certificate moved to another device id, and a removed device served again.
    #[test]
    fn a_relabelled_or_removed_device_starts_no_session() {
        let alice = Device::new(1, 1);
        let bob = Device::new(2, 3);
        let v2 = |device_id: u32| {
            let binding = identity::DeviceBinding { user_id: 2, device_id, created_at: 1_800_000_000 };
            let key: [u8; 32] = bob.keys.device_key.as_slice().try_into().expect("32");
            crate::wire::platform::DeviceCertificateV2 {
                created_at: binding.created_at,
                signature: identity::sign_device_certificate_v2(&bob.account, &key, binding).to_vec(),
                ..Default::default()
            }
        };
        // Bob's device 3 with a certificate made for device 4: refused; its own: taken.
        let mut relabelled = bob.bundle(Some(0));
        relabelled.certificate_v2 = protobuf::MessageField::some(v2(4));
        assert!(matches!(add_sessions(&alice.conn, &bob.profile(), &[relabelled]), Err(E2eError::BadCertificate { user_id: 2, device_id: 3 })));
        let mut proper = bob.bundle(Some(1));
        proper.certificate_v2 = protobuf::MessageField::some(v2(3));
        add_sessions(&alice.conn, &bob.profile(), &[proper.clone()]).expect("a second-version certificate of its own");
        assert_eq!(devices_with_session(&alice.conn, 2).expect("sessions"), vec![3]);

        // Bob's account removes device 3 (signed); the removal comes with the next bundles,
        // the session ends, and device 3 served again starts nothing.
        let key: [u8; 32] = bob.keys.device_key.as_slice().try_into().expect("32");
        let removal = super::super::removals::signed_removal(&bob.account, 2, 3, &key, 1_800_000_100);
        let answer = GetPrekeyBundlesResponse {
            profile: protobuf::MessageField::some(bob.profile()),
            bundles: vec![proper.clone()],
            removals: vec![removal],
            ..Default::default()
        };
        assert!(matches!(start_sessions(&alice.conn, &answer), Err(E2eError::RemovedDevice { user_id: 2, device_id: 3 })));
        assert_eq!(devices_with_session(&alice.conn, 2).expect("sessions"), Vec::<u32>::new(), "its session ended");
        // Later the platform serves it without the removal: still refused, as is its key
        // under another device id.
        assert!(matches!(add_sessions(&alice.conn, &bob.profile(), &[proper.clone()]), Err(E2eError::RemovedDevice { .. })));
        let mut moved = proper;
        moved.device_id = 5;
        moved.certificate_v2 = protobuf::MessageField::none();
        assert!(matches!(add_sessions(&alice.conn, &bob.profile(), &[moved]), Err(E2eError::RemovedDevice { user_id: 2, device_id: 5 })));
        assert!(seal(&alice.conn, 2, &text_content("to nobody")).expect("seal").is_empty(), "nothing is sealed for it");
    }
}
