//! A bot's reply keyboard, as the profile keeps it: the newest one each conversation (a
//! dialog, or a group) received stands in for the person's keyboard until a later message
//! replaces or removes it, or, for a one-time keyboard, until one of its buttons is used.
//! Using a button sends its text as an ordinary message (a request button: the person's
//! contact card, a location they give, or a poll they make).
//!
//! The keyboard is kept in the profile, changed inside the transaction that opened its
//! message (`inbox.rs`, `group_delivery.rs`), so `e2e-chat reply-button` in another process
//! sees what `listen` or chat mode received.

use protobuf::Message as _;
use rusqlite::{params, Connection, OptionalExtension};

use super::error::{ClientError, Result};
use super::shared_item::Shared;
pub use super::reply_markup::{ButtonRequest, PollKind, ReplyButton, ReplyKeyboard, ReplyMarkup};
use crate::wire::e2e::{Content, ReplyKeyboard as WireKeyboard};



/// Whether a group message's markup is meant for this profile: not `selective`, or the
/// message mentions our username or answers one of our messages. A member receives every
/// group message but its own, so a reply to a message the profile never received (and so
/// does not remember) answers one of ours.
pub(super) fn addressed_to_us(c: &Connection, group_peer: u64, content: &Content) -> Result<bool> {
    let own: String = c.query_row("SELECT username FROM client_account WHERE id = 1", [], |r| r.get(0))?;
    addressed_to(c, group_peer, &own, content)
}

fn addressed_to(c: &Connection, group_peer: u64, own_username: &str, content: &Content) -> Result<bool> {
    let selective = content.reply_keyboard.as_ref().is_some_and(|k| k.selective)
        || content.remove_keyboard.as_ref().is_some_and(|r| r.selective)
        || content.force_reply.as_ref().is_some_and(|f| f.selective);
    if !selective {
        return Ok(true);
    }
    let text = content.text().text.to_lowercase();
    let mention = format!("@{}", own_username.to_lowercase());
    if text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '@')).any(|w| w == mention) {
        return Ok(true);
    }
    let reply = content.reply_to_message_id;
    if reply == 0 {
        return Ok(false);
    }
    Ok(super::history::load(c, group_peer, reply)?.is_none())
}

/// Applies a received message's markup to the conversation's keyboard: a keyboard replaces
/// the one shown, a removal takes it away. Runs in the transaction that opened the message.
pub(super) fn on_message(c: &Connection, peer: u64, message_id: u64, content: &Content) -> Result<()> {
    if let Some(k) = content.reply_keyboard.as_ref().filter(|k| k.rows.iter().any(|r| !r.buttons.is_empty())) {
        let bytes = k
            .write_to_bytes()
            .map_err(|e| ClientError::Invalid(format!("the reply keyboard of message {message_id} does not encode: {e}")))?;
        c.execute(
            "INSERT OR REPLACE INTO client_reply_keyboards (peer_user_id, message_id, keyboard) VALUES (?1, ?2, ?3)",
            params![peer as i64, message_id as i64, bytes],
        )?;
    } else if content.remove_keyboard.is_some() {
        c.execute("DELETE FROM client_reply_keyboards WHERE peer_user_id = ?1", [peer as i64])?;
    }
    Ok(())
}

