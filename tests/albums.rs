//! End to end: the media kinds of issue 27 in private dialogs. Animations, video notes and
//! stickers by upload and by file_id; albums (sendMediaGroup with `attach://` parts, and a
//! person's album sent with the client), sharing one `media_group_id` on both sides;
//! editMessageMedia replacing a file the person sees replaced; a `thumbnail` part accepted and
//! ignored. Real binaries on loopback.

mod support;

use std::time::{Duration, Instant};

use bot_gateway::client::{Incoming, MediaKind, ReceivedMessage};
use serde_json::{json, Value};
use support::World;

fn multipart(world: &World, method: &str, fields: &[(&str, String)], files: &[(&str, &str, &[u8])]) -> (u16, Value) {
    world.gateway.multipart(method, fields, files)
}

/// The messages the person receives until `n` have arrived (bounded).
fn receive(user: &bot_gateway::client::Profile, n: usize) -> Vec<ReceivedMessage> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut got = Vec::new();
    while got.len() < n {
        assert!(Instant::now() < deadline, "only {} of {n} messages arrived", got.len());
        user.receive_events_with(Duration::from_secs(5), n - got.len(), |e| {
            if let Incoming::Message(m) = e {
                got.push(m.clone());
            }
        })
        .expect("receive");
    }
    got
}

