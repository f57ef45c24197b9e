//! The platform's gRPC service round trip, in process: a real server on an ephemeral loopback
//! port, real keys, the shared client in `wire::connect`. Only the library's public API.

use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};
use grpcio::RpcStatusCode;

use bot_gateway::clock::unix_now;
use bot_gateway::crypto::identity::{self, sign_device_certificate};
use bot_gateway::crypto::{x3dh, IdentityKeyPair, OneTimePrekeyPair, SignedPrekeyPair};
use bot_gateway::platform::{provision_bot, RunningServer};
use bot_gateway::wire::platform::{self as pb, send_result::Status as SendStatus};
use bot_gateway::wire::{Credential, Platform};

type Item = std::result::Result<pb::InboxEnvelope, (RpcStatusCode, String)>;

/// A device's key material, as a client keeps it.
struct DeviceSecrets {
    device: IdentityKeyPair,
    spk: SignedPrekeyPair,
    otks: Vec<OneTimePrekeyPair>,
}

fn device_keys(identity: &IdentityKeyPair, otk_count: u32) -> (pb::DeviceKeys, DeviceSecrets) {
    let device = IdentityKeyPair::generate();
    let spk = SignedPrekeyPair::generate(1, &device);
    let otks = OneTimePrekeyPair::generate_batch(100, otk_count);
    let keys = pb::DeviceKeys {
        device_key: device.public_key().to_vec(),
        device_certificate: sign_device_certificate(identity, &device.public_key()).to_vec(),
        signed_prekey: Some(pb::SignedPrekey {
            id: spk.id,
            public_key: spk.key.public.to_vec(),
            signature: spk.signature.to_vec(),
            ..Default::default()
        })
        .into(),
        one_time_prekeys: otks
            .iter()
            .map(|k| pb::OneTimePrekey { id: k.id, public_key: k.key.public.to_vec(), ..Default::default() })
            .collect(),
        ..Default::default()
    };
    (keys, DeviceSecrets { device, spk, otks })
}

fn code<T: std::fmt::Debug>(r: grpcio::Result<T>) -> (RpcStatusCode, String) {
    match r {
        Err(grpcio::Error::RpcFailure(s)) => (s.code(), s.message().to_string()),
        other => panic!("expected an RPC failure, got {other:?}"),
    }
}

fn connect(server: &RunningServer, credential: Credential) -> Platform {
    let p = Platform::connect(&server.endpoint(), credential).expect("endpoint parses");
    assert!(p.wait_connected(Duration::from_secs(10)), "server reachable");
    p
}

/// Reads an Inbox stream on a named thread so the test can wait with a deadline.
fn open_inbox(p: &Platform) -> Receiver<Item> {
    let stream = p.client.inbox(&pb::InboxRequest::default(), p.opt_with_timeout(None)).expect("inbox call starts");
    let (tx, rx) = crossbeam_channel::bounded(64);
    std::thread::Builder::new()
        .name("test-inbox-reader".into())
        .spawn(move || {
            for item in futures::executor::block_on_stream(stream) {
                let item = item.map_err(|e| match e {
                    grpcio::Error::RpcFailure(s) => (s.code(), s.message().to_string()),
                    other => (RpcStatusCode::UNKNOWN, other.to_string()),
                });
                let end = item.is_err();
                if tx.send(item).is_err() || end {
                    return;
                }
            }
            let _ = tx.send(Err((RpcStatusCode::OK, "stream ended".into())));
        })
        .expect("spawn reader");
    rx
}

fn next(rx: &Receiver<Item>) -> Item {
    rx.recv_timeout(Duration::from_secs(10)).expect("an inbox item within 10 s")
}

fn outgoing(cmid: &str, to: u64, ciphertexts: Vec<(u32, Vec<u8>)>) -> pb::OutgoingMessage {
    pb::OutgoingMessage {
        client_message_id: cmid.into(),
        recipient_user_id: to,
        ciphertexts: ciphertexts
            .into_iter()
            .map(|(device_id, ciphertext)| pb::DeviceCiphertext { device_id, ciphertext, ..Default::default() })
            .collect(),
        ..Default::default()
    }
}

fn send(p: &Platform, messages: Vec<pb::OutgoingMessage>) -> Vec<pb::SendResult> {
    let req = pb::SendMessagesRequest { messages, ..Default::default() };
    p.client.send_messages(&req, p.opt()).expect("send call").results
}

