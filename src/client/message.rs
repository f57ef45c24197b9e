//! What a profile sends and receives, as the client's callers see it: a sent message's ids, a
//! received message, its sender, and formatting entities (with their wire form).

use crate::wire::e2e::Entity as WireEntity;

/// What the platform assigned to a sent message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SentMessage {
    /// The peer's user id (the dialog).
    pub chat_id: u64,
    pub message_id: u64,
    pub date: i64,
}

/// A formatting entity; offset and length in UTF-16 code units.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Entity {
    /// Bot API entity type: "bold", "italic", "code", "pre", "text_link", ...
    pub kind: String,
    pub offset: u32,
    pub length: u32,
    pub url: Option<String>,
    pub language: Option<String>,
}

impl Entity {
    pub fn new(kind: &str, offset: u32, length: u32) -> Entity {
        Entity { kind: kind.to_string(), offset, length, url: None, language: None }
    }

    pub(crate) fn to_wire(&self) -> WireEntity {
        let mut e = WireEntity::new();
        e.type_ = self.kind.clone();
        e.offset = self.offset;
        e.length = self.length;
        e.url = self.url.clone().unwrap_or_default();
        e.language = self.language.clone().unwrap_or_default();
        e
    }

    pub(crate) fn from_wire(e: &WireEntity) -> Entity {
        let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_string());
        Entity {
            kind: e.type_.clone(),
            offset: e.offset,
            length: e.length,
            url: non_empty(&e.url),
            language: non_empty(&e.language),
        }
    }
}

/// Who sent a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sender {
    pub user_id: u64,
    pub username: String,
    pub display_name: String,
    pub is_bot: bool,
}

/// One decrypted message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReceivedMessage {
    /// The dialog: the peer's user id.
    pub chat_id: u64,
    pub sender: Sender,
    pub message_id: u64,
    pub date: i64,
    pub text: String,
    pub entities: Vec<Entity>,
    pub reply_to_message_id: Option<u64>,
}
