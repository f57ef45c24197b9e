//! Client against the real platform server, started in-process on an ephemeral loopback port
//! with a temporary data directory: two people chatting, redelivery after a dropped profile,
//! a bot whose device list grows while a user talks to it, and the interactive contents a bot
//! sends (keyboards with a signed context, edits, deletions, answers, reactions, chat actions,
//! forwards) — the bot side built here directly, as a gateway would.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::executor::block_on_stream;
use rusqlite::Connection;

use super::*;
use crate::crypto::{self, identity, IdentityKeyPair};
use crate::e2e;
use crate::e2e::group as mls_group;
use crate::platform::{provision_bot, BotCredentials, RunningServer};
use super::history;
use crate::wire::e2e::{
    CallbackAnswer, ChatAction, Content, Delete, Edit, InlineButton, InlineKeyboard, KeyboardContext, KeyboardRow,
    Reaction, SignedKeyboardContext,
};
use protobuf::Message as _;
use crate::wire::platform::{
    AckRequest, DeviceCiphertext, InboxEnvelope, InboxRequest, OutgoingMessage, RegisterBotDeviceRequest,
    SendMessagesRequest,
};
use crate::wire::{Credential, Platform};

const WAIT: Duration = Duration::from_secs(20);

struct World {
    server: RunningServer,
    dir: tempfile::TempDir,
}

impl World {
    fn start() -> World {
        let dir = tempfile::tempdir().expect("temp dir");
        let server = RunningServer::start("127.0.0.1:0", &dir.path().join("platform")).expect("platform server starts");
        World { server, dir }
    }

    fn user(&self, username: &str) -> Profile {
        Profile::register(&self.server.endpoint(), self.dir.path().join(username), username, "")
            .expect("registration succeeds")
    }
}

#[test]
fn two_profiles_chat_both_ways_through_a_real_server() {
    let world = World::start();
    let alice = world.user("alice");
    let bob = world.user("bob");
    assert_ne!(alice.user_id(), bob.user_id());

    // First message: X3DH from a fetched bundle, with entities.
    let bold = Entity::new("bold", 6, 3);
    let sent = alice.send_message("@BOB", "hello bob", std::slice::from_ref(&bold), None).expect("alice sends");
    assert_eq!(sent.chat_id, bob.user_id());
    let got = bob.receive(WAIT, 1).expect("bob receives");
    assert_eq!(got.len(), 1);
    let m = &got[0];
    assert_eq!((m.text.as_str(), m.chat_id, m.message_id, m.date), ("hello bob", alice.user_id(), sent.message_id, sent.date));
    assert_eq!(m.entities, vec![bold]);
    assert_eq!(m.sender.username, "alice");
    assert!(!m.sender.is_bot);
    assert_eq!(m.reply_to_message_id, None);

    // A reply the other way.
    let reply = bob.send_message("alice", "hi alice", &[], Some(m.message_id)).expect("bob replies");
    let got = alice.receive(WAIT, 1).expect("alice receives");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].text, "hi alice");
    assert_eq!(got[0].message_id, reply.message_id);
    assert_eq!(got[0].reply_to_message_id, Some(sent.message_id));
    assert_eq!(got[0].chat_id, bob.user_id());

    // Several in a row arrive in order; nothing more after them.
    for i in 0..3 {
        alice.send_text("bob", &format!("n{i}")).expect("send");
    }
    let mut texts = Vec::new();
    while texts.len() < 3 {
        let batch = bob.receive(WAIT, 3 - texts.len()).expect("receive");
        assert!(!batch.is_empty(), "messages arrive within {WAIT:?}");
        texts.extend(batch.into_iter().map(|m| m.text));
    }
    assert_eq!(texts, ["n0", "n1", "n2"]);
    assert!(bob.receive(Duration::from_millis(300), 10).expect("receive").is_empty());

    // What a dropped profile read ahead but did not process comes again, once.
    alice.send_text("bob", "first").expect("send");
    alice.send_text("bob", "second").expect("send");
    let first = bob.receive(WAIT, 1).expect("receive");
    assert_eq!(first[0].text, "first");
    let dir = bob.dir().to_path_buf();
    drop(bob);
    let bob = Profile::open(&dir).expect("reopen bob");
    let again = bob.receive(WAIT, 1).expect("receive after reopen");
    assert_eq!(again[0].text, "second");
    assert!(bob.receive(Duration::from_millis(500), 5).expect("receive").is_empty(), "no duplicate of \"first\"");

    // The reopened profile still holds the session.
    bob.send_text("alice", "still here").expect("send after reopen");
    assert_eq!(alice.receive(WAIT, 1).expect("receive")[0].text, "still here");
}

#[test]
fn errors_name_what_failed() {
    let world = World::start();
    let alice = world.user("alice");
    let err = alice.send_text("@nobody_here", "x").expect_err("no such user");
    assert!(matches!(err, ClientError::NoSuchUser(_)));
    assert_eq!(err.to_string(), "no user @nobody_here on the platform");
    let err = alice.send_text("alice", "x").expect_err("not to yourself");
    assert!(err.to_string().contains("yourself"), "{err}");

    let err = Profile::register(&world.server.endpoint(), world.dir.path().join("other"), "ALICE", "")
        .err()
        .expect("taken");
    assert!(matches!(err, ClientError::UsernameTaken(_)), "{err}");
    // The failed attempt left keys but no account; a new name in the same directory works.
    let carol = Profile::register(&world.server.endpoint(), world.dir.path().join("other"), "carol", "Carol C")
        .expect("register carol");
    assert_eq!(carol.display_name(), "Carol C");
    let err = Profile::register(&world.server.endpoint(), carol.dir(), "carol2", "").err().expect("already");
    assert!(matches!(err, ClientError::AlreadyRegistered { .. }), "{err}");
}

