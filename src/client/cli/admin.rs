//! The e2e-chat commands of channels and administration: `channel create|post`, `join LINK`,
//! and the `group` subcommands that administer (`promote`, `ban`, `unban`, `restrict`,
//! `unrestrict`, `link`, `revoke-link`, `export-link`, `approve`, `decline`, `delete`).
//! Arguments are checked before the profile is opened, as for the other commands.

use serde_json::json;

use super::json::{group_sent_json, invite_link_json};
use crate::cli::{Args, CliError, Opt};
use crate::client::admin::{parse_rights, Joined, LinkOptions};
use crate::client::cli_common::{open_profile, ordered, print_line, usage, Global};
use crate::client::message::GroupId;

/// The administering `group` subcommands (the others are in `groups.rs`).
pub(super) const GROUP_ADMIN_SUBCOMMANDS: &[&str] =
    &["promote", "ban", "unban", "restrict", "unrestrict", "link", "revoke-link", "export-link", "approve", "decline", "delete"];

#[derive(Debug, PartialEq)]
enum Admin<'a> {
    Promote { group: &'a str, user: &'a str, rights: &'a str },
    Ban { group: &'a str, user: &'a str, until: i64 },
    Unban { group: &'a str, user: &'a str },
    Restrict { group: &'a str, user: &'a str, until: i64 },
    Unrestrict { group: &'a str, user: &'a str },
    Link { group: &'a str, options: LinkOptions },
    RevokeLink { group: &'a str, link: &'a str },
    ExportLink { group: &'a str },
    Decide { group: &'a str, user: &'a str, approve: bool },
    Delete { group: &'a str, message_id: u64 },
}

const UNTIL: Opt = Opt::value("--until");

/// The options of an administering subcommand (besides the global ones).
pub(super) fn admin_options(sub: &str) -> &'static [Opt] {
    const LINK: &[Opt] = &[Opt::value("--name"), Opt::value("--expire"), Opt::value("--limit"), Opt::switch("--request")];
    match sub {
        "ban" | "restrict" => &[UNTIL],
        "link" => LINK,
        _ => &[],
    }
}

fn number<T: std::str::FromStr>(sub: &str, what: &str, v: &str) -> Result<T, CliError> {
    v.parse().map_err(|_| usage(format!("{sub}: {what} must be a number, got {v:?}")))
}

fn admin_args<'a>(sub: &str, a: &Args<'a>) -> Result<Admin<'a>, CliError> {
    let name = format!("group {sub}");
    let words = &a.words[..];
    let until = match a.value("--until") {
        Some(v) => number(&name, "--until", v)?,
        None => 0,
    };
    let expected = |what: &str| usage(format!("{name}: expected {what}"));
    let two = |what: &str| -> Result<(&'a str, &'a str), CliError> {
        match words[..] {
            [a, b] => Ok((a, b)),
            _ => Err(expected(what)),
        }
    };
    Ok(match sub {
        "promote" => match words[..] {
            [group, user, rights] => {
                parse_rights(rights).map_err(|e| usage(format!("{name}: {e}")))?;
                Admin::Promote { group, user, rights }
            }
            _ => return Err(expected("GROUP @USER_OR_BOT RIGHTS (a comma-separated list of post, delete, restrict, invite, promote, change_info, manage; or none)")),
        },
        "ban" => {
            let (group, user) = two("GROUP @USER [--until UNIX_TIME]")?;
            Admin::Ban { group, user, until }
        }
        "unban" => {
            let (group, user) = two("GROUP @USER")?;
            Admin::Unban { group, user }
        }
        "restrict" => {
            let (group, user) = two("GROUP @USER [--until UNIX_TIME]")?;
            Admin::Restrict { group, user, until }
        }
        "unrestrict" => {
            let (group, user) = two("GROUP @USER")?;
            Admin::Unrestrict { group, user }
        }
        "link" => {
            let [group] = words[..] else { return Err(expected("GROUP [--name N] [--expire UNIX_TIME] [--limit N] [--request]")) };
            let mut o = LinkOptions::default();
            if let Some(v) = a.value("--name") {
                o.name = v.to_string();
            }
            if let Some(v) = a.value("--expire") {
                o.expire_date = number(&name, "--expire", v)?;
            }
            if let Some(v) = a.value("--limit") {
                o.member_limit = number(&name, "--limit", v)?;
            }
            o.creates_join_request = a.switch("--request");
            Admin::Link { group, options: o }
        }
        "revoke-link" => {
            let (group, link) = two("GROUP LINK")?;
            Admin::RevokeLink { group, link }
        }
        "export-link" => match words[..] {
            [group] => Admin::ExportLink { group },
            _ => return Err(expected("GROUP")),
        },
        "approve" | "decline" => {
            let (group, user) = two("GROUP @USER")?;
            Admin::Decide { group, user, approve: sub == "approve" }
        }
        "delete" => {
            let (group, id) = two("GROUP MESSAGE_ID")?;
            Admin::Delete { group, message_id: number(&name, "MESSAGE_ID", id)? }
        }
        other => return Err(usage(format!("unknown group command {other:?}"))),
    })
}