#[test]
fn register_lookup_send_stream_ack() {
    bot_gateway::crypto::init();
    let dir = tempfile::tempdir().expect("temp dir");
    let server = RunningServer::start("127.0.0.1:0", &dir.path().join("platform")).expect("server starts");
    let anon = connect(&server, Credential::Anonymous);

    // ── A user registers. ──
    let alice_identity = IdentityKeyPair::generate();
    let (alice_keys, alice_secrets) = device_keys(&alice_identity, 2);
    let mut req = pb::RegisterUserRequest {
        username: "Alice_1".into(),
        display_name: "Alice".into(),
        identity_key: alice_identity.public_key().to_vec(),
        device: Some(alice_keys.clone()).into(),
        ..Default::default()
    };
    let reg = anon.client.register_user(&req, anon.opt()).expect("alice registers");
    assert_eq!(reg.device_id, 1);
    assert_eq!(reg.device_secret.len(), 32);
    req.username = "alice_1".into();
    assert_eq!(code(anon.client.register_user(&req, anon.opt())).0, RpcStatusCode::ALREADY_EXISTS);
    let mut forged = req.clone();
    forged.username = "mallory".into();
    forged.identity_key = IdentityKeyPair::generate().public_key().to_vec();
    let (c, m) = code(anon.client.register_user(&forged, anon.opt()));
    assert_eq!(c, RpcStatusCode::INVALID_ARGUMENT, "{m}");
    let alice = connect(
        &server,
        Credential::Device {
            user_id: reg.user_id,
            device_id: reg.device_id,
            secret_hex: bot_gateway::crypto::hex_encode(&reg.device_secret),
        },
    );
    let who = alice.client.verify_credential(&pb::VerifyCredentialRequest::default(), alice.opt()).expect("valid");
    assert_eq!((who.user_id, who.device_id), (reg.user_id, 1));
    drop(alice_secrets);

    // ── A bot is created and its gateway registers a device with the identity proof. ──
    let creds = provision_bot(server.store(), "Echo_Bot", "Echo", "default", None).expect("bot created");
    let recovery = bot_gateway::crypto::hex_decode_32(creds.recovery_secret_hex().expect("drawn by create-bot")).expect("hex");
    let bot_identity = IdentityKeyPair::from_recovery_secret(&recovery);
    assert_eq!(bot_gateway::crypto::hex_encode(&bot_identity.public_key()), creds.bot_id_hex);
    let mut bot = connect(&server, Credential::Bot { token: creds.token.clone(), device_id: None });
    let (bot_keys, bot_secrets) = device_keys(&bot_identity, 3);
    let now = unix_now();
    let proof = |signer: &IdentityKeyPair, ts: i64| pb::RegisterBotDeviceRequest {
        device: Some(bot_keys.clone()).into(),
        timestamp: ts,
        proof: signer
            .sign(&identity::bot_registration_statement(creds.compat_user_id, &bot_keys.device_key, ts))
            .to_vec(),
        ..Default::default()
    };
    let wrong = IdentityKeyPair::from_recovery_secret(&[7; 32]);
    let (c, m) = code(bot.client.register_bot_device(&proof(&wrong, now), bot.opt()));
    assert_eq!(c, RpcStatusCode::PERMISSION_DENIED);
    assert!(m.contains("identity proof does not match this bot"), "{m}");
    let (c, _) = code(bot.client.register_bot_device(&proof(&bot_identity, now - 3600), bot.opt()));
    assert_eq!(c, RpcStatusCode::PERMISSION_DENIED, "stale timestamp");
    let dev = bot.client.register_bot_device(&proof(&bot_identity, now), bot.opt()).expect("registers");
    assert_eq!((dev.bot_user_id, dev.device_id), (creds.compat_user_id, 1));
    let (c, m) = code(bot.client.send_messages(&pb::SendMessagesRequest::default(), bot.opt()));
    assert_eq!(c, RpcStatusCode::UNAUTHENTICATED, "no device id yet: {m}");
    bot.set_credential(Credential::Bot { token: creds.token.clone(), device_id: Some(9) });
    let (c, m) = code(bot.client.verify_credential(&pb::VerifyCredentialRequest::default(), bot.opt()));
    assert_eq!(c, RpcStatusCode::UNAUTHENTICATED);
    assert_eq!(m, format!("device 9 does not belong to bot {}", creds.compat_user_id));
    bot.set_credential(Credential::Bot { token: creds.token.clone(), device_id: Some(1) });

    // ── Lookup: case-insensitive, '@' optional, bot mark, identity key = Bot ID. ──
    let lookup = |name: &str| {
        anon.client.lookup_user(&pb::LookupUserRequest { username: name.into(), ..Default::default() }, anon.opt())
    };
    let profile = lookup("@ECHO_bot").expect("found");
    assert!(profile.is_bot);
    assert_eq!(profile.user_id, creds.compat_user_id);
    assert_eq!(bot_gateway::crypto::hex_encode(&profile.identity_key), creds.bot_id_hex);
    assert_eq!(code(lookup("nobody_here")).0, RpcStatusCode::NOT_FOUND);
    let by_id = anon
        .client
        .lookup_user(&pb::LookupUserRequest { user_id: reg.user_id, ..Default::default() }, anon.opt())
        .expect("by id");
    assert_eq!((by_id.username.as_str(), by_id.is_bot), ("Alice_1", false));

    // ── Alice fetches the bot's bundle, starts a session and sends. ──
    let (c, _) = code(anon.client.get_prekey_bundles(&pb::GetPrekeyBundlesRequest::default(), anon.opt()));
    assert_eq!(c, RpcStatusCode::UNAUTHENTICATED);
    let bundles = alice
        .client
        .get_prekey_bundles(
            &pb::GetPrekeyBundlesRequest { user_id: creds.compat_user_id, ..Default::default() },
            alice.opt(),
        )
        .expect("bundles");
    assert!(bundles.profile.is_bot);
    assert_eq!(bundles.bundles.len(), 1);
    let b = &bundles.bundles[0];
    assert_eq!(b.device_id, 1);
    identity::verify_device_certificate(&bundles.profile.identity_key, &b.device_key, &b.device_certificate)
        .expect("certificate by the bot identity");
    let otk = b.one_time_prekey.as_ref().expect("a one-time prekey");
    let spk = b.signed_prekey.as_ref().expect("signed prekey");
    let mut session = x3dh::initiate_session(
        &IdentityKeyPair::from_seed(&[1; 32]),
        &x3dh::PrekeyBundle {
            device_key: b.device_key.as_slice().try_into().expect("32 bytes"),
            signed_prekey_id: spk.id,
            signed_prekey: spk.public_key.as_slice().try_into().expect("32 bytes"),
            signed_prekey_signature: spk.signature.clone(),
            one_time_prekey: Some((otk.id, otk.public_key.as_slice().try_into().expect("32 bytes"))),
        },
    )
    .expect("session starts");
    let first = session.encrypt(b"hello bot");
    let results = send(&alice, vec![outgoing("c1", creds.compat_user_id, vec![])]);
    assert_eq!(results[0].status.enum_value(), Ok(SendStatus::STALE_DEVICES));
    assert_eq!(results[0].missing_devices, vec![1]);
    let results = send(&alice, vec![outgoing("c1", creds.compat_user_id, vec![(1, first.clone())])]);
    assert_eq!(results[0].status.enum_value(), Ok(SendStatus::OK), "{:?}", results[0]);
    assert_eq!(results[0].message_id, 1);
    let again = send(&alice, vec![outgoing("c1", creds.compat_user_id, vec![(1, first.clone())])]);
    assert_eq!((again[0].message_id, again[0].date), (1, results[0].date), "a repeat answers the first result");
    let unknown = send(&alice, vec![outgoing("c2", 77, vec![(1, vec![1])])]);
    assert_eq!(unknown[0].status.enum_value(), Ok(SendStatus::UNKNOWN_RECIPIENT));

    // ── The bot's Inbox stream delivers it once, then live messages. ──
    let inbox = open_inbox(&bot);
    let env = next(&inbox).expect("first envelope");
    assert_eq!((env.sender_user_id, env.sender_device_id), (reg.user_id, 1));
    assert_eq!(
        (env.sender_username.as_str(), env.sender_display_name.as_str(), env.sender_is_bot),
        ("Alice_1", "Alice", false)
    );
    assert_eq!((env.message_id, env.client_message_id.as_str()), (1, "c1"));
    let header = x3dh::peek_prekey_header(&env.ciphertext).expect("decodes").expect("X3DH header");
    let used_otk = bot_secrets.otks.iter().find(|k| Some(k.id) == header.one_time_prekey_id);
    let mut bot_session =
        x3dh::accept_session(&bot_secrets.device, &bot_secrets.spk, used_otk, &header).expect("bot accepts");
    assert_eq!(bot_session.decrypt(&env.ciphertext).expect("decrypts"), b"hello bot");

    let second = session.encrypt(b"second");
    let r = send(&alice, vec![outgoing("c3", creds.compat_user_id, vec![(1, second)])]);
    assert_eq!(r[0].message_id, 2);
    let env2 = next(&inbox).expect("live envelope");
    assert!(env2.seq > env.seq);
    assert_eq!(bot_session.decrypt(&env2.ciphertext).expect("decrypts"), b"second");

    // ── The bot replies: the dialog counter is shared by both directions. ──
    let reply = bot_session.encrypt(b"echo");
    let r = send(&bot, vec![outgoing("r1", reg.user_id, vec![(1, reply)])]);
    assert_eq!((r[0].status.enum_value(), r[0].message_id), (Ok(SendStatus::OK), 3));

    // ── Ack one; a new stream replaces the old one and resends only what is unacknowledged. ──
    bot.client.ack(&pb::AckRequest { seqs: vec![env.seq], ..Default::default() }, bot.opt()).expect("ack");
    let inbox2 = open_inbox(&bot);
    let ended = next(&inbox).expect_err("the old stream ends");
    assert_eq!(ended.0, RpcStatusCode::ABORTED, "{ended:?}");
    let resent = next(&inbox2).expect("unacknowledged envelope again");
    assert_eq!(resent.seq, env2.seq);
    bot.client.ack(&pb::AckRequest { seqs: vec![env2.seq], ..Default::default() }, bot.opt()).expect("ack");
    assert!(inbox2.recv_timeout(Duration::from_millis(300)).is_err_and(|e| e == RecvTimeoutError::Timeout));

    // ── Alice's inbox has the reply. ──
    let alice_inbox = open_inbox(&alice);
    let got = next(&alice_inbox).expect("reply");
    assert_eq!((got.sender_is_bot, got.sender_username.as_str(), got.message_id), (true, "Echo_Bot", 3));
    assert_eq!(session.decrypt(&got.ciphertext).expect("decrypts"), b"echo");

    // ── Prekeys: upload, rotate, and the bundle shows them. ──
    let fresh = OneTimePrekeyPair::generate_batch(500, 2);
    let new_spk = SignedPrekeyPair::generate(2, &bot_secrets.device);
    let up = pb::UploadPrekeysRequest {
        one_time_prekeys: fresh
            .iter()
            .map(|k| pb::OneTimePrekey { id: k.id, public_key: k.key.public.to_vec(), ..Default::default() })
            .collect(),
        signed_prekey: Some(pb::SignedPrekey {
            id: 2,
            public_key: new_spk.key.public.to_vec(),
            signature: new_spk.signature.to_vec(),
            ..Default::default()
        })
        .into(),
        ..Default::default()
    };
    let left = bot.client.upload_prekeys(&up, bot.opt()).expect("upload");
    assert_eq!(left.one_time_prekeys_remaining, 2 + 2, "two of three initial left, plus two");
    let mut bad = up.clone();
    bad.signed_prekey.as_mut().expect("set").signature = vec![0; 64];
    assert_eq!(code(bot.client.upload_prekeys(&bad, bot.opt())).0, RpcStatusCode::INVALID_ARGUMENT);

    // ── Revocation: the old token stops working at once. ──
    let new_token = server.store().rotate_bot_token(creds.compat_user_id).expect("rotate");
    let (c, m) = code(bot.client.verify_credential(&pb::VerifyCredentialRequest::default(), bot.opt()));
    assert_eq!((c, m.as_str()), (RpcStatusCode::UNAUTHENTICATED, "bot token revoked or unknown"));
    bot.set_credential(Credential::Bot { token: new_token, device_id: Some(1) });
    bot.client.verify_credential(&pb::VerifyCredentialRequest::default(), bot.opt()).expect("new token works");

    server.shutdown();
    let end = next(&inbox2).expect_err("streams end on shutdown");
    assert_ne!(end.0, RpcStatusCode::OK, "{end:?}");
}

