//! What a profile sends and receives, as the client's callers see it: a sent message's ids, a
//! received message with its sender, entities (with their wire form), keyboard and forward
//! origin, and the other events of a dialog (`Incoming`).

pub use super::shared_item::Shared;
use crate::wire::e2e::content::Body;
use crate::wire::e2e::reaction_type::Kind as WireReactionKind;
use crate::wire::e2e::Content;
use crate::wire::platform::InboxEnvelope;
pub use super::reply_markup::ReplyMarkup;
use crate::wire::e2e::{
    Entity as WireEntity, Media as WireMedia, ForwardOrigin as WireForwardOrigin, InlineKeyboard, ReactionType as WireReactionType,
};

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
#[derive(Clone, Debug, PartialEq)]
pub struct ReceivedMessage {
    /// The dialog: the peer's user id.
    pub chat_id: u64,
    pub sender: Sender,
    pub message_id: u64,
    pub date: i64,
    pub text: String,
    pub entities: Vec<Entity>,
    pub reply_to_message_id: Option<u64>,
    /// Buttons under the message, row by row; empty when it has none.
    pub keyboard: Keyboard,
    /// Set on a forwarded message: who wrote the original, and when.
    pub forward_origin: Option<ForwardOrigin>,
    /// Set on a message sent by choosing a bot's inline result: that bot's user id.
    pub via_bot_user_id: Option<u64>,
    /// Set on a photo, document, audio, video or voice message (its `text` is then empty;
    /// the caption is in here). `Profile::download` fetches the file.
    pub media: Option<MediaInfo>,
    /// A bot's reply keyboard, its removal, or its request for a reply.
    pub reply_markup: Option<ReplyMarkup>,
    /// Set on a location, venue, contact or dice message (its `text` is then empty).
    pub shared: Option<Shared>,
}

#[cfg(test)]
impl ReceivedMessage {
    /// A plain text message from bot `username` (user and chat 7), for tests to build on.
    pub(crate) fn sample(username: &str, message_id: u64, text: &str) -> ReceivedMessage {
        ReceivedMessage {
            chat_id: 7,
            sender: Sender { user_id: 7, username: username.into(), display_name: "D".into(), is_bot: true },
            message_id,
            date: 0,
            text: text.into(),
            entities: vec![],
            reply_to_message_id: None,
            keyboard: vec![],
            forward_origin: None,
            via_bot_user_id: None,
            media: None,
            reply_markup: None,
            shared: None,
        }
    }
}

pub use crate::e2e::file::MediaKind;

/// What a received file message says about its file (never its key or reference).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MediaInfo {
    pub kind: MediaKind,
    pub file_name: String,
    pub mime_type: String,
    /// Plaintext bytes.
    pub size: u64,
    /// 0 when unknown or not applicable.
    pub width: u32,
    pub height: u32,
    /// Seconds; 0 when unknown or not applicable.
    pub duration: u32,
    pub caption: String,
    pub caption_entities: Vec<Entity>,
    /// The album the message belongs to; empty when it is alone.
    pub media_group_id: String,
}

impl MediaInfo {
    pub(crate) fn from_wire(m: &WireMedia) -> MediaInfo {
        // A kind from a newer release is shown as what every file is: a document.
        let kind = MediaKind::of(m);
        let caption = m.caption.as_ref();
        MediaInfo {
            kind,
            file_name: m.file_name.clone(),
            mime_type: m.mime_type.clone(),
            size: m.size,
            width: m.width,
            height: m.height,
            duration: m.duration,
            caption: caption.map(|c| c.text.clone()).unwrap_or_default(),
            caption_entities: caption.map(|c| c.entities.iter().map(Entity::from_wire).collect()).unwrap_or_default(),
            media_group_id: String::new(),
        }
    }

    /// The file of a media message with the album it belongs to.
    pub(crate) fn of_content(content: &Content) -> Option<MediaInfo> {
        content.has_media().then(|| MediaInfo { media_group_id: content.media_group_id.clone(), ..MediaInfo::from_wire(content.media()) })
    }
}

/// One article of a bot's inline results.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InlineResult {
    pub id: String,
    /// The Bot API result type: "article", "photo", "document", ...
    pub kind: String,
    pub title: String,
    pub description: String,
    /// The message text a choice sends (a file's caption, for a file).
    pub text: String,
    pub entities: Vec<Entity>,
    /// The file a choice sends (a cached result), if any.
    pub media: Option<MediaInfo>,
    /// The bot's buttons under the message a choice sends.
    pub keyboard: Keyboard,
}

