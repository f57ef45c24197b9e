//! `e2e-chat chat` as a person sees it: the real binary talking to a real platform server,
//! with a second user (driven through the client library) or a bot behind a real gateway
//! (driven here through the Bot HTTP API) on the other end. Under a pseudo
//! terminal it runs its line editor; with pipes it reads plain lines. Either way a message
//! carrying `ESC [2J`, BEL, a C1 CSI or a bidi override reaches the screen escaped, never raw.

mod support;

use std::io::{BufRead, Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use bot_gateway::client::Profile;
use serde_json::{json, Value};
use support::chat::{piped_chat, read_until, Killed, WAIT};
use support::{bin_path, free_port, Gateway, Proc, World};

/// What the other user sends: a screen clear, a bell, a C1 CSI, a bidi override, a second line.
const HOSTILE: &str = "\u{1b}[2J\u{7}boom \u{9b}31m \u{202e}gnp.exe\nline2";
/// How it must be shown.
const HOSTILE_SHOWN: &str = "[@bob] \\e[2J\\x07boom \\u{9b}31m \\u{202e}gnp.exe";

/// A platform server on a fixed loopback port, so it can be restarted where the chat expects it.
fn start_platform(data_dir: &Path, port: u16) -> Proc {
    let mut cmd = Command::new(support::platform_bin());
    cmd.args(["--listen", &format!("127.0.0.1:{port}"), "--data-dir"]).arg(data_dir);
    let (proc, mut out) = Proc::spawn("platform-server", cmd);
    let mut line = String::new();
    out.read_line(&mut line).expect("read listening line");
    assert!(line.starts_with("listening on "), "unexpected first line {line:?}; stderr: {}", proc.stderr_text());
    proc.drain_stdout(out);
    proc
}

/// Alice (whose profile directory the binary uses) and Bob (driven here), registered.
fn two_users(dir: &Path, url: &str) -> (PathBuf, Profile) {
    bot_gateway::crypto::init();
    let alice_dir = dir.join("alice");
    drop(Profile::register(url, &alice_dir, "alice", "Alice").expect("register alice"));
    let bob = Profile::register(url, dir.join("bob"), "bob", "Bob").expect("register bob");
    (alice_dir, bob)
}

/// Bob waits for `text` from Alice (bounded).
fn bob_receives(bob: &Profile, text: &str) {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        let got = bob.receive(Duration::from_secs(5), 1).expect("bob receives");
        if got.iter().any(|m| m.text == text) {
            return;
        }
    }
    panic!("bob never received {text:?}");
}

fn no_raw_controls(shown: &str) {
    assert!(!shown.contains("\u{1b}[2J"), "a raw screen clear reached the terminal: {shown:?}");
    for bad in ['\u{7}', '\u{9b}', '\u{202e}'] {
        assert!(!shown.contains(bad), "raw {bad:?} reached the terminal: {shown:?}");
    }
}

#[test]
fn piped_chat_reads_plain_lines_escapes_controls_and_reports_the_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let mut platform = start_platform(&dir.path().join("platform"), port);
    let (alice_dir, bob) = two_users(dir.path(), &url);

    let (mut chat, mut stdin, out, err) = piped_chat(&alice_dir, "@bob");
    read_until(&err, "banner", |l| l.starts_with("chatting with @bob (Bob) as @alice"));

    writeln!(stdin, "hello bob").expect("type");
    let sent = read_until(&out, "own", |l| l.starts_with("[you] "));
    let own = sent.last().expect("line");
    assert!(own.starts_with("[you] hello bob (#") && own.ends_with(')'), "{own:?}");
    bob_receives(&bob, "hello bob");

    bob.send_text("@alice", HOSTILE).expect("bob sends");
    let shown = read_until(&out, "continuation", |l| l.starts_with("  | line2"));
    let joined = shown.join("\n");
    no_raw_controls(&joined);
    assert!(shown.iter().any(|l| l == HOSTILE_SHOWN), "{shown:?}");
    let last = shown.last().expect("line");
    assert!(last.starts_with("  | line2 (#") && last.ends_with(')'), "the id follows the last line: {last:?}");

    // The platform goes away and comes back on the same port: one line each, on stderr.
    platform.kill();
    let lost = read_until(&err, "connection lost", |l| l.starts_with("connection lost: "));
    assert!(lost.last().expect("line").ends_with("; reconnecting…"), "{lost:?}");
    let _platform = start_platform(&dir.path().join("platform"), port);
    let back = read_until(&err, "connected again", |l| l.contains("connected again") || l.starts_with("connection lost"));
    assert_eq!(back.last().map(String::as_str), Some("connected again"), "one line per change, not per retry: {back:?}");

    // Still working after the reconnection.
    bob.send_text("@alice", "after").expect("bob sends again");
    read_until(&out, "message after reconnecting", |l| l.starts_with("[@bob] after (#"));

    drop(stdin); // end of input leaves
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(s) = chat.0.try_wait().expect("wait") {
            break s;
        }
        assert!(Instant::now() < deadline, "e2e-chat did not leave at end of input");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
}

