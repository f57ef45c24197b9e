//! Inline mode on the user's side (spec "Inline session"): open a session with a bot (the
//! platform's StartInlineSession), send it the query end to end, remember the bot's latest
//! results for the session, and choose one: the platform records the choice (and refuses the
//! bot's later answers), and the article's text goes into the dialog as our message, marked
//! as sent via the bot. Choosing the same result again sends nothing more.

use protobuf::{Message as _, MessageField};
use rusqlite::{params, Connection, OptionalExtension};

use super::error::{ClientError, Result, rpc};
use super::message::{keyboard_from_wire, Entity, InlineResult, MediaInfo, ResultsButton, SentMessage};
use super::profile::Profile;
use crate::wire::e2e::{Content, InlineChoice, InlineQuery, InlineResults};
use crate::wire::platform::{ChooseInlineResultRequest, StartInlineSessionRequest};


impl Profile {
    /// Opens an inline session with `bot` and sends it `query`; returns the session id. The
    /// results arrive later as `Incoming::InlineResults`.
    pub fn inline_query(&self, bot: &str, query: &str) -> Result<u64> {
        let peer = self.lookup(bot)?;
        if !peer.is_bot {
            return Err(ClientError::Invalid(format!("@{} is not a bot", peer.username)));
        }
        let mut req = StartInlineSessionRequest::new();
        req.bot_user_id = peer.user_id;
        let session = self
            .platform
            .client
            .start_inline_session(&req, self.platform.opt())
            .map_err(rpc("StartInlineSession"))?;
        self.write(|c| {
            c.execute(
                "INSERT OR REPLACE INTO client_inline_sessions (session_id, peer_user_id, query) VALUES (?1, ?2, ?3)",
                params![session.session_id as i64, peer.user_id as i64, query],
            )?;
            Ok(())
        })?;
        let mut content = Content::new();
        content.set_inline_query(InlineQuery { session_id: session.session_id, query: query.to_string(), ..Default::default() });
        self.send_content(&peer, &content)?;
        Ok(session.session_id)
    }

    /// Chooses result `result_id` of session `session_id` with `bot`: records the choice with
    /// the platform, then sends the article's text into the dialog via the bot. A repeat of the
    /// same choice answers the message sent the first time.
    pub fn choose_inline(&self, bot: &str, session_id: u64, result_id: &str) -> Result<SentMessage> {
        let peer = self.lookup(bot)?;
        let (query, results, chosen) = self.write(|c| session(c, session_id, peer.user_id))?.ok_or_else(|| {
            ClientError::Invalid(format!("no inline session {session_id} with @{} in this profile", peer.username))
        })?;
        let article = results
            .results
            .iter()
            .find(|r| r.id == result_id)
            .ok_or_else(|| ClientError::Invalid(format!("inline session {session_id} has no result {result_id:?}")))?
            .clone();
        let mut req = ChooseInlineResultRequest::new();
        req.session_id = session_id;
        req.result_id = result_id.to_string();
        let resp = self
            .platform
            .client
            .choose_inline_result(&req, self.platform.opt())
            .map_err(rpc("ChooseInlineResult"))?;
        if let (true, Some(sent)) = (resp.repeat, chosen) {
            return Ok(sent);
        }
        // The text or the bot's file (a cached result), with the bot's signed buttons.
        let mut content = article.choice_content();
        content.via_bot_user_id = peer.user_id;
        content.inline_choice = MessageField::some(InlineChoice {
            session_id,
            result_id: result_id.to_string(),
            query,
            ..Default::default()
        });
        let sent = self.send_content(&peer, &content)?;
        self.write(|c| {
            c.execute(
                "UPDATE client_inline_sessions SET chosen_message_id = ?2, chosen_date = ?3 WHERE session_id = ?1",
                params![session_id as i64, sent.message_id as i64, sent.date],
            )?;
            Ok(())
        })?;
        Ok(sent)
    }
}

/// Remembers the results of one of our sessions with `peer`; `None` when the session is not
/// ours with that bot (the results are then ignored).
pub(super) fn remember_results(c: &Connection, peer: u64, results: &InlineResults) -> Result<Option<(Vec<InlineResult>, Option<ResultsButton>)>> {
    let bytes = results
        .write_to_bytes()
        .map_err(|e| ClientError::Invalid(format!("inline results of session {}: {e}", results.session_id)))?;
    let n = c.execute(
        "UPDATE client_inline_sessions SET results = ?3 WHERE session_id = ?1 AND peer_user_id = ?2",
        params![results.session_id as i64, peer as i64, bytes],
    )?;
    if n == 0 {
        return Ok(None);
    }
    let shown = results
        .results
        .iter()
        .map(|r| {
            let text = r.message.as_ref().or_else(|| r.media.caption.as_ref());
            InlineResult {
                id: r.id.clone(),
                kind: if r.type_.is_empty() { "article".to_string() } else { r.type_.clone() },
                title: r.title.clone(),
                description: r.description.clone(),
                text: text.map(|t| t.text.clone()).unwrap_or_default(),
                entities: text.map(|t| t.entities.iter().map(Entity::from_wire).collect()).unwrap_or_default(),
                media: r.media.as_ref().map(MediaInfo::from_wire),
                keyboard: keyboard_from_wire(r.keyboard.as_ref()),
            }
        })
        .collect();
    let button = results.button.as_ref().map(|b| ResultsButton { text: b.text.clone(), start_parameter: b.start_parameter.clone() });
    Ok(Some((shown, button)))
}

/// (query, latest results, the message a choice sent) of one of our sessions with `peer`.
fn session(c: &Connection, session_id: u64, peer: u64) -> Result<Option<(String, InlineResults, Option<SentMessage>)>> {
    let row: Option<(String, Option<Vec<u8>>, i64, i64)> = c
        .query_row(
            "SELECT query, results, chosen_message_id, chosen_date FROM client_inline_sessions
             WHERE session_id = ?1 AND peer_user_id = ?2",
            params![session_id as i64, peer as i64],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .optional()?;
    let Some((query, results, chosen_id, chosen_date)) = row else { return Ok(None) };
    let Some(bytes) = results else {
        return Err(ClientError::Invalid(format!("inline session {session_id} has no results yet")));
    };
    let results = InlineResults::parse_from_bytes(&bytes)
        .map_err(|e| ClientError::Invalid(format!("remembered results of inline session {session_id}: {e}")))?;
    let chosen = (chosen_id != 0).then_some(SentMessage { chat_id: peer, message_id: chosen_id as u64, date: chosen_date });
    Ok(Some((query, results, chosen)))
}
