//! The profile database's schema: every numbered step (`crate::migrations`) and the tables
//! each adds, in one room. The modules that use the tables (`history`, `inline`,
//! `group_delivery`, `outbox`, `reply_keyboard`) read and write them; the profile opens the
//! database through these steps, so it needs none of those modules to do it.

use crate::e2e;
use crate::migrations::Step;

/// Every version of a profile database, in order (`crate::migrations`); version 1 is frozen.
pub(crate) const STEPS: &[Step] = &[
    Step { version: 1, sql: &[e2e::TABLES_V1, CLIENT_V1] },
    Step { version: 2, sql: &[e2e::inbound::TABLES_V2, CLIENT_V2] },
    // The received messages a press, an edit or a deletion refers to (`history`).
    Step { version: 3, sql: &[HISTORY_V3, INLINE_V3] },
    // The groups this device is in (`group`); openmls keeps their MLS state in its own tables.
    Step { version: 4, sql: &[GROUPS_V4] },
    // Messages typed in chat mode that the platform has not taken yet (`outbox`).
    Step { version: 5, sql: &[OUTBOX_V5] },
    // The reply keyboard each conversation shows (`reply_keyboard`).
    Step { version: 6, sql: &[REPLY_KEYBOARDS_V6] },
    // The texts this profile sent, for edits (`history`).
    Step { version: 7, sql: &[SENT_V6] },
    // Group leaves carry proof: this device's own, and the identity key pinned per user
    // (`e2e::leaf`); the profile records its proof when it opens.
    Step { version: 8, sql: &[e2e::leaf::TABLES] },
    // Who may post in each channel, as received, so a post from anyone else is dropped
    // (`e2e::posters`).
    Step { version: 9, sql: &[e2e::posters::TABLES] },
    // Our commits until the platform answers, resent under their client message id after a
    // lost answer (`group_commit`).
    Step { version: 10, sql: &[GROUP_COMMITS_V10] },
    // Groups live for years: leaf and key package ages, our latest accepted commit (`group`).
    Step { version: 11, sql: &[YEARS_V11] },
    // First messages cannot be replayed (`e2e::replay`).
    Step { version: 12, sql: &[e2e::REPLAY_TABLES] },
    // The identity keys the person checked (`identity`: `verify --mark`).
    Step { version: 13, sql: &[VERIFIED_V13] },
    // openmls' message secrets and trees may be compact (`crypto::mls_codec`).
    Step { version: 14, sql: &[crate::crypto::mls_codec::SCHEMA_STEP] },
    // Bot identity secrets this profile drew (`bot_keys`), kept until a config holds them.
    Step { version: 15, sql: &[BOT_SECRETS_V15] },
    // Devices' second-version certificates and signed removals (`e2e::leaf`, `e2e::removals`).
    Step { version: 16, sql: &e2e::DEVICE_PROOF_TABLES },
    // Which account each name stood for when this profile met it (`identity`: names).
    Step { version: 17, sql: &[NAMES_V17] },
    // The verified tree a rejoin is checked against once its state is replaced (`e2e::rejoin`).
    Step { version: 18, sql: &[e2e::rejoin::TABLES] },
    // Messages numbered per conversation, and the gaps a receiver waits on (`e2e::sequence`).
    Step { version: 19, sql: &[e2e::sequence::TABLES] },
    // Ids and dates senders vouch for, and group deletions members asked for (`e2e::vouch`,
    // `e2e::deletions`).
    Step { version: 20, sql: &[e2e::vouch::TABLES, e2e::deletions::TABLES] },
    // Sessions a restored state only receives on (`e2e::sessions_receive_only_after_restore`).
    Step { version: 21, sql: &[e2e::RECEIVE_ONLY_TABLES] },
    // openmls values may be postcard (crypto::mls_codec).
    Step { version: 22, sql: &[crate::crypto::mls_codec::SCHEMA_STEP_BINARY] },
];

/// Step 17: the account a name (lowercase, without `@`) stood for when this profile first
/// looked it up; a lookup that answers another account is refused until `trust`. Profiles
/// from before it bind each name at its next lookup.
const NAMES_V17: &str = "
CREATE TABLE client_names (
    name     TEXT PRIMARY KEY,
    user_id  INTEGER NOT NULL,
    bound_at INTEGER NOT NULL
);";

/// Step 15: a bot identity secret drawn by `e2e-chat newbot` or `rekey` (`bot_keys`), from
/// before its proof is sent (a crash then loses nothing) until a gateway config holds it.
const BOT_SECRETS_V15: &str = "
CREATE TABLE client_bot_secrets (
    bot_id_hex TEXT PRIMARY KEY,
    secret     BLOB NOT NULL,
    username   TEXT NOT NULL,
    drawn_at   INTEGER NOT NULL
);";

/// Step 13: the identity keys the person checked (`verify --mark`, `identity`). A mark counts
/// only while its key is the pinned one.
const VERIFIED_V13: &str = "
CREATE TABLE client_verified (
    user_id      INTEGER PRIMARY KEY,
    identity_key BLOB NOT NULL,
    verified_at  INTEGER NOT NULL
);";

/// Step 10: a group's commit of ours awaiting the platform's answer.
const GROUP_COMMITS_V10: &str = "
CREATE TABLE client_group_commits (
    group_id BLOB PRIMARY KEY,
    client_message_id TEXT NOT NULL,
    message BLOB NOT NULL,
    group_info BLOB NOT NULL,
    welcome BLOB NOT NULL
);";

