//! `e2e-chat chat` as a person sees it: the real binary talking to a real platform server,
//! with a second user (driven through the client library) or a bot behind a real gateway
//! (driven here through the Bot HTTP API) on the other end. Under a pseudo
//! terminal it runs its line editor; with pipes it reads plain lines. Either way a message
//! carrying `ESC [2J`, BEL, a C1 CSI or a bidi override reaches the screen escaped, never raw.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use bot_gateway::client::Profile;
use serde_json::{json, Value};
use support::{bin_path, free_port, Gateway, Proc, World};

/// What the other user sends: a screen clear, a bell, a C1 CSI, a bidi override, a second line.
const HOSTILE: &str = "\u{1b}[2J\u{7}boom \u{9b}31m \u{202e}gnp.exe\nline2";
/// How it must be shown.
const HOSTILE_SHOWN: &str = "[@bob] \\e[2J\\x07boom \\u{9b}31m \\u{202e}gnp.exe";
const WAIT: Duration = Duration::from_secs(60);

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

/// Lines of a child's pipe, read on a thread so waits stay bounded.
fn lines_of(pipe: impl Read + Send + 'static, name: &str) -> crossbeam_channel::Receiver<String> {
    let (tx, rx) = crossbeam_channel::bounded(256);
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        })
        .expect("reader thread");
    rx
}

/// Reads lines until one satisfies `pred`; returns every line read.
fn read_until(rx: &crossbeam_channel::Receiver<String>, what: &str, pred: impl Fn(&str) -> bool) -> Vec<String> {
    let deadline = Instant::now() + WAIT;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let done = pred(&line);
                seen.push(line);
                if done {
                    return seen;
                }
            }
            Err(_) => panic!("no {what} line; got {seen:?}"),
        }
    }
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `e2e-chat chat PEER` with piped stdin, stdout and stderr; the output arrives as lines.
fn piped_chat(profile: &Path, peer: &str) -> (Killed, ChildStdin, crossbeam_channel::Receiver<String>, crossbeam_channel::Receiver<String>) {
    let child = Command::new(bin_path("e2e-chat"))
        .arg("--profile")
        .arg(profile)
        .args(["chat", peer])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn e2e-chat");
    let mut chat = Killed(child);
    let stdin = chat.0.stdin.take().expect("stdin");
    let out = lines_of(chat.0.stdout.take().expect("stdout"), "chat-stdout");
    let err = lines_of(chat.0.stderr.take().expect("stderr"), "chat-stderr");
    (chat, stdin, out, err)
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

/// Everything the program wrote to the terminal, read from the pty master on a thread.
struct Screen {
    bytes: Arc<(Mutex<Vec<u8>>, Condvar)>,
}

impl Screen {
    fn watch(master: std::fs::File) -> Screen {
        let bytes = Arc::new((Mutex::new(Vec::new()), Condvar::new()));
        let sink = bytes.clone();
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
                    lock.lock().expect("screen").extend_from_slice(&buf[..n]);
                    cv.notify_all();
                }
            })
            .expect("pty reader");
        Screen { bytes }
    }

    /// Waits until `needle` appears in the visible text at or after byte `from`; returns the
    /// byte after it.
    fn wait_for(&self, needle: &str, from: usize) -> usize {
        let (lock, cv) = &*self.bytes;
        let deadline = Instant::now() + WAIT;
        let mut got = lock.lock().expect("screen");
        loop {
            let shown = visible(&got);
            if let Some(at) = shown.get(from.min(shown.len())..).and_then(|rest| rest.find(needle)) {
                return from + at + needle.len();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "{needle:?} never shown after byte {from}; visible: {shown:?}");
            got = cv.wait_timeout(got, left).expect("screen").0;
        }
    }

    /// Everything written, raw.
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes.0.lock().expect("screen")).into_owned()
    }
}