#[test]
fn one_time_prekeys_are_replenished() {
    let world = World::start();
    let alice = world.user("alice");
    let bob = world.user("bob");
    // Others fetching bundles drain bob's one-time prekeys on the platform.
    let platform = alice.platform();
    let mut req = crate::wire::platform::GetPrekeyBundlesRequest::new();
    req.user_id = bob.user_id();
    for _ in 0..(e2e::ONE_TIME_PREKEY_TARGET - REPLENISH_BELOW + 1) {
        let resp = platform.client.get_prekey_bundles(&req, platform.opt()).expect("bundles");
        assert!(resp.bundles[0].one_time_prekey.is_some());
    }
    assert_eq!(bob.replenish_prekeys().expect("replenish"), e2e::ONE_TIME_PREKEY_TARGET);
    // Above the threshold nothing is uploaded.
    assert_eq!(bob.replenish_prekeys().expect("check"), e2e::ONE_TIME_PREKEY_TARGET);
}

/// The id of the signed prekey the platform serves for `user_id`'s first device.
fn served_signed_prekey(asking: &Profile, user_id: u64) -> u32 {
    let mut req = crate::wire::platform::GetPrekeyBundlesRequest::new();
    req.user_id = user_id;
    let platform = asking.platform();
    let resp = platform.client.get_prekey_bundles(&req, platform.opt()).expect("bundles");
    resp.bundles[0].signed_prekey.id
}

#[test]
fn receiving_rotates_a_due_signed_prekey_and_messages_from_the_old_bundle_still_open() {
    let world = World::start();
    let alice = world.user("alice");
    let bob = world.user("bob");
    let carol = world.user("carol");
    // Bob's signed prekey is older than the schedule allows.
    let age = e2e::SignedPrekeySchedule::DEFAULT.max_age.as_secs() as i64 + 3600;
    bob.conn.execute("UPDATE e2e_signed_prekeys SET created_at = created_at - ?1", [age]).expect("age the key");
    // Alice's first message is built from the bundle served before the rotation.
    assert_eq!(served_signed_prekey(&alice, bob.user_id()), 1);
    alice.send_text("bob", "from the old bundle").expect("alice sends");

    // Starting to receive rotates first, then opens alice's message with the kept old key.
    let got = bob.receive(WAIT, 1).expect("bob receives");
    assert_eq!(got[0].text, "from the old bundle");
    assert_eq!(served_signed_prekey(&carol, bob.user_id()), 2, "the new key is published");
    carol.send_text("bob", "from the new bundle").expect("carol sends");
    assert_eq!(bob.receive(WAIT, 1).expect("bob receives")[0].text, "from the new bundle");

    // Not due again: the next start publishes the same key.
    assert_eq!(bob.keep_signed_prekey().expect("upkeep"), 2);
    bob.send_text("alice", "both sessions work").expect("bob answers");
    assert_eq!(alice.receive(WAIT, 1).expect("alice receives")[0].text, "both sessions work");
}

/// One gateway-like device of a bot: its own e2e database and a bot-token connection.
struct BotDevice {
    conn: Connection,
    platform: Platform,
    device_id: u32,
}

impl BotDevice {
    fn register(endpoint: &str, creds: &BotCredentials) -> BotDevice {
        let secret = crypto::hex_decode_32(creds.recovery_secret_hex().expect("drawn by provision_bot")).expect("hex secret");
        let identity = IdentityKeyPair::from_recovery_secret(&secret);
        let conn = Connection::open_in_memory().expect("db");
        e2e::create_all_tables(&conn).expect("e2e tables");
        let keys = e2e::create_device_keys(&conn, &identity).expect("keys");
        let timestamp = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs() as i64;
        let mut req = RegisterBotDeviceRequest::new();
        req.proof = identity
            .sign(&identity::bot_registration_statement(creds.compat_user_id, &keys.device_key, timestamp))
            .to_vec();
        req.timestamp = timestamp;
        req.device = protobuf::MessageField::some(keys);
        let mut platform =
            Platform::connect(endpoint, Credential::Bot { token: creds.token.clone(), device_id: None }).expect("connect");
        let resp = platform.client.register_bot_device(&req, platform.opt()).expect("bot device registers");
        platform.set_credential(Credential::Bot { token: creds.token.clone(), device_id: Some(resp.device_id) });
        e2e::save_registration(&conn, e2e::Registration { user_id: resp.bot_user_id, device_id: resp.device_id })
            .expect("save registration");
        BotDevice { conn, platform, device_id: resp.device_id }
    }

