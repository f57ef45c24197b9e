//! Group size axis (not a test): what a channel of N members costs the bot, its gateway and the
//! platform, for N in BENCH_GROUP_SIZES (default `20,200,2000,10000`), with the real
//! platform-server and bot-gateway on loopback. A channel, because that is where a group has
//! thousands: its subscribers are MLS leaves as a group's members are, but only its staff hear
//! of joins and departures (docs/groups.md), and the bot posts as an administrator.
//!
//! The members: the channel's owner (`support::group_member::Member`, a real MLS member in this process
//! that reads its inbox), and N − 2 light members. A light member is a registered account with
//! one device whose key packages were uploaded; its keys are dropped once uploaded, so it
//! never reads its inbox (a subscriber who is offline: the platform keeps its copies). The
//! owner adds them by Welcome, ADD_BATCH per commit; then the bot is invited and joins by an
//! external commit through its gateway, which makes N leaves. The same light members serve
//! every size (one key package per group they are added to), so the largest size sets the
//! registration time, printed once.
//!
//! Per N it measures (median of RUNS where a figure is repeated):
//! - **build**: the owner's adds of N − 2 members, ADD_BATCH per commit;
//! - **GetGroupInfo**: the platform's answer time and the size of the GroupInfo (with its tree);
//! - **bot joins (external commit)**: AddGroupMember of the bot → its `my_chat_member` served;
//!   and `e2e::group::join_external` alone, on a fresh in-memory device;
//! - **Welcome join**: one more member's `join_welcome`, in process;
//! - **platform commit handling**: that member's add commit, SendGroupMessage accepted;
//! - **bot processes one more join**: the add commit accepted → the owner's next message
//!   served by `getUpdates` (the gateway opens it only after the commit), minus the member →
//!   bot latency of a message alone;
//! - **member → bot**: the owner's message accepted → served by a waiting `getUpdates`;
//! - **platform fan-out**: the owner's SendGroupMessage call, and N − 1 deliveries over its time;
//! - **bot posts**: `sendMessage` to the group;
//! - **removal**: the owner removes one member (platform, then a commit) → its next message
//!   served, minus a message alone;
//! - **ban of min(100, N/2)**: the bot, made an administrator, calls `banChatMember` for each,
//!   then posts once (the post commits every removal first);
//! - **state**: the openmls state of the member that joined by Welcome (only in this group),
//!   and the gateway's RSS growth from before the bot's join to the end of the row, and again
//!   3.5 s later, once the gateway's upkeep tick has handed the freed heap back.
//!
//! A size may repeat (`10000,10000`): the second channel's RSS growth is what one more such
//! group costs while the first stays kept.
//!
//! Then a table per figure: one row per N, the ratio to the smallest N, and the fitted growth
//! (the slope of log(figure) over log(N): about 0 is constant, about 1 is N, about 2 is N²).
//!
//! BENCH_GROUP_PROFILE=1 adds CPU profiles (`perf record -g`): of the gateway and then the
//! platform while PROFILE_MESSAGES members' messages reach the bot, of the gateway while
//! PROFILE_JOINS more members join the largest channel one by one, and of an external join in
//! process; it prints perf's top symbols (`=keep` keeps the recordings).
//!
//! Run by `scripts/bench` (every `examples/bench_*`); `--smoke` runs it at sizes 6 and 12.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use bot_gateway::crypto::IdentityKeyPair;
use bot_gateway::e2e::{self, group::CommitOut, Registration};
use bot_gateway::wire::platform::{self as pb, group_delivery::Kind, send_group_message_response::Status};
use bot_gateway::wire::{Credential, Platform};
use protobuf::Message as _;
use rusqlite::Connection;
use serde_json::{json, Value};
use support::group_member::{bot_world, device_db, Member};
use support::{status_kib, Gateway};

/// Members the owner adds per commit while building a group.
const ADD_BATCH: usize = 500;
/// Repeats of a figure that is repeated (median).
const RUNS: usize = 5;
/// Users the bot bans at once (at most half the group).
const BAN: usize = 100;
/// Threads registering light members.
const REGISTER_THREADS: usize = 2;

