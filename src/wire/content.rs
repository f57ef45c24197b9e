//! What a `Content` is, named for logs and records (never its text): the one list of its
//! kinds, so the inbox's log lines and the outbox's given-up records say the same.

use super::e2e::content::Body;
use super::e2e::Content;

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