/// The keyboard a conversation shows, and the message that brought it.
pub(super) fn current(c: &Connection, peer: u64) -> Result<Option<(u64, ReplyKeyboard)>> {
    let row: Option<(i64, Vec<u8>)> = c
        .query_row(
            "SELECT message_id, keyboard FROM client_reply_keyboards WHERE peer_user_id = ?1",
            [peer as i64],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let Some((message_id, bytes)) = row else { return Ok(None) };
    let wire = WireKeyboard::parse_from_bytes(&bytes).map_err(|e| {
        ClientError::Invalid(format!("the stored reply keyboard of message {message_id} (peer {peer}) is damaged: {e}"))
    })?;
    Ok(Some((message_id as u64, ReplyKeyboard::from_wire(&wire))))
}

/// After a button of the keyboard that `message_id` brought was used: a one-time keyboard
/// goes (a newer keyboard that arrived meanwhile stays).
pub(super) fn used(c: &Connection, peer: u64, message_id: u64) -> Result<()> {
    if let Some((shown, keyboard)) = current(c, peer)? {
        if shown == message_id && keyboard.one_time {
            c.execute("DELETE FROM client_reply_keyboards WHERE peer_user_id = ?1", [peer as i64])?;
        }
    }
    Ok(())
}

/// A button chosen from a conversation's keyboard: what it sends, and which keyboard it was.
#[derive(Clone, Debug, PartialEq)]
pub struct ChosenButton {
    /// The message that brought the keyboard.
    pub keyboard_message_id: u64,
    pub number: usize,
    pub button: ReplyButton,
    /// What using it sends (an ordinary message).
    pub content: Content,
}

impl super::profile::Profile {
    /// The reply keyboard the conversation with `peer` (a user id, or a group's
    /// `history::group_peer`) shows, with the id of the message that brought it.
    pub fn reply_keyboard(&self, peer: u64) -> Result<Option<(u64, ReplyKeyboard)>> {
        current(&self.conn, peer)
    }

    /// Marks button use of the keyboard `message_id` brought: a one-time keyboard goes.
    pub fn reply_keyboard_used(&self, peer: u64, message_id: u64) -> Result<()> {
        used(&self.conn, peer, message_id)
    }

    /// Button `number` (from 1, as shown) of the keyboard `peer`'s conversation shows, and
    /// the message using it sends: its text, or for a request button the person's contact
    /// card, or what they `give`: a location for a location button, a poll of the kind asked
    /// for for a poll button (a request button sends nothing without it).
    pub fn choose_reply_button(&self, peer: u64, name: &str, number: usize, give: Option<Shared>) -> Result<ChosenButton> {
        let Some((keyboard_message_id, keyboard)) = current(&self.conn, peer)? else {
            return Err(ClientError::Invalid(format!("{name} shows no reply keyboard (none arrived, or it was removed or used up)")));
        };
        let Some(button) = keyboard.button(number).cloned() else {
            return Err(ClientError::Invalid(format!(
                "{name}'s reply keyboard has buttons 1 to {}, not {number}",
                keyboard.len()
            )));
        };
        let asks = |what: &str| ClientError::Invalid(format!("button {number} ({:?}) asks for {what}", button.text));
        let content = match (button.request, give) {
            (ButtonRequest::Text, _) => {
                let mut content = Content::new();
                content.mut_text().text = button.text.clone();
                content
            }
            (ButtonRequest::Contact, _) => Shared::Contact(self.own_contact_card()).to_content(None)?,
            (ButtonRequest::Location, Some(location @ Shared::Location(_))) => location.to_content(None)?,
            (ButtonRequest::Location, _) => {
                return Err(ClientError::Invalid(format!(
                    "button {number} ({:?}) sends your location: give it as LATITUDE,LONGITUDE",
                    button.text
                )))
            }
            (ButtonRequest::Poll(kind), Some(Shared::Poll(poll))) if kind.admits(poll.quiz) => Shared::Poll(poll).to_content(None)?,
            (ButtonRequest::Poll(kind), Some(Shared::Poll(_))) => return Err(asks(&format!("{}, not this one", kind.wanted()))),
            (ButtonRequest::Poll(kind), _) => {
                return Err(asks(&format!("{} you make: give its question and options", kind.wanted())))
            }
        };
        Ok(ChosenButton { keyboard_message_id, number, button, content })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::e2e::reply_button::Request;
    use crate::wire::e2e::{ForceReply, RemoveKeyboard, ReplyButton as WireButton, ReplyKeyboardRow, Text};

    fn db() -> Connection {
        let c = Connection::open_in_memory().expect("db");
        c.execute_batch(crate::client::schema::REPLY_KEYBOARDS_V6).expect("table");
        c.execute_batch(crate::client::schema::HISTORY_V3).expect("history");
        c
    }

    fn with_keyboard(buttons: &[(&str, Request)], one_time: bool) -> Content {
        let mut content = Content::new();
        content.set_text(Text { text: "Pick".into(), ..Default::default() });
        let row = ReplyKeyboardRow {
            buttons: buttons.iter().map(|(t, r)| WireButton { text: t.to_string(), request: (*r).into(), ..Default::default() }).collect(),
            ..Default::default()
        };
        content.reply_keyboard =
            protobuf::MessageField::some(WireKeyboard { rows: vec![row], one_time_keyboard: one_time, ..Default::default() });
        content
    }

    #[test]
    fn a_keyboard_shows_until_replaced_removed_or_used_once() {
        let c = db();
        on_message(&c, 7, 3, &with_keyboard(&[("Yes", Request::TEXT), ("Phone", Request::CONTACT)], false)).expect("set");
        let (id, k) = current(&c, 7).expect("read").expect("shown");
        assert_eq!((id, k.len()), (3, 2));
        assert_eq!(k.button(2).map(|b| b.request), Some(ButtonRequest::Contact));
        assert_eq!(k.button(0), None);
        assert_eq!(k.button(3), None);
        assert!(current(&c, 8).expect("read").is_none(), "per conversation");
        used(&c, 7, 3).expect("used");
        assert!(current(&c, 7).expect("read").is_some(), "not one-time: stays");

        on_message(&c, 7, 5, &with_keyboard(&[("Once", Request::TEXT)], true)).expect("replace");
        used(&c, 7, 3).expect("an older keyboard's use");
        assert_eq!(current(&c, 7).expect("read").map(|(id, _)| id), Some(5), "the newer one stays");
        used(&c, 7, 5).expect("used");
        assert!(current(&c, 7).expect("read").is_none(), "one-time: gone after use");

        on_message(&c, 7, 6, &with_keyboard(&[("A", Request::TEXT)], false)).expect("set");
        let mut plain = Content::new();
        plain.set_text(Text { text: "no markup".into(), ..Default::default() });
        on_message(&c, 7, 7, &plain).expect("nothing");
        assert!(current(&c, 7).expect("read").is_some(), "a message without markup leaves it");
        plain.remove_keyboard = protobuf::MessageField::some(RemoveKeyboard::new());
        on_message(&c, 7, 8, &plain).expect("remove");
        assert!(current(&c, 7).expect("read").is_none());
    }

    #[test]
    fn markup_of_a_message() {
        let content = with_keyboard(&[("Where", Request::LOCATION)], true);
        let Some(ReplyMarkup::Keyboard(k)) = ReplyMarkup::of(&content) else { panic!("a keyboard") };
        assert!(k.one_time);
        assert_eq!(k.rows, vec![vec![ReplyButton { text: "Where".into(), request: ButtonRequest::Location }]]);
        let mut force = Content::new();
        force.force_reply = protobuf::MessageField::some(ForceReply { input_field_placeholder: "Name?".into(), ..Default::default() });
        assert_eq!(ReplyMarkup::of(&force), Some(ReplyMarkup::ForceReply { placeholder: "Name?".into() }));
        assert_eq!(ReplyMarkup::of(&Content::new()), None);
    }

    #[test]
    fn a_selective_group_keyboard_is_for_the_mentioned_or_answered() {
        let c = db();
        let mut k = with_keyboard(&[("A", Request::TEXT)], false);
        assert!(addressed_to(&c, 1, "ann", &k).expect("check"), "not selective: everyone's");
        k.reply_keyboard.as_mut().expect("keyboard").selective = true;
        assert!(!addressed_to(&c, 1, "ann", &k).expect("check"));
        k.mut_text().text = "Choose, @Ann!".into();
        assert!(addressed_to(&c, 1, "ann", &k).expect("check"), "mentioned");
        k.mut_text().text = "Choose, @annie".into();
        assert!(!addressed_to(&c, 1, "ann", &k).expect("check"), "another name");
        super::super::history::remember(&c, 1, 4, 0, &Content::new()).expect("a message we received");
        k.reply_to_message_id = 4;
        assert!(!addressed_to(&c, 1, "ann", &k).expect("check"), "a reply to someone else");
        k.reply_to_message_id = 5;
        assert!(addressed_to(&c, 1, "ann", &k).expect("check"), "a reply to ours");
    }
}
