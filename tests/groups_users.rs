//! Groups between users of `e2e-chat`'s client library, end to end against the real
//! platform-server over gRPC on loopback: creating a group, adding users by Welcome, messages
//! in one order for everyone, two members committing at once without a fork, a removal (the
//! removed user reads nothing after), leaving; and the `e2e-chat group` commands.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use bot_gateway::client::{GroupId, GroupRole, Incoming, Profile};
use serde_json::Value;
use support::{bin_path, PlatformServer};

/// Longest wait for something that is on its way.
const WAIT: Duration = Duration::from_secs(30);

fn user(platform: &PlatformServer, dir: &Path, name: &str) -> Profile {
    Profile::register(&platform.url, dir.join(name), name, &format!("User {name}"))
        .unwrap_or_else(|e| panic!("register {name}: {e}"))
}

/// Receives until `pick` accepts an event (bounded); returns every event taken.
fn receive_until(p: &Profile, what: &str, pick: impl Fn(&Incoming) -> bool) -> Vec<Incoming> {
    let deadline = Instant::now() + WAIT;
    let mut got = Vec::new();
    while !got.iter().any(&pick) {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "@{} waited for {what}; got {got:#?}",
            p.username()
        );
        got.extend(
            p.receive_events(left, 1)
                .unwrap_or_else(|e| panic!("@{} receives: {e}", p.username())),
        );
    }
    got
}

/// What arrives within `quiet` (nothing more is expected).
fn drain(p: &Profile, quiet: Duration) -> Vec<Incoming> {
    p.receive_events(quiet, usize::MAX)
        .unwrap_or_else(|e| panic!("@{} receives: {e}", p.username()))
}

/// (message id, sender, text) of the group messages among `events`.
fn texts(events: &[Incoming]) -> Vec<(u64, String, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            Incoming::GroupMessage { message, .. } => Some((
                message.message_id,
                message.sender.username.clone(),
                message.text.clone(),
            )),
            _ => None,
        })
        .collect()
}

fn joined(group: GroupId) -> impl Fn(&Incoming) -> bool {
    move |e| matches!(e, Incoming::GroupJoined { group: g } if g.id == group)
}

fn sorted_devices(p: &Profile, group: &GroupId) -> Vec<(u64, u32)> {
    let mut d = p
        .group_devices(group)
        .unwrap_or_else(|e| panic!("@{}: {e}", p.username()));
    d.sort();
    d
}

