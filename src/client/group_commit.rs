//! This device's own commits to a group, kept until the platform answers, as the gateway keeps
//! its own (`gateway::groups::commit`): a commit is made and recorded with its client message id
//! in one transaction, then sent. An answer settles it (OK: merged; refused or stale:
//! discarded). A lost answer, or a crash before one, leaves it recorded: before this device
//! does anything else in the group (sends, commits, reads a delivery of it) the same commit is
//! sent again under the same client message id, and the platform answers a repeat with its
//! first answer. So this device and the platform never end at different epochs.

use rusqlite::{params, Connection, OptionalExtension};

use super::error::{E2eContext, Result};
use super::group_delivery::{own_commit_accepted, short};
use super::message::GroupId;
use super::profile::Profile;
use super::send::new_client_message_id;
use crate::e2e::group::{self as mls_group, CommitOut};
use crate::wire::platform::{send_group_message_response::Status, SendGroupMessageResponse};

/// A commit made and not yet answered.
#[derive(Clone, Debug)]
pub(super) struct RecordedCommit {
    pub client_message_id: String,
    pub out: CommitOut,
}

/// Records `out` as the commit of `group` awaiting an answer (in the transaction that made it).
fn record(c: &Connection, group: &GroupId, out: &CommitOut) -> Result<RecordedCommit> {
    let client_message_id = new_client_message_id();
    c.execute(
        "INSERT OR REPLACE INTO client_group_commits (group_id, client_message_id, message, group_info, welcome)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![group.0.to_vec(), client_message_id, out.message, out.group_info, out.welcome],
    )?;
    Ok(RecordedCommit { client_message_id, out: out.clone() })
}

fn recorded(c: &Connection, group: &GroupId) -> Result<Option<RecordedCommit>> {
    Ok(c.query_row(
        "SELECT client_message_id, message, group_info, welcome FROM client_group_commits WHERE group_id = ?1",
        params![group.0.to_vec()],
        |r| {
            Ok(RecordedCommit {
                client_message_id: r.get(0)?,
                out: CommitOut { message: r.get(1)?, group_info: r.get(2)?, welcome: r.get(3)?, epoch: 0, ..CommitOut::default() },
            })
        },
    )
    .optional()?)
}

fn clear(c: &Connection, group: &GroupId) -> Result<()> {
    c.execute("DELETE FROM client_group_commits WHERE group_id = ?1", params![group.0.to_vec()])?;
    Ok(())
}

impl Profile {
    /// Makes a commit of `group` with `derive` and records it, in one transaction; `None` when
    /// there is nothing to commit.
    pub(super) fn make_commit(
        &self,
        group: &GroupId,
        what: &str,
        derive: impl FnOnce(&Connection) -> std::result::Result<Option<CommitOut>, crate::e2e::E2eError>,
    ) -> Result<Option<RecordedCommit>> {
        self.write(|c| match derive(c).context(|| format!("{what} in group {}", short(group)))? {
            Some(out) => record(c, group, &out).map(Some),
            None => Ok(None),
        })
    }

    /// Sends a recorded commit (again) and settles it by the answer: OK merges it, any other
    /// status discards it. A call that fails keeps it recorded for the next try.
    pub(super) fn send_recorded(&self, group: &GroupId, commit: &RecordedCommit) -> Result<SendGroupMessageResponse> {
        let out = commit.out.clone();
        let resp = self.send_to_group(group, &commit.client_message_id, out.message, out.group_info, out.welcome, Vec::new())?;
        let accepted = resp.status.enum_value() == Ok(Status::OK);
        self.write(|c| {
            if accepted {
                own_commit_accepted(c, group, resp.group_seq)?;
                mls_group::commit_accepted(c, &group.0)
            } else {
                mls_group::commit_refused(c, &group.0)
            }
            .context(|| format!("settling our commit in group {}", short(group)))?;
            clear(c, group)
        })?;
        Ok(resp)
    }

    /// Settles a commit of `group` left unanswered (a lost answer, a crash), before this device
    /// does anything else in the group. Nothing to do when there is none.
    pub(super) fn settle_commit(&self, group: &GroupId) -> Result<()> {
        let Some(commit) = recorded(&self.conn, group)? else {
            return Ok(());
        };
        let resp = self.send_recorded(group, &commit)?;
        log::info!("group {}: our unanswered commit is settled ({:?})", short(group), resp.status);
        Ok(())
    }
}
