//! The Bot API methods: one table from name to handler, and the checks every call makes
//! before its body is read. Each method is one function in its family's file, which reads its
//! parameters and does its work; the table row names it.
//!
//! Adding a method takes two edits: its function in the family file (`me`, `updates`,
//! `messages`, `profile`; later `callbacks`, `inline`, `reactions`, `media`, `chats`), and its row in
//! [`METHODS`] (and its parameter row in docs/methods.md, which a test asks for). What is
//! refused, methods and parameters, is in `refusals`. Method names are case-insensitive, as in
//! the reference Bot API.

mod admin;
mod batches;
mod callbacks;
mod chats;
mod editing;
mod inline;
mod invites;
mod me;
mod media;
mod messages;
mod places;
mod polls;
mod profile;
mod reactions;
mod refusals;
mod submit;
mod target;
mod updates;

use serde_json::Value;

pub use messages::{send_message_request, SendMessage, MAX_TEXT_UTF16};
pub use updates::{check_webhook_url, get_updates_request, set_webhook_request, GetUpdates, SetWebhook};

use super::multipart::FileIntake;
use super::{BotApi, Download};
use crate::gateway::botapi::{ApiError, Params};
use crate::gateway::ctx::{Ctx, Sending};
use crate::gateway::runtime::BotShared;
use crate::gateway::store::webhook as webhook_store;
use crate::gateway::botapi::types::MessageView;
use crate::gateway::store::StoreError;

/// One Bot API method.
pub struct Method {
    /// The canonical name, e.g. `sendMessage`.
    pub name: &'static str,
    /// Reads the parameters, does the work, returns the envelope's `result`.
    run: Run,
    /// Refused with 409 while a webhook is set, before the body is read (getUpdates).
    polling_only: bool,
}

impl std::fmt::Debug for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl PartialEq for Method {
    fn eq(&self, other: &Method) -> bool {
        self.name == other.name
    }
}

type Answer = Result<Value, ApiError>;

/// A method's body, by what it touches: its signature says so.
enum Run {
    /// The store and the platform (a [`Ctx`]): reads, profile and chat management.
    Steps(fn(&Ctx, &Params) -> Answer),
    /// Also the outbox, to hand a message over and wait for the platform's answer.
    Sends(fn(&Sending, &Params) -> Answer),
    /// The whole bot: the updates' methods, which wake the webhook thread and wait on the
    /// queue.
    Bot(fn(&BotShared, &Params) -> Answer),
}

const fn method(name: &'static str, run: fn(&Ctx, &Params) -> Answer) -> Method {
    Method { name, run: Run::Steps(run), polling_only: false }
}

const fn sending(name: &'static str, run: fn(&Sending, &Params) -> Answer) -> Method {
    Method { name, run: Run::Sends(run), polling_only: false }
}

const fn whole(name: &'static str, run: fn(&BotShared, &Params) -> Answer) -> Method {
    Method { name, run: Run::Bot(run), polling_only: false }
}

/// Every method the gateway serves.
pub static METHODS: &[Method] = &[
    method("getMe", me::get_me),
    Method { polling_only: true, ..whole("getUpdates", updates::get_updates) },
    whole("setWebhook", updates::set_webhook),
    whole("deleteWebhook", updates::delete_webhook),
    whole("getWebhookInfo", updates::get_webhook_info),
    sending("sendMessage", messages::send_message),
    sending("forwardMessage", messages::forward_message),
    sending("copyMessage", messages::copy_message),
    sending("forwardMessages", batches::forward_messages),
    sending("copyMessages", batches::copy_messages),
    sending("sendChatAction", messages::send_chat_action),
    sending("sendPhoto", media::send_photo),
    sending("sendDocument", media::send_document),
    sending("sendAudio", media::send_audio),
    sending("sendVideo", media::send_video),
    sending("sendVoice", media::send_voice),
    sending("sendAnimation", media::send_animation),
    sending("sendVideoNote", media::send_video_note),
    sending("sendSticker", media::send_sticker),
    sending("sendMediaGroup", media::send_media_group),
    method("getFile", media::get_file),
    sending("sendLocation", places::send_location),
    sending("sendVenue", places::send_venue),
    sending("sendContact", places::send_contact),
    sending("sendDice", places::send_dice),
    sending("editMessageLiveLocation", editing::edit_message_live_location),
    sending("stopMessageLiveLocation", editing::stop_message_live_location),
    sending("sendPoll", polls::send_poll),
    sending("stopPoll", editing::stop_poll),
    sending("editMessageText", editing::edit_message_text),
    sending("editMessageCaption", editing::edit_message_caption),
    sending("editMessageMedia", editing::edit_message_media),
    sending("editMessageReplyMarkup", editing::edit_message_reply_markup),
    sending("deleteMessage", editing::delete_message),
    sending("deleteMessages", batches::delete_messages),
    sending("answerCallbackQuery", callbacks::answer_callback_query),
    sending("setMessageReaction", reactions::set_message_reaction),
    sending("answerInlineQuery", inline::answer_inline_query),
    method("setMyCommands", profile::set_my_commands),
    method("getMyCommands", profile::get_my_commands),
    method("deleteMyCommands", profile::delete_my_commands),
    method("setMyDescription", profile::set_my_description),
    method("getMyDescription", profile::get_my_description),
    method("setMyShortDescription", profile::set_my_short_description),
    method("getMyShortDescription", profile::get_my_short_description),
    method("getMyName", profile::get_my_name),
    method("setMyName", profile::set_my_name),
    method("getChat", chats::get_chat),
    method("getUserProfilePhotos", chats::get_user_profile_photos),
    method("getChatMember", chats::get_chat_member),
    method("getChatMemberCount", chats::get_chat_member_count),
    method("getChatAdministrators", chats::get_chat_administrators),
    method("leaveChat", chats::leave_chat),
    method("setChatTitle", admin::set_chat_title),
    method("banChatMember", admin::ban_chat_member),
    method("unbanChatMember", admin::unban_chat_member),
    method("restrictChatMember", admin::restrict_chat_member),
    method("promoteChatMember", admin::promote_chat_member),
    method("createChatInviteLink", invites::create_chat_invite_link),
    method("editChatInviteLink", invites::edit_chat_invite_link),
    method("revokeChatInviteLink", invites::revoke_chat_invite_link),
    method("exportChatInviteLink", invites::export_chat_invite_link),
    method("approveChatJoinRequest", invites::approve_chat_join_request),
    method("declineChatJoinRequest", invites::decline_chat_join_request),
];

