//! Inline keyboards and their signed context (spec, Authentication 6): the bot identity signs,
//! for each keyboard it sends, the whole message the keyboard belongs to (bot, chat, message id,
//! date, content). A press carries that signed context back, so any runtime of the bot (also
//! one that never saw the message) can check it and build the pressed message from it, and a
//! context altered by a client (other data, another message, chat or bot) is refused.

use protobuf::{Message as _, MessageField};

use crate::crypto::identity::{sign_keyboard_context, verify_keyboard_context};
use crate::crypto::IdentityKeyPair;
use crate::wire::e2e::{CallbackPress, Content, KeyboardContext, SignedKeyboardContext};

/// Whether a new message's buttons still need their signed context: the outbox signs them once
/// the platform reserved the message's id (an edit signs at once: its id is known).
pub fn needs_context(content: &Content) -> bool {
    content.keyboard.as_ref().is_some_and(|k| !k.rows.is_empty() && k.context.is_none())
}

/// The chat a keyboard's message is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyboardChat<'a> {
    /// A private chat: the user's id.
    Private(u64),
    /// A group: its 32-byte id.
    Group(&'a [u8]),
}

/// Signs the keyboard of `message` (a message's content, sent as `message_id` on `date` by
/// `bot_user_id` to `chat`) and attaches the context. Without buttons nothing changes.
pub fn attach_context(
    identity: &IdentityKeyPair,
    bot_user_id: u64,
    chat: KeyboardChat<'_>,
    message_id: u64,
    date: i64,
    message: &mut Content,
) {
    let Some(keyboard) = message.keyboard.as_mut() else { return };
    if keyboard.rows.is_empty() {
        return;
    }
    keyboard.context = MessageField::none();
    let (chat_id, group_id) = match chat {
        KeyboardChat::Private(user) => (user, Vec::new()),
        KeyboardChat::Group(id) => (0, id.to_vec()),
    };
    let context = KeyboardContext {
        bot_user_id,
        chat_id,
        group_id,
        message_id,
        date,
        message: MessageField::some(message.clone()),
        ..Default::default()
    };
    sign_into(identity, &context, message);
}

/// Signs the buttons of an inline result (`message`: what the user's choice will send) for the
/// inline message `inline_message_id` in the dialog of `user_id` with the bot. The message id
/// is not known yet: a press is bound to the user, the bot and the result instead.
pub fn attach_inline_context(identity: &IdentityKeyPair, bot_user_id: u64, user_id: u64, inline_message_id: &str, message: &mut Content) {
    let Some(keyboard) = message.keyboard.as_mut() else { return };
    if keyboard.rows.is_empty() {
        return;
    }
    keyboard.context = MessageField::none();
    let context = KeyboardContext {
        bot_user_id,
        chat_id: user_id,
        inline_message_id: inline_message_id.to_string(),
        message: MessageField::some(message.clone()),
        ..Default::default()
    };
    sign_into(identity, &context, message);
}

fn sign_into(identity: &IdentityKeyPair, context: &KeyboardContext, message: &mut Content) {
    let bytes = context.write_to_bytes().expect("an in-memory KeyboardContext encodes");
    let signature = sign_keyboard_context(identity, &bytes).to_vec();
    message.keyboard.as_mut().expect("a keyboard to sign").context =
        MessageField::some(SignedKeyboardContext { context: bytes, signature, ..Default::default() });
}

/// Why a press was refused.
#[derive(Debug, PartialEq, Eq)]
pub struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "callback press refused: {}", self.0)
    }
}

/// Checks a press from user `from` against its signed context: the bot identity's signature,
/// this bot, the pressing user's chat (for a group message: a group, whose membership the
/// caller checks), the pressed message, and a button with the pressed data. Returns the
/// context (the pressed message as the bot sent it).
pub fn check_press(
    bot_identity_key: &[u8; 32],
    bot_user_id: u64,
    from: u64,
    press: &CallbackPress,
) -> Result<KeyboardContext, Refused> {
    let refuse = |why: &str| Err(Refused(why.to_string()));
    let Some(signed) = press.context.as_ref() else {
        return refuse("no keyboard context");
    };
    if !verify_keyboard_context(bot_identity_key, &signed.context, &signed.signature) {
        return refuse("the keyboard context is not signed by this bot");
    }
    let Ok(context) = KeyboardContext::parse_from_bytes(&signed.context) else {
        return refuse("the keyboard context does not decode");
    };
    if context.bot_user_id != bot_user_id {
        return refuse("the keyboard context is of another bot");
    }
    if context.group_id.is_empty() && context.chat_id != from {
        return refuse("the keyboard context is of another chat");
    }
    if !context.group_id.is_empty() && context.chat_id != 0 {
        return refuse("the keyboard context names two chats");
    }
    // An inline message's buttons are bound to the user and the result, not to a message id
    // (the user's own message, which the bot did not sign).
    let inline = !context.inline_message_id.is_empty();
    if inline && (!context.group_id.is_empty() || context.message_id != 0) {
        return refuse("the keyboard context names an inline message and a message");
    }
    if !inline && context.message_id != press.message_id {
        return refuse("the keyboard context is of another message");
    }
    if !has_button(&context.message, &press.callback_data) {
        return refuse("the message has no button with the pressed data");
    }
    Ok(context)
}

