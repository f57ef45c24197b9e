//! The groups this bot device knows: the group id → negative `chat.id` map (derived from the
//! id, collision-checked, the same on every runtime and after a restart), title and type, our
//! membership, and our own MLS commit until the platform answers it. MLS epoch state itself is
//! openmls' (`openmls_*` tables, through `crypto::mls`), in the same database.

use rusqlite::{params, Connection, OptionalExtension};

use super::Result;

/// A group as the gateway knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupChat {
    pub group_id: Vec<u8>,
    pub chat_id: i64,
    pub title: String,
    /// `group` or `channel` (Bot API `chat.type`).
    pub kind: String,
    pub status: Membership,
}

impl GroupChat {
    pub fn is_channel(&self) -> bool {
        self.kind == "channel"
    }
}

/// Where this bot stands in a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Membership {
    /// Added by a member; the join (external commit) has not succeeded yet.
    Invited,
    /// A leaf of the group: reads and writes it.
    Member,
    /// Left (leaveChat), removed, or refused the join (no `groups` capability).
    Gone,
}

impl Membership {
    fn as_str(self) -> &'static str {
        match self {
            Membership::Invited => "invited",
            Membership::Member => "member",
            Membership::Gone => "gone",
        }
    }

    fn parse(s: &str) -> Membership {
        match s {
            "invited" => Membership::Invited,
            "member" => Membership::Member,
            _ => Membership::Gone,
        }
    }
}

/// Step "groups" of the bot database.
pub const SCHEMA: &str = "
-- One row per group this bot was added to. chat_id is derived from group_id (chat_id_candidate)
-- and unique; the 32-byte id never reaches the bot.
CREATE TABLE groups (
    group_id   BLOB PRIMARY KEY,
    chat_id    INTEGER NOT NULL UNIQUE,
    title      TEXT NOT NULL,
    kind       TEXT NOT NULL,
    status     TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);
-- Our MLS commit of a group (an external join, a removal) from the moment it is made until the
-- platform answers: a retry or a restart resends exactly it under the same client message id.
CREATE TABLE group_commits (
    group_id          BLOB PRIMARY KEY,
    client_message_id TEXT NOT NULL,
    request           BLOB NOT NULL,
    external          INTEGER NOT NULL
);
-- The users seen in groups (senders, members changed), to name a message's `from`.
CREATE TABLE group_users (
    user_id    INTEGER PRIMARY KEY,
    username   TEXT NOT NULL,
    first_name TEXT NOT NULL,
    is_bot     INTEGER NOT NULL
);
-- A group message's sealed SendGroupMessageRequest (the per-device `sealed` of private ones).
ALTER TABLE outbox ADD COLUMN group_sealed BLOB;
";

/// Step 10: groups live for years. `self_updated_at` is when our leaf was last replaced (0:
/// never, or joined by a Welcome: due now); `own_commit_seq` is the group_seq of our latest
/// accepted commit until the inbox has passed it (0: none), when the past epochs' secrets go.
pub const SCHEMA_YEARS: &str = "
ALTER TABLE groups ADD COLUMN self_updated_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE groups ADD COLUMN own_commit_seq INTEGER NOT NULL DEFAULT 0;
";

/// Step 11: the users a commit brought into a group's tree (a device joining by external
/// commit, a key package added), until the platform's membership notice about them arrives
/// (`gateway::groups::joiners`). `actor_id` let them in (the committer); `date` is the commit's.
pub const SCHEMA_JOINERS: &str = "
CREATE TABLE group_joiners (
    group_id BLOB NOT NULL,
    user_id  INTEGER NOT NULL,
    actor_id INTEGER NOT NULL,
    date     INTEGER NOT NULL,
    seen_at  INTEGER NOT NULL,
    PRIMARY KEY (group_id, user_id)
);
";

/// Step 16: the users the platform said left or were banned from a group, until their
/// leaves are gone from the tree (`gateway::groups::departed`): the bot posts nothing while one
/// remains, and commits the removal itself once the platform has not asked for it in time.
pub const SCHEMA_DEPARTED: &str = "
CREATE TABLE group_departed (
    group_id BLOB NOT NULL,
    user_id  INTEGER NOT NULL,
    since    INTEGER NOT NULL,
    PRIMARY KEY (group_id, user_id)
);
";

