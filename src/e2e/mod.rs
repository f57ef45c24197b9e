//! End-to-end messaging between devices, shared by the gateway and the user client: this
//! device's keys, prekeys, sessions with peer devices, and sealing/opening envelopes.
//!
//! Everything here works on a `rusqlite::Connection` (the gateway passes the store writer's
//! transaction, the client its profile database), so a decrypted message, the advanced session
//! and the consumed one-time prekey are committed together by the caller. No network calls:
//! callers fetch bundles through `wire` and hand them in.
//!
//! # Trust
//! A peer device's key is checked against its account identity when we start a session from a
//! bundle (the device certificate), and recorded on first use when the peer starts the session
//! (X3DH responder). A device that later presents a different key is refused
//! (`DeviceKeyChanged`); device ids are never reused by the platform, so a legitimate key change
//! always comes with a new device id.
//!
//! # Sessions
//! Each peer device has a current session and the one it replaced. A message that does not
//! decrypt under the current session is tried under the previous one, which is then promoted:
//! this lets two devices that started sessions with each other at the same time converge.
//!
//! # Failure atomicity
//! No function opens a transaction. Functions validate and compute everything first and write
//! last, in an order where a partial write (say the connection fails midway) is harmless; the
//! caller rolls back on error anyway.

mod store;

pub use store::TABLES_V1;

use std::time::Duration;

use protobuf::{Message, MessageField};
use rusqlite::Connection;

use crate::clock::unix_now;
use crate::crypto::identity;
use crate::crypto::x3dh::{self, PrekeyHeader};
use crate::crypto::{self, CryptoError, IdentityKeyPair, OneTimePrekeyPair, Session, SignedPrekeyPair};
use crate::wire::e2e::Content;
use crate::wire::platform::{
    self as wire, DeviceCiphertext, DeviceKeys, InboxEnvelope, OneTimePrekey, PrekeyBundle, Profile,
};

/// How many one-time prekeys a device uploads at registration and keeps topped up to.
pub const ONE_TIME_PREKEY_TARGET: u32 = 100;

/// Local one-time prekey secrets kept at most. The platform hands prekeys out with bundles that
/// may never be used; beyond this many the oldest secrets are dropped (a bundle that old is
/// then refused with `UnknownPrekey`, and the peer starts again from a fresh bundle).
pub const MAX_LOCAL_ONE_TIME_PREKEYS: u32 = 10 * ONE_TIME_PREKEY_TARGET;

#[derive(Debug)]
pub enum E2eError {
    Crypto(crypto::CryptoError),
    Db(rusqlite::Error),
    /// A peer device presented a key different from the one recorded for it.
    DeviceKeyChanged { user_id: u64, device_id: u32 },
    /// A device certificate in a bundle did not verify against the account identity.
    BadCertificate { user_id: u64, device_id: u32 },
    /// A normal message arrived from a device we have no session with.
    NoSession { user_id: u64, device_id: u32 },
    /// The plaintext was not a valid `Content`.
    BadContent,
    /// This device has not created its keys yet.
    NotInitialized,
}

impl std::fmt::Display for E2eError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            E2eError::Crypto(e) => write!(f, "{e}"),
            E2eError::Db(e) => write!(f, "state database: {e}"),
            E2eError::DeviceKeyChanged { user_id, device_id } => {
                write!(f, "device {device_id} of user {user_id} presented a changed key")
            }
            E2eError::BadCertificate { user_id, device_id } => {
                write!(f, "device certificate of user {user_id} device {device_id} does not verify")
            }
            E2eError::NoSession { user_id, device_id } => {
                write!(f, "no session with user {user_id} device {device_id}")
            }
            E2eError::BadContent => write!(f, "decrypted payload is not a valid message"),
            E2eError::NotInitialized => write!(f, "device keys not created"),
        }
    }
}

impl std::error::Error for E2eError {}

impl From<crypto::CryptoError> for E2eError {
    fn from(e: crypto::CryptoError) -> Self {
        E2eError::Crypto(e)
    }
}

impl From<rusqlite::Error> for E2eError {
    fn from(e: rusqlite::Error) -> Self {
        E2eError::Db(e)
    }
}

pub type Result<T> = std::result::Result<T, E2eError>;

/// This device as registered with the platform.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Registration {
    pub user_id: u64,
    pub device_id: u32,
}

// ── Own device ──

