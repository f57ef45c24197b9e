//! Events into Bot API Update objects: what kinds exist, which ones the bot asked for, and how
//! a stored event becomes the JSON an SDK parses.
//!
//! This is the room between the store, which keeps each update as an opaque payload under its
//! kind and never looks inside, and the Bot API methods that serve updates. The inbox uses it
//! when an update is created (the filter applies then, and the reply snapshot is taken then);
//! getUpdates and the webhook use it when one is served; sendMessage for its result. Every
//! kind (`callback_query`, `edited_message`, `message_reaction`, `chat_member`, ...) is built
//! here: `filter` (which kinds a bot gets), `private` and `group` (the builders: what an
//! inbound event makes, rows and updates, which `store` writes), `views` (the Bot API objects
//! made from stored rows).

mod filter;
mod group;
mod private;
mod views;

use rusqlite::Connection;
use serde_json::Value;

use crate::gateway::store::{chats, groups, inline, polls, queue as store_queue, Result as StoreResult};
use crate::wire::e2e::{Content, Reaction};

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

/// An update an inbound event made: its kind and its Bot API object, for [`store`].
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

/// What an inbound event makes: the rows it changes in the bot's state, and its updates. The
/// builders (`*_updates`) only read the store to make it; [`store`] writes it, inside the
/// import's writer job.
#[derive(Debug, Default)]
#[must_use = "what an event makes is written by `updates::store`"]
pub struct Made {
    pub rows: Vec<Row>,
    pub updates: Vec<NewUpdate>,
}

impl Made {
    /// Nothing to store: a repeat, or a change the Bot API cannot see.
    pub fn nothing() -> Made {
        Made::default()
    }

    fn update(kind: &'static str, object: Value) -> Made {
        Made { rows: Vec::new(), updates: vec![NewUpdate::new(kind, object)] }
    }

    /// `self`, then what `other` made.
    pub fn and(mut self, other: Made) -> Made {
        self.rows.extend(other.rows);
        self.updates.extend(other.updates);
        self
    }
}

/// A row an inbound event changes, written by [`store`] in the order made.
#[derive(Debug)]
pub enum Row {
    /// An inline query session seen for the first time (`inline::import`).
    InlineSession { session_id: u64, user_id: u64, query: String, date: i64 },
    /// The session's result the user chose (`inline::mark_chosen`).
    InlineChosen { session_id: u64 },
    /// A user's vote in a poll; no options retracts it (`polls::set_vote`).
    Vote { chat_id: i64, message_id: i64, user_id: u64, option_ids: Vec<u32> },
    /// A message entering this runtime's history (`chats::record`). The file it carries has
    /// its file_id already: the import issues one before it builds (`files::issue`), since the
    /// update names it.
    History(chats::HistoryEntry),
    /// A press remembered for answerCallbackQuery (`chats::remember_callback`).
    Press { callback: chats::Callback, date: i64 },
    /// A user's reaction to a message (`chats::set_reaction`).
    Reaction { chat_id: i64, message_id: i64, user_id: i64, reaction: Reaction },
    /// A user's edit of their message (`chats::apply_edit`).
    Edit { chat_id: i64, message_id: i64, content: Content, edit_date: i64 },
    /// A platform profile, remembered for the messages its user sends later
    /// (`groups::remember_user`).
    User(groups::GroupUser),
}

/// Writes what an event made: its rows in order, then its updates, each only when the filter
/// (`allowed_updates`) admits its kind. The one place inbound updates enter the queue.
pub fn store(c: &Connection, made: Made) -> StoreResult<()> {
    for row in made.rows {
        write(c, row)?;
    }
    for update in made.updates {
        if admits(c, update.kind)? {
            store_queue::enqueue(c, update.kind, &update.object)?;
        }
    }
    Ok(())
}

