//! Group benchmark (not a test): the real platform-server and bot-gateway on loopback, 19 users
//! as real MLS members (`support::group_member::Member`, in this process) and a bot with the
//! `groups` capability, so a group of 20 members. It measures:
//! - **join cost**: from `AddGroupMember` of the bot until its `my_chat_member` update is served
//!   by `getUpdates` (the gateway learns it was invited, checks its capability, fetches the
//!   GroupInfo, makes and records an external commit, the platform checks and accepts it, and the
//!   gateway imports the platform's INVITED → MEMBER change); and the MLS part alone,
//!   `e2e::group::join_external` on a fresh in-memory device against the same GroupInfo, best of
//!   5; the bot joins JOINS (3) groups of the same users, and the median is printed;
//! - **group messages received by the bot**: the users send BENCH_GROUP_MESSAGES (default 1000)
//!   texts, message i from user i mod 19, while another thread reads them with `getUpdates`
//!   (limit 100, acknowledging); the rate is N / (first send → the update that completes N
//!   served). The load generator outruns the gateway: every text is encrypted before the clock
//!   starts (`seal_all`), each user submits its own from its own thread, SEND_BATCH per
//!   `SendGroupMessages` call (one platform transaction each), and the users are offline
//!   (`Member::close_inbox`): the platform keeps their copies unread, so neither its streams
//!   nor this process reading them take the machine from the gateway. The send rate alone
//!   (first send → last send accepted) is printed beside it.
//! - **backlog import**: the gateway is stopped, the users send N more, and the time from
//!   starting it again until the last is served gives the gateway's own ceiling.
//!
//! - **the limit**: what a group message must cost the gateway at least, measured in the same
//!   run (`mls_limit`): a device opens 20-member-group application messages into a database set
//!   up as the gateway's, 256 per transaction with the group kept loaded between calls (as
//!   every call is, `e2e::kept`); the live and backlog figures are printed as a
//!   share of it, and the live figure is flagged "bench-bound" when the senders alone were
//!   less than 20% faster. BENCH_GROUP_LIMIT_ONLY=1 prints only this row.
//!
//! Run by `scripts/bench` (every `examples/bench_*`); prints table rows.

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use bot_gateway::crypto::IdentityKeyPair;
use bot_gateway::e2e::{self, group::CommitOut, Registration};
use bot_gateway::wire::platform::{self as pb, send_group_message_response::Status};
use protobuf::Message as _;
use serde_json::{json, Value};
use support::group_member::{bot_world, device_db, Member};
use support::Gateway;

/// Users in the group; with the bot, 20 members.
const USERS: usize = 19;
/// Groups the bot joins (each user uploaded 3 key packages: one per group).
const JOINS: usize = 3;
const MLS_JOIN_RUNS: usize = 5;
/// Sealed messages a user submits per SendGroupMessages call.
const SEND_BATCH: usize = 50;
/// A user acknowledges its deliveries when this many wait (its channel holds 256).
const DRAIN_AT: usize = 64;