fn main() {
    let sizes: Vec<usize> = std::env::var("BENCH_GROUP_SIZES")
        .unwrap_or_else(|_| "20,200,2000,10000".into())
        .split(',')
        .map(|s| s.trim().parse::<usize>().expect("BENCH_GROUP_SIZES: numbers separated by commas"))
        .collect();
    assert!(sizes.iter().all(|&n| n >= 6), "BENCH_GROUP_SIZES: every size must be at least 6");
    let largest = *sizes.iter().max().expect("a size");

    let dir = tempfile::tempdir().expect("tempdir");
    let (mut platform, bot, config) = bot_world(dir.path(), "channels");
    let bot_id = bot["compat_user_id"].as_u64().expect("bot id");
    let mut gw = Gateway::start(&config);
    let mut owner = Member::register(&platform.url, "owner");

    // Profiling adds PROFILE_JOINS members to the largest group, one by one: one more light
    // member each, with a key package for it.
    let profile = std::env::var_os("BENCH_GROUP_PROFILE").is_some();
    let extra = if profile { PROFILE_JOINS } else { 0 };
    let t = Instant::now();
    let lights = register_lights(&platform.url, largest - 2 + extra, |i| {
        sizes.iter().filter(|&&n| i < n - 2).count() + usize::from(i >= largest - 2)
    });
    let register_s = t.elapsed().as_secs_f64();
    println!("| group sizes: light members registered (each with its key packages) | {} | {register_s:.1} s |", largest - 2);

    let mut rows = Vec::new();
    let mut offset = 0i64;
    let mut last = None;
    for &n in &sizes {
        let (row, gid, chat_id) = measure(n, rows.len(), &gw, &mut owner, &lights[..n - 2], bot_id, &platform.url, &mut offset);
        last = Some((n, gid, chat_id));
        println!(
            "| group of {n}: built in {:.1} s, bot joined in {:.0} ms, post {:.1} ms, member → bot {:.1} ms |",
            row.build_s, row.bot_join_ms, row.post_ms, row.to_bot_ms
        );
        rows.push(row);
    }
    if profile {
        let (n, gid, chat_id) = last.expect("a size");
        profile_messages(&gw, platform.proc.child.id(), &mut owner, &gid, chat_id, &mut offset, n);
        profile_joins(&gw, &mut owner, &gid, chat_id, &lights[largest - 2..], &mut offset, n);
    }
    gw.proc.kill();
    platform.proc.kill();
    print_tables(&rows);
}

/// Members added one by one when profiling (BENCH_GROUP_PROFILE).
const PROFILE_JOINS: usize = 20;

/// The gateway's CPU profile while the owner adds `joiners` one by one to the group of `n`,
/// each followed by a message the bot must open after the commit (what processing one more
/// subscriber's join costs it); then this process's own profile while a fresh device joins the
/// group by external commit (openmls's part of the bot's join).
fn profile_joins(gw: &Gateway, owner: &mut Member, gid: &[u8], chat_id: i64, joiners: &[u64], offset: &mut i64, n: usize) {
    let t = Instant::now();
    let top = perf_around(gw.proc.child.id(), || {
        for (k, &user) in joiners.iter().enumerate() {
            let claimed = invite_and_claim(owner, gid, user);
            let out = e2e::group::add(&owner.conn, gid, &claimed).expect("add one");
            owner.commit(gid, &out);
            probe(owner, gw, gid, chat_id, offset, &format!("profiled join {k}"));
        }
    });
    let per_join = ms(t.elapsed()) / joiners.len() as f64;
    println!(
        "\nprofile of the gateway (perf record -g, self time): {} joins into the channel of {n}, each with a message after it ({per_join:.0} ms per join and message, the owner's add included):",
        joiners.len()
    );
    top.iter().for_each(|l| println!("    {l}"));

    let info = owner.group_info(gid).group_info;
    let (conn, _) = device_db(&IdentityKeyPair::generate());
    e2e::save_registration(&conn, Registration { user_id: 9_100_000, device_id: 1 }).expect("registration");
    let t = Instant::now();
    let top = perf_around(std::process::id(), || {
        e2e::group::join_external(&conn, &info).expect("external join");
    });
    println!("\nprofile of an external join into the channel of {} (in process, {:.0} ms):", n + joiners.len(), ms(t.elapsed()));
    top.iter().for_each(|l| println!("    {l}"));
}

/// Members' messages profiled one by one (BENCH_GROUP_PROFILE).
const PROFILE_MESSAGES: usize = 50;

