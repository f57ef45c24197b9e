//! A bot's public profile: its command lists per (scope, language) and its descriptions per
//! language. Public data like a username, so stored in clear (docs/decisions.md, "The bot's
//! profile"). Checks on the values are the caller's (`wire::bot_profile`).

use rusqlite::{params, Connection};

use super::Store;
use crate::platform::error::{db_error, Result};

/// The schema step that adds the profile tables (appended to `STEPS`).
pub(super) const SCHEMA_PROFILE: &str = "
CREATE TABLE bot_commands (
    bot_id         INTEGER NOT NULL,
    scope          TEXT NOT NULL,              -- 'default' | 'all_private_chats' | 'chat'
    chat_id        INTEGER NOT NULL,           -- scope 'chat': the user's id; else 0
    language_code  TEXT NOT NULL,              -- '' or two lowercase letters
    position       INTEGER NOT NULL,           -- order of the list as set
    command        TEXT NOT NULL,
    description    TEXT NOT NULL,
    PRIMARY KEY (bot_id, scope, chat_id, language_code, position)
) WITHOUT ROWID;
CREATE TABLE bot_descriptions (
    bot_id             INTEGER NOT NULL,
    language_code      TEXT NOT NULL,
    description        TEXT NOT NULL,
    short_description  TEXT NOT NULL,
    PRIMARY KEY (bot_id, language_code)
) WITHOUT ROWID;
";

/// Which list of a bot: a scope as stored, its chat (0 unless the scope is a chat) and language.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandsKey {
    pub scope: &'static str,
    pub chat_id: u64,
    pub language_code: String,
}

/// One of the two description texts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DescriptionField {
    Description,
    ShortDescription,
}

impl Store {
    /// Replaces the list `key` of `bot_id`; an empty list deletes it.
    pub fn set_bot_commands(&self, bot_id: u64, key: &CommandsKey, commands: &[(String, String)]) -> Result<()> {
        self.write_tx("set-bot-commands", |tx| {
            tx.execute(
                "DELETE FROM bot_commands WHERE bot_id = ?1 AND scope = ?2 AND chat_id = ?3 AND language_code = ?4",
                params![bot_id, key.scope, key.chat_id, key.language_code],
            )
            .map_err(db_error("deleting a bot's command list"))?;
            let mut insert = tx
                .prepare(
                    "INSERT INTO bot_commands (bot_id, scope, chat_id, language_code, position, command, description)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .map_err(db_error("preparing a bot command insert"))?;
            for (position, (command, description)) in commands.iter().enumerate() {
                insert
                    .execute(params![bot_id, key.scope, key.chat_id, key.language_code, position, command, description])
                    .map_err(db_error("inserting a bot command"))?;
            }
            Ok(())
        })
    }

    /// The list `key` of `bot_id` in the order it was set; empty when none.
    pub fn bot_commands(&self, bot_id: u64, key: &CommandsKey) -> Result<Vec<(String, String)>> {
        read_commands(&self.lock(), bot_id, key)
    }

    /// Sets one description text of `bot_id` for `language_code`; an empty text removes it
    /// (the row goes when both texts are empty).
    pub fn set_bot_description(&self, bot_id: u64, language_code: &str, field: DescriptionField, text: &str) -> Result<()> {
        let column = match field {
            DescriptionField::Description => "description",
            DescriptionField::ShortDescription => "short_description",
        };
        self.write_tx("set-bot-description", |tx| {
            tx.execute(
                "INSERT OR IGNORE INTO bot_descriptions (bot_id, language_code, description, short_description)
                 VALUES (?1, ?2, '', '')",
                params![bot_id, language_code],
            )
            .map_err(db_error("adding a bot description row"))?;
            // `column` is one of two constants above, never caller text.
            tx.execute(
                &format!("UPDATE bot_descriptions SET {column} = ?3 WHERE bot_id = ?1 AND language_code = ?2"),
                params![bot_id, language_code, text],
            )
            .map_err(db_error("updating a bot description"))?;
            tx.execute(
                "DELETE FROM bot_descriptions WHERE bot_id = ?1 AND language_code = ?2
                     AND description = '' AND short_description = ''",
                params![bot_id, language_code],
            )
            .map_err(db_error("removing an empty bot description row"))?;
            Ok(())
        })
    }

    /// (description, short description) of `bot_id` for exactly `language_code`; empty when none.
    pub fn bot_description(&self, bot_id: u64, language_code: &str) -> Result<(String, String)> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(
                "SELECT description, short_description FROM bot_descriptions WHERE bot_id = ?1 AND language_code = ?2",
            )
            .map_err(db_error("preparing a bot description read"))?;
        let mut rows = stmt.query(params![bot_id, language_code]).map_err(db_error("reading a bot description"))?;
        match rows.next().map_err(db_error("reading a bot description"))? {
            Some(r) => Ok((
                r.get(0).map_err(db_error("reading a bot description"))?,
                r.get(1).map_err(db_error("reading a bot description"))?,
            )),
            None => Ok((String::new(), String::new())),
        }
    }
}

