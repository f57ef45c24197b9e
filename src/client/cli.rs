//! The `e2e-chat` command line: its commands and their options (read by the one option parser,
//! `crate::cli::Program::parse`: options anywhere before `--`), the one-JSON-object-per-line output of
//! `register`, `send`, `press`, `react` and `listen` (and `send-location`, `send-contact` in
//! `cli_places`), and the error line on stderr. Scripts depend on this output; change it only
//! together with them.

use std::io::{self, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::{json, Value};

use super::bot_profile::BotMenu;
use super::group::GroupDetails;
use super::message::{
    role_name, Entity, GroupRef, GroupRole, Incoming, Keyboard, MediaInfo, MediaKind, ReactionType, ReceivedMessage, ReplyMarkup,
    Sender, SentPress,
};
use super::reply_keyboard::ReplyKeyboard;
use super::display;
use super::chat;
use super::profile::Profile;
use crate::cli::{Args, Opt, Until, UsageError};
use super::cli_common::{message_id_arg, open_profile, ordered, ordered_raw, print_line, usage, Global, REPLY_TO};

const USAGE: &str = "\
e2e-chat: a terminal client for people on the platform (end-to-end encrypted dialogs with bots)

Usage:
  e2e-chat [--server URL] [--profile DIR] <command> [arguments]

Options may come anywhere before --: before the command, or before, between or after its
arguments (--name VALUE or --name=VALUE). Everything after -- is an argument, so a text that
starts with - goes after it: e2e-chat send @bot -- -5 degrees. -h or --help before -- shows
the command's help.

Global options (anywhere before --):
  --server URL    platform server, e.g. http://127.0.0.1:50051 (needed for register;
                  stored in the profile, and overrides it for one run when given later)
  --profile DIR   profile directory (default: $E2E_CHAT_PROFILE, else ~/.e2e-chat)
  -h, --help      this help (COMMAND --help or help COMMAND: that command's part)
  -V, --version   the version and the compatibility_profile_id

Commands:
  register USERNAME [--name NAME]
        create the profile and a user; prints {\"user_id\":N,\"username\":\"U\",\"device_id\":D}
  send @PEER TEXT... [--reply-to MESSAGE_ID]
        send the words of TEXT joined by spaces, optionally as a reply (a TEXT that starts
        with - goes after --); prints {\"chat_id\":N,\"message_id\":M,\"date\":T}
  edit @PEER MESSAGE_ID TEXT...
        replace the text of a message you sent (only your own texts; its reply stays);
        the peer sees it edited, a bot gets edited_message; prints {\"chat_id\":N,
        \"message_id\":M,\"edit_date\":T}
  press @BOT MESSAGE_ID CALLBACK_DATA [--timeout SECONDS]
        press the button with CALLBACK_DATA under a received message and wait (default 30 s)
        for the bot's answer; prints {\"event\":\"callback_answer\",\"chat_id\":N,
        \"press_id\":P,\"text\":T,\"show_alert\":B}. What else arrives meanwhile is
        processed but not printed. No answer in time: exit status 1
  reply-button @BOT N [--location LATITUDE,LONGITUDE]
        use button N (from 1, across rows, as listen lists them) of the reply keyboard
        the bot shows: its text is sent as your message (a contact button sends your
        contact card, a location button the location given); a one-time keyboard is gone
        afterwards; prints {\"chat_id\":N,\"message_id\":M,\"date\":T,\"button\":TEXT,
        \"sent\":\"text\"|\"contact\"|\"location\"}
  start @BOT [PAYLOAD] | start LINK
        open a bot the way its link does: sends /start PAYLOAD (the deep-link form) to
        the bot; LINK is https://t.me/BOT?start=PAYLOAD or tg://resolve?domain=BOT&start=
        PAYLOAD; PAYLOAD is up to 64 of A-Z a-z 0-9 _ -; prints {\"chat_id\",
        \"message_id\",\"date\",\"text\"}
  react @PEER MESSAGE_ID [EMOJI]
        set your reaction to a message (no EMOJI: remove it);
        prints {\"chat_id\":N,\"message_id\":M} of the reaction's envelope
  inline @BOT QUERY... [--timeout SECONDS]
        type \"@BOT QUERY\" (inline mode): open a session and wait (default 30 s) for the
        bot's results; prints {\"event\":\"inline_results\",\"chat_id\":N,\"session_id\":S,
        \"results\":[{\"id\",\"title\",\"description\",\"text\"}]}. No results in time: exit 1
  choose @BOT SESSION_ID RESULT_ID
        pick a result of an inline session: its text is sent to the bot's dialog via the bot;
        prints {\"chat_id\":N,\"message_id\":M,\"date\":T} (the same again for a repeated choice)
  send-file @PEER PATH [PATH...] [--as photo|document|audio|video|voice|animation|video_note|sticker] [--caption TEXT]
        send a file (up to 50 MiB), encrypted while it streams to the platform; the kind is
        guessed from the extension without --as (images: photo, .ogg/.oga: voice,
        .mp3/.m4a: audio, .mp4: video, else document); prints {\"chat_id\":N,
        \"message_id\":M,\"date\":T}. With 2 to 10 files: an album, one message
        per file sharing a media_group_id, the caption on the first; one line each
  send-location @PEER LATITUDE LONGITUDE [--live SECONDS] [--accuracy METERS]
                [--heading DEGREES] [--reply-to MESSAGE_ID]
        share a point (decimal degrees: latitude -90..90, longitude -180..180; a negative
        one goes after --: send-location @bot -- -33.87 151.21); --live 60..86400 (or
        2147483647: until stopped) makes it a live location, --heading 1..360 is for a
        live one; prints {\"chat_id\":N,\"message_id\":M,\"date\":T}
  send-contact @PEER [--reply-to MESSAGE_ID]
        share your own contact card: your display name (else username) and user id; no
        phone number, the platform has none; prints {\"chat_id\",\"message_id\",\"date\"}
  vote @BOT MESSAGE_ID [OPTION...]
        vote in a bot's poll: OPTION is an option's number as shown, from 1 (several
        where the poll allows several answers); none retracts your vote (where the
        poll allows changing it); prints {\"chat_id\",\"message_id\"}
  download @PEER MESSAGE_ID OUT_PATH
        fetch the file of a received message, verify all of it, then write OUT_PATH
        (through OUT_PATH.part, mode 0600; nothing is written when verification fails);
        prints {\"path\":P,\"size\":N}
  listen [--timeout SECONDS] [--count N]
        print what arrives as one JSON object per line; stop after SECONDS (default 30) or
        after N objects. A message: chat_id, message_id, date, from, text, and when present
        entities, reply_to_message_id, keyboard ([[{\"text\",\"callback_data\"}]], a link
        button {\"text\",\"url\"}), reply_keyboard ({\"rows\":[[{\"text\",\"request\"}]],
        \"one_time\",\"placeholder\"}: answer with reply-button), remove_keyboard: true,
        force_reply ({\"placeholder\"}: the bot asks for an answer), forward_origin
        ({\"sender_user_id\",\"sender_username\",...,\"date\"}, or for a channel's post
        {\"channel_title\",\"channel_message_id\",\"date\"}); a file message has \"media\":{\"kind\",\"file_name\",
        \"mime_type\",\"size\"} (+ width, height, duration when known) and \"caption\"
        (+ caption_entities) instead of text; a location, venue, contact or dice message has
        \"location\":{\"latitude\",\"longitude\"} (+ horizontal_accuracy, live_period,
        heading, proximity_alert_radius, live_stopped when set), \"venue\":{\"location\",
        \"title\",\"address\"}, \"contact\":{\"phone_number\",\"first_name\"} (+ last_name,
        user_id), \"dice\":{\"emoji\",\"value\"} or \"poll\":{\"question\",\"options\":[{\"text\",
        \"voter_count\"}],\"type\",\"is_anonymous\",\"allows_multiple_answers\",\"is_closed\",
        \"total_voter_count\"} instead of text (an edited live location or a stopped poll: the
        same field in the edited event). Anything else has an \"event\" field: edited, deleted, reaction,
        chat_action, callback_answer, and for groups (each with \"group\":{\"id\",\"title\"}):
        group_message (message_id, date, from, text, ... as a message), chat_action
        (from, action), group_joined,
        group_membership (user, old_role, new_role, actor), group_edited (message_id, from,
        edit_date, text, entities, keyboard), group_commit (epoch, added,
        removed: [{\"user_id\",\"device_id\"}], removed_me)
  save-config @BotManager FILE [--state-dir DIR] [--bot @NAME] [--force]
        write the gateway config that @BotManager sent at /newbot (with the newest token
        a later /token issued) to FILE, mode 0600, with state_dir filled in (default: a
        directory state-BOTNAME beside FILE); the newest bot's, or --bot's. Then:
        bot-gateway serve FILE. Prints {\"path\",\"bot\",\"state_dir\",\"token_replaced\"}
  commands @BOT [--lang XX]
        what the bot offers in your private chat with it: first one line
        {\"bot\":\"B\",\"description\":\"...\",\"short_description\":\"...\"}, then one line
        {\"command\":\"start\",\"description\":\"...\"} per command; --lang picks the bot's
        texts in that two-letter language where it has them
  chat @PEER
        interactive dialog. On a terminal the screen is drawn and kept current: each
        message with its time, sender and formatting, buttons numbered under it
        (`[1 Yes] [2 No]`), a one-line quote of the message it replies to, edits in place,
        deletions struck through; each line you type shows at once and turns from
        \"⧗ sending\" to \"#id ✓\". Typed while the platform is unreachable, it waits in
        the profile's outbox and is sent, in order and once, when the platform is back.
        Other dialogs and groups are counted unread in the status line. Without a terminal
        it prints one line per thing: `[@sender] text (#id)`, `[you] text (#id)`, ...
        Commands: /press [ID] BUTTON (its number or callback data; no ID: the last message
        with buttons), /reply ID TEXT, /edit ID TEXT (a text of yours, shown edited),
        /react ID [EMOJI] (none: remove), /inline QUERY,
        /choose SESSION RESULT_ID, /location LAT LON (share a point), /contact (share your
        contact card), /vote ID [N...] (a poll's options by number; none retracts),
        N or /choose N (button N of the bot's reply keyboard, drawn above the status
        line), /open LINK (a bot link: /start PAYLOAD), @BOT QUERY (inline mode),
        /switch @NAME or GROUP (another conversation),
        /commands (the bot's commands and these), /quit; //x sends /x, any other /x (like
        /start) goes to the peer. /quit, Ctrl-D or end of input leaves; Ctrl-C clears the
        line. NO_COLOR turns colour off. Control characters in what arrives are shown
        escaped (\\e, \\x07, \\u{9b}), never obeyed
  group create|add|remove|send|edit|press|title|members|leave|list ...
        groups, end-to-end encrypted with MLS. GROUP is a group's id (64 hex digits, or a
        unique prefix of 8 or more) or the exact title of a group you know.
        group create TITLE...           a group with you as its owner; prints
                                        {\"group_id\":HEX,\"title\":T}
        group add GROUP @USER_OR_BOT    admit someone: a user's devices are added at once
                                        (they join when their inbox is read), a bot joins
                                        by itself (it needs the groups capability); prints
                                        {\"group_id\",\"user\":{...},\"devices_added\":N}
        group remove GROUP @USER        remove a member (owner or administrator); they can
                                        read nothing sent after; prints {\"group_id\",
                                        \"user_id\",\"leaves_removed\":B}
        group send GROUP TEXT... [--reply-to M]
                                        prints {\"group_id\",\"message_id\",\"date\"}
        group send-file GROUP PATH [--as KIND] [--caption TEXT]
                                        a file into the group (not a channel), its key
                                        inside the MLS message; prints {\"group_id\",
                                        \"message_id\",\"date\"}
        group download GROUP MESSAGE_ID OUT
                                        the file of a group message, verified whole, to
                                        OUT; prints {\"group_id\",\"message_id\",\"path\",
                                        \"size\"}
        group edit GROUP MESSAGE_ID TEXT...
                                        replace the text of your message (your post, in
                                        a channel); prints {\"group_id\",\"message_id\",
                                        \"edit_date\"}
        group press GROUP MESSAGE_ID CALLBACK_DATA [--timeout S]
                                        press a button of a bot's group message (privately
                                        to the bot); prints the bot's answer
        group title GROUP TITLE...      change the title (owner, or an administrator
                                        with can_change_info); prints {\"group_id\",\"title\"}
        group members GROUP             one line per member: {\"user_id\",\"username\",
                                        \"display_name\",\"is_bot\",\"role\"}
        group leave GROUP               leave, and forget the group on this device
        group list                      one line per group: {\"group_id\",\"title\",
                                        \"role\",\"joined\"} (joined: this device is in it)
        group promote GROUP @USER_OR_BOT RIGHTS
                                        set administrator rights: a comma-separated list of
                                        post, delete, restrict, invite, promote, change_info,
                                        manage; none demotes
        group ban GROUP @USER [--until T]
                                        remove and keep out (until unix time T)
        group unban GROUP @USER         let a banned user join again
        group restrict GROUP @USER [--until T]
                                        the platform refuses their messages
        group unrestrict GROUP @USER    lift it
        group link GROUP [--name N] [--expire T] [--limit N] [--request]
                                        a new invite link (--request: users ask, an
                                        administrator approves); prints the link
        group revoke-link GROUP LINK    nobody joins by it any more
        group export-link GROUP         a new primary link
        group approve|decline GROUP @USER   a pending join request
        group delete GROUP MESSAGE_ID   delete a message for everyone (yours, or any with
                                        the delete right)
        channel create TITLE...         a channel: you post, its members read; prints
                                        {\"group_id\",\"title\",\"type\":\"channel\"}
        channel post CHANNEL TEXT...    post (owner, or an administrator with post)
        join LINK                       join by an invite link (e2e://join/...), or ask to
                                        (prints \"status\": \"joined\" or \"requested\"; once
                                        approved, this device joins when its inbox is read)
        Sending or committing may first read what the inbox holds for the group: a device
        has one inbox stream, so a listen of this profile running meanwhile may end
        (chat reconnects)

Errors go to stderr as one line and make the exit status non-zero: 2 for a usage error
(an unknown command or option, a missing, extra or malformed argument), 1 for any other
failure.
Set RUST_LOG=info (or debug) for more detail on stderr.
";

/// The program's command-line conventions (`crate::cli`).
pub const PROGRAM: crate::cli::Program = crate::cli::Program {
    name: "e2e-chat",
    help: USAGE,
    commands: &[
        "register", "send", "edit", "press", "reply-button", "start", "react", "inline", "choose", "send-file",
        "send-location", "send-contact", "vote", "download", "listen", "commands", "chat", "group", "channel", "join",
        "save-config",
    ],
};

/// Default `listen` duration.
const DEFAULT_LISTEN_TIMEOUT: Duration = Duration::from_secs(30);

/// Entry point of the `e2e-chat` program. On failure prints one line to stderr and exits 1
/// (the error never reaches `main`, whose default report spans several lines).
pub fn run_cli(args: Vec<String>) -> anyhow::Result<()> {
    // Through the chat view's sink: while chat mode draws the screen, log lines are shown in it.
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        .target(env_logger::Target::Pipe(Box::new(super::tui::logs::Sink)))
        .try_init();
    if let Err(e) = run(&args) {
        let _ = io::stdout().flush();
        let line = format!("{e:#}").replace('\n', " ");
        eprintln!("e2e-chat: {line}");
        let usage = e.downcast_ref::<crate::cli::UsageError>().is_some();
        std::process::exit(if usage { crate::cli::USAGE_EXIT } else { 1 });
    }
    Ok(())
}


/// The global options: before the command or anywhere among its arguments (before `--`).
const GLOBAL_OPTIONS: [Opt; 2] = [Opt::value("--server"), Opt::value("--profile")];
const TIMEOUT: Opt = Opt::value("--timeout");

/// The options of each command (besides the global ones); for `group` and `channel` those of
/// the subcommand, which is checked here (an unknown one is a usage error naming them all).
fn command_options(command: &str, sub: Option<&str>) -> Result<&'static [Opt], UsageError> {
    const NONE: &[Opt] = &[];
    const REGISTER: &[Opt] = &[Opt::value("--name")];
    const SEND_FILE: &[Opt] = &[Opt::value("--as"), Opt::value("--caption")];
    const LISTEN: &[Opt] = &[TIMEOUT, Opt::value("--count")];
    const COMMANDS: &[Opt] = &[Opt::value("--lang")];
    Ok(match (command, sub) {
        ("register", _) => REGISTER,
        ("send", _) | ("group", Some("send")) => &[REPLY_TO],
        ("press" | "inline", _) | ("group", Some("press")) => &[TIMEOUT],
        ("send-file", _) => SEND_FILE,
        ("send-location", _) => super::cli_places::LOCATION_OPTIONS,
        ("send-contact", _) => &[REPLY_TO],
        ("listen", _) => LISTEN,
        ("commands", _) => COMMANDS,
        ("save-config", _) => super::cli_config::OPTIONS,
        ("reply-button", _) => super::cli_bot::REPLY_BUTTON_OPTIONS,
        ("group", Some(s)) if super::cli_admin::GROUP_ADMIN_SUBCOMMANDS.contains(&s) => super::cli_admin::admin_options(s),
        ("group", Some("send-file")) => SEND_FILE,
        ("group", Some("create" | "add" | "remove" | "edit" | "title" | "members" | "leave" | "list" | "download")) => NONE,
        ("group", None) => return Err(UsageError(format!("group: which one? the group commands are: {GROUP_SUBCOMMANDS}"))),
        ("group", Some(other)) => return Err(unknown_group_command(other)),
        ("channel", Some("create" | "post")) => NONE,
        ("channel", None) => return Err(UsageError(format!("channel: which one? the channel commands are: {CHANNEL_SUBCOMMANDS}"))),
        ("channel", Some(other)) => {
            return Err(UsageError(format!("unknown channel command {other:?}; the channel commands are: {CHANNEL_SUBCOMMANDS}")))
        }
        _ => NONE,
    })
}

/// The arguments of `command` (`sub`: of its subcommand), with the global options among them.
pub(super) fn parse_command<'a>(command: &str, sub: Option<&str>, args: &'a [String]) -> Result<Args<'a>, UsageError> {
    let mut options = command_options(command, sub)?.to_vec();
    options.extend_from_slice(&GLOBAL_OPTIONS);
    let context = match sub {
        Some(sub) => format!("{command} {sub}"),
        None => command.to_string(),
    };
    Ok(PROGRAM.parse(&context, args, &options, Until::End)?.0)
}


pub(super) fn run(args: &[String]) -> anyhow::Result<()> {
    let mut top_options = GLOBAL_OPTIONS.to_vec();
    top_options.push(Opt::switch("--version").or("-V"));
    let (top, rest) = PROGRAM.parse("e2e-chat", args, &top_options, Until::FirstWord)?;
    if top.help {
        print!("{USAGE}");
        return Ok(());
    }
    if top.switch("--version") {
        println!("{}", crate::cli::version_line("e2e-chat"));
        return Ok(());
    }
    let Some((command, rest)) = rest.split_first() else {
        return Err(usage(format!(
            "no command given; the commands are: {} (see e2e-chat --help)",
            PROGRAM.commands.join(", ")
        )));
    };
    if command == "help" {
        // `help` and `help COMMAND`.
        let early: Vec<String> = std::iter::once(command.clone()).chain(rest.first().cloned()).collect();
        if let crate::cli::Early::Print(text) = PROGRAM.early(&early)? {
            print!("{text}");
        }
        return Ok(());
    }
    if !PROGRAM.commands.contains(&command.as_str()) {
        return Err(PROGRAM.unknown_command(command).into());
    }
    let mut server = top.value("--server");
    let mut profile = top.value("--profile");
    // `group` and `channel`: the subcommand is their first word (global options may come
    // before it too).
    let (sub, rest) = match command.as_str() {
        "group" | "channel" => {
            let (before, rest) = PROGRAM.parse(command, rest, &GLOBAL_OPTIONS, Until::FirstWord)?;
            if before.help {
                print!("{}", PROGRAM.command_help(command).unwrap_or_else(|| USAGE.to_string()));
                return Ok(());
            }
            server = before.value("--server").or(server);
            profile = before.value("--profile").or(profile);
            match rest.split_first() {
                Some((sub, rest)) => (Some(sub.as_str()), rest),
                None => (None, rest),
            }
        }
        _ => (None, rest),
    };
    let a = parse_command(command, sub, rest)?;
    // `-h`/`--help` anywhere before `--`: a text that is "--help" itself goes after `--`.
    if a.help {
        print!("{}", PROGRAM.command_help(command).unwrap_or_else(|| USAGE.to_string()));
        return Ok(());
    }
    let global = Global {
        server: a.value("--server").or(server).map(str::to_string),
        profile: a.value("--profile").or(profile).map(PathBuf::from).unwrap_or_else(default_profile_dir),
    };
    let sub = sub.unwrap_or_default();
    match command.as_str() {
        "register" => register(&global, &a),
        "send" => send(&global, &a),
        "edit" => edit(&global, &a),
        "listen" => listen(&global, &a),
        "commands" => commands(&global, &a),
        "press" => press(&global, &a),
        "reply-button" => super::cli_bot::reply_button(&global, &a),
        "start" => super::cli_bot::start(&global, &a),
        "react" => react(&global, &a),
        "inline" => inline(&global, &a),
        "choose" => choose(&global, &a),
        "send-file" => send_file(&global, &a),
        "send-location" => super::cli_places::send_location(&global, &a),
        "send-contact" => super::cli_places::send_contact(&global, &a),
        "vote" => super::cli_places::vote(&global, &a),
        "download" => download(&global, &a),
        "chat" => chat(&global, &a),
        "save-config" => super::cli_config::save_config(&global, &a),
        "group" => group(&global, sub, &a),
        "channel" => super::cli_admin::channel(&global, sub, &a),
        "join" => super::cli_admin::join(&global, &a),
        other => Err(PROGRAM.unknown_command(other).into()),
    }
}

fn default_profile_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("E2E_CHAT_PROFILE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
    home.join(".e2e-chat")
}


fn register(global: &Global, a: &Args) -> anyhow::Result<()> {
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

fn send(global: &Global, a: &Args) -> anyhow::Result<()> {
    let (peer, reply_to, text) = send_args(a)?;
    let profile = open_profile(global)?;
    let sent = profile.send_message(peer, &text, &[], reply_to)?;
    print_line(&ordered(&[
        ("chat_id", json!(sent.chat_id)),
        ("message_id", json!(sent.message_id)),
        ("date", json!(sent.date)),
    ]))
}

fn edit(global: &Global, a: &Args) -> anyhow::Result<()> {
    let (peer, message_id, text) = edit_args("edit", "@PEER", a)?;
    let profile = open_profile(global)?;
    let edited = profile.edit_message(peer, message_id, &text).with_context(|| format!("edit message {message_id}"))?;
    print_line(&ordered(&[
        ("chat_id", json!(edited.chat_id)),
        ("message_id", json!(edited.message_id)),
        ("edit_date", json!(edited.edit_date)),
    ]))
}

/// `COMMAND TARGET MESSAGE_ID TEXT...` of an edit.
fn edit_args<'a>(command: &str, target: &str, a: &Args<'a>) -> anyhow::Result<(&'a str, u64, String)> {
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
fn send_args<'a>(a: &Args<'a>) -> anyhow::Result<(&'a str, Option<u64>, String)> {
    text_args("send", "@PEER", a)
}

/// `COMMAND TARGET TEXT... [--reply-to M]`: the first word is the target, the others the text.
fn text_args<'a>(command: &str, target: &str, a: &Args<'a>) -> anyhow::Result<(&'a str, Option<u64>, String)> {
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
fn press_args<'a>(command: &str, where_: &str, a: &Args<'a>) -> anyhow::Result<(&'a str, u64, &'a str, Duration)> {
    let [target, message_id, data] = a.words[..] else {
        return Err(usage(format!("{command}: expected {where_} MESSAGE_ID CALLBACK_DATA")));
    };
    let message_id = message_id_arg(&format!("{command}: MESSAGE_ID"), message_id)?;
    Ok((target, message_id, data, timeout_arg(command, a)?))
}

fn press(global: &Global, a: &Args) -> anyhow::Result<()> {
    let (bot, message_id, data, timeout) = press_args("press", "@BOT", a)?;
    let profile = open_profile(global)?;
    let pressed = profile.press(bot, message_id, data)?;
    print_answer(&profile, &pressed, bot, timeout)
}

/// Waits up to `timeout` for the bot's answer to a press and prints it.
fn print_answer(profile: &Profile, pressed: &SentPress, bot: &str, timeout: Duration) -> anyhow::Result<()> {
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

fn react(global: &Global, a: &Args) -> anyhow::Result<()> {
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

fn inline(global: &Global, a: &Args) -> anyhow::Result<()> {
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

fn choose(global: &Global, a: &Args) -> anyhow::Result<()> {
    let [bot, session, result] = a.words[..] else {
        return Err(usage("choose: expected @BOT SESSION_ID RESULT_ID".into()));
    };
    let session_id = message_id_arg("choose: SESSION_ID", session)?;
    let profile = open_profile(global)?;
    let sent = profile.choose_inline(bot, session_id, result)?;
    print_line(&ordered(&[
        ("chat_id", json!(sent.chat_id)),
        ("message_id", json!(sent.message_id)),
        ("date", json!(sent.date)),
    ]))
}

fn send_file(global: &Global, a: &Args) -> anyhow::Result<()> {
    let a = send_file_args(a)?;
    let profile = open_profile(global)?;
    let sent = match &a.paths[..] {
        [path] => vec![profile.send_file(&a.peer, path, a.kind, &a.caption).with_context(|| format!("send-file {} to {}", path.display(), a.peer))?],
        paths => profile.send_album(&a.peer, paths, a.kind, &a.caption).with_context(|| format!("send-file: an album of {} files to {}", paths.len(), a.peer))?,
    };
    for sent in sent {
        print_line(&ordered(&[
            ("chat_id", json!(sent.chat_id)),
            ("message_id", json!(sent.message_id)),
            ("date", json!(sent.date)),
        ]))?;
    }
    Ok(())
}

/// What `send-file` was asked to send.
#[derive(Debug, PartialEq, Eq)]
struct SendFileArgs {
    peer: String,
    /// One file, or 2 to 10: an album.
    paths: Vec<PathBuf>,
    /// `None`: guessed from each file's name.
    kind: Option<MediaKind>,
    caption: String,
}

/// `send-file @PEER PATH [PATH...] [--as KIND] [--caption TEXT]`.
fn send_file_args(a: &Args) -> anyhow::Result<SendFileArgs> {
    let kind = match a.value("--as") {
        Some(v) => Some(MediaKind::from_name(v).ok_or_else(|| {
            let names: Vec<&str> = MediaKind::ALL.iter().map(|k| k.name()).collect();
            usage(format!("send-file: --as {v:?} is not one of {}", names.join(", ")))
        })?),
        None => None,
    };
    let [peer, paths @ ..] = &a.words[..] else {
        return Err(usage(format!("send-file: expected @PEER PATH [PATH...] {SEND_FILE_OPTIONS}")));
    };
    if paths.is_empty() || paths.len() > super::media::ALBUM_MAX {
        return Err(usage(format!(
            "send-file: expected @PEER and 1 file, or 2 to {} files for an album {SEND_FILE_OPTIONS}",
            super::media::ALBUM_MAX
        )));
    }
    let caption = a.value("--caption").unwrap_or("").to_string();
    Ok(SendFileArgs { peer: peer.to_string(), paths: paths.iter().map(PathBuf::from).collect(), kind, caption })
}

const SEND_FILE_OPTIONS: &str = "[--as photo|document|audio|video|voice|animation|video_note|sticker] [--caption TEXT]";

fn download(global: &Global, a: &Args) -> anyhow::Result<()> {
    let (peer, message_id, out) = download_args(a)?;
    let profile = open_profile(global)?;
    let size = profile.download(peer, message_id, &out)?;
    print_line(&ordered(&[("path", json!(out.display().to_string())), ("size", json!(size))]))
}

/// `download @PEER MESSAGE_ID OUT_PATH`.
fn download_args<'a>(a: &Args<'a>) -> anyhow::Result<(&'a str, u64, PathBuf)> {
    let [peer, id, out] = a.words[..] else {
        return Err(usage("download: expected @PEER MESSAGE_ID OUT_PATH".into()));
    };
    let message_id = message_id_arg("download: MESSAGE_ID", id)?;
    if out.is_empty() {
        return Err(usage("download: OUT_PATH is empty".into()));
    }
    Ok((peer, message_id, PathBuf::from(out)))
}


/// The `--timeout` of `command`: zero or more seconds, 30 when not given.
fn timeout_arg(command: &str, a: &Args) -> anyhow::Result<Duration> {
    let Some(v) = a.value("--timeout") else {
        return Ok(DEFAULT_LISTEN_TIMEOUT);
    };
    let secs: f64 = v.parse().map_err(|_| usage(format!("{command}: --timeout {v:?} is not a number of seconds")))?;
    if !(secs.is_finite() && secs >= 0.0) {
        return Err(usage(format!("{command}: --timeout must be zero or more seconds")));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn listen(global: &Global, a: &Args) -> anyhow::Result<()> {
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

fn commands(global: &Global, a: &Args) -> anyhow::Result<()> {
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

/// The `commands` output: the bot line, then a line per command.
fn menu_lines(menu: &BotMenu) -> Vec<String> {
    let mut lines = vec![ordered(&[
        ("bot", json!(menu.bot)),
        ("description", json!(menu.description)),
        ("short_description", json!(menu.short_description)),
    ])];
    lines.extend(
        menu.commands
            .iter()
            .map(|c| ordered(&[("command", json!(c.command)), ("description", json!(c.description))])),
    );
    lines
}

fn chat(global: &Global, a: &Args) -> anyhow::Result<()> {
    match a.words[..] {
        [peer] => chat::chat(&global.profile, global.server.as_deref(), peer),
        [] => Err(usage("chat: @PEER missing".into())),
        _ => Err(usage("chat: expected exactly one @PEER".into())),
    }
}

/// The `group` subcommands. Arguments are checked before the profile is opened.
fn group(global: &Global, sub: &str, a: &Args) -> anyhow::Result<()> {
    if super::cli_admin::GROUP_ADMIN_SUBCOMMANDS.contains(&sub) {
        return super::cli_admin::group_admin(global, sub, a);
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
            print_line(&ordered(&[
                ("group_id", json!(id.hex())),
                ("message_id", json!(sent.message_id)),
                ("date", json!(sent.date)),
            ]))
        }
        GroupCommand::SendFile { group, file } => {
            let id = find(group)?;
            let path = &file.paths[0];
            let sent = profile
                .send_group_file(&id, path, file.kind, &file.caption)
                .with_context(|| format!("group send-file {}", path.display()))?;
            print_line(&ordered(&[
                ("group_id", json!(id.hex())),
                ("message_id", json!(sent.message_id)),
                ("date", json!(sent.date)),
            ]))
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
    Download { group: &'a str, message_id: u64, out: PathBuf },
}

const GROUP_SUBCOMMANDS: &str = "create, add, remove, send, send-file, download, edit, press, title, members, leave, list, promote, ban, unban, restrict, unrestrict, link, revoke-link, export-link, approve, decline, delete";
const CHANNEL_SUBCOMMANDS: &str = "create, post";

fn unknown_group_command(other: &str) -> UsageError {
    UsageError(format!("unknown group command {other:?}; the group commands are: {GROUP_SUBCOMMANDS}"))
}

/// `group SUB ...` but the administering subcommands (`cli_admin.rs`).
fn group_args<'a>(sub: &str, a: &Args<'a>) -> anyhow::Result<GroupCommand<'a>> {
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

/// The `group members` lines: one per user with a role.
fn member_lines(g: &GroupDetails) -> Vec<String> {
    g.members
        .iter()
        .map(|m| {
            ordered(&[
                ("user_id", json!(m.user.user_id)),
                ("username", json!(m.user.username)),
                ("display_name", json!(m.user.display_name)),
                ("is_bot", json!(m.user.is_bot)),
                ("role", json!(role_name(m.role))),
            ])
        })
        .collect()
}

/// The `listen` line of one message. serde_json escapes C0 controls; `json_for_terminal` adds
/// DEL, C1 and bidi controls, so the line is as safe on a terminal as in a pipe.
pub(super) fn message_json(m: &ReceivedMessage) -> String {
    display::json_for_terminal(&message_json_raw(m))
}

fn message_json_raw(m: &ReceivedMessage) -> String {
    let mut fields = vec![("chat_id", json!(m.chat_id).to_string())];
    fields.extend(message_fields(m));
    ordered_raw(&fields)
}

/// A message's fields after its chat: ids, sender, text or file, reply, keyboard, forward, via.
fn message_fields(m: &ReceivedMessage) -> Vec<(&'static str, String)> {
    let from = sender_json(&m.sender);
    let mut fields = vec![
        ("message_id", json!(m.message_id).to_string()),
        ("date", json!(m.date).to_string()),
        ("from", from),
    ];
    match &m.media {
        // As the Bot API shows a file message: the file and a caption, no text.
        Some(media) => {
            fields.push(("media", media_json(media)));
            fields.push(("caption", json!(media.caption).to_string()));
            if !media.media_group_id.is_empty() {
                fields.push(("media_group_id", json!(media.media_group_id).to_string()));
            }
            if !media.caption_entities.is_empty() {
                fields.push(("caption_entities", Value::Array(media.caption_entities.iter().map(entity_json).collect()).to_string()));
            }
        }
        // As the Bot API shows them: the item under its own name, no text.
        None if m.shared.is_some() => fields.push(super::cli_places::shared_field(m.shared.as_ref().expect("is some"))),
        None => {
            fields.push(("text", json!(m.text).to_string()));
            if !m.entities.is_empty() {
                fields.push(("entities", Value::Array(m.entities.iter().map(entity_json).collect()).to_string()));
            }
        }
    }
    if let Some(r) = m.reply_to_message_id {
        fields.push(("reply_to_message_id", json!(r).to_string()));
    }
    if !m.keyboard.is_empty() {
        fields.push(("keyboard", keyboard_json(&m.keyboard)));
    }
    match &m.reply_markup {
        Some(ReplyMarkup::Keyboard(k)) => fields.push(("reply_keyboard", reply_keyboard_json(k))),
        Some(ReplyMarkup::Remove) => fields.push(("remove_keyboard", "true".to_string())),
        Some(ReplyMarkup::ForceReply { placeholder }) => {
            fields.push(("force_reply", ordered(&[("placeholder", json!(placeholder))])))
        }
        None => {}
    }
    if let Some(o) = &m.forward_origin {
        let origin = match &o.channel {
            Some((title, message_id)) => ordered(&[
                ("channel_title", json!(title)),
                ("channel_message_id", json!(message_id)),
                ("date", json!(o.date)),
            ]),
            None => ordered(&[
                ("sender_user_id", json!(o.sender_user_id)),
                ("sender_username", json!(o.sender_username)),
                ("sender_first_name", json!(o.sender_first_name)),
                ("sender_is_bot", json!(o.sender_is_bot)),
                ("date", json!(o.date)),
            ]),
        };
        fields.push(("forward_origin", origin));
    }
    if let Some(bot) = m.via_bot_user_id {
        fields.push(("via_bot_user_id", json!(bot).to_string()));
    }
    fields
}

/// `{"id":HEX,"title":T}`.
fn group_json(g: &GroupRef) -> String {
    ordered(&[("id", json!(g.id.hex())), ("title", json!(g.title))])
}

/// `[{"user_id","device_id"}]`.
fn devices_json(devices: &[(u64, u32)]) -> String {
    let all: Vec<String> = devices.iter().map(|(u, d)| ordered(&[("user_id", json!(u)), ("device_id", json!(d))])).collect();
    format!("[{}]", all.join(","))
}

/// The `listen` line of anything that arrives: a message as `message_json` (no "event"
/// field, the shape scripts already parse), everything else with an "event" field first.
pub(super) fn incoming_json(e: &Incoming) -> String {
    let event = |name: &str| ("event", json!(name).to_string());
    let num = |v: u64| json!(v).to_string();
    let fields = match e {
        Incoming::Message(m) => return message_json(m),
        Incoming::GroupMessage { group, message } => {
            let name = if group.channel { "channel_post" } else { "group_message" };
            let mut fields = vec![event(name), ("group", group_json(group))];
            fields.extend(message_fields(message));
            fields
        }
        Incoming::GroupJoined { group } => vec![event("group_joined"), ("group", group_json(group))],
        Incoming::GroupCommit { group, added, removed, removed_me, epoch } => vec![
            event("group_commit"),
            ("group", group_json(group)),
            ("epoch", num(*epoch)),
            ("added", devices_json(added)),
            ("removed", devices_json(removed)),
            ("removed_me", json!(removed_me).to_string()),
        ],
        Incoming::GroupMembership { group, user, old, new, actor, invite_link } => {
            let mut fields = vec![
                event("group_membership"),
                ("group", group_json(group)),
                ("user", sender_json(user)),
                ("old_role", json!(role_name(*old)).to_string()),
                ("new_role", json!(role_name(*new)).to_string()),
                ("actor", sender_json(actor)),
            ];
            if !invite_link.is_empty() {
                fields.push(("invite_link", json!(invite_link).to_string()));
            }
            fields
        }
        Incoming::JoinRequest { group, user, invite_link } => vec![
            event("join_request"),
            ("group", group_json(group)),
            ("user", sender_json(user)),
            ("invite_link", json!(invite_link).to_string()),
        ],
        Incoming::JoinDeclined { group, by } => {
            vec![event("join_request_declined"), ("group", group_json(group)), ("by", sender_json(by))]
        }
        Incoming::GroupDeleted { group, message_id, actor } => vec![
            event("group_message_deleted"),
            ("group", group_json(group)),
            ("message_id", num(*message_id)),
            ("actor", sender_json(actor)),
        ],
        Incoming::GroupTitle { group, actor } => {
            vec![event("group_title"), ("group", group_json(group)), ("actor", sender_json(actor))]
        }
        Incoming::GroupEdited { group, message_id, from, edit_date, text, entities, keyboard, shared } => {
            let mut fields = vec![event("group_edited"), ("group", group_json(group)), ("message_id", num(*message_id)), ("from", sender_json(from))];
            fields.extend(edited_fields(*edit_date, text, entities, keyboard, shared.as_ref()));
            fields
        }
        Incoming::Edited { chat_id, message_id, edit_date, text, entities, keyboard, shared } => {
            let mut fields = vec![event("edited"), ("chat_id", num(*chat_id)), ("message_id", num(*message_id))];
            fields.extend(edited_fields(*edit_date, text, entities, keyboard, shared.as_ref()));
            fields
        }
        Incoming::Deleted { chat_id, message_id } => {
            vec![event("deleted"), ("chat_id", num(*chat_id)), ("message_id", num(*message_id))]
        }
        Incoming::Reaction { chat_id, message_id, from, reactions } => vec![
            event("reaction"),
            ("chat_id", num(*chat_id)),
            ("message_id", num(*message_id)),
            ("from", sender_json(from)),
            ("reactions", Value::Array(reactions.iter().map(reaction_json).collect()).to_string()),
        ],
        Incoming::ChatAction { chat_id, from, action } => vec![
            event("chat_action"),
            ("chat_id", num(*chat_id)),
            ("from", sender_json(from)),
            ("action", json!(action).to_string()),
        ],
        // The same event, scoped to its group like every group event.
        Incoming::GroupChatAction { group, from, action } => vec![
            event("chat_action"),
            ("group", group_json(group)),
            ("from", sender_json(from)),
            ("action", json!(action).to_string()),
        ],
        Incoming::CallbackAnswer { chat_id, press_id, text, show_alert, url } => {
            let mut fields = vec![
                event("callback_answer"),
                ("chat_id", num(*chat_id)),
                ("press_id", json!(press_id).to_string()),
                ("text", json!(text).to_string()),
                ("show_alert", json!(show_alert).to_string()),
            ];
            if !url.is_empty() {
                fields.push(("url", json!(url).to_string()));
            }
            fields
        }
        Incoming::InlineResults { chat_id, session_id, results, button } => {
            let mut fields = vec![event("inline_results"), ("chat_id", num(*chat_id)), ("session_id", num(*session_id))];
            if let Some(b) = button {
                fields.push(("button", json!({"text": b.text, "start_parameter": b.start_parameter}).to_string()));
            }
            fields.push((
                "results",
                Value::Array(
                    results
                        .iter()
                        .map(|r| {
                            let mut v = json!({"id": r.id, "type": r.kind, "title": r.title, "description": r.description, "text": r.text});
                            if !r.entities.is_empty() {
                                v["entities"] = Value::Array(r.entities.iter().map(entity_json).collect());
                            }
                            if let Some(m) = &r.media {
                                v["media"] = serde_json::from_str(&media_json(m)).unwrap_or(Value::Null);
                            }
                            if !r.keyboard.is_empty() {
                                v["keyboard"] = serde_json::from_str(&keyboard_json(&r.keyboard)).unwrap_or(Value::Null);
                            }
                            v
                        })
                        .collect(),
                )
                .to_string(),
            ));
            fields
        }
    };
    ordered_raw(&fields)
}

/// What an edit line says of the message now: its date, text, entities, keyboard (always
/// present: an empty one says the buttons are gone) and, for a live location that moved or
/// stopped, where it is now.
fn edited_fields(
    edit_date: i64,
    text: &str,
    entities: &[Entity],
    keyboard: &Keyboard,
    shared: Option<&super::places::Shared>,
) -> Vec<(&'static str, String)> {
    let mut fields = vec![
        ("edit_date", json!(edit_date).to_string()),
        ("text", json!(text).to_string()),
        ("entities", Value::Array(entities.iter().map(entity_json).collect()).to_string()),
        ("keyboard", keyboard_json(keyboard)),
    ];
    fields.extend(shared.map(super::cli_places::shared_field));
    fields
}

/// `{"kind","file_name","mime_type","size"}`, then width, height and duration where known.
fn media_json(m: &MediaInfo) -> String {
    let mut fields = vec![
        ("kind", json!(m.kind.name())),
        ("file_name", json!(m.file_name)),
        ("mime_type", json!(m.mime_type)),
        ("size", json!(m.size)),
    ];
    for (name, v) in [("width", m.width), ("height", m.height), ("duration", m.duration)] {
        if v != 0 {
            fields.push((name, json!(v)));
        }
    }
    ordered(&fields)
}

fn sender_json(s: &Sender) -> String {
    ordered(&[
        ("user_id", json!(s.user_id)),
        ("username", json!(s.username)),
        ("display_name", json!(s.display_name)),
        ("is_bot", json!(s.is_bot)),
    ])
}

/// Rows of `{"text", "callback_data"}` objects (a link button: `{"text", "url"}`).
fn keyboard_json(k: &Keyboard) -> String {
    rows_json(k, |b| match b.url.is_empty() {
        true => ordered(&[("text", json!(b.text)), ("callback_data", json!(b.callback_data))]),
        false => ordered(&[("text", json!(b.text)), ("url", json!(b.url))]),
    })
}

/// `{"rows":[[{"text","request"}]],"one_time","placeholder"}`; request is text, contact or
/// location.
fn reply_keyboard_json(k: &ReplyKeyboard) -> String {
    let rows = rows_json(&k.rows, |b| ordered(&[("text", json!(b.text)), ("request", json!(b.request.name()))]));
    ordered_raw(&[
        ("rows", rows),
        ("one_time", json!(k.one_time).to_string()),
        ("placeholder", json!(k.placeholder).to_string()),
    ])
}

fn rows_json<B>(rows: &[Vec<B>], button: impl Fn(&B) -> String) -> String {
    let rows: Vec<String> = rows.iter().map(|row| format!("[{}]", row.iter().map(&button).collect::<Vec<_>>().join(","))).collect();
    format!("[{}]", rows.join(","))
}

/// A reaction as the Bot API's ReactionType object.
fn reaction_json(r: &ReactionType) -> Value {
    match r {
        ReactionType::Emoji(e) => json!({"type": "emoji", "emoji": e}),
        ReactionType::CustomEmoji(id) => json!({"type": "custom_emoji", "custom_emoji_id": id}),
        ReactionType::Paid => json!({"type": "paid"}),
    }
}

fn entity_json(e: &Entity) -> Value {
    let mut v = json!({"type": e.kind, "offset": e.offset, "length": e.length});
    if let Some(url) = &e.url {
        v["url"] = json!(url);
    }
    if let Some(language) = &e.language {
        v["language"] = json!(language);
    }
    v
}




#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::message::{Button, ForwardOrigin};

    #[test]
    fn message_line_has_the_contract_fields_in_order() {
        let mut m = ReceivedMessage {
            chat_id: 5,
            sender: Sender { user_id: 5, username: "echo_bot".into(), display_name: "Echo \"Bot\"".into(), is_bot: true },
            date: 1_700_000_000,
            ..ReceivedMessage::sample("echo_bot", 12, "héllo\nworld")
        };
        let line = message_json(&m);
        assert_eq!(
            line,
            r#"{"chat_id":5,"message_id":12,"date":1700000000,"from":{"user_id":5,"username":"echo_bot","display_name":"Echo \"Bot\"","is_bot":true},"text":"héllo\nworld"}"#
        );
        m.entities.push(Entity { url: Some("https://a.test".into()), ..Entity::new("text_link", 0, 5) });
        m.reply_to_message_id = Some(11);
        let v: Value = serde_json::from_str(&message_json(&m)).expect("valid JSON");
        assert_eq!(v["entities"][0]["type"], "text_link");
        assert_eq!(v["entities"][0]["url"], "https://a.test");
        assert!(v["entities"][0].get("language").is_none());
        assert_eq!(v["reply_to_message_id"], 11);
        assert_eq!(v["from"]["is_bot"], true);
    }

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn message_line_shows_keyboard_and_forward_origin() {
        let m = ReceivedMessage {
            chat_id: 5,
            sender: Sender { user_id: 5, username: "b".into(), display_name: "B".into(), is_bot: true },
            message_id: 3,
            date: 1,
            text: "t".into(),
            entities: vec![],
            reply_to_message_id: None,
            keyboard: vec![
                vec![Button { text: "Yes".into(), callback_data: "y".into(), ..Default::default() }, Button { text: "No".into(), callback_data: "n".into(), ..Default::default() }],
                vec![Button { text: "Later".into(), callback_data: "l".into(), ..Default::default() }],
            ],
            forward_origin: Some(ForwardOrigin {
                sender_user_id: 9,
                sender_username: "carol".into(),
                sender_first_name: "Carol".into(),
                sender_is_bot: false,
                date: 2,
                channel: None,
            }),
            via_bot_user_id: None,
            reply_markup: None,
            media: None,
            shared: None,
        };
        let line = incoming_json(&Incoming::Message(m));
        assert!(line.contains(r#""keyboard":[[{"text":"Yes","callback_data":"y"},{"text":"No","callback_data":"n"}],[{"text":"Later","callback_data":"l"}]]"#), "{line}");
        let v: Value = serde_json::from_str(&line).expect("valid JSON");
        assert!(v.get("event").is_none(), "messages keep the shape scripts parse");
        assert_eq!(v["forward_origin"], json!({"sender_user_id": 9, "sender_username": "carol", "sender_first_name": "Carol", "sender_is_bot": false, "date": 2}));

        // A channel's post forwarded: the channel, not a user.
        let mut m = ReceivedMessage::sample("b", 4, "t");
        m.forward_origin = Some(ForwardOrigin { date: 3, channel: Some(("Cat news".into(), 8)), ..Default::default() });
        let v: Value = serde_json::from_str(&incoming_json(&Incoming::Message(m))).expect("valid JSON");
        assert_eq!(v["forward_origin"], json!({"channel_title": "Cat news", "channel_message_id": 8, "date": 3}));
    }

    #[test]
    fn message_line_shows_link_buttons_and_the_reply_markup() {
        use crate::client::reply_keyboard::{ButtonRequest, ReplyButton};
        let mut m = ReceivedMessage::sample("b", 3, "t");
        m.keyboard = vec![vec![Button { text: "Docs".into(), url: "https://a.test/".into(), ..Default::default() }]];
        m.reply_markup = Some(ReplyMarkup::Keyboard(ReplyKeyboard {
            rows: vec![vec![
                ReplyButton { text: "Yes".into(), request: ButtonRequest::Text },
                ReplyButton { text: "Phone".into(), request: ButtonRequest::Contact },
            ]],
            one_time: true,
            resize: false,
            persistent: false,
            placeholder: "Pick".into(),
        }));
        let v: Value = serde_json::from_str(&message_json(&m)).expect("valid JSON");
        assert_eq!(v["keyboard"], json!([[{"text": "Docs", "url": "https://a.test/"}]]));
        assert_eq!(
            v["reply_keyboard"],
            json!({"rows": [[{"text": "Yes", "request": "text"}, {"text": "Phone", "request": "contact"}]], "one_time": true, "placeholder": "Pick"})
        );
        m.reply_markup = Some(ReplyMarkup::Remove);
        let v: Value = serde_json::from_str(&message_json(&m)).expect("valid JSON");
        assert_eq!((v["remove_keyboard"].as_bool(), v.get("reply_keyboard")), (Some(true), None));
        m.reply_markup = Some(ReplyMarkup::ForceReply { placeholder: "Name".into() });
        let v: Value = serde_json::from_str(&message_json(&m)).expect("valid JSON");
        assert_eq!(v["force_reply"], json!({"placeholder": "Name"}));
        let answer = Incoming::CallbackAnswer { chat_id: 5, press_id: "p".into(), text: String::new(), show_alert: false, url: "https://t.me/b?start=x".into() };
        let v: Value = serde_json::from_str(&incoming_json(&answer)).expect("valid JSON");
        assert_eq!(v["url"], "https://t.me/b?start=x");
    }

    #[test]
    fn other_events_carry_an_event_field() {
        let bot = Sender { user_id: 5, username: "b".into(), display_name: "B".into(), is_bot: true };
        let parse = |e: Incoming| -> Value { serde_json::from_str(&incoming_json(&e)).expect("valid JSON") };
        let v = parse(Incoming::Edited {
            chat_id: 5,
            message_id: 3,
            edit_date: 7,
            text: "new".into(),
            entities: vec![],
            keyboard: vec![],
            shared: None,
        });
        assert_eq!(v, json!({"event": "edited", "chat_id": 5, "message_id": 3, "edit_date": 7, "text": "new", "entities": [], "keyboard": []}));
        assert_eq!(parse(Incoming::Deleted { chat_id: 5, message_id: 3 }), json!({"event": "deleted", "chat_id": 5, "message_id": 3}));
        let v = parse(Incoming::Reaction {
            chat_id: 5,
            message_id: 3,
            from: bot.clone(),
            reactions: vec![ReactionType::Emoji("👍".into()), ReactionType::CustomEmoji("c1".into()), ReactionType::Paid],
        });
        assert_eq!(v["event"], "reaction");
        assert_eq!(v["from"]["username"], "b");
        assert_eq!(v["reactions"], json!([{"type": "emoji", "emoji": "👍"}, {"type": "custom_emoji", "custom_emoji_id": "c1"}, {"type": "paid"}]));
        let v = parse(Incoming::ChatAction { chat_id: 5, from: bot, action: "typing".into() });
        assert_eq!((v["event"].as_str(), v["action"].as_str(), v["from"]["is_bot"].as_bool()), (Some("chat_action"), Some("typing"), Some(true)));
        let line = incoming_json(&Incoming::CallbackAnswer { chat_id: 5, press_id: "ab".into(), text: "ok".into(), show_alert: false, url: String::new() });
        assert_eq!(line, r#"{"event":"callback_answer","chat_id":5,"press_id":"ab","text":"ok","show_alert":false}"#);
    }

    #[test]
    fn a_file_message_line_has_media_and_caption_instead_of_text() {
        let m = ReceivedMessage {
            chat_id: 5,
            sender: Sender { user_id: 5, username: "b".into(), display_name: "B".into(), is_bot: true },
            message_id: 4,
            date: 9,
            text: String::new(),
            entities: vec![],
            reply_to_message_id: None,
            keyboard: vec![],
            forward_origin: None,
            via_bot_user_id: None,
            reply_markup: None,
            media: Some(MediaInfo {
                kind: MediaKind::Photo,
                file_name: "report.png".into(),
                mime_type: "image/png".into(),
                size: 12_345,
                width: 640,
                height: 480,
                duration: 0,
                caption: "Q3 \u{1b}".into(),
                caption_entities: vec![Entity::new("bold", 0, 2)],
                media_group_id: String::new(),
            }),
            shared: None,
        };
        let line = incoming_json(&Incoming::Message(m.clone()));
        assert!(
            line.starts_with(r#"{"chat_id":5,"message_id":4,"date":9,"from":{"user_id":5,"username":"b","display_name":"B","is_bot":true},"media":{"kind":"photo","file_name":"report.png","mime_type":"image/png","size":12345,"width":640,"height":480},"caption":"Q3 \u001b""#),
            "{line}"
        );
        let v: Value = serde_json::from_str(&line).expect("valid JSON");
        assert!(v.get("text").is_none(), "a file message has a caption, not a text");
        assert!(v["media"].get("duration").is_none(), "unknown dimensions are left out");
        assert_eq!(v["caption_entities"], json!([{"type": "bold", "offset": 0, "length": 2}]));
        assert!(!line.contains("key") && !line.contains("file_ref"), "{line}");
    }

    #[test]
    fn send_file_and_download_parse_their_arguments() {
        let send_file = |a: &[&str]| {
            let v = strings(a);
            let parsed = parse_command("send-file", None, &v)?;
            send_file_args(&parsed)
        };
        let a = send_file(&["@bot", "r.png", "--as", "document", "--caption=hi there"]).expect("ok");
        assert_eq!(
            a,
            SendFileArgs { peer: "@bot".into(), paths: vec!["r.png".into()], kind: Some(MediaKind::Document), caption: "hi there".into() }
        );
        let a = send_file(&["--caption", "--help", "@bot", "v.ogg"]).expect("a caption may look like an option");
        assert_eq!((a.kind, a.caption.as_str()), (None, "--help"));
        let err = send_file(&["@bot", "x", "--as", "gif"]).expect_err("unknown kind");
        assert!(err.to_string().contains("photo, document, audio, video, voice, animation, video_note, sticker"), "{err}");
        assert!(send_file(&["@bot"]).expect_err("no path").to_string().contains("1 file, or 2 to 10 files"));
        let album = send_file(&["@bot", "a.png", "b.png", "--caption", "two"]).expect("an album");
        assert_eq!((album.paths.len(), album.caption.as_str()), (2, "two"));
        let eleven: Vec<String> = std::iter::once("@bot".to_string()).chain((0..11).map(|i| format!("{i}.png"))).collect();
        let eleven: Vec<&str> = eleven.iter().map(String::as_str).collect();
        assert!(send_file(&eleven).expect_err("too many").to_string().contains("2 to 10 files"));
        assert!(send_file(&["@bot", "a", "--bogus"]).expect_err("unknown").to_string().contains("--bogus"));
        assert_eq!(send_file(&["@bot", "--", "-x.png"]).expect("ok").paths, vec![PathBuf::from("-x.png")]);

        let download = |a: &[&str]| {
            let v = strings(a);
            let parsed = parse_command("download", None, &v)?;
            download_args(&parsed).map(|(peer, id, out)| (peer.to_string(), id, out))
        };
        assert_eq!(download(&["@bob", "7", "/tmp/o.png"]).expect("ok"), ("@bob".into(), 7, PathBuf::from("/tmp/o.png")));
        assert!(download(&["@bob", "0", "o"]).expect_err("ids start at 1").to_string().contains("not a message id"));
        assert!(download(&["@bob", "7"]).expect_err("no path").to_string().contains("OUT_PATH"));
        let run_in = |args: &[&str]| {
            let mut all = strings(&["--profile", "/nonexistent/e2e"]);
            all.extend(strings(args));
            format!("{:#}", run(&all).expect_err("refused"))
        };
        assert!(run_in(&["send-file", "@bot", "a", "--as", "x"]).contains("--as"));
        assert!(run_in(&["download", "@bot", "1", "out"]).contains("no registered profile"));
    }

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
        assert!(err.downcast_ref::<UsageError>().is_some() && err.to_string().contains("unknown option -5 for send"), "{err}");
        let err = send(&["@bot", "--reply-to", "x", "hi"]).expect_err("not a number");
        assert!(err.to_string().contains("not a message id"), "{err}");
        assert!(send(&["@bot", "hi", "--reply-to", "0"]).is_err(), "ids start at 1");
        assert!(send(&["@bot", "hi", "--reply-to"]).expect_err("no value").to_string().contains("--reply-to needs a value"));
        assert!(send(&["@bot", "--reply-to", "3"]).expect_err("no text").to_string().contains("no text"));
        assert!(send(&["@bot", "--"]).expect_err("no text").to_string().contains("no text"));
    }

    /// `run`'s error for `args` after `--profile /nonexistent/e2e`: (a usage error?, message).
    fn refused(args: &[&str]) -> (bool, String) {
        let mut all = strings(&["--profile", "/nonexistent/e2e"]);
        all.extend(strings(args));
        let err = run(&all).expect_err("refused");
        (err.downcast_ref::<UsageError>().is_some(), format!("{err:#}"))
    }

    #[test]
    fn every_argument_problem_is_a_usage_error_and_the_operations_own_failures_are_not() {
        for args in [
            &["send"][..],
            &["send", "@bot"],
            &["send", "@bot", "hi", "--bogus"],
            &["register"],
            &["register", "a", "b"],
            &["register", "alice"], // no --server
            &["press", "@bot", "1"],
            &["press", "@bot", "1", "d", "--timeout", "x"],
            &["react", "@bot"],
            &["react", "@bot", "x"],
            &["inline"],
            &["inline", "@bot", "q", "--timeout"],
            &["choose", "@bot", "1"],
            &["send-file", "@bot"],
            &["send-file", "@bot", "f", "--as", "gif"],
            &["download", "@bot", "1"],
            &["listen", "extra"],
            &["listen", "--count", "many"],
            &["commands"],
            &["commands", "@a", "@b"],
            &["chat"],
            &["chat", "@a", "@b"],
            &["join"],
            &["group"],
            &["group", "frob"],
            &["group", "create"],
            &["group", "add", "T"],
            &["group", "send", "T"],
            &["group", "press", "T", "1"],
            &["group", "title", "T"],
            &["group", "members"],
            &["group", "list", "x"],
            &["group", "ban", "T", "@u", "--until", "soon"],
            &["group", "promote", "T", "@u"],
            &["group", "link", "T", "--limit"],
            &["group", "link", "T", "--request=yes"],
            &["group", "delete", "T", "x"],
            &["group", "export-link"],
            &["channel"],
            &["channel", "frob"],
            &["channel", "create"],
            &["channel", "post", "C"],
        ] {
            let (usage, message) = refused(args);
            assert!(usage, "{args:?}: {message}");
        }
        // Well-formed: the failure is the operation's own (no profile here), status 1.
        for args in [
            &["send", "@bot", "hi", "--reply-to", "3"][..],
            &["send", "@bot", "--", "--help"],
            &["listen", "--timeout", "0"],
            &["group", "members", "Team"],
            &["group", "link", "T", "--request", "--limit=3"],
            &["channel", "post", "C", "hello", "--", "-world"],
            &["join", "e2e://join/x"],
        ] {
            let (usage, message) = refused(args);
            assert!(!usage && message.contains("no registered profile"), "{args:?}: {message}");
        }
    }

    #[test]
    fn global_options_may_come_after_the_command() {
        // A profile directory that cannot be made (its parent is a file): register fails
        // there, after it took the --server from wherever it came.
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("file"), "").expect("write");
        let p = dir.path().join("file").join("p").display().to_string();
        for args in [
            vec!["--profile", &p, "register", "alice", "--server", "http://127.0.0.1:9"],
            vec!["register", "alice", "--server=http://127.0.0.1:9", "--profile", &p],
            vec!["register", "--profile", &p, "--server", "http://127.0.0.1:9", "alice"],
        ] {
            let err = run(&strings(&args)).expect_err("no profile directory");
            assert!(err.downcast_ref::<UsageError>().is_none() && !format!("{err:#}").contains("--server"), "{args:?}: {err:#}");
        }
        // --profile after the command is the profile opened; the last one counts.
        let err = run(&strings(&["send", "@bot", "hi", "--profile", "/nonexistent/second"])).expect_err("no profile");
        assert!(format!("{err:#}").contains("/nonexistent/second"), "{err:#}");
        let err = run(&strings(&["--profile", "/nonexistent/first", "listen", "--profile=/nonexistent/second"])).expect_err("no profile");
        assert!(format!("{err:#}").contains("/nonexistent/second") && !format!("{err:#}").contains("/nonexistent/first"), "{err:#}");
        // Between `group` and its subcommand, too.
        let err = run(&strings(&["group", "--profile", "/nonexistent/g", "members", "Team"])).expect_err("no profile");
        assert!(format!("{err:#}").contains("/nonexistent/g"), "{err:#}");
        let err = run(&strings(&["send", "@bot", "hi", "--profile"])).expect_err("no value");
        assert!(err.downcast_ref::<UsageError>().is_some() && err.to_string().contains("--profile needs a value"), "{err}");
    }

    #[test]
    fn group_subcommands_parse_their_arguments_before_opening_the_profile() {
        let parse = |a: &[&str]| {
            let v = strings(a);
            let (sub, rest) = v.split_first().expect("a subcommand");
            parse_command("group", Some(sub), rest)
                .map_err(anyhow::Error::from)
                .and_then(|parsed| group_args(sub, &parsed).map(|c| format!("{c:?}")))
                .map_err(|e| format!("{e:#}"))
        };
        let ok = |c: GroupCommand| Ok::<String, String>(format!("{c:?}"));
        assert_eq!(parse(&["create", "Team", "Rocket"]), ok(GroupCommand::Create { title: "Team Rocket".into() }));
        assert_eq!(parse(&["add", "abcdef01", "@bob"]), ok(GroupCommand::Add { group: "abcdef01", user: "@bob" }));
        assert_eq!(parse(&["remove", "Team", "@bob"]), ok(GroupCommand::Remove { group: "Team", user: "@bob" }));
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

    #[test]
    fn group_events_carry_the_group_and_an_event_field() {
        use crate::client::message::{GroupId, GroupRef};
        let group = GroupRef { id: GroupId([0xab; 32]), title: "Team \u{1b}[2J".into(), channel: false };
        let alice = Sender { user_id: 7, username: "alice".into(), display_name: "Alice".into(), is_bot: false };
        let parse = |e: Incoming| -> Value { serde_json::from_str(&incoming_json(&e)).expect("valid JSON") };
        let message = ReceivedMessage {
            chat_id: 0,
            sender: alice.clone(),
            message_id: 3,
            date: 9,
            text: "hi".into(),
            entities: vec![],
            reply_to_message_id: Some(2),
            keyboard: vec![],
            forward_origin: None,
            via_bot_user_id: None,
            reply_markup: None,
            media: None,
            shared: None,
        };
        let line = incoming_json(&Incoming::GroupMessage { group: group.clone(), message: message.clone() });
        assert!(line.starts_with(&format!(r#"{{"event":"group_message","group":{{"id":"{}","title":"Team \u001b[2J"}},"message_id":3"#, "ab".repeat(32))), "{line}");
        let v: Value = serde_json::from_str(&line).expect("valid JSON");
        assert!(v.get("chat_id").is_none(), "a group is no dialog");
        assert_eq!((v["from"]["username"].as_str(), v["text"].as_str(), v["reply_to_message_id"].as_u64()), (Some("alice"), Some("hi"), Some(2)));
        let v = parse(Incoming::GroupMembership {
            group: group.clone(),
            user: alice.clone(),
            old: GroupRole::MEMBER,
            new: GroupRole::BANNED,
            actor: Sender { user_id: 1, username: "owner".into(), display_name: "O".into(), is_bot: false },
            invite_link: String::new(),
        });
        assert_eq!((v["event"].as_str(), v["old_role"].as_str(), v["new_role"].as_str()), (Some("group_membership"), Some("member"), Some("banned")));
        assert_eq!((v["user"]["user_id"].as_u64(), v["actor"]["username"].as_str()), (Some(7), Some("owner")));
        assert!(v.get("invite_link").is_none(), "only for joins by link");
        let v = parse(Incoming::JoinRequest { group: group.clone(), user: alice.clone(), invite_link: "e2e://join/x".into() });
        assert_eq!((v["event"].as_str(), v["invite_link"].as_str()), (Some("join_request"), Some("e2e://join/x")));
        let v = parse(Incoming::GroupDeleted { group: group.clone(), message_id: 4, actor: alice.clone() });
        assert_eq!((v["event"].as_str(), v["message_id"].as_u64()), (Some("group_message_deleted"), Some(4)));
        let post = Incoming::GroupMessage { group: GroupRef { channel: true, ..group.clone() }, message };
        assert_eq!(parse(post)["event"], "channel_post");
        let v = parse(Incoming::GroupCommit { group: group.clone(), added: vec![(7, 1)], removed: vec![], removed_me: false, epoch: 4 });
        assert_eq!(v["added"], json!([{"user_id": 7, "device_id": 1}]));
        assert_eq!((v["epoch"].as_u64(), v["removed_me"].as_bool()), (Some(4), Some(false)));
        let v = parse(Incoming::GroupChatAction { group: group.clone(), from: alice.clone(), action: "typing".into() });
        assert_eq!((v["event"].as_str(), v["action"].as_str(), v["from"]["user_id"].as_u64()), (Some("chat_action"), Some("typing"), Some(7)));
        assert_eq!(v["group"]["id"], "ab".repeat(32));
        assert!(v.get("chat_id").is_none(), "scoped to the group, not a dialog");
        assert_eq!(parse(Incoming::GroupJoined { group })["event"], "group_joined");
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

    #[test]
    fn commands_lines_start_with_the_bot_then_one_per_command() {
        let menu = BotMenu {
            bot: "echo_bot".into(),
            commands: vec![super::super::bot_profile::BotCommand { command: "start".into(), description: "Go \"now\"".into() }],
            description: "An echo".into(),
            short_description: String::new(),
        };
        assert_eq!(
            menu_lines(&menu),
            vec![
                r#"{"bot":"echo_bot","description":"An echo","short_description":""}"#.to_string(),
                r#"{"command":"start","description":"Go \"now\""}"#.to_string(),
            ]
        );
        assert!(run(&["commands".to_string()]).is_err(), "@BOT missing");
    }

    #[test]
    fn options_accept_both_spellings_and_refuse_unknown_ones() {
        let args = strings(&["--server=http://127.0.0.1:1", "--profile", "/tmp/p", "listen"]);
        let (top, rest) = PROGRAM.parse("e2e-chat", &args, &GLOBAL_OPTIONS, Until::FirstWord).expect("ok");
        assert_eq!((top.value("--server"), top.value("--profile"), rest), (Some("http://127.0.0.1:1"), Some("/tmp/p"), &args[3..]));
        assert!(run(&strings(&["--profile"])).expect_err("no value").to_string().contains("--profile needs a value"));
        for args in [&["--bogus"][..], &["frobnicate"], &["--", "listen"], &["--profile", "/tmp/p"]] {
            let err = run(&strings(args)).expect_err("refused");
            assert!(err.downcast_ref::<UsageError>().is_some(), "{args:?}: {err}");
        }
        let err = run(&["--profile".into(), "/nonexistent/e2e".into(), "send".into(), "@x".into()]).expect_err("no text");
        assert!(err.to_string().contains("no text"));
    }

    #[test]
    fn register_needs_a_server_and_open_names_missing_profile() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("p").display().to_string();
        let err = run(&["--profile".into(), p.clone(), "register".into(), "alice".into()]).expect_err("no server");
        assert!(err.to_string().contains("--server"), "{err}");
        let err = run(&["--profile".into(), p, "listen".into(), "--timeout".into(), "0".into()]).expect_err("no profile");
        assert!(format!("{err:#}").contains("no registered profile"), "{err:#}");
    }
}
