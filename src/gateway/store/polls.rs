//! The votes in the bot's polls: one row per voter, replaced by a later vote and removed by a
//! retraction, from which the counts of a poll's options are read. The poll itself is the
//! message in the history.

use rusqlite::{params, Connection, OptionalExtension};

use super::Result;

/// Step 6 of the bot database.
pub(crate) const SCHEMA: &str = "
-- A voter's current choice in a poll (the poll message chat_id/message_id of the history):
-- option indexes, comma-separated, ascending.
CREATE TABLE poll_votes (
    chat_id     INTEGER NOT NULL,
    message_id  INTEGER NOT NULL,
    user_id     INTEGER NOT NULL,
    option_ids  TEXT NOT NULL,
    PRIMARY KEY (chat_id, message_id, user_id)
);
";

/// The voter's current choice, if any.
pub fn vote_of(conn: &Connection, chat_id: i64, message_id: i64, user_id: u64) -> Result<Option<Vec<u32>>> {
    let text: Option<String> = conn.prepare_cached("SELECT option_ids FROM poll_votes WHERE chat_id = ?1 AND message_id = ?2 AND user_id = ?3")?.query_row(
        params![chat_id, message_id, user_id as i64],
            |r| r.get(0),
    )
        .optional()?;
    Ok(text.map(|t| parse_ids(&t)))
}

/// Records a vote (empty `option_ids`: retracts it).
pub fn set_vote(conn: &Connection, chat_id: i64, message_id: i64, user_id: u64, option_ids: &[u32]) -> Result<()> {
    if option_ids.is_empty() {
        conn.prepare_cached("DELETE FROM poll_votes WHERE chat_id = ?1 AND message_id = ?2 AND user_id = ?3")?.execute(params![chat_id, message_id, user_id as i64])?;
        return Ok(());
    }
    let mut ids = option_ids.to_vec();
    ids.sort_unstable();
    let text = ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    conn.prepare_cached(
        "INSERT INTO poll_votes (chat_id, message_id, user_id, option_ids) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (chat_id, message_id, user_id) DO UPDATE SET option_ids = excluded.option_ids",
    )?
    .execute(params![chat_id, message_id, user_id as i64, text])?;
    Ok(())
}

/// Voters per option (of `options` options) and how many voted at all.
pub fn counts(conn: &Connection, chat_id: i64, message_id: i64, options: usize) -> Result<(Vec<u32>, u32)> {
    let mut stmt = conn.prepare("SELECT option_ids FROM poll_votes WHERE chat_id = ?1 AND message_id = ?2")?;
    let rows = stmt.query_map(params![chat_id, message_id], |r| r.get::<_, String>(0))?;
    let (mut per_option, mut voters) = (vec![0u32; options], 0u32);
    for row in rows {
        voters += 1;
        for id in parse_ids(&row?) {
            if let Some(n) = per_option.get_mut(id as usize) {
                *n += 1;
            }
        }
    }
    Ok((per_option, voters))
}

fn parse_ids(text: &str) -> Vec<u32> {
    text.split(',').filter_map(|s| s.parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::store::memory_db;

    #[test]
    fn votes_replace_retract_and_count() {
        let c = memory_db();
        set_vote(&c, 5, 9, 1, &[2, 0]).expect("vote");
        set_vote(&c, 5, 9, 2, &[0]).expect("vote");
        set_vote(&c, 6, 9, 2, &[1]).expect("another chat's poll");
        assert_eq!(vote_of(&c, 5, 9, 1).expect("read"), Some(vec![0, 2]));
        assert_eq!(counts(&c, 5, 9, 3).expect("counts"), (vec![2, 0, 1], 2));
        set_vote(&c, 5, 9, 1, &[1]).expect("change");
        assert_eq!(counts(&c, 5, 9, 3).expect("counts"), (vec![1, 1, 0], 2));
        set_vote(&c, 5, 9, 2, &[]).expect("retract");
        assert_eq!(vote_of(&c, 5, 9, 2).expect("read"), None);
        assert_eq!(counts(&c, 5, 9, 3).expect("counts"), (vec![0, 1, 0], 1));
    }
}
