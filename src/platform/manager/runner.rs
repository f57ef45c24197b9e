//! The management bot as a device of the platform, run in-process on the `manager-bot` thread:
//! set-up of its account and device, then a loop that reads its inbox, opens envelopes, runs
//! the conversation logic (`commands`), applies platform effects, and sends sealed replies.
//!
//! # Crash safety
//! One inbox entry is handled in one `manager.db` transaction: the opened envelope (advanced
//! session, used prekey), the user's new scenario, the sealed replies (advanced sessions, outbox
//! rows) and the inbox cursor commit together; only then is the entry acknowledged. A crash
//! before the commit replays the entry from the platform; after it, the cursor skips it.
//!
//! A platform effect (create, rotate, disable, rekey) cannot share that transaction: it lives in
//! `platform.db`. So the first transaction also records the effect with its token secret chosen
//! up front (a bot's identity key comes proved from its owner's client; its secret is never
//! here); the effect is applied idempotently (the same key and token secret give the same
//! bot); a second transaction queues the effect's replies and deletes the record. A crash anywhere in between
//! re-applies the same effect and queues the same answer, and never a second bot.
//!
//! Replies are committed sealed and later sent from the outbox in commit order, each under its
//! own client message id; a retry resends the committed ciphertexts (a message key is never
//! used twice). Effects are finished and the outbox flushed before the next entry is handled,
//! so replies reach the user in the order of their messages.

use std::sync::Arc;
use std::time::Duration;

use protobuf::Message;
use rusqlite::{Connection, TransactionBehavior};

use super::super::bots::{self, BotSecrets};
use zeroize::Zeroizing;
use super::super::error::PlatformError;
use super::super::inbox::{InboxHub, LocalInbox, LocalWake};
use super::super::convert;
use super::super::store::{self, Account, AccountStatus, DeviceAddr, InboxEntry, Outgoing, SendOutcome, Store};
use super::commands::{self, BotInfo, DeviceView, Directory, Effect, EffectOutcome, Message as ManagerMessage};
use super::state::{self, PendingEffect};
use super::ManagerConfig;
use crate::backoff::Backoff;
use crate::clock::unix_now;
use crate::crypto::{self, IdentityKeyPair};
use crate::e2e::{self, inbound, E2eError, Registration};
use crate::migrations::MigrationError;
use crate::wire::e2e::Content;
use crate::wire::platform::{DeviceCiphertext, InboxEnvelope, PrekeyBundle};

/// Inbox entries read per query.
const READ_BATCH: usize = 64;
/// Rounds of "stale device list, fix, resend" for one reply before it is dropped.
const MAX_STALE_ROUNDS: u32 = 5;
/// Retry delays after a failed step: doubling from the first to the last.
const BACKOFF_FIRST: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// Why a step of the management bot failed; the step is retried after a delay.
#[derive(Debug)]
pub enum RunError {
    Platform(PlatformError),
    E2e(E2eError),
    Db(rusqlite::Error),
    /// `manager.db` could not be brought to this release's schema (or is from a newer one).
    Schema(MigrationError),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Platform(e) => write!(f, "platform: {e}"),
            RunError::E2e(e) => write!(f, "end-to-end state: {e}"),
            RunError::Db(e) => write!(f, "manager database: {e}"),
            RunError::Schema(e) => write!(f, "manager database: {e}"),
        }
    }
}

impl std::error::Error for RunError {}

impl From<PlatformError> for RunError {
    fn from(e: PlatformError) -> Self {
        RunError::Platform(e)
    }
}

impl From<E2eError> for RunError {
    fn from(e: E2eError) -> Self {
        match e {
            E2eError::Db(e) => RunError::Db(e),
            other => RunError::E2e(other),
        }
    }
}

impl From<rusqlite::Error> for RunError {
    fn from(e: rusqlite::Error) -> Self {
        RunError::Db(e)
    }
}

