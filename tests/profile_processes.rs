//! One profile, several processes. Chat mode keeps the profile open (twice: its reader and its
//! sender) while other `e2e-chat` processes send from the same profile. Every message must
//! arrive once, no ratchet position may be used twice (the receiving gateway would refuse the
//! second as "duplicate or replayed" and count it), and chat mode's write-ahead log must still
//! be the file on disk: a process that loses its POSIX locks has its WAL deleted under it.

mod support;

use std::collections::HashMap;
use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use support::chat::{piped_chat, read_until};
use support::{bin_path, World};

/// Sends from other processes, and how many run at once.
const SENDS: usize = 50;
const AT_ONCE: usize = 5;
/// Lines typed into chat mode meanwhile.
const TYPED: usize = 20;

fn metric(world: &World, name: &str) -> f64 {
    let text = ureq::get(&format!("{}/metrics", world.gateway.ext_base)).call().expect("metrics").into_string().expect("text");
    text.lines()
        .find(|l| l.starts_with(name) && !l.starts_with('#'))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics:\n{text}"))
}

#[test]
fn chat_mode_and_fifty_sends_from_other_processes_share_one_profile() {
    let world = World::start("procs_bot");
    let bot = format!("@{}", world.bot_username());
    let alice_dir = world.user("alice").dir().to_path_buf();

    let (mut chat, mut stdin, out, err) = piped_chat(&alice_dir, &bot);
    read_until(&err, "banner", |l| l.starts_with("chatting with bot "));

    let senders = {
        let dir = alice_dir.clone();
        let bot = bot.clone();
        std::thread::Builder::new()
            .name("senders".into())
            .spawn(move || {
                for round in 0..SENDS / AT_ONCE {
                    let children: Vec<_> = (0..AT_ONCE)
                        .map(|i| {
                            Command::new(bin_path("e2e-chat"))
                                .arg("--profile")
                                .arg(&dir)
                                .args(["send", &bot, &format!("send-{}", round * AT_ONCE + i)])
                                .output()
                        })
                        .collect();
                    for c in children {
                        let c = c.expect("run e2e-chat send");
                        assert!(c.status.success(), "send failed: {}", String::from_utf8_lossy(&c.stderr));
                    }
                }
            })
            .expect("spawn senders")
    };
    for i in 0..TYPED {
        writeln!(stdin, "typed-{i}").expect("type");
        let shown = read_until(&out, "own line", |l| l.starts_with(&format!("[you] typed-{i} ")));
        assert!(shown.last().expect("line").contains("(#"), "{shown:?}");
    }
    senders.join().expect("senders");

    // The write-ahead log chat mode writes into is still the one on disk.
    let pid = chat.0.id();
    let wal = alice_dir.join("profile.db-wal");
    let deleted: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("fds of chat")
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .map(|p| p.display().to_string())
        .filter(|p| p.contains("profile.db") && p.ends_with("(deleted)"))
        .collect();
    assert!(deleted.is_empty(), "chat mode writes into deleted files: {deleted:?}");
    assert!(wal.exists(), "the WAL of the open chat is gone");

    // Every message arrived, each once, and none was refused as a replay.
    let want = SENDS + TYPED;
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut offset = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    while seen.values().sum::<usize>() < want && Instant::now() < deadline {
        let (status, body) = world.gateway.call("getUpdates", json!({"offset": offset, "timeout": 2}));
        assert_eq!(status, 200, "{body}");
        for u in body["result"].as_array().expect("updates") {
            offset = u["update_id"].as_i64().expect("id") + 1;
            if let Some(text) = u["message"]["text"].as_str() {
                *seen.entry(text.to_string()).or_default() += 1;
            }
        }
    }
    let twice: Vec<_> = seen.iter().filter(|(_, &n)| n > 1).collect();
    assert!(twice.is_empty(), "delivered more than once: {twice:?}");
    let missing: Vec<String> = (0..SENDS)
        .map(|i| format!("send-{i}"))
        .chain((0..TYPED).map(|i| format!("typed-{i}")))
        .filter(|t| !seen.contains_key(t))
        .collect();
    assert!(missing.is_empty(), "never arrived: {missing:?}");
    assert_eq!(metric(&world, "botgw_decrypt_failures_total"), 0.0, "a message was refused (a reused ratchet position)");

    writeln!(stdin, "/quit").expect("type");
    assert!(chat.wait_exit("on /quit").success());
}
