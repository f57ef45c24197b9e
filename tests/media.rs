//! End to end: files in private dialogs through the gateway. A user sends each kind of file
//! (encrypted with `e2e::file::upload_encrypted`, carried in a `Media` content); the bot gets
//! it as `photo`/`document`/`audio`/`video`/`voice`, downloads it through getFile and
//! `/file/bot<token>/<file_path>`, sends files back by upload and by file_id, and nothing of
//! the plaintext lands on the platform's disk or in `state_dir`. Real binaries on loopback.

mod support;

use std::path::Path;
use std::time::Duration;

use bot_gateway::wire::e2e::media::Kind;
use serde_json::{json, Value};
use support::media::send_file;
use support::World;

const KINDS: [(&str, Kind, &str, &str); 5] = [
    ("photo", Kind::PHOTO, "image/jpeg", "cat.jpg"),
    ("document", Kind::DOCUMENT, "application/pdf", "report 1.pdf"),
    ("audio", Kind::AUDIO, "audio/mpeg", "song.mp3"),
    ("video", Kind::VIDEO, "video/mp4", "clip.mp4"),
    ("voice", Kind::VOICE, "audio/ogg", "note.ogg"),
];

/// A file body with a marker that must never be found in clear on disk.
fn body_of(kind: &str, len: usize) -> Vec<u8> {
    let marker = format!("PLAINTEXT-MARKER-{kind}-");
    marker.bytes().cycle().take(len).collect()
}

/// The media object of a message: `photo` is an array of one PhotoSize.
fn media_of<'a>(msg: &'a Value, field: &str) -> &'a Value {
    let m = &msg[field];
    if field == "photo" {
        assert_eq!(m.as_array().map(Vec::len), Some(1), "one PhotoSize: {msg}");
        &m[0]
    } else {
        m
    }
}

/// getFile, then the download URL; (status, body).
fn download(world: &World, file_id: &str) -> (u16, Vec<u8>) {
    let (status, body) = world.gateway.call("getFile", json!({ "file_id": file_id }));
    assert_eq!(status, 200, "getFile: {body}");
    let file = &body["result"];
    assert_eq!(file["file_id"], file_id);
    assert!(file["file_unique_id"].as_str().is_some_and(|s| !s.is_empty()));
    let path = file["file_path"].as_str().expect("file_path");
    assert!(!path.starts_with('/'), "a relative path: {path}");
    get(&format!("{}/file/bot{}/{}", world.gateway.base, world.gateway.token, path))
}

fn get(url: &str) -> (u16, Vec<u8>) {
    let resp = match ureq::get(url).timeout(Duration::from_secs(120)).call() {
        Ok(r) | Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("GET {url}: {e}"),
    };
    let status = resp.status();
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut resp.into_reader(), &mut bytes).expect("read body");
    (status, bytes)
}

/// A multipart/form-data call (`Gateway::multipart`).
fn multipart(world: &World, method: &str, fields: &[(&str, String)], files: &[(&str, &str, &[u8])]) -> (u16, Value) {
    world.gateway.multipart(method, fields, files)
}

/// How many regular files are under `dir`.
fn stored_files(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries.flatten().map(|e| if e.path().is_dir() { stored_files(&e.path()) } else { 1 }).sum()
}

/// Every regular file under `dir` that contains `needle`.
fn files_containing(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return found };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_containing(&path, needle));
        } else if let Ok(bytes) = std::fs::read(&path) {
            if bytes.windows(needle.len()).any(|w| w == needle) {
                found.push(path.display().to_string());
            }
        }
    }
    found
}

