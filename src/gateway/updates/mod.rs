//! Events into Bot API Update objects: what kinds exist, which ones the bot asked for, and how
//! a stored event becomes the JSON an SDK parses.
//!
//! This is the room between the store, which keeps each update as an opaque payload under its
//! kind and never looks inside, and the Bot API methods that serve updates. The inbox uses it
//! when an update is created (the filter applies then, and the reply snapshot is taken then);
//! getUpdates and the webhook use it when one is served; sendMessage for its result. Every
//! kind (`callback_query`, `edited_message`, `message_reaction`, `chat_member`, ...) is built
//! here: `filter` (which kinds a bot gets), `private` and `group` (the updates an inbound event
//! makes, which `queue` stores), `views` (the Bot API objects made from stored rows).

mod filter;
mod group;
mod private;
mod views;

use rusqlite::Connection;
use serde_json::Value;

use crate::gateway::store::{queue as store_queue, Result as StoreResult};

pub use filter::{admits, default_kinds, effective_kinds, fetch, run_from, validate_kinds, BOT_API_KINDS};
pub use group::{
    group_message_updates, join_request_updates, member_change_updates, member_service_message_updates, new_chat_title_updates,
};
pub use private::{
    callback_query_updates, inline_callback_query_updates, inline_query_updates, message_updates, poll_vote_updates,
    reaction_updates, user_edit_updates,
};
pub use views::{
    group_chat_view, history_view, invite_link_view, keyboard_view, member_status, member_view, poll_id, poll_now,
    private_chat_view, reaction_views, ChatRef,
};

/// An update an inbound event made: its kind and its Bot API object, for [`queue`]. The
/// builders (`*_updates`) record what the event changes (a vote, a reaction, an edit) and
/// return these; none of them writes the queue.
#[derive(Debug, Clone, PartialEq)]
pub struct NewUpdate {
    pub kind: &'static str,
    pub object: Value,
}

impl NewUpdate {
    pub fn new(kind: &'static str, object: Value) -> NewUpdate {
        NewUpdate { kind, object }
    }
}