#[test]
fn animations_video_notes_stickers_and_albums_travel_both_ways() {
    let world = World::start("album_bot");
    let alice = world.user("alice");
    let bot = format!("@{}", world.bot_username());
    let dir = tempfile::tempdir().expect("dir");
    alice.send_text(&bot, "hi").expect("hi");
    let updates = world.gateway.poll_until(0, 1);
    let chat = updates[0]["message"]["chat"]["id"].clone();

    // sendAnimation / sendVideoNote / sendSticker by upload, with a thumbnail part ignored.
    let cases: [(&str, &str, &str, &[u8]); 3] =
        [("sendAnimation", "animation", "hi.gif", b"GIF89a-bytes"), ("sendVideoNote", "video_note", "round.mp4", b"round-video"), ("sendSticker", "sticker", "s.webp", b"RIFF-webp")];
    let mut ids = Vec::new();
    for (method, field, name, bytes) in cases {
        let mut fields = vec![("chat_id", chat.to_string()), ("thumbnail", "attach://thumb".to_string())];
        match field {
            "video_note" => fields.extend([("length", "240".to_string()), ("duration", "3".to_string())]),
            "sticker" => fields.push(("emoji", "🙂".to_string())),
            _ => fields.extend([("caption", "a gif".to_string()), ("width", "32".to_string()), ("height", "16".to_string())]),
        }
        let (status, body) = multipart(&world, method, &fields, &[(field, name, bytes), ("thumb", "t.jpg", b"thumbnail")]);
        assert_eq!(status, 200, "{method}: {body}");
        let m = &body["result"][field];
        assert_eq!(m["file_size"].as_u64(), Some(bytes.len() as u64), "{method}: {body}");
        match field {
            "animation" => {
                assert_eq!((m["width"].as_u64(), m["height"].as_u64(), m["duration"].as_u64()), (Some(32), Some(16), Some(0)));
                assert_eq!(body["result"]["document"]["file_id"], m["file_id"], "an animation is also a document");
                assert_eq!(body["result"]["caption"], "a gif");
            }
            "video_note" => assert_eq!((m["length"].as_u64(), m["duration"].as_u64()), (Some(240), Some(3))),
            _ => assert_eq!((m["type"].as_str(), m["is_animated"].as_bool(), m["emoji"].as_str()), (Some("regular"), Some(false), Some("🙂"))),
        }
        ids.push(m["file_id"].as_str().expect("file_id").to_string());
    }
    let kinds: Vec<MediaKind> = receive(&alice, 3).iter().map(|m| m.media.as_ref().expect("a file").kind).collect();
    assert_eq!(kinds, vec![MediaKind::Animation, MediaKind::VideoNote, MediaKind::Sticker]);
    // ... and by file_id again.
    let (status, body) = world.gateway.call("sendSticker", json!({"chat_id": chat, "sticker": ids[2]}));
    assert_eq!((status, body["result"]["sticker"]["file_id"].as_str()), (200, Some(ids[2].as_str())), "{body}");
    receive(&alice, 1);

    // sendMediaGroup: two uploaded photos and a video by attach://, each its own caption.
    let media = json!([
        {"type": "photo", "media": "attach://p1", "caption": "<b>one</b>", "parse_mode": "HTML"},
        {"type": "photo", "media": "attach://p2", "caption": "two", "thumbnail": "attach://t"},
        {"type": "video", "media": "attach://v", "caption": "three", "width": 64, "height": 48, "duration": 2},
    ]);
    let (status, body) = multipart(
        &world,
        "sendMediaGroup",
        &[("chat_id", chat.to_string()), ("media", media.to_string())],
        &[("p1", "1.jpg", b"photo one"), ("p2", "2.jpg", b"photo two"), ("v", "v.mp4", b"video three"), ("t", "t.jpg", b"thumb")],
    );
    assert_eq!(status, 200, "{body}");
    let sent = body["result"].as_array().expect("a list of Messages").clone();
    assert_eq!(sent.len(), 3);
    let group = sent[0]["media_group_id"].as_str().expect("media_group_id").to_string();
    assert!(sent.iter().all(|m| m["media_group_id"] == group.as_str()), "{sent:?}");
    assert_eq!((sent[0]["caption"].as_str(), sent[0]["caption_entities"][0]["type"].as_str()), (Some("one"), Some("bold")));
    assert!(sent[2]["video"]["file_id"].is_string());
    let got = receive(&alice, 3);
    let shown: Vec<(String, String)> =
        got.iter().map(|m| m.media.as_ref().map(|f| (f.caption.clone(), f.media_group_id.clone())).expect("file")).collect();
    assert_eq!(shown, vec![("one".into(), group.clone()), ("two".into(), group.clone()), ("three".into(), group.clone())]);
    // The album's rules: 2-10 items; documents only with documents.
    for (media, needle) in [
        (json!([{"type": "photo", "media": ids[2]}]), "2 to 10 items"),
        (json!([{"type": "photo", "media": ids[2]}, {"type": "document", "media": ids[2]}]), "can't hold other kinds"),
        (json!([{"type": "animation", "media": ids[0]}, {"type": "photo", "media": ids[2]}]), "media[0].type \"animation\" is not one of"),
        (json!([{"type": "photo", "media": "attach://nope"}, {"type": "photo", "media": ids[2]}]), "media[0].media: attach://nope names no file part"),
    ] {
        let (status, body) = world.gateway.call("sendMediaGroup", json!({"chat_id": chat, "media": media}));
        assert_eq!(status, 400, "{body}");
        assert!(body["description"].as_str().unwrap_or("").contains(needle), "{needle}: {body}");
    }

    // editMessageMedia: the first photo becomes the sticker's file; the person sees it.
    let first_id = sent[0]["message_id"].as_u64().expect("id");
    let (status, body) = world.gateway.call(
        "editMessageMedia",
        json!({"chat_id": chat, "message_id": first_id, "media": {"type": "video", "media": ids[1], "caption": "now a video"}}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!((body["result"]["video"]["file_id"].as_str(), body["result"]["caption"].as_str()), (Some(ids[1].as_str()), Some("now a video")));
    assert!(body["result"]["edit_date"].is_i64());
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut edited = None;
    while edited.is_none() {
        assert!(Instant::now() < deadline, "the media edit did not reach the person");
        alice
            .receive_events_with(Duration::from_secs(5), 1, |e| {
                if let Incoming::Edited { message_id, text, .. } = e {
                    if *message_id == first_id {
                        edited = Some(text.clone());
                    }
                }
            })
            .expect("receive");
    }
    assert_eq!(edited.as_deref(), Some("now a video"));
    let out = dir.path().join("edited.bin");
    alice.download(&bot, first_id, &out).expect("download the new file");
    assert_eq!(std::fs::read(&out).expect("read"), b"round-video", "the edited message carries the new file");
    // An album's photo cannot become a document.
    let (status, body) = world.gateway.call(
        "editMessageMedia",
        json!({"chat_id": chat, "message_id": sent[1]["message_id"], "media": {"type": "document", "media": ids[0]}}),
    );
    assert_eq!(status, 400, "{body}");
    assert!(body["description"].as_str().unwrap_or("").contains("an album's photo can't become a document"), "{body}");

    // The person's album: the bot gets one message per file, one media_group_id.
    let paths: Vec<_> = ["a.png", "b.png"]
        .iter()
        .map(|n| {
            let p = dir.path().join(n);
            std::fs::write(&p, format!("bytes of {n}")).expect("write");
            p
        })
        .collect();
    let sent = alice.send_album(&bot, &paths, None, "our trip").expect("send an album");
    assert_eq!(sent.len(), 2);
    let updates = world.gateway.poll_until(0, 3);
    let album: Vec<&Value> = updates.iter().filter_map(|u| u.get("message")).filter(|m| m.get("photo").is_some()).collect();
    assert_eq!(album.len(), 2, "{updates:?}");
    let id = album[0]["media_group_id"].as_str().expect("media_group_id");
    assert_eq!(album[1]["media_group_id"], id);
    assert_eq!((album[0]["caption"].as_str(), album[1].get("caption")), (Some("our trip"), None));
}
