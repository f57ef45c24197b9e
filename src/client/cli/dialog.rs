//! The private-dialog commands of `e2e-chat`: `register`, `send`, `edit`, `press`, `react`,
//! `inline`, `choose`, `listen`, `commands` and `chat`.

use std::time::{Duration, Instant};

use serde_json::json;

use super::json::{incoming_json, menu_lines, sent_json};
use crate::cli::{Args, CliError, Context};
use crate::client::chat;
use crate::client::cli_common::{edit_args, message_id_arg, open_profile, ordered, press_args, print_line, text_args, timeout_arg, usage, Global};
use crate::client::message::{Incoming, SentPress};
use crate::client::profile::Profile;

pub(super) fn register(global: &Global, a: &Args) -> Result<(), CliError> {
    let username = match a.words[..] {
        [username] => username,
        [] => return Err(usage("register: USERNAME missing".into())),
        [_, extra, ..] => {
            return Err(usage(format!("register: unexpected argument {extra:?} (quote a display name with spaces: --name \"A B\")")))
        }
    };
    let name = a.value("--name").unwrap_or("");
    let server = global.server.as_deref().ok_or_else(|| usage("register needs --server URL".into()))?;
    let profile = Profile::register(server, &global.profile, username, name)
        .with_context(|| format!("register @{}", username.trim_start_matches('@')))?;
    print_line(&ordered(&[
        ("user_id", json!(profile.user_id())),
        ("username", json!(profile.username())),
        ("device_id", json!(profile.device_id())),
    ]))
}

pub(super) fn send(global: &Global, a: &Args) -> Result<(), CliError> {
    let (peer, reply_to, text) = send_args(a)?;
    let profile = open_profile(global)?;
    let sent = profile.send_message(peer, &text, &[], reply_to)?;
    print_line(&sent_json(&sent))
}

pub(super) fn edit(global: &Global, a: &Args) -> Result<(), CliError> {
    let (peer, message_id, text) = edit_args("edit", "@PEER", a)?;
    let profile = open_profile(global)?;
    let edited = profile.edit_message(peer, message_id, &text).with_context(|| format!("edit message {message_id}"))?;
    print_line(&ordered(&[
        ("chat_id", json!(edited.chat_id)),
        ("message_id", json!(edited.message_id)),
        ("edit_date", json!(edited.edit_date)),
    ]))
}

/// `send`'s @PEER, `--reply-to` and text.
fn send_args<'a>(a: &Args<'a>) -> Result<(&'a str, Option<u64>, String), CliError> {
    text_args("send", "@PEER", a)
}

pub(super) fn press(global: &Global, a: &Args) -> Result<(), CliError> {
    let (bot, message_id, data, timeout) = press_args("press", "@BOT", a)?;
    let profile = open_profile(global)?;
    let pressed = profile.press(bot, message_id, data)?;
    print_answer(&profile, &pressed, bot, timeout)
}

/// Waits up to `timeout` for the bot's answer to a press and prints it.
pub(super) fn print_answer(profile: &Profile, pressed: &SentPress, bot: &str, timeout: Duration) -> Result<(), CliError> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(CliError::Failed(format!(
                "press: no answer from {bot} to press {} within {} s (other arrivals were processed, not printed)",
                pressed.press_id,
                timeout.as_secs_f64()
            )));
        }
        let mut answer = None;
        profile.receive_events_with(left, 1, |e| {
            if let Incoming::CallbackAnswer { chat_id, press_id, .. } = e {
                if *chat_id == pressed.sent.chat_id && *press_id == pressed.press_id {
                    answer = Some(e.clone());
                }
            }
        })?;
        if let Some(answer) = answer {
            return print_line(&incoming_json(&answer));
        }
    }
}

pub(super) fn react(global: &Global, a: &Args) -> Result<(), CliError> {
    let (peer, message_id, emoji) = match a.words[..] {
        [peer, id] => (peer, id, ""),
        [peer, id, emoji] => (peer, id, emoji),
        _ => return Err(usage("react: expected @PEER MESSAGE_ID [EMOJI]".into())),
    };
    let message_id = message_id_arg("react: MESSAGE_ID", message_id)?;
    let profile = open_profile(global)?;
    let sent = profile.react(peer, message_id, emoji)?;
    print_line(&ordered(&[("chat_id", json!(sent.chat_id)), ("message_id", json!(sent.message_id))]))
}

pub(super) fn inline(global: &Global, a: &Args) -> Result<(), CliError> {
    let Some((bot, query)) = a.words.split_first() else {
        return Err(usage("inline: @BOT missing".into()));
    };
    let query = query.join(" ");
    let timeout = timeout_arg("inline", a)?;
    let profile = open_profile(global)?;
    let session_id = profile.inline_query(bot, &query)?;
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(CliError::Failed(format!(
                "inline: no results from {bot} for session {session_id} within {} s",
                timeout.as_secs_f64()
            )));
        }
        let mut results = None;
        profile.receive_events_with(left, 1, |e| {
            if matches!(e, Incoming::InlineResults { session_id: s, .. } if *s == session_id) {
                results = Some(e.clone());
            }
        })?;
        if let Some(results) = results {
            return print_line(&incoming_json(&results));
        }
    }
}

pub(super) fn choose(global: &Global, a: &Args) -> Result<(), CliError> {
    let [bot, session, result] = a.words[..] else {
        return Err(usage("choose: expected @BOT SESSION_ID RESULT_ID".into()));
    };
    let session_id = message_id_arg("choose: SESSION_ID", session)?;
    let profile = open_profile(global)?;
    let sent = profile.choose_inline(bot, session_id, result)?;
    print_line(&sent_json(&sent))
}