    /// Reads one envelope from the inbox, opens it and acknowledges it.
    fn receive_content(&self) -> (InboxEnvelope, Content) {
        let mut stream =
            self.platform.client.inbox(&InboxRequest::new(), self.platform.opt_with_timeout(Some(WAIT))).expect("inbox");
        let envelope = block_on_stream(&mut stream).next().expect("an envelope").expect("stream ok");
        stream.cancel();
        // As the gateway does: a device starting a session is checked through the platform.
        for request in e2e::devices_to_certify(&self.conn, std::slice::from_ref(&envelope)).expect("to certify") {
            let answer = self.platform.client.get_device_certificates(&request, self.platform.opt()).expect("certificates");
            let certified = e2e::record_certified_devices(&self.conn, &request, &answer, e2e::OnIdentityChange::Refuse)
                .expect("certify");
            assert!(certified.refused.is_empty(), "the user's device verifies: {certified:?}");
        }
        let content = e2e::open_envelope(&self.conn, &envelope).expect("bot opens");
        let mut ack = AckRequest::new();
        ack.seqs.push(envelope.seq);
        self.platform.client.ack(&ack, self.platform.opt()).expect("ack");
        (envelope, content)
    }

    fn receive_text(&self) -> (InboxEnvelope, String) {
        let (envelope, content) = self.receive_content();
        (envelope, content.text().text.clone())
    }

    /// Sends any content to user `to`; returns the message id the platform gave it.
    fn send(&self, to: u64, content: &Content) -> u64 {
        self.send_as(to, content, &crypto::hex_encode(&crypto::random_bytes::<16>()))
    }

    /// Reserves the message's id first and vouches for it, as the gateway does (`e2e::vouch`).
    fn send_vouched(&self, to: u64, content: &Content) -> u64 {
        let cmid = crypto::hex_encode(&crypto::random_bytes::<16>());
        let mut req = crate::wire::platform::ReserveMessageIdsRequest::new();
        req.reservations.push(crate::wire::platform::MessageIdReservation {
            client_message_id: cmid.clone(),
            recipient_user_id: to,
            ..Default::default()
        });
        let r = self.platform.client.reserve_message_ids(&req, self.platform.opt()).expect("reserve").ids.remove(0);
        let mut content = content.clone();
        e2e::vouch::vouch(&mut content, r.message_id, r.date);
        self.send_as(to, &content, &cmid)
    }

    fn send_as(&self, to: u64, content: &Content, client_message_id: &str) -> u64 {
        let ciphertexts: Vec<DeviceCiphertext> = e2e::seal(&self.conn, to, content).expect("seal");
        let mut msg = OutgoingMessage::new();
        msg.client_message_id = client_message_id.to_string();
        msg.recipient_user_id = to;
        msg.ciphertexts = ciphertexts;
        let mut req = SendMessagesRequest::new();
        req.messages.push(msg);
        let resp = self.platform.client.send_messages(&req, self.platform.opt()).expect("send");
        assert_eq!(resp.results[0].status.value(), 0, "bot message accepted: {}", resp.results[0].error);
        resp.results[0].message_id
    }

    fn reply(&self, to: u64, text: &str) {
        self.send(to, &crate::e2e::text_content(text));
    }
}


#[test]
fn bot_devices_are_verified_and_a_stale_device_list_is_updated() {
    let world = World::start();
    let creds = provision_bot(world.server.store(), "echo_bot", "Echo", "default", None).expect("bot");
    let alice = world.user("alice");
    let a = BotDevice::register(&world.server.endpoint(), &creds);

    let bot = alice.lookup("@Echo_Bot").expect("lookup");
    assert!(bot.is_bot);
    assert_eq!(crypto::hex_encode(&bot.identity_key), creds.bot_id_hex);

    alice.send_text("@echo_bot", "one").expect("first send");
    let (env, text) = a.receive_text();
    assert_eq!(text, "one");
    assert_eq!(env.sender_user_id, alice.user_id());

    // A second runtime of the bot appears: the next send is refused as stale, the client
    // fetches the new device's bundle (certificate checked against the Bot ID) and resends.
    let b = BotDevice::register(&world.server.endpoint(), &creds);
    assert_ne!(a.device_id, b.device_id);
    let sent = alice.send_text("@echo_bot", "two").expect("send after the device list grew");
    let (env_a, text_a) = a.receive_text();
    let (env_b, text_b) = b.receive_text();
    assert_eq!((text_a.as_str(), text_b.as_str()), ("two", "two"));
    assert_eq!((env_a.message_id, env_b.message_id), (sent.message_id, sent.message_id));
    let mut devices = e2e::known_devices(&alice.conn, bot.user_id).expect("known");
    devices.sort();
    assert_eq!(devices, vec![a.device_id.min(b.device_id), a.device_id.max(b.device_id)]);

    // Both runtimes answer; the user sees both, marked as from the bot.
    a.reply(alice.user_id(), "from a");
    b.reply(alice.user_id(), "from b");
    let mut got = Vec::new();
    while got.len() < 2 {
        let batch = alice.receive(WAIT, 2 - got.len()).expect("receive");
        assert!(!batch.is_empty(), "replies arrive");
        got.extend(batch);
    }
    let mut texts: Vec<&str> = got.iter().map(|m| m.text.as_str()).collect();
    texts.sort();
    assert_eq!(texts, ["from a", "from b"]);
    assert!(got.iter().all(|m| m.sender.is_bot && m.chat_id == bot.user_id && m.sender.username == "echo_bot"));
}

/// A bot with one device, a user who said /start to it (so the bot has a session), and the
/// bot's identity key pair (to sign keyboard contexts).
struct BotDialog {
    world: World,
    alice: Profile,
    bot: BotDevice,
    bot_user_id: u64,
    identity: IdentityKeyPair,
}

