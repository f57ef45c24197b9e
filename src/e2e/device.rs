//! This device's own keys: creating them, one-time prekey top-up, and the signed prekey's
//! rotation and its schedule.

use std::time::Duration;

use protobuf::MessageField;
use rusqlite::Connection;

use super::{store, E2eError, Registration, Result};
use crate::clock::unix_now;
use crate::crypto::identity;
use crate::crypto::{self, CryptoError, IdentityKeyPair, OneTimePrekeyPair, SignedPrekeyPair};
use crate::wire::platform::{self as wire, DeviceKeys, OneTimePrekey};

/// How many one-time prekeys a device uploads at registration and keeps topped up to.
pub const ONE_TIME_PREKEY_TARGET: u32 = 100;

/// Local one-time prekey secrets kept at most. The platform hands prekeys out with bundles that
/// may never be used; beyond this many the oldest secrets are dropped (a bundle that old is
/// then refused with `UnknownPrekey`, and the peer starts again from a fresh bundle).
pub const MAX_LOCAL_ONE_TIME_PREKEYS: u32 = 10 * ONE_TIME_PREKEY_TARGET;

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
        super::leaf::save_own_proof(conn, account)?;
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
    super::leaf::save_own_proof(conn, account)?;
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

/// Forgets this device: its keys and prekeys, its registration and proof, every session and
/// the inbox cursor of its device inbox. What it learnt of others stays (the identity keys it
/// pinned, their device keys). For a bot whose identity moved to a new key (`/rekey`): the
/// platform removed every device of the old one, and the next registration makes a new
/// device under the new key. The deleted secrets leave no copy in the log (`wal`).
pub fn forget_own_device(conn: &Connection) -> Result<()> {
    conn.execute_batch(
        "DELETE FROM e2e_own_device; DELETE FROM e2e_registration; DELETE FROM e2e_signed_prekeys;
         DELETE FROM e2e_one_time_prekeys; DELETE FROM e2e_sessions; DELETE FROM e2e_own_proof;
         DELETE FROM e2e_accepted_ephemerals; DELETE FROM e2e_inbound_cursor;",
    )?;
    super::wal::secrets_deleted();
    Ok(())
}

/// The account identity key this device's proof names: the key it was registered under.
pub fn own_identity_key(conn: &Connection) -> Result<Option<[u8; 32]>> {
    match super::leaf::own_proof(conn) {
        Ok(proof) => Ok(Some(proof.identity_key)),
        Err(E2eError::NotInitialized) => Ok(None),
        Err(e) => Err(e),
    }
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
    Ok(crate::clock::is_due(created, now, secs(schedule.max_age)))
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
    super::replay::forget_pruned(conn)?;
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

/// How far a restored device moves its one-time prekey ids on: past every id the device may
/// have issued between its backup and the restore, so no peer's bundle names an id that now
/// belongs to another key.
const RESTORED_PREKEY_ID_GAP: u32 = 1 << 20;

/// The table of sessions that only receive (a step of each database holding `e2e` tables).
pub const RECEIVE_ONLY_TABLES: &str = "
    CREATE TABLE e2e_receive_only (
        user_id   INTEGER NOT NULL,
        device_id INTEGER NOT NULL,
        PRIMARY KEY (user_id, device_id)
    );";

/// A device state put back from a backup (`bot-gateway restore`) never sends on the sessions it
/// had: their sending chains moved on after the backup, and sending from an earlier point would
/// use message keys again. They only receive (`e2e_receive_only`), so peers' next messages
/// still open, and the next message to each device starts a new session from its bundle (the
/// old one stays as the previous). Its one-time prekey ids move on by
/// [`RESTORED_PREKEY_ID_GAP`]; the caller replaces what the platform stocks
/// (`UploadPrekeysRequest.replace_one_time_prekeys`) with [`replenish_one_time_prekeys`]`(c, 0)`.
/// Returns how many sessions now only receive.
pub fn sessions_receive_only_after_restore(conn: &Connection) -> Result<usize> {
    let own = store::own_device(conn)?.ok_or(E2eError::NotInitialized)?;
    store::set_next_one_time_prekey_id(conn, own.next_one_time_prekey_id.wrapping_add(RESTORED_PREKEY_ID_GAP))?;
    Ok(conn.execute("INSERT OR IGNORE INTO e2e_receive_only (user_id, device_id) SELECT user_id, device_id FROM e2e_sessions", [])?)
}

/// How many one-time prekey secrets this device holds locally.
pub fn local_one_time_prekey_count(conn: &Connection) -> Result<u32> {
    Ok(store::count_one_time_prekeys(conn)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::open_envelope;
    use super::super::seal::add_sessions;
    use super::super::testing::{open_text, Device};
    use super::super::TABLES_V1;

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
    fn a_clock_that_jumps_a_year_ahead_and_back_leaves_the_signed_prekey_on_its_period() {
        let d = Device::new(5, 2);
        let schedule = SignedPrekeySchedule::DEFAULT;
        let (t0, year, week) = (newest_created(&d), 365 * 86_400, 7 * 86_400);
        // A year ahead: due, and the new key is dated a year ahead.
        let ahead = rotate_signed_prekey_if_due_at(&d.conn, &schedule, t0 + year).expect("rotate").expect("due");
        assert_eq!(newest_created(&d), t0 + year);
        // Back: a key dated in the future is due now, not a year from now.
        let back = rotate_signed_prekey_if_due_at(&d.conn, &schedule, t0 + 60).expect("rotate").expect("due when dated ahead");
        assert_ne!(back.id, ahead.id);
        assert_eq!(newest_created(&d), t0 + 60);
        // And then on its period again, measured from the clock that is right.
        assert_eq!(rotate_signed_prekey_if_due_at(&d.conn, &schedule, t0 + 60 + week - 1).expect("not due"), None);
        assert!(rotate_signed_prekey_if_due_at(&d.conn, &schedule, t0 + 60 + week).expect("rotate").is_some());
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
