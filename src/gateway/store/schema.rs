//! The schema of a bot database and its numbered migrations (`crate::migrations`): the gateway
//! tables below and the e2e tables (`crate::e2e::TABLES_V1`).

use rusqlite::{params, Connection, OptionalExtension};

use crate::migrations::{self, MigrationError, Migrated, Step};

/// Every version of a bot database, in order. A later issue that adds a table appends a step
/// here (version 2, …); version 1 is frozen (see `crate::migrations`).
pub(crate) const STEPS: &[Step] = &[
    Step { version: 1, sql: &[GATEWAY_V1, crate::e2e::TABLES_V1] },
    Step { version: 2, sql: &[crate::e2e::inbound::TABLES_V2, GATEWAY_V2] },
    Step { version: 3, sql: &[GATEWAY_V3] },
    Step { version: 4, sql: &[GATEWAY_MEDIA] },
    // Groups: the chat id map, our membership and our pending commit (`store::groups`).
    Step { version: 5, sql: &[super::groups::SCHEMA] },
    // Nothing answered with an error and then sent: the outbox's hand-over mark, the sends it
    // gave up, unanswered presses found by age (`store::outbox`, `chats::remember_callback`).
    Step { version: 6, sql: &[super::outbox::SCHEMA_HANDED_AND_GIVEN_UP] },
    // Polls: the votes of each voter (`store::polls`).
    Step { version: 7, sql: &[super::polls::SCHEMA] },
    // Group leaves carry proof: this device's own, and the identity key pinned per user
    // (`e2e::leaf`); the runtime records the proof at start.
    Step { version: 8, sql: &[crate::e2e::leaf::TABLES] },
    // Who may post in each channel, as received, so a post the platform let through from anyone
    // else is dropped (`e2e::posters`).
    Step { version: 9, sql: &[crate::e2e::posters::TABLES] },
    // Groups live for years: when our leaf was last replaced, and our latest accepted commit
    // until the inbox passes it (`store::groups`).
    Step { version: 10, sql: &[super::groups::SCHEMA_YEARS] },
    // Joiners a commit brought in until the platform announces them (`gateway::groups::joiners`).
    Step { version: 11, sql: &[super::groups::SCHEMA_JOINERS] },
    // First messages cannot be replayed (`e2e::replay`).
    Step { version: 12, sql: &[crate::e2e::REPLAY_TABLES] },
    // openmls' message secrets and trees may be compact (`crypto::mls_codec`).
    Step { version: 13, sql: &[crate::crypto::mls_codec::SCHEMA_STEP] },
    // Devices' second-version certificates and signed removals (`e2e::leaf`, `e2e::removals`).
    Step { version: 14, sql: &crate::e2e::DEVICE_PROOF_TABLES },
    // The verified tree a rejoin is checked against once its state is replaced (`e2e::rejoin`).
    Step { version: 15, sql: &[crate::e2e::rejoin::TABLES] },
    // Users the platform said left or were banned, until their leaves are gone
    // (`gateway::groups::departed`).
    Step { version: 16, sql: &[super::groups::SCHEMA_DEPARTED] },
    // Messages numbered per conversation, and the gaps a receiver waits on (`e2e::sequence`).
    Step { version: 17, sql: &[crate::e2e::sequence::TABLES] },
    // Ids and dates senders vouch for, and group deletions members asked for (`e2e::vouch`,
    // `e2e::deletions`).
    Step { version: 18, sql: &[crate::e2e::vouch::TABLES, crate::e2e::deletions::TABLES] },
    // Sessions a restored state only receives on (`e2e::sessions_receive_only_after_restore`).
    Step { version: 19, sql: &[crate::e2e::RECEIVE_ONLY_TABLES] },
    // openmls values may be postcard (crypto::mls_codec).
    Step { version: 20, sql: &[crate::crypto::mls_codec::SCHEMA_STEP_BINARY] },
];