/// Step 2: the processed seqs give way to the one inbound rule of `e2e::inbound`. Envelopes
/// are processed in seq order, so the highest processed seq is the cursor.
const CLIENT_V2: &str = "
INSERT OR IGNORE INTO e2e_inbound_cursor (id, seq)
    SELECT 1, max(seq) FROM client_processed WHERE EXISTS (SELECT 1 FROM client_processed);
DROP TABLE client_processed;
";

/// The client tables as the release before schema versions created them at every open.
const CLIENT_V1: &str = "
         CREATE TABLE IF NOT EXISTS client_account (
             id INTEGER PRIMARY KEY CHECK (id = 1),
             server_url TEXT NOT NULL,
             identity_seed BLOB NOT NULL,
             user_id INTEGER NOT NULL,
             device_id INTEGER NOT NULL,
             device_secret BLOB NOT NULL,
             username TEXT NOT NULL,
             display_name TEXT NOT NULL
         );
         -- Inbox seqs already opened, so a redelivery after a crash between commit and ack
         -- is acknowledged silently. The newest PROCESSED_MEMORY are kept.
         CREATE TABLE IF NOT EXISTS client_processed (seq INTEGER PRIMARY KEY);";

/// Profile schema step 3: the remembered messages. Insertion order (the rowid) tells the newest.
pub(super) const HISTORY_V3: &str = "
CREATE TABLE client_messages (
    peer_user_id INTEGER NOT NULL,
    message_id INTEGER NOT NULL,
    -- The message's date (unix seconds), as its envelope carried it.
    date INTEGER NOT NULL,
    -- The encoded e2e.Content as received, later edits applied.
    content BLOB NOT NULL,
    PRIMARY KEY (peer_user_id, message_id)
);";

/// Profile schema step 3 too: the inline sessions this profile opened, with the bot's latest
/// results and the message a choice sent.
pub(super) const INLINE_V3: &str = "
CREATE TABLE client_inline_sessions (
    session_id INTEGER PRIMARY KEY,
    peer_user_id INTEGER NOT NULL,
    query TEXT NOT NULL,
    -- The encoded e2e.InlineResults last received; NULL before the first.
    results BLOB,
    -- The message our choice sent (0 before a choice).
    chosen_message_id INTEGER NOT NULL DEFAULT 0,
    chosen_date INTEGER NOT NULL DEFAULT 0
);";

/// Profile schema step 4: the groups this device knows.
pub(super) const GROUPS_V4: &str = "
CREATE TABLE client_groups (
    group_id BLOB PRIMARY KEY,            -- 32 bytes
    title TEXT NOT NULL,                  -- as the platform last told it
    type INTEGER NOT NULL,                -- platform.proto GroupType
    last_seq INTEGER NOT NULL DEFAULT 0   -- the highest group_seq processed
);";

/// Profile schema step 5: the outbox.
pub(super) const OUTBOX_V5: &str = "
CREATE TABLE client_outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    -- The peer as the person named it (a username, looked up again at each attempt), or
    -- `group:` and a group's id in hex.
    peer TEXT NOT NULL,
    client_message_id TEXT NOT NULL UNIQUE,
    -- The message (wire.e2e.Content), not yet encrypted.
    content BLOB NOT NULL,
    queued_at INTEGER NOT NULL
);";

/// Profile schema step 6: the reply keyboard each conversation shows.
pub(super) const REPLY_KEYBOARDS_V6: &str = "
CREATE TABLE client_reply_keyboards (
    -- The dialog's peer, or a group's `history::group_peer`.
    peer_user_id INTEGER PRIMARY KEY,
    -- The message that brought it.
    message_id INTEGER NOT NULL,
    -- The encoded e2e.ReplyKeyboard.
    keyboard BLOB NOT NULL
);";

/// Profile schema step 6: the texts this profile sent, per dialog (or group, under
/// `group_peer`), so that an edit names only a message of our own and keeps its reply and
/// forward fields (the newest `MAX_REMEMBERED` are kept, as for received ones); and who sent a
/// received group message, so that only its sender's edit applies to it.
pub(super) const SENT_V6: &str = "
-- 0: a dialog's message (its sender is the peer), or one remembered before this step.
ALTER TABLE client_messages ADD COLUMN sender_user_id INTEGER NOT NULL DEFAULT 0;
CREATE TABLE client_sent (
    peer_user_id INTEGER NOT NULL,
    message_id INTEGER NOT NULL,
    date INTEGER NOT NULL,
    -- The encoded e2e.Content as sent, our later edits applied.
    content BLOB NOT NULL,
    PRIMARY KEY (peer_user_id, message_id)
);";

/// Profile schema step 11: per group, when our leaf was last replaced (0: never, or joined by
/// a Welcome: due) and the group_seq of our latest accepted commit until the inbox passes it
/// (0: none; then the past epoch secrets go); and when the key packages the platform holds
/// for this device were made (NULL: unknown).
pub(super) const YEARS_V11: &str = "
ALTER TABLE client_groups ADD COLUMN self_updated_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE client_groups ADD COLUMN own_commit_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE client_account ADD COLUMN key_packages_made_at INTEGER;
";
