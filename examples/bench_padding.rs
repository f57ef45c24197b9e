//! Padding benchmark (not a test): what padding every end-to-end plaintext to its size bucket
//! (`e2e::padding`) costs. Two devices in in-memory databases talk through `e2e::seal` and
//! `e2e::open_envelope`, the path every private message takes (group messages pad the same
//! plaintext). Prints table rows:
//! - the mean plaintext size of a mix of small kinds (a press, a reaction, a chat action, a short
//!   and a long text, a real press carrying the signed context of a 300-byte menu)
//!   without and with padding, i.e. the bytes the platform carries more;
//! - encoding alone, plain and padded, in µs per message;
//! - a whole seal and open, padded as sent, in µs per message.
//!
//! Run by `scripts/bench` (every `examples/bench_*`).

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::Instant;

use bot_gateway::crypto::IdentityKeyPair;
use bot_gateway::e2e::{self, padding, Registration};
use bot_gateway::wire::e2e::{content::Body, CallbackPress, ChatAction, Content, Reaction, ReactionType};
use bot_gateway::wire::platform::{PrekeyBundle, Profile};
use protobuf::{Message as _, MessageField};
use rusqlite::Connection;

const ROUNDS: usize = 2_000;

fn device(user_id: u64) -> (Connection, IdentityKeyPair, bot_gateway::wire::platform::DeviceKeys) {
    let conn = Connection::open_in_memory().expect("db");
    e2e::create_all_tables(&conn).expect("tables");
    let account = IdentityKeyPair::generate();
    let keys = e2e::create_device_keys(&conn, &account).expect("keys");
    e2e::save_registration(&conn, Registration { user_id, device_id: 1 }).expect("registration");
    (conn, account, keys)
}

fn mix() -> Vec<Content> {
    let mut reaction = ReactionType::new();
    reaction.set_emoji("👍".into());
    let bodies = vec![
        Body::Press(CallbackPress { press_id: "0f".repeat(16), message_id: 7, callback_data: "buy:42".into(), ..Default::default() }),
        Body::Reaction(Reaction { message_id: 7, reactions: vec![reaction], ..Default::default() }),
        Body::ChatAction(ChatAction { action: "typing".into(), ..Default::default() }),
    ];
    let mut mix: Vec<Content> = bodies.into_iter().map(|b| Content { body: Some(b), ..Default::default() }).collect();
    mix.push(padding::press_of_a_menu(300));
    mix.push(e2e::text_content("Hello! What can I do for you?"));
    mix.push(e2e::text_content(&"A longer answer with some detail. ".repeat(20)));
    mix
}

fn main() {
    bot_gateway::crypto::init();
    let mix = mix();
    let plain: f64 = mix.iter().map(|c| c.compute_size() as f64).sum::<f64>() / mix.len() as f64;
    let padded: f64 = mix.iter().map(|c| padding::padded_bytes(c).len() as f64).sum::<f64>() / mix.len() as f64;

    let t = Instant::now();
    for i in 0..ROUNDS {
        std::hint::black_box(mix[i % mix.len()].write_to_bytes().expect("encode"));
    }
    let encode_plain = t.elapsed().as_secs_f64() * 1e6 / ROUNDS as f64;
    let t = Instant::now();
    for i in 0..ROUNDS {
        std::hint::black_box(padding::padded_bytes(&mix[i % mix.len()]));
    }
    let encode_padded = t.elapsed().as_secs_f64() * 1e6 / ROUNDS as f64;

    let (alice, alice_account, alice_keys) = device(1);
    let (bob, bob_account, bob_keys) = device(2);
    let profile = Profile { user_id: 2, username: "bob".into(), identity_key: bob_account.public_key().to_vec(), ..Default::default() };
    let bundle = PrekeyBundle {
        device_id: 1,
        device_key: bob_keys.device_key.clone(),
        device_certificate: bob_keys.device_certificate.clone(),
        signed_prekey: bob_keys.signed_prekey.clone(),
        one_time_prekey: MessageField::some(bob_keys.one_time_prekeys[0].clone()),
        ..Default::default()
    };
    e2e::add_sessions(&alice, &profile, &[bundle]).expect("session");
    // Bob opens a first message only from a device whose certificate he checked (`e2e::certify`).
    support::certify_device_one(&bob, 1, &alice_account.public_key(), &alice_keys).expect("certify alice's device");
    let t = Instant::now();
    for i in 0..ROUNDS {
        let sealed = e2e::seal(&alice, 2, &mix[i % mix.len()]).expect("seal");
        let envelope = bot_gateway::wire::platform::InboxEnvelope {
            sender_user_id: 1,
            sender_device_id: 1,
            ciphertext: sealed[0].ciphertext.clone(),
            ..Default::default()
        };
        std::hint::black_box(e2e::open_envelope(&bob, &envelope).expect("open"));
    }
    let round_trip = t.elapsed().as_secs_f64() * 1e6 / ROUNDS as f64;

    println!("| padding: mean plaintext of a press, a reaction, a chat action, two texts, a press of a 300-byte menu | {} kinds | {plain:.0} B plain, {padded:.0} B padded |", mix.len());
    println!("| padding: encoding alone | {ROUNDS} messages | {encode_plain:.2} µs plain, {encode_padded:.2} µs padded |");
    println!("| padding: seal and open (in-memory SQLite), padded | {ROUNDS} messages | {round_trip:.0} µs per message |");
}