#[test]
fn many_messages_arrive_in_order() {
    bot_gateway::crypto::init();
    let dir = tempfile::tempdir().expect("temp dir");
    let server = RunningServer::start("127.0.0.1:0", dir.path()).expect("server starts");
    let creds = provision_bot(server.store(), "load_bot", "Load", "default", None).expect("bot");
    let bot_identity = IdentityKeyPair::from_recovery_secret(
        &bot_gateway::crypto::hex_decode_32(creds.recovery_secret_hex().expect("drawn by create-bot")).expect("hex"),
    );
    let (keys, _secrets) = device_keys(&bot_identity, 0);
    let mut bot = connect(&server, Credential::Bot { token: creds.token.clone(), device_id: None });
    let ts = unix_now();
    let req = pb::RegisterBotDeviceRequest {
        proof: bot_identity
            .sign(&identity::bot_registration_statement(creds.compat_user_id, &keys.device_key, ts))
            .to_vec(),
        device: Some(keys).into(),
        timestamp: ts,
        ..Default::default()
    };
    let dev = bot.client.register_bot_device(&req, bot.opt()).expect("device");
    bot.set_credential(Credential::Bot { token: creds.token.clone(), device_id: Some(dev.device_id) });

    let user_identity = IdentityKeyPair::generate();
    let anon = connect(&server, Credential::Anonymous);
    let (ukeys, _) = device_keys(&user_identity, 0);
    let reg = anon
        .client
        .register_user(
            &pb::RegisterUserRequest {
                username: "loader".into(),
                display_name: "Loader".into(),
                identity_key: user_identity.public_key().to_vec(),
                device: Some(ukeys).into(),
                ..Default::default()
            },
            anon.opt(),
        )
        .expect("user");
    let user = connect(
        &server,
        Credential::Device {
            user_id: reg.user_id,
            device_id: 1,
            secret_hex: bot_gateway::crypto::hex_encode(&reg.device_secret),
        },
    );

    let inbox = open_inbox(&bot);
    const TOTAL: u64 = 2000;
    let started = std::time::Instant::now();
    for batch in 0..(TOTAL / 200) {
        let messages = (0..200)
            .map(|i| {
                let n = batch * 200 + i;
                outgoing(&format!("m{n}"), creds.compat_user_id, vec![(1, n.to_be_bytes().to_vec())])
            })
            .collect();
        let results = send(&user, messages);
        assert!(results.iter().all(|r| r.status.enum_value() == Ok(SendStatus::OK)));
    }
    let mut last_seq = 0;
    for n in 0..TOTAL {
        let env = next(&inbox).expect("envelope");
        assert!(env.seq > last_seq);
        last_seq = env.seq;
        assert_eq!(env.message_id, n + 1);
        assert_eq!(env.ciphertext, n.to_be_bytes().to_vec());
    }
    eprintln!("{TOTAL} messages sent and streamed in {:?}", started.elapsed());
    server.shutdown();
}

