//! The e2e-chat commands of channels and administration: `channel create|post`, `join LINK`,
//! and the `group` subcommands that administer (`promote`, `ban`, `unban`, `restrict`,
//! `unrestrict`, `link`, `revoke-link`, `export-link`, `approve`, `decline`, `delete`).
//! Arguments are checked before the profile is opened, as for the other commands.

use anyhow::bail;
use serde_json::json;

use super::admin::{parse_rights, Joined, LinkOptions};
use super::cli::{open_profile, ordered, print_line, Global};
use crate::wire::platform::InviteLink;

/// The administering `group` subcommands (the others are in `cli.rs`).
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

fn usage(msg: String) -> anyhow::Error {
    crate::cli::UsageError(msg).into()
}

/// Words, and (option, value) pairs ("" for a switch).
type Parsed<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>);

/// Splits `--flag value` options (`flags` take a value, `switches` do not) from the words.
fn options<'a>(
    sub: &str,
    args: &'a [String],
    flags: &[&str],
    switches: &[&str],
) -> anyhow::Result<Parsed<'a>> {
    let (mut words, mut opts) = (Vec::new(), Vec::new());
    let mut it = args.iter().map(String::as_str);
    while let Some(a) = it.next() {
        if flags.contains(&a) {
            let Some(v) = it.next() else { bail!("{sub}: {a} needs a value") };
            opts.push((a, v));
        } else if switches.contains(&a) {
            opts.push((a, ""));
        } else if a.starts_with("--") {
            return Err(usage(format!("{sub}: unknown option {a}")));
        } else {
            words.push(a);
        }
    }
    Ok((words, opts))
}

fn number<T: std::str::FromStr>(sub: &str, what: &str, v: &str) -> anyhow::Result<T> {
    v.parse().map_err(|_| usage(format!("{sub}: {what} must be a number, got {v:?}")))
}