type RunResult<T> = std::result::Result<T, RunError>;

/// The management bot's device and what it works with. Owned by the `manager-bot` thread.
pub(super) struct Runner {
    /// `manager.db`, held exclusively.
    db: Connection,
    store: Arc<Store>,
    hub: Arc<InboxHub>,
    /// Reads the device's inbox from `platform.db`.
    reader: Connection,
    me: DeviceAddr,
    /// The platform endpoint written into the gateway config of a new bot (`None`: a
    /// placeholder).
    endpoint: Option<String>,
}

impl Runner {
    /// Opens `manager.db`, creates the identity and device keys on first start, makes sure the
    /// platform account (username from `config`) and the device exist, and tops up prekeys.
    pub(super) fn set_up(
        data_dir: &std::path::Path,
        store: Arc<Store>,
        hub: Arc<InboxHub>,
        config: &ManagerConfig,
        endpoint: Option<String>,
    ) -> RunResult<Runner> {
        crypto::init();
        let mut db = state::open(data_dir).map_err(|e| match e {
            state::OpenError::Db(rusqlite::Error::SqliteFailure(f, _)) if f.code == rusqlite::ErrorCode::DatabaseBusy => {
                RunError::Platform(PlatformError::Internal(format!(
                    "{} is in use by another platform-server on the same data directory",
                    data_dir.join(state::DB_FILE).display()
                )))
            }
            state::OpenError::Db(e) => RunError::Db(e),
            state::OpenError::Schema(e) => RunError::Schema(e),
        })?;
        let (identity, device_keys) = {
            let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let seed = match state::identity_seed(&tx)? {
                Some(seed) => seed,
                None => {
                    let seed = crypto::random_bytes::<32>();
                    state::save_identity_seed(&tx, &seed)?;
                    seed
                }
            };
            let identity = IdentityKeyPair::from_seed(&seed);
            let keys = e2e::create_device_keys(&tx, &identity)?;
            tx.commit()?;
            (identity, keys)
        };
        let now = unix_now();
        let user_id =
            store.ensure_manager_account(&config.username, &config.display_name, &identity.public_key(), now)?;

        let registration = e2e::registration(&db)?;
        let current = match registration {
            Some(r) if r.user_id == user_id => {
                let addr = DeviceAddr { user_id, device_id: r.device_id };
                store.device(addr)?.filter(|d| d.active && d.device_key == device_keys.device_key).map(|_| addr)
            }
            _ => None,
        };
        let me = match current {
            Some(addr) => addr,
            None => {
                let device = convert::verified_device(&identity.public_key(), &device_keys, || {
                    PlatformError::Internal("the management bot's own device certificate does not verify".into())
                })?;
                let device_id = store.register_bot_device(user_id, &device, now)?;
                let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
                if registration.is_some_and(|r| r.user_id != user_id) {
                    // platform.db was replaced: the old inbox seqs and users mean nothing now.
                    log::warn!("management bot: the platform account changed; forgetting the old dialog state");
                    state::reset_dialog_state(&tx)?;
                }
                e2e::save_registration(&tx, Registration { user_id, device_id })?;
                tx.commit()?;
                log::info!("management bot @{} registered device {device_id}", config.username);
                DeviceAddr { user_id, device_id }
            }
        };
        // The device's second-version certificate, given to the store directly (in-process).
        let certificate = {
            let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let registration = Registration { user_id: me.user_id, device_id: me.device_id };
            let certificate = e2e::leaf::certify_own_device(&tx, &identity, registration, now)?;
            tx.commit()?;
            certificate
        };
        let signature = convert::sig64(&certificate.signature, "the management bot's certificate")?;
        store.certify_device(me, &store::CertificateV2 { created_at: certificate.created_at, signature })?;
        let reader = store.open_reader()?;
        let mut runner = Runner { db, store, hub, reader, me, endpoint };
        runner.top_up_prekeys()?;
        Ok(runner)
    }

