//! The chat view as JSON, for the web page (`chat::web`): the same model the terminal draws,
//! so the two front ends show one truth. Texts go out as they arrived (no terminal escaping):
//! the page sets them as text, never as HTML, and draws formatting from the entities.

use serde_json::{json, Value};

use super::{Conversation, Entry, Message, SendState, View};
use crate::client::message::MediaInfo;
use crate::client::places::{PollInfo, Shared};

impl View {
    /// The conversations (name, unread count, key) and the open one whole: its entries, its
    /// reply keyboard and the words about its peer; whether the stream is down, and the hint.
    pub fn to_json(&self) -> Value {
        let conversations: Vec<Value> = self
            .convs
            .iter()
            .enumerate()
            .map(|(i, c)| json!({ "key": key_text(c), "name": c.name, "switch_to": switch_to(c), "unread": c.unread, "open": i == self.current }))
            .collect();
        let conv = self.current();
        json!({
            "own": self.own,
            "about": self.about_peer,
            "lost": self.lost,
            "hint": self.hint,
            "conversations": conversations,
            "open": {
                "key": key_text(conv),
                "name": conv.name,
                "entries": conv.entries.iter().map(|e| entry_json(conv, e)).collect::<Vec<_>>(),
                "reply_keyboard": conv.reply_keyboard.as_ref().map(|k| json!({
                    "rows": k.rows.iter().map(|row| row.iter().map(|b| b.text.as_str()).collect::<Vec<_>>()).collect::<Vec<_>>(),
                    "one_time": k.one_time,
                    "placeholder": k.placeholder,
                })),
                "inline": conv.inline.as_ref().map(|(session, results)| json!({
                    "session": session,
                    "results": results.iter().map(|r| json!({
                        "id": r.id,
                        "kind": r.kind,
                        "title": r.title,
                        "description": r.description,
                        "text": r.text,
                    })).collect::<Vec<_>>(),
                })),
            },
        })
    }
}

fn key_text(c: &Conversation) -> String {
    match &c.key {
        super::ChatKey::User(id) => format!("user:{id}"),
        super::ChatKey::Group(id) => format!("group:{}", id.hex()),
    }
}

/// What `/switch` takes to open it: `@name`, or a group's id.
fn switch_to(c: &Conversation) -> String {
    match &c.key {
        super::ChatKey::User(_) => c.name.clone(),
        super::ChatKey::Group(id) => id.hex(),
    }
}

fn entry_json(conv: &Conversation, entry: &Entry) -> Value {
    match entry {
        Entry::Note { time, text, style } => json!({ "note": text, "time": time, "alert": *style == super::Style::ALERT }),
        Entry::Message { time, message } => message_json(conv, *time, message),
    }
}

fn message_json(conv: &Conversation, time: i64, m: &Message) -> Value {
    let (state, failed) = match &m.state {
        None => (None, None),
        Some(SendState::Pending) => (Some("pending"), None),
        Some(SendState::Waiting) => (Some("waiting"), None),
        Some(SendState::Sent) => (Some("sent"), None),
        Some(SendState::Failed(why)) => (Some("failed"), Some(why.as_str())),
    };
    let quote = m.reply_to.map(|r| match conv.message(r) {
        Some(q) => json!({ "id": r, "from": q.from.as_deref().unwrap_or("you"), "text": super::first_line(&q.text) }),
        None => json!({ "id": r }),
    });
    let mut number = 0;
    let keyboard: Vec<Vec<Value>> = m
        .keyboard
        .iter()
        .map(|row| {
            row.iter()
                .map(|b| {
                    number += 1;
                    json!({ "n": number, "text": b.text, "url": Some(&b.url).filter(|u| !u.is_empty()) })
                })
                .collect()
        })
        .collect();
    json!({
        "time": time,
        "id": m.id,
        "from": m.from,
        "text": m.text,
        "entities": m.entities.iter().map(|e| json!({ "type": e.kind, "offset": e.offset, "length": e.length, "url": e.url })).collect::<Vec<_>>(),
        "quote": quote,
        "keyboard": keyboard,
        "about": m.about,
        "state": state,
        "failed": failed,
        "edited": m.edited,
        "deleted": m.deleted,
        "media": m.media.as_ref().map(media_json),
        "poll": match &m.shared {
            Some(Shared::Poll(p)) => Some(poll_json(p)),
            _ => None,
        },
        "voted": m.voted,
        "contact": match &m.shared {
            Some(Shared::Contact(c)) => Some(json!({
                "first_name": c.first_name,
                "last_name": c.last_name,
                "phone_number": c.phone_number,
                "user_id": Some(c.user_id).filter(|&u| u != 0),
            })),
            _ => None,
        },
        // A point the page links to a map (the text says it in words).
        "location": match &m.shared {
            Some(Shared::Location(l)) => Some(json!({ "latitude": l.latitude, "longitude": l.longitude })),
            Some(Shared::Venue(v)) => Some(json!({ "latitude": v.location.latitude, "longitude": v.location.longitude })),
            _ => None,
        },
    })
}