#[test]
fn three_users_create_add_talk_in_one_order_commit_at_once_remove_and_leave() {
    bot_gateway::crypto::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let platform = PlatformServer::start(&dir.path().join("platform"));
    let alice = user(&platform, dir.path(), "alice");
    let bob = user(&platform, dir.path(), "bob");
    let carol = user(&platform, dir.path(), "carol");
    let dave = user(&platform, dir.path(), "dave");

    let group = alice.create_group("Team").expect("create");
    assert_eq!(alice.find_group("Team").expect("by title"), group);
    assert_eq!(
        alice.find_group(&group.hex()[..8]).expect("by prefix"),
        group
    );
    let details = alice.group_members(&group).expect("members");
    assert_eq!(
        (details.title.as_str(), details.role_of(alice.user_id())),
        ("Team", Some(GroupRole::OWNER))
    );

    // Bob and Carol are added from their key packages and join from the Welcome.
    assert_eq!(
        alice.add_to_group(&group, "@bob").expect("add bob").devices,
        1
    );
    assert_eq!(
        alice
            .add_to_group(&group, "carol")
            .expect("add carol")
            .devices,
        1
    );
    receive_until(&bob, "the Welcome", joined(group));
    receive_until(&carol, "the Welcome", joined(group));
    assert!(
        bob.keep_key_packages().expect("count") >= bot_gateway::client::KEY_PACKAGES_LOW,
        "the key package a Welcome used is replaced"
    );
    let details = alice.group_members(&group).expect("members");
    for u in [&bob, &carol] {
        assert_eq!(
            details.role_of(u.user_id()),
            Some(GroupRole::MEMBER),
            "@{} joined",
            u.username()
        );
    }
    assert!(
        alice.add_to_group(&group, "bob").is_err(),
        "a member is not added twice"
    );

    // Everyone speaks; Bob has not read Carol's addition yet: his first send is stale and he
    // catches up by himself. Every member sees the same messages under the same ids.
    let mut sent = Vec::new();
    for (p, text) in [
        (&alice, "one"),
        (&bob, "two"),
        (&carol, "three"),
        (&alice, "four"),
    ] {
        let s = p
            .send_group_text(&group, text, None)
            .unwrap_or_else(|e| panic!("@{} sends: {e}", p.username()));
        sent.push((s.message_id, p.username().to_string(), text.to_string()));
    }
    let ids: Vec<u64> = sent.iter().map(|s| s.0).collect();
    // Ids 1 and 2 went to the service messages of Bob's and Carol's joins.
    assert_eq!(
        ids,
        vec![3, 4, 5, 6],
        "per-group ids in the order the platform took them"
    );
    let reply = bob
        .send_group_text(&group, "re: one", Some(1))
        .expect("reply");
    sent.push((reply.message_id, "bob".into(), "re: one".into()));
    for p in [&alice, &bob, &carol] {
        let mut seen = texts(&drain(p, Duration::from_secs(2)));
        let own: Vec<_> = sent
            .iter()
            .filter(|s| s.1 == p.username())
            .cloned()
            .collect();
        let received_ids: Vec<u64> = seen.iter().map(|s| s.0).collect();
        assert!(
            received_ids.windows(2).all(|w| w[0] < w[1]),
            "@{} receives in the group's order: {received_ids:?}",
            p.username()
        );
        seen.extend(own);
        seen.sort();
        assert_eq!(
            seen,
            sent,
            "@{} sees every message once, under the platform's ids",
            p.username()
        );
    }

    // Bob and Carol joined from a Welcome, by a leaf their key package made: each replaced it
    // (a self-update, the group's post-compromise security) before its first send. Two adds
    // and two self-updates; Alice created the group with a fresh leaf and has none due.
    for p in [&alice, &bob, &carol] {
        assert_eq!(
            p.group_epoch(&group).expect("epoch"),
            Some(4),
            "@{} is past the adds and both self-updates",
            p.username()
        );
    }

    // Dave is added too, then leaves: Alice, Bob and Carol each learn it and commit the
    // removal of his leaf at the same epoch, before reading anyone else's commit. The platform
    // takes the first; the others are stale, catch up and find it moot. No fork.
    alice.add_to_group(&group, "dave").expect("alice adds dave");
    receive_until(&dave, "the Welcome", joined(group));
    dave.leave_group(&group).expect("dave leaves");
    assert_eq!(
        dave.group_epoch(&group).expect("epoch"),
        None,
        "forgotten on Dave's device"
    );
    for p in [&alice, &bob, &carol] {
        receive_until(
            p,
            "Dave leaving",
            |e| matches!(e, Incoming::GroupMembership { new: GroupRole::LEFT, user, .. } if user.username == "dave"),
        );
    }
    // Whoever lost the race reads the winner's commit; then nobody holds Dave's leaf.
    let deadline = Instant::now() + WAIT;
    loop {
        let epochs: Vec<Option<u64>> = [&alice, &bob, &carol]
            .iter()
            .map(|p| p.group_epoch(&group).expect("epoch"))
            .collect();
        let devices: Vec<Vec<(u64, u32)>> = [&alice, &bob, &carol]
            .iter()
            .map(|p| sorted_devices(p, &group))
            .collect();
        if epochs.iter().all(|e| *e == epochs[0])
            && devices.iter().all(|d| *d == devices[0])
            && devices[0].len() == 3
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no fork: epochs {epochs:?}, devices {devices:?}"
        );
        for p in [&alice, &bob, &carol] {
            drain(p, Duration::from_millis(300));
        }
    }
    let after_race = bob
        .send_group_text(&group, "still one group", None)
        .expect("send after the race");
    for p in [&alice, &carol] {
        let got = receive_until(
            p,
            "the message after the race",
            |e| matches!(e, Incoming::GroupMessage { message, .. } if message.message_id == after_race.message_id),
        );
        assert!(texts(&got).iter().any(|t| t.2 == "still one group"));
    }

    // Alice removes Carol: Carol learns it, forgets the group and reads nothing after.
    assert!(
        alice
            .remove_from_group(&group, "carol")
            .expect("remove carol"),
        "alice's commit removed carol's leaf"
    );
    let got = receive_until(&carol, "her removal", |e| {
        matches!(
            e,
            Incoming::GroupCommit {
                removed_me: true,
                ..
            }
        )
    });
    assert!(
        got.iter().any(|e| matches!(
            e,
            Incoming::GroupMembership {
                new: GroupRole::BANNED,
                ..
            }
        )),
        "{got:#?}"
    );
    assert_eq!(carol.group_epoch(&group).expect("epoch"), None);
    alice
        .send_group_text(&group, "carol is gone", None)
        .expect("send");
    let got = receive_until(
        &bob,
        "the message after the removal",
        |e| matches!(e, Incoming::GroupMessage { message, .. } if message.text == "carol is gone"),
    );
    assert!(got.iter().any(|e| matches!(e, Incoming::GroupCommit { removed, .. } if removed.iter().any(|d| d.0 == carol.user_id()))));
    assert!(
        texts(&drain(&carol, Duration::from_secs(2))).is_empty(),
        "the removed user decrypts nothing after"
    );
    assert!(carol.send_group_text(&group, "let me in", None).is_err());

    // Bob leaves; Alice's next message first removes his leaf (or her inbox already did).
    bob.leave_group(&group).expect("bob leaves");
    alice
        .send_group_text(&group, "alone now", None)
        .expect("send after bob left");
    assert_eq!(
        sorted_devices(&alice, &group),
        vec![(alice.user_id(), alice.device_id())]
    );
    let details = alice.group_members(&group).expect("members");
    assert_eq!(
        [bob.user_id(), carol.user_id(), dave.user_id()].map(|u| details.role_of(u)),
        [
            Some(GroupRole::LEFT),
            Some(GroupRole::BANNED),
            Some(GroupRole::LEFT)
        ]
    );
    assert!(
        texts(&drain(&bob, Duration::from_secs(1))).is_empty(),
        "nothing after leaving reaches bob"
    );
}