/// Step "media": the files this gateway issued a file_id for (store::files).
const GATEWAY_MEDIA: &str = "
-- One row per platform file (file_ref) received or sent: the opaque file_id handed to the bot
-- and the encoded e2e.Media (reference, key, digest, size, type, name, kind, dimensions; no
-- caption) needed to send it again or download it. Rows live as long as state_dir.
CREATE TABLE files (
    file_id     TEXT PRIMARY KEY,
    file_ref    TEXT NOT NULL UNIQUE,
    media       BLOB NOT NULL,
    created_at  INTEGER NOT NULL
);
";

/// Step 3: interactive private dialogs — edits in the history, callback presses awaiting an
/// answer, and reactions.
const GATEWAY_V3: &str = "
-- When the bot last edited the message (unix seconds); 0 when never.
ALTER TABLE history ADD COLUMN edit_date INTEGER NOT NULL DEFAULT 0;
-- 1 once the bot deleted the message: it is gone for every method, and a press on it (a
-- replayed context) is refused instead of bringing it back.
ALTER TABLE history ADD COLUMN deleted INTEGER NOT NULL DEFAULT 0;
-- Callback presses received (chats::remember_callback): answerCallbackQuery finds the user to
-- answer here, and answers each press once. The newest CALLBACK_LIMIT are kept.
CREATE TABLE callbacks (
    id          TEXT PRIMARY KEY,
    chat_id     INTEGER NOT NULL,
    press_id    TEXT NOT NULL,
    answered    INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL
);
-- The current reactions (an encoded e2e.Reaction) of each party to a message of a private
-- chat: a user's give the next message_reaction update its old_reaction.
CREATE TABLE reactions (
    chat_id     INTEGER NOT NULL,
    message_id  INTEGER NOT NULL,
    user_id     INTEGER NOT NULL,
    reaction    BLOB NOT NULL,
    PRIMARY KEY (chat_id, message_id, user_id)
);
-- Inline sessions imported (store::inline): answerInlineQuery finds the user here, and a
-- session seen before (or at or below the meta 'inline_pruned_below' id) makes no second
-- update. The newest INLINE_LIMIT are kept.
CREATE TABLE inline_queries (
    session_id   INTEGER PRIMARY KEY,
    user_id      INTEGER NOT NULL,
    query        TEXT NOT NULL,
    received_at  INTEGER NOT NULL,
    chosen       INTEGER NOT NULL DEFAULT 0
);
";

/// Step 2: the inbox cursor and the memory of imported messages move to the one inbound rule
/// of `e2e::inbound`, with what they held.
const GATEWAY_V2: &str = "
INSERT OR IGNORE INTO e2e_inbound_cursor (id, seq)
    SELECT 1, CAST(value AS INTEGER) FROM meta WHERE key = 'inbox_cursor';
INSERT OR IGNORE INTO e2e_inbound_seen (source, n) SELECT source, n FROM processed;
DELETE FROM meta WHERE key = 'inbox_cursor';
DROP TABLE processed;
";

/// The gateway tables as the release before schema versions created them at every open.
const GATEWAY_V1: &str = "
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
-- The durable update queue shared by getUpdates and the webhook. AUTOINCREMENT: an update_id
-- is never reused, even after the newest rows were acknowledged and deleted.
CREATE TABLE IF NOT EXISTS updates (
    update_id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind      TEXT NOT NULL,
    payload   TEXT NOT NULL
);
-- The number of rows in `updates`, kept by the triggers below in the same transaction as every
-- insert and delete, so pending_update_count never scans the queue (see queue::pending_count).
CREATE TABLE IF NOT EXISTS queue_stats (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    pending INTEGER NOT NULL
);
-- Counted once, when the counter is created (the constant NOT EXISTS skips the scan later).
INSERT OR IGNORE INTO queue_stats (id, pending)
    SELECT 1, count(*) FROM updates WHERE NOT EXISTS (SELECT 1 FROM queue_stats);
CREATE TRIGGER IF NOT EXISTS updates_counted_insert AFTER INSERT ON updates
BEGIN
    UPDATE queue_stats SET pending = pending + 1 WHERE id = 1;
END;
CREATE TRIGGER IF NOT EXISTS updates_counted_delete AFTER DELETE ON updates
BEGIN
    UPDATE queue_stats SET pending = pending - 1 WHERE id = 1;