/// Calls a Bot API method as the bot and returns its result.
fn bot_call(gateway: &Gateway, method: &str, params: Value) -> Value {
    let (status, body) = gateway.call(method, params);
    assert_eq!((status, &body["ok"]), (200, &json!(true)), "{method}: {body}");
    body["result"].clone()
}

/// The bot's next update of `kind` after `offset` (bounded); moves `offset` past it.
fn next_update(gateway: &Gateway, offset: &mut i64, kind: &str) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        for u in gateway.poll_until(*offset, 1) {
            *offset = u["update_id"].as_i64().expect("update_id") + 1;
            if u.get(kind).is_some() {
                return u[kind].clone();
            }
        }
        assert!(Instant::now() < deadline, "no {kind} update");
    }
}

#[test]
fn piped_chat_with_a_gateway_bot_shows_its_menu_buttons_typing_and_answers() {
    let world = World::start("chatui_bot");
    let gw = &world.gateway;
    let commands = json!([{"command": "start", "description": "Begin"}, {"command": "pick", "description": "Choose\u{1b}[2J"}]);
    bot_call(gw, "setMyCommands", json!({ "commands": commands }));
    bot_call(gw, "setMyDescription", json!({"description": "I ask questions."}));
    let alice_dir = world.user("alice").dir().to_path_buf();

    let (mut chat, mut stdin, out, err) = piped_chat(&alice_dir, "@chatui_bot");
    read_until(&err, "banner", |l| l.starts_with("chatting with bot @chatui_bot (Test Bot) as @alice"));
    read_until(&err, "help line", |l| l.starts_with("commands: /press [N] BUTTON"));

    // The bot's description and command list, once at the start, escaped.
    read_until(&out, "description", |l| l == "about @chatui_bot: I ask questions.");
    read_until(&out, "command list", |l| l == "commands of @chatui_bot:");
    let menu = read_until(&out, "last command", |l| l.starts_with("  /pick"));
    assert_eq!(menu, ["  /start — Begin", "  /pick — Choose\\e[2J"]);

    // A bot command typed is sent as text; "//" sends a literal one.
    writeln!(stdin, "/start").expect("type");
    read_until(&out, "own /start", |l| l.starts_with("[you] /start (#"));
    let mut offset = 0;
    let chat_id = next_update(gw, &mut offset, "message")["chat"]["id"].as_i64().expect("chat id");
    writeln!(stdin, "//quit").expect("type");
    read_until(&out, "own /quit", |l| l.starts_with("[you] /quit (#"));
    assert_eq!(next_update(gw, &mut offset, "message")["text"], "/quit");

    // "is typing", then a message with its buttons numbered under it.
    bot_call(gw, "sendChatAction", json!({"chat_id": chat_id, "action": "typing"}));
    read_until(&out, "typing line", |l| l == "@chatui_bot is typing…");
    let keyboard = json!({"inline_keyboard": [[{"text": "Yes", "callback_data": "yes"}, {"text": "N\u{1b}[2Jo", "callback_data": "no"}]]});
    let sent = bot_call(gw, "sendMessage", json!({"chat_id": chat_id, "text": "Sure?", "reply_markup": keyboard}));
    let menu_id = sent["message_id"].as_u64().expect("message_id");
    read_until(&out, "the question", |l| l == format!("[@chatui_bot] Sure? (#{menu_id})"));
    let buttons = read_until(&out, "its buttons", |l| l.starts_with("  [1 "));
    assert_eq!(buttons, ["  [1 Yes] [2 N\\e[2Jo]"]);

    // /press N BUTTON by number: a callback_query for the bot; its answer shows.
    writeln!(stdin, "/press {menu_id} 2").expect("type");
    read_until(&out, "the press", |l| l == format!("you pressed [2 N\\e[2Jo] under #{menu_id}"));
    let query = next_update(gw, &mut offset, "callback_query");
    assert_eq!((query["data"].as_str(), query["message"]["message_id"].as_u64()), (Some("no"), Some(menu_id)));
    bot_call(gw, "answerCallbackQuery", json!({"callback_query_id": query["id"], "text": "Noted"}));
    read_until(&out, "the answer", |l| l == "@chatui_bot answered: Noted");

    // /press BUTTON by callback data, on the last message with buttons; an alert stands out.
    writeln!(stdin, "/press yes").expect("type");
    read_until(&out, "the second press", |l| l == format!("you pressed [1 Yes] under #{menu_id}"));
    let query = next_update(gw, &mut offset, "callback_query");
    assert_eq!(query["data"], "yes");
    bot_call(gw, "answerCallbackQuery", json!({"callback_query_id": query["id"], "text": "Really?", "show_alert": true}));
    read_until(&out, "the alert", |l| l == "!!! alert from @chatui_bot: Really?");

    // A button that is not there is refused locally, on stderr.
    writeln!(stdin, "/press {menu_id} 9").expect("type");
    read_until(&err, "refusal", |l| l.starts_with("/press: message #") && l.contains("has no button \"9\""));

    // A reply, the bot's edit with new buttons, reactions both ways, the deletion.
    writeln!(stdin, "/reply {menu_id} ok then").expect("type");
    let replied = read_until(&out, "the reply", |l| l == format!("  ↪ reply to #{menu_id}"));
    let own = &replied[replied.len() - 2];
    assert!(own.starts_with("[you] ok then (#"), "{replied:?}");
    let reply = next_update(gw, &mut offset, "message");
    assert_eq!((reply["text"].as_str(), reply["reply_to_message"]["message_id"].as_u64()), (Some("ok then"), Some(menu_id)));
    let undo = json!({"inline_keyboard": [[{"text": "Undo", "callback_data": "undo"}]]});
    bot_call(gw, "editMessageText", json!({"chat_id": chat_id, "message_id": menu_id, "text": "Thanks", "reply_markup": undo}));
    read_until(&out, "the edit", |l| l == format!("[@chatui_bot] #{menu_id} edited: Thanks"));
    read_until(&out, "the new buttons", |l| l == "  [1 Undo]");
    writeln!(stdin, "/react {menu_id} 👍").expect("type");
    read_until(&out, "own reaction", |l| l == format!("you reacted 👍 to #{menu_id}"));
    let reaction = json!([{"type": "emoji", "emoji": "🔥"}]);
    bot_call(gw, "setMessageReaction", json!({"chat_id": chat_id, "message_id": reply["message_id"], "reaction": reaction}));
    read_until(&out, "the bot's reaction", |l| l == format!("@chatui_bot reacted 🔥 to #{}", reply["message_id"]));
    bot_call(gw, "deleteMessage", json!({"chat_id": chat_id, "message_id": menu_id}));
    read_until(&out, "the deletion", |l| l == format!("[@chatui_bot] #{menu_id} deleted"));
    writeln!(stdin, "/press 1").expect("type");
    read_until(&err, "no buttons left", |l| l.starts_with("/press: no message with buttons"));

    // Inline mode: the query, the results listed with their ids, a choice sent via the bot.
    writeln!(stdin, "/inline cats").expect("type");
    let asked = read_until(&out, "the inline query", |l| l.starts_with("inline query sent to @chatui_bot (session "));
    let session: u64 = asked.last().expect("line")["inline query sent to @chatui_bot (session ".len()..]
        .split(')')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("session id");
    let query = next_update(gw, &mut offset, "inline_query");
    assert_eq!((query["query"].as_str(), query["id"].as_str()), (Some("cats"), Some(session.to_string().as_str())));
    let article = |id: &str, title: &str| json!({"type": "article", "id": id, "title": title, "description": "d", "input_message_content": {"message_text": format!("{title}!")}});
    bot_call(gw, "answerInlineQuery", json!({"inline_query_id": query["id"], "results": [article("a1", "Tabby"), article("b2", "Sia\u{1b}mese")]}));
    read_until(&out, "the results", |l| l == format!("@chatui_bot inline results of session {session} (/choose {session} RESULT_ID):"));
    let listed = read_until(&out, "the second result", |l| l.starts_with("  2. "));
    assert_eq!(listed, ["  1. a1: Tabby — d", "  2. b2: Sia\\emese — d"]);
    writeln!(stdin, "/choose {session} a1").expect("type");
    read_until(&out, "the choice", |l| l.starts_with(&format!("you chose result a1 of session {session}: sent as #")));
    let chosen = next_update(gw, &mut offset, "message");
    assert_eq!((chosen["text"].as_str(), chosen["via_bot"]["username"].as_str()), (Some("Tabby!"), Some("chatui_bot")));

    writeln!(stdin, "/quit").expect("type");
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(s) = chat.0.try_wait().expect("wait") {
            break s;
        }
        assert!(Instant::now() < deadline, "e2e-chat did not leave on /quit");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
}