/// The CPU profiles of the gateway, then of the platform, while the owner sends
/// PROFILE_MESSAGES texts one by one, each served by `getUpdates` before the next: what a
/// member's message costs the bot and the platform.
fn profile_messages(gw: &Gateway, platform: u32, owner: &mut Member, gid: &[u8], chat_id: i64, offset: &mut i64, n: usize) {
    for (who, pid) in [("gateway", gw.proc.child.id()), ("platform", platform)] {
        let t = Instant::now();
        let top = perf_around(pid, || {
            for k in 0..PROFILE_MESSAGES {
                probe(owner, gw, gid, chat_id, offset, &format!("profiled message {k} ({who})"));
            }
        });
        println!(
            "\nprofile of the {who} (perf record -g, self time): {PROFILE_MESSAGES} members' messages into the channel of {n}, one at a time ({:.0} ms each, a 30 ms pause included):",
            ms(t.elapsed()) / PROFILE_MESSAGES as f64
        );
        top.iter().for_each(|l| println!("    {l}"));
    }
}

/// Runs `work` under `perf record -g -p pid` and returns perf's top symbols by self time (or
/// why there are none).
fn perf_around(pid: u32, work: impl FnOnce()) -> Vec<String> {
    // One file per recording: the gateway is profiled twice, and `=keep` keeps both.
    static RECORDINGS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let k = RECORDINGS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let data = std::env::temp_dir().join(format!("bench-group-sizes-{}-{pid}-{k}.perf", std::process::id()));
    let perf = std::process::Command::new("perf")
        .args(["record", "-F", "999", "-g", "-o"])
        .arg(&data)
        .args(["-p", &pid.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    let Ok(mut perf) = perf else {
        work();
        return vec!["perf could not start".into()];
    };
    // perf attaches within a moment; it writes its file on SIGINT.
    std::thread::sleep(Duration::from_millis(500));
    work();
    let _ = std::process::Command::new("kill").args(["-INT", &perf.id().to_string()]).status();
    let _ = perf.wait();
    let report = std::process::Command::new("perf")
        .args(["report", "--stdio", "--no-children", "--sort", "symbol", "--percent-limit", "1.5", "-g", "none", "-i"])
        .arg(&data)
        .output();
    // BENCH_GROUP_PROFILE=keep leaves the recording for `perf report` (its path is printed).
    match std::env::var("BENCH_GROUP_PROFILE").as_deref() {
        Ok("keep") => println!("(perf data kept: {})", data.display()),
        _ => drop(std::fs::remove_file(&data)),
    }
    match report {
        Ok(out) => String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains('%'))
            .take(30)
            // perf pads its columns to the widest symbol, and ends with the unused ones.
            .map(|l| l.split_whitespace().filter(|w| *w != "-").collect::<Vec<_>>().join(" "))
            .collect(),
        Err(e) => vec![format!("perf report failed: {e}")],
    }
}

/// One size's figures (milliseconds unless named otherwise).
#[derive(Default)]
struct Row {
    n: usize,
    build_s: f64,
    info_ms: f64,
    info_kib: f64,
    bot_join_ms: f64,
    mls_join_ms: f64,
    welcome_ms: f64,
    commit_rpc_ms: f64,
    one_join_ms: f64,
    to_bot_ms: f64,
    send_rpc_ms: f64,
    post_ms: f64,
    removal_ms: f64,
    banned: usize,
    ban_calls_ms: f64,
    ban_post_ms: f64,
    state_kib: f64,
    rss_mib: f64,
    rss_idle_mib: f64,
}

/// The figures as printed: name, unit, value.
type Figure = (&'static str, &'static str, fn(&Row) -> f64);

const FIGURES: &[Figure] = &[
    ("building the group (owner's adds)", "s", |r| r.build_s),
    ("platform GetGroupInfo", "ms", |r| r.info_ms),
    ("GroupInfo size (with the tree)", "KiB", |r| r.info_kib),
    ("bot joins (external commit, AddGroupMember → my_chat_member served)", "ms", |r| r.bot_join_ms),
    ("external join, MLS part alone (in process)", "ms", |r| r.mls_join_ms),
    ("Welcome join of one more member (in process)", "ms", |r| r.welcome_ms),
    ("platform accepts one add commit", "ms", |r| r.commit_rpc_ms),
    ("bot processes one more subscriber's join", "ms", |r| r.one_join_ms),
    ("member's message → bot's getUpdates", "ms", |r| r.to_bot_ms),
    ("platform stores a group message for N − 1 members", "ms", |r| r.send_rpc_ms),
    ("platform fan-out", "deliveries/s", |r| (r.n - 1) as f64 / (r.send_rpc_ms / 1000.0)),
    ("bot posts (sendMessage)", "ms", |r| r.post_ms),
    ("bot processes a removal", "ms", |r| r.removal_ms),
    ("bot bans min(100, N/2): the banChatMember calls", "ms", |r| r.ban_calls_ms),
    ("bot bans min(100, N/2): the next post, which commits the removals", "ms", |r| r.ban_post_ms),
    ("a member's MLS state for the group", "KiB", |r| r.state_kib),
    ("gateway RSS growth for the group, at the row's end", "MiB", |r| r.rss_mib),
    ("gateway RSS growth for the group, 3.5 s later (after its heap trim)", "MiB", |r| r.rss_idle_mib),
];

fn measure(n: usize, row_no: usize, gw: &Gateway, owner: &mut Member, lights: &[u64], bot_id: u64, url: &str, offset: &mut i64) -> (Row, Vec<u8>, i64) {
    let mut row = Row { n, banned: BAN.min(n / 2), ..Row::default() };
    let gid = owner.create_channel(&format!("Size {n} ({row_no})"));

    let t = Instant::now();
    for batch in lights.chunks(ADD_BATCH) {
        let claimed: Vec<e2e::group::Claimed> = batch.iter().flat_map(|&u| invite_and_claim(owner, &gid, u)).collect();
        let out = e2e::group::add(&owner.conn, &gid, &claimed).expect("add a batch");
        owner.commit(&gid, &out);
    }
    row.build_s = t.elapsed().as_secs_f64();

    let infos: Vec<(f64, pb::GroupInfoResponse)> = (0..3).map(|_| timed(|| owner.group_info(&gid))).collect();
    row.info_ms = median(infos.iter().map(|(ms, _)| *ms).collect());
    let info = infos.into_iter().next().expect("an answer").1;
    row.info_kib = info.group_info.len() as f64 / 1024.0;
    let mls_runs = if n <= 200 { 3 } else { 1 };
    row.mls_join_ms = (0..mls_runs)
        .map(|k| {
            let (conn, _) = device_db(&IdentityKeyPair::generate());
            e2e::save_registration(&conn, Registration { user_id: 9_000_000 + k, device_id: 1 }).expect("registration");
            timed(|| e2e::group::join_external(&conn, &info.group_info).expect("external join")).0
        })
        .fold(f64::INFINITY, f64::min);

    // The bot joins through its gateway; the owner follows its commit.
    let pid = gw.proc.child.id().to_string();
    let rss_mib_since = |before: u64| status_kib(&pid, "VmRSS:").saturating_sub(before) as f64 / 1024.0;
    let rss_before = status_kib(&pid, "VmRSS:");
    let t = Instant::now();
    owner.invite(&gid, bot_id).expect("invite the bot");
    let chat_id = wait_joined(gw, offset);
    row.bot_join_ms = ms(t.elapsed());
    settle(owner, &gid);
    // A channel's bot posts and bans as an administrator.
    let rights = pb::AdminRights { can_post_messages: true, can_restrict_members: true, ..Default::default() };
    owner.promote(&gid, bot_id, rights).expect("promote the bot");

    // A member's message alone, then after a join commit.
    let alone: Vec<(f64, f64)> = (0..RUNS).map(|k| probe(owner, gw, &gid, chat_id, offset, &format!("{n} alone {k}"))).collect();
    row.send_rpc_ms = median(alone.iter().map(|p| p.0).collect());
    row.to_bot_ms = median(alone.iter().map(|p| p.1).collect());

    let mut joiner = Member::register(url, &format!("joiner{n}r{row_no}"));
    let claimed = invite_and_claim(owner, &gid, joiner.user_id);
    let out = e2e::group::add(&owner.conn, &gid, &claimed).expect("add one");
    let (commit_ms, answer) = timed(|| owner.send(&gid, &out));
    assert_eq!(answer.status.enum_value_or_default(), Status::OK, "add refused: {}", answer.error);
    e2e::group::commit_accepted(&owner.conn, &gid).expect("merge");
    row.commit_rpc_ms = commit_ms;
    let after_join = probe(owner, gw, &gid, chat_id, offset, &format!("{n} after a join"));
    row.one_join_ms = (commit_ms + after_join.1 - row.to_bot_ms).max(0.0);
    let welcome = joiner.wait_delivery(Kind::WELCOME, Duration::from_secs(120));
    row.welcome_ms = timed(|| e2e::group::join_welcome(&joiner.conn, &welcome.ciphertext).expect("welcome")).0;
    row.state_kib = openmls_bytes(&joiner.conn) as f64 / 1024.0;
    joiner.close_inbox();

    row.post_ms = median((0..RUNS).map(|k| timed(|| post(gw, chat_id, &format!("post {k}"))).0).collect());
    owner.pump(Duration::from_millis(20));

    // The owner removes one member: the platform first, then the commit.
    let gone = lights[0];
    let req = pb::RemoveGroupMemberRequest { group_id: gid.clone(), user_id: gone, ..Default::default() };
    owner.p.client.remove_group_member(&req, owner.p.opt()).expect("RemoveGroupMember");
    let out = e2e::group::remove_users(&owner.conn, &gid, &[gone]).expect("remove").expect("a commit");
    let (commit_ms, _) = timed(|| owner.commit(&gid, &out));
    let after_removal = probe(owner, gw, &gid, chat_id, offset, &format!("{n} after a removal"));
    row.removal_ms = (commit_ms + after_removal.1 - row.to_bot_ms).max(0.0);

    // The bot bans, as the administrator it is.
    let t = Instant::now();
    for &user in &lights[1..=row.banned] {
        let (status, body) = gw.call("banChatMember", json!({"chat_id": chat_id, "user_id": user}));
        assert_eq!(status, 200, "banChatMember: {body}");
    }
    row.ban_calls_ms = ms(t.elapsed());
    row.ban_post_ms = timed(|| post(gw, chat_id, "after the bans")).0;
    settle(owner, &gid);
    row.rss_mib = rss_mib_since(rss_before);
    // The gateway hands freed heap back on its upkeep tick (every 2 s) once a second has
    // passed without group work: within 3 s. Then RSS is what the group keeps.
    std::thread::sleep(Duration::from_millis(3_500));
    row.rss_idle_mib = rss_mib_since(rss_before);
    (row, gid, chat_id)
}

/// Registers `count` light members from REGISTER_THREADS threads: member `i` uploads
/// `key_packages(i)` key packages, then its keys are dropped. Returns their user ids.
fn register_lights(url: &str, count: usize, key_packages: impl Fn(usize) -> usize + Sync) -> Vec<u64> {
    let key_packages = &key_packages;
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..REGISTER_THREADS)
            .map(|w| {
                std::thread::Builder::new()
                    .name(format!("register-{w}"))
                    .spawn_scoped(s, move || {
                        let anon = Platform::connect_shared(url, Credential::Anonymous).expect("endpoint");
                        (w..count).step_by(REGISTER_THREADS).map(|i| (i, register_light(url, &anon, i, key_packages(i)))).collect::<Vec<_>>()
                    })
                    .expect("register thread")
            })
            .collect();
        let mut ids = vec![0; count];
        for w in workers {
            for (i, id) in w.join().expect("register thread") {
                ids[i] = id;
            }
        }
        ids
    })
}