END;
-- The last 2048 transport events imported (see queue::remember_processed).
CREATE TABLE IF NOT EXISTS processed (
    source TEXT PRIMARY KEY,
    n      INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS processed_n ON processed (n);
-- Private chats that produced an update: the only ones sendMessage may address.
CREATE TABLE IF NOT EXISTS private_chats (
    user_id    INTEGER PRIMARY KEY,
    username   TEXT NOT NULL,
    first_name TEXT NOT NULL,
    last_seen  INTEGER NOT NULL
);
-- Messages the bot knows (received and sent), for replies and later edit/delete.
CREATE TABLE IF NOT EXISTS history (
    chat_id    INTEGER NOT NULL,
    message_id INTEGER NOT NULL,
    from_bot   INTEGER NOT NULL,
    sender_id  INTEGER NOT NULL,
    date       INTEGER NOT NULL,
    content    BLOB NOT NULL,
    PRIMARY KEY (chat_id, message_id)
);
-- Outgoing messages until the platform acknowledged them. `sealed` holds the per-device
-- ciphertexts committed before the first send; a retry resends exactly those bytes.
CREATE TABLE IF NOT EXISTS outbox (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    client_message_id TEXT NOT NULL UNIQUE,
    chat_id           INTEGER NOT NULL,
    content           BLOB NOT NULL,
    sealed            BLOB,
    attempts          INTEGER NOT NULL DEFAULT 0,
    last_error        TEXT,
    created_at        INTEGER NOT NULL
);
";

/// Journal settings of the writable connection (outside any transaction, so before [`migrate`]).
/// `secure_delete` zeroes freed pages: MLS epoch secrets and ratchet keys openmls and the
/// sessions delete must not linger in the file (forward secrecy; docs/groups.md). Old page
/// images stay in the write-ahead log until it is overwritten, so the log is cut back to
/// nothing at each checkpoint (`journal_size_limit`), the writer checkpoints after a batch
/// that deleted secrets, and every 64 pages otherwise (`crate::e2e::wal`).
pub fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA secure_delete = ON;")?;
    conn.execute_batch(crate::e2e::wal::JOURNAL_SIZE_LIMIT)?;
    conn.execute_batch(crate::e2e::wal::WAL_AUTOCHECKPOINT)
}

/// Brings a bot database to the newest schema version, or refuses one from a newer release.
pub fn migrate(conn: &Connection) -> Result<Migrated, MigrationError> {
    migrations::migrate(conn, STEPS)
}

pub fn meta_get(conn: &Connection, key: &str) -> rusqlite::Result<Option<String>> {
    conn.prepare_cached("SELECT value FROM meta WHERE key = ?1")?.query_row(params![key], |r| r.get(0)).optional()
}

pub fn meta_delete(conn: &Connection, key: &str) -> rusqlite::Result<()> {
    conn.prepare_cached("DELETE FROM meta WHERE key = ?1")?.execute(params![key])?;
    Ok(())
}

pub fn meta_set(conn: &Connection, key: &str, value: &str) -> rusqlite::Result<()> {
    conn.prepare_cached("INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value")?.execute(params![key, value])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_2_moves_the_inbox_cursor_and_the_processed_memory() {
        let c = Connection::open_in_memory().expect("db");
        migrations::migrate(&c, &STEPS[..1]).expect("version 1");
        c.execute_batch(
            "INSERT INTO meta (key, value) VALUES ('inbox_cursor', '12');
             INSERT INTO processed (source, n) VALUES ('7:a', 1), ('7:b', 2);",
        )
        .expect("old state");
        migrations::migrate(&c, STEPS).expect("version 2");
        assert_eq!(crate::e2e::inbound::cursor(&c).expect("cursor"), 12);
        assert!(crate::e2e::inbound::is_repeat(&c, 13, 7, "b").expect("check"), "remembered ids move too");
        assert!(!crate::e2e::inbound::is_repeat(&c, 13, 7, "c").expect("check"));
        assert_eq!(meta_get(&c, "inbox_cursor").expect("meta"), None);
    }
}