/// The button a bot shows above its inline results: it opens the bot's dialog with
/// `/start <start_parameter>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResultsButton {
    pub text: String,
    pub start_parameter: String,
}

/// Rows of inline buttons.
pub type Keyboard = Vec<Vec<Button>>;

/// An inline button of a bot's message: a callback button (`callback_data`) or a link
/// (`url`); the other is empty.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Button {
    pub text: String,
    pub callback_data: String,
    pub url: String,
}

/// Where a forwarded message's original comes from: its author, or a channel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ForwardOrigin {
    pub sender_user_id: u64,
    pub sender_username: String,
    pub sender_first_name: String,
    pub sender_is_bot: bool,
    /// When the original was sent (unix seconds).
    pub date: i64,
    /// Set when the original is a channel's post (the sender fields are then empty): the
    /// channel's title and the post's id there.
    pub channel: Option<(String, u64)>,
}

/// One reaction as the Bot API names its kinds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReactionType {
    Emoji(String),
    CustomEmoji(String),
    Paid,
}

/// Everything that can arrive in a dialog: a message, or something done to one (or to the
/// dialog) that takes no place in its history.
#[derive(Clone, Debug, PartialEq)]
pub enum Incoming {
    Message(ReceivedMessage),
    /// The peer changed one of its messages; text, entities and keyboard are the whole new ones
    /// (an empty keyboard: the buttons are gone); `shared` is the location as it is now when a
    /// live location moved or stopped.
    Edited {
        chat_id: u64,
        message_id: u64,
        edit_date: i64,
        text: String,
        entities: Vec<Entity>,
        keyboard: Keyboard,
        shared: Option<Shared>,
    },
    /// The peer removed one of its messages.
    Deleted { chat_id: u64, message_id: u64 },
    /// The peer's reactions to a message now (empty: removed).
    Reaction { chat_id: u64, message_id: u64, from: Sender, reactions: Vec<ReactionType> },
    /// "… is typing" and the like.
    ChatAction { chat_id: u64, from: Sender, action: String },
    /// "… is typing" and the like, in a group (a bot's `sendChatAction` to it).
    GroupChatAction { group: GroupRef, from: Sender, action: String },
    /// A bot's answer to one of our presses.
    CallbackAnswer { chat_id: u64, press_id: String, text: String, show_alert: bool, url: String },
    /// A bot's (latest) results for one of our inline sessions.
    InlineResults { chat_id: u64, session_id: u64, results: Vec<InlineResult>, button: Option<ResultsButton> },
    /// A message in a group: `message.chat_id` is 0 (a group is no dialog), its sender and ids
    /// (per group) as for a private message.
    GroupMessage { group: GroupRef, message: ReceivedMessage },
    /// This device joined a group from a Welcome (someone added us).
    GroupJoined { group: GroupRef },
    /// A commit changed the group's MLS tree: the devices it added (an external joiner too) and
    /// removed, and the epoch it started.
    /// `removed_me`: this device is out of the group and forgot it.
    GroupCommit { group: GroupRef, added: Vec<(u64, u32)>, removed: Vec<(u64, u32)>, removed_me: bool, epoch: u64 },
    /// A user's role changed (invited, joined, left, banned, restricted, promoted), by
    /// `actor`; `invite_link` is the link of a join by link ("" otherwise).
    GroupMembership { group: GroupRef, user: Sender, old: GroupRole, new: GroupRole, actor: Sender, invite_link: String },
    /// The group's title changed (`group.title` is the new one), by `actor`.
    GroupTitle { group: GroupRef, actor: Sender },
    /// `user` asks to join by `invite_link` (told to the owner and the administrators who may
    /// invite).
    JoinRequest { group: GroupRef, user: Sender, invite_link: String },
    /// Our request to join was declined, by `by`.
    JoinDeclined { group: GroupRef, by: Sender },
    /// A message of the group was deleted for everyone, by `actor`.
    GroupDeleted { group: GroupRef, message_id: u64, actor: Sender },
    /// A member (`from`) changed one of their group messages; text, entities and keyboard are
    /// the whole new ones.
    GroupEdited {
        group: GroupRef,
        message_id: u64,
        from: Sender,
        edit_date: i64,
        text: String,
        entities: Vec<Entity>,
        keyboard: Keyboard,
        shared: Option<Shared>,
    },
    /// A group delivery brought a leaf this device does not trust (`e2e::leaf`): the platform,
    /// or a member, tried to add a device nobody vouched for. Nothing of it was kept. `user_id`
    /// and `device_id` are what the leaf claims; `text` says why it was refused.
    SecurityAlert { group: Option<GroupRef>, user_id: u64, device_id: u32, text: String },
}