fn register_light(url: &str, anon: &Platform, i: usize, key_packages: usize) -> u64 {
    let identity = IdentityKeyPair::generate();
    let (conn, mut keys) = device_db(&identity);
    // A member who never reads needs no stock of one-time prekeys on the platform.
    keys.one_time_prekeys.truncate(1);
    let req = pb::RegisterUserRequest {
        username: format!("light{i:05}"),
        display_name: format!("Light {i}"),
        identity_key: identity.public_key().to_vec(),
        device: Some(keys).into(),
        ..Default::default()
    };
    let reg = anon.client.register_user(&req, anon.opt()).expect("RegisterUser");
    e2e::save_registration(&conn, Registration { user_id: reg.user_id, device_id: reg.device_id }).expect("save");
    let secret_hex = bot_gateway::crypto::hex_encode(&reg.device_secret);
    let p = Platform::connect_shared(url, Credential::Device { user_id: reg.user_id, device_id: reg.device_id, secret_hex })
        .expect("endpoint");
    let kps = e2e::group::key_packages(&conn, key_packages).expect("key packages");
    p.client.upload_key_packages(&pb::KeyPackagesUpload { key_packages: kps, ..Default::default() }, p.opt()).expect("upload");
    reg.user_id
}

/// The owner invites `user` and claims its key package.
fn invite_and_claim(owner: &Member, gid: &[u8], user: u64) -> Vec<e2e::group::Claimed> {
    owner.invite(gid, user).expect("invite");
    let req = pb::ClaimKeyPackagesRequest { user_id: user, ..Default::default() };
    let claimed = owner.p.client.claim_key_packages(&req, owner.p.opt()).expect("claim");
    claimed
        .key_packages
        .into_iter()
        .map(|k| e2e::group::Claimed { user_id: user, device_id: k.device_id, key_package: k.key_package })
        .collect()
}