impl BotDialog {
    fn start() -> BotDialog {
        let world = World::start();
        let creds = provision_bot(world.server.store(), "keys_bot", "Keys", "default", None).expect("bot");
        let alice = world.user("alice");
        let bot = BotDevice::register(&world.server.endpoint(), &creds);
        alice.send_text("@keys_bot", "/start").expect("alice starts");
        bot.receive_text();
        let secret = crypto::hex_decode_32(creds.recovery_secret_hex().expect("drawn by provision_bot")).expect("hex secret");
        BotDialog {
            bot_user_id: alice.lookup("@keys_bot").expect("lookup").user_id,
            world,
            alice,
            bot,
            identity: IdentityKeyPair::from_recovery_secret(&secret),
        }
    }

    /// `text` with one row of buttons (text = data upper-cased) and a signed context; returns
    /// the content and the signed context's exact bytes.
    fn keyboard_message(&self, text: &str, data: &[&str]) -> (Content, SignedKeyboardContext) {
        let mut content = crate::e2e::text_content(text);
        let mut row = KeyboardRow::new();
        for d in data {
            let mut b = InlineButton::new();
            b.text = d.to_uppercase();
            b.callback_data = d.to_string();
            row.buttons.push(b);
        }
        let mut keyboard = InlineKeyboard::new();
        keyboard.rows.push(row);
        content.keyboard = protobuf::MessageField::some(keyboard.clone());
        // The client never interprets the context; any encoded KeyboardContext will do.
        let mut context = KeyboardContext::new();
        context.bot_user_id = self.bot_user_id;
        context.chat_id = self.alice.user_id();
        context.date = 1_700_000_000;
        context.message = protobuf::MessageField::some(content.clone());
        let bytes = context.write_to_bytes().expect("encode");
        let mut signed = SignedKeyboardContext::new();
        signed.signature = identity::sign_keyboard_context(&self.identity, &bytes).to_vec();
        signed.context = bytes;
        keyboard.context = protobuf::MessageField::some(signed.clone());
        content.keyboard = protobuf::MessageField::some(keyboard);
        (content, signed)
    }

    /// The next event alice receives.
    fn next_event(&self) -> Incoming {
        let got = self.alice.receive_events(WAIT, 1).expect("alice receives");
        assert_eq!(got.len(), 1, "an event arrives within {WAIT:?}");
        got.into_iter().next().expect("one")
    }
}

#[test]
fn a_press_carries_the_keyboard_context_back_exactly_and_the_answer_comes_as_an_event() {
    let d = BotDialog::start();
    let (content, signed) = d.keyboard_message("pick one", &["a", "b"]);
    let m = d.bot.send(d.alice.user_id(), &content);
    let Incoming::Message(got) = d.next_event() else { panic!("a message") };
    assert_eq!((got.message_id, got.text.as_str()), (m, "pick one"));
    assert_eq!(
        got.keyboard,
        vec![vec![
            Button { text: "A".into(), callback_data: "a".into(), ..Default::default() },
            Button { text: "B".into(), callback_data: "b".into(), ..Default::default() }
        ]]
    );

    let pressed = d.alice.press("@keys_bot", m, "b").expect("press");
    assert_eq!(pressed.press_id.len(), 32, "16 random bytes in hex");
    assert_eq!(pressed.sent.chat_id, d.bot_user_id);
    let (_, content) = d.bot.receive_content();
    assert!(content.has_press(), "the bot receives a press");
    let press = content.press();
    assert_eq!((press.press_id.as_str(), press.message_id, press.callback_data.as_str()), (pressed.press_id.as_str(), m, "b"));
    assert_eq!(press.context.context, signed.context, "the signed bytes travel unchanged");
    assert_eq!(press.context.signature, signed.signature);
    assert!(identity::verify_keyboard_context(&d.identity.public_key(), &press.context.context, &press.context.signature));

    // The bot answers; alice sees it as its own event, naming the press.
    let mut answer = CallbackAnswer::new();
    answer.press_id = pressed.press_id.clone();
    answer.text = "you chose B".into();
    answer.show_alert = true;
    let mut content = Content::new();
    content.set_callback_answer(answer);
    d.bot.send(d.alice.user_id(), &content);
    assert_eq!(
        d.next_event(),
        Incoming::CallbackAnswer {
            chat_id: d.bot_user_id,
            press_id: pressed.press_id.clone(),
            text: "you chose B".into(),
            show_alert: true,
            url: String::new(),
        }
    );

    // Presses that cannot be right are refused before anything is sent.
    let err = d.alice.press("@keys_bot", m + 100, "a").expect_err("unknown message");
    assert!(err.to_string().contains(&format!("no message {} from @keys_bot", m + 100)), "{err}");
    let err = d.alice.press("@keys_bot", m, "zzz").expect_err("no such button");
    assert!(err.to_string().contains("has no button with that callback data"), "{err}");
    let plain = d.bot.send(d.alice.user_id(), &crate::e2e::text_content("no buttons here"));
    assert!(matches!(d.next_event(), Incoming::Message(ref p) if p.message_id == plain && p.keyboard.is_empty()));
    let err = d.alice.press("@keys_bot", plain, "a").expect_err("no keyboard");
    assert!(err.to_string().contains("has no buttons"), "{err}");
    drop(d.world);
}