pub(super) fn listen(global: &Global, a: &Args) -> Result<(), CliError> {
    if let Some(w) = a.words.first() {
        return Err(usage(format!("listen: unexpected argument {w:?}")));
    }
    let timeout = timeout_arg("listen", a)?;
    let count = match a.value("--count") {
        Some(v) => v.parse().map_err(|_| usage(format!("listen: --count {v:?} is not a whole number")))?,
        None => usize::MAX,
    };
    let profile = open_profile(global)?;
    let deadline = Instant::now() + timeout;
    let mut received = 0;
    while received < count {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        // One event per call, so a failed write stops us before more are acknowledged.
        let mut write_error = None;
        received += profile.receive_events_with(left, 1, |e| {
            if let Err(e) = print_line(&incoming_json(e)) {
                write_error = Some(e);
            }
        })?;
        if let Some(e) = write_error {
            return Err(e);
        }
    }
    Ok(())
}

pub(super) fn commands(global: &Global, a: &Args) -> Result<(), CliError> {
    let bot = match a.words[..] {
        [bot] => bot,
        [] => return Err(usage("commands: @BOT missing".into())),
        _ => return Err(usage("commands: expected exactly one @BOT".into())),
    };
    let profile = open_profile(global)?;
    let menu = profile.bot_menu(bot, a.value("--lang"))?;
    for line in menu_lines(&menu) {
        print_line(&line)?;
    }
    Ok(())
}

pub(super) fn chat(global: &Global, a: &Args) -> Result<(), CliError> {
    match a.words[..] {
        [peer] => chat::chat(&global.profile, global.server.as_deref(), peer),
        [] => Err(usage("chat: @PEER missing".into())),
        _ => Err(usage("chat: expected exactly one @PEER".into())),
    }
}

pub(super) fn web(global: &Global, a: &Args) -> Result<(), CliError> {
    let listen = a.value("--listen").unwrap_or(chat::DEFAULT_LISTEN);
    let peer = match a.words[..] {
        [] => None,
        [peer] => Some(peer),
        _ => return Err(usage("web: expected at most one @PEER".into())),
    };
    chat::web(&global.profile, global.server.as_deref(), peer, listen, a.switch("--open"))
}

#[cfg(test)]
mod tests {
    use super::super::{parse_command, run};
    use super::super::tests::strings;
    use super::*;

    #[test]
    fn send_takes_its_options_anywhere_before_the_double_dash() {
        let send = |a: &[&str]| {
            let v = strings(a);
            let parsed = parse_command("send", None, &v)?;
            send_args(&parsed).map(|(peer, reply_to, text)| (peer.to_string(), reply_to, text))
        };
        let ok = |peer: &str, reply_to: Option<u64>, text: &str| (peer.to_string(), reply_to, text.to_string());
        for a in [
            &["@bot", "hello", "--reply-to", "5"][..],
            &["@bot", "--reply-to", "5", "hello"],
            &["--reply-to=5", "@bot", "hello"],
            &["@bot", "--reply-to=4", "hello", "--reply-to", "5"],
        ] {
            assert_eq!(send(a).expect("ok"), ok("@bot", Some(5), "hello"), "{a:?}");
        }
        assert_eq!(send(&["@bot", "it", "is", "--reply-to", "2", "warm"]).expect("ok"), ok("@bot", Some(2), "it is warm"));
        assert_eq!(send(&["@bot", "plain"]).expect("ok"), ok("@bot", None, "plain"));
        // A text that starts with - (or is an option's name) goes after --.
        assert_eq!(send(&["@bot", "--", "-5", "degrees"]).expect("ok"), ok("@bot", None, "-5 degrees"));
        assert_eq!(send(&["@bot", "--reply-to", "3", "--", "--reply-to", "-"]).expect("ok"), ok("@bot", Some(3), "--reply-to -"));
        let err = send(&["@bot", "-5", "degrees"]).expect_err("an unknown option");
        assert!(matches!(err, CliError::Usage(_)) && err.to_string().contains("unknown option -5 for send"), "{err}");
        let err = send(&["@bot", "--reply-to", "x", "hi"]).expect_err("not a number");
        assert!(err.to_string().contains("not a message id"), "{err}");
        assert!(send(&["@bot", "hi", "--reply-to", "0"]).is_err(), "ids start at 1");
        assert!(send(&["@bot", "hi", "--reply-to"]).expect_err("no value").to_string().contains("--reply-to needs a value"));
        assert!(send(&["@bot", "--reply-to", "3"]).expect_err("no text").to_string().contains("no text"));
        assert!(send(&["@bot", "--"]).expect_err("no text").to_string().contains("no text"));
    }

    #[test]
    fn press_and_react_check_their_arguments_before_opening_the_profile() {
        let run_in = |args: &[&str]| {
            let mut all = strings(&["--profile", "/nonexistent/e2e"]);
            all.extend(strings(args));
            format!("{:#}", run(&all).expect_err("refused"))
        };
        assert!(run_in(&["press", "@bot", "3"]).contains("expected @BOT MESSAGE_ID CALLBACK_DATA"));
        assert!(run_in(&["press", "@bot", "x", "data"]).contains("not a message id"));
        assert!(run_in(&["press", "@bot", "3", "d", "--timeout", "-1"]).contains("zero or more seconds"));
        assert!(run_in(&["react", "@bot"]).contains("expected @PEER MESSAGE_ID [EMOJI]"));
        assert!(run_in(&["react", "@bot", "1", "a", "b"]).contains("expected @PEER MESSAGE_ID [EMOJI]"));
        assert!(run_in(&["react", "@bot", "--", "-3"]).contains("not a message id"));
        assert!(run_in(&["react", "@bot", "-3"]).contains("unknown option -3 for react"));
        assert!(run_in(&["react", "@bot", "3", "👍"]).contains("no registered profile"));
    }
}