/// The owner sends a text while a `getUpdates` waits for it: (the SendGroupMessage call, from
/// the send until the text was served), in ms.
fn probe(owner: &mut Member, gw: &Gateway, gid: &[u8], chat_id: i64, offset: &mut i64, text: &str) -> (f64, f64) {
    let content = e2e::text_content(text).write_to_bytes().expect("content");
    let message = e2e::group::encrypt(&owner.conn, gid, &content).expect("encrypt").0;
    let request = owner.request(gid, &CommitOut { message, ..Default::default() });
    let (url, from, wanted) = (getupdates_url(gw), *offset, text.to_string());
    let reader = std::thread::Builder::new()
        .name("bench-probe".into())
        .spawn(move || read_until(&url, chat_id, from, &wanted))
        .expect("probe thread");
    // Let the long poll reach the gateway first.
    std::thread::sleep(Duration::from_millis(30));
    let sent = Instant::now();
    let (rpc_ms, answer) = timed(|| owner.p.client.send_group_message(&request, owner.p.opt()).expect("send"));
    assert_eq!(answer.status.enum_value_or_default(), Status::OK, "a text was refused: {}", answer.error);
    let (served, next) = reader.join().expect("probe reader");
    *offset = next;
    owner.pump(Duration::from_millis(1));
    (rpc_ms, ms(served.saturating_duration_since(sent)))
}