#[test]
fn edits_and_deletions_update_what_the_profile_remembers() {
    let d = BotDialog::start();
    let (content, _) = d.keyboard_message("pick", &["a"]);
    let mut content = content;
    content.reply_to_message_id = 1;
    let m = d.bot.send(d.alice.user_id(), &content);
    assert!(matches!(d.next_event(), Incoming::Message(ref g) if g.message_id == m));

    // A new keyboard by edit: the old button is gone, the new one can be pressed.
    let (new, new_signed) = d.keyboard_message("pick again", &["c"]);
    let mut edit = Edit::new();
    edit.message_id = m;
    edit.content = protobuf::MessageField::some(new);
    edit.edit_date = 1_700_000_123;
    let mut content = Content::new();
    content.set_edit(edit.clone());
    d.bot.send(d.alice.user_id(), &content);
    assert_eq!(
        d.next_event(),
        Incoming::Edited {
            chat_id: d.bot_user_id,
            message_id: m,
            edit_date: 1_700_000_123,
            text: "pick again".into(),
            entities: vec![],
            keyboard: vec![vec![Button { text: "C".into(), callback_data: "c".into(), ..Default::default() }]],
            shared: None,
        }
    );
    let stored = history::load(&d.alice.conn, d.bot_user_id, m).expect("load").expect("remembered");
    assert_eq!(stored.text().text, "pick again");
    assert_eq!(stored.reply_to_message_id, 1, "the reply survives the edit");
    assert!(d.alice.press("@keys_bot", m, "a").is_err(), "the old button is gone");
    d.alice.press("@keys_bot", m, "c").expect("the new button");
    assert_eq!(d.bot.receive_content().1.press().context.context, new_signed.context, "the new context");

    // An edit without keyboard removes the buttons.
    edit.content = protobuf::MessageField::some(crate::e2e::text_content("done"));
    let mut content = Content::new();
    content.set_edit(edit);
    d.bot.send(d.alice.user_id(), &content);
    assert!(matches!(d.next_event(), Incoming::Edited { ref keyboard, ref text, .. } if keyboard.is_empty() && text == "done"));
    let err = d.alice.press("@keys_bot", m, "c").expect_err("no buttons left");
    assert!(err.to_string().contains("has no buttons"), "{err}");

    // A deletion forgets the message.
    let mut delete = Delete::new();
    delete.message_id = m;
    let mut content = Content::new();
    content.set_delete(delete);
    d.bot.send(d.alice.user_id(), &content);
    assert_eq!(d.next_event(), Incoming::Deleted { chat_id: d.bot_user_id, message_id: m });
    assert!(history::load(&d.alice.conn, d.bot_user_id, m).expect("load").is_none());
    let err = d.alice.press("@keys_bot", m, "c").expect_err("deleted");
    assert!(err.to_string().contains("no message"), "{err}");
}

/// Ids and dates the sender vouches for (`e2e::vouch`): alice's message carries the id it
/// arrives under; a message the platform delivers under another id than the bot sealed (or,
/// once the bot's device vouched, one without any) is refused with a security alert.
#[test]
fn a_message_under_another_id_than_its_sender_vouched_for_is_refused() {
    let d = BotDialog::start();
    let hello = d.alice.send_text("@keys_bot", "hello").expect("send");
    let (envelope, content) = d.bot.receive_content();
    assert_eq!(envelope.message_id, hello.message_id);
    assert_eq!((content.vouched.message_id, content.vouched.date), (envelope.message_id, envelope.date));

    let to = d.alice.user_id();
    let first = d.bot.send_vouched(to, &crate::e2e::text_content("vouched"));
    assert!(matches!(d.next_event(), Incoming::Message(ref m) if m.message_id == first && m.text == "vouched"));
    let mut swapped = crate::e2e::text_content("under another id");
    e2e::vouch::vouch(&mut swapped, first, hello.date);
    d.bot.send(to, &swapped);
    match d.next_event() {
        Incoming::SecurityAlert { text, .. } => assert!(text.contains(&format!("sealed it as message {first}")), "{text}"),
        other => panic!("not an alert: {other:?}"),
    }
    d.bot.send(to, &crate::e2e::text_content("no id"));
    match d.next_event() {
        Incoming::SecurityAlert { text, .. } => assert!(text.contains("vouched for its messages before"), "{text}"),
        other => panic!("not an alert: {other:?}"),
    }
    let last = d.bot.send_vouched(to, &crate::e2e::text_content("still talking"));
    assert!(matches!(d.next_event(), Incoming::Message(ref m) if m.message_id == last), "the dialog goes on");
    assert!(history::load(&d.alice.conn, d.bot_user_id, first).expect("load").is_some());
}

/// A peer's edit naming one of our messages is ignored: only the peer's own change.
#[test]
fn an_edit_of_our_message_by_the_peer_is_ignored() {
    let d = BotDialog::start();
    let hello = d.alice.send_text("@keys_bot", "hello").expect("send");
    d.bot.receive_content();
    let mut edit = Edit::new();
    edit.message_id = hello.message_id;
    edit.content = protobuf::MessageField::some(crate::e2e::text_content("hijacked"));
    let mut content = Content::new();
    content.set_edit(edit);
    d.bot.send(d.alice.user_id(), &content);
    d.bot.send(d.alice.user_id(), &crate::e2e::text_content("after"));
    assert!(matches!(d.next_event(), Incoming::Message(ref m) if m.text == "after"), "no Edited event for our message");
    assert_eq!(history::load_sent(&d.alice.conn, d.bot_user_id, hello.message_id).expect("load").expect("ours").text().text, "hello");
    assert_eq!(history::load(&d.alice.conn, d.bot_user_id, hello.message_id).expect("load"), None, "not taken as the peer's");
}