#[test]
fn every_kind_travels_both_ways_verified_and_never_in_clear_on_disk() {
    let mut world = World::start("media_bot");
    let alice = world.user("alice");
    let bot = format!("@{}", world.bot_username());

    // ── Receiving: each kind from the user, as the Bot API object with every required field.
    let mut uploads = Vec::new();
    for (i, (field, kind, mime, name)) in KINDS.iter().enumerate() {
        let bytes = body_of(field, 100_000 + i * 70_001);
        let caption = if i == 0 { "look at this" } else { "" };
        uploads.push((send_file(&alice, &bot, *kind, mime, name, &bytes, caption), bytes));
    }
    let updates = world.gateway.poll_until(0, KINDS.len());
    let mut file_ids = Vec::new();
    for (i, (field, _, mime, name)) in KINDS.iter().enumerate() {
        let msg = &updates[i]["message"];
        assert!(msg.get("text").is_none(), "{msg}");
        let m = media_of(msg, field);
        let file_id = m["file_id"].as_str().expect("file_id").to_string();
        assert!(m["file_unique_id"].as_str().is_some_and(|s| !s.is_empty()));
        assert_eq!(m["file_size"].as_u64(), Some(uploads[i].1.len() as u64), "{m}");
        assert!(!file_id.contains(&uploads[i].0.file_ref), "the file_id is not the platform's reference");
        match *field {
            "photo" => assert_eq!((m["width"].as_u64(), m["height"].as_u64()), (Some(640), Some(480))),
            "video" => assert_eq!((m["width"].as_u64(), m["duration"].as_u64()), (Some(640), Some(7))),
            "audio" | "voice" => assert_eq!(m["duration"].as_u64(), Some(7)),
            _ => {}
        }
        if *field != "photo" {
            assert_eq!(m["mime_type"], *mime);
        }
        if *field == "document" {
            assert_eq!(m["file_name"], *name);
        }
        file_ids.push(file_id);
    }
    assert_eq!(updates[0]["message"]["caption"], "look at this");
    let chat_id = updates[0]["message"]["chat"]["id"].clone();
    let doc_message_id = updates[1]["message"]["message_id"].clone();

    // getFile + download give back exactly the bytes.
    for (i, id) in file_ids.iter().enumerate() {
        let (status, got) = download(&world, id);
        assert_eq!(status, 200);
        assert!(got == uploads[i].1, "download of {} equals what was sent", KINDS[i].0);
    }

    // ── Sending: each kind by upload (the part named after the parameter, and attach://).
    let mut sent_ids = Vec::new();
    for (i, (field, ..)) in KINDS.iter().enumerate() {
        let method = format!("send{}{}", field[..1].to_uppercase(), &field[1..]);
        let bytes = body_of(&format!("bot-{field}"), 50_000 + i * 1000);
        let mut fields = vec![("chat_id", chat_id.to_string()), ("caption", format!("<b>{field}</b>")), ("parse_mode", "HTML".into())];
        let (status, body) = if i % 2 == 0 {
            multipart(&world, &method, &fields, &[(field, "upload.bin", &bytes)])
        } else {
            fields.push((field, "attach://part7".into()));
            multipart(&world, &method, &fields, &[("part7", "upload.bin", &bytes)])
        };
        assert_eq!(status, 200, "{method}: {body}");
        let msg = &body["result"];
        assert_eq!(msg["from"]["is_bot"], true);
        assert_eq!(msg["caption"], *field);
        assert_eq!(msg["caption_entities"][0]["type"], "bold");
        let m = media_of(msg, field);
        assert_eq!(m["file_size"].as_u64(), Some(bytes.len() as u64));
        let id = m["file_id"].as_str().expect("file_id").to_string();
        let (status, got) = download(&world, &id);
        assert_eq!(status, 200);
        assert!(got == bytes, "the bot's {field} downloads back");
        sent_ids.push(id);
    }

    // By file_id: the same file again, no upload; forward and copy keep it too.
    let (status, body) =
        world.gateway.call("sendDocument", json!({ "chat_id": chat_id, "document": file_ids[1], "caption": "again" }));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["document"]["file_id"], file_ids[1].as_str(), "the same file, the same file_id");
    // editMessageCaption: a new caption on the bot's file message, the file unchanged; the
    // person's client shows the edit; a text message has no caption to edit.
    let again_id = body["result"]["message_id"].clone();
    let (status, edited) = world.gateway.call(
        "editMessageCaption",
        json!({ "chat_id": chat_id, "message_id": again_id, "caption": "<i>new</i> caption", "parse_mode": "HTML" }),
    );
    assert_eq!(status, 200, "{edited}");
    assert_eq!((edited["result"]["caption"].as_str(), edited["result"]["caption_entities"][0]["type"].as_str()), (Some("new caption"), Some("italic")));
    assert_eq!(edited["result"]["document"]["file_id"], file_ids[1].as_str());
    assert!(edited["result"]["edit_date"].as_i64().is_some_and(|d| d > 0), "{edited}");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut shown = None;
    while shown.is_none() {
        assert!(std::time::Instant::now() < deadline, "the caption edit did not reach the person");
        alice
            .receive_events_with(Duration::from_secs(5), 1, |e| {
                if let bot_gateway::client::Incoming::Edited { message_id, text, .. } = e {
                    if serde_json::json!(message_id) == again_id {
                        shown = Some(text.clone());
                    }
                }
            })
            .expect("receive");
    }
    assert_eq!(shown.as_deref(), Some("new caption"));
    // editMessageReplyMarkup on the file message (as the Bot API allows on any message the bot
    // sent): buttons under the document, the file and its caption unchanged; the person's
    // client shows them, and its press carries the context the bot signed for that message.
    let (status, marked) = world.gateway.call(
        "editMessageReplyMarkup",
        json!({ "chat_id": chat_id, "message_id": again_id, "reply_markup": {"inline_keyboard": [[{"text": "Like", "callback_data": "like"}]]} }),
    );
    assert_eq!(status, 200, "{marked}");
    assert_eq!(marked["result"]["reply_markup"]["inline_keyboard"][0][0]["callback_data"], "like", "{marked}");
    assert_eq!((marked["result"]["document"]["file_id"].as_str(), marked["result"]["caption"].as_str()), (Some(file_ids[1].as_str()), Some("new caption")));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut buttons = None;
    while buttons.is_none() {
        assert!(std::time::Instant::now() < deadline, "the markup edit did not reach the person");
        alice
            .receive_events_with(Duration::from_secs(5), 1, |e| {
                if let bot_gateway::client::Incoming::Edited { message_id, keyboard, .. } = e {
                    if serde_json::json!(message_id) == again_id {
                        buttons = Some(keyboard.iter().flatten().map(|b| b.callback_data.clone()).collect::<Vec<_>>());
                    }
                }
            })
            .expect("receive");
    }
    assert_eq!(buttons, Some(vec!["like".to_string()]));
    alice.press(&format!("@{}", world.bot_username()), again_id.as_u64().expect("id"), "like").expect("a press on the file's button");
    let queued = world.gateway.poll_until(0, KINDS.len() + 1);
    let press = queued.iter().find(|u| u.get("callback_query").is_some()).expect("the press is a callback_query");
    assert_eq!((press["callback_query"]["data"].as_str(), &press["callback_query"]["message"]["message_id"]), (Some("like"), &again_id));
    let (status, body) = world.gateway.call("sendMessage", json!({ "chat_id": chat_id, "text": "plain" }));
    assert_eq!(status, 200, "{body}");
    let (status, refused) =
        world.gateway.call("editMessageCaption", json!({ "chat_id": chat_id, "message_id": body["result"]["message_id"], "caption": "x" }));
    assert_eq!(status, 400, "{refused}");
    let (status, body) =
        world.gateway.call("forwardMessage", json!({ "chat_id": chat_id, "from_chat_id": chat_id, "message_id": doc_message_id }));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["document"]["file_id"], file_ids[1].as_str());
    assert!(body["result"]["forward_origin"].is_object());
    let (status, body) =
        world.gateway.call("copyMessage", json!({ "chat_id": chat_id, "from_chat_id": chat_id, "message_id": doc_message_id }));
    assert_eq!(status, 200, "{body}");
    // A caption given to copyMessage replaces the file's; the person sees the copy with it.
    let (status, body) = world.gateway.call(
        "copyMessage",
        json!({ "chat_id": chat_id, "from_chat_id": chat_id, "message_id": doc_message_id, "caption": "<b>copied</b> caption", "parse_mode": "HTML" }),
    );
    assert_eq!(status, 200, "{body}");
    let copy_id = body["result"]["message_id"].as_u64().expect("copy id");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut copied = None;
    while copied.is_none() {
        assert!(std::time::Instant::now() < deadline, "the captioned copy did not reach the person");
        alice
            .receive_events_with(Duration::from_secs(5), 4, |e| {
                if let bot_gateway::client::Incoming::Message(m) = e {
                    if m.message_id == copy_id {
                        copied = Some(m.clone());
                    }
                }
            })
            .expect("receive");
    }
    let media = copied.expect("copy").media.expect("the copy is the file");
    assert_eq!((media.caption.as_str(), media.caption_entities[0].kind.as_str()), ("copied caption", "bold"));

    // Refusals: an external URL, an unknown file_id.
    let (status, body) =
        world.gateway.call("sendPhoto", json!({ "chat_id": chat_id, "photo": "https://example.com/cat.jpg" }));
    assert_eq!(status, 400);
    assert!(body["description"].as_str().unwrap_or("").contains("external URLs are not supported"), "{body}");
    let (status, body) = world.gateway.call("getFile", json!({ "file_id": "AAAAAAAAAAAAAAAAAAAAAA" }));
    assert_eq!(status, 400);
    assert!(body["description"].as_str().unwrap_or("").contains("file_id is unknown"), "{body}");
    let (status, body) = world.gateway.call("sendVoice", json!({ "chat_id": chat_id, "voice": "AAAAAAAAAAAAAAAAAAAAAA" }));
    assert_eq!(status, 400, "{body}");
    let (status, _) = get(&format!("{}/file/bot{}/documents/nope/x.pdf", world.gateway.base, world.gateway.token));
    assert_eq!(status, 404);

    // No plaintext of any file on the platform's disk or in state_dir.
    let state_dir = world.dir.path().join("state");
    for (field, ..) in KINDS {
        for marker in [format!("PLAINTEXT-MARKER-{field}-"), format!("PLAINTEXT-MARKER-bot-{field}-")] {
            let found = files_containing(&world.platform.data_dir, marker.as_bytes());
            assert!(found.is_empty(), "plaintext on the platform: {found:?}");
            let found = files_containing(&state_dir, marker.as_bytes());
            assert!(found.is_empty(), "plaintext in state_dir: {found:?}");
        }
    }

    // file_ids stay valid across a restart, for download and for sending.
    world.restart_gateway();
    world.gateway.wait_connected();
    let (status, got) = download(&world, &file_ids[2]);
    assert_eq!(status, 200);
    assert!(got == uploads[2].1, "downloads after a restart");
    let (status, body) = world.gateway.call("sendAudio", json!({ "chat_id": chat_id, "audio": sent_ids[2] }));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["audio"]["file_id"], sent_ids[2].as_str());

    // One flipped byte of the stored ciphertext: an error, and no plaintext byte served.
    let file_ref = &uploads[1].0.file_ref;
    let stored = world.platform.data_dir.join("files").join(&file_ref[..2]).join(file_ref);
    let mut bytes = std::fs::read(&stored).expect("stored ciphertext");
    bytes[50_000] ^= 0x01;
    std::fs::write(&stored, &bytes).expect("corrupt it");
    let (status, body) = world.gateway.call("getFile", json!({ "file_id": file_ids[1] }));
    assert_eq!(status, 200, "{body}");
    let path = body["result"]["file_path"].as_str().expect("file_path").to_string();
    let (status, got) = get(&format!("{}/file/bot{}/{}", world.gateway.base, world.gateway.token, path));
    assert_eq!(status, 502, "{}", String::from_utf8_lossy(&got));
    let err: Value = serde_json::from_slice(&got).expect("a JSON error");
    assert_eq!(err["ok"], false);
    assert!(!got.windows(17).any(|w| w == b"PLAINTEXT-MARKER-"), "no plaintext in the error");

    // Every file the bot and the user uploaded was named by the message that carries it, so
    // the platform's sweep of unnamed uploads keeps them all.
    let platform_db = rusqlite::Connection::open_with_flags(world.platform.data_dir.join("platform.db"), rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("open platform.db");
    let (files, unnamed): (i64, i64) = platform_db
        .query_row("SELECT COUNT(*), COUNT(*) FILTER (WHERE named = 0) FROM files", [], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("count files");
    assert!(files > uploads.len() as i64, "the user's and the bot's uploads: {files} files stored");
    assert_eq!(unnamed, 0, "every upload was named by its message");
}

#[test]
fn a_50_mib_file_round_trips_and_a_larger_one_is_refused_before_it_is_uploaded() {
    let world = World::start("big_media_bot");
    let alice = world.user("bob");
    alice.send_text(&format!("@{}", world.bot_username()), "hi").expect("send");
    let updates = world.gateway.poll_until(0, 1);
    let chat_id = updates[0]["message"]["chat"]["id"].clone();

    // Exactly 50 MiB goes up (encrypted while the body is read) and comes back byte for byte.
    let max: Vec<u8> = (0..50 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    let (status, body) = multipart(&world, "sendDocument", &[("chat_id", chat_id.to_string())], &[("document", "max.bin", &max)]);
    assert_eq!(status, 200, "{body}");
    let id = body["result"]["document"]["file_id"].as_str().expect("file_id").to_string();
    let (status, got) = download(&world, &id);
    assert_eq!(status, 200);
    assert!(got == max, "the 50 MiB file downloads back unchanged");
    drop((max, got));
    let files_before = stored_files(&world.platform.data_dir.join("files"));

    let too_big = vec![b'x'; 50 * 1024 * 1024 + 1];
    let (status, body) = multipart(&world, "sendDocument", &[("chat_id", chat_id.to_string())], &[("document", "big.bin", &too_big)]);
    assert_eq!(status, 413, "{body}");
    assert!(body["description"].as_str().unwrap_or("").contains("50 MiB"), "{body}");
    // The part streamed to the platform as it was read; refused, its call is cancelled and the
    // platform deletes what it had staged, storing nothing.
    assert_no_file_stays(&world, files_before, "a file over the limit");

    // A part no method uses (the call fails on another parameter) is not stored either.
    let (status, body) = multipart(&world, "sendDocument", &[("chat_id", "not a chat".into())], &[("document", "a.bin", b"abc")]);
    assert_eq!(status, 400, "{body}");
    assert_no_file_stays(&world, files_before, "an unused part");
}

/// The platform's file store holds `files` files once the cancelled uploads are cleaned up
/// (the platform learns of a cancel asynchronously: a bounded wait).
fn assert_no_file_stays(world: &World, files: usize, what: &str) {
    let dir = world.platform.data_dir.join("files");
    for _ in 0..200 {
        if stored_files(&dir) == files {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("{what}: the platform still holds {} files, {files} expected", stored_files(&dir));
}

/// The person's side with the real client: `send_file` to the bot, and a file the bot sends
/// by upload, received as an event and downloaded verified to the path the person chose.
#[test]
fn a_person_sends_and_downloads_files_with_the_client() {
    let world = World::start("client_media_bot");
    let alice = world.user("alice");
    let bot = format!("@{}", world.bot_username());
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("notes.txt");
    std::fs::write(&path, b"alice's notes, end to end").expect("write");
    alice.send_file(&bot, &path, None, "my notes").expect("send-file");
    let updates = world.gateway.poll_until(0, 1);
    let doc = &updates[0]["message"]["document"];
    assert_eq!((doc["file_name"].as_str(), doc["file_size"].as_u64()), (Some("notes.txt"), Some(25)));
    assert_eq!(updates[0]["message"]["caption"], "my notes");
    let (status, got) = download(&world, doc["file_id"].as_str().expect("file_id"));
    assert_eq!((status, got.as_slice()), (200, &b"alice's notes, end to end"[..]));

    let chat = updates[0]["message"]["chat"]["id"].clone();
    let (status, body) = multipart(&world, "sendDocument", &[("chat_id", chat.to_string()), ("caption", "yours".into())], &[("document", "reply.bin", b"bot bytes \x00\x01\x02")]);
    assert_eq!(status, 200, "{body}");
    let message_id = body["result"]["message_id"].as_u64().expect("id");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let got = alice.receive(std::time::Duration::from_secs(5), 1).expect("receive");
        if got.iter().any(|m| m.message_id == message_id && m.media.is_some()) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the bot's file did not arrive");
    }
    let out = dir.path().join("from-bot.bin");
    let n = alice.download(&bot, message_id, &out).expect("download");
    assert_eq!(n, 13);
    assert_eq!(std::fs::read(&out).expect("read"), b"bot bytes \x00\x01\x02");

    // Nothing inside the profile directory is sent or written: its database is opened by
    // SQLite alone, never replaced by a download, never handed to a peer.
    let database = alice.dir().join("profile.db");
    let refused = alice.send_file(&bot, &database, None, "").expect_err("the profile's database is never sent");
    assert!(refused.to_string().contains("inside the profile directory"), "{refused}");
    let before = std::fs::metadata(&database).expect("database").len();
    let refused = alice.download(&bot, message_id, &database).expect_err("a download never replaces the database");
    assert!(refused.to_string().contains("inside the profile directory"), "{refused}");
    assert!(alice.download(&bot, message_id, &alice.dir().join("other.bin")).is_err(), "nor lands anywhere in the profile");
    assert_eq!(std::fs::metadata(&database).expect("database").len(), before);
    assert!(!alice.dir().join("other.bin").exists());
}

/// The platform dies while the gateway fetches a file: the download is an error and not one
/// byte of plaintext is served. The kill is timed by the gateway's own temporary file (an
/// unlinked descriptor appears in /proc while the ciphertext is being fetched).
#[test]
fn a_platform_killed_mid_download_serves_no_plaintext() {
    let mut world = World::start("dying_platform_bot");
    let alice = world.user("alice");
    let bot = format!("@{}", world.bot_username());
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("big.bin");
    let marker = b"plaintext-marker-mid-download-5e1a";
    let mut bytes: Vec<u8> = (0..50 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    bytes[..marker.len()].copy_from_slice(marker);
    std::fs::write(&path, &bytes).expect("write");
    alice.send_file(&bot, &path, None, "").expect("send-file");
    let updates = world.gateway.poll_until(0, 1);
    let file_id = updates[0]["message"]["document"]["file_id"].as_str().expect("file_id").to_string();
    let (status, body) = world.gateway.call("getFile", json!({ "file_id": file_id }));
    assert_eq!(status, 200, "{body}");
    let url = format!("{}/file/bot{}/{}", world.gateway.base, world.gateway.token, body["result"]["file_path"].as_str().expect("path"));

    let gateway_pid = world.gateway.proc.child.id();
    let fetching = std::thread::spawn(move || get(&url));
    // Wait (bounded) for the gateway's unlinked temporary file: the fetch has begun.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut seen = false;
    while !seen && std::time::Instant::now() < deadline {
        seen = std::fs::read_dir(format!("/proc/{gateway_pid}/fd"))
            .map(|d| {
                d.flatten().any(|e| {
                    std::fs::read_link(e.path()).is_ok_and(|t| {
                        let t = t.to_string_lossy();
                        t.contains(".file-") && t.ends_with("(deleted)")
                    })
                })
            })
            .unwrap_or(false);
        if !seen {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    assert!(seen, "the gateway never started fetching the file");
    world.platform.proc.kill();
    let (status, got) = fetching.join().expect("the download thread");
    assert!(status >= 500, "an error status, got {status}");
    assert!(got.len() < 4096, "an error body, not a file ({} bytes)", got.len());
    assert!(!got.windows(marker.len()).any(|w| w == marker), "no plaintext in the answer");
    let v: Value = serde_json::from_slice(&got).expect("a JSON error");
    assert_eq!(v["ok"], false);
}

/// A file its sender declares as HTML is downloaded so that no browser runs it: the page would
/// run on the origin whose URL holds the bot's token (issue 25, case 6). An inert type keeps its
/// type; both come as attachments, unsniffed and sandboxed.
#[test]
fn a_downloaded_html_file_is_never_run_by_a_browser() {
    let world = World::start("html_bot");
    let alice = world.user("alice");
    let bot = format!("@{}", world.bot_username());
    send_file(&alice, &bot, Kind::DOCUMENT, "text/html", "page.html", b"<script>alert(document.URL)</script>", "");
    send_file(&alice, &bot, Kind::DOCUMENT, "application/pdf", "report 1.pdf", b"%PDF-1.4 not really", "");
    let updates = world.gateway.poll_until(0, 2);
    for (update, served, name) in [(&updates[0], "application/octet-stream", "page.html"), (&updates[1], "application/pdf", "report_1.pdf")] {
        let file_id = update["message"]["document"]["file_id"].as_str().expect("file_id");
        let (status, body) = world.gateway.call("getFile", json!({ "file_id": file_id }));
        assert_eq!(status, 200, "{body}");
        let url = format!("{}/file/bot{}/{}", world.gateway.base, world.gateway.token, body["result"]["file_path"].as_str().expect("path"));
        let resp = ureq::get(&url).timeout(Duration::from_secs(60)).call().expect("download");
        assert_eq!(resp.header("Content-Type"), Some(served), "{name}");
        assert_eq!(resp.header("X-Content-Type-Options"), Some("nosniff"));
        assert_eq!(resp.header("Content-Disposition"), Some(format!("attachment; filename=\"{name}\"").as_str()));
        assert_eq!(resp.header("Content-Security-Policy"), Some("sandbox"));
    }
}
