//! The private-dialog commands: register, send, edit, press, react, inline, choose, listen,
//! commands and chat.

use super::*;
use super::json::{edited_line, incoming_json, menu_lines, sent_line};

pub(super) fn register(global: &Global, a: &Args) -> anyhow::Result<()> {
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

pub(super) fn send(global: &Global, a: &Args) -> anyhow::Result<()> {
    let (peer, reply_to, text) = send_args(a)?;
    let profile = open_profile(global)?;
    let sent = profile.send_message(peer, &text, &[], reply_to)?;
    print_line(&sent_line(&sent))
}

pub(super) fn edit(global: &Global, a: &Args) -> anyhow::Result<()> {
    let (peer, message_id, text) = edit_args("edit", "@PEER", a)?;
    let profile = open_profile(global)?;
    let edited = profile.edit_message(peer, message_id, &text).with_context(|| format!("edit message {message_id}"))?;
    print_line(&edited_line(&edited))
}

/// `COMMAND TARGET MESSAGE_ID TEXT...` of an edit.
pub(super) fn edit_args<'a>(command: &str, target: &str, a: &Args<'a>) -> anyhow::Result<(&'a str, u64, String)> {
    let [where_, id, text @ ..] = &a.words[..] else {
        return Err(usage(format!("{command}: expected {target} MESSAGE_ID TEXT")));
    };
    let message_id = message_id_arg(&format!("{command}: MESSAGE_ID"), id)?;
    let text = text.join(" ");
    if text.trim().is_empty() {
        return Err(usage(format!("{command}: no text given (a message cannot be edited to nothing)")));
    }
    Ok((*where_, message_id, text))
}

/// `send`'s @PEER, `--reply-to` and text.
pub(super) fn send_args<'a>(a: &Args<'a>) -> anyhow::Result<(&'a str, Option<u64>, String)> {
    text_args("send", "@PEER", a)
}

/// `COMMAND TARGET TEXT... [--reply-to M]`: the first word is the target, the others the text.
pub(super) fn text_args<'a>(command: &str, target: &str, a: &Args<'a>) -> anyhow::Result<(&'a str, Option<u64>, String)> {
    let Some((peer, text)) = a.words.split_first() else {
        return Err(usage(format!("{command}: {target} missing")));
    };
    let reply_to = a.value("--reply-to").map(|v| message_id_arg(&format!("{command}: --reply-to"), v)).transpose()?;
    let text = text.join(" ");
    if text.trim().is_empty() {
        return Err(usage(format!("{command}: no text given (an empty message is not sent)")));
    }
    Ok((*peer, reply_to, text))
}

/// The arguments of a press (`press`, `group press`): WHERE MESSAGE_ID CALLBACK_DATA and an
/// optional `--timeout S` for the answer.
pub(super) fn press_args<'a>(command: &str, where_: &str, a: &Args<'a>) -> anyhow::Result<(&'a str, u64, &'a str, Duration)> {
    let [target, message_id, data] = a.words[..] else {
        return Err(usage(format!("{command}: expected {where_} MESSAGE_ID CALLBACK_DATA")));
    };
    let message_id = message_id_arg(&format!("{command}: MESSAGE_ID"), message_id)?;
    Ok((target, message_id, data, timeout_arg(command, a)?))
}

pub(super) fn press(global: &Global, a: &Args) -> anyhow::Result<()> {
    let (bot, message_id, data, timeout) = press_args("press", "@BOT", a)?;
    let profile = open_profile(global)?;
    let pressed = profile.press(bot, message_id, data)?;
    print_answer(&profile, &pressed, bot, timeout)
}

/// Waits up to `timeout` for the bot's answer to a press and prints it.
pub(super) fn print_answer(profile: &Profile, pressed: &SentPress, bot: &str, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            bail!(
                "press: no answer from {bot} to press {} within {} s (other arrivals were processed, not printed)",
                pressed.press_id,
                timeout.as_secs_f64()
            );
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

pub(super) fn react(global: &Global, a: &Args) -> anyhow::Result<()> {
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

pub(super) fn inline(global: &Global, a: &Args) -> anyhow::Result<()> {
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
            bail!("inline: no results from {bot} for session {session_id} within {} s", timeout.as_secs_f64());
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

pub(super) fn choose(global: &Global, a: &Args) -> anyhow::Result<()> {
    let [bot, session, result] = a.words[..] else {
        return Err(usage("choose: expected @BOT SESSION_ID RESULT_ID".into()));
    };
    let session_id = message_id_arg("choose: SESSION_ID", session)?;
    let profile = open_profile(global)?;
    let sent = profile.choose_inline(bot, session_id, result)?;
    print_line(&sent_line(&sent))
}

pub(super) fn listen(global: &Global, a: &Args) -> anyhow::Result<()> {
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

pub(super) fn commands(global: &Global, a: &Args) -> anyhow::Result<()> {
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

pub(super) fn chat(global: &Global, a: &Args) -> anyhow::Result<()> {
    match a.words[..] {
        [peer] => chat::chat(&global.profile, global.server.as_deref(), peer),
        [] => Err(usage("chat: @PEER missing".into())),
        _ => Err(usage("chat: expected exactly one @PEER".into())),
    }
}