/// Queues what an event made, in order, each only when the filter (`allowed_updates`) admits
/// its kind: the one place inbound updates enter the queue.
pub fn queue(c: &Connection, made: Vec<NewUpdate>) -> StoreResult<()> {
    for update in made {
        if admits(c, update.kind)? {
            store_queue::enqueue(c, update.kind, &update.object)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::gateway::botapi::types::UserView;
    use crate::gateway::store::{chats, groups, memory_db, queue, StoreError};
    use crate::wire::e2e::{Content, Edit};

    /// The filter applies when an update is created; changing it later neither hides nor drops
    /// what is already queued.
    #[test]
    fn the_filter_decides_what_is_queued_not_what_queued_updates_are_served() {
        let c = memory_db();
        assert!(admits(&c, "message").expect("default set"));
        assert!(!admits(&c, "message_reaction").expect("not in the default set"));
        queue::enqueue(&c, "message", &json!({ "n": 1 })).expect("enqueue");
        queue::store_allowed_updates(&c, &["callback_query".to_string()]).expect("store");
        assert!(!admits(&c, "message").expect("filtered from now on"));
        let run = run_from(&c, 0, 64).expect("run");
        assert_eq!(run, vec![(1, json!({"update_id": 1, "message": {"n": 1}}))], "the queued message is still served");
        queue::store_allowed_updates(&c, &[]).expect("store");
        assert!(admits(&c, "message").expect("[] is the default set"));
    }

    #[test]
    fn served_updates_are_update_objects_in_queue_order() {
        let c = memory_db();
        for i in 0..3 {
            queue::enqueue(&c, "message", &json!({ "n": i })).expect("enqueue");
        }
        let got = fetch(&c, Some(2), 100).expect("fetch");
        assert_eq!(got, vec![json!({"update_id": 2, "message": {"n": 1}}), json!({"update_id": 3, "message": {"n": 2}})]);
    }

    fn text_entry(chat_id: i64, message_id: i64, sender_id: i64, from_bot: bool, text: &str) -> chats::HistoryEntry {
        let mut content = crate::e2e::text_content(text);
        content.reply_to_message_id = 1;
        chats::HistoryEntry { chat_id, message_id, from_bot, sender_id, date: 1000, content, edit_date: 0 }
    }

    fn edit_of(message_id: u64, text: &str) -> Edit {
        Edit { message_id, content: protobuf::MessageField::some(crate::e2e::text_content(text)), ..Default::default() }
    }

    /// A user's edit, recorded, and its update queued as the import does.
    fn edit(c: &rusqlite::Connection, me: &UserView, chat: ChatRef<'_>, sender: u64, edit: &Edit, date: i64) -> StoreResult<()> {
        queue(c, user_edit_updates(c, me, chat, sender, edit, date)?)
    }

    /// The builders record the event and return its updates; only `queue` writes the queue,
    /// through the filter.
    #[test]
    fn builders_return_updates_and_only_queue_stores_them_through_the_filter() {
        let c = memory_db();
        let me = UserView { id: 9, is_bot: true, first_name: "Bot".into(), username: Some("bot".into()) };
        let chat = chats::PrivateChat { user_id: 42, username: "alice".into(), first_name: "Alice".into() };
        chats::upsert_private_chat(&c, &chat, 1000).expect("chat");
        let entry = text_entry(42, 1, 42, false, "hello");
        chats::record(&c, &entry).expect("hers");
        let made = message_updates(&c, &me, &chat, &entry).expect("built");
        assert_eq!(made.iter().map(|u| u.kind).collect::<Vec<_>>(), ["message"]);
        assert_eq!(made[0].object["text"], "hello");
        assert!(queue::fetch(&c, None, 10).expect("fetch").is_empty(), "a builder queues nothing");
        queue::store_allowed_updates(&c, &["callback_query".to_string()]).expect("store");
        queue(&c, made.clone()).expect("queued");
        assert!(queue::fetch(&c, None, 10).expect("fetch").is_empty(), "the filter refuses it");
        queue::store_allowed_updates(&c, &[]).expect("store");
        queue(&c, made).expect("queued");
        assert_eq!(queue::fetch(&c, None, 10).expect("fetch").len(), 1);
    }

    /// A user's edit of their own text becomes `edited_message` with the whole message (the
    /// stored reply kept) and the envelope's date as `edit_date`; the filter decides as for
    /// any kind; an edit of someone else's message, an unknown one or a non-text is refused.
    #[test]
    fn a_user_edits_only_their_own_text_and_the_bot_gets_edited_message() {
        let c = memory_db();
        let me = UserView { id: 9, is_bot: true, first_name: "Bot".into(), username: Some("bot".into()) };
        let chat = chats::PrivateChat { user_id: 42, username: "alice".into(), first_name: "Alice".into() };
        chats::upsert_private_chat(&c, &chat, 1000).expect("chat");
        chats::record(&c, &text_entry(42, 1, 42, false, "original")).expect("hers");
        chats::record(&c, &text_entry(42, 2, 9, true, "the bot's")).expect("the bot's");
        chats::record(&c, &text_entry(42, 3, 42, false, "second")).expect("hers too");
        let private = ChatRef::Private(&chat);

        edit(&c, &me, private, 42, &edit_of(1, "fixed"), 1500).expect("her own message");
        let queued = queue::fetch(&c, None, 10).expect("fetch");
        assert_eq!(queued.len(), 1);
        assert_eq!(queued[0].kind, "edited_message");
        let m = &queued[0].payload;
        assert_eq!((m["message_id"].as_i64(), m["text"].as_str(), m["edit_date"].as_i64()), (Some(1), Some("fixed"), Some(1500)));
        assert_eq!((m["date"].as_i64(), m["from"]["id"].as_i64(), m["chat"]["id"].as_i64()), (Some(1000), Some(42), Some(42)));
        let stored = chats::lookup(&c, 42, 1).expect("lookup").expect("kept");
        assert_eq!((stored.content.text().text.as_str(), stored.content.reply_to_message_id, stored.edit_date), ("fixed", 1, 1500));

        for (id, text) in [(2, "mine now"), (77, "unknown")] {
            let refused = edit(&c, &me, private, 42, &edit_of(id, text), 1600);
            assert!(matches!(refused, Err(StoreError::Refused(_))), "message {id}: {refused:?}");
        }
        assert!(matches!(edit(&c, &me, private, 43, &edit_of(3, "not hers"), 1600), Err(StoreError::Refused(_))));
        let mut to_nothing = edit_of(3, "x");
        to_nothing.content = protobuf::MessageField::some(Content::new());
        assert!(matches!(edit(&c, &me, private, 42, &to_nothing, 1600), Err(StoreError::Refused(_))));
        assert_eq!(chats::lookup(&c, 42, 2).expect("lookup").expect("kept").content.text().text, "the bot's");

        // Not asked for: the history still takes the edit, no update is queued.
        queue::store_allowed_updates(&c, &["message".to_string()]).expect("store");
        edit(&c, &me, private, 42, &edit_of(3, "second, fixed"), 1700).expect("edit");
        assert_eq!(queue::fetch(&c, None, 10).expect("fetch").len(), 1, "nothing new queued");
        assert_eq!(chats::lookup(&c, 42, 3).expect("lookup").expect("kept").content.text().text, "second, fixed");
    }

    /// In a group a member's edit is `edited_message`; in a channel the poster's is
    /// `edited_channel_post`, without `from`.
    #[test]
    fn group_edits_are_edited_message_and_channel_edits_edited_channel_post() {
        let c = memory_db();
        let me = UserView { id: 9, is_bot: true, first_name: "Bot".into(), username: Some("bot".into()) };
        let group = groups::upsert(&c, &[1; 32], "G", "group", groups::Membership::Member, 1000).expect("group");
        let channel = groups::upsert(&c, &[2; 32], "C", "channel", groups::Membership::Member, 1000).expect("channel");
        chats::record(&c, &text_entry(group.chat_id, 5, 42, false, "hi all")).expect("group message");
        chats::record(&c, &text_entry(channel.chat_id, 6, 42, false, "news")).expect("post");
        let refused = edit(&c, &me, ChatRef::Group(&group), 43, &edit_of(5, "not mine"), 1100);
        assert!(matches!(refused, Err(StoreError::Refused(_))), "another member's message");
        edit(&c, &me, ChatRef::Group(&group), 42, &edit_of(5, "hi everyone"), 1100).expect("group edit");
        edit(&c, &me, ChatRef::Group(&channel), 42, &edit_of(6, "news, corrected"), 1200).expect("post edit");
        let queued = queue::fetch(&c, None, 10).expect("fetch");
        let kinds: Vec<&str> = queued.iter().map(|u| u.kind.as_str()).collect();
        assert_eq!(kinds, ["edited_message", "edited_channel_post"]);
        assert_eq!((queued[0].payload["text"].as_str(), queued[0].payload["from"]["id"].as_i64()), (Some("hi everyone"), Some(42)));
        let post = &queued[1].payload;
        assert_eq!((post["text"].as_str(), post["edit_date"].as_i64()), (Some("news, corrected"), Some(1200)));
        assert!(post.get("from").is_none() && post["sender_chat"]["id"].as_i64() == Some(channel.chat_id));
    }

    #[test]
    fn allowed_updates_take_any_name_and_deliver_only_what_is_produced() {
        validate_kinds(&["message".into(), "edited_message".into(), "poll_answer".into()]).expect("Bot API names");
        validate_kinds(&[]).expect("empty list");
        // python-telegram-bot 22.8's Update.ALL_TYPES names types newer than this gateway.
        validate_kinds(&["message".into(), "managed_bot".into(), "guest_message".into()]).expect("newer names");
        assert!(validate_kinds(&["".into()]).is_err());
        assert!(validate_kinds(&["x".repeat(65)]).is_err());
        assert!(validate_kinds(&vec!["message".to_string(); 101]).is_err());
        assert!(default_kinds().iter().all(|k| BOT_API_KINDS.contains(&k.as_str())));
        let c = memory_db();
        queue::store_allowed_updates(&c, &["managed_bot".to_string(), "message".to_string()]).expect("store");
        assert!(admits(&c, "message").expect("admits") && !admits(&c, "callback_query").expect("admits"));
    }
}