/// Whether `message`'s inline keyboard has a callback button with `data`.
pub fn has_button(message: &Content, data: &str) -> bool {
    message.keyboard.rows.iter().flat_map(|row| &row.buttons).any(|b| !b.callback_data.is_empty() && b.callback_data == data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::e2e::{InlineButton, InlineKeyboard, KeyboardRow, Text};

    const BOT: u64 = 7;
    const USER: u64 = 42;

    fn message(data: &[&str]) -> Content {
        let mut c = Content::new();
        c.set_text(Text { text: "menu".into(), ..Default::default() });
        let row = KeyboardRow {
            buttons: data
                .iter()
                .map(|d| InlineButton { text: d.to_uppercase(), callback_data: d.to_string(), ..Default::default() })
                .collect(),
            ..Default::default()
        };
        c.keyboard = MessageField::some(InlineKeyboard { rows: vec![row], ..Default::default() });
        c
    }

    fn press(content: &Content, message_id: u64, data: &str) -> CallbackPress {
        CallbackPress {
            press_id: "p1".into(),
            message_id,
            callback_data: data.into(),
            context: content.keyboard.context.clone(),
            ..Default::default()
        }
    }

    #[test]
    fn a_signed_press_is_accepted_and_carries_the_message() {
        crate::crypto::init();
        let bot = IdentityKeyPair::generate();
        let mut m = message(&["a", "b"]);
        assert!(needs_context(&m));
        attach_context(&bot, BOT, KeyboardChat::Private(USER), 5, 100, &mut m);
        assert!(!needs_context(&m));
        let ctx = check_press(&bot.public_key(), BOT, USER, &press(&m, 5, "b")).expect("accepted");
        assert_eq!((ctx.message_id, ctx.date, ctx.message.text().text.as_str()), (5, 100, "menu"));
        assert!(ctx.message.keyboard.context.is_none(), "the signed message does not contain its own signature");
    }

    #[test]
    fn altered_presses_are_refused() {
        crate::crypto::init();
        let bot = IdentityKeyPair::generate();
        let mut m = message(&["a"]);
        attach_context(&bot, BOT, KeyboardChat::Private(USER), 5, 100, &mut m);
        let refused = |p: &CallbackPress, bot_user: u64, from: u64| {
            check_press(&bot.public_key(), bot_user, from, p).expect_err("refused").0
        };
        assert!(refused(&press(&m, 5, "x"), BOT, USER).contains("no button"));
        assert!(refused(&press(&m, 6, "a"), BOT, USER).contains("another message"));
        assert!(refused(&press(&m, 5, "a"), BOT, USER + 1).contains("another chat"));
        assert!(refused(&press(&m, 5, "a"), BOT + 1, USER).contains("another bot"));
        // Another bot's signature, or a context changed after signing.
        let other = IdentityKeyPair::generate();
        let mut forged = message(&["a", "evil"]);
        attach_context(&other, BOT, KeyboardChat::Private(USER), 5, 100, &mut forged);
        assert!(refused(&press(&forged, 5, "evil"), BOT, USER).contains("not signed"));
        let mut tampered = press(&m, 5, "a");
        let ctx = tampered.context.as_mut().expect("context");
        let last = ctx.context.len() - 1;
        ctx.context[last] ^= 1;
        assert!(refused(&tampered, BOT, USER).contains("not signed"));
        // A group message's keyboard: any presser, the group named in the context.
        let mut g = message(&["a"]);
        attach_context(&bot, BOT, KeyboardChat::Group(&[9; 32]), 5, 100, &mut g);
        let ctx = check_press(&bot.public_key(), BOT, USER + 7, &press(&g, 5, "a")).expect("a member's press");
        assert_eq!((ctx.chat_id, ctx.group_id.as_slice()), (0, &[9u8; 32][..]));
        assert!(refused(&press(&g, 6, "a"), BOT, USER).contains("another message"));
        let mut bare = press(&m, 5, "a");
        bare.context = MessageField::none();
        assert!(refused(&bare, BOT, USER).contains("no keyboard context"));
    }

    #[test]
    fn an_inline_results_buttons_are_bound_to_the_user_not_a_message() {
        crate::crypto::init();
        let bot = IdentityKeyPair::generate();
        let mut m = message(&["a"]);
        attach_inline_context(&bot, BOT, USER, "77_art", &mut m);
        // The press names the user's own message, which the bot never signed.
        let ctx = check_press(&bot.public_key(), BOT, USER, &press(&m, 31, "a")).expect("accepted");
        assert_eq!((ctx.inline_message_id.as_str(), ctx.message_id), ("77_art", 0));
        let refused = |p: &CallbackPress, from: u64| check_press(&bot.public_key(), BOT, from, p).expect_err("refused").0;
        assert!(refused(&press(&m, 31, "a"), USER + 1).contains("another chat"), "another user's press");
        assert!(refused(&press(&m, 31, "b"), USER).contains("no button"));
        let other = IdentityKeyPair::generate();
        let mut forged = message(&["evil"]);
        attach_inline_context(&other, BOT, USER, "77_art", &mut forged);
        assert!(refused(&press(&forged, 31, "evil"), USER).contains("not signed"));
    }
}
