//! Editing our own messages end to end: the new text travels as an `Edit` of the message,
//! carrying the whole message as it is now (its reply and forward fields unchanged), exactly
//! as a bot's edit does. Only a text this profile sent is edited (`history::load_sent`); the
//! receiving side checks the same (a bot's gateway ignores an edit of anyone else's message).

use super::error::{ClientError, Result};
use super::history;
use super::message::{GroupId, SentMessage};
use super::profile::Profile;
use crate::wire::e2e::{Content, Edit};

/// What an edit did: the message edited (in a dialog `chat_id` is the peer's user id, in a
/// group 0) and when, by our clock, as the edit carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EditedMessage {
    pub chat_id: u64,
    pub message_id: u64,
    pub edit_date: i64,
}

impl Profile {
    /// Replaces the text of message `message_id` we sent to `peer` (a username, `@`
    /// optional). Refused when it is not a text of ours that this profile remembers, or when
    /// the text would not change.
    pub fn edit_message(&self, peer: &str, message_id: u64, text: &str) -> Result<EditedMessage> {
        let peer = self.lookup(peer)?;
        let name = format!("@{}", peer.username);
        let (content, edit_date) = self.edit_content(peer.user_id, &name, message_id, text)?;
        let sent = self.send_content(&peer, &content)?;
        self.remember_edit(peer.user_id, message_id, &content, &sent);
        Ok(EditedMessage { chat_id: peer.user_id, message_id, edit_date })
    }

    /// Replaces the text of message `message_id` we sent to a group (or posted in a channel).
    pub fn edit_group_message(&self, group: &GroupId, message_id: u64, text: &str) -> Result<EditedMessage> {
        let peer = history::group_peer(&group.0);
        let (content, edit_date) = self.edit_content(peer, "this group", message_id, text)?;
        let sent = self.send_group_content(group, &content)?;
        let sent = SentMessage { chat_id: 0, message_id: sent.message_id, date: sent.date };
        self.remember_edit(peer, message_id, &content, &sent);
        Ok(EditedMessage { chat_id: 0, message_id, edit_date })
    }

    /// The `Edit` of our message `message_id` in `peer`'s dialog (a group's `group_peer`) to
    /// `text`, and its date.
    fn edit_content(&self, peer: u64, name: &str, message_id: u64, text: &str) -> Result<(Content, i64)> {
        if text.trim().is_empty() {
            return Err(ClientError::Invalid("an edit needs a text (an empty message is not sent)".into()));
        }
        let Some(now) = history::load_sent(&self.conn, peer, message_id)? else {
            let whose = match history::load(&self.conn, peer, message_id)? {
                Some(_) => format!("message {message_id} in {name} was not sent by you"),
                None => format!("no text you sent in {name} has id {message_id} (this profile remembers the newest {})", history::MAX_REMEMBERED),
            };
            return Err(ClientError::Invalid(format!("{whose}: only your own texts can be edited")));
        };
        let edit_date = crate::clock::unix_now();
        Ok((edited(&now, message_id, text, edit_date)?, edit_date))
    }

    /// Our remembered text takes the edit; the edit was sent, so a failure here is only logged.
    fn remember_edit(&self, peer: u64, message_id: u64, edit: &Content, sent: &SentMessage) {
        let now = edit.edit().content.get_or_default();
        if let Err(e) = self.write(|c| history::remember_sent(c, peer, message_id, sent.date, now)) {
            log::warn!("message {message_id} was edited, but this profile could not remember its new text: {e}");
        }
    }

    /// Remembers a text or file we sent, for a later edit or view; the message was sent, so a
    /// failure here is only logged.
    pub(super) fn remember_sent(&self, peer: u64, content: &Content, sent: &SentMessage) {
        if !history::worth_remembering(content) {
            return; // a press, a reaction, an edit...: nothing to edit later, no transaction
        }
        if let Err(e) = self.write(|c| history::remember_sent(c, peer, sent.message_id, sent.date, content)) {
            log::warn!("message {} was sent, but this profile could not remember it: {e}", sent.message_id);
        }
    }
}

/// The edit content: `now` with its text replaced (entities dropped: a typed text has none),
/// every other field kept. The same text again is refused, as the Bot API refuses an edit
/// that changes nothing.
fn edited(now: &Content, message_id: u64, text: &str, edit_date: i64) -> Result<Content> {
    if !now.has_text() {
        return Err(ClientError::Invalid(format!("message {message_id} is not a text; only texts can be edited")));
    }
    if now.text().text == text {
        return Err(ClientError::Invalid(format!("message {message_id} already says that; nothing to edit")));
    }
    let mut new = now.clone();
    new.mut_text().text = text.to_string();
    new.mut_text().entities.clear();
    let mut content = Content::new();
    content.set_edit(Edit {
        message_id,
        content: protobuf::MessageField::some(new),
        edit_date,
        ..Default::default()
    });
    Ok(content)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_carries_the_whole_message_with_the_new_text() {
        let mut now = crate::e2e::text_content("helo");
        now.reply_to_message_id = 3;
        let edit = edited(&now, 7, "hello", 1234).expect("edit");
        let e = edit.edit();
        assert_eq!((e.message_id, e.content.text().text.as_str(), e.content.reply_to_message_id), (7, "hello", 3));
        assert_eq!(e.edit_date, 1234);
        assert!(edited(&now, 7, "helo", 1234).is_err(), "the same text changes nothing");
        let mut reaction = Content::new();
        reaction.set_reaction(crate::wire::e2e::Reaction::new());
        assert!(edited(&reaction, 7, "x", 1234).is_err(), "not a text");
    }
}