pub use crate::wire::platform::GroupRole;

/// A group as events name it: its 32-byte id and its title when the event arrived.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupRef {
    pub id: GroupId,
    pub title: String,
    /// A channel (its messages are posts), not a group.
    pub channel: bool,
}

/// A group's 32-byte id; shown (and typed) as 64 hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GroupId(pub [u8; 32]);

impl GroupId {
    /// Exactly 32 bytes, or `None`.
    pub fn from_slice(bytes: &[u8]) -> Option<GroupId> {
        bytes.try_into().ok().map(GroupId)
    }

    pub fn hex(&self) -> String {
        crate::crypto::hex_encode(&self.0)
    }
}

impl std::fmt::Display for GroupId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.hex())
    }
}

/// A role as the commands print it: owner, administrator, member, restricted, left, banned,
/// invited.
pub fn role_name(role: GroupRole) -> &'static str {
    match role {
        GroupRole::OWNER => "owner",
        GroupRole::ADMINISTRATOR => "administrator",
        GroupRole::MEMBER => "member",
        GroupRole::RESTRICTED => "restricted",
        GroupRole::LEFT => "left",
        GroupRole::BANNED => "banned",
        GroupRole::INVITED => "invited",
    }
}

impl Incoming {
    /// The dialog this happened in; 0 for a group's events (`group()` names the group).
    pub fn chat_id(&self) -> u64 {
        match self {
            Incoming::Message(m) => m.chat_id,
            Incoming::Edited { chat_id, .. }
            | Incoming::Deleted { chat_id, .. }
            | Incoming::Reaction { chat_id, .. }
            | Incoming::ChatAction { chat_id, .. }
            | Incoming::CallbackAnswer { chat_id, .. }
            | Incoming::InlineResults { chat_id, .. } => *chat_id,
            Incoming::GroupMessage { .. }
            | Incoming::GroupJoined { .. }
            | Incoming::GroupCommit { .. }
            | Incoming::GroupMembership { .. }
            | Incoming::GroupTitle { .. }
            | Incoming::JoinRequest { .. }
            | Incoming::JoinDeclined { .. }
            | Incoming::GroupDeleted { .. }
            | Incoming::GroupEdited { .. } => 0,
            | Incoming::GroupChatAction { .. } => 0,
            Incoming::SecurityAlert { .. } => 0,
        }
    }

    /// The group this happened in, for a group's events.
    pub fn group(&self) -> Option<&GroupRef> {
        match self {
            Incoming::GroupMessage { group, .. }
            | Incoming::GroupJoined { group }
            | Incoming::GroupCommit { group, .. }
            | Incoming::GroupMembership { group, .. }
            | Incoming::GroupTitle { group, .. }
            | Incoming::JoinRequest { group, .. }
            | Incoming::JoinDeclined { group, .. }
            | Incoming::GroupDeleted { group, .. }
            | Incoming::GroupEdited { group, .. } => Some(group),
            | Incoming::GroupChatAction { group, .. } => Some(group),
            Incoming::SecurityAlert { group, .. } => group.as_ref(),
            _ => None,
        }
    }
}

/// What a press sent: its id (the answer names it) and the envelope's ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentPress {
    pub press_id: String,
    pub sent: SentMessage,
}

/// The buttons of a wire keyboard (absent: none).
pub(crate) fn keyboard_from_wire(k: Option<&InlineKeyboard>) -> Keyboard {
    k.map(|k| {
        k.rows
            .iter()
            .map(|row| {
                row.buttons
                    .iter()
                    .map(|b| Button { text: b.text.clone(), callback_data: b.callback_data.clone(), url: b.url.clone() })
                    .collect()
            })
            .collect()
    })
    .unwrap_or_default()
}

