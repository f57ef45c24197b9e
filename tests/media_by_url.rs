//! End to end: media by URL (`media_from_urls`, issue 44 part 7). An HTTP server on 127.0.0.1
//! serves a PNG and a PDF; with the setting off, a URL is a 400 that names it; on,
//! with 127.0.0.1 allowed, the gateway fetches the files itself and the person's client
//! receives them end to end, byte for byte, as uploads (sendPhoto, sendDocument, an inline
//! result by `photo_url`); a loopback name that is not allowed and a redirect to a private
//! address are refused in the reference's words, and nothing of the URL's path reaches the
//! description. Real binaries on loopback.

mod support;

use std::sync::{Arc, Mutex};

use bot_gateway::client::{Incoming, MediaKind, Profile, ReceivedMessage};
use bot_gateway::http::{Handler, Limits, Request, Response};
use serde_json::{json, Value};
use support::{wait_for, write_config, Gateway, World};

/// A PNG's signature and header, then filler: the gateway checks the signature only.
fn png() -> Vec<u8> {
    let head = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";
    head.iter().copied().chain((0..300_000u32).map(|i| (i * 7 % 251) as u8)).collect()
}

fn pdf() -> Vec<u8> {
    b"%PDF-1.7\n".iter().copied().chain(b"report line\n".iter().copied().cycle().take(150_000)).collect()
}

/// The files, served by the gateway's own HTTP server on 127.0.0.1:0 (no `Host` rule, as for
/// tests), recording each request target. Stops when dropped.
struct FileServer {
    port: u16,
    asked: Arc<Mutex<Vec<String>>>,
    server: Option<bot_gateway::http::Server>,
}

struct Files(Arc<Mutex<Vec<String>>>);

impl Handler for Files {
    fn handle(&self, rq: &mut Request<'_>) -> Response {
        let target = rq.target().to_string();
        self.0.lock().expect("log").push(target.clone());
        match target.as_str() {
            "/cat.png?sig=secret" => Response::with_body(200, "image/png", png()),
            "/files/report.pdf" => Response::with_body(200, "application/pdf", pdf()),
            "/to-private" => Response::new(302).with_header("Location", "http://10.0.0.1/cat.png"),
            _ => Response::new(404),
        }
    }
}

impl FileServer {
    fn start() -> FileServer {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let server = bot_gateway::http::Server::start("file-server", "127.0.0.1:0", Limits::default(), Arc::new(Files(asked.clone())))
            .expect("bind the file server");
        FileServer { port: server.local_addr().port(), asked, server: Some(server) }
    }

    fn url(&self, host: &str, path: &str) -> String {
        format!("http://{host}:{}{path}", self.port)
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().expect("log").clone()
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown();
        }
    }
}

/// The next message the person receives (bounded).
fn next_message(user: &Profile) -> ReceivedMessage {
    wait_for(user, "the file by URL", |e| match e {
        Incoming::Message(m) => Some(m.clone()),
        _ => None,
    })
}

/// What the person's client downloads of message `message_id` from `bot`.
fn downloaded(user: &Profile, bot: &str, message_id: u64) -> Vec<u8> {
    let dir = tempfile::tempdir().expect("dir");
    let out = dir.path().join("file");
    user.download(bot, message_id, &out).expect("download");
    std::fs::read(&out).expect("read")
}

/// A refused call: 400 with `needle` in the description, which never holds the URL's path.
fn refused(world: &World, method: &str, params: Value, needle: &str) -> String {
    let (status, body) = world.gateway.call(method, params.clone());
    assert_eq!(status, 400, "{method} {params}: {body}");
    let d = body["description"].as_str().unwrap_or("").to_string();
    assert!(d.contains(needle), "{method}: {d:?} lacks {needle:?}");
    assert!(!d.contains("cat.png") && !d.contains("secret") && !d.contains("to-private"), "no path in {d:?}");
    d
}