fn write(c: &Connection, row: Row) -> StoreResult<()> {
    match row {
        Row::InlineSession { session_id, user_id, query, date } => {
            inline::import(c, session_id, user_id, &query, date)?;
        }
        Row::InlineChosen { session_id } => {
            inline::mark_chosen(c, session_id)?;
        }
        Row::Vote { chat_id, message_id, user_id, option_ids } => polls::set_vote(c, chat_id, message_id, user_id, &option_ids)?,
        Row::History(entry) => chats::record(c, &entry)?,
        Row::Press { callback, date } => {
            chats::remember_callback(c, &callback, date)?;
        }
        Row::Reaction { chat_id, message_id, user_id, reaction } => chats::set_reaction(c, chat_id, message_id, user_id, &reaction)?,
        Row::Edit { chat_id, message_id, content, edit_date } => {
            chats::apply_edit(c, chat_id, message_id, &content, edit_date)?;
        }
        Row::User(user) => groups::remember_user(c, &user)?,
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
        store(c, user_edit_updates(c, me, chat, sender, edit, date)?)
    }

    /// Runs a builder on a connection that refuses every write (`query_only`): a builder
    /// only reads.
    fn read_only<T>(c: &rusqlite::Connection, build: impl FnOnce(&rusqlite::Connection) -> T) -> T {
        c.pragma_update(None, "query_only", true).expect("query_only on");
        let made = build(c);
        c.pragma_update(None, "query_only", false).expect("query_only off");
        made
    }

    /// A builder reads and returns what the event makes; only `store` writes it, the updates
    /// through the filter.
    #[test]
    fn builders_only_read_and_store_writes_their_rows_and_admitted_updates() {
        let c = memory_db();
        let me = UserView { id: 9, is_bot: true, first_name: "Bot".into(), username: Some("bot".into()) };
        let chat = chats::PrivateChat { user_id: 42, username: "alice".into(), first_name: "Alice".into() };
        chats::upsert_private_chat(&c, &chat, 1000).expect("chat");
        let entry = text_entry(42, 1, 42, false, "hello");
        let made = read_only(&c, |c| message_updates(c, &me, &chat, entry.clone())).expect("built");
        assert_eq!(made.updates.iter().map(|u| u.kind).collect::<Vec<_>>(), ["message"]);
        assert_eq!(made.updates[0].object["text"], "hello");
        assert!(matches!(made.rows.as_slice(), [Row::History(_)]), "{:?}", made.rows);
        assert!(chats::lookup(&c, 42, 1).expect("lookup").is_none(), "a builder writes nothing");
        queue::store_allowed_updates(&c, &["callback_query".to_string()]).expect("store");
        store(&c, made).expect("stored");
        assert!(queue::fetch(&c, None, 10).expect("fetch").is_empty(), "the filter refuses the update");
        assert_eq!(chats::lookup(&c, 42, 1).expect("lookup").expect("recorded").content.text().text, "hello", "but the row is written");
        queue::store_allowed_updates(&c, &[]).expect("store");
        store(&c, read_only(&c, |c| message_updates(c, &me, &chat, text_entry(42, 2, 42, false, "again"))).expect("built"))
            .expect("stored");
        assert_eq!(queue::fetch(&c, None, 10).expect("fetch").len(), 1);
    }

    /// A vote is counted in the `poll` update before it is stored, as it is once stored; an
    /// inline query and a press are new once, whatever the builder saw.
    #[test]
    fn a_vote_counts_in_its_own_update_and_repeats_make_nothing() {
        use crate::wire::e2e::{CallbackPress, InlineQuery, Poll, PollOption, PollVote};
        let c = memory_db();
        let chat = chats::PrivateChat { user_id: 42, username: "alice".into(), first_name: "Alice".into() };
        chats::upsert_private_chat(&c, &chat, 1000).expect("chat");
        let options = ["a", "b", "c"].map(|t| PollOption { text: t.into(), ..Default::default() }).to_vec();
        let mut poll_message = Content::new();
        poll_message.set_poll(Poll { question: "Which?".into(), options, allows_revoting: true, ..Default::default() });
        chats::record(&c, &chats::HistoryEntry { chat_id: 42, message_id: 5, from_bot: true, sender_id: 9, date: 1000, content: poll_message, edit_date: 0 })
            .expect("the bot's poll");
        let vote = |ids: &[u32]| PollVote { message_id: 5, option_ids: ids.to_vec(), ..Default::default() };
        let counts = |made: &Made| {
            let poll = &made.updates.iter().find(|u| u.kind == "poll").expect("poll update").object;
            let per: Vec<i64> = poll["options"].as_array().expect("options").iter().map(|o| o["voter_count"].as_i64().unwrap_or(-1)).collect();
            (per, poll["total_voter_count"].as_i64())
        };
        let first = read_only(&c, |c| poll_vote_updates(c, &chat, &vote(&[1]), 1001)).expect("first vote");
        assert_eq!(counts(&first), (vec![0, 1, 0], Some(1)));
        store(&c, first).expect("stored");
        let changed = read_only(&c, |c| poll_vote_updates(c, &chat, &vote(&[2]), 1002)).expect("changed vote");
        assert_eq!(counts(&changed), (vec![0, 0, 1], Some(1)), "the old vote no longer counts");
        store(&c, changed).expect("stored");
        let retracted = read_only(&c, |c| poll_vote_updates(c, &chat, &vote(&[]), 1003)).expect("retracted");
        assert_eq!(counts(&retracted), (vec![0, 0, 0], Some(0)));
        store(&c, retracted).expect("stored");
        assert_eq!(crate::gateway::store::polls::counts(&c, 42, 5, 3).expect("counts"), (vec![0, 0, 0], 0));

        let query = InlineQuery { session_id: 3, query: "cats".into(), ..Default::default() };
        let made = read_only(&c, |c| inline_query_updates(c, &chat, &query, 1004)).expect("query");
        assert_eq!(made.updates.len(), 1);
        store(&c, made).expect("stored");
        let again = read_only(&c, |c| inline_query_updates(c, &chat, &query, 1005)).expect("repeat");
        assert!(again.updates.is_empty() && again.rows.is_empty(), "{again:?}");

        let press = CallbackPress { press_id: "p1".into(), callback_data: "go".into(), ..Default::default() };
        let context = crate::wire::e2e::KeyboardContext { inline_message_id: "im".into(), ..Default::default() };
        let made = read_only(&c, |c| inline_callback_query_updates(c, &chat, &press, &context, 1006)).expect("press");
        assert_eq!(made.updates[0].object["id"], "42_p1");
        store(&c, made).expect("stored");
        let again = read_only(&c, |c| inline_callback_query_updates(c, &chat, &press, &context, 1007)).expect("repeat");
        assert!(again.updates.is_empty() && again.rows.is_empty(), "{again:?}");
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