/// Creates this device's key material (device key, signed prekey, one-time prekeys), stores the
/// secrets, and returns the public part to upload, with the device certificate signed by `account`.
///
/// Idempotent: when the keys already exist (say registration failed after they were created),
/// returns the stored public keys again (the newest signed prekey and every stored one-time
/// prekey) with a fresh certificate by `account`.
pub fn create_device_keys(conn: &Connection, account: &IdentityKeyPair) -> Result<DeviceKeys> {
    if store::own_device(conn)?.is_some() {
        let device = device_key(conn)?;
        let signed = latest_signed_prekey(conn)?;
        let one_time = store::all_one_time_prekeys(conn)?
            .iter()
            .map(|b| OneTimePrekeyPair::from_bytes(b))
            .collect::<crypto::Result<Vec<_>>>()?;
        return Ok(device_keys_message(account, &device, &signed, &one_time));
    }
    let device = IdentityKeyPair::generate();
    let signed = SignedPrekeyPair::generate(1, &device);
    let one_time = OneTimePrekeyPair::generate_batch(1, ONE_TIME_PREKEY_TARGET);
    store::insert_own_device(
        conn,
        &store::OwnDevice {
            seed: device.seed().to_vec(),
            next_signed_prekey_id: 2,
            next_one_time_prekey_id: 1 + ONE_TIME_PREKEY_TARGET,
        },
    )?;
    store::insert_signed_prekey(conn, signed.id, &signed.to_bytes(), unix_now())?;
    for p in &one_time {
        store::insert_one_time_prekey(conn, p.id, &p.to_bytes())?;
    }
    Ok(device_keys_message(account, &device, &signed, &one_time))
}

fn device_keys_message(
    account: &IdentityKeyPair,
    device: &IdentityKeyPair,
    signed: &SignedPrekeyPair,
    one_time: &[OneTimePrekeyPair],
) -> DeviceKeys {
    let device_public = device.public_key();
    let mut keys = DeviceKeys::new();
    keys.device_key = device_public.to_vec();
    keys.device_certificate = identity::sign_device_certificate(account, &device_public).to_vec();
    keys.signed_prekey = MessageField::some(signed_prekey_message(signed));
    keys.one_time_prekeys = one_time.iter().map(one_time_prekey_message).collect();
    keys
}

fn signed_prekey_message(p: &SignedPrekeyPair) -> wire::SignedPrekey {
    let mut m = wire::SignedPrekey::new();
    m.id = p.id;
    m.public_key = p.key.public.to_vec();
    m.signature = p.signature.to_vec();
    m
}

fn one_time_prekey_message(p: &OneTimePrekeyPair) -> OneTimePrekey {
    let mut m = OneTimePrekey::new();
    m.id = p.id;
    m.public_key = p.key.public.to_vec();
    m
}

/// This device's Ed25519 device key.
pub fn device_key(conn: &Connection) -> Result<IdentityKeyPair> {
    let own = store::own_device(conn)?.ok_or(E2eError::NotInitialized)?;
    let seed: [u8; 32] = own
        .seed
        .as_slice()
        .try_into()
        .map_err(|_| CryptoError::Malformed("stored device key seed"))?;
    Ok(IdentityKeyPair::from_seed(&seed))
}

pub fn save_registration(conn: &Connection, reg: Registration) -> Result<()> {
    store::save_registration(conn, reg.user_id, reg.device_id)?;
    Ok(())
}

pub fn registration(conn: &Connection) -> Result<Option<Registration>> {
    Ok(store::registration(conn)?.map(|(user_id, device_id)| Registration { user_id, device_id }))
}

/// When a device replaces its signed prekey, and how long it keeps the replaced ones
/// (docs/decisions.md, "Transport and state").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SignedPrekeySchedule {
    /// The newest signed prekey is replaced once it is this old.
    pub max_age: Duration,
    /// A replaced signed prekey's secret is kept at least this long after its replacement was
    /// created, so a first message built from a bundle served before the rotation still opens.
    pub grace: Duration,
}

impl SignedPrekeySchedule {
    /// Rotate weekly; keep a replaced key 30 days.
    pub const DEFAULT: SignedPrekeySchedule =
        SignedPrekeySchedule { max_age: Duration::from_secs(7 * 86_400), grace: Duration::from_secs(30 * 86_400) };
}

/// True when the newest signed prekey is at least `schedule.max_age` old.
pub fn signed_prekey_due(conn: &Connection, schedule: &SignedPrekeySchedule) -> Result<bool> {
    signed_prekey_due_at(conn, schedule, unix_now())
}

fn signed_prekey_due_at(conn: &Connection, schedule: &SignedPrekeySchedule, now: i64) -> Result<bool> {
    let created = store::latest_signed_prekey_created_at(conn)?.ok_or(E2eError::NotInitialized)?;
    Ok(now.saturating_sub(created) >= secs(schedule.max_age))
}