    pub(super) fn device(&self) -> DeviceAddr {
        self.me
    }

    /// The thread's loop: a step whenever the inbox is notified, retries with backoff after a
    /// failure, until `inbox` is closed.
    pub(super) fn run(mut self, inbox: LocalInbox) {
        let mut backoff = Backoff::new(BACKOFF_FIRST, BACKOFF_MAX);
        loop {
            let timeout = match self.step(&inbox) {
                Ok(()) => {
                    backoff.reset();
                    None
                }
                Err(e) => {
                    let next = backoff.next_delay();
                    log::warn!("management bot: {e}; retrying in {next:?}");
                    Some(next)
                }
            };
            if inbox.wait(timeout) == LocalWake::Closed {
                break;
            }
        }
        log::info!("management bot stopped");
    }

    /// Finishes leftover work, then handles every waiting inbox entry in order.
    fn step(&mut self, inbox: &LocalInbox) -> RunResult<()> {
        self.finish_effects()?;
        self.flush_outbox()?;
        let mut after = 0;
        loop {
            let entries = store::read_inbox(&self.reader, self.me, after, READ_BATCH)?;
            let full = entries.len() == READ_BATCH;
            for entry in entries {
                if inbox.is_closed() {
                    return Ok(());
                }
                after = entry.seq;
                self.handle_entry(entry)?;
                self.finish_effects()?;
                self.flush_outbox()?;
            }
            if !full {
                break;
            }
        }
        self.top_up_prekeys()
    }

    // ── Receiving ──

    /// Handles one inbox entry in one transaction, then acknowledges it.
    fn handle_entry(&mut self, entry: InboxEntry) -> RunResult<()> {
        let (seq, sender) = (entry.seq, entry.sender);
        let cmid = entry.client_message_id.clone();
        if inbound::is_repeat(&self.db, seq, sender.user_id, &cmid)? {
            // Handled before a crash or a failed acknowledgement.
            self.store.ack(self.me, &[seq])?;
            return Ok(());
        }
        if entry.sender_is_bot {
            // Answering bots could make two bots talk to each other forever.
            log::info!("management bot: ignoring message {seq} from bot {}", sender.user_id);
            return self.skip(seq, sender.user_id, &cmid);
        }
        let envelope = InboxEnvelope {
            seq,
            sender_user_id: sender.user_id,
            sender_device_id: sender.device_id,
            message_id: entry.message_id,
            date: entry.date,
            ciphertext: entry.ciphertext,
            client_message_id: entry.client_message_id,
            ..Default::default()
        };
        self.check_new_sender(&envelope)?;
        let tx = self.db.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let content = match e2e::open_envelope(&tx, &envelope) {
            Ok(content) => content,
            Err(E2eError::Db(e)) => return Err(e.into()),
            Err(e) => {
                drop(tx);
                log::warn!(
                    "management bot: cannot open message {seq} from device {} of user {}: {e}; skipping it",
                    sender.device_id,
                    sender.user_id
                );
                return self.skip(seq, sender.user_id, &cmid);
            }
        };
        let user_id = sender.user_id;
        let scenario = state::scenario(&tx, user_id)?;
        let decision = if content.has_text() {
            let message = ManagerMessage { text: &content.text().text, bot_key: content.bot_key.as_ref(), now: unix_now() };
            commands::handle(message, user_id, &scenario, &StoreDirectory(&self.store, &self.hub))?
        } else {
            commands::handle_non_text(&scenario)
        };
        state::set_scenario(&tx, user_id, &decision.scenario)?;
        queue_replies(&tx, &self.store, user_id, &decision.replies)?;
        if let Some(effect) = &decision.effect {
            let token = match effect {
                Effect::CreateBot { .. } | Effect::RotateToken { .. } => Some(crypto::random_bytes::<32>()),
                Effect::Rekey { .. } | Effect::DisableBot { .. } | Effect::RemoveDevice { .. } => None,
            };
            state::insert_effect(&tx, user_id, effect, token.as_ref())?;
        }
        inbound::accept(&tx, seq, user_id, &cmid)?;
        tx.commit()?;
        self.store.ack(self.me, &[seq])?;
        log::debug!("management bot: handled message {seq} from user {user_id}");
        Ok(())
    }