#[test]
fn reactions_chat_actions_and_forwards_decode_and_reactions_are_sent() {
    let d = BotDialog::start();
    let hello = d.alice.send_text("@keys_bot", "hello").expect("send");
    d.bot.receive_content();

    let mut reaction = Reaction::new();
    reaction.message_id = hello.message_id;
    let mut thumbs = crate::wire::e2e::ReactionType::new();
    thumbs.set_emoji("👍".into());
    reaction.reactions.push(thumbs);
    let mut content = Content::new();
    content.set_reaction(reaction);
    d.bot.send(d.alice.user_id(), &content);
    let Incoming::Reaction { chat_id, message_id, from, reactions } = d.next_event() else { panic!("a reaction") };
    assert_eq!((chat_id, message_id), (d.bot_user_id, hello.message_id));
    assert!(from.is_bot && from.username == "keys_bot");
    assert_eq!(reactions, vec![ReactionType::Emoji("👍".into())]);

    let mut action = ChatAction::new();
    action.action = "typing".into();
    let mut content = Content::new();
    content.set_chat_action(action);
    d.bot.send(d.alice.user_id(), &content);
    assert!(matches!(d.next_event(), Incoming::ChatAction { ref action, chat_id, .. } if action == "typing" && chat_id == d.bot_user_id));

    // A forwarded message carries its origin.
    let mut content = crate::e2e::text_content("fwd");
    let mut origin = crate::wire::e2e::ForwardOrigin::new();
    origin.sender_user_id = 77;
    origin.sender_username = "carol".into();
    origin.sender_first_name = "Carol".into();
    origin.date = 1_600_000_000;
    content.forward_origin = protobuf::MessageField::some(origin);
    d.bot.send(d.alice.user_id(), &content);
    let Incoming::Message(m) = d.next_event() else { panic!("a message") };
    assert_eq!(
        m.forward_origin,
        Some(ForwardOrigin {
            sender_user_id: 77,
            sender_username: "carol".into(),
            sender_first_name: "Carol".into(),
            sender_is_bot: false,
            date: 1_600_000_000,
            channel: None,
        })
    );

    // The message-only API skips events: a chat action, then a text, gives just the text.
    let mut action = ChatAction::new();
    action.action = "typing".into();
    let mut content = Content::new();
    content.set_chat_action(action);
    d.bot.send(d.alice.user_id(), &content);
    d.bot.reply(d.alice.user_id(), "after typing");
    let got = d.alice.receive(WAIT, 1).expect("receive");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].text, "after typing");

    // Alice reacts, then takes the reaction back.
    let sent = d.alice.react("@keys_bot", m.message_id, "🔥").expect("react");
    assert_eq!(sent.chat_id, d.bot_user_id);
    let (_, content) = d.bot.receive_content();
    assert_eq!(content.reaction().message_id, m.message_id);
    assert_eq!(content.reaction().reactions.len(), 1);
    assert_eq!(content.reaction().reactions[0].emoji(), "🔥");
    d.alice.react("keys_bot", m.message_id, "").expect("remove");
    let (_, content) = d.bot.receive_content();
    assert!(content.has_reaction() && content.reaction().reactions.is_empty(), "an empty reaction removes it");
}

/// A bot's CallbackAnswer to `press_id`.
fn answer_content(press_id: &str, text: &str) -> Content {
    let mut answer = CallbackAnswer::new();
    answer.press_id = press_id.to_string();
    answer.text = text.to_string();
    let mut content = Content::new();
    content.set_callback_answer(answer);
    content
}