/// Long-polls until the text `wanted` of `chat_id` is served (bounded): when, and the offset
/// after it.
fn read_until(url: &str, chat_id: i64, mut offset: i64, wanted: &str) -> (Instant, i64) {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        assert!(Instant::now() < deadline, "the text {wanted:?} did not reach the bot");
        let (status, body): (u16, Value) =
            support::call_url(url, json!({"offset": offset, "limit": 100, "timeout": 10, "allowed_updates": ["channel_post", "my_chat_member"]}));
        let served = Instant::now();
        assert_eq!(status, 200, "getUpdates: {body}");
        let mut found = false;
        for u in body["result"].as_array().expect("array") {
            offset = u["update_id"].as_i64().expect("update id") + 1;
            let post = &u["channel_post"];
            found |= post["chat"]["id"] == chat_id && post["text"] == wanted;
        }
        if found {
            return (served, offset);
        }
    }
}

fn post(gw: &Gateway, chat_id: i64, text: &str) {
    let (status, body) = gw.call("sendMessage", json!({"chat_id": chat_id, "text": text}));
    assert_eq!(status, 200, "sendMessage: {body}");
}

/// Polls until the bot's `my_chat_member` (→ member) is served; returns the chat id.
fn wait_joined(gw: &Gateway, offset: &mut i64) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(600);
    while Instant::now() < deadline {
        let (status, body) =
            gw.call("getUpdates", json!({"offset": *offset, "timeout": 5, "allowed_updates": ["channel_post", "my_chat_member"]}));
        assert_eq!(status, 200, "getUpdates: {body}");
        for u in body["result"].as_array().expect("array") {
            *offset = u["update_id"].as_i64().expect("update id") + 1;
            let m = &u["my_chat_member"];
            if m["new_chat_member"]["status"] == "member" {
                return m["chat"]["id"].as_i64().expect("chat id");
            }
        }
    }
    panic!("the bot did not join within 600 s; gateway stderr:\n{}", gw.proc.stderr_text());
}

