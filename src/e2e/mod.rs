//! End-to-end messaging between devices, shared by the gateway and the user client: this
//! device's keys, prekeys, sessions with peer devices, and sealing/opening envelopes.
//!
//! Everything here works on a `rusqlite::Connection` (the gateway passes the store writer's
//! transaction, the client its profile database), so a decrypted message, the advanced session
//! and the consumed one-time prekey are committed together by the caller. No network calls
//! (but `file`): callers fetch bundles through `wire` and hand them in.
//!
//! # Trust
//! A peer device's key is checked against its account identity (the device certificate) before
//! any session with it starts: from its bundle when we start the session (`add_sessions`), and
//! from its certificate, fetched without using up a one-time prekey, when the peer starts it
//! (`certify`, before `open_envelope`). The account identity key is pinned for the user the
//! first time (`leaf::pin_identity`); another one later is refused (`IdentityChanged`). A device
//! that later presents a different key is refused (`DeviceKeyChanged`); device ids are never
//! reused by the platform, so a legitimate key change always comes with a new device id.
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
//!
//! # Contents
//! - `bot_key`: a bot identity drawn on its owner's device and the proof of it that
//!   `@BotManager` checks at `/newbot` and `/rekey`.
//! - `file`: encrypted files over the platform (`upload_encrypted`, `download_verified`); the
//!   one module here that calls the platform itself, because a file is streamed, not handed in.
//! - `file_transport`: the two file calls `file` makes (`FileTransport`: an upload call and a
//!   chunk stream), for the gRPC channel and the gateway's fake platform.
//! - `follow_up`: what an import leaves to do after its commit (`FollowUp`), for the
//!   gateway's and the client's drivers.
//! - `device`: this device's keys (`create_device_keys`, `device_key`, the registration),
//!   one-time prekey top-up (`replenish_one_time_prekeys`), and signed prekey rotation and its
//!   schedule (`SignedPrekeySchedule`, `rotate_signed_prekey_if_due`).
//! - `certify`: the responder's check of a device that starts a session with this one
//!   (`devices_to_certify`, `record_certified_devices`).
//! - `open`: receiving (`open_envelope`, which session slot a message opens with).
//! - `seal`: sending (`add_sessions`, `seal`, `seal_for`, `reseal_after_stale`, the known
//!   devices of a peer).
//! - `group`: MLS groups of this device: key packages, create, join (external commit or
//!   Welcome), commits that add or remove members, group messages both ways.
//! - `kept`: groups kept loaded between calls, used only while their stored version is
//!   unchanged.
//! - `leaf`: trusting a group leaf (its proof, the identity key pinned for its user), this
//!   device's own proof (`save_own_proof`).
//! - `posters`: who may post in each channel, as received, so a post from anyone else is
//!   dropped.
//! - `padding`: every plaintext padded to a size bucket before it is encrypted.
//! - `rejoin`: a rejoin by external commit checked against the last verified tree (signer,
//!   epoch), and the newcomers it brings.
//! - `removals`: devices their account removed for good (signed removals), refused from then on.
//! - `replay`: the ephemeral keys of first messages accepted without a one-time prekey, so a
//!   replayed one starts nothing.
//! - `sequence`: each sending device numbers its messages per conversation inside the
//!   content; a receiver notes gaps and reports the numbers still missing after a grace.
//! - `skipped_keys`: the sweep that deletes skipped message keys older than 30 days.
//! - `store`: the tables (`TABLES_V1`) and their queries.
//!
//! This file holds the error type, `Registration`, and the re-exports callers use
//! (`e2e::seal`, `e2e::open_envelope`, ...).

pub mod bot_key;
mod certify;
pub mod deletions;
mod device;
pub mod file;
mod file_transport;
pub mod follow_up;
pub mod group;
pub mod inbound;
pub mod kept;
pub mod leaf;
pub mod posters;
mod open;
pub mod padding;
pub mod rejoin;
pub mod removals;
mod replay;
mod seal;
pub mod sequence;
mod skipped_keys;
mod store;
pub mod vouch;
pub mod wal;

pub use device::{
    create_device_keys, current_signed_prekey, device_key, forget_own_device, sessions_receive_only_after_restore, RECEIVE_ONLY_TABLES, local_one_time_prekey_count, own_identity_key, registration,
    replenish_one_time_prekeys, rotate_signed_prekey_if_due, save_registration, signed_prekey_due,
    SignedPrekeySchedule, MAX_LOCAL_ONE_TIME_PREKEYS, ONE_TIME_PREKEY_TARGET,
};
pub use certify::{devices_to_certify, record_certified_devices, starts_session, Certified, OnIdentityChange, Refusal};
pub use open::{checked_group_content, open_envelope, open_envelope_noting, Opened};
pub use seal::{
    add_sessions, devices_with_session, devices_without_session, known_devices, remove_devices,
    reseal_after_stale, seal, seal_for, start_sessions,
};
pub use replay::TABLES as REPLAY_TABLES;
pub use skipped_keys::expire_skipped_keys;
pub use store::TABLES_V1;