fn admin_args<'a>(sub: &str, args: &'a [String]) -> anyhow::Result<Admin<'a>> {
    let name = format!("group {sub}");
    let (words, opts) = options(&name, args, &["--until", "--name", "--expire", "--limit"], &["--request"])?;
    let until = match opts.iter().find(|(k, _)| *k == "--until") {
        Some((_, v)) => number(&name, "--until", v)?,
        None => 0,
    };
    let two = |what: &str| -> anyhow::Result<(&'a str, &'a str)> {
        match words[..] {
            [a, b] => Ok((a, b)),
            _ => bail!("{name}: expected {what}"),
        }
    };
    Ok(match sub {
        "promote" => match words[..] {
            [group, user, rights] => {
                parse_rights(rights).map_err(|e| usage(format!("{name}: {e}")))?;
                Admin::Promote { group, user, rights }
            }
            _ => bail!("{name}: expected GROUP @USER_OR_BOT RIGHTS (a comma-separated list of post, delete, restrict, invite, promote, change_info, manage; or none)"),
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
            let [group] = words[..] else { bail!("{name}: expected GROUP [--name N] [--expire UNIX_TIME] [--limit N] [--request]") };
            let mut o = LinkOptions::default();
            for (k, v) in &opts {
                match *k {
                    "--name" => o.name = v.to_string(),
                    "--expire" => o.expire_date = number(&name, "--expire", v)?,
                    "--limit" => o.member_limit = number(&name, "--limit", v)?,
                    "--request" => o.creates_join_request = true,
                    _ => {}
                }
            }
            Admin::Link { group, options: o }
        }
        "revoke-link" => {
            let (group, link) = two("GROUP LINK")?;
            Admin::RevokeLink { group, link }
        }
        "export-link" => match words[..] {
            [group] => Admin::ExportLink { group },
            _ => bail!("{name}: expected GROUP"),
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

fn link_line(group: &str, l: &InviteLink) -> String {
    ordered(&[
        ("group_id", json!(group)),
        ("invite_link", json!(l.link)),
        ("name", json!(l.name)),
        ("expire_date", json!(l.expire_date)),
        ("member_limit", json!(l.member_limit)),
        ("creates_join_request", json!(l.creates_join_request)),
        ("is_primary", json!(l.is_primary)),
        ("is_revoked", json!(l.is_revoked)),
    ])
}

/// `group SUB ...` for the administering subcommands.
pub(super) fn group_admin(global: &Global, sub: &str, args: &[String]) -> anyhow::Result<()> {
    let cmd = admin_args(sub, args)?;
    let profile = open_profile(global)?;
    let done = |group: &super::message::GroupId, what: &str, user: &str| {
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
            print_line(&link_line(&id.hex(), &profile.create_invite_link(&id, &options)?))
        }
        Admin::RevokeLink { group, link } => {
            let id = profile.find_group(group)?;
            print_line(&link_line(&id.hex(), &profile.revoke_invite_link(&id, link)?))
        }
        Admin::ExportLink { group } => {
            let id = profile.find_group(group)?;
            print_line(&link_line(&id.hex(), &profile.export_invite_link(&id)?))
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

/// `channel create TITLE...` and `channel post CHANNEL TEXT...`.
pub(super) fn channel(global: &Global, args: &[String]) -> anyhow::Result<()> {
    let Some((sub, rest)) = args.split_first() else {
        return Err(usage("channel: which one? the channel commands are: create, post".into()));
    };
    let text = rest.get(1..).map(|t| t.join(" ")).unwrap_or_default();
    match sub.as_str() {
        "create" => {
            let title = rest.join(" ");
            if title.trim().is_empty() {
                bail!("channel create: TITLE missing");
            }
            let id = open_profile(global)?.create_channel(&title)?;
            print_line(&ordered(&[("group_id", json!(id.hex())), ("title", json!(title.trim())), ("type", json!("channel"))]))
        }
        "post" if !text.trim().is_empty() => {
            let profile = open_profile(global)?;
            let id = profile.find_group(&rest[0])?;
            let sent = profile.send_group_text(&id, &text, None)?;
            print_line(&ordered(&[("group_id", json!(id.hex())), ("message_id", json!(sent.message_id)), ("date", json!(sent.date))]))
        }
        "post" => bail!("channel post: expected CHANNEL TEXT"),
        other => Err(usage(format!("unknown channel command {other:?}; the channel commands are: create, post"))),
    }
}

/// `join LINK`: joins at once, or asks (a join request).
pub(super) fn join(global: &Global, args: &[String]) -> anyhow::Result<()> {
    let [link] = args else { bail!("join: expected LINK (e2e://join/...)") };
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

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn admin_subcommands_parse_their_arguments() {
        let a = strings(&["Team", "@bot", "post,delete"]);
        assert_eq!(admin_args("promote", &a).unwrap(), Admin::Promote { group: "Team", user: "@bot", rights: "post,delete" });
        assert!(admin_args("promote", &strings(&["Team", "@bot", "post,fly"])).is_err());
        let a = strings(&["Team", "@bob", "--until", "99"]);
        assert_eq!(admin_args("ban", &a).unwrap(), Admin::Ban { group: "Team", user: "@bob", until: 99 });
        let a = strings(&["Team", "--name", "n", "--limit", "3", "--expire", "7"]);
        let o = LinkOptions { name: "n".into(), expire_date: 7, member_limit: 3, ..Default::default() };
        assert_eq!(admin_args("link", &a).unwrap(), Admin::Link { group: "Team", options: o });
        let a = strings(&["Team", "--request"]);
        assert!(matches!(admin_args("link", &a).unwrap(), Admin::Link { options, .. } if options.creates_join_request));
        assert!(admin_args("link", &strings(&["Team", "--bogus"])).is_err());
        assert!(admin_args("delete", &strings(&["Team", "x"])).is_err());
        assert_eq!(admin_args("decline", &strings(&["T", "@u"])).unwrap(), Admin::Decide { group: "T", user: "@u", approve: false });
    }
}