    /// A first message from a device not met before: its certificate checked against the
    /// user's account before the open (`e2e::record_certified_devices`); one that fails is not
    /// recorded, and the open refuses the message. The management bot is the platform's own,
    /// so it takes a user's changed identity key from the platform's directory (pinned anew).
    fn check_new_sender(&mut self, envelope: &InboxEnvelope) -> RunResult<()> {
        for request in e2e::devices_to_certify(&self.db, std::slice::from_ref(envelope))? {
            let answer = match convert::device_certificates(&self.store, request.clone()) {
                Ok(answer) => answer,
                Err(PlatformError::NotFound(_)) => continue,
                Err(e) => return Err(e.into()),
            };
            let certified = e2e::record_certified_devices(&self.db, &request, &answer, e2e::OnIdentityChange::Accept)?;
            for (device_id, why) in certified.refused {
                log::warn!("management bot: device {device_id} of user {}: {why}", request.user_id);
            }
        }
        Ok(())
    }

    /// Accepts an entry that gets no answer (so it is never taken again), and acknowledges it.
    fn skip(&mut self, seq: u64, sender: u64, client_message_id: &str) -> RunResult<()> {
        inbound::accept(&self.db, seq, sender, client_message_id)?;
        self.store.ack(self.me, &[seq])?;
        Ok(())
    }

    // ── Effects ──

    /// Applies every recorded effect and queues its replies, oldest first.
    fn finish_effects(&mut self) -> RunResult<()> {
        while let Some(pending) = state::first_effect(&self.db)? {
            let outcome = apply_effect(&self.store, &self.hub, self.endpoint.as_deref(), &pending)?;
            let tx = self.db.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let scenario = state::scenario(&tx, pending.user_id)?;
            let (replies, scenario) = commands::complete(&pending.effect, outcome, scenario);
            state::set_scenario(&tx, pending.user_id, &scenario)?;
            queue_replies(&tx, &self.store, pending.user_id, &replies)?;
            state::delete_effect(&tx, pending.id)?;
            tx.commit()?;
        }
        Ok(())
    }

    // ── Sending ──

    /// Sends the outbox in order; stops at the first failure to reach the store (retried later).
    fn flush_outbox(&mut self) -> RunResult<()> {
        while let Some(row) = state::outbox_head(&self.db)? {
            let outgoing = Outgoing {
                client_message_id: row.client_message_id.clone(),
                recipient_id: row.recipient_id,
                ciphertexts: row.ciphertexts.clone(),
                inline_session_id: 0,
            };
            let batch = self.store.send_messages(self.me, std::slice::from_ref(&outgoing), unix_now())?;
            // The same wake-up the gRPC send path gives the recipients' Inbox streams.
            self.hub.notify(&batch.delivered_to);
            let user_id = row.recipient_id;
            match batch.outcomes.into_iter().next() {
                Some(SendOutcome::Ok { message_id, .. }) => {
                    state::delete_outbox(&self.db, row.id)?;
                    log::debug!("management bot: reply {message_id} to user {user_id} delivered");
                }
                Some(SendOutcome::StaleDevices { missing, removed }) => {
                    if row.stale_rounds >= MAX_STALE_ROUNDS {
                        log::warn!("management bot: the device list of user {user_id} kept changing; dropping a reply");
                        state::delete_outbox(&self.db, row.id)?;
                        continue;
                    }
                    let tx = self.db.transaction_with_behavior(TransactionBehavior::Immediate)?;
                    reseal_for_devices(&tx, &self.store, &row, &missing, &removed)?;
                    state::bump_stale_rounds(&tx, row.id)?;
                    tx.commit()?;
                }
                Some(SendOutcome::UnknownRecipient) => {
                    log::warn!("management bot: user {user_id} no longer exists; dropping a reply");
                    state::delete_outbox(&self.db, row.id)?;
                }
                Some(SendOutcome::Rejected(reason)) => {
                    log::warn!("management bot: a reply to user {user_id} was refused ({reason}); dropping it");
                    state::delete_outbox(&self.db, row.id)?;
                }
                None => return Err(PlatformError::Internal("a send of one message gave no outcome".into()).into()),
            }
        }
        Ok(())
    }

