//! The bot's check of the user devices that start a private session with it (the responder's
//! side of X3DH): before a batch is imported, each sender device the bot has not recorded and
//! whose message starts a session has its certificate fetched (`GetDeviceCertificates`, which
//! uses up none of the user's one-time prekeys) and checked against the user's account identity
//! key, and that key against the one pinned for the user (`e2e::record_certified_devices`).
//! A device that fails starts no session: its message is dropped by the import, as a security
//! alert (a certificate that does not verify) or as an identity change (counted in
//! `botgw_identity_changes_total`, unless the bot's `accept_identity_changes` pins the new key).

use std::collections::HashMap;

use super::port::StepError;
use crate::gateway::ctx::Ctx;
use crate::e2e::{self, Refusal};
use crate::wire::platform::InboxEnvelope;
use crate::wire::rpc;

/// The sender devices of a batch that were refused, and why: the import says so for each of
/// their messages.
pub type Refused = HashMap<(u64, u32), Refusal>;

/// Checks the devices that start a session in `batch`. `Err` when the platform could not be
/// asked (unreachable): the batch must wait, or its first messages would be dropped.
pub fn check_senders(cx: &Ctx, batch: &[InboxEnvelope]) -> Result<Refused, StepError> {
    if !batch.iter().any(e2e::starts_session) {
        return Ok(Refused::new()); // the usual batch: no store read
    }
    let requests = cx.store.read(|c| Ok(e2e::devices_to_certify(c, batch)?))?;
    let mut refused = Refused::new();
    for request in requests {
        let answer = match cx.port.get_device_certificates(&request) {
            Ok(answer) => answer,
            // The platform refuses for good (no such user, a malformed request): the devices
            // are not served, and their messages are dropped.
            Err(e) if is_final(&e) => {
                log::warn!(
                    "bot @{}: no certificates for devices {:?} of user {}: {}",
                    cx.name,
                    request.device_ids,
                    request.user_id,
                    rpc::text(&e)
                );
                refused.extend(request.device_ids.iter().map(|&d| ((request.user_id, d), Refusal::NotServed)));
                continue;
            }
            Err(e) => return Err(StepError::platform("GetDeviceCertificates", e)),
        };
        let on_change = cx.on_identity_change;
        let certified =
            cx.store.write(move |c| Ok(e2e::record_certified_devices(c, &request, &answer, on_change)?))?;
        if certified.repinned {
            log::warn!(
                "bot @{}: user {} now has another identity key; pinned it (accept_identity_changes)",
                cx.name,
                certified.user_id
            );
        }
        refused.extend(certified.refused.iter().map(|&(d, why)| ((certified.user_id, d), why)));
    }
    Ok(refused)
}

/// A refusal that asking again would not change.
fn is_final(e: &grpcio::Error) -> bool {
    use grpcio::RpcStatusCode as C;
    matches!(rpc::code(e), Some(C::NOT_FOUND | C::INVALID_ARGUMENT | C::PERMISSION_DENIED | C::UNIMPLEMENTED))
}

#[cfg(test)]
mod tests {
    //! A user's device (its own database) starting private sessions with the test bot on the
    //! fake platform, which serves the certificates, honest or not.

    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    use protobuf::MessageField;
    use rusqlite::Connection;

    use crate::crypto::{identity, IdentityKeyPair};
    use crate::e2e::{self, OnIdentityChange, Registration};
    use crate::gateway::inbox::import_reported;
    use crate::gateway::port::fake::FakePlatform;
    use crate::gateway::ctx::Parts;
    use crate::gateway::store::queue;
    use crate::wire::platform::{
        DeviceCertificate, DeviceKeys, GetDeviceCertificatesRequest, GetDeviceCertificatesResponse, InboxEnvelope,
        PrekeyBundle, Profile,
    };

    const ALICE: u64 = 100;

    struct User {
        conn: Connection,
        account: IdentityKeyPair,
        keys: DeviceKeys,
        device_id: u32,
    }