fn main() {
    let n: usize = std::env::var("BENCH_GROUP_MESSAGES").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(1000).max(1);
    if std::env::var_os("BENCH_GROUP_LIMIT_ONLY").is_some() {
        // Only the in-process limit (to compare builds quickly).
        println!("| limit: MLS open + state write, {LIMIT_BATCH} per transaction (in process) | {n} msgs, 20 members | {:.0} msg/s |", mls_limit(n));
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut platform, bot, config) = bot_world(dir.path(), "groups");
    let bot_id = bot["compat_user_id"].as_u64().expect("bot id");
    let mut gw = Gateway::start(&config);

    // 19 users; the first creates each group and adds the others by Welcome, in one commit.
    // Then the bot is added and joins through the gateway; JOINS groups, the first for the rest.
    let mut users: Vec<Member> = (0..USERS).map(|i| Member::register(&platform.url, &format!("gm{i:02}"))).collect();
    let mut offset = 0i64;
    let mut joins = Vec::with_capacity(JOINS);
    let mut first = None;
    for g in 0..JOINS {
        let gid = users[0].create_group(&format!("Bench group {g}"));
        users[0].add_by_welcome(&gid, &users[1..].iter().collect::<Vec<_>>());
        let before = users[0].group_info(&gid);
        settle(&mut users, &gid, before.epoch);
        let started = Instant::now();
        users[0].invite(&gid, bot_id).expect("invite the bot");
        let chat_id = wait_joined(&gw, &mut offset);
        joins.push(ms(started.elapsed()));
        // Every user processes the bot's commit.
        settle(&mut users, &gid, before.epoch + 1);
        first.get_or_insert((gid, before, chat_id));
    }
    let (gid, before, chat_id) = first.expect("a group");
    joins.sort_by(f64::total_cmp);

    // The MLS part alone, against the GroupInfo the bot joined from.
    let mls_ms = (0..MLS_JOIN_RUNS)
        .map(|k| {
            let (conn, _) = device_db(&IdentityKeyPair::generate());
            e2e::save_registration(&conn, Registration { user_id: 9_000_000 + k as u64, device_id: 1 }).expect("registration");
            let t = Instant::now();
            e2e::group::join_external(&conn, &before.group_info).expect("external join");
            ms(t.elapsed())
        })
        .fold(f64::INFINITY, f64::min);

    // From here on the users only send: their own deliveries stay with the platform, unread
    // (a member offline), so that reading them does not take the machine from the gateway.
    users.iter_mut().for_each(Member::close_inbox);
    let (users, send_secs, receive_secs, offset) = live(&gw, users, &gid, chat_id, offset, n);
    let backlog_secs = backlog(&mut gw, users, &gid, chat_id, offset, n);

    gw.proc.kill();
    platform.proc.kill();
    let limit = mls_limit(n);
    let live_rate = n as f64 / receive_secs;
    let backlog_rate = n as f64 / backlog_secs;
    println!(
        "| group join (AddGroupMember → my_chat_member served) | 20 members, median of {JOINS} | {:.0} ms ({:.0}–{:.0}) |",
        joins[JOINS / 2],
        joins[0],
        joins[JOINS - 1]
    );
    println!("| group join, MLS part alone (join_external in process) | 20 members, best of {MLS_JOIN_RUNS} | {mls_ms:.1} ms |");
    println!(
        "| group messages via getUpdates | {n} msgs, 20 members | {live_rate:.0} msg/s, {:.0}% of the limit (senders alone: {:.0} msg/s{}) |",
        100.0 * live_rate / limit,
        n as f64 / send_secs,
        if n as f64 / send_secs < 1.2 * live_rate { ": bench-bound" } else { "" }
    );
    println!(
        "| group backlog import (incl. start-up) | {n} msgs, 20 members | {backlog_rate:.0} msg/s, {:.0}% of the limit |",
        100.0 * backlog_rate / limit
    );
    println!("| limit: MLS open + state write, {LIMIT_BATCH} per transaction (in process) | {n} msgs, 20 members | {limit:.0} msg/s |");
}

/// Messages opened per transaction in [`mls_limit`], as the inbox's writer job takes them.
const LIMIT_BATCH: usize = 256;