    // ── Prekeys ──

    /// Uploads fresh one-time prekeys when the platform holds fewer than half the target.
    fn top_up_prekeys(&mut self) -> RunResult<()> {
        let remaining = self.store.one_time_prekey_count(self.me)?;
        if remaining >= e2e::ONE_TIME_PREKEY_TARGET / 2 {
            return Ok(());
        }
        let tx = self.db.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let fresh = e2e::replenish_one_time_prekeys(&tx, remaining)?;
        tx.commit()?;
        let keys: Vec<(u32, [u8; 32])> =
            fresh.iter().filter_map(|k| Some((k.id, k.public_key.as_slice().try_into().ok()?))).collect();
        let now_held = self.store.upload_prekeys(self.me, &keys, None, false)?;
        log::info!("management bot: uploaded {} one-time prekeys ({now_held} held)", keys.len());
        Ok(())
    }
}

/// Applies an effect to the platform. `Err` only when storage failed (retried later); a refusal
/// (say the username was taken meanwhile) is an outcome the user is told about.
fn apply_effect(store: &Store, hub: &InboxHub, endpoint: Option<&str>, pending: &PendingEffect) -> RunResult<EffectOutcome> {
    let missing_secret = || Ok(EffectOutcome::Failed(PlatformError::Internal("the request was damaged".into())));
    let result = match &pending.effect {
        Effect::CreateBot { username, display_name, capabilities, identity_key } => {
            let Some(token_secret) = pending.token_secret else { return missing_secret() };
            let owner = Some(pending.user_id);
            let created = match &pending.legacy_recovery_secret {
                None => bots::create_bot_for_key(store, username, display_name, capabilities, owner, identity_key, &token_secret),
                // Recorded by an earlier version, which drew the secret: finished as it began.
                Some(secret) => {
                    let secrets = BotSecrets { recovery_secret: Zeroizing::new(**secret), token_secret };
                    bots::provision_bot_with(store, username, display_name, capabilities, owner, &secrets)
                }
            };
            created.map(|credentials| EffectOutcome::Created {
                credentials,
                capabilities: capabilities.clone(),
                endpoint: endpoint.map(str::to_string),
            })
        }
        Effect::Rekey { bot_id, username, identity_key } => {
            store.rekey_bot(*bot_id, identity_key, unix_now()).map(|removed| {
                // After the store refuses their credentials, so a reconnect is refused too.
                for device_id in &removed {
                    hub.remove_device(DeviceAddr { user_id: *bot_id, device_id: *device_id });
                }
                log::info!(
                    "management bot: bot {bot_id} (@{username}) has a new identity key; removed {} device(s) of the old one",
                    removed.len()
                );
                EffectOutcome::Rekeyed { bot_id: *bot_id, identity_key: *identity_key, removed_devices: removed.len() }
            })
        }
        Effect::RotateToken { bot_id, username } => {
            let Some(secret) = pending.token_secret else { return missing_secret() };
            store.rotate_bot_token_to(*bot_id, &secret).map(|token| {
                log::info!("management bot: rotated the token of bot {bot_id} (@{username})");
                hub.revoke_account(*bot_id);
                EffectOutcome::Rotated { token }
            })
        }
        Effect::DisableBot { bot_id, username } => store.set_bot_status(*bot_id, AccountStatus::Disabled).map(|()| {
            log::info!("management bot: disabled bot {bot_id} (@{username})");
            hub.disable_account(*bot_id);
            EffectOutcome::Disabled
        }),
        Effect::RemoveDevice { bot_id, username, device_id } => {
            let addr = DeviceAddr { user_id: *bot_id, device_id: *device_id };
            store.remove_device(addr, unix_now()).map(|removal| {
                // After the store refuses its credential, so a reconnect is refused too.
                hub.remove_device(addr);
                match removal {
                    store::Removal::Removed { dropped } => {
                        log::info!(
                            "management bot: removed device {device_id} of bot {bot_id} (@{username}); \
                             dropped {dropped} undelivered envelopes"
                        );
                        EffectOutcome::DeviceRemoved { dropped, already: false }
                    }
                    store::Removal::AlreadyRemoved => EffectOutcome::DeviceRemoved { dropped: 0, already: true },
                }
            })
        }
    };
    match result {
        Ok(outcome) => Ok(outcome),
        Err(e @ PlatformError::Internal(_)) => Err(e.into()),
        Err(e) => Ok(EffectOutcome::Failed(e)),
    }
}