/// Chat ids of groups are in -(2^52 - 1) ..= -2^51: negative, within the 52 bits every SDK
/// (JavaScript numbers included) holds exactly, and far from any user id.
const CHAT_ID_BASE: i64 = 1 << 51;

/// The `attempt`-th candidate chat id of a group (attempt 0 almost always; a collision with
/// another group's id moves to the next).
fn chat_id_candidate(group_id: &[u8], attempt: u32) -> i64 {
    let mut input = group_id.to_vec();
    if attempt > 0 {
        input.extend_from_slice(&attempt.to_be_bytes());
    }
    let digest = crate::crypto::digest(&input);
    let low = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes")) & ((1 << 51) - 1);
    -(CHAT_ID_BASE | low as i64)
}

/// True when `chat_id` is in the range of group chat ids.
pub fn is_group_chat_id(chat_id: i64) -> bool {
    chat_id < 0
}

/// Records a group (or refreshes its title, type and our status) and returns it with its
/// chat id, which never changes once given.
pub fn upsert(conn: &Connection, group_id: &[u8], title: &str, kind: &str, status: Membership, now: i64) -> Result<GroupChat> {
    if let Some(mut known) = by_group_id(conn, group_id)? {
        conn.prepare_cached("UPDATE groups SET title = ?2, kind = ?3, status = ?4, updated_at = ?5 WHERE group_id = ?1")?.execute(params![group_id, title, kind, status.as_str(), now])?;
        known.title = title.to_string();
        known.kind = kind.to_string();
        known.status = status;
        return Ok(known);
    }
    let mut attempt = 0;
    let chat_id = loop {
        let candidate = chat_id_candidate(group_id, attempt);
        let taken: Option<i64> =
            conn.prepare_cached("SELECT 1 FROM groups WHERE chat_id = ?1")?.query_row(params![candidate], |r| r.get(0)).optional()?;
        if taken.is_none() {
            break candidate;
        }
        attempt += 1;
    };
    conn.prepare_cached("INSERT INTO groups (group_id, chat_id, title, kind, status, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")?.execute(params![group_id, chat_id, title, kind, status.as_str(), now])?;
    Ok(GroupChat { group_id: group_id.to_vec(), chat_id, title: title.into(), kind: kind.into(), status })
}

/// After the bot moved to a new identity: the groups it was a member of are joined again by its
/// new device (its old leaf's device is gone), commits of the old device are dropped, and key
/// packages are made anew.
pub fn join_again_as_new_device(conn: &Connection) -> Result<()> {
    conn.execute_batch(
        "UPDATE groups SET status = 'invited', self_updated_at = 0, own_commit_seq = 0 WHERE status = 'member';
         DELETE FROM group_commits;",
    )?;
    conn.execute("DELETE FROM meta WHERE key = ?1", [KEY_PACKAGES_MADE_AT])?;
    Ok(())
}

