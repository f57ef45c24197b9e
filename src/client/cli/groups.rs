//! The `group` subcommands of `e2e-chat` (but the administering ones, in `admin.rs`): their
//! arguments (`group_args`, into a `GroupCommand`) and what each does and prints.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use super::admin::{group_admin, GROUP_ADMIN_SUBCOMMANDS};
use super::dialog::print_answer;
use super::files::{send_file_args, SendFileArgs};
use super::json::{group_sent_json, member_lines, sender_json};
use super::usage::{unknown_group_command, SEND_FILE_OPTIONS};
use crate::cli::{Args, CliError, Context};
use crate::client::cli_common::{edit_args, message_id_arg, open_profile, ordered, ordered_raw, press_args, print_line, text_args, usage, Global};
use crate::client::cli_places::{poll_args, POLL_WORDS};
use crate::client::message::{role_name, GroupRole};
use crate::client::places::{PollInfo, Shared};

/// The `group` subcommands. Arguments are checked before the profile is opened.
pub(super) fn group(global: &Global, sub: &str, a: &Args) -> Result<(), CliError> {
    if GROUP_ADMIN_SUBCOMMANDS.contains(&sub) {
        return group_admin(global, sub, a);
    }
    let sub = group_args(sub, a)?;
    let profile = open_profile(global)?;
    let find = |spec: &str| profile.find_group(spec);
    match sub {
        GroupCommand::Create { title } => {
            let id = profile.create_group(&title)?;
            print_line(&ordered(&[("group_id", json!(id.hex())), ("title", json!(title.trim()))]))
        }
        GroupCommand::Add { group, user } => {
            let id = find(group)?;
            let added = profile.add_to_group(&id, user).with_context(|| format!("group add {user}"))?;
            print_line(&ordered_raw(&[
                ("group_id", json!(id.hex()).to_string()),
                ("user", sender_json(&added.user)),
                ("devices_added", json!(added.devices).to_string()),
            ]))
        }
        GroupCommand::Remove { group, user } => {
            let id = find(group)?;
            let user_id = profile.lookup(user)?.user_id;
            let removed = profile.remove_from_group(&id, user).with_context(|| format!("group remove {user}"))?;
            print_line(&ordered(&[("group_id", json!(id.hex())), ("user_id", json!(user_id)), ("leaves_removed", json!(removed))]))
        }
        GroupCommand::Send { group, reply_to, text } => {
            let id = find(group)?;
            let sent = profile.send_group_text(&id, &text, reply_to)?;
            print_line(&group_sent_json(&id, sent.message_id, sent.date))
        }
        GroupCommand::SendPoll { group, poll } => {
            let id = find(group)?;
            let sent = profile.send_group_shared(&id, &Shared::Poll(poll), None)?;
            print_line(&group_sent_json(&id, sent.message_id, sent.date))
        }
        GroupCommand::SendFile { group, file } => {
            let id = find(group)?;
            let path = &file.paths[0];
            let sent = profile
                .send_group_file(&id, path, file.kind, &file.caption)
                .with_context(|| format!("group send-file {}", path.display()))?;
            print_line(&group_sent_json(&id, sent.message_id, sent.date))
        }
        GroupCommand::Download { group, message_id, out } => {
            let id = find(group)?;
            let size = profile.download_group(&id, message_id, &out)?;
            print_line(&ordered(&[
                ("group_id", json!(id.hex())),
                ("message_id", json!(message_id)),
                ("path", json!(out.display().to_string())),
                ("size", json!(size)),
            ]))
        }
        GroupCommand::Edit { group, message_id, text } => {
            let id = find(group)?;
            let edited = profile.edit_group_message(&id, message_id, &text).with_context(|| format!("group edit {message_id}"))?;
            print_line(&ordered(&[
                ("group_id", json!(id.hex())),
                ("message_id", json!(edited.message_id)),
                ("edit_date", json!(edited.edit_date)),
            ]))
        }
        GroupCommand::Press { group, message_id, data, timeout } => {
            let id = find(group)?;
            let pressed = profile.press_in_group(&id, message_id, data)?;
            print_answer(&profile, &pressed, "the bot", timeout)
        }
        GroupCommand::Title { group, title } => {
            let id = find(group)?;
            profile.set_group_title(&id, title.trim())?;
            print_line(&ordered(&[("group_id", json!(id.hex())), ("title", json!(title.trim()))]))
        }
        GroupCommand::Members { group } => {
            let id = find(group)?;
            let details = profile.group_members(&id)?;
            for line in member_lines(&details) {
                print_line(&line)?;
            }
            Ok(())
        }
        GroupCommand::Leave { group } => {
            let id = find(group)?;
            profile.leave_group(&id)?;
            print_line(&ordered(&[("group_id", json!(id.hex())), ("role", json!(role_name(GroupRole::LEFT)))]))
        }
        GroupCommand::List => {
            for g in profile.list_groups()? {
                let role = g.role_of(profile.user_id()).map(role_name).unwrap_or("none");
                let joined = profile.group_epoch(&g.id)?.is_some();
                print_line(&ordered(&[
                    ("group_id", json!(g.id.hex())),
                    ("title", json!(g.title)),
                    ("role", json!(role)),
                    ("joined", json!(joined)),
                ]))?;
            }
            Ok(())
        }
    }
}