/// `group SUB ...` for the administering subcommands.
pub(super) fn group_admin(global: &Global, sub: &str, a: &Args) -> Result<(), CliError> {
    let cmd = admin_args(sub, a)?;
    let profile = open_profile(global)?;
    let done = |group: &GroupId, what: &str, user: &str| {
        print_line(&ordered(&[("group_id", json!(group.hex())), ("done", json!(what)), ("user", json!(user))]))
    };
    match cmd {
        Admin::Promote { group, user, rights } => {
            let id = profile.find_group(group)?;
            profile.promote(&id, user, parse_rights(rights)?)?;
            done(&id, "promote", user)
        }
        Admin::Ban { group, user, until } => {
            let id = profile.find_group(group)?;
            profile.ban(&id, user, until)?;
            done(&id, "ban", user)
        }
        Admin::Unban { group, user } => {
            let id = profile.find_group(group)?;
            profile.unban(&id, user)?;
            done(&id, "unban", user)
        }
        Admin::Restrict { group, user, until } => {
            let id = profile.find_group(group)?;
            profile.restrict(&id, user, false, until)?;
            done(&id, "restrict", user)
        }
        Admin::Unrestrict { group, user } => {
            let id = profile.find_group(group)?;
            profile.restrict(&id, user, true, 0)?;
            done(&id, "unrestrict", user)
        }
        Admin::Link { group, options } => {
            let id = profile.find_group(group)?;
            print_line(&invite_link_json(&id.hex(), &profile.create_invite_link(&id, &options)?))
        }
        Admin::RevokeLink { group, link } => {
            let id = profile.find_group(group)?;
            print_line(&invite_link_json(&id.hex(), &profile.revoke_invite_link(&id, link)?))
        }
        Admin::ExportLink { group } => {
            let id = profile.find_group(group)?;
            print_line(&invite_link_json(&id.hex(), &profile.export_invite_link(&id)?))
        }
        Admin::Decide { group, user, approve } => {
            let id = profile.find_group(group)?;
            profile.decide_join_request(&id, user, approve)?;
            done(&id, if approve { "approve" } else { "decline" }, user)
        }
        Admin::Delete { group, message_id } => {
            let id = profile.find_group(group)?;
            profile.delete_group_message(&id, message_id)?;
            print_line(&ordered(&[("group_id", json!(id.hex())), ("deleted", json!(message_id))]))
        }
    }
}

/// `channel create TITLE...` and `channel post CHANNEL TEXT...` (`sub` is known: see
/// `command_options` in `mod.rs`).
pub(super) fn channel(global: &Global, sub: &str, a: &Args) -> Result<(), CliError> {
    if sub == "create" {
        let title = a.words.join(" ");
        if title.trim().is_empty() {
            return Err(usage("channel create: TITLE missing".into()));
        }
        let id = open_profile(global)?.create_channel(&title)?;
        return print_line(&ordered(&[("group_id", json!(id.hex())), ("title", json!(title.trim())), ("type", json!("channel"))]));
    }
    let Some((channel, text)) = a.words.split_first().map(|(c, t)| (*c, t.join(" "))).filter(|(_, t)| !t.trim().is_empty()) else {
        return Err(usage("channel post: expected CHANNEL TEXT".into()));
    };
    let profile = open_profile(global)?;
    let id = profile.find_group(channel)?;
    let sent = profile.send_group_text(&id, &text, None)?;
    print_line(&group_sent_json(&id, sent.message_id, sent.date))
}

