//! The Bot API objects made from stored rows, for the updates and for the methods' results
//! (a stored message as `Message`, a group as `Chat`, a member as `ChatMember`): they read the
//! store and write nothing.

use rusqlite::Connection;

use crate::gateway::botapi::text::entities::command_entities;
use crate::gateway::botapi::types::{
    ButtonView, ChatView, ForwardOriginView, MediaKind, MediaView, MessageView, ReactionView, SharedView, UserView,
};
use crate::gateway::botapi::members::{self, AdminRights, MemberStatus, MemberView};
use crate::gateway::store::{chats, files, groups, polls, Result as StoreResult, StoreError};
use crate::wire::platform::{GroupMember, GroupRole, InviteLink, Profile};
use crate::wire::e2e::content::Body;
use crate::wire::e2e::reaction_type::Kind as ReactionKind;
use crate::wire::e2e::{Content, KeyboardContext, Location, Media, Poll, Reaction};
use crate::wire::places;
use crate::wire::polls as wire_polls;

/// The Bot API message of a private-chat history entry; the reply snapshot is nested one
/// level only (`nest`).
pub fn history_view(
    c: &Connection,
    me: &UserView,
    chat: ChatRef<'_>,
    entry: &chats::HistoryEntry,
    nest: bool,
) -> StoreResult<MessageView> {
    // A channel's posts are the channel's: `sender_chat`, no `from` (as in the Bot API).
    let (from, sender_chat) = match chat {
        ChatRef::Group(g) if g.is_channel() => (None, Some(chat.view())),
        _ if entry.from_bot => (Some(me.clone()), None),
        ChatRef::Private(p) => (Some(chat_user(p)), None),
        ChatRef::Group(_) => (Some(group_user(c, entry.sender_id as u64)?), None),
    };
    let (text, entities) = match &entry.content.body {
        Some(Body::Text(t)) => {
            // PTB and telegraf route commands by a bot_command entity (SDK-COMPAT §8.9).
            let entities = if t.entities.is_empty() && !entry.from_bot {
                command_entities(&t.text)
            } else {
                t.entities.clone()
            };
            (Some(t.text.clone()), entities)
        }
        _ => (None, Vec::new()),
    };
    let (media, caption, caption_entities) = match &entry.content.body {
        Some(Body::Media(m)) => {
            let record = files::by_ref(c, &m.file_ref)?.ok_or_else(|| {
                StoreError::Corrupt(format!("no file_id issued for the file of message {}/{}", entry.chat_id, entry.message_id))
            })?;
            let caption = m.caption.as_ref().filter(|t| !t.text.is_empty());
            (
                Some(media_view(m, &record)),
                caption.map(|t| t.text.clone()),
                caption.map(|t| t.entities.clone()).unwrap_or_default(),
            )
        }
        _ => (None, None, Vec::new()),
    };
    let reply_to_message = match (nest, entry.content.reply_to_message_id) {
        (true, id) if id != 0 => chats::lookup(c, entry.chat_id, id as i64)?
            .map(|r| history_view(c, me, chat, &r, false))
            .transpose()?
            .map(Box::new),
        _ => None,
    };
    Ok(MessageView {
        message_id: entry.message_id,
        date: entry.date,
        chat: chat.view(),
        from,
        sender_chat,
        text,
        entities,
        reply_to_message,
        edit_date: (entry.edit_date != 0).then_some(entry.edit_date),
        forward_origin: forward_origin_view(&entry.content),
        reply_markup: keyboard_view(&entry.content),
        via_bot: (entry.content.via_bot_user_id != 0 && entry.content.via_bot_user_id == me.id as u64).then(|| me.clone()),
        media,
        media_group_id: (!entry.content.media_group_id.is_empty()).then(|| entry.content.media_group_id.clone()),
        caption,
        caption_entities,
        shared: shared_view(c, entry, crate::clock::unix_now())?,
    })
}

/// A poll's Bot API id: its chat and message, which name it for good.
pub fn poll_id(chat_id: i64, message_id: i64) -> String {
    format!("{chat_id}_{message_id}")
}

/// A poll message's poll as it is at `now`: the counts of the votes recorded, closed when
/// stopped or past its close date.
pub fn poll_now(c: &Connection, entry: &chats::HistoryEntry, poll: &Poll, now: i64) -> StoreResult<Poll> {
    let (per_option, voters) = polls::counts(c, entry.chat_id, entry.message_id, poll.options.len())?;
    let mut now_poll = poll.clone();
    for (option, n) in now_poll.options.iter_mut().zip(per_option) {
        option.voter_count = n;
    }
    now_poll.total_voter_count = voters;
    now_poll.is_closed = !wire_polls::is_open(poll, now);
    Ok(now_poll)
}