/// Looks a method up by name, ignoring ASCII case.
pub fn find(name: &str) -> Option<&'static Method> {
    METHODS.iter().find(|m| m.name.eq_ignore_ascii_case(name))
}

/// [`BotApi::preflight`] then [`BotApi::call`]: how webhook replies run a method.
pub fn dispatch(bot: &dyn BotApi, name: &str, params: &Params) -> Result<Value, ApiError> {
    let method = bot.preflight(name)?;
    bot.call(method, params)
}

impl BotApi for BotShared {
    fn preflight(&self, name: &str) -> Result<&'static Method, ApiError> {
        if self.is_revoked() {
            // (devices branch) 401 with the reason when this runtime's device was removed.
            return Err(self.refusal());
        }
        let method = find(name)
            .ok_or_else(|| refusals::refused_method(name).unwrap_or_else(|| ApiError::not_found(format!("method {name} not found"))))?;
        if method.polling_only {
            check_polling(self)?;
        }
        Ok(method)
    }

    fn call(&self, method: &'static Method, params: &Params) -> Result<Value, ApiError> {
        refusals::check_params(method.name, params)?;
        match method.run {
            Run::Steps(run) => run(&self.ctx(), params),
            Run::Sends(run) => run(&self.sending(), params),
            Run::Bot(run) => run(self, params),
        }
    }

    fn answered(&self, method: &'static str, status: u16, took: std::time::Duration) {
        self.metrics.request(method, status, took);
    }

    fn file_intake(&self) -> Option<&dyn FileIntake> {
        Some(self)
    }

    fn download(&self, file_path: &str) -> Result<Download, ApiError> {
        if self.is_revoked() {
            return Err(self.refusal());
        }
        media::download(&self.ctx(), file_path)
    }
}

/// 409 while a webhook is set: getUpdates is refused before its parameters are even read,
/// whatever they are (SPEC: in webhook mode getUpdates with any input is 409).
fn check_polling(bot: &BotShared) -> Result<(), ApiError> {
    if bot.store.read(webhook_store::is_set).map_err(store_error)? {
        return Err(updates::webhook_conflict());
    }
    Ok(())
}

/// Builds the Bot API message for a history entry of a private chat or a group.
fn message_view(
    bot: &Ctx,
    chat: crate::gateway::updates::ChatRef<'_>,
    entry: &crate::gateway::store::chats::HistoryEntry,
) -> Result<MessageView, ApiError> {
    let me = bot.me();
    bot.store.read(|c| crate::gateway::updates::history_view(c, &me, chat, entry, true)).map_err(store_error)
}

/// A failure of the bot's own database: logged, and 500 to the caller.
fn store_error(e: StoreError) -> ApiError {
    log::error!("state store: {e}");
    ApiError::internal(e)
}

#[cfg(test)]
pub(crate) mod testing {
    //! A real bot over a temporary store, with a platform address nothing listens on: enough
    //! for every method that does not send.

    use std::sync::Arc;

    use serde_json::Value;

    use crate::gateway::botapi::Params;
    use crate::gateway::port::fake::FakePlatform;
    use crate::gateway::runtime::BotShared;