fn media_json(media: &MediaInfo) -> Value {
    json!({
        "kind": media.kind.name(),
        "file_name": media.file_name,
        "mime_type": media.mime_type,
        "size": media.size,
        "width": media.width,
        "height": media.height,
        "album": Some(&media.media_group_id).filter(|a| !a.is_empty()),
    })
}

fn poll_json(p: &PollInfo) -> Value {
    json!({
        "question": p.question,
        "options": p.options.iter().map(|(text, voters)| json!({ "text": text, "voters": voters })).collect::<Vec<_>>(),
        "quiz": p.quiz,
        "multiple": p.allows_multiple_answers,
        "closed": p.is_closed,
        "total": p.total_voter_count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::message::{Button, Entity, Incoming, ReceivedMessage};
    use crate::client::tui::view::ChatKey;

    #[test]
    fn the_page_gets_the_open_conversation_as_the_terminal_has_it() {
        let mut view = View::new("alice", ChatKey::User(7), "@bot", "bot @bot");
        let mut m = ReceivedMessage::sample("bot", 5, "<b>hi</b> there");
        m.entities = vec![Entity::new("bold", 0, 9)];
        m.keyboard = vec![vec![Button { text: "Go".into(), callback_data: "go".into(), url: String::new() }]];
        view.incoming(&Incoming::Message(m), "bot", 100);
        view.typed(1, "answer", Some(5), 101);
        view.settle(1, SendState::Failed("refused".into()), None);
        view.incoming(&Incoming::Deleted { chat_id: 7, message_id: 5 }, "bot", 102);

        let json = view.to_json();
        assert_eq!(json["conversations"][0]["switch_to"], "@bot");
        assert_eq!(json["open"]["key"], "user:7");
        let entries = json["open"]["entries"].as_array().expect("entries");
        let received = &entries[0];
        assert_eq!(received["text"], "<b>hi</b> there", "text goes out as it came; the page sets it as text");
        assert_eq!(received["from"], "@bot");
        assert_eq!(received["entities"][0]["type"], "bold");
        assert_eq!(received["deleted"], true);
        assert_eq!(received["keyboard"], json!([]), "a deleted message's buttons are gone");
        let own = &entries[1];
        assert_eq!((own["state"].as_str(), own["failed"].as_str()), (Some("failed"), Some("refused")));
        assert_eq!(own["quote"]["id"], 5);
        assert_eq!(own["from"], Value::Null);
    }

    #[test]
    fn our_files_and_shared_contacts_go_out_whole() {
        use crate::client::places::ContactCard;
        let mut view = View::new("alice", ChatKey::User(7), "@bot", "bot @bot");
        let mut photo = ReceivedMessage::sample("alice", 8, "");
        photo.media = Some(MediaInfo {
            kind: crate::e2e::file::MediaKind::Photo,
            file_name: "cat.png".into(),
            mime_type: "image/png".into(),
            size: 10,
            width: 4,
            height: 3,
            duration: 0,
            caption: "look".into(),
            caption_entities: Vec::new(),
            media_group_id: String::new(),
        });
        view.own_message(&photo);
        let mut card = ReceivedMessage::sample("bot", 9, "");
        card.shared = Some(Shared::Contact(ContactCard { first_name: "Ann".into(), phone_number: "+1 555".into(), user_id: 3, ..Default::default() }));
        view.incoming(&Incoming::Message(card), "bot", 100);

        let json = view.to_json();
        let entries = json["open"]["entries"].as_array().expect("entries");
        assert_eq!((entries[0]["from"].clone(), entries[0]["state"].clone()), (Value::Null, json!("sent")), "ours, sent");
        assert_eq!(entries[0]["media"]["mime_type"], "image/png", "the page draws our photo as it draws theirs");
        assert_eq!(entries[0]["text"], "[photo cat.png] look");
        assert_eq!(entries[1]["contact"], json!({ "first_name": "Ann", "last_name": "", "phone_number": "+1 555", "user_id": 3 }));

        let mut poll = ReceivedMessage::sample("bot", 10, "");
        poll.shared = Some(Shared::Poll(PollInfo::made("Tea?", vec!["Yes".to_string(), "No".to_string()], Vec::new())));
        view.incoming(&Incoming::Message(poll), "bot", 101);
        assert!(view.voted(10, &[1]), "the poll is shown");
        assert!(!view.voted(9, &[0]), "a contact is no poll");
        assert_eq!(view.to_json()["open"]["entries"][2]["voted"], json!([1]));
    }
}