impl ForwardOrigin {
    pub(crate) fn from_wire(o: &WireForwardOrigin) -> ForwardOrigin {
        ForwardOrigin {
            sender_user_id: o.sender_user_id,
            sender_username: o.sender_username.clone(),
            sender_first_name: o.sender_first_name.clone(),
            sender_is_bot: o.sender_is_bot,
            date: o.date,
            channel: (o.channel_chat_id != 0).then(|| (o.channel_title.clone(), o.channel_message_id)),
        }
    }
}

impl ReactionType {
    /// `None` for a kind this release does not know.
    pub(crate) fn from_wire(r: &WireReactionType) -> Option<ReactionType> {
        match r.kind.as_ref()? {
            WireReactionKind::Emoji(e) => Some(ReactionType::Emoji(e.clone())),
            WireReactionKind::CustomEmojiId(id) => Some(ReactionType::CustomEmoji(id.clone())),
            WireReactionKind::Paid(_) => Some(ReactionType::Paid),
        }
    }

    pub(crate) fn to_wire(&self) -> WireReactionType {
        let mut r = WireReactionType::new();
        match self {
            ReactionType::Emoji(e) => r.set_emoji(e.clone()),
            ReactionType::CustomEmoji(id) => r.set_custom_emoji_id(id.clone()),
            ReactionType::Paid => r.set_paid(true),
        }
        r
    }
}

/// The text of a text message, or the caption of a file message (what an edit shows).
pub(super) fn text_of(content: &Content) -> (String, Vec<Entity>) {
    let text = match content.body.as_ref() {
        Some(Body::Text(t)) => Some(t),
        Some(Body::Media(m)) => m.caption.as_ref(),
        _ => None,
    };
    match text {
        Some(t) => (t.text.clone(), t.entities.iter().map(Entity::from_wire).collect()),
        None => (String::new(), Vec::new()),
    }
}

/// The sender of an envelope as events show it.
pub(super) fn sender(envelope: &InboxEnvelope) -> Sender {
    Sender {
        user_id: envelope.sender_user_id,
        username: envelope.sender_username.clone(),
        display_name: envelope.sender_display_name.clone(),
        is_bot: envelope.sender_is_bot,
    }
}

/// A received text or file message: the envelope's ids and sender, the content's text or file.
pub(super) fn received_message(envelope: &InboxEnvelope, content: &Content) -> ReceivedMessage {
    message_of(envelope.sender_user_id, sender(envelope), envelope.message_id, envelope.date, content)
}

/// A message of dialog `chat_id` from `sender`, as `content` says it (one arriving, or one
/// the profile remembers).
pub(super) fn message_of(chat_id: u64, sender: Sender, message_id: u64, date: i64, content: &Content) -> ReceivedMessage {
    // A file message's caption is in `media`, as the Bot API keeps `caption` apart from `text`.
    let media = MediaInfo::of_content(content);
    let (text, entities) = if media.is_some() { (String::new(), Vec::new()) } else { text_of(content) };
    ReceivedMessage {
        chat_id,
        sender,
        message_id,
        date,
        text,
        entities,
        reply_to_message_id: (content.reply_to_message_id != 0).then_some(content.reply_to_message_id),
        keyboard: keyboard_from_wire(content.keyboard.as_ref()),
        forward_origin: content.forward_origin.as_ref().map(ForwardOrigin::from_wire),
        via_bot_user_id: (content.via_bot_user_id != 0).then_some(content.via_bot_user_id),
        media,
        reply_markup: ReplyMarkup::of(content),
        shared: Shared::from_content(content),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::platform::InboxEnvelope;

    #[test]
    fn message_fields_come_from_envelope_and_content() {
        let mut env = InboxEnvelope::new();
        env.sender_user_id = 9;
        env.sender_username = "somebot".into();
        env.sender_is_bot = true;
        env.message_id = 3;
        env.date = 1_700_000_000;
        let mut content = Content::new();
        let mut t = crate::wire::e2e::Text::new();
        t.text = "hi".into();
        t.entities.push(Entity::new("bold", 0, 2).to_wire());
        content.set_text(t);
        content.reply_to_message_id = 2;
        let m = received_message(&env, &content);
        assert_eq!(m.chat_id, 9);
        assert!(m.sender.is_bot);
        assert_eq!(m.text, "hi");
        assert_eq!(m.entities, vec![Entity::new("bold", 0, 2)]);
        assert_eq!(m.reply_to_message_id, Some(2));
        content.reply_to_message_id = 0;
        assert_eq!(received_message(&env, &content).reply_to_message_id, None);
    }
}