/// `poll`, counted from the stored votes, as it is once one voter's vote changes from
/// `before` to `after` (none: retracted).
pub fn poll_with_vote(mut poll: Poll, before: Option<&[u32]>, after: &[u32]) -> Poll {
    fn shift(poll: &mut Poll, ids: &[u32], add: bool) {
        for id in ids {
            if let Some(option) = poll.options.get_mut(*id as usize) {
                option.voter_count = if add { option.voter_count + 1 } else { option.voter_count.saturating_sub(1) };
            }
        }
        poll.total_voter_count = if add { poll.total_voter_count + 1 } else { poll.total_voter_count.saturating_sub(1) };
    }
    if let Some(before) = before {
        shift(&mut poll, before, false);
    }
    if !after.is_empty() {
        shift(&mut poll, after, true);
    }
    poll
}

/// The location, venue, contact, dice or poll of a message, as the Bot API shows it at `now`:
/// a live location that stopped or ran out shows as a plain point, a poll with its counts.
pub(super) fn shared_view(c: &Connection, entry: &chats::HistoryEntry, now: i64) -> StoreResult<Option<SharedView>> {
    let date = entry.date;
    let Some(body) = entry.content.body.as_ref() else { return Ok(None) };
    Ok(Some(match body {
        Body::Poll(p) => {
            let mut poll = poll_now(c, entry, p, now)?;
            // The reference shows a quiz's answer in a group only once it is closed, unless
            // the bot sent it; in a private chat with the bot always.
            if !entry.from_bot && entry.chat_id < 0 && !poll.is_closed {
                poll.correct_option_ids.clear();
            }
            SharedView::Poll { id: poll_id(entry.chat_id, entry.message_id), poll }
        }
        Body::Location(l) if places::is_live(l, date, now) => SharedView::Location(Location { live_stopped: false, ..l.clone() }),
        Body::Location(l) => SharedView::Location(Location {
            latitude: l.latitude,
            longitude: l.longitude,
            horizontal_accuracy: l.horizontal_accuracy,
            ..Default::default()
        }),
        Body::Venue(v) => SharedView::Venue(v.clone()),
        Body::Contact(c) => SharedView::Contact(c.clone()),
        Body::Dice(d) => SharedView::Dice(d.clone()),
        _ => return Ok(None),
    }))
}

/// A message's file as the Bot API shows it, under the file_id this gateway issued.
pub(super) fn media_view(m: &Media, record: &files::FileRecord) -> MediaView {
    MediaView {
        kind: MediaKind::of(m),
        file_id: record.file_id.clone(),
        file_unique_id: record.file_unique_id.clone(),
        file_size: m.size,
        width: m.width,
        height: m.height,
        duration: m.duration,
        mime_type: non_empty(&m.mime_type),
        file_name: non_empty(&m.file_name),
        performer: non_empty(&m.performer),
        title: non_empty(&m.title),
        emoji: non_empty(&m.emoji),
    }
}

/// The buttons of a message content.
pub fn keyboard_view(content: &Content) -> Vec<Vec<ButtonView>> {
    content
        .keyboard
        .rows
        .iter()
        .map(|row| {
            row.buttons
                .iter()
                .map(|b| ButtonView { text: b.text.clone(), callback_data: b.callback_data.clone(), url: b.url.clone() })
                .collect()
        })
        .filter(|row: &Vec<ButtonView>| !row.is_empty())
        .collect()
}

/// A forward's origin: a channel's post when the content names a channel, else its author.
pub(super) fn forward_origin_view(content: &Content) -> Option<ForwardOriginView> {
    let o = content.forward_origin.as_ref()?;
    if o.channel_chat_id != 0 {
        return Some(ForwardOriginView::Channel {
            chat: ChatView::Channel { id: o.channel_chat_id, title: o.channel_title.clone(), username: None },
            message_id: o.channel_message_id as i64,
            date: o.date,
        });
    }
    Some(ForwardOriginView::User {
        sender_user: UserView {
            id: o.sender_user_id as i64,
            is_bot: o.sender_is_bot,
            first_name: o.sender_first_name.clone(),
            username: non_empty(&o.sender_username),
        },
        date: o.date,
    })
}

/// The user of a private chat as a Bot API User.
pub(super) fn chat_user(chat: &chats::PrivateChat) -> UserView {
    UserView {
        id: chat.user_id as i64,
        is_bot: false,
        first_name: chat.first_name.clone(),
        username: non_empty(&chat.username),
    }
}