// ── Groups: the MLS delivery service, with real MLS members (e2e::group) ──

mod groups {
    use super::*;
    use bot_gateway::crypto::mls;
    use bot_gateway::e2e::{self, group::Claimed, group::CommitOut, group::Received, Registration};
    use pb::group_delivery::Kind;
    use pb::send_group_message_response::Status as GroupStatus;
    use rusqlite::Connection;

    /// A user's device: its e2e state (keys, MLS), its client and its Inbox stream.
    struct Member {
        conn: Connection,
        p: Platform,
        user_id: u64,
        inbox: Receiver<Item>,
    }

    /// The first key package ClaimKeyPackages handed out for `user_id`, as `e2e::group::add` takes it.
    fn claimed_of(user_id: u64, claimed: &pb::ClaimKeyPackagesResponse) -> Vec<Claimed> {
        let k = &claimed.key_packages[0];
        vec![Claimed { user_id, device_id: k.device_id, key_package: k.key_package.clone() }]
    }

    fn member(server: &RunningServer, anon: &Platform, name: &str) -> Member {
        let mut conn = Connection::open_in_memory().expect("db");
        e2e::create_all_tables(&conn).expect("e2e tables");
        mls::migrate_storage(&mut conn).expect("openmls tables");
        let identity = IdentityKeyPair::generate();
        let keys = e2e::create_device_keys(&conn, &identity).expect("device keys");
        let req = pb::RegisterUserRequest {
            username: name.into(),
            display_name: name.into(),
            identity_key: identity.public_key().to_vec(),
            device: Some(keys).into(),
            ..Default::default()
        };
        let reg = anon.client.register_user(&req, anon.opt()).expect("registers");
        e2e::save_registration(&conn, Registration { user_id: reg.user_id, device_id: reg.device_id }).expect("save");
        let p = connect(
            server,
            Credential::Device {
                user_id: reg.user_id,
                device_id: reg.device_id,
                secret_hex: bot_gateway::crypto::hex_encode(&reg.device_secret),
            },
        );
        let inbox = open_inbox(&p);
        Member { conn, p, user_id: reg.user_id, inbox }
    }

    fn send(m: &Member, gid: &[u8], cmid: &str, c: &CommitOut) -> pb::SendGroupMessageResponse {
        send_on(&m.p, gid, cmid, c)
    }

    fn send_on(p: &Platform, gid: &[u8], cmid: &str, c: &CommitOut) -> pb::SendGroupMessageResponse {
        let req = pb::SendGroupMessageRequest {
            group_id: gid.to_vec(),
            client_message_id: cmid.into(),
            message: c.message.clone(),
            group_info: c.group_info.clone(),
            welcome: c.welcome.clone(),
            ..Default::default()
        };
        p.client.send_group_message(&req, p.opt()).expect("send call")
    }