/// The terminal as a person sees it: everything the program wrote, fed to a terminal emulator
/// (vt100) on a thread, and the raw bytes too.
/// The emulated screen and the raw bytes, with a condition variable for waiting on them.
type Shared = Arc<(Mutex<(vt100::Parser, Vec<u8>)>, Condvar)>;

struct Term {
    state: Shared,
}

impl Term {
    fn watch(master: std::fs::File, rows: u16, cols: u16) -> Term {
        let state: Shared = Arc::new((Mutex::new((vt100::Parser::new(rows, cols, 0), Vec::new())), Condvar::new()));
        let sink = state.clone();
        let mut master = master;
        std::thread::Builder::new()
            .name("pty-master".to_string())
            .spawn(move || {
                let mut buf = [0u8; 4096];
                // EIO once the child and every slave descriptor are gone.
                while let Ok(n) = master.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let (lock, cv) = &*sink;
                    let mut got = lock.lock().expect("term");
                    got.0.process(&buf[..n]);
                    got.1.extend_from_slice(&buf[..n]);
                    cv.notify_all();
                }
            })
            .expect("pty reader");
        Term { state }
    }

    /// Waits (bounded) until the screen satisfies `pred`; returns what it then shows.
    fn wait(&self, what: &str, pred: impl Fn(&vt100::Screen) -> bool) -> String {
        let (lock, cv) = &*self.state;
        let deadline = Instant::now() + WAIT;
        let mut got = lock.lock().expect("term");
        loop {
            if pred(got.0.screen()) {
                return got.0.screen().contents();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "never shown: {what}; the screen:\n{}", got.0.screen().contents());
            got = cv.wait_timeout(got, left).expect("term").0;
        }
    }

    /// Waits until `needle` is on the screen.
    fn wait_text(&self, needle: &str) -> String {
        self.wait(needle, |s| s.contents().contains(needle))
    }

    /// Runs `f` on the screen as it is now.
    fn with<T>(&self, f: impl FnOnce(&vt100::Screen) -> T) -> T {
        f(self.state.0.lock().expect("term").0.screen())
    }

    /// Everything written, raw.
    fn raw(&self) -> String {
        String::from_utf8_lossy(&self.state.0.lock().expect("term").1).into_owned()
    }
}