    pub fn bot() -> (tempfile::TempDir, Arc<BotShared>) {
        bot_with_send_wait(crate::gateway::config::DEFAULT_SEND_WAIT)
    }

    /// [`bot`] whose sending methods wait `send_wait` (`send_wait_seconds`).
    pub fn bot_with_send_wait(send_wait: std::time::Duration) -> (tempfile::TempDir, Arc<BotShared>) {
        crate::gateway::runtime::test_bot(send_wait)
    }

    /// [`bot`] on the in-memory platform (`port::fake`), a member of the group "Team" (or the
    /// channel, `kind` "channel"): the administration methods' bot, with the platform the test
    /// scripts.
    pub fn bot_in_group(
        kind: &'static str,
    ) -> (tempfile::TempDir, Arc<BotShared>, Arc<FakePlatform>, crate::gateway::store::groups::GroupChat) {
        use crate::gateway::store::groups::{self, Membership};
        let (dir, bot, fake) = crate::gateway::runtime::test_bot_on_fake(crate::gateway::config::DEFAULT_SEND_WAIT);
        let group = bot.store.write(move |c| groups::upsert(c, &GROUP_ID, "Team", kind, Membership::Member, 1)).expect("group");
        (dir, bot, fake, group)
    }

    /// The group of [`bot_in_group`].
    pub const GROUP_ID: [u8; 32] = [5; 32];

    /// `bot` (its one handle) with the config's `media_from_urls` set as given.
    pub fn with_media_from_urls(bot: Arc<BotShared>, urls: crate::gateway::config::MediaFromUrls) -> Arc<BotShared> {
        let bot = Arc::try_unwrap(bot).unwrap_or_else(|_| panic!("the test holds the bot's one handle"));
        let delivery = crate::gateway::config::Delivery { media_from_urls: urls, ..bot.delivery.clone() };
        Arc::new(bot.with_delivery(delivery))
    }

    pub fn p(v: Value) -> Params {
        let mut p = Params::new();
        for (k, v) in v.as_object().expect("object").clone() {
            p.insert_json(&k, v);
        }
        p
    }

    pub fn form(pairs: &[(&str, &str)]) -> Params {
        let mut p = Params::new();
        for (k, v) in pairs {
            p.insert_text(k, v.to_string());
        }
        p
    }

    pub fn bad(r: Result<impl std::fmt::Debug, crate::gateway::botapi::ApiError>) -> String {
        let e = r.expect_err("expected an error");
        assert_eq!(e.status, 400, "{e}");
        e.description
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::testing::bot;
    use super::*;

    #[test]
    fn names_are_case_insensitive_and_unknown_is_404() {
        let (_dir, bot) = bot();
        let bot = &*bot;
        assert_eq!(dispatch(bot, "GETME", &Params::new()).expect("getMe")["username"], "b_bot");
        assert_eq!(bot.preflight("sendmessage").expect("known").name, "sendMessage");
        let e = dispatch(bot, "sendPigeon", &Params::new()).expect_err("unknown");
        assert_eq!((e.status, e.description.as_str()), (404, "Not Found: method sendPigeon not found"));
        let e = dispatch(bot, "pinchatmessage", &Params::new()).expect_err("not yet");
        assert_eq!(e.status, 400);
        assert!(e.description.contains("method pinchatmessage is not supported by this gateway yet"), "{e}");
        let e = dispatch(bot, "sendInvoice", &Params::new()).expect_err("refused feature");
        assert!(e.description.contains("payments and Telegram Stars are not supported by this gateway"), "{e}");
    }

    #[test]
    fn forum_topics_are_refused_by_method_and_by_parameter() {
        let (_dir, bot) = bot();
        let bot = &*bot;
        for name in ["createForumTopic", "closegeneralforumtopic", "unpinAllForumTopicMessages"] {
            let e = dispatch(bot, name, &Params::new()).expect_err("forum");
            assert_eq!(e.status, 400);
            assert!(e.description.contains("forum topics are not supported by this gateway"), "{name}: {e}");
        }
        let mut params = Params::new();
        params.insert_text("chat_id", "5".into());
        params.insert_text("message_thread_id", "3".into());
        let e = dispatch(bot, "getMe", &params).expect_err("thread id");
        assert_eq!(e.status, 400);
        assert!(e.description.contains("message_thread_id: forum topics are not supported"), "{e}");
    }

    #[test]
    fn revoked_bot_answers_401_first() {
        let (_dir, bot) = bot();
        bot.status.revoked.store(true, Ordering::SeqCst);
        for name in ["getMe", "nope"] {
            let e = dispatch(&*bot, name, &Params::new()).expect_err("revoked");
            assert_eq!((e.status, e.description.as_str()), (401, "Unauthorized"));
        }
    }
}
