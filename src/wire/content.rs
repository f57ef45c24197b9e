//! What a `Content` is, named for logs and records (never its text): the one list of its
//! kinds, so the inbox's log lines and the outbox's given-up records say the same; and the
//! message an inline result's choice sends, built alike by the bot that signs its buttons and
//! the client that sends it.

use super::e2e::content::Body;
use super::e2e::{Content, InlineArticle};

impl Content {
    /// The kind of this content as a person reads it: "message", "file", "edit", ...
    pub fn kind_name(&self) -> &'static str {
        match &self.body {
            None => "content of an unknown kind",
            Some(Body::Text(_)) => "message",
            Some(Body::Media(_)) => "file",
            Some(Body::Edit(_)) => "edit",
            Some(Body::Delete(_)) => "deletion",
            Some(Body::Press(_)) => "button press",
            Some(Body::CallbackAnswer(_)) => "callback answer",
            Some(Body::Reaction(_)) => "reaction",
            Some(Body::ChatAction(_)) => "chat action",
            Some(Body::InlineQuery(_)) => "inline query",
            Some(Body::InlineResults(_)) => "inline results",
            Some(Body::Location(_)) => "location",
            Some(Body::Venue(_)) => "venue",
            Some(Body::Contact(_)) => "contact",
            Some(Body::Dice(_)) => "dice",
            Some(Body::Poll(_)) => "poll",
            Some(Body::PollVote(_)) => "vote",
        }
    }
}

impl InlineArticle {
    /// The message choosing this result sends: its file (a cached result) or its text, with
    /// the bot's buttons. The bot signs the buttons for exactly this content; the user's
    /// client adds only the choice's marks (`via_bot_user_id`, `inline_choice`).
    pub fn choice_content(&self) -> Content {
        let mut content = Content::new();
        match self.media.as_ref() {
            Some(media) => content.set_media(media.clone()),
            None => content.set_text(self.message.clone().unwrap_or_default()),
        }
        content.keyboard = self.keyboard.clone();
        content
    }
}