/// Creates every `e2e` table at once in a database that has none, for one that is not opened
/// through numbered migrations (tests, a member's device in them); migrated databases list
/// `TABLES_V1`, `inbound::TABLES_V2`, `leaf::TABLES`, `posters::TABLES`, `REPLAY_TABLES` and
/// `DEVICE_PROOF_TABLES` as their steps.
pub fn create_all_tables(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    conn.execute_batch(TABLES_V1)?;
    conn.execute_batch(inbound::TABLES_V2)?;
    conn.execute_batch(leaf::TABLES)?;
    conn.execute_batch(posters::TABLES)?;
    conn.execute_batch(replay::TABLES)?;
    conn.execute_batch(DEVICE_PROOF_TABLES[0])?;
    conn.execute_batch(DEVICE_PROOF_TABLES[1])?;
    conn.execute_batch(rejoin::TABLES)?;
    conn.execute_batch(sequence::TABLES)?;
    conn.execute_batch(vouch::TABLES)?;
    conn.execute_batch(deletions::TABLES)?;
    conn.execute_batch(device::RECEIVE_ONLY_TABLES)
}

/// The step every database holding `e2e` tables takes for devices' second-version
/// certificates and signed removals (`leaf::TABLES_V2`, `removals::TABLES`).
pub const DEVICE_PROOF_TABLES: [&str; 2] = [leaf::TABLES_V2, removals::TABLES];

/// Prepared statements to keep per connection of a database that runs these modules'
/// statements (the gateway's and `e2e-chat`'s): one inbound envelope runs a few dozen distinct
/// ones, and rusqlite keeps 16 by default, so they were parsed again every time.
pub const STATEMENT_CACHE: usize = 128;

/// A plain text message as it travels end to end (no entities, no reply).
pub fn text_content(text: &str) -> crate::wire::e2e::Content {
    let mut content = crate::wire::e2e::Content::new();
    content.set_text(crate::wire::e2e::Text { text: text.to_string(), ..Default::default() });
    content
}

use crate::crypto;

#[derive(Debug)]
pub enum E2eError {
    Crypto(crypto::CryptoError),
    Db(rusqlite::Error),
    /// A peer device presented a key different from the one recorded for it.
    DeviceKeyChanged { user_id: u64, device_id: u32 },
    /// A device certificate in a bundle did not verify against the account identity.
    BadCertificate { user_id: u64, device_id: u32 },
    /// The platform served another account identity key for a user than the one pinned
    /// (`leaf::pin_identity`): nothing is sent until the person accepts it.
    IdentityChanged { user_id: u64 },
    /// A first message (X3DH) from a device whose certificate this device has not checked
    /// (`certify`): no session is started with it.
    UnverifiedDevice { user_id: u64, device_id: u32 },
    /// The platform served a device its account removed for good (a signed removal,
    /// `removals`): no session is started with it.
    RemovedDevice { user_id: u64, device_id: u32 },
    /// A normal message arrived from a device we have no session with.
    NoSession { user_id: u64, device_id: u32 },
    /// The plaintext was not a valid `Content`.
    BadContent,
    /// This device has not created its keys yet.
    NotInitialized,
    /// An MLS group operation failed (openmls' reason, naming the group where it can).
    Mls(String),
    /// A group leaf this device does not trust (`leaf`): nothing of the step that brought it
    /// was kept. A security alert: the platform, or a member, tried to add a device.
    UntrustedLeaf { group: String, refusal: leaf::LeafRefusal },
    /// A commit for an epoch older than the group's: a replay (the platform delivered an old
    /// commit again). Dropped, never a reason to rejoin.
    ReplayedCommit { group: String, epoch: u64, current: u64 },
    /// A GroupInfo served for a rejoin that the last verified tree does not vouch for
    /// (`rejoin`): nothing was joined, and the verified state is kept. A security alert.
    RejoinRefused { group: String, why: String },
    /// A message whose envelope is not what its sender vouched for inside (`vouch`): another
    /// id or date, or none from a device that vouches. Refused: a security alert.
    Unvouched { user_id: u64, device_id: u32, message_id: u64, why: String },
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
            E2eError::IdentityChanged { user_id } => write!(
                f,
                "the platform serves another identity key for user {user_id} than the one pinned when this device first met them"
            ),
            E2eError::UnverifiedDevice { user_id, device_id } => write!(
                f,
                "device {device_id} of user {user_id} starts a session, but its certificate was not checked or did not pass"
            ),
            E2eError::RemovedDevice { user_id, device_id } => write!(
                f,
                "the platform serves device {device_id} of user {user_id}, which its account removed (a signed removal); refused"
            ),
            E2eError::NoSession { user_id, device_id } => {
                write!(f, "no session with user {user_id} device {device_id}")
            }
            E2eError::BadContent => write!(f, "decrypted payload is not a valid message"),
            E2eError::NotInitialized => write!(f, "device keys not created"),
            E2eError::Mls(e) => write!(f, "group: {e}"),
            E2eError::UntrustedLeaf { group, refusal } => write!(f, "group {group}: leaf refused: {refusal}"),
            E2eError::ReplayedCommit { group, epoch, current } => {
                write!(f, "group {group}: a commit for epoch {epoch}, older than the group's epoch {current}: a replay, dropped")
            }
            E2eError::Unvouched { user_id, device_id, message_id, why } => write!(
                f,
                "message {message_id} from user {user_id} device {device_id} was refused: {why} (the platform changed what its sender vouched for)"
            ),
            E2eError::RejoinRefused { group, why } => write!(
                f,
                "group {group}: the platform served a GroupInfo to rejoin from that the verified group does not vouch for ({why}); not rejoined, the verified state is kept"
            ),
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

#[cfg(test)]
mod testing {
    //! Two (or three) devices, each with its own in-memory database, talking through
    //! `seal` / `open_envelope` with no server: the test plays the platform. Used by the tests
    //! of `device`, `open` and `seal`.