fn read_commands(conn: &Connection, bot_id: u64, key: &CommandsKey) -> Result<Vec<(String, String)>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT command, description FROM bot_commands
             WHERE bot_id = ?1 AND scope = ?2 AND chat_id = ?3 AND language_code = ?4 ORDER BY position",
        )
        .map_err(db_error("preparing a bot command read"))?;
    let rows = stmt
        .query_map(params![bot_id, key.scope, key.chat_id, key.language_code], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(db_error("reading a bot's commands"))?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_error("reading a bot's commands"))
}

#[cfg(test)]
mod tests {
    use super::super::tests::store;
    use super::*;

    fn key(scope: &'static str, chat_id: u64, lang: &str) -> CommandsKey {
        CommandsKey { scope, chat_id, language_code: lang.into() }
    }

    fn cmds(names: &[&str]) -> Vec<(String, String)> {
        names.iter().map(|n| (n.to_string(), format!("does {n}"))).collect()
    }

    #[test]
    fn command_lists_are_kept_per_scope_and_language_in_order() {
        let (_d, store) = store();
        store.set_bot_commands(7, &key("default", 0, ""), &cmds(&["start", "help", "about"])).expect("set");
        store.set_bot_commands(7, &key("default", 0, "de"), &cmds(&["hilfe"])).expect("set de");
        store.set_bot_commands(7, &key("chat", 42, ""), &cmds(&["secret"])).expect("set chat");
        assert_eq!(store.bot_commands(7, &key("default", 0, "")).expect("read"), cmds(&["start", "help", "about"]));
        assert_eq!(store.bot_commands(7, &key("default", 0, "de")).expect("read"), cmds(&["hilfe"]));
        assert_eq!(store.bot_commands(7, &key("chat", 42, "")).expect("read"), cmds(&["secret"]));
        assert!(store.bot_commands(7, &key("chat", 43, "")).expect("read").is_empty());
        assert!(store.bot_commands(8, &key("default", 0, "")).expect("other bot").is_empty());
        // Replacing a list replaces it whole; an empty list deletes it.
        store.set_bot_commands(7, &key("default", 0, ""), &cmds(&["only"])).expect("replace");
        assert_eq!(store.bot_commands(7, &key("default", 0, "")).expect("read"), cmds(&["only"]));
        store.set_bot_commands(7, &key("default", 0, ""), &[]).expect("delete");
        assert!(store.bot_commands(7, &key("default", 0, "")).expect("read").is_empty());
        assert_eq!(store.bot_commands(7, &key("default", 0, "de")).expect("untouched"), cmds(&["hilfe"]));
    }

    #[test]
    fn descriptions_are_kept_per_language_and_removed_by_empty_text() {
        let (_d, store) = store();
        store.set_bot_description(7, "", DescriptionField::Description, "A bot").expect("set");
        store.set_bot_description(7, "", DescriptionField::ShortDescription, "Short").expect("set short");
        store.set_bot_description(7, "fr", DescriptionField::Description, "Un bot").expect("set fr");
        assert_eq!(store.bot_description(7, "").expect("read"), ("A bot".into(), "Short".into()));
        assert_eq!(store.bot_description(7, "fr").expect("read"), ("Un bot".into(), String::new()));
        assert_eq!(store.bot_description(7, "de").expect("read"), (String::new(), String::new()));
        store.set_bot_description(7, "", DescriptionField::Description, "").expect("remove");
        assert_eq!(store.bot_description(7, "").expect("read"), (String::new(), "Short".into()));
    }
}