/// The ceiling for group messages in this run: one member's application messages opened by a
/// device whose database is a file set up as the gateway's (WAL, synchronous FULL,
/// secure_delete), LIMIT_BATCH per transaction as the writer commits a batch, in a group of 20
/// leaves. No platform, no queue, no update rows: what every group message must cost at least.
fn mls_limit(n: usize) -> f64 {
    use bot_gateway::crypto::mls;
    let dir = tempfile::tempdir().expect("tempdir");
    let (sender, _) = device_db(&IdentityKeyPair::generate());
    e2e::save_registration(&sender, Registration { user_id: 1, device_id: 1 }).expect("registration");
    let mut receiver = rusqlite::Connection::open(dir.path().join("receiver.db")).expect("receiver db");
    receiver
        .execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA secure_delete = ON;")
        .expect("pragmas");
    e2e::create_all_tables(&receiver).expect("e2e tables");
    mls::migrate_storage(&mut receiver).expect("openmls tables");
    e2e::create_device_keys(&receiver, &IdentityKeyPair::generate()).expect("device keys");
    e2e::save_registration(&receiver, Registration { user_id: 2, device_id: 1 }).expect("registration");
    let mut claimed = e2e::group::Claimed::of(2, 1, &e2e::group::key_packages(&receiver, 1).expect("key package"));
    for user in 3..=20u64 {
        let (other, _) = device_db(&IdentityKeyPair::generate());
        e2e::save_registration(&other, Registration { user_id: user, device_id: 1 }).expect("registration");
        claimed.extend(e2e::group::Claimed::of(user, 1, &e2e::group::key_packages(&other, 1).expect("key package")));
    }
    let gid = e2e::group::new_group_id();
    e2e::group::create(&sender, &gid).expect("create");
    let added = e2e::group::add(&sender, &gid, &claimed).expect("add 19");
    e2e::group::commit_accepted(&sender, &gid).expect("merge");
    e2e::group::join_welcome(&receiver, &added.welcome).expect("welcome");
    let text = "a group message of ordinary length, about as long as a chat line".repeat(2);
    let sealed: Vec<Vec<u8>> =
        (0..n).map(|i| e2e::group::encrypt(&sender, &gid, format!("{i} {text}").as_bytes()).expect("encrypt").0).collect();
    let started = Instant::now();
    for batch in sealed.chunks(LIMIT_BATCH) {
        let tx = receiver.transaction().expect("begin");
        for m in batch {
            e2e::group::receive(&tx, &gid, m).expect("open");
        }
        tx.commit().expect("commit");
    }
    n as f64 / started.elapsed().as_secs_f64()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Lets every user process its deliveries until it is at `epoch` (bounded).
fn settle(users: &mut [Member], gid: &[u8], epoch: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    for u in users.iter_mut() {
        while e2e::group::epoch(&u.conn, gid).expect("epoch") != Some(epoch) {
            assert!(Instant::now() < deadline, "user {} did not reach epoch {epoch}", u.user_id);
            u.pump(Duration::from_millis(20));
        }
    }
}

/// Polls until the bot's `my_chat_member` (left → member) is served; returns the chat id.
fn wait_joined(gw: &Gateway, offset: &mut i64) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let (status, body) =
            gw.call("getUpdates", json!({"offset": *offset, "timeout": 5, "allowed_updates": ["message", "my_chat_member"]}));
        assert_eq!(status, 200, "getUpdates: {body}");
        for u in body["result"].as_array().expect("array") {
            *offset = u["update_id"].as_i64().expect("update id") + 1;
            let m = &u["my_chat_member"];
            if m["new_chat_member"]["status"] == "member" {
                return m["chat"]["id"].as_i64().expect("chat id");
            }
        }
    }
    panic!("the bot did not join within 60 s; gateway stderr:\n{}", gw.proc.stderr_text());
}

/// Each user's share of `n` texts `"{tag} {i}"` (text `i` from user `i % USERS`), encrypted
/// ahead, in the order the user sends them: the load generator seals before the clock starts.
fn seal_all(users: &[Member], gid: &[u8], n: usize, tag: &str) -> Vec<Vec<pb::SendGroupMessageRequest>> {
    users
        .iter()
        .enumerate()
        .map(|(k, user)| {
            (k..n)
                .step_by(USERS)
                .map(|i| {
                    let text = e2e::text_content(&format!("{tag} {i}")).write_to_bytes().expect("content");
                    let message = e2e::group::encrypt(&user.conn, gid, &text).expect("encrypt").0;
                    user.request(gid, &CommitOut { message, ..Default::default() })
                })
                .collect()
        })
        .collect()
}