    fn say(m: &Member, gid: &[u8], cmid: &str, text: &str) -> pb::SendGroupMessageResponse {
        let (message, _) = e2e::group::encrypt(&m.conn, gid, text.as_bytes()).expect("encrypt");
        send(m, gid, cmid, &CommitOut { message, ..Default::default() })
    }

    fn status(r: &pb::SendGroupMessageResponse) -> GroupStatus {
        r.status.enum_value_or_default()
    }

    /// The next group envelope of `m`, acknowledged; Welcomes are joined and MLS messages
    /// processed (as a member would, in order).
    fn next_group(m: &Member, gid: &[u8]) -> (pb::InboxEnvelope, Option<Received>) {
        let e = next(&m.inbox).expect("an envelope");
        m.p.client.ack(&pb::AckRequest { seqs: vec![e.seq], ..Default::default() }, m.p.opt()).expect("ack");
        let g = e.group.as_ref().expect("a group delivery");
        assert_eq!(g.group_id, gid);
        let got = match g.kind.enum_value_or_default() {
            Kind::MLS_MESSAGE => Some(e2e::group::receive(&m.conn, gid, &e.ciphertext).expect("processes")),
            Kind::WELCOME => {
                assert_eq!(e2e::group::join_welcome(&m.conn, &e.ciphertext).expect("joins"), gid);
                None
            }
            Kind::MEMBERSHIP | Kind::TITLE | Kind::JOIN_REQUEST | Kind::DELETED => None,
        };
        (e, got)
    }

    fn kind(e: &pb::InboxEnvelope) -> Kind {
        e.group.kind.enum_value_or_default()
    }

    fn invite(by: &Member, gid: &[u8], user_id: u64) -> pb::Group {
        let req = pb::AddGroupMemberRequest { group_id: gid.to_vec(), user_id, ..Default::default() };
        by.p.client.add_group_member(&req, by.p.opt()).expect("invite").group.unwrap()
    }

    fn epoch_of(m: &Member, gid: &[u8]) -> Option<u64> {
        e2e::group::epoch(&m.conn, gid).expect("epoch")
    }