/// The row and column where `needle` starts on the screen.
fn find_on(screen: &vt100::Screen, needle: &str) -> Option<(u16, u16)> {
    let (_, cols) = screen.size();
    screen.rows(0, cols).enumerate().find_map(|(row, text)| {
        text.find(needle).map(|byte| (row as u16, text[..byte].chars().map(unicode_columns).sum::<u16>()))
    })
}

fn unicode_columns(c: char) -> u16 {
    // Enough for this test's text: the box and check marks take one column.
    if c.is_ascii() || "┃✓⧗…·↔●○".contains(c) { 1 } else { 2 }
}

fn open_pty(rows: u16, cols: u16) -> (std::fs::File, OwnedFd) {
    let (mut master, mut slave) = (0, 0);
    let size = libc::winsize { ws_row: rows, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: openpty writes two descriptors into the given integers; the name and termios
    // pointers may be null and the winsize outlives the call.
    let rc = unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), &size) };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened and are owned by nothing else.
    unsafe { (std::fs::File::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) }
}

/// `e2e-chat chat PEER` on a pseudo terminal of `rows` × `cols`.
fn terminal_chat(profile: &Path, peer: &str, rows: u16, cols: u16) -> (Killed, std::fs::File, Term) {
    let (master, slave) = open_pty(rows, cols);
    let tty = master.try_clone().expect("clone master");
    let stdio = |fd: &OwnedFd| Stdio::from(fd.try_clone().expect("dup slave"));
    let child = Command::new(bin_path("e2e-chat"))
        .arg("--profile")
        .arg(profile)
        .args(["chat", peer])
        .env("TERM", "xterm-256color")
        .env("TZ", "UTC")
        .env_remove("NO_COLOR")
        .stdin(stdio(&slave))
        .stdout(stdio(&slave))
        .stderr(stdio(&slave))
        .spawn()
        .expect("spawn e2e-chat");
    drop(slave); // only the child holds the terminal now, so its exit ends the reads
    (Killed(child), tty, Term::watch(master, rows, cols))
}