/// When the signed prekey is due (`signed_prekey_due`): generates and stores a new one, deletes
/// the replaced ones whose grace period is over, and returns the new public half, which the
/// caller publishes with `UploadPrekeys` after committing. `None` when not due.
pub fn rotate_signed_prekey_if_due(
    conn: &Connection,
    schedule: &SignedPrekeySchedule,
) -> Result<Option<wire::SignedPrekey>> {
    rotate_signed_prekey_if_due_at(conn, schedule, unix_now())
}

fn rotate_signed_prekey_if_due_at(
    conn: &Connection,
    schedule: &SignedPrekeySchedule,
    now: i64,
) -> Result<Option<wire::SignedPrekey>> {
    if !signed_prekey_due_at(conn, schedule, now)? {
        return Ok(None);
    }
    let fresh = rotate_signed_prekey(conn, now)?;
    let pruned = store::prune_signed_prekeys(conn, now.saturating_sub(secs(schedule.grace)))?;
    if pruned > 0 {
        log::info!("dropped {pruned} signed prekey secrets replaced more than {:?} ago", schedule.grace);
    }
    Ok(Some(fresh))
}

/// Generates a new signed prekey created at `now` and stores it (older ones stay, so messages
/// started from a bundle served before the rotation still open); returns the public half.
fn rotate_signed_prekey(conn: &Connection, now: i64) -> Result<wire::SignedPrekey> {
    let own = store::own_device(conn)?.ok_or(E2eError::NotInitialized)?;
    let device = device_key(conn)?;
    let signed = SignedPrekeyPair::generate(own.next_signed_prekey_id, &device);
    store::insert_signed_prekey(conn, signed.id, &signed.to_bytes(), now)?;
    store::set_next_signed_prekey_id(conn, own.next_signed_prekey_id.wrapping_add(1))?;
    Ok(signed_prekey_message(&signed))
}

/// The public half of the newest signed prekey: the one the platform should serve.
pub fn current_signed_prekey(conn: &Connection) -> Result<wire::SignedPrekey> {
    Ok(signed_prekey_message(&latest_signed_prekey(conn)?))
}

fn latest_signed_prekey(conn: &Connection) -> Result<SignedPrekeyPair> {
    let bytes = store::latest_signed_prekey(conn)?.ok_or(E2eError::NotInitialized)?;
    Ok(SignedPrekeyPair::from_bytes(&bytes)?)
}

fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

/// Generates one-time prekeys to bring the stock back to `ONE_TIME_PREKEY_TARGET` given
/// `remaining` on the server; stores secrets, returns the public halves to upload.
pub fn replenish_one_time_prekeys(conn: &Connection, remaining: u32) -> Result<Vec<OneTimePrekey>> {
    if remaining >= ONE_TIME_PREKEY_TARGET {
        return Ok(Vec::new());
    }
    let own = store::own_device(conn)?.ok_or(E2eError::NotInitialized)?;
    let count = ONE_TIME_PREKEY_TARGET - remaining;
    let batch = OneTimePrekeyPair::generate_batch(own.next_one_time_prekey_id, count);
    for p in &batch {
        store::insert_one_time_prekey(conn, p.id, &p.to_bytes())?;
    }
    store::set_next_one_time_prekey_id(conn, own.next_one_time_prekey_id.wrapping_add(count))?;
    let pruned = store::prune_one_time_prekeys(conn, MAX_LOCAL_ONE_TIME_PREKEYS)?;
    if pruned > 0 {
        log::info!("dropped {pruned} old one-time prekey secrets that were never used");
    }
    Ok(batch.iter().map(one_time_prekey_message).collect())
}

/// How many one-time prekey secrets this device holds locally.
pub fn local_one_time_prekey_count(conn: &Connection) -> Result<u32> {
    Ok(store::count_one_time_prekeys(conn)?)
}

// ── Receiving ──

/// Which stored session slot a message was opened with.
enum Slot {
    Current,
    Previous,
    /// A session just accepted from a prekey header; `one_time_prekey` is deleted on success.
    New { one_time_prekey: Option<u32> },
}