#[test]
fn the_press_command_ends_with_the_answer_to_its_own_press_only() {
    let d = BotDialog::start();
    let (content, _) = d.keyboard_message("go?", &["go"]);
    let m = d.bot.send(d.alice.user_id(), &content);
    assert!(matches!(d.next_event(), Incoming::Message(ref g) if g.message_id == m));
    let BotDialog { world, alice, bot, .. } = d;
    let (alice_id, dir) = (alice.user_id(), alice.dir().display().to_string());
    drop(alice); // the command opens the profile itself
    let press = |timeout: &str| {
        let args = ["--profile", &dir, "press", "@keys_bot", &m.to_string(), "go", "--timeout", timeout];
        cli::run(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    };

    // The bot answers each press twice: first under another press id, then (the first time
    // only) under the right one. Other events arriving meanwhile do not end the wait.
    let bot = std::thread::Builder::new()
        .name("test-bot".into())
        .spawn(move || {
            for round in 0..2 {
                let (_, content) = bot.receive_content();
                let press_id = content.press().press_id.clone();
                bot.send(alice_id, &answer_content("not-this-press", "wrong"));
                if round == 0 {
                    bot.send(alice_id, &crate::e2e::text_content("meanwhile"));
                    bot.send(alice_id, &answer_content(&press_id, "right"));
                }
            }
        })
        .expect("spawn");
    press("20").expect("the command ends with the answer to its press");
    let err = press("2").expect_err("only an answer to another press came");
    assert!(format!("{err:#}").contains("no answer from @keys_bot to press"), "{err:#}");
    bot.join().expect("bot thread");
    drop(world);
}

#[test]
fn a_file_goes_from_alice_to_bob_and_a_corrupted_one_is_never_written() {
    let world = World::start();
    let alice = world.user("alice");
    let bob = world.user("bob");
    let files = tempfile::tempdir().expect("dir");

    // A PNG-looking file over several encryption chunks, with a marker the platform must never see.
    let mut plaintext = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    plaintext.extend_from_slice(&320u32.to_be_bytes());
    plaintext.extend_from_slice(&200u32.to_be_bytes());
    for i in 0..200_000u32 {
        plaintext.extend_from_slice(&i.to_le_bytes());
    }
    plaintext.extend_from_slice(b"PLAINTEXT-MARKER-7f3a");
    let path = files.path().join("report.png");
    std::fs::write(&path, &plaintext).expect("write");

    let sent = alice.send_file("@bob", &path, None, "Q3 numbers").expect("alice sends the file");
    assert_eq!(sent.chat_id, bob.user_id());
    let got = bob.receive(WAIT, 1).expect("bob receives");
    let m = &got[0];
    assert_eq!(m.message_id, sent.message_id);
    assert_eq!(m.text, "", "a file message has a caption, not a text");
    let media = m.media.as_ref().expect("the file's metadata");
    assert_eq!(
        (media.kind, media.file_name.as_str(), media.mime_type.as_str(), media.size),
        (MediaKind::Photo, "report.png", "image/png", plaintext.len() as u64)
    );
    assert_eq!((media.width, media.height, media.caption.as_str()), (320, 200, "Q3 numbers"));

    // Bob downloads it whole; nothing else is left beside it.
    let out = files.path().join("got.png");
    assert_eq!(bob.download("alice", m.message_id, &out).expect("download"), plaintext.len() as u64);
    assert_eq!(std::fs::read(&out).expect("read"), plaintext);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&out).expect("meta").permissions().mode() & 0o777, 0o600);
    assert!(!files.path().join("got.png.part").exists());

    // The platform holds ciphertext only.
    let content = bob.remembered(alice.user_id(), m.message_id).expect("load").expect("remembered");
    let file_ref = content.media().file_ref.clone();
    let stored = world.dir.path().join("platform").join("files").join(&file_ref[..2]).join(&file_ref);
    let mut ciphertext = std::fs::read(&stored).expect("stored ciphertext");
    assert!(!ciphertext.windows(21).any(|w| w == b"PLAINTEXT-MARKER-7f3a"), "no plaintext on the platform");

    // One flipped byte: the download fails, names the message, writes nothing.
    let middle = ciphertext.len() / 2;
    ciphertext[middle] ^= 0x01;
    std::fs::write(&stored, &ciphertext).expect("corrupt");
    let bad = files.path().join("bad.png");
    let err = bob.download("alice", m.message_id, &bad).expect_err("corrupted ciphertext is refused");
    assert!(err.to_string().contains(&format!("message {} from @alice", m.message_id)), "{err}");
    assert!(!bad.exists() && !files.path().join("bad.png.part").exists(), "no plaintext was written");
    let leftovers: Vec<_> = std::fs::read_dir(bob.dir()).expect("list").flatten().map(|e| e.file_name()).collect();
    assert!(leftovers.iter().all(|n| !n.to_string_lossy().contains(".tmp")), "{leftovers:?}");

    // Not a file message, an unknown one, a file too large: refused before anything is sent.
    alice.send_text("bob", "plain").expect("send");
    let text = bob.receive(WAIT, 1).expect("receive").remove(0);
    assert!(bob.download("alice", text.message_id, &bad).expect_err("no file").to_string().contains("carries no file"));
    assert!(bob.download("alice", 999, &bad).expect_err("unknown").to_string().contains("no message 999"));
    let big = files.path().join("big.bin");
    std::fs::File::create(&big).expect("create").set_len(MAX_FILE_SIZE + 1).expect("sparse file");
    let err = alice.send_file("bob", &big, Some(MediaKind::Document), "").expect_err("over the limit");
    assert!(err.to_string().contains("up to 50 MiB"), "{err}");
    assert!(bob.receive(Duration::from_millis(300), 1).expect("receive").is_empty(), "nothing was sent");
}