fn pairs(sealed: Vec<DeviceCiphertext>) -> Vec<(u32, Vec<u8>)> {
    sealed.into_iter().map(|c| (c.device_id, c.ciphertext)).collect()
}

/// Seals each reply for every active device of `user_id` and queues it in the outbox, inside
/// the caller's transaction.
fn queue_replies(tx: &Connection, store: &Store, user_id: u64, replies: &[String]) -> RunResult<()> {
    if replies.is_empty() {
        return Ok(());
    }
    sync_devices(tx, store, user_id)?;
    for text in replies {
        let content = crate::e2e::text_content(text);
        let sealed = e2e::seal(tx, user_id, &content)?;
        let client_message_id = format!("manager-{}", crypto::hex_encode(&crypto::random_bytes::<16>()));
        let bytes = content.write_to_bytes().expect("encoding a message in memory cannot fail");
        state::insert_outbox(tx, &client_message_id, user_id, &bytes, &pairs(sealed))?;
    }
    Ok(())
}

/// Brings the sessions with `user_id` in line with the platform's active devices: forgets
/// removed devices, starts sessions with new ones. The platform is in-process, so this avoids
/// most stale-device rounds.
fn sync_devices(tx: &Connection, store: &Store, user_id: u64) -> RunResult<()> {
    let active = store.active_device_ids(user_id)?;
    let gone: Vec<u32> = e2e::known_devices(tx, user_id)?.into_iter().filter(|d| !active.contains(d)).collect();
    if !gone.is_empty() {
        e2e::remove_devices(tx, user_id, &gone)?;
    }
    let with_session = e2e::devices_with_session(tx, user_id)?;
    let missing: Vec<u32> = active.into_iter().filter(|d| !with_session.contains(d)).collect();
    start_sessions(tx, store, user_id, &missing)
}

/// Starts sessions (X3DH initiator) with the listed devices of `user_id` from fresh bundles.
/// A device whose bundle does not verify is left out (logged); the others still get sessions.
fn start_sessions(tx: &Connection, store: &Store, user_id: u64, device_ids: &[u32]) -> RunResult<()> {
    if device_ids.is_empty() {
        return Ok(());
    }
    let Some(account) = store.account_by_id(user_id)? else { return Ok(()) };
    let bundles: Vec<PrekeyBundle> =
        store.take_prekey_bundles(user_id, device_ids)?.into_iter().map(convert::bundle_to_wire).collect();
    if bundles.is_empty() {
        return Ok(());
    }
    let profile = convert::profile(account);
    match e2e::add_sessions(tx, &profile, &bundles) {
        Ok(()) => Ok(()),
        Err(E2eError::Db(e)) => Err(e.into()),
        Err(first) => {
            // add_sessions writes nothing when one bundle fails: add them one at a time.
            log::warn!("management bot: a device bundle of user {user_id} was refused ({first})");
            for bundle in &bundles {
                match e2e::add_sessions(tx, &profile, std::slice::from_ref(bundle)) {
                    Ok(()) => {}
                    Err(E2eError::Db(e)) => return Err(e.into()),
                    Err(e) => {
                        log::warn!("management bot: no session with device {} of user {user_id}: {e}", bundle.device_id)
                    }
                }
            }
            Ok(())
        }
    }
}

