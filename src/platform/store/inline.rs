//! Inline sessions (spec "Inline session"): a user opens one with a bot, the bot's devices get
//! the query end to end, the bot's answers (SendMessages bound to the session) are refused once
//! the session is chosen or older than five minutes, and choosing the same result again is a
//! no-op. The platform never holds the query or the results in clear.

use rusqlite::{params, Connection, OptionalExtension};

use super::Store;
use crate::platform::error::{db_error, PlatformError, Result};

/// How long a session accepts answers and a choice (spec: 5 minutes).
pub const INLINE_SESSION_TTL_SECS: i64 = 300;
/// Sessions are forgotten a day after they were opened.
const FORGET_AFTER_SECS: i64 = 24 * 3600;
/// Longest result id (Bot API: 1-64 bytes).
const RESULT_ID_MAX: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InlineSession {
    pub id: u64,
    pub expires_at: i64,
}

impl Store {
    /// Opens a session of `user_id` with bot `bot_id`; older forgotten sessions are pruned.
    pub fn start_inline_session(&self, user_id: u64, bot_id: u64, now: i64) -> Result<InlineSession> {
        self.write_tx("an inline session", |tx| {
            let is_active_bot: Option<bool> = tx
                .query_row("SELECT is_bot AND status = 'active' FROM accounts WHERE id = ?1", params![bot_id], |r| r.get(0))
                .optional()
                .map_err(db_error("looking up a bot"))?;
            match is_active_bot {
                None => return Err(PlatformError::NotFound(format!("no user with id {bot_id}"))),
                Some(false) => {
                    return Err(PlatformError::FailedPrecondition(format!("user {bot_id} is not an active bot")))
                }
                Some(true) => {}
            }
            tx.execute("DELETE FROM inline_sessions WHERE created_at < ?1", params![now - FORGET_AFTER_SECS])
                .map_err(db_error("pruning inline sessions"))?;
            let expires_at = now + INLINE_SESSION_TTL_SECS;
            tx.execute(
                "INSERT INTO inline_sessions (user_id, bot_id, created_at, expires_at) VALUES (?1, ?2, ?3, ?4)",
                params![user_id, bot_id, now, expires_at],
            )
            .map_err(db_error("opening an inline session"))?;
            Ok(InlineSession { id: tx.last_insert_rowid() as u64, expires_at })
        })
    }

    /// Records `user_id`'s choice in a session: Ok(true) when it was chosen with this result
    /// already.
    pub fn choose_inline_result(&self, user_id: u64, session_id: u64, result_id: &str, now: i64) -> Result<bool> {
        if result_id.is_empty() || result_id.len() > RESULT_ID_MAX {
            return Err(PlatformError::InvalidArgument(format!("result_id must be 1 to {RESULT_ID_MAX} bytes")));
        }
        self.write_tx("an inline choice", |tx| {
            let Some((expires_at, chosen)) = session_of(tx, session_id, user_id)? else {
                return Err(PlatformError::NotFound(format!("no inline session {session_id} of this user")));
            };
            match chosen {
                Some(c) if c == result_id => return Ok(true),
                Some(_) => {
                    return Err(PlatformError::FailedPrecondition(format!(
                        "inline session {session_id} is already chosen with another result"
                    )))
                }
                None if now > expires_at => {
                    return Err(PlatformError::FailedPrecondition(format!("inline session {session_id} expired")))
                }
                None => {}
            }
            tx.execute("UPDATE inline_sessions SET chosen_result = ?2 WHERE id = ?1", params![session_id, result_id])
                .map_err(db_error("recording an inline choice"))?;
            Ok(false)
        })
    }
}

/// (expires_at, chosen result) of a session of `user_id`.
fn session_of(tx: &Connection, session_id: u64, user_id: u64) -> Result<Option<(i64, Option<String>)>> {
    tx.query_row(
        "SELECT expires_at, chosen_result FROM inline_sessions WHERE id = ?1 AND user_id = ?2",
        params![session_id, user_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
    .map_err(db_error("reading an inline session"))
}

/// Why a bot's answer to a session is refused, or `None` when it may be delivered: the session
/// must be the recipient's, with this bot, open and not expired.
pub(super) fn refuses_answer(tx: &Connection, session_id: u64, bot_id: u64, user_id: u64, now: i64) -> Result<Option<String>> {
    let row: Option<(u64, i64, Option<String>)> = tx
        .query_row(
            "SELECT bot_id, expires_at, chosen_result FROM inline_sessions WHERE id = ?1 AND user_id = ?2",
            params![session_id, user_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()
        .map_err(db_error("reading an inline session"))?;
    Ok(match row {
        None => Some(format!("inline session {session_id} of user {user_id} does not exist")),
        Some((bot, ..)) if bot != bot_id => Some(format!("inline session {session_id} is with another bot")),
        Some((_, _, Some(_))) => Some(format!("inline session {session_id} is already chosen: answers are refused after the choice")),
        Some((_, expires_at, None)) if now > expires_at => {
            Some(format!("inline session {session_id} expired: answers are refused after 5 minutes"))
        }
        Some(_) => None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{msg, store, user};
    use super::super::SendOutcome;
    use super::*;

    #[test]
    fn answers_are_refused_after_the_choice_or_the_ttl_and_a_repeated_choice_is_a_no_op() {
        let (_d, store) = store();
        let alice = user(&store, "alice", 0);
        let (bot, _) = store.create_bot("inl_bot", "Inl", "default", &[3; 32], None, 1).expect("bot");
        store.register_bot_device(bot, &super::super::tests::device(9, 0), 1).expect("bot device");
        let bot_dev = super::super::DeviceAddr { user_id: bot, device_id: 1 };
        let s = store.start_inline_session(alice.user_id, bot, 1000).expect("open");
        assert_eq!(s.expires_at, 1300);
        assert!(matches!(store.start_inline_session(alice.user_id, alice.user_id, 1000), Err(PlatformError::FailedPrecondition(_))));

        let answer = |cmid: &str, now: i64| {
            let mut m = msg(cmid, alice.user_id, &[1]);
            m.inline_session_id = s.id;
            store.send_messages(bot_dev, &[m], now).expect("send").outcomes.remove(0)
        };
        assert!(matches!(answer("a1", 1100), SendOutcome::Ok { .. }));
        assert!(matches!(answer("a2", 1200), SendOutcome::Ok { .. }), "a later answer replaces the list");
        assert!(!store.choose_inline_result(alice.user_id, s.id, "r1", 1250).expect("choose"));
        assert!(store.choose_inline_result(alice.user_id, s.id, "r1", 1260).expect("again"), "same result: a repeat");
        assert!(matches!(store.choose_inline_result(alice.user_id, s.id, "r2", 1260), Err(PlatformError::FailedPrecondition(_))));
        assert!(matches!(answer("a3", 1270), SendOutcome::Rejected(e) if e.contains("already chosen")));

        let late = store.start_inline_session(alice.user_id, bot, 2000).expect("open");
        let mut m = msg("b1", alice.user_id, &[1]);
        m.inline_session_id = late.id;
        let out = store.send_messages(bot_dev, &[m], 2301).expect("send").outcomes.remove(0);
        assert!(matches!(out, SendOutcome::Rejected(e) if e.contains("expired")));
        assert!(matches!(store.choose_inline_result(alice.user_id, late.id, "r", 2301), Err(PlatformError::FailedPrecondition(_))));
        assert!(matches!(store.choose_inline_result(bot, late.id, "r", 2001), Err(PlatformError::NotFound(_))), "not the bot's");
    }
}
