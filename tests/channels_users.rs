//! Channels and administration with the `e2e-chat` commands, end to end against the real
//! platform-server: a channel created and posted to, a subscriber's post refused, a join
//! request approved (the requester's device then joins by itself) and one declined, a link
//! revoked, a promotion, a restriction and a ban.

mod support;

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use support::{bin_path, PlatformServer};

fn e2e_chat(profile: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin_path("e2e-chat")).arg("--profile").arg(profile).args(args).env("RUST_LOG", "warn").output().expect("run");
    (out.status.code().expect("exited"), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn ok(profile: &Path, args: &[&str]) -> Vec<Value> {
    let (code, out, err) = e2e_chat(profile, args);
    assert_eq!(code, 0, "{args:?}: {err}");
    out.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}"))).collect()
}

fn fails(profile: &Path, args: &[&str], says: &str) {
    let (code, _, err) = e2e_chat(profile, args);
    assert_ne!(code, 0, "{args:?} should fail");
    assert!(err.contains(says), "{args:?}: {err:?} should say {says:?}");
}

/// `listen` lines of `event` (a bounded listen).
fn heard(profile: &Path, event: &str) -> Vec<Value> {
    ok(profile, &["listen", "--timeout", "4", "--count", "50"]).into_iter().filter(|v| v["event"] == event).collect()
}

#[test]
fn channels_links_requests_and_administration_with_e2e_chat() {
    bot_gateway::crypto::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let platform = PlatformServer::start(&dir.path().join("platform"));
    let [ann, ben, cat, dan] = ["ann", "ben", "cat", "dan"].map(|n| dir.path().join(n));
    for (p, name) in [(&ann, "ann"), (&ben, "ben"), (&cat, "cat"), (&dan, "dan")] {
        ok(p, &["--server", &platform.url, "register", name]);
    }

    // A channel: Ben subscribes by a plain link; Ann's post reaches him; his own is refused.
    let created = &ok(&ann, &["channel", "create", "Daily", "cats"])[0];
    assert_eq!((created["title"].as_str(), created["type"].as_str()), (Some("Daily cats"), Some("channel")));
    let link = ok(&ann, &["group", "link", "Daily cats", "--name", "open"])[0]["invite_link"].as_str().unwrap().to_string();
    assert!(link.starts_with("e2e://join/"), "{link}");
    assert_eq!(ok(&ben, &["join", &link])[0]["status"], "joined");
    let membership = heard(&ann, "group_membership");
    assert!(membership.iter().any(|v| v["new_role"] == "member" && v["invite_link"] == link.as_str()), "{membership:?}");
    ok(&ann, &["channel", "post", "Daily cats", "first", "post"]);
    let posts = heard(&ben, "channel_post");
    assert_eq!(posts.iter().map(|v| v["text"].as_str().unwrap()).collect::<Vec<_>>(), ["first post"]);
    fails(&ben, &["channel", "post", "Daily cats", "me too"], "can_post_messages");

    // A join request: Cat asks, Ann is told and approves; Cat's device joins by itself.
    let ask = ok(&ann, &["group", "link", "Daily cats", "--request"])[0]["invite_link"].as_str().unwrap().to_string();
    assert_eq!(ok(&cat, &["join", &ask])[0]["status"], "requested");
    let asked = heard(&ann, "join_request");
    assert_eq!(asked[0]["user"]["username"], "cat");
    ok(&ann, &["group", "approve", "Daily cats", "@cat"]);
    heard(&cat, "group_membership"); // the approval: the device joins by external commit
    ok(&ann, &["channel", "post", "Daily cats", "welcome cat"]);
    let posts = heard(&cat, "channel_post");
    assert!(posts.iter().any(|v| v["text"] == "welcome cat"), "{posts:?}");
    // Dan asks and is declined; a revoked link lets nobody in.
    assert_eq!(ok(&dan, &["join", &ask])[0]["status"], "requested");
    ok(&ann, &["group", "decline", "Daily cats", "@dan"]);
    assert_eq!(heard(&dan, "join_request_declined")[0]["by"]["username"], "ann");
    let revoked = &ok(&ann, &["group", "revoke-link", "Daily cats", &link])[0];
    assert_eq!(revoked["is_revoked"], true);
    fails(&dan, &["join", &link], "revoked");
    fails(&ann, &["group", "promote", "Daily cats", "@ben", "post,fly"], "unknown right");

    // A group: Ben promoted (restrict), restricts Cat (her message is refused), then bans her.
    ok(&ann, &["group", "create", "Litter"]);
    ok(&ann, &["group", "add", "Litter", "@ben"]);
    ok(&ann, &["group", "add", "Litter", "@cat"]);
    ok(&ben, &["group", "send", "Litter", "hi"]);
    ok(&ann, &["group", "promote", "Litter", "@ben", "restrict"]);
    fails(&cat, &["group", "ban", "Litter", "@ben"], "can_restrict_members");
    ok(&ben, &["group", "restrict", "Litter", "@cat"]);
    fails(&cat, &["group", "send", "Litter", "meow"], "restricted");
    ok(&ben, &["group", "unrestrict", "Litter", "@cat"]);
    let sent = ok(&cat, &["group", "send", "Litter", "meow"]);
    let meow_id = sent[0]["message_id"].as_u64().unwrap();
    let meow = meow_id.to_string();
    fails(&ben, &["group", "delete", "Litter", &meow], "can_delete_messages");
    ok(&ann, &["group", "delete", "Litter", &meow]);
    assert!(heard(&ben, "group_message_deleted").iter().any(|v| v["message_id"] == meow_id));
    ok(&ben, &["group", "ban", "Litter", "@cat"]);
    let roles = ok(&ann, &["group", "members", "Litter"]);
    assert!(roles.iter().any(|v| v["username"] == "cat" && v["role"] == "banned"), "{roles:?}");
    ok(&ann, &["group", "send", "Litter", "after the ban"]);
    let later = heard(&cat, "group_message");
    assert!(!later.iter().any(|v| v["text"] == "after the ban"), "the banned member read a later message: {later:?}");
}