/// After STALE_DEVICES: starts sessions with the missing devices that have none, then mends the
/// queued reply the one way every sender does (`e2e::reseal_after_stale`): the committed
/// ciphertexts of unchanged devices are kept, never encrypted again.
fn reseal_for_devices(
    tx: &Connection,
    store: &Store,
    row: &state::OutboxRow,
    missing: &[u32],
    removed: &[u32],
) -> RunResult<()> {
    let user_id = row.recipient_id;
    log::info!("management bot: device list of user {user_id} changed: missing {missing:?}, removed {removed:?}");
    let content = match Content::parse_from_bytes(&row.content) {
        Ok(c) => c,
        Err(e) => {
            log::error!("management bot: a queued reply to user {user_id} is unreadable ({e}); it stays as it is");
            return Ok(());
        }
    };
    start_sessions(tx, store, user_id, &e2e::devices_without_session(tx, user_id, missing)?)?;
    let mut ciphertexts: Vec<DeviceCiphertext> = row
        .ciphertexts
        .iter()
        .map(|(device_id, ciphertext)| {
            let mut c = DeviceCiphertext::new();
            c.device_id = *device_id;
            c.ciphertext = ciphertext.clone();
            c
        })
        .collect();
    e2e::reseal_after_stale(tx, user_id, &mut ciphertexts, missing, removed, &content)?;
    state::remove_ciphertexts(tx, row.id, removed)?;
    state::put_ciphertexts(tx, row.id, &pairs(ciphertexts))?;
    Ok(())
}

/// The conversation logic's view of the platform store (and of who is connected now).
struct StoreDirectory<'a>(&'a Store, &'a InboxHub);

fn bot_info(a: Account) -> BotInfo {
    BotInfo {
        id: a.id,
        username: a.username,
        display_name: a.display_name,
        capabilities: a.capabilities.unwrap_or_else(|| "default".to_string()),
        active: a.status == AccountStatus::Active,
        owner_id: a.owner_id,
        bot_id_hex: crate::crypto::hex_encode(&a.identity_key),
    }
}

impl Directory for StoreDirectory<'_> {
    fn username_taken(&self, username: &str) -> super::super::Result<bool> {
        Ok(self.0.account_by_username(username)?.is_some())
    }

    fn bot_named(&self, username: &str) -> super::super::Result<Option<BotInfo>> {
        Ok(self.0.account_by_username(username)?.filter(|a| a.is_bot).map(bot_info))
    }

    fn bots_owned_by(&self, owner_id: u64) -> super::super::Result<Vec<BotInfo>> {
        Ok(self.0.bots_owned_by(owner_id)?.into_iter().map(bot_info).collect())
    }

    fn identity_key_in_use(&self, identity_key: &[u8; 32]) -> super::super::Result<bool> {
        self.0.identity_key_in_use(identity_key)
    }

    fn bot_devices(&self, bot_id: u64) -> super::super::Result<Vec<DeviceView>> {
        let devices = self.0.account_devices(bot_id)?;
        Ok(devices
            .into_iter()
            .map(|d| DeviceView {
                device_id: d.device_id,
                registered_at: d.registered_at,
                last_seen: d.last_seen,
                connected: self.1.is_connected(DeviceAddr { user_id: bot_id, device_id: d.device_id }),
                removed_at: d.removed_at,
            })
            .collect())
    }
}