/// One `group` subcommand with its arguments.
#[derive(Debug, PartialEq, Eq)]
enum GroupCommand<'a> {
    Create { title: String },
    Add { group: &'a str, user: &'a str },
    Remove { group: &'a str, user: &'a str },
    Send { group: &'a str, reply_to: Option<u64>, text: String },
    Edit { group: &'a str, message_id: u64, text: String },
    Members { group: &'a str },
    Leave { group: &'a str },
    List,
    Press { group: &'a str, message_id: u64, data: &'a str, timeout: Duration },
    Title { group: &'a str, title: String },
    SendFile { group: &'a str, file: SendFileArgs },
    SendPoll { group: &'a str, poll: PollInfo },
    Download { group: &'a str, message_id: u64, out: PathBuf },
}

/// `group SUB ...` but the administering subcommands (`admin.rs`).
fn group_args<'a>(sub: &str, a: &Args<'a>) -> Result<GroupCommand<'a>, CliError> {
    let words = &a.words[..];
    let expected = |what: &str| usage(format!("group {sub}: expected {what}"));
    Ok(match sub {
        "create" => {
            let title = words.join(" ");
            if title.trim().is_empty() {
                return Err(usage("group create: TITLE missing".into()));
            }
            GroupCommand::Create { title }
        }
        "add" => {
            let [group, user] = words[..] else { return Err(expected("GROUP @USER_OR_BOT")) };
            GroupCommand::Add { group, user }
        }
        "remove" => {
            let [group, user] = words[..] else { return Err(expected("GROUP @USER")) };
            GroupCommand::Remove { group, user }
        }
        "send" => {
            let (group, reply_to, text) = text_args("group send", "GROUP", a)?;
            GroupCommand::Send { group, reply_to, text }
        }
        "edit" => {
            let (group, message_id, text) = edit_args("group edit", "GROUP", a)?;
            GroupCommand::Edit { group, message_id, text }
        }
        "send-file" => {
            // The words of `send-file`, the group in the peer's place; one file at a time.
            let file = send_file_args(a).map_err(|_| expected(&format!("GROUP PATH {SEND_FILE_OPTIONS}")))?;
            if file.paths.len() != 1 {
                return Err(expected(&format!("GROUP PATH {SEND_FILE_OPTIONS}")));
            }
            let group = words[0];
            GroupCommand::SendFile { group, file }
        }
        "send-poll" => match words.split_first() {
            Some((&group, poll)) => GroupCommand::SendPoll { group, poll: poll_args("group send-poll", poll, a)? },
            None => return Err(expected(&format!("GROUP {POLL_WORDS}"))),
        },
        "download" => {
            let [group, message_id, out] = words[..] else { return Err(expected("GROUP MESSAGE_ID OUT")) };
            let message_id = message_id_arg("group download: MESSAGE_ID", message_id)?;
            GroupCommand::Download { group, message_id, out: PathBuf::from(out) }
        }
        "press" => {
            let (group, message_id, data, timeout) = press_args("group press", "GROUP", a)?;
            GroupCommand::Press { group, message_id, data, timeout }
        }
        "title" => match words.split_first() {
            Some((&group, title)) if !title.join(" ").trim().is_empty() => GroupCommand::Title { group, title: title.join(" ") },
            _ => return Err(expected("GROUP TITLE")),
        },
        "members" => {
            let [group] = words[..] else { return Err(expected("GROUP")) };
            GroupCommand::Members { group }
        }
        "leave" => {
            let [group] = words[..] else { return Err(expected("GROUP")) };
            GroupCommand::Leave { group }
        }
        "list" if words.is_empty() => GroupCommand::List,
        "list" => return Err(usage("group list: takes no arguments".into())),
        other => return Err(unknown_group_command(other).into()),
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{refused, strings};
    use super::super::usage::GROUP_SUBCOMMANDS;
    use super::super::{parse_command, run};
    use super::*;

    #[test]
    fn group_subcommands_parse_their_arguments_before_opening_the_profile() {
        let parse = |a: &[&str]| {
            let v = strings(a);
            let (sub, rest) = v.split_first().expect("a subcommand");
            parse_command("group", Some(sub), rest)
                .map_err(CliError::from)
                .and_then(|parsed| group_args(sub, &parsed).map(|c| format!("{c:?}")))
                .map_err(|e| format!("{e:#}"))
        };
        let ok = |c: GroupCommand| Ok::<String, String>(format!("{c:?}"));
        assert_eq!(parse(&["create", "Team", "Rocket"]), ok(GroupCommand::Create { title: "Team Rocket".into() }));
        assert_eq!(parse(&["add", "abcdef01", "@bob"]), ok(GroupCommand::Add { group: "abcdef01", user: "@bob" }));
        assert_eq!(parse(&["remove", "Team", "@bob"]), ok(GroupCommand::Remove { group: "Team", user: "@bob" }));
        let quiz = PollInfo {
            question: "2+2?".into(),
            options: vec![("4".into(), 0), ("5".into(), 0)],
            quiz: true,
            is_anonymous: true,
            correct_option_ids: vec![0],
            ..Default::default()
        };
        assert_eq!(parse(&["send-poll", "Team", "2+2?", "4", "5", "--quiz", "1"]), ok(GroupCommand::SendPoll { group: "Team", poll: quiz }));
        assert!(parse(&["send-poll", "Team"]).expect_err("no poll").contains("expected QUESTION OPTION OPTION"));
        assert!(parse(&["send-poll"]).expect_err("no group").contains("expected GROUP QUESTION"));
        assert_eq!(
            parse(&["send", "Team", "--reply-to", "3", "hi", "--reply-to", "4"]),
            ok(GroupCommand::Send { group: "Team", reply_to: Some(4), text: "hi".into() })
        );
        assert_eq!(
            parse(&["send", "Team", "hi", "--", "--reply-to", "4"]),
            ok(GroupCommand::Send { group: "Team", reply_to: None, text: "hi --reply-to 4".into() })
        );
        assert_eq!(
            parse(&["press", "Team", "3", "--timeout=2", "--", "-data"]),
            ok(GroupCommand::Press { group: "Team", message_id: 3, data: "-data", timeout: Duration::from_secs(2) })
        );
        assert_eq!(
            parse(&["edit", "Team", "3", "hi", "--", "-all"]),
            ok(GroupCommand::Edit { group: "Team", message_id: 3, text: "hi -all".into() })
        );
        assert!(parse(&["edit", "Team", "3"]).expect_err("no text").contains("group edit: no text"));
        assert!(parse(&["edit", "Team"]).expect_err("no id").contains("group edit: expected GROUP MESSAGE_ID TEXT"));
        assert!(parse(&["edit", "Team", "x", "hi"]).expect_err("bad id").contains("not a message id"));
        assert_eq!(parse(&["members", "Team"]), ok(GroupCommand::Members { group: "Team" }));
        assert_eq!(parse(&["leave", "Team"]), ok(GroupCommand::Leave { group: "Team" }));
        assert_eq!(parse(&["list"]), ok(GroupCommand::List));
        assert!(parse(&["create"]).expect_err("no title").contains("TITLE missing"));
        assert!(parse(&["add", "Team"]).expect_err("no user").contains("expected GROUP @USER_OR_BOT"));
        assert!(parse(&["send", "Team"]).expect_err("no text").contains("group send: no text"));
        assert!(parse(&["send", "Team", "--reply-to", "x", "hi"]).expect_err("bad id").contains("not a message id"));
        assert!(parse(&["list", "x"]).is_err());
        assert!(parse(&["send", "Team", "hi", "--timeout", "3"]).expect_err("press's").contains("unknown option --timeout for group send"));
        let (usage, err) = refused(&["group", "frob", "--bogus"]);
        assert!(usage, "an unknown group command is a usage error");
        assert!(err.contains("unknown group command \"frob\"") && err.contains(GROUP_SUBCOMMANDS), "{err}");
        assert!(refused(&["group"]).0);
        let mut all = strings(&["--profile", "/nonexistent/e2e", "group", "members", "Team"]);
        assert!(format!("{:#}", run(&all).expect_err("no profile")).contains("no registered profile"));
        all.push("extra".into());
        assert!(format!("{:#}", run(&all).expect_err("refused")).contains("expected GROUP"));
    }
}