    #[test]
    fn create_join_talk_race_leave_and_no_plaintext_stored() {
        bot_gateway::crypto::init();
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("platform");
        let server = RunningServer::start("127.0.0.1:0", &data).expect("server starts");
        let anon = connect(&server, Credential::Anonymous);
        let alice = member(&server, &anon, "alice");
        let bob = member(&server, &anon, "bob");
        let carol = member(&server, &anon, "carol");
        let eve = member(&server, &anon, "eve");
        let gid = e2e::group::new_group_id();
        let g = || pb::GroupRequest { group_id: gid.to_vec(), ..Default::default() };

        // ── Alice creates the group. ──
        let info = e2e::group::create(&alice.conn, &gid).expect("mls create");
        let create = pb::CreateGroupRequest {
            group_id: gid.to_vec(),
            title: "Team".into(),
            type_: pb::GroupType::GROUP.into(),
            group_info: info.clone(),
            ..Default::default()
        };
        let (c, m) = code(bob.p.client.create_group(&pb::CreateGroupRequest { group_id: vec![1; 32], ..create.clone() }, bob.p.opt()));
        assert_eq!(c, RpcStatusCode::INVALID_ARGUMENT, "{m}");
        let group = alice.p.client.create_group(&create, alice.p.opt()).expect("created");
        assert_eq!((group.epoch, group.title.as_str(), group.members.len()), (0, "Team", 1));
        assert_eq!(group.members[0].role.enum_value_or_default(), pb::GroupRole::OWNER);
        let (c, m) = code(bob.p.client.get_group(&g(), bob.p.opt()));
        assert_eq!(c, RpcStatusCode::NOT_FOUND, "{m}");

        // ── Bob is invited, told, and joins by external commit. ──
        invite(&alice, &gid, bob.user_id);
        let (notice, _) = next_group(&bob, &gid);
        assert_eq!(kind(&notice), Kind::MEMBERSHIP);
        assert_eq!(notice.group.change.new.role.enum_value_or_default(), pb::GroupRole::INVITED);
        assert_eq!(notice.group.title, "Team");
        let gi = bob.p.client.get_group_info(&g(), bob.p.opt()).expect("group info");
        assert_eq!(gi.epoch, 0);
        let (_, join) = e2e::group::join_external(&bob.conn, &gi.group_info).expect("join");
        let r = send(&bob, &gid, "bob-join", &join);
        assert_eq!((status(&r), r.epoch), (GroupStatus::OK, 1), "{}", r.error);
        assert_eq!(kind(&next_group(&alice, &gid).0), Kind::MEMBERSHIP, "bob invited");
        let (commit, got) = next_group(&alice, &gid);
        assert_eq!((kind(&commit), commit.sender_user_id), (Kind::MLS_MESSAGE, bob.user_id));
        assert!(matches!(got, Some(Received::Commit { epoch: 1, .. })));
        let (joined, _) = next_group(&alice, &gid);
        assert_eq!(joined.group.change.new.role.enum_value_or_default(), pb::GroupRole::MEMBER);
        assert_eq!(kind(&next_group(&bob, &gid).0), Kind::MEMBERSHIP, "bob is a member");

        // ── Carol is added from a key package and joins by the Welcome. ──
        let kps = e2e::group::key_packages(&carol.conn, 3).expect("kps");
        let up = pb::KeyPackagesUpload { key_packages: kps.clone(), ..Default::default() };
        assert_eq!(carol.p.client.upload_key_packages(&up, carol.p.opt()).expect("upload").remaining, 3);
        let (c, m) = code(alice.p.client.upload_key_packages(&up, alice.p.opt()));
        assert_eq!(c, RpcStatusCode::INVALID_ARGUMENT, "another device's key package: {m}");
        invite(&bob, &gid, carol.user_id);
        let claim = pb::ClaimKeyPackagesRequest { user_id: carol.user_id, ..Default::default() };
        let claimed = alice.p.client.claim_key_packages(&claim, alice.p.opt()).expect("claim");
        assert_eq!(claimed.key_packages.len(), 1);
        let add = e2e::group::add(&alice.conn, &gid, &claimed_of(carol.user_id, &claimed)).expect("add");
        let r = send(&alice, &gid, "add-carol", &add);
        assert_eq!((status(&r), r.epoch), (GroupStatus::OK, 2), "{}", r.error);
        e2e::group::commit_accepted(&alice.conn, &gid).expect("merge");
        let kinds: Vec<Kind> = (0..3).map(|_| kind(&next_group(&carol, &gid).0)).collect();
        assert_eq!(kinds, vec![Kind::MEMBERSHIP, Kind::WELCOME, Kind::MEMBERSHIP]);
        assert_eq!(epoch_of(&carol, &gid), Some(2));
        // Bob: carol invited, the commit, carol a member; Alice (who sent the commit): the two changes.
        assert_eq!(kind(&next_group(&bob, &gid).0), Kind::MEMBERSHIP, "carol invited");
        assert!(matches!(next_group(&bob, &gid).1, Some(Received::Commit { epoch: 2, .. })));
        for m in [&alice, &alice, &bob] {
            assert_eq!(kind(&next_group(m, &gid).0), Kind::MEMBERSHIP);
        }

        // ── Messages both ways, one order for everyone. ──
        assert_eq!(status(&say(&alice, &gid, "a1", "hello from alice")), GroupStatus::OK);
        assert_eq!(status(&say(&bob, &gid, "b1", "hi from bob")), GroupStatus::OK);
        let r = say(&carol, &gid, "c1", "carol says hi");
        // Ids 1 and 2 went to the service messages of bob's and carol's joins.
        assert_eq!((status(&r), r.message_id), (GroupStatus::OK, 5));
        let text = |got: Option<Received>| match got {
            Some(Received::Application { plaintext, .. }) => String::from_utf8(plaintext).expect("utf-8"),
            other => panic!("expected a message, got {other:?}"),
        };
        let read = |m: &Member, n: usize| -> Vec<(u64, String)> {
            (0..n)
                .map(|_| {
                    let (e, got) = next_group(m, &gid);
                    (e.group.group_seq, text(got))
                })
                .collect()
        };
        let at_alice = read(&alice, 2);
        let at_bob = read(&bob, 2);
        let at_carol = read(&carol, 2);
        assert_eq!(at_alice.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>(), ["hi from bob", "carol says hi"]);
        assert_eq!(at_bob.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>(), ["hello from alice", "carol says hi"]);
        assert_eq!(at_carol.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>(), ["hello from alice", "hi from bob"]);
        assert_eq!(at_alice[1].0, at_bob[1].0, "one group_seq per message");
        assert_eq!(at_bob[0].0, at_carol[0].0);

        // ── Two members commit at once: one wins, the other is STALE; no fork. ──
        let dave = member(&server, &anon, "dave");
        invite(&alice, &gid, dave.user_id);
        let dave_kps = e2e::group::key_packages(&dave.conn, 2).expect("kps");
        let up = pb::KeyPackagesUpload { key_packages: dave_kps.clone(), ..Default::default() };
        dave.p.client.upload_key_packages(&up, dave.p.opt()).expect("upload");
        for m in [&alice, &bob, &carol] {
            assert_eq!(kind(&next_group(m, &gid).0), Kind::MEMBERSHIP, "dave invited");
        }
        let by_alice = e2e::group::add(&alice.conn, &gid, &Claimed::of(dave.user_id, 1, &dave_kps[..1])).expect("alice adds dave");
        let by_bob = e2e::group::add(&bob.conn, &gid, &Claimed::of(dave.user_id, 1, &dave_kps[1..])).expect("bob adds dave");
        let (ra, rb) = std::thread::scope(|s| {
            let a = std::thread::Builder::new()
                .name("race-alice".into())
                .spawn_scoped(s, || send_on(&alice.p, &gid, "race-a", &by_alice))
                .expect("spawn");
            let b = std::thread::Builder::new()
                .name("race-bob".into())
                .spawn_scoped(s, || send_on(&bob.p, &gid, "race-b", &by_bob))
                .expect("spawn");
            (a.join().expect("alice's send"), b.join().expect("bob's send"))
        });
        let mut outcomes = [status(&ra), status(&rb)];
        outcomes.sort_by_key(|s| *s as i32);
        assert_eq!(outcomes, [GroupStatus::OK, GroupStatus::STALE_EPOCH], "{ra:?} {rb:?}");
        assert_eq!((ra.epoch, rb.epoch), (3, 3), "the winner's new epoch, the loser told the same");
        let (winner, loser) = if status(&ra) == GroupStatus::OK { (&alice, &bob) } else { (&bob, &alice) };
        e2e::group::commit_accepted(&winner.conn, &gid).expect("merge");
        e2e::group::commit_refused(&loser.conn, &gid).expect("discard");
        for m in [loser, &carol] {
            assert!(matches!(next_group(m, &gid).1, Some(Received::Commit { epoch: 3, .. })));
        }
        let kinds: Vec<Kind> = (0..3).map(|_| kind(&next_group(&dave, &gid).0)).collect();
        assert_eq!(kinds, vec![Kind::MEMBERSHIP, Kind::WELCOME, Kind::MEMBERSHIP]);
        for m in [&alice, &bob, &carol] {
            assert_eq!(kind(&next_group(m, &gid).0), Kind::MEMBERSHIP, "dave is a member");
        }
        for m in [&alice, &bob, &carol, &dave] {
            assert_eq!(epoch_of(m, &gid), Some(3), "every member at the same epoch");
        }
        assert_eq!(status(&say(&dave, &gid, "d1", "dave is in")), GroupStatus::OK);
        for m in [&alice, &bob, &carol] {
            assert_eq!(text(next_group(m, &gid).1), "dave is in");
        }

        // ── A commit adding a device of a user nobody invited is refused. ──
        let eve_kps = e2e::group::key_packages(&eve.conn, 1).expect("kps");
        let up = pb::KeyPackagesUpload { key_packages: eve_kps, ..Default::default() };
        eve.p.client.upload_key_packages(&up, eve.p.opt()).expect("upload");
        let claimed = alice.p.client.claim_key_packages(&pb::ClaimKeyPackagesRequest { user_id: eve.user_id, ..Default::default() }, alice.p.opt()).expect("claim");
        let sneak = e2e::group::add(&alice.conn, &gid, &claimed_of(eve.user_id, &claimed)).expect("add");
        let r = send(&alice, &gid, "sneak", &sneak);
        assert_eq!(status(&r), GroupStatus::REJECTED);
        assert!(r.error.contains("not invited"), "{}", r.error);
        e2e::group::commit_refused(&alice.conn, &gid).expect("discard");
        let (c, m) = code(eve.p.client.get_group_info(&g(), eve.p.opt()));
        assert_eq!(c, RpcStatusCode::NOT_FOUND, "{m}");

        // ── A bot without the groups capability is refused. ──
        let plain = provision_bot(server.store(), "plain_bot", "Plain", "default", None).expect("bot");
        let req = pb::AddGroupMemberRequest { group_id: gid.to_vec(), user_id: plain.compat_user_id, ..Default::default() };
        let (c, m) = code(alice.p.client.add_group_member(&req, alice.p.opt()));
        assert_eq!((c, m.as_str()), (RpcStatusCode::FAILED_PRECONDITION, "bot @plain_bot does not have the groups capability"));

        // ── Carol leaves: messages wait for the removal commit, which she receives. ──
        let left = carol.p.client.leave_group(&g(), carol.p.opt()).expect("leave");
        assert!(left.group.members.iter().any(|m| m.user.user_id == carol.user_id && m.role.enum_value_or_default() == pb::GroupRole::LEFT));
        for m in [&alice, &bob, &carol, &dave] {
            assert_eq!(kind(&next_group(m, &gid).0), Kind::MEMBERSHIP, "carol left");
        }
        let r = say(&alice, &gid, "blocked", "not yet");
        assert_eq!((status(&r), r.pending_removals.clone()), (GroupStatus::REMOVALS_PENDING, vec![carol.user_id]));
        let removal = e2e::group::remove_users(&bob.conn, &gid, &[carol.user_id]).expect("remove").expect("a leaf");
        let r = send(&bob, &gid, "rm-carol", &removal);
        assert_eq!((status(&r), r.epoch), (GroupStatus::OK, 4), "{}", r.error);
        e2e::group::commit_accepted(&bob.conn, &gid).expect("merge");
        assert!(matches!(next_group(&carol, &gid).1, Some(Received::Commit { removed_me: true, .. })));
        for m in [&alice, &dave] {
            assert!(matches!(next_group(m, &gid).1, Some(Received::Commit { epoch: 4, .. })));
        }
        assert_eq!(status(&say(&alice, &gid, "after", "carol cannot read this")), GroupStatus::OK);
        for m in [&bob, &dave] {
            assert_eq!(text(next_group(m, &gid).1), "carol cannot read this");
        }
        let reader = server.store().open_reader().expect("reader");
        let carol_addr = bot_gateway::platform::store::DeviceAddr { user_id: carol.user_id, device_id: 1 };
        assert!(bot_gateway::platform::store::read_inbox(&reader, carol_addr, 0, 10).expect("read").is_empty(), "nothing after the removal");
        let listed = bob.p.client.list_groups(&pb::ListGroupsRequest::default(), bob.p.opt()).expect("list");
        assert_eq!(listed.groups.len(), 1);
        assert_eq!(listed.groups[0].epoch, 4);
        assert!(carol.p.client.list_groups(&pb::ListGroupsRequest::default(), carol.p.opt()).expect("list").groups.is_empty());

        // ── The platform's files hold no group plaintext. ──
        // Read once the server is stopped: closing a descriptor of a database file that this
        // process opened outside SQLite drops SQLite's POSIX locks on it ("How To Corrupt", 2.2).
        drop(reader);
        // The store closes (and checkpoints its log) with its last holder: a call the shutdown
        // cancelled may still hold it for a moment on a gRPC thread. Read only once it closed,
        // or the log may move into the database between the two reads below.
        let store = server.store().clone();
        server.shutdown();
        for _ in 0..500 {
            if std::sync::Arc::strong_count(&store) == 1 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(std::sync::Arc::strong_count(&store), 1, "the store is still held 10 s after the shutdown");
        drop(store);
        let mut bytes = Vec::new();
        for name in ["platform.db", "platform.db-wal"] {
            if let Ok(b) = std::fs::read(data.join(name)) {
                bytes.extend(b);
            }
        }
        assert!(bytes.len() > 4096);
        for plain in ["hello from alice", "hi from bob", "carol says hi", "dave is in", "carol cannot read this"] {
            assert!(!bytes.windows(plain.len()).any(|w| w == plain.as_bytes()), "{plain:?} found in platform.db");
        }
        assert!(bytes.windows(4).any(|w| w == b"Team"), "the check can find text the platform does store");
    }
}

/// The platform takes only what the account signed: a second-version certificate that names
/// the caller's own device, and a removal signed by the bot's identity over that device's key.
/// It then serves both to every receiver, with certificates and bundles.
#[test]
fn certificates_and_removals_are_taken_only_when_the_account_signed_them() {
    bot_gateway::crypto::init();
    let dir = tempfile::tempdir().expect("temp dir");
    let server = RunningServer::start("127.0.0.1:0", &dir.path().join("platform")).expect("server starts");
    let anon = connect(&server, Credential::Anonymous);
    let identity = IdentityKeyPair::generate();
    let (keys, secrets) = device_keys(&identity, 2);
    let req = pb::RegisterUserRequest {
        username: "carol".into(),
        display_name: "Carol".into(),
        identity_key: identity.public_key().to_vec(),
        device: Some(keys).into(),
        ..Default::default()
    };
    let reg = anon.client.register_user(&req, anon.opt()).expect("carol registers");
    let carol = connect(
        &server,
        Credential::Device { user_id: reg.user_id, device_id: reg.device_id, secret_hex: bot_gateway::crypto::hex_encode(&reg.device_secret) },
    );
    let key = secrets.device.public_key();
    let certify = |device_id: u32, by: &IdentityKeyPair| {
        let binding = identity::DeviceBinding { user_id: reg.user_id, device_id, created_at: 1_800_000_000 };
        let certificate = pb::DeviceCertificateV2 {
            created_at: binding.created_at,
            signature: identity::sign_device_certificate_v2(by, &key, binding).to_vec(),
            ..Default::default()
        };
        carol.client.certify_device(&pb::CertifyDeviceRequest { certificate: Some(certificate).into(), ..Default::default() }, carol.opt())
    };
    assert_eq!(code(certify(2, &identity)).0, RpcStatusCode::PERMISSION_DENIED, "made for another device id");
    assert_eq!(code(certify(1, &IdentityKeyPair::generate())).0, RpcStatusCode::PERMISSION_DENIED, "another account's");
    certify(1, &identity).expect("carol's own device");
    let answer = carol
        .client
        .get_device_certificates(&pb::GetDeviceCertificatesRequest { user_id: reg.user_id, device_ids: vec![1], ..Default::default() }, carol.opt())
        .expect("certificates");
    assert_eq!(answer.devices[0].certificate_v2.created_at, 1_800_000_000, "served to receivers");

    // A bot with two devices; device 2's removal, signed by the bot, is taken; a forged one not.
    let creds = provision_bot(server.store(), "pair_bot", "Pair", "default", None).expect("bot");
    let bot_identity =
        IdentityKeyPair::from_recovery_secret(&bot_gateway::crypto::hex_decode_32(creds.recovery_secret_hex().expect("drawn")).expect("hex"));
    let mut devices = Vec::new();
    for _ in 0..2 {
        let (keys, secrets) = device_keys(&bot_identity, 1);
        let now = unix_now();
        let statement = identity::bot_registration_statement(creds.compat_user_id, &keys.device_key, now);
        let p = connect(&server, Credential::Bot { token: creds.token.clone(), device_id: None });
        let r = p
            .client
            .register_bot_device(
                &pb::RegisterBotDeviceRequest { device: Some(keys).into(), timestamp: now, proof: bot_identity.sign(&statement).to_vec(), ..Default::default() },
                p.opt(),
            )
            .expect("a device of the bot");
        devices.push((r.device_id, secrets.device.public_key()));
    }
    let runtime = connect(&server, Credential::Bot { token: creds.token.clone(), device_id: Some(devices[0].0) });
    let (gone, gone_key) = devices[1];
    let removal = |by: &IdentityKeyPair, key: [u8; 32]| {
        let statement = identity::device_removal_statement(&by.public_key(), creds.compat_user_id, gone, &key, 1_800_000_100);
        pb::RemoveDeviceRequest {
            removal: Some(pb::DeviceRemoval { device_id: gone, device_key: key.to_vec(), removed_at: 1_800_000_100, signature: by.sign(&statement).to_vec(), ..Default::default() }).into(),
            ..Default::default()
        }
    };
    assert_eq!(code(runtime.client.remove_device(&removal(&IdentityKeyPair::generate(), gone_key), runtime.opt())).0, RpcStatusCode::PERMISSION_DENIED);
    assert_eq!(code(runtime.client.remove_device(&removal(&bot_identity, [7; 32]), runtime.opt())).0, RpcStatusCode::PERMISSION_DENIED, "another key");
    assert_eq!(code(carol.client.remove_device(&removal(&bot_identity, gone_key), carol.opt())).0, RpcStatusCode::PERMISSION_DENIED, "not the bot");
    let done = runtime.client.remove_device(&removal(&bot_identity, gone_key), runtime.opt()).expect("signed by the bot");
    assert!(!done.already_removed);
    let bundles = carol
        .client
        .get_prekey_bundles(&pb::GetPrekeyBundlesRequest { user_id: creds.compat_user_id, ..Default::default() }, carol.opt())
        .expect("bundles");
    assert_eq!(bundles.bundles.iter().map(|b| b.device_id).collect::<Vec<_>>(), vec![devices[0].0], "the removed one is not served");
    assert_eq!(bundles.removals.iter().map(|r| r.device_id).collect::<Vec<_>>(), vec![gone], "its signed removal is");
}