#[test]
fn terminal_chat_draws_a_current_view_and_keeps_lines_typed_offline() {
    let mut world = World::start("tui_long_display_name_bot");
    let bot = world.bot_username();
    let alice_dir = world.user("alice").dir().to_path_buf();
    let bob = world.user("bob");
    let (cols, rows) = (64u16, 30u16);
    let (mut chat, mut tty, term) = terminal_chat(&alice_dir, &format!("@{bot}"), rows, cols);

    // The banner: on the first row, cut to the width (nothing of it wraps to the second).
    let shown = term.wait_text("e2e-chat · @alice ↔ bot @tui_long");
    let banner = shown.lines().next().expect("first row").to_string();
    assert!(banner.trim_end().ends_with('…'), "a long banner is cut to fit: {banner:?}");
    assert!(term.with(|s| s.cell(0, 3).is_some_and(|c| c.inverse())), "the banner stands out");

    // A whole line in one write (a paste without bracketed paste, an input method, expect):
    // every character counts, and Enter sends it at once.
    tty.write_all(b"hello bot\r").expect("type");
    let mut offset = 0;
    let hello = next_update(&world.gateway, &mut offset, "message");
    assert_eq!(hello["text"], "hello bot");
    let chat_id = hello["chat"]["id"].as_i64().expect("chat id");
    let hello_id = hello["message_id"].as_u64().expect("id");
    let shown = term.wait_text(&format!("you: hello bot #{hello_id} ✓"));
    assert_eq!(shown.matches("hello bot").count(), 1, "one line per message sent: {shown}");
    let line = shown.lines().find(|l| l.contains("you: hello bot")).expect("own line");
    assert!(line.len() > 6 && line.as_bytes()[2] == b':' && line[..5].chars().all(|c| c.is_ascii_digit() || c == ':'), "a time first: {line:?}");

    // Formatting from entities, a one-line quote of the message replied to, buttons.
    let keyboard = json!({"inline_keyboard": [[{"text": "Yes", "callback_data": "yes"}, {"text": "No", "callback_data": "no"}]]});
    let html = "<b>Bold</b> <i>it</i> <code>c</code> <a href=\"https://example.com/\">site</a>";
    let sent = bot_call(&world.gateway, "sendMessage", json!({"chat_id": chat_id, "text": html, "parse_mode": "HTML", "reply_to_message_id": hello_id, "reply_markup": keyboard}));
    let id = sent["message_id"].as_u64().expect("id");
    term.wait_text("Bold it c site");
    term.wait_text("<https://example.com/>");
    let shown = term.wait_text("[1 Yes] [2 No]");
    assert!(shown.contains("┃ you: hello bot"), "the reply quotes its message: {shown}");
    term.with(|s| {
        let (row, col) = find_on(s, "Bold it").expect("the text");
        assert!(s.cell(row, col).expect("B").bold(), "bold");
        assert!(s.cell(row, col + 5).expect("i").italic(), "italic");
        assert!(s.cell(row, col + 10).expect("s").underline(), "a link is underlined");
        let (row, col) = find_on(s, &format!("@{bot}:")).expect("sender");
        assert_ne!(s.cell(row, col).expect("@").fgcolor(), vt100::Color::Default, "the sender's name in colour");
    });

    // The bot's edit changes the message in place; its deletion strikes it through.
    bot_call(&world.gateway, "editMessageText", json!({"chat_id": chat_id, "message_id": id, "text": "Changed"}));
    let shown = term.wait_text(&format!("Changed #{id} (edited)"));
    assert!(!shown.contains("Bold it") && !shown.contains("[1 Yes]"), "the old text and buttons are gone: {shown}");
    bot_call(&world.gateway, "deleteMessage", json!({"chat_id": chat_id, "message_id": id}));
    term.wait_text(&format!("Changed #{id} (deleted)"));
    assert!(term.raw().contains("\u{1b}[9mChanged"), "struck through");

    // Ctrl-C on an empty line says how to leave.
    tty.write_all(&[3]).expect("ctrl-c");
    term.wait_text("to leave: /quit or Ctrl-D");

    // A message from someone else is counted unread; /switch opens that conversation.
    bob.send_text("@alice", "psst").expect("bob sends");
    term.wait_text("unread: @bob (1)");
    assert!(!term.with(|s| s.contents()).contains("psst"));
    tty.write_all(b"/switch @bob\r").expect("type");
    let shown = term.wait_text("@bob: psst");
    assert!(shown.lines().next().expect("banner").contains("↔ @bob"), "{shown}");
    assert!(!shown.contains("unread"), "{shown}");
    // What others write is shown, never obeyed.
    bob.send_text("@alice", HOSTILE).expect("bob sends");
    term.wait_text("\\e[2J\\x07boom");
    for bad in ['\u{7}', '\u{9b}', '\u{202e}'] {
        assert!(!term.raw().contains(bad), "raw {bad:?} reached the terminal");
    }

    // The platform goes away: what is typed waits in the outbox, then goes once it is back.
    world.platform.stop();
    term.wait_text("connection lost");
    tty.write_all(b"while away\r").expect("type");
    term.wait_text("you: while away ⧗ waiting for the platform");
    let back = Instant::now();
    world.platform.start_again();
    let shown = term.wait("while away, sent", |s| s.contents().lines().any(|l| l.contains("you: while away #") && l.ends_with('✓')));
    eprintln!("the queued line went {:.1} s after the platform came back", back.elapsed().as_secs_f64());
    assert_eq!(shown.matches("while away").count(), 1, "{shown}");
    let got = bob.receive(Duration::from_secs(30), 2).expect("bob receives");
    assert_eq!(got.iter().filter(|m| m.text == "while away").count(), 1, "{got:?}");

    // Ctrl-D leaves and gives the terminal back.
    tty.write_all(&[4]).expect("ctrl-d");
    assert!(chat.wait_exit("on Ctrl-D").success());
    assert!(term.raw().ends_with("\u{1b}[?2004l\u{1b}[?1049l"), "the normal screen is back");
    no_raw_controls(&term.with(|s| s.contents()));
}