    impl User {
        fn new(account: IdentityKeyPair, device_id: u32) -> User {
            let conn = Connection::open_in_memory().expect("db");
            e2e::create_all_tables(&conn).expect("tables");
            let keys = e2e::create_device_keys(&conn, &account).expect("keys");
            e2e::save_registration(&conn, Registration { user_id: ALICE, device_id }).expect("registration");
            User { conn, account, keys, device_id }
        }

        /// What GetDeviceCertificates serves for this device, its certificate signed by `signer`.
        fn certificates(&self, signer: &IdentityKeyPair) -> GetDeviceCertificatesResponse {
            let key: [u8; 32] = self.keys.device_key.as_slice().try_into().expect("32");
            GetDeviceCertificatesResponse {
                profile: MessageField::some(Profile {
                    user_id: ALICE,
                    username: "alice".into(),
                    identity_key: self.account.public_key().to_vec(),
                    ..Default::default()
                }),
                devices: vec![DeviceCertificate {
                    device_id: self.device_id,
                    device_key: self.keys.device_key.clone(),
                    device_certificate: identity::sign_device_certificate(signer, &key).to_vec(),
                    ..Default::default()
                }],
                ..Default::default()
            }
        }

        /// A new session with the bot from a bundle without a one-time prekey (the platform
        /// had none left), and a first message in it.
        fn first_message(&self, bot: &(Profile, PrekeyBundle), seq: u64, text: &str) -> InboxEnvelope {
            self.first_content(bot, seq, &e2e::text_content(text))
        }

        /// [`User::first_message`] carrying any content.
        fn first_content(&self, bot: &(Profile, PrekeyBundle), seq: u64, content: &crate::wire::e2e::Content) -> InboxEnvelope {
            e2e::add_sessions(&self.conn, &bot.0, std::slice::from_ref(&bot.1)).expect("session");
            self.message(seq, content)
        }

        /// `content` in the session this device holds with the bot, as the platform delivers
        /// it under inbox `seq`.
        fn message(&self, seq: u64, content: &crate::wire::e2e::Content) -> InboxEnvelope {
            let sealed = e2e::seal(&self.conn, 1, content).expect("seal");
            InboxEnvelope {
                seq,
                sender_user_id: ALICE,
                sender_device_id: self.device_id,
                sender_username: "alice".into(),
                message_id: seq,
                date: crate::clock::unix_now(),
                ciphertext: sealed[0].ciphertext.clone(),
                client_message_id: format!("c{seq}"),
                ..Default::default()
            }
        }
    }

    /// The test bot's parts (no whole bot) with device keys, and what a user fetches to write to it (no one-time
    /// prekey).
    fn bot(on_change: OnIdentityChange) -> (Parts, Arc<FakePlatform>, (Profile, PrekeyBundle)) {
        let mut bot = Parts::new();
        bot.on_identity_change = on_change;
        let fake = bot.fake.clone();
        let seed = bot.identity.seed();
        let keys = bot
            .store
            .write(move |c| {
                let keys = e2e::create_device_keys(c, &IdentityKeyPair::from_seed(&seed))?;
                e2e::save_registration(c, Registration { user_id: 1, device_id: 1 })?;
                Ok(keys)
            })
            .expect("device keys");
        let profile =
            Profile { user_id: 1, username: "b_bot".into(), is_bot: true, identity_key: bot.identity.public_key().to_vec(), ..Default::default() };
        let bundle = PrekeyBundle {
            device_id: 1,
            device_key: keys.device_key.clone(),
            device_certificate: keys.device_certificate.clone(),
            signed_prekey: keys.signed_prekey.clone(),
            ..Default::default()
        };
        (bot, fake, (profile, bundle))
    }

    fn serve(fake: &FakePlatform, answer: GetDeviceCertificatesResponse) {
        fake.answer_always("get_device_certificates", move |_: GetDeviceCertificatesRequest| Ok(answer.clone()));
    }

    fn queued(bot: &Parts) -> i64 {
        bot.store.read(queue::depth).expect("depth")
    }