#[test]
fn media_by_url_are_fetched_only_when_enabled_and_only_from_allowed_hosts() {
    let mut world = World::start("url_bot");
    let alice = world.user("alice");
    let bot = format!("@{}", world.bot_username());
    let server = FileServer::start();
    alice.send_text(&bot, "hi").expect("hi");
    let first = world.gateway.poll_until(0, 1);
    let chat = first[0]["message"]["chat"]["id"].clone();
    let photo_url = server.url("127.0.0.1", "/cat.png?sig=secret");

    // Off (the default): a 400 that names the setting, and nothing fetched.
    let d = refused(&world, "sendPhoto", json!({"chat_id": chat, "photo": photo_url}), "external URLs are not supported");
    assert!(d.contains("media_from_urls"), "{d}");
    assert!(server.asked().is_empty(), "nothing was fetched: {:?}", server.asked());

    // On, with 127.0.0.1 allowed.
    let path = world.gateway.config_path.clone();
    let mut config: Value = serde_json::from_slice(&std::fs::read(&path).expect("config")).expect("json");
    config["media_from_urls"] = json!({"enabled": true, "allow_hosts": ["127.0.0.1"]});
    write_config(&path, &config);
    world.gateway.proc.kill();
    world.gateway = Gateway::start(&path);

    let (status, body) = world.gateway.call("sendPhoto", json!({"chat_id": chat, "photo": photo_url, "caption": "by URL"}));
    assert_eq!(status, 200, "{body}");
    let photo = &body["result"]["photo"][0];
    assert_eq!(photo["file_size"].as_u64(), Some(png().len() as u64), "{body}");
    let got = next_message(&alice);
    let media = got.media.clone().expect("a file");
    assert_eq!((media.kind, media.mime_type.as_str(), media.caption.as_str()), (MediaKind::Photo, "image/png", "by URL"));
    assert!(downloaded(&alice, &bot, got.message_id) == png(), "the person's file is the served PNG");

    let (status, body) = world.gateway.call("sendDocument", json!({"chat_id": chat, "document": server.url("127.0.0.1", "/files/report.pdf")}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["document"]["file_name"], "report.pdf", "{body}");
    let got = next_message(&alice);
    let media = got.media.clone().expect("a file");
    assert_eq!((media.kind, media.file_name.as_str(), media.mime_type.as_str()), (MediaKind::Document, "report.pdf", "application/pdf"));
    assert!(downloaded(&alice, &bot, got.message_id) == pdf(), "the person's file is the served PDF");
    assert_eq!(server.asked(), ["/cat.png?sig=secret", "/files/report.pdf"]);

    // Refused: loopback by a name not allowed (never connected to), a redirect to a private
    // address; a photo that is no image.
    refused(&world, "sendPhoto", json!({"chat_id": chat, "photo": server.url("localhost", "/cat.png?sig=secret")}), "failed to get HTTP URL content");
    assert_eq!(server.asked().len(), 2, "localhost was not asked: {:?}", server.asked());
    let d = refused(&world, "sendDocument", json!({"chat_id": chat, "document": server.url("127.0.0.1", "/to-private")}), "failed to get HTTP URL content");
    assert!(d.contains("10.0.0.1 is a private address"), "{d}");
    refused(&world, "sendPhoto", json!({"chat_id": chat, "photo": server.url("127.0.0.1", "/files/report.pdf")}), "wrong type of the web page content");
    refused(&world, "sendPhoto", json!({"chat_id": chat, "photo": "https://"}), "wrong file identifier/HTTP URL specified");

    // An inline result by photo_url: fetched when the answer is sent; the person's choice
    // sends the file, which the bot downloads as the served bytes.
    let offset = first[0]["update_id"].as_i64().expect("id") + 1;
    let session = alice.inline_query(&bot, "cats").expect("inline query");
    let updates = world.gateway.poll_until(offset, 1);
    let query = updates.iter().find_map(|u| u.get("inline_query")).expect("inline_query");
    let result = json!({"type": "photo", "id": "p1", "photo_url": photo_url, "thumbnail_url": server.url("127.0.0.1", "/thumb.png"), "caption": "a cat"});
    let (status, body) = world.gateway.call("answerInlineQuery", json!({"inline_query_id": query["id"], "results": [result]}));
    assert_eq!(status, 200, "{body}");
    assert!(!server.asked().iter().any(|p| p == "/thumb.png"), "thumbnails are not fetched");
    let results = wait_for(&alice, "the inline results", |e| match e {
        Incoming::InlineResults { session_id, results, .. } if *session_id == session => Some(results.clone()),
        _ => None,
    });
    let shown = results[0].media.as_ref().expect("the result carries the file");
    assert_eq!((shown.kind, shown.size), (MediaKind::Photo, png().len() as u64));
    alice.choose_inline(&bot, session, "p1").expect("choose");
    let after = updates.last().expect("one")["update_id"].as_i64().expect("id") + 1;
    let chosen = world.gateway.poll_until(after, 2);
    let message = chosen.iter().find_map(|u| u.get("message")).expect("the chosen photo arrives as a message");
    assert_eq!(message["caption"], "a cat");
    let file_id = message["photo"][0]["file_id"].as_str().expect("file_id");
    let (status, file) = world.gateway.call("getFile", json!({"file_id": file_id}));
    assert_eq!(status, 200, "{file}");
    let link = format!("{}/file/bot{}/{}", world.gateway.base, world.gateway.token, file["result"]["file_path"].as_str().expect("path"));
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut ureq::get(&link).call().expect("download").into_reader(), &mut bytes).expect("read");
    assert!(bytes == png(), "the chosen result's file is the served PNG");

    // The log names the host at most, never the path or query.
    let log = world.gateway.proc.stderr_text();
    assert!(!log.contains("sig=secret") && !log.contains("/files/report.pdf"), "the log holds a URL's path:\n{log}");
}