/// Decrypts one inbox envelope: finds or starts (X3DH responder) the session with the sender
/// device, decrypts, stores the advanced session, deletes a used one-time prekey.
///
/// On any error before decryption succeeds nothing is written. `BadContent` comes after the
/// writes: the message was authentic and its key is spent, so committing is right.
pub fn open_envelope(conn: &Connection, envelope: &InboxEnvelope) -> Result<Content> {
    let (user_id, device_id) = (envelope.sender_user_id, envelope.sender_device_id);
    let (current, previous) = load_sessions(conn, user_id, device_id)?;
    let header = x3dh::peek_prekey_header(&envelope.ciphertext)?;

    let (slot, session, plaintext) = match header {
        Some(header) => open_prekey_message(conn, envelope, &header, current.as_ref(), previous.as_ref())?,
        None => open_normal_message(envelope, current.as_ref(), previous.as_ref())?,
    };

    // Store: the peer device (first use), the advanced session, then drop the used prekey.
    let peer_key = session.peer_device_key();
    if store::peer_device_key(conn, user_id, device_id)?.is_none() {
        store::upsert_peer_device(conn, user_id, device_id, &peer_key)?;
    }
    let session_bytes = session.to_bytes();
    match slot {
        Slot::Current => {
            let prev = previous.as_ref().map(Session::to_bytes);
            store::put_sessions(conn, user_id, device_id, &session_bytes, prev.as_deref())?;
        }
        Slot::Previous => {
            // The previous session is the live one after all: promote it.
            let demoted = current.as_ref().map(Session::to_bytes);
            store::put_sessions(conn, user_id, device_id, &session_bytes, demoted.as_deref())?;
        }
        Slot::New { one_time_prekey } => {
            let demoted = current.as_ref().map(Session::to_bytes);
            store::put_sessions(conn, user_id, device_id, &session_bytes, demoted.as_deref())?;
            if let Some(id) = one_time_prekey {
                store::delete_one_time_prekey(conn, id)?;
            }
        }
    }

    Content::parse_from_bytes(&plaintext).map_err(|_| E2eError::BadContent)
}

fn load_sessions(conn: &Connection, user_id: u64, device_id: u32) -> Result<(Option<Session>, Option<Session>)> {
    match store::sessions(conn, user_id, device_id)? {
        None => Ok((None, None)),
        Some((current, previous)) => {
            let current = Session::from_bytes(&current)?;
            let previous = match previous {
                Some(p) => Some(Session::from_bytes(&p)?),
                None => None,
            };
            Ok((Some(current), previous))
        }
    }
}

/// A message carrying an X3DH header: either a repeat for a session we already accepted from
/// that header, or the start of a new session.
fn open_prekey_message(
    conn: &Connection,
    envelope: &InboxEnvelope,
    header: &PrekeyHeader,
    current: Option<&Session>,
    previous: Option<&Session>,
) -> Result<(Slot, Session, Vec<u8>)> {
    let (user_id, device_id) = (envelope.sender_user_id, envelope.sender_device_id);
    for (slot, existing) in [(Slot::Current, current), (Slot::Previous, previous)] {
        if let Some(existing) = existing.filter(|s| s.was_accepted_from(header)) {
            let mut session = existing.clone();
            let plaintext = session.decrypt(&envelope.ciphertext)?;
            return Ok((slot, session, plaintext));
        }
    }

    if let Some(recorded) = store::peer_device_key(conn, user_id, device_id)? {
        if recorded.as_slice() != header.initiator_device_key.as_slice() {
            log::warn!("user {user_id} device {device_id} started a session with a key other than the recorded one");
            return Err(E2eError::DeviceKeyChanged { user_id, device_id });
        }
    }
    let signed = store::signed_prekey(conn, header.signed_prekey_id)?
        .ok_or(CryptoError::UnknownPrekey(header.signed_prekey_id))?;
    let signed = SignedPrekeyPair::from_bytes(&signed)?;
    let one_time = match header.one_time_prekey_id {
        Some(id) => {
            let bytes = store::one_time_prekey(conn, id)?.ok_or(CryptoError::UnknownPrekey(id))?;
            Some(OneTimePrekeyPair::from_bytes(&bytes)?)
        }
        None => None,
    };
    let own = device_key(conn)?;
    let mut session = x3dh::accept_session(&own, &signed, one_time.as_ref(), header)?;
    let plaintext = session.decrypt(&envelope.ciphertext)?;
    Ok((Slot::New { one_time_prekey: header.one_time_prekey_id }, session, plaintext))
}

/// A message without a header: the current session, else the previous one.
fn open_normal_message(
    envelope: &InboxEnvelope,
    current: Option<&Session>,
    previous: Option<&Session>,
) -> Result<(Slot, Session, Vec<u8>)> {
    let Some(current) = current else {
        return Err(E2eError::NoSession { user_id: envelope.sender_user_id, device_id: envelope.sender_device_id });
    };
    let mut session = current.clone();
    let first_error = match session.decrypt(&envelope.ciphertext) {
        Ok(plaintext) => return Ok((Slot::Current, session, plaintext)),
        Err(e) => e,
    };
    if let Some(previous) = previous {
        let mut session = previous.clone();
        if let Ok(plaintext) = session.decrypt(&envelope.ciphertext) {
            return Ok((Slot::Previous, session, plaintext));
        }
    }
    Err(first_error.into())
}