/// The owner takes its deliveries until it is at the platform's epoch (bounded).
fn settle(owner: &mut Member, gid: &[u8]) {
    let deadline = Instant::now() + Duration::from_secs(300);
    let epoch = owner.group_info(gid).epoch;
    while e2e::group::epoch(&owner.conn, gid).expect("epoch") != Some(epoch) {
        assert!(Instant::now() < deadline, "the owner did not reach epoch {epoch}");
        owner.pump(Duration::from_millis(20));
    }
    owner.pump(Duration::from_millis(1));
}

/// Bytes in the openmls tables of a device database.
fn openmls_bytes(conn: &Connection) -> u64 {
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'openmls%'")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .expect("openmls tables");
    let mut total = 0u64;
    for table in tables {
        let columns: Vec<String> = conn
            .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
            .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
            .expect("columns");
        let sum = columns.iter().map(|c| format!("COALESCE(SUM(LENGTH(\"{c}\")), 0)")).collect::<Vec<_>>().join(" + ");
        total += conn.query_row(&format!("SELECT {sum} FROM \"{table}\""), [], |r| r.get::<_, i64>(0)).expect("sum") as u64;
    }
    total
}

fn getupdates_url(gw: &Gateway) -> String {
    format!("{}/bot{}/getUpdates", gw.base, gw.token)
}

fn timed<T>(f: impl FnOnce() -> T) -> (f64, T) {
    let t = Instant::now();
    let out = f();
    (ms(t.elapsed()), out)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One table per figure: a row per N, its ratio to the first N, and the fitted growth.
fn print_tables(rows: &[Row]) {
    let first = &rows[0];
    for (name, unit, value) in FIGURES {
        let label = if name.contains("min(100, N/2)") {
            format!("{name} (banned: {})", rows.iter().map(|r| r.banned.to_string()).collect::<Vec<_>>().join(", "))
        } else {
            name.to_string()
        };
        println!("\n| {label} | {unit} | ratio to N = {} |", first.n);
        println!("|---:|---:|---:|");
        for r in rows {
            let ratio = if value(first) > 0.0 { format!("{:.1}×", value(r) / value(first)) } else { "–".into() };
            println!("| N = {} | {} | {ratio} |", r.n, figure(value(r)));
        }
        println!("| growth | {} | |", growth(rows, *value));
    }
}

fn figure(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The growth that fits best: for each of constant, log N, N, N log N and N², the least-squares
/// fit of value = a + b·f(N) (b ≥ 0), and the one with the smallest error wins (the simpler
/// one on a tie within 5%); printed with its b, the cost of one more unit of f(N).
fn growth(rows: &[Row], value: fn(&Row) -> f64) -> String {
    let models: [(&str, fn(f64) -> f64); 5] =
        [("constant", |_| 0.0), ("log N", f64::ln), ("N", |n| n), ("N log N", |n| n * n.ln()), ("N²", |n| n * n)];
    let points: Vec<(f64, f64)> = rows.iter().map(|r| (r.n as f64, value(r))).collect();
    if points.len() < 3 {
        return "– (needs three sizes)".into();
    }
    let k = points.len() as f64;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / k;
    let mut best: Option<(&str, f64, f64)> = None;
    for (name, f) in models {
        let xs: Vec<f64> = points.iter().map(|p| f(p.0)).collect();
        let mean_x = xs.iter().sum::<f64>() / k;
        let sxx: f64 = xs.iter().map(|x| (x - mean_x).powi(2)).sum();
        let b = if sxx == 0.0 {
            0.0
        } else {
            (xs.iter().zip(&points).map(|(x, p)| (x - mean_x) * (p.1 - mean_y)).sum::<f64>() / sxx).max(0.0)
        };
        let a = mean_y - b * mean_x;
        let error: f64 = xs.iter().zip(&points).map(|(x, p)| (a + b * x - p.1).powi(2)).sum();
        if best.is_none_or(|(_, e, _)| error < 0.95 * e) {
            best = Some((name, error, b));
        }
    }
    match best {
        Some(("constant", _, _)) | None => "constant".into(),
        Some((name, _, b)) => format!("{name} (b = {b:.3e})"),
    }
}