fn e2e_chat(profile: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin_path("e2e-chat"))
        .arg("--profile")
        .arg(profile)
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run");
    (
        out.status.code().expect("exited"),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn lines(out: &str) -> Vec<Value> {
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

#[test]
fn the_group_commands_of_e2e_chat() {
    bot_gateway::crypto::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let platform = PlatformServer::start(&dir.path().join("platform"));
    let (a, b) = (dir.path().join("ann"), dir.path().join("ben"));
    for (p, name) in [(&a, "ann"), (&b, "ben")] {
        let (code, _, err) = e2e_chat(p, &["--server", &platform.url, "register", name]);
        assert_eq!(code, 0, "{err}");
    }
    let (code, out, err) = e2e_chat(&a, &["group", "create", "Book", "club"]);
    assert_eq!(code, 0, "{err}");
    let created = &lines(&out)[0];
    assert_eq!(created["title"], "Book club");
    let id = created["group_id"].as_str().expect("id").to_string();
    assert_eq!(id.len(), 64);

    let (code, out, err) = e2e_chat(&a, &["group", "add", "Book club", "@ben"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        (
            lines(&out)[0]["user"]["username"].as_str(),
            lines(&out)[0]["devices_added"].as_u64()
        ),
        (Some("ben"), Some(1))
    );

    // Ben's send joins from the Welcome first; Ann's listen shows it with the group.
    let (code, out, err) = e2e_chat(&b, &["group", "send", &id[..10], "hello", "club"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(lines(&out)[0]["message_id"], 2, "id 1 is the service message of Ben's join");
    let (code, out, err) = e2e_chat(&a, &["listen", "--timeout", "5", "--count", "5"]);
    assert_eq!(code, 0, "{err}");
    let heard: Vec<Value> = lines(&out);
    let msg = heard
        .iter()
        .find(|v| v["event"] == "group_message")
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(
        (
            msg["group"]["title"].as_str(),
            msg["text"].as_str(),
            msg["from"]["username"].as_str()
        ),
        (Some("Book club"), Some("hello club"), Some("ben"))
    );

    // A member's poll, made on the command line, reaches the others.
    let (code, out, err) = e2e_chat(&b, &["group", "send-poll", "Book club", "Next book?", "Dune", "Emma", "--not-anonymous"]);
    assert_eq!(code, 0, "{err}");
    let poll_id = lines(&out)[0]["message_id"].clone();
    let (code, out, err) = e2e_chat(&a, &["listen", "--timeout", "5", "--count", "1"]);
    assert_eq!(code, 0, "{err}");
    let heard = &lines(&out)[0];
    assert_eq!((&heard["message_id"], heard["poll"]["question"].as_str()), (&poll_id, Some("Next book?")), "{out}");
    assert_eq!(heard["poll"]["options"].as_array().map(Vec::len), Some(2), "{out}");

    let (code, out, err) = e2e_chat(&b, &["group", "members", "Book club"]);
    assert_eq!(code, 0, "{err}");
    let roles: Vec<(String, String)> = lines(&out)
        .iter()
        .map(|v| {
            (
                v["username"].as_str().unwrap().into(),
                v["role"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert!(
        roles.contains(&("ann".into(), "owner".into()))
            && roles.contains(&("ben".into(), "member".into())),
        "{roles:?}"
    );
    let (code, out, _) = e2e_chat(&b, &["group", "list"]);
    assert_eq!(code, 0);
    assert_eq!(
        (
            lines(&out)[0]["group_id"].as_str(),
            lines(&out)[0]["joined"].as_bool()
        ),
        (Some(id.as_str()), Some(true))
    );

    // The title: a member may not change it, the owner may; the member's listen shows it.
    let (code, _, err) = e2e_chat(&b, &["group", "title", "Book club", "Ben's"]);
    assert_eq!(code, 1);
    assert!(err.contains("can_change_info"), "{err}");
    let (code, out, err) = e2e_chat(&a, &["group", "title", &id[..10], "Reading", "circle"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(lines(&out)[0]["title"], "Reading circle");
    let (code, out, err) = e2e_chat(&b, &["listen", "--timeout", "5", "--count", "5"]);
    assert_eq!(code, 0, "{err}");
    let renamed = lines(&out).into_iter().find(|v| v["event"] == "group_title").unwrap_or_else(|| panic!("{out}"));
    assert_eq!((renamed["group"]["title"].as_str(), renamed["actor"]["username"].as_str()), (Some("Reading circle"), Some("ann")));

    let (code, _, err) = e2e_chat(&b, &["group", "send", "No such group", "hi"]);
    assert_eq!(code, 1);
    assert!(err.contains("no group \"No such group\""), "{err}");
    let (code, _, err) = e2e_chat(&b, &["group", "frob"]);
    assert_eq!(code, 2, "{err}");
    let (code, out, err) = e2e_chat(&b, &["group", "leave", "Reading circle"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(lines(&out)[0]["role"], "left");
    let (code, out, _) = e2e_chat(&b, &["group", "list"]);
    assert_eq!(
        (code, out.as_str()),
        (0, ""),
        "a group left is no longer listed"
    );
}
