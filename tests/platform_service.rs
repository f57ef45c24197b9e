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
    let recovery = bot_gateway::crypto::hex_decode_32(&creds.identity_recovery_secret_hex).expect("hex");
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
        &bot_gateway::crypto::hex_decode_32(&creds.identity_recovery_secret_hex).expect("hex"),
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