/// The inline message id the buttons of a chosen result were signed for, if it had buttons.
pub(super) fn inline_message_id(content: &Content) -> Option<String> {
    let signed = content.keyboard.context.as_ref()?;
    let context = <KeyboardContext as protobuf::Message>::parse_from_bytes(&signed.context).ok()?;
    (!context.inline_message_id.is_empty()).then_some(context.inline_message_id)
}

pub fn reaction_views(r: &Reaction) -> Vec<ReactionView> {
    r.reactions
        .iter()
        .filter_map(|t| match &t.kind {
            Some(ReactionKind::Emoji(e)) => Some(ReactionView::Emoji(e.clone())),
            Some(ReactionKind::CustomEmojiId(id)) => Some(ReactionView::CustomEmoji(id.clone())),
            Some(ReactionKind::Paid(_)) => Some(ReactionView::Paid),
            None => None,
        })
        .collect()
}

/// The chat a history entry belongs to.
#[derive(Debug, Clone, Copy)]
pub enum ChatRef<'a> {
    Private(&'a chats::PrivateChat),
    Group(&'a groups::GroupChat),
}

impl ChatRef<'_> {
    pub fn view(&self) -> ChatView {
        match self {
            ChatRef::Private(p) => private_chat_view(p),
            ChatRef::Group(g) => group_chat_view(g),
        }
    }
}

/// A group or channel as a Bot API Chat.
pub fn group_chat_view(g: &groups::GroupChat) -> ChatView {
    if g.is_channel() {
        ChatView::Channel { id: g.chat_id, title: g.title.clone(), username: None }
    } else {
        ChatView::Group { id: g.chat_id, title: g.title.clone() }
    }
}

/// A group user as a Bot API User (a user never seen is named by their id).
pub(super) fn group_user(c: &Connection, user_id: u64) -> StoreResult<UserView> {
    Ok(match groups::user(c, user_id)? {
        Some(u) => user_view(&u),
        None => UserView { id: user_id as i64, is_bot: false, first_name: format!("user {user_id}"), username: None },
    })
}

/// A group user as a Bot API User (the username stands in for an empty display name).
pub(super) fn user_view(u: &groups::GroupUser) -> UserView {
    UserView {
        id: u.user_id as i64,
        is_bot: u.is_bot,
        first_name: if u.first_name.is_empty() { u.username.clone() } else { u.first_name.clone() },
        username: non_empty(&u.username),
    }
}

pub(super) fn group_user_of(p: &Profile) -> groups::GroupUser {
    groups::GroupUser { user_id: p.user_id, username: p.username.clone(), first_name: p.display_name.clone(), is_bot: p.is_bot }
}

/// A platform role as a Bot API member status. INVITED (admitted, not joined) is `left` to
/// the Bot API: such a user is not in the chat yet.
pub fn member_status(m: &GroupMember) -> MemberStatus {
    match m.role.enum_value_or_default() {
        GroupRole::OWNER => MemberStatus::Owner,
        GroupRole::ADMINISTRATOR => {
            let r = m.rights.get_or_default();
            MemberStatus::Administrator(AdminRights {
                can_change_info: r.can_change_info,
                can_delete_messages: r.can_delete_messages,
                can_invite_users: r.can_invite_users,
                can_restrict_members: r.can_restrict_members,
                can_promote_members: r.can_promote_members,
                can_post_messages: r.can_post_messages,
                can_manage_chat: r.can_manage_chat,
            })
        }
        GroupRole::MEMBER => MemberStatus::Member,
        GroupRole::RESTRICTED => MemberStatus::Restricted { until_date: m.until_date },
        GroupRole::LEFT | GroupRole::INVITED => MemberStatus::Left,
        GroupRole::BANNED => MemberStatus::Banned { until_date: m.until_date },
    }
}

/// A platform member as a Bot API ChatMember.
pub fn member_view(m: &GroupMember) -> MemberView {
    MemberView { user: user_view(&group_user_of(m.user.get_or_default())), status: member_status(m) }
}

/// A platform invite link as the Bot API's ChatInviteLink.
pub fn invite_link_view(l: &InviteLink) -> members::InviteLinkView {
    members::InviteLinkView {
        invite_link: l.link.clone(),
        creator: user_view(&group_user_of(l.creator.get_or_default())),
        creates_join_request: l.creates_join_request,
        is_primary: l.is_primary,
        is_revoked: l.is_revoked,
        name: l.name.clone(),
        expire_date: l.expire_date,
        member_limit: l.member_limit,
        pending_join_request_count: l.pending_join_request_count,
    }
}

pub fn private_chat_view(chat: &chats::PrivateChat) -> ChatView {
    ChatView::Private { id: chat.user_id as i64, first_name: chat.first_name.clone(), username: non_empty(&chat.username) }
}

pub(super) fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}