#[test]
fn the_outbox_keeps_order_waits_out_an_outage_and_sends_each_message_once() {
    let mut world = World::start();
    let alice = world.user("alice");
    let bob = world.user("bob");
    let text = |t: &str| {
        let mut c = Content::new();
        let mut x = crate::wire::e2e::Text::new();
        x.text = t.to_string();
        c.set_text(x);
        c
    };

    // In order; a refusal leaves the queue with its reason and does not stop the rest.
    let first = alice.queue_content("@bob", &text("one")).expect("queue");
    alice.queue_content("nobody_here", &text("lost")).expect("queue");
    alice.queue_content("bob", &text("two")).expect("queue");
    let mut fates = Vec::new();
    let done = alice
        .flush_outbox(|q, a| fates.push((q.text().to_string(), matches!(a, Attempt::Sent(_)), matches!(a, Attempt::Refused(_)))))
        .expect("flush");
    assert!(done);
    assert_eq!(fates, [("one".into(), true, false), ("lost".into(), false, true), ("two".into(), true, false)]);
    assert!(alice.queued().expect("queued").is_empty());
    let got: Vec<String> = bob.receive(WAIT, 2).expect("bob receives").into_iter().map(|m| m.text).collect();
    assert_eq!(got, ["one", "two"]);

    // The same queued message sent twice (two processes of one profile, or a lost answer):
    // the platform takes it once and answers both with its id.
    let a = match alice.send_queued(&first) {
        Attempt::Sent(s) => s,
        other => panic!("{other:?}"),
    };
    assert!(a.message_id > 0);

    // The platform goes away: the message waits, and what follows waits behind it.
    let address = world.server.address();
    let data = world.dir.path().join("platform");
    let server = std::mem::replace(&mut world.server, RunningServer::start("127.0.0.1:0", &world.dir.path().join("other")).expect("spare"));
    server.shutdown();
    alice.queue_content("bob", &text("three")).expect("queue");
    alice.queue_content("bob", &text("four")).expect("queue");
    let mut waited = 0;
    let done = alice
        .flush_outbox(|_, a| {
            assert!(matches!(a, Attempt::Waiting(e) if e.is_transient()), "{a:?}");
            waited += 1;
        })
        .expect("flush");
    assert!(!done && waited == 1, "the first waits, the rest is not tried");
    assert_eq!(alice.queued().expect("queued").iter().map(|q| q.text().to_string()).collect::<Vec<_>>(), ["three", "four"]);

    // Back: both go, in order, once.
    world.server = RunningServer::start(&address, &data).expect("the platform is back");
    let deadline = std::time::Instant::now() + WAIT;
    while !alice.flush_outbox(|_, _| {}).expect("flush") {
        assert!(std::time::Instant::now() < deadline, "the outbox never drained");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Bob's stream broke with the server: the next receive opens a new one.
    let mut got: Vec<String> = Vec::new();
    while got.len() < 2 && std::time::Instant::now() < deadline {
        match bob.receive(WAIT, 2 - got.len()) {
            Ok(messages) => got.extend(messages.into_iter().map(|m| m.text)),
            Err(ClientError::InboxClosed(_)) => std::thread::sleep(Duration::from_millis(200)),
            Err(e) => panic!("bob receives: {e}"),
        }
    }
    assert_eq!(got, ["three", "four"], "each once, in order");
    assert!(bob.receive(Duration::from_secs(2), 1).expect("bob receives").is_empty(), "nothing twice");
}

/// A commit whose answer was lost (the platform took it; the answer never came back) is sent
/// again under its client message id before anything else happens in the group: the platform
/// answers the repeat with its first answer, and the group goes on.
#[test]
fn a_commit_whose_answer_was_lost_is_settled_and_the_group_goes_on() {
    let world = World::start();
    let alice = world.user("alice");
    let bob = world.user("bob");
    let carol = world.user("carol");
    let team = alice.create_group("Team").expect("create");
    alice.add_to_group(&team, "bob").expect("add bob");
    let joined = bob.receive_events(WAIT, 10).expect("receive");
    assert!(joined.iter().any(|e| matches!(e, Incoming::GroupJoined { .. })), "{joined:?}");
    // Bob replaced his leaf once joined (a self-update): Alice reads it first.
    let bobs = bob.group_epoch(&team).expect("epoch").expect("bob is in");
    alice.catch_up(&team, bobs).expect("alice catches up");

    // Alice's commit adding Carol reaches the platform, which takes it; its answer is lost.
    let invite = crate::wire::platform::AddGroupMemberRequest { group_id: team.0.to_vec(), user_id: carol.user_id(), ..Default::default() };
    alice.platform().client.add_group_member(&invite, alice.platform().opt()).expect("invite carol");
    let claim = crate::wire::platform::ClaimKeyPackagesRequest { user_id: carol.user_id(), ..Default::default() };
    let claimed = alice.platform().client.claim_key_packages(&claim, alice.platform().opt()).expect("claim");
    let packages: Vec<mls_group::Claimed> = claimed
        .key_packages
        .into_iter()
        .map(|k| mls_group::Claimed { user_id: carol.user_id(), device_id: k.device_id, key_package: k.key_package })
        .collect();
    let commit = alice.make_commit(&team, "adding carol", |c| mls_group::add(c, &team.0, &packages).map(Some)).expect("make").expect("a commit");
    let out = commit.out.clone();
    let req = crate::wire::platform::SendGroupMessageRequest {
        group_id: team.0.to_vec(),
        client_message_id: commit.client_message_id.clone(),
        message: out.message,
        group_info: out.group_info,
        welcome: out.welcome,
        ..Default::default()
    };
    let taken = alice.platform().client.send_group_message(&req, alice.platform().opt()).expect("the platform takes it");
    assert_eq!(taken.status.enum_value(), Ok(crate::wire::platform::send_group_message_response::Status::OK));
    let before = alice.group_epoch(&team).expect("epoch");

    // Alice's next message settles the commit first (merged: the platform's repeat is OK), then goes out.
    alice.send_group_text(&team, "carol is in", None).expect("the next send works");
    assert_eq!(alice.group_epoch(&team).expect("epoch"), before.map(|e| e + 1), "the commit was merged");
    for member in [&bob, &carol] {
        let events = member.receive_events(WAIT, 10).expect("receive");
        assert!(
            events.iter().any(|e| matches!(e, Incoming::GroupMessage { message, .. } if message.text == "carol is in")),
            "{events:?}"
        );
    }
}