    #[test]
    fn a_device_whose_certificate_does_not_chain_to_its_account_starts_nothing() {
        let (bot, fake, bot_keys) = bot(OnIdentityChange::Refuse);
        let alice = User::new(IdentityKeyPair::generate(), 1);
        // The platform made the device up: its certificate is signed by another key.
        serve(&fake, alice.certificates(&IdentityKeyPair::generate()));
        assert!(import_reported(&bot.ctx(), vec![alice.first_message(&bot_keys, 1, "/start")]).is_some());
        assert_eq!(queued(&bot), 0, "no update");
        assert_eq!(bot.metrics.security_alerts.load(Ordering::Relaxed), 1);
        assert_eq!(fake.calls_of("get_device_certificates").len(), 1);

        // Served honestly, the next first message starts a session.
        serve(&fake, alice.certificates(&alice.account));
        assert!(import_reported(&bot.ctx(), vec![alice.first_message(&bot_keys, 2, "/start")]).is_some());
        assert_eq!(queued(&bot), 1);
        // Known now: no more certificate fetches.
        let before = fake.calls_of("get_device_certificates").len();
        assert!(import_reported(&bot.ctx(), vec![alice.first_message(&bot_keys, 3, "again")]).is_some());
        assert_eq!((queued(&bot), fake.calls_of("get_device_certificates").len()), (2, before));
    }

    #[test]
    fn a_changed_identity_key_keeps_the_message_out_of_the_queue_unless_the_bot_accepts_changes() {
        for on_change in [OnIdentityChange::Refuse, OnIdentityChange::Accept] {
            let (bot, fake, bot_keys) = bot(on_change);
            let alice = User::new(IdentityKeyPair::generate(), 1);
            serve(&fake, alice.certificates(&alice.account));
            assert!(import_reported(&bot.ctx(), vec![alice.first_message(&bot_keys, 1, "/start")]).is_some());
            assert_eq!(queued(&bot), 1, "the first key is pinned");

            // The platform now serves another account key for Alice, with a new device under it.
            let other = User::new(IdentityKeyPair::generate(), 2);
            serve(&fake, other.certificates(&other.account));
            assert!(import_reported(&bot.ctx(), vec![other.first_message(&bot_keys, 2, "it is me")]).is_some());
            let changes = bot.metrics.identity_changes.load(Ordering::Relaxed);
            match on_change {
                OnIdentityChange::Refuse => assert_eq!((queued(&bot), changes), (1, 1), "kept out and counted"),
                OnIdentityChange::Accept => assert_eq!((queued(&bot), changes), (2, 0), "accepted by configuration"),
            }
            assert_eq!(bot.metrics.security_alerts.load(Ordering::Relaxed), 0);
        }
    }

    /// The inbox imports a batch in one go and, when an envelope fails, again envelope by
    /// envelope (`inbox::import_all`): each failing one is dropped alone, with nothing of it
    /// kept (a forged button press fails after its session step and its receipt were written:
    /// were they kept, the retry would take it for a repeat), and the others are stored once
    /// each, in order.
    #[test]
    fn a_failing_envelope_in_a_batch_is_dropped_alone_and_the_others_are_stored_once() {
        use crate::wire::e2e::{content::Body, CallbackPress, Content};

        let (bot, fake, bot_keys) = bot(OnIdentityChange::Refuse);
        let alice = User::new(IdentityKeyPair::generate(), 1);
        serve(&fake, alice.certificates(&alice.account));
        let press = CallbackPress { press_id: "0f".repeat(16), message_id: 7, callback_data: "buy".into(), ..Default::default() };
        let forged = alice.first_content(&bot_keys, 2, &Content { body: Some(Body::Press(press)), ..Default::default() });
        let mut undecryptable = alice.first_message(&bot_keys, 4, "broken");
        let last = undecryptable.ciphertext.len() - 1;
        undecryptable.ciphertext[last] ^= 0x55;
        let batch = vec![
            alice.first_message(&bot_keys, 1, "one"),
            forged,
            alice.first_message(&bot_keys, 3, "three"),
            undecryptable,
        ];
        assert!(import_reported(&bot.ctx(), batch).is_some());
        let texts: Vec<String> = bot
            .store
            .read(|c| crate::gateway::updates::fetch(c, None, 10))
            .expect("updates")
            .iter()
            .map(|u| u["message"]["text"].as_str().unwrap_or_default().to_string())
            .collect();
        assert_eq!(texts, ["one", "three"]);
        assert_eq!(bot.metrics.decrypt_failures.load(Ordering::Relaxed), 2, "both broken ones counted as dropped");
        assert_eq!(bot.metrics.security_alerts.load(Ordering::Relaxed), 0);
        // A batch that goes through in one go.
        assert!(import_reported(&bot.ctx(), vec![alice.first_message(&bot_keys, 5, "five"), alice.first_message(&bot_keys, 6, "six")]).is_some());
        assert_eq!(queued(&bot), 4);
    }