// ── Sending ──

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
        if identity::verify_device_certificate(&peer.identity_key, &b.device_key, &b.device_certificate).is_err() {
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
    for (device_id, device_key, session) in started {
        let demoted = store::sessions(conn, peer.user_id, device_id)?.map(|(current, _)| current);
        store::upsert_peer_device(conn, peer.user_id, device_id, &device_key)?;
        store::put_sessions(conn, peer.user_id, device_id, &session.to_bytes(), demoted.as_deref())?;
    }
    Ok(())
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

fn key32(bytes: &[u8], what: &'static str) -> Result<[u8; 32]> {
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
    let plaintext = content.write_to_bytes().expect("encoding a message in memory cannot fail");
    let mut sealed = Vec::with_capacity(device_ids.len());
    let mut advanced = Vec::with_capacity(device_ids.len());
    for &device_id in device_ids {
        let (current, previous) = match store::sessions(conn, peer_user, device_id)? {
            Some(s) => s,
            None => return Err(E2eError::NoSession { user_id: peer_user, device_id }),
        };
        let mut session = Session::from_bytes(&current)?;
        let mut ct = DeviceCiphertext::new();
        ct.device_id = device_id;
        ct.ciphertext = session.encrypt(&plaintext);
        sealed.push(ct);
        advanced.push((device_id, session.to_bytes(), previous));
    }
    for (device_id, session, previous) in advanced {
        store::put_sessions(conn, peer_user, device_id, &session, previous.as_deref())?;
    }
    Ok(sealed)
}

#[cfg(test)]
mod tests {
    //! Two (or three) devices, each with its own in-memory database, talking through
    //! `seal` / `open_envelope` with no server: the test plays the platform.

    use super::*;
    use crate::wire::e2e::Text;

    struct Device {
        conn: Connection,
        account: IdentityKeyPair,
        keys: DeviceKeys,
        user_id: u64,
        device_id: u32,
    }

    impl Device {
        fn new(user_id: u64, device_id: u32) -> Device {
            crypto::init();
            let conn = Connection::open_in_memory().expect("in-memory db");
            conn.execute_batch(TABLES_V1).expect("tables");
            let account = IdentityKeyPair::generate();
            let keys = create_device_keys(&conn, &account).expect("device keys");
            save_registration(&conn, Registration { user_id, device_id }).expect("registration");
            Device { conn, account, keys, user_id, device_id }
        }

        fn profile(&self) -> Profile {
            let mut p = Profile::new();
            p.user_id = self.user_id;
            p.username = format!("user{}", self.user_id);
            p.identity_key = self.account.public_key().to_vec();
            p
        }

        /// What the platform would serve: the keys with the one-time prekey at `index`.
        fn bundle(&self, one_time_index: Option<usize>) -> PrekeyBundle {
            let mut b = PrekeyBundle::new();
            b.device_id = self.device_id;
            b.device_key = self.keys.device_key.clone();
            b.device_certificate = self.keys.device_certificate.clone();
            b.signed_prekey = self.keys.signed_prekey.clone();
            if let Some(i) = one_time_index {
                b.one_time_prekey = MessageField::some(self.keys.one_time_prekeys[i].clone());
            }
            b
        }

        fn send(&self, to: &Device, text: &str) -> InboxEnvelope {
            let sealed = seal(&self.conn, to.user_id, &text_content(text)).expect("seal");
            assert_eq!(sealed.len(), 1, "one ciphertext per known device");
            assert_eq!(sealed[0].device_id, to.device_id);
            self.envelope(sealed[0].ciphertext.clone())
        }

        fn envelope(&self, ciphertext: Vec<u8>) -> InboxEnvelope {
            let mut e = InboxEnvelope::new();
            e.sender_user_id = self.user_id;
            e.sender_device_id = self.device_id;
            e.ciphertext = ciphertext;
            e
        }
    }

    fn text_content(text: &str) -> Content {
        let mut t = Text::new();
        t.text = text.to_string();
        let mut c = Content::new();
        c.set_text(t);
        c
    }

    fn open_text(d: &Device, e: &InboxEnvelope) -> String {
        open_envelope(&d.conn, e).expect("open").text().text.clone()
    }

    #[test]
    fn first_message_via_prekey_then_replies_both_ways() {
        let alice = Device::new(1, 1);
        let bob = Device::new(2, 1);
        let used = bob.keys.one_time_prekeys[3].id;
        add_sessions(&alice.conn, &bob.profile(), &[bob.bundle(Some(3))]).expect("add session");
        assert_eq!(known_devices(&alice.conn, 2).expect("known"), vec![1]);

        let first = alice.send(&bob, "hello bob");
        assert!(x3dh::peek_prekey_header(&first.ciphertext).expect("peek").is_some());
        assert!(store::one_time_prekey(&bob.conn, used).expect("read").is_some());
        assert_eq!(open_text(&bob, &first), "hello bob");
        // The one-time prekey is consumed, and alice's device is recorded.
        assert!(store::one_time_prekey(&bob.conn, used).expect("read").is_none());
        assert_eq!(local_one_time_prekey_count(&bob.conn).expect("count"), ONE_TIME_PREKEY_TARGET - 1);
        assert_eq!(known_devices(&bob.conn, 1).expect("known"), vec![1]);

        // A second message before bob answers still carries the header and reuses the session.
        let second = alice.send(&bob, "still there?");
        assert!(x3dh::peek_prekey_header(&second.ciphertext).expect("peek").is_some());
        assert_eq!(open_text(&bob, &second), "still there?");

        let reply = bob.send(&alice, "hi alice");
        assert_eq!(open_text(&alice, &reply), "hi alice");
        let third = alice.send(&bob, "third");
        assert!(x3dh::peek_prekey_header(&third.ciphertext).expect("peek").is_none());
        assert_eq!(open_text(&bob, &third), "third");

        // Out of order within a chain.
        let r1 = bob.send(&alice, "r1");
        let r2 = bob.send(&alice, "r2");
        assert_eq!(open_text(&alice, &r2), "r2");
        assert_eq!(open_text(&alice, &r1), "r1");

        // A replay is refused and leaves the session usable.
        assert!(open_envelope(&bob.conn, &third).is_err());
        assert!(open_envelope(&bob.conn, &first).is_err());
        let fourth = alice.send(&bob, "fourth");
        assert_eq!(open_text(&bob, &fourth), "fourth");
    }

    #[test]
    fn content_fields_survive() {
        let alice = Device::new(1, 1);
        let bob = Device::new(2, 7);
        add_sessions(&alice.conn, &bob.profile(), &[bob.bundle(None)]).expect("add session");
        let mut content = text_content("bold move");
        content.mut_text().entities.push({
            let mut e = crate::wire::e2e::Entity::new();
            e.type_ = "bold".into();
            e.offset = 0;
            e.length = 4;
            e
        });
        content.reply_to_message_id = 42;
        let sealed = seal(&alice.conn, 2, &content).expect("seal");
        let opened = open_envelope(&bob.conn, &alice.envelope(sealed[0].ciphertext.clone())).expect("open");
        assert_eq!(opened, content);
    }

    #[test]
    fn changed_device_key_is_refused() {
        let alice = Device::new(1, 1);
        let bob = Device::new(2, 1);
        add_sessions(&alice.conn, &bob.profile(), &[bob.bundle(Some(0))]).expect("add session");
        assert_eq!(open_text(&bob, &alice.send(&bob, "hi")), "hi");

        // Another device claims to be alice's device 1 with a different key.
        let mallory = Device::new(1, 1);
        add_sessions(&mallory.conn, &bob.profile(), &[bob.bundle(Some(1))]).expect("add session");
        let forged = mallory.send(&bob, "it is me, alice");
        match open_envelope(&bob.conn, &forged) {
            Err(E2eError::DeviceKeyChanged { user_id: 1, device_id: 1 }) => {}
            other => panic!("expected DeviceKeyChanged, got {other:?}"),
        }
        // Nothing was consumed or replaced: the prekey is still there and alice still works.
        assert!(store::one_time_prekey(&bob.conn, bob.keys.one_time_prekeys[1].id).expect("read").is_some());
        assert_eq!(open_text(&bob, &alice.send(&bob, "still me")), "still me");

        // A bundle presenting a changed key for a recorded device is refused as well.
        let mut swapped = bob.bundle(Some(2));
        let impostor = Device::new(2, 1);
        swapped.device_key = impostor.keys.device_key.clone();
        swapped.device_certificate =
            identity::sign_device_certificate(&bob.account, &key32(&swapped.device_key, "k").expect("32")).to_vec();
        match add_sessions(&alice.conn, &bob.profile(), &[swapped]) {
            Err(E2eError::DeviceKeyChanged { user_id: 2, device_id: 1 }) => {}
            other => panic!("expected DeviceKeyChanged, got {other:?}"),
        }
    }

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
    }

    #[test]
    fn unknown_prekey_no_session_and_bad_content() {
        let alice = Device::new(1, 1);
        let bob = Device::new(2, 1);
        let carol = Device::new(3, 1);
        add_sessions(&alice.conn, &bob.profile(), &[bob.bundle(Some(0))]).expect("add session");
        assert_eq!(open_text(&bob, &alice.send(&bob, "hi")), "hi");
        // Carol got the same (already used) one-time prekey: bob no longer holds it.
        add_sessions(&carol.conn, &bob.profile(), &[bob.bundle(Some(0))]).expect("add session");
        match open_envelope(&bob.conn, &carol.send(&bob, "me too")) {
            Err(E2eError::Crypto(CryptoError::UnknownPrekey(id))) => assert_eq!(id, bob.keys.one_time_prekeys[0].id),
            other => panic!("expected UnknownPrekey, got {other:?}"),
        }
        // A message without header from a device bob has no session with.
        let reply = bob.send(&alice, "answer");
        let mut misrouted = reply.clone();
        misrouted.sender_user_id = 3;
        assert!(matches!(
            open_envelope(&carol.conn, &misrouted),
            Err(E2eError::NoSession { user_id: 3, device_id: 1 })
        ));
        // A plaintext that is not a Content.
        let sealed = {
            let (cur, prev) = store::sessions(&alice.conn, 2, 1).expect("read").expect("session");
            let mut s = Session::from_bytes(&cur).expect("decode");
            let ct = s.encrypt(&[0xff, 0xff, 0xff]);
            store::put_sessions(&alice.conn, 2, 1, &s.to_bytes(), prev.as_deref()).expect("store");
            ct
        };
        assert!(matches!(open_envelope(&bob.conn, &alice.envelope(sealed)), Err(E2eError::BadContent)));
    }

    #[test]
    fn simultaneous_session_start_converges() {
        let alice = Device::new(1, 1);
        let bob = Device::new(2, 1);
        add_sessions(&alice.conn, &bob.profile(), &[bob.bundle(Some(0))]).expect("alice starts");
        add_sessions(&bob.conn, &alice.profile(), &[alice.bundle(Some(0))]).expect("bob starts");
        let a1 = alice.send(&bob, "a1");
        let b1 = bob.send(&alice, "b1");
        assert_eq!(open_text(&bob, &a1), "a1");
        assert_eq!(open_text(&alice, &b1), "b1");
        for round in 0..3 {
            let a = alice.send(&bob, &format!("a{round}"));
            assert_eq!(open_text(&bob, &a), format!("a{round}"));
            let b = bob.send(&alice, &format!("b{round}"));
            assert_eq!(open_text(&alice, &b), format!("b{round}"));
        }
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
        assert_eq!(open_text(&bob2, &alice.envelope(sealed[1].ciphertext.clone())), "mended");

        // Then: device 1 was removed and device 3 is back with a bundle.
        add_sessions(&alice.conn, &bob1.profile(), &[certified(&bob3)]).expect("session with bob3");
        let left_out = reseal_after_stale(&alice.conn, 2, &mut sealed, &[3], &[1], &content).expect("reseal");
        assert!(left_out.is_empty());
        let devices: Vec<u32> = sealed.iter().map(|c| c.device_id).collect();
        assert_eq!(devices, vec![2, 3]);
        assert_eq!(known_devices(&alice.conn, 2).expect("known"), vec![2, 3], "device 1 is forgotten");
        assert_eq!(open_text(&bob3, &alice.envelope(sealed[1].ciphertext.clone())), "mended");
    }

    #[test]
    fn keys_are_idempotent_and_replenished() {
        let d = Device::new(5, 1);
        let again = create_device_keys(&d.conn, &d.account).expect("again");
        assert_eq!(again.device_key, d.keys.device_key);
        assert_eq!(again.signed_prekey, d.keys.signed_prekey);
        assert_eq!(again.one_time_prekeys.len(), ONE_TIME_PREKEY_TARGET as usize);
        assert_eq!(registration(&d.conn).expect("reg"), Some(Registration { user_id: 5, device_id: 1 }));
        assert_eq!(device_key(&d.conn).expect("key").public_key().to_vec(), d.keys.device_key);

        assert!(replenish_one_time_prekeys(&d.conn, ONE_TIME_PREKEY_TARGET).expect("none").is_empty());
        let fresh = replenish_one_time_prekeys(&d.conn, ONE_TIME_PREKEY_TARGET - 3).expect("three");
        let ids: Vec<u32> = fresh.iter().map(|p| p.id).collect();
        assert_eq!(ids, vec![ONE_TIME_PREKEY_TARGET + 1, ONE_TIME_PREKEY_TARGET + 2, ONE_TIME_PREKEY_TARGET + 3]);
        assert_eq!(local_one_time_prekey_count(&d.conn).expect("count"), ONE_TIME_PREKEY_TARGET + 3);

        let rotated = rotate_signed_prekey(&d.conn, unix_now()).expect("rotate");
        assert_eq!(rotated.id, 2);
        assert!(store::signed_prekey(&d.conn, 1).expect("old kept").is_some());

        let empty = Connection::open_in_memory().expect("db");
        empty.execute_batch(TABLES_V1).expect("tables");
        assert!(matches!(device_key(&empty), Err(E2eError::NotInitialized)));
        assert_eq!(registration(&empty).expect("reg"), None);
    }

    /// The created_at of the newest signed prekey, the time the schedule measures from.
    fn newest_created(d: &Device) -> i64 {
        store::latest_signed_prekey_created_at(&d.conn).expect("read").expect("a signed prekey")
    }

    #[test]
    fn signed_prekey_rotates_once_older_than_the_threshold_and_not_before() {
        let d = Device::new(5, 1);
        let schedule = SignedPrekeySchedule { max_age: Duration::from_secs(600), grace: Duration::from_secs(3600) };
        let t0 = newest_created(&d);
        for now in [t0, t0 + 599] {
            assert!(!signed_prekey_due_at(&d.conn, &schedule, now).expect("due"));
            assert_eq!(rotate_signed_prekey_if_due_at(&d.conn, &schedule, now).expect("not due"), None, "at t0+{}", now - t0);
        }
        assert_eq!(current_signed_prekey(&d.conn).expect("current"), d.keys.signed_prekey.clone().unwrap());

        assert!(signed_prekey_due_at(&d.conn, &schedule, t0 + 600).expect("due"));
        let fresh = rotate_signed_prekey_if_due_at(&d.conn, &schedule, t0 + 600).expect("rotate").expect("due");
        assert_eq!(fresh.id, 2);
        assert_ne!(fresh.public_key, d.keys.signed_prekey.public_key);
        assert_eq!(current_signed_prekey(&d.conn).expect("current"), fresh);
        assert_eq!(newest_created(&d), t0 + 600);
        assert!(store::signed_prekey(&d.conn, 1).expect("read").is_some(), "the replaced key is kept");
        // The new key starts a new period.
        assert_eq!(rotate_signed_prekey_if_due_at(&d.conn, &schedule, t0 + 1199).expect("not due"), None);
        // The default schedule: weekly.
        assert!(!signed_prekey_due_at(&d.conn, &SignedPrekeySchedule::DEFAULT, t0 + 600 + 7 * 86_400 - 1).expect("due"));
        assert!(signed_prekey_due_at(&d.conn, &SignedPrekeySchedule::DEFAULT, t0 + 600 + 7 * 86_400).expect("due"));
    }

    #[test]
    fn a_replaced_signed_prekey_opens_first_messages_until_its_grace_period_ends() {
        let alice = Device::new(1, 1);
        let carol = Device::new(3, 1);
        let dave = Device::new(4, 1);
        let bob = Device::new(2, 1);
        let schedule = SignedPrekeySchedule::DEFAULT;
        let day = 86_400;
        let t0 = newest_created(&bob);
        // Alice and carol fetch bob's bundle (signed prekey 1) before the rotation.
        add_sessions(&alice.conn, &bob.profile(), &[bob.bundle(Some(0))]).expect("alice starts");
        add_sessions(&carol.conn, &bob.profile(), &[bob.bundle(Some(1))]).expect("carol starts");

        let second = rotate_signed_prekey_if_due_at(&bob.conn, &schedule, t0 + 8 * day).expect("rotate").expect("due");
        // Alice sends after the rotation: her message names signed prekey 1, which bob kept.
        assert_eq!(open_text(&bob, &alice.send(&bob, "from an old bundle")), "from an old bundle");
        // Dave fetches the new bundle.
        let mut fresh_bundle = bob.bundle(Some(2));
        fresh_bundle.signed_prekey = MessageField::some(second.clone());
        add_sessions(&dave.conn, &bob.profile(), &[fresh_bundle]).expect("dave starts");

        // A rotation 29 days after signed prekey 1 was replaced keeps it; one 36 days after
        // drops it, but not signed prekey 2, replaced 7 days before.
        let third = rotate_signed_prekey_if_due_at(&bob.conn, &schedule, t0 + 37 * day).expect("rotate").expect("due");
        assert_eq!(third.id, 3);
        assert!(store::signed_prekey(&bob.conn, 1).expect("read").is_some(), "within its grace period");
        let fourth = rotate_signed_prekey_if_due_at(&bob.conn, &schedule, t0 + 44 * day).expect("rotate").expect("due");
        assert_eq!(fourth.id, 4);
        assert!(store::signed_prekey(&bob.conn, 1).expect("read").is_none(), "past its grace period");
        assert!(store::signed_prekey(&bob.conn, 2).expect("read").is_some(), "within its grace period");
        match open_envelope(&bob.conn, &carol.send(&bob, "too late")) {
            Err(E2eError::Crypto(CryptoError::UnknownPrekey(1))) => {}
            other => panic!("expected UnknownPrekey(1), got {other:?}"),
        }
        assert_eq!(open_text(&bob, &dave.send(&bob, "from the second bundle")), "from the second bundle");
    }
}