/// The users send their sealed texts (`seal_all`), each user from its own thread,
/// SEND_BATCH per SendGroupMessages call, acknowledging its own deliveries unread as they
/// come; returns the users and when the last send was accepted.
fn send_all(users: Vec<Member>, sealed: Vec<Vec<pb::SendGroupMessageRequest>>) -> (Vec<Member>, Instant) {
    let senders: Vec<_> = users
        .into_iter()
        .zip(sealed)
        .enumerate()
        .map(|(k, (user, messages))| {
            std::thread::Builder::new()
                .name(format!("send-{k}"))
                .spawn(move || {
                    let mut last_sent = Instant::now();
                    for batch in messages.chunks(SEND_BATCH) {
                        let results = user.send_batch(batch.to_vec());
                        last_sent = Instant::now();
                        for r in results {
                            assert_eq!(r.status.enum_value_or_default(), Status::OK, "a sealed text was refused: {}", r.error);
                        }
                        if user.inbox.len() >= DRAIN_AT {
                            user.discard_pending();
                        }
                    }
                    (user, last_sent)
                })
                .expect("sender thread")
        })
        .collect();
    let mut users = Vec::with_capacity(USERS);
    let mut last_sent = Instant::now();
    for (i, sender) in senders.into_iter().enumerate() {
        let (user, t) = sender.join().expect("sender");
        users.push(user);
        last_sent = if i == 0 { t } else { last_sent.max(t) };
    }
    (users, last_sent)
}

/// The bot reads `n` texts while the users send them: returns the users, the seconds from the
/// first send until the last was accepted and until the bot was served the last, and the offset.
fn live(gw: &Gateway, users: Vec<Member>, gid: &[u8], chat_id: i64, offset: i64, n: usize) -> (Vec<Member>, f64, f64, i64) {
    let url = getupdates_url(gw);
    let reader = std::thread::Builder::new()
        .name("bench-reader".into())
        .spawn(move || read_all(&url, chat_id, offset, n))
        .expect("reader thread");
    let sealed = seal_all(&users, gid, n, "live");
    let started = Instant::now();
    let (users, last_sent) = send_all(users, sealed);
    // Keep acknowledging the users' deliveries until the bot has everything (the reader is
    // bounded).
    while !reader.is_finished() {
        users.iter().for_each(|u| {
            u.discard_pending();
        });
        std::thread::sleep(Duration::from_millis(50));
    }
    let (last_served, offset) = reader.join().expect("reader");
    users.iter().for_each(|u| {
        u.discard_pending();
    });
    let secs = |t: Instant| t.duration_since(started).as_secs_f64();
    (users, secs(last_sent), secs(last_served), offset)
}

/// The users send `n` texts while the gateway is stopped; returns the seconds from starting it
/// again until the bot was served the last.
fn backlog(gw: &mut Gateway, users: Vec<Member>, gid: &[u8], chat_id: i64, offset: i64, n: usize) -> f64 {
    gw.proc.kill();
    let sealed = seal_all(&users, gid, n, "backlog");
    let (users, _) = send_all(users, sealed);
    let started = Instant::now();
    *gw = Gateway::start(&gw.config_path.clone());
    let (last_served, _) = read_all(&getupdates_url(gw), chat_id, offset, n);
    users.iter().for_each(|u| {
        u.discard_pending();
    });
    last_served.duration_since(started).as_secs_f64()
}

fn getupdates_url(gw: &Gateway) -> String {
    format!("{}/bot{}/getUpdates", gw.base, gw.token)
}

/// Reads updates until `n` distinct group messages of `chat_id` arrived (bounded); returns
/// when the last was served, and the offset after it.
fn read_all(url: &str, chat_id: i64, mut offset: i64, n: usize) -> (Instant, i64) {
    let deadline = Instant::now() + Duration::from_secs(120) + Duration::from_millis(100 * n as u64);
    let mut seen = HashSet::new();
    loop {
        assert!(Instant::now() < deadline, "only {} of {n} group messages reached the bot", seen.len());
        let (status, body): (u16, Value) =
            support::call_url(url, json!({"offset": offset, "limit": 100, "timeout": 2, "allowed_updates": ["message"]}));
        let served = Instant::now();
        assert_eq!(status, 200, "getUpdates: {body}");
        for u in body["result"].as_array().expect("array") {
            offset = u["update_id"].as_i64().expect("update id") + 1;
            if u["message"]["chat"]["id"] == chat_id {
                seen.insert(u["message"]["text"].as_str().expect("text").to_string());
            }
        }
        if seen.len() >= n {
            // Acknowledge the last batch.
            let (status, _) = support::call_url(url, json!({"offset": offset, "limit": 1, "timeout": 0}));
            assert_eq!(status, 200);
            return (served, offset);
        }
    }
}