/// `join LINK`: joins at once, or asks (a join request).
pub(super) fn join(global: &Global, a: &Args) -> Result<(), CliError> {
    let [link] = a.words[..] else { return Err(usage("join: expected LINK (e2e://join/...)".into())) };
    let joined = open_profile(global)?.join_by_link(link)?;
    let (group, title, status) = match &joined {
        Joined::Member { group, title } => (group, title, "joined"),
        Joined::Requested { group, title } => (group, title, "requested"),
    };
    print_line(&ordered(&[("group_id", json!(group.hex())), ("title", json!(title)), ("status", json!(status))]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `group SUB ARGS...` parsed as `e2e-chat` does, as `Admin`'s Debug text.
    fn admin(sub: &str, args: &[&str]) -> Result<String, String> {
        let v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let parsed = super::super::parse_command("group", Some(sub), &v).map_err(|e| e.to_string())?;
        admin_args(sub, &parsed).map(|a| format!("{a:?}")).map_err(|e| {
            assert!(matches!(e, CliError::Usage(_)), "a usage error: {e}");
            e.to_string()
        })
    }

    fn ok(a: Admin) -> Result<String, String> {
        Ok(format!("{a:?}"))
    }

    #[test]
    fn admin_subcommands_parse_their_arguments() {
        assert_eq!(admin("promote", &["Team", "@bot", "post,delete"]), ok(Admin::Promote { group: "Team", user: "@bot", rights: "post,delete" }));
        assert!(admin("promote", &["Team", "@bot", "post,fly"]).is_err());
        assert!(admin("promote", &["Team", "@bot"]).expect_err("no rights").contains("expected GROUP @USER_OR_BOT RIGHTS"));
        assert_eq!(admin("ban", &["Team", "@bob", "--until", "99"]), ok(Admin::Ban { group: "Team", user: "@bob", until: 99 }));
        assert_eq!(admin("ban", &["--until=99", "Team", "@bob"]), ok(Admin::Ban { group: "Team", user: "@bob", until: 99 }));
        assert!(admin("ban", &["Team", "@bob", "--until", "soon"]).expect_err("not a number").contains("must be a number"));
        assert!(admin("unban", &["Team", "@bob", "--until", "9"]).expect_err("not unban's").contains("unknown option --until for group unban"));
        let o = LinkOptions { name: "n".into(), expire_date: 7, member_limit: 3, ..Default::default() };
        assert_eq!(admin("link", &["Team", "--name", "n", "--limit", "3", "--expire", "7"]), ok(Admin::Link { group: "Team", options: o.clone() }));
        assert_eq!(admin("link", &["--limit=3", "--expire=7", "Team", "--name=n"]), ok(Admin::Link { group: "Team", options: o }));
        let request = LinkOptions { creates_join_request: true, ..Default::default() };
        assert_eq!(admin("link", &["Team", "--request"]), ok(Admin::Link { group: "Team", options: request }));
        assert!(admin("link", &["Team", "--bogus"]).expect_err("unknown").contains("--bogus"));
        assert!(admin("link", &["Team", "--name"]).expect_err("no value").contains("--name needs a value"));
        assert!(admin("delete", &["Team", "x"]).is_err());
        assert_eq!(admin("delete", &["Team", "4"]), ok(Admin::Delete { group: "Team", message_id: 4 }));
        assert_eq!(admin("decline", &["T", "@u"]), ok(Admin::Decide { group: "T", user: "@u", approve: false }));
        assert_eq!(admin("revoke-link", &["T", "--", "-link"]), ok(Admin::RevokeLink { group: "T", link: "-link" }));
    }
}