pub fn set_status(conn: &Connection, group_id: &[u8], status: Membership, now: i64) -> Result<()> {
    conn.prepare_cached("UPDATE groups SET status = ?2, updated_at = ?3 WHERE group_id = ?1")?.execute(params![group_id, status.as_str(), now])?;
    Ok(())
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<GroupChat> {
    Ok(GroupChat {
        group_id: r.get(0)?,
        chat_id: r.get(1)?,
        title: r.get(2)?,
        kind: r.get(3)?,
        status: Membership::parse(&r.get::<_, String>(4)?),
    })
}

pub fn by_group_id(conn: &Connection, group_id: &[u8]) -> Result<Option<GroupChat>> {
    Ok(conn.prepare_cached("SELECT group_id, chat_id, title, kind, status FROM groups WHERE group_id = ?1")?.query_row(params![group_id], row)
        .optional()?)
}

pub fn by_chat_id(conn: &Connection, chat_id: i64) -> Result<Option<GroupChat>> {
    Ok(conn.prepare_cached("SELECT group_id, chat_id, title, kind, status FROM groups WHERE chat_id = ?1")?.query_row(params![chat_id], row)
        .optional()?)
}

/// Groups we were added to and have not joined yet.
pub fn invited(conn: &Connection) -> Result<Vec<GroupChat>> {
    let mut stmt = conn.prepare_cached(
        "SELECT group_id, chat_id, title, kind, status FROM groups WHERE status = 'invited' ORDER BY updated_at",
    )?;
    let rows = stmt.query_map([], row)?.collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

/// Channels this device is a member of whose posters it has not read yet.
pub fn channels_without_posters(conn: &Connection) -> Result<Vec<GroupChat>> {
    let mut stmt = conn.prepare_cached(
        "SELECT group_id, chat_id, title, kind, status FROM groups
         WHERE kind = 'channel' AND status = 'member'
           AND group_id NOT IN (SELECT group_id FROM e2e_channel_posters_known) ORDER BY updated_at",
    )?;
    let rows = stmt.query_map([], row)?.collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

/// The groups we are a member of whose leaf was last replaced at or before `before`.
pub fn self_update_due(conn: &Connection, now: i64, period: i64) -> Result<Vec<Vec<u8>>> {
    // `clock::is_due` in SQL: the period passed, or the leaf was replaced under a clock that
    // was ahead and has been set back since.
    let mut stmt = conn.prepare_cached(
        "SELECT group_id FROM groups WHERE status = 'member' AND (self_updated_at <= ?1 OR self_updated_at > ?2) \
         ORDER BY self_updated_at",
    )?;
    let (before, ahead) = (now.saturating_sub(period), now.saturating_add(crate::clock::FUTURE_TOLERANCE_SECS));
    let rows = stmt.query_map(params![before, ahead], |r| r.get(0))?.collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

/// Our leaf of the group was replaced at `at` (0: never; a self-update is due).
pub fn set_self_updated(conn: &Connection, group_id: &[u8], at: i64) -> Result<()> {
    conn.prepare_cached("UPDATE groups SET self_updated_at = ?2 WHERE group_id = ?1")?.execute(params![group_id, at])?;
    Ok(())
}

/// The platform accepted a commit of ours at `group_seq`.
pub fn own_commit_accepted(conn: &Connection, group_id: &[u8], group_seq: u64) -> Result<()> {
    conn.prepare_cached("UPDATE groups SET own_commit_seq = max(own_commit_seq, ?2) WHERE group_id = ?1")?.execute(params![group_id, group_seq as i64])?;
    Ok(())
}

/// A delivery of the group at `group_seq` arrived: true (once) when it is past our latest
/// accepted commit, so nothing of an earlier epoch can arrive any more.
pub fn passed_own_commit(conn: &Connection, group_id: &[u8], group_seq: u64) -> Result<bool> {
    Ok(conn.prepare_cached("UPDATE groups SET own_commit_seq = 0 WHERE group_id = ?1 AND own_commit_seq > 0 AND own_commit_seq < ?2")?.execute(params![group_id, group_seq as i64])? > 0)
}

/// True while a commit of ours was accepted and the inbox has not passed it yet.
pub fn own_commit_outstanding(conn: &Connection, group_id: &[u8]) -> Result<bool> {
    let seq: Option<i64> =
        conn.prepare_cached("SELECT own_commit_seq FROM groups WHERE group_id = ?1")?.query_row([group_id], |r| r.get(0)).optional()?;
    Ok(seq.is_some_and(|s| s > 0))
}

/// When the key packages the platform holds for this device were made (the oldest batch we
/// rely on); `None` before the first batch of this release.
pub fn key_packages_made_at(conn: &Connection) -> Result<Option<i64>> {
    Ok(super::meta_get(conn, KEY_PACKAGES_MADE_AT)?.and_then(|v| v.parse().ok()))
}

pub fn set_key_packages_made_at(conn: &Connection, at: i64) -> Result<()> {
    Ok(super::meta_set(conn, KEY_PACKAGES_MADE_AT, &at.to_string())?)
}

const KEY_PACKAGES_MADE_AT: &str = "key_packages_made_at";

/// A user seen in a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupUser {
    pub user_id: u64,
    pub username: String,
    pub first_name: String,
    pub is_bot: bool,
}

pub fn remember_user(conn: &Connection, u: &GroupUser) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO group_users (user_id, username, first_name, is_bot) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (user_id) DO UPDATE SET username = excluded.username, first_name = excluded.first_name,
         is_bot = excluded.is_bot",
    )?
    .execute(params![u.user_id as i64, u.username, u.first_name, u.is_bot])?;
    Ok(())
}

pub fn user(conn: &Connection, user_id: u64) -> Result<Option<GroupUser>> {
    Ok(conn.prepare_cached("SELECT username, first_name, is_bot FROM group_users WHERE user_id = ?1")?.query_row(
        params![user_id as i64],
            |r| Ok(GroupUser { user_id, username: r.get(0)?, first_name: r.get(1)?, is_bot: r.get(2)? }),
    )
        .optional()?)
}

/// A user a commit brought into a group's tree, not (yet) announced by the platform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joiner {
    pub group_id: Vec<u8>,
    pub user_id: u64,
    /// Who let them in: the committer (the joiner themself for an external join).
    pub actor_id: u64,
    /// The commit's date.
    pub date: i64,
}