    use protobuf::MessageField;
    use rusqlite::Connection;

    use super::*;
    use crate::crypto::IdentityKeyPair;
    use crate::wire::platform::{
        DeviceCertificate, DeviceKeys, GetDeviceCertificatesRequest, GetDeviceCertificatesResponse, InboxEnvelope,
        PrekeyBundle, Profile,
    };

    pub(super) struct Device {
        pub(super) conn: Connection,
        pub(super) account: IdentityKeyPair,
        pub(super) keys: DeviceKeys,
        pub(super) user_id: u64,
        pub(super) device_id: u32,
        /// Where the database lives once moved to a file (`on_disk`).
        _dir: Option<tempfile::TempDir>,
    }

    impl Device {
        /// The same device with its database in a file (copied from memory): groups are kept
        /// loaded between calls only for a database with a name (`kept`).
        pub(super) fn on_disk(mut self) -> Device {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("device.db");
            self.conn.execute("VACUUM INTO ?1", [path.to_str().expect("utf-8 path")]).expect("copy to a file");
            self.conn = Connection::open(&path).expect("open the copy");
            self.conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF;").expect("pragmas");
            self._dir = Some(dir);
            self
        }

        pub(super) fn new(user_id: u64, device_id: u32) -> Device {
            crypto::init();
            let conn = Connection::open_in_memory().expect("in-memory db");
            create_all_tables(&conn).expect("tables");
            let account = IdentityKeyPair::generate();
            let keys = create_device_keys(&conn, &account).expect("device keys");
            save_registration(&conn, Registration { user_id, device_id }).expect("registration");
            Device { conn, account, keys, user_id, device_id, _dir: None }
        }

        pub(super) fn profile(&self) -> Profile {
            let mut p = Profile::new();
            p.user_id = self.user_id;
            p.username = format!("user{}", self.user_id);
            p.identity_key = self.account.public_key().to_vec();
            p
        }

        /// What the platform would serve: the keys with the one-time prekey at `index`.
        pub(super) fn bundle(&self, one_time_index: Option<usize>) -> PrekeyBundle {
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

        /// What GetDeviceCertificates would answer for this device.
        pub(super) fn certificates(&self) -> GetDeviceCertificatesResponse {
            GetDeviceCertificatesResponse {
                profile: MessageField::some(self.profile()),
                devices: vec![DeviceCertificate {
                    device_id: self.device_id,
                    device_key: self.keys.device_key.clone(),
                    device_certificate: self.keys.device_certificate.clone(),
                    ..Default::default()
                }],
                ..Default::default()
            }
        }

        /// What a receiving program does before it opens a first message from `peer`: checks
        /// and records its device (`certify`), unless recorded already.
        pub(super) fn introduce(&self, peer: &Device) {
            let request = GetDeviceCertificatesRequest {
                user_id: peer.user_id,
                device_ids: vec![peer.device_id],
                ..Default::default()
            };
            record_certified_devices(&self.conn, &request, &peer.certificates(), OnIdentityChange::Refuse)
                .expect("certify");
        }

        /// Seals `text` for `to` and hands it over as the platform would, `to` having checked
        /// this device first (as every receiving program does).
        pub(super) fn send(&self, to: &Device, text: &str) -> InboxEnvelope {
            to.introduce(self);
            self.seal_only(to, text)
        }

        /// `send` without `to` checking this device first.
        pub(super) fn seal_only(&self, to: &Device, text: &str) -> InboxEnvelope {
            let sealed = seal(&self.conn, to.user_id, &text_content(text)).expect("seal");
            assert_eq!(sealed.len(), 1, "one ciphertext per known device");
            assert_eq!(sealed[0].device_id, to.device_id);
            self.envelope(sealed[0].ciphertext.clone())
        }

        pub(super) fn envelope(&self, ciphertext: Vec<u8>) -> InboxEnvelope {
            let mut e = InboxEnvelope::new();
            e.sender_user_id = self.user_id;
            e.sender_device_id = self.device_id;
            e.ciphertext = ciphertext;
            e
        }
    }

    pub(super) fn open_text(d: &Device, e: &InboxEnvelope) -> String {
        open_envelope(&d.conn, e).expect("open").text().text.clone()
    }
}