    #[test]
    fn a_replayed_first_message_without_a_one_time_prekey_yields_no_second_update() {
        let (bot, fake, bot_keys) = bot(OnIdentityChange::Refuse);
        let alice = User::new(IdentityKeyPair::generate(), 1);
        serve(&fake, alice.certificates(&alice.account));
        let first = alice.first_message(&bot_keys, 1, "/start");
        assert!(import_reported(&bot.ctx(), vec![first.clone()]).is_some());
        // Two later sessions push the first one out of the bot's current and previous slots.
        assert!(import_reported(&bot.ctx(), vec![alice.first_message(&bot_keys, 2, "a")]).is_some());
        assert!(import_reported(&bot.ctx(), vec![alice.first_message(&bot_keys, 3, "b")]).is_some());
        assert_eq!(queued(&bot), 3);
        // The platform delivers the first message again, as new (a later seq, another id).
        let replay = InboxEnvelope { seq: 4, message_id: 4, client_message_id: "c4".into(), ..first };
        assert!(import_reported(&bot.ctx(), vec![replay]).is_some());
        assert_eq!(queued(&bot), 3, "the /start does not run twice");
    }

    /// Issue 45, part 7: Alice's device numbers what it sends the bot. The platform withholds
    /// her second message, and delivers her fourth before her third. A minute later the bot
    /// counts one withheld message (the late third cleared its own gap), and has the three
    /// others as updates.
    #[test]
    fn a_message_the_platform_withholds_is_counted_and_a_late_one_is_not() {
        let (bot, fake, bot_keys) = bot(OnIdentityChange::Refuse);
        let alice = User::new(IdentityKeyPair::generate(), 1);
        serve(&fake, alice.certificates(&alice.account));
        let numbered = |text: &str| {
            let mut content = e2e::text_content(text);
            e2e::sequence::number(&alice.conn, e2e::sequence::Conversation::Private(1), &mut content).expect("number");
            content
        };
        let first = alice.first_content(&bot_keys, 1, &numbered("one"));
        let _withheld = alice.message(90, &numbered("two"));
        let (third, fourth) = (numbered("three"), numbered("four"));
        let (fourth, third) = (alice.message(2, &fourth), alice.message(3, &third));
        for env in [first, fourth, third] {
            assert!(import_reported(&bot.ctx(), vec![env]).is_some());
        }
        assert_eq!(queued(&bot), 3);
        let withheld = || bot.metrics.withheld_messages.load(Ordering::Relaxed);
        crate::gateway::withheld::report_withheld(&bot.ctx(), crate::clock::unix_now());
        assert_eq!(withheld(), 0, "within the grace");
        crate::gateway::withheld::report_withheld(&bot.ctx(), crate::clock::unix_now() + e2e::sequence::GRACE_SECS + 1);
        assert_eq!(withheld(), 1, "the second, never delivered");
        crate::gateway::withheld::report_withheld(&bot.ctx(), crate::clock::unix_now() + e2e::sequence::GRACE_SECS + 1);
        assert_eq!(withheld(), 1, "counted once");
    }
}