/// The text the editor drew, without its own control sequences (CSI, other ESC pairs) and
/// carriage returns: enough to find a line it drew, since it draws text contiguously.
fn visible(raw: &[u8]) -> String {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        match raw[i] {
            0x1b if raw.get(i + 1) == Some(&b'[') => {
                i += 2;
                while i < raw.len() && !(0x40..=0x7e).contains(&raw[i]) {
                    i += 1;
                }
                i += 1;
            }
            0x1b => i += 2,
            b'\r' => i += 1,
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Types `text` one key at a time, each after the previous one is echoed after `shown` (the
/// prompt and what is on the line already), which starts at or after byte `start`. A burst of
/// keys in one read is a rustyline weakness (docs/decisions.md), and waiting for each echo
/// keeps the test free of timing. Returns the byte after the last echo.
fn type_keys(tty: &mut std::fs::File, screen: &Screen, shown: &str, text: &str, start: usize) -> usize {
    let mut end = start;
    for (i, c) in text.char_indices() {
        tty.write_all(c.to_string().as_bytes()).expect("type");
        end = screen.wait_for(&format!("{shown}{}", &text[..i + c.len_utf8()]), start);
    }
    end
}

fn open_pty() -> (std::fs::File, OwnedFd) {
    let (mut master, mut slave) = (0, 0);
    let size = libc::winsize { ws_row: 40, ws_col: 200, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: openpty writes two descriptors into the given integers; the name and termios
    // pointers may be null and the winsize outlives the call.
    let rc = unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), &size) };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened and are owned by nothing else.
    unsafe { (std::fs::File::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) }
}

#[test]
fn terminal_chat_edits_lines_keeps_the_half_typed_one_and_shows_controls_escaped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let _platform = start_platform(&dir.path().join("platform"), port);
    let (alice_dir, bob) = two_users(dir.path(), &format!("http://127.0.0.1:{port}"));

    let (master, slave) = open_pty();
    let mut tty = master.try_clone().expect("clone master");
    let stdio = |fd: &OwnedFd| Stdio::from(fd.try_clone().expect("dup slave"));
    let child = Command::new(bin_path("e2e-chat"))
        .arg("--profile")
        .arg(&alice_dir)
        .args(["chat", "@bob"])
        .env("TERM", "xterm")
        .stdin(stdio(&slave))
        .stdout(stdio(&slave))
        .stderr(stdio(&slave))
        .spawn()
        .expect("spawn e2e-chat");
    drop(slave); // only the child holds the terminal now, so its exit ends the reads
    let mut chat = Killed(child);
    let screen = Screen::watch(master);

    let prompt = "@alice> ";
    let mut at = screen.wait_for("chatting with @bob (Bob) as @alice", 0);
    at = screen.wait_for(prompt, at) - prompt.len();
    at = type_keys(&mut tty, &screen, prompt, "hello bob", at);
    tty.write_all(b"\r").expect("enter");
    at = screen.wait_for("[you] hello bob (#", at);
    bob_receives(&bob, "hello bob");

    // Half a line typed when a message arrives: it is printed above, the line redrawn below.
    at = screen.wait_for(prompt, at) - prompt.len();
    at = type_keys(&mut tty, &screen, prompt, "half", at);
    bob.send_text("@alice", HOSTILE).expect("bob sends");
    at = screen.wait_for(HOSTILE_SHOWN, at);
    at = screen.wait_for("  | line2", at);
    at = screen.wait_for("@alice> half", at);
    no_raw_controls(&screen.text());

    // The line is intact: finishing it sends "half done".
    at = type_keys(&mut tty, &screen, "@alice> half", " done", at - "@alice> half".len());
    tty.write_all(b"\r").expect("enter");
    screen.wait_for("[you] half done (#", at);
    bob_receives(&bob, "half done");

    // Ctrl-D on an empty line leaves.
    tty.write_all(&[4]).expect("ctrl-d");
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(s) = chat.0.try_wait().expect("wait") {
            break s;
        }
        assert!(Instant::now() < deadline, "e2e-chat did not leave on Ctrl-D; screen: {:?}", screen.text());
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}; screen: {:?}", screen.text());
    no_raw_controls(&screen.text());
}