/// Notes a user a commit brought in; the first note of a user stays until announced.
pub fn note_joiner(conn: &Connection, j: &Joiner, now: i64) -> Result<()> {
    conn.prepare_cached("INSERT OR IGNORE INTO group_joiners (group_id, user_id, actor_id, date, seen_at) VALUES (?1, ?2, ?3, ?4, ?5)")?.execute(params![j.group_id, j.user_id as i64, j.actor_id as i64, j.date, now])?;
    Ok(())
}

/// The platform has said where the user stands in the group: nothing left to report.
pub fn joiner_announced(conn: &Connection, group_id: &[u8], user_id: u64) -> Result<()> {
    conn.prepare_cached("DELETE FROM group_joiners WHERE group_id = ?1 AND user_id = ?2")?.execute(params![group_id, user_id as i64])?;
    Ok(())
}

/// Whether any joiner noted at or before `seen_before` is still not announced.
pub fn unannounced_joiners_due(conn: &Connection, seen_before: i64) -> Result<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM group_joiners WHERE seen_at <= ?1 LIMIT 1")?
        .query_row([seen_before], |_| Ok(()))
        .optional()?
        .is_some())
}

/// The joiners noted at or before `seen_before` and still not announced, taken off the list.
pub fn take_unannounced_joiners(conn: &Connection, seen_before: i64) -> Result<Vec<Joiner>> {
    let joiners = conn
        .prepare_cached(
            "DELETE FROM group_joiners WHERE seen_at <= ?1 RETURNING group_id, user_id, actor_id, date",
        )?
        .query_map([seen_before], |r| {
            Ok(Joiner { group_id: r.get(0)?, user_id: r.get::<_, i64>(1)? as u64, actor_id: r.get::<_, i64>(2)? as u64, date: r.get(3)? })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(joiners)
}

/// The platform said `user_id` left the group or was banned from it (the first notice counts).
pub fn note_departed(conn: &Connection, group_id: &[u8], user_id: u64, now: i64) -> Result<()> {
    conn.prepare_cached("INSERT OR IGNORE INTO group_departed (group_id, user_id, since) VALUES (?1, ?2, ?3)")?
        .execute(params![group_id, user_id as i64, now])?;
    Ok(())
}

/// `user_id` is seated in the group again, or has no leaf left: no longer departed.
pub fn clear_departed(conn: &Connection, group_id: &[u8], user_id: u64) -> Result<()> {
    conn.prepare_cached("DELETE FROM group_departed WHERE group_id = ?1 AND user_id = ?2")?.execute(params![group_id, user_id as i64])?;
    Ok(())
}

/// The departed users of one group.
pub fn departed(conn: &Connection, group_id: &[u8]) -> Result<Vec<u64>> {
    let users = conn
        .prepare_cached("SELECT user_id FROM group_departed WHERE group_id = ?1 ORDER BY user_id")?
        .query_map([group_id], |r| r.get::<_, i64>(0))?
        .map(|u| u.map(|u| u as u64))
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(users)
}

/// The groups with a user departed at or before `before`: their removals are overdue.
pub fn groups_with_departed_before(conn: &Connection, before: i64) -> Result<Vec<Vec<u8>>> {
    let groups = conn
        .prepare_cached("SELECT DISTINCT group_id FROM group_departed WHERE since <= ?1")?
        .query_map([before], |r| r.get(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(groups)
}

/// Our commit of a group awaiting the platform's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingCommit {
    pub client_message_id: String,
    /// The encoded SendGroupMessageRequest.
    pub request: Vec<u8>,
    /// An external join: already merged here, forgotten if refused.
    pub external: bool,
}

pub fn pending_commit(conn: &Connection, group_id: &[u8]) -> Result<Option<PendingCommit>> {
    Ok(conn.prepare_cached("SELECT client_message_id, request, external FROM group_commits WHERE group_id = ?1")?.query_row(
        params![group_id],
            |r| Ok(PendingCommit { client_message_id: r.get(0)?, request: r.get(1)?, external: r.get(2)? }),
    )
        .optional()?)
}

pub fn set_pending_commit(conn: &Connection, group_id: &[u8], commit: &PendingCommit) -> Result<()> {
    conn.prepare_cached("INSERT OR REPLACE INTO group_commits (group_id, client_message_id, request, external) VALUES (?1, ?2, ?3, ?4)")?.execute(params![group_id, commit.client_message_id, commit.request, commit.external])?;
    Ok(())
}

/// Forgets the pending commit of a group if it is still the one named (a concurrent answer may
/// have settled it already); true when it was.
pub fn clear_pending_commit(conn: &Connection, group_id: &[u8], client_message_id: &str) -> Result<bool> {
    Ok(conn.prepare_cached("DELETE FROM group_commits WHERE group_id = ?1 AND client_message_id = ?2")?.execute(params![group_id, client_message_id])? > 0)
}

/// Forgets any pending commit of a group (it lost its epoch to another member's, or we left).
pub fn clear_commit(conn: &Connection, group_id: &[u8]) -> Result<()> {
    conn.prepare_cached("DELETE FROM group_commits WHERE group_id = ?1")?.execute(params![group_id])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> Connection {
        let c = Connection::open_in_memory().expect("db");
        crate::migrations::migrate(&c, super::super::schema::STEPS).expect("schema");
        c
    }

    #[test]
    fn a_group_keeps_one_negative_52_bit_chat_id_derived_from_its_id() {
        let c = db();
        let gid = [7u8; 32];
        let g = upsert(&c, &gid, "Team", "group", Membership::Invited, 1).unwrap();
        assert!(g.chat_id < 0 && g.chat_id.unsigned_abs() < (1 << 52), "{}", g.chat_id);
        assert_eq!(g.chat_id, chat_id_candidate(&gid, 0), "the same on every runtime");
        let again = upsert(&c, &gid, "Team 2", "group", Membership::Member, 2).unwrap();
        assert_eq!(again.chat_id, g.chat_id);
        assert_eq!(by_chat_id(&c, g.chat_id).unwrap().unwrap().title, "Team 2");
        assert_eq!(by_chat_id(&c, g.chat_id).unwrap().unwrap().status, Membership::Member);
        assert!(by_chat_id(&c, -5).unwrap().is_none());
    }

    #[test]
    fn a_collision_takes_the_next_candidate() {
        let c = db();
        let (a, b) = ([1u8; 32], [2u8; 32]);
        // Another group already holds b's first candidate.
        c.execute(
            "INSERT INTO groups (group_id, chat_id, title, kind, status, updated_at) VALUES (?1, ?2, 'x', 'group', 'member', 0)",
            params![&a[..], chat_id_candidate(&b, 0)],
        )
        .unwrap();
        let g = upsert(&c, &b, "B", "group", Membership::Invited, 1).unwrap();
        assert_eq!(g.chat_id, chat_id_candidate(&b, 1));
    }

    #[test]
    fn a_pending_commit_is_cleared_only_by_its_own_answer() {
        let c = db();
        let gid = [3u8; 32];
        let p = PendingCommit { client_message_id: "c1".into(), request: vec![1, 2], external: true };
        set_pending_commit(&c, &gid, &p).unwrap();
        assert_eq!(pending_commit(&c, &gid).unwrap(), Some(p));
        assert!(!clear_pending_commit(&c, &gid, "c0").unwrap());
        assert!(clear_pending_commit(&c, &gid, "c1").unwrap());
        assert_eq!(pending_commit(&c, &gid).unwrap(), None);
    }
}
