//! The lower half of groups on a user device, which the inbox needs: the groups this device
//! knows (`client_groups`), opening a group delivery inside the transaction that accepts its
//! envelope (`open_delivery`), what such a delivery asks for once it has committed
//! (`e2e::follow_up::FollowUp`: removing the leaves of who left, topping key packages up), the device's key
//! packages, and the one SendGroupMessage call. `group.rs` builds the operations on top.

use rusqlite::{params, Connection, OptionalExtension};

use super::error::{ClientError, E2eContext, Result, rpc};
use super::message::{received_message, GroupId, GroupRef, GroupRole, Incoming, Sender};
use super::profile::Profile;
use crate::e2e::follow_up::{FollowUp, GroupRef as FollowGroup};
use crate::e2e::group::{self as mls_group, Received};
use crate::e2e::{posters, E2eError};
use crate::wire::roles::may_post_in_channel;
use crate::wire::platform::{
    group_delivery, send_group_message_response::Status, GroupDelivery, GroupType, InboxEnvelope,
    KeyPackagesUpload, Profile as PeerProfile, SendGroupMessageRequest, SendGroupMessageResponse,
};

/// Upload new key packages when the platform holds fewer than this for the device.
pub const KEY_PACKAGES_LOW: u32 = 10;
/// How many key packages the platform holds for the device after an upload.
pub const KEY_PACKAGES_TARGET: u32 = 20;
/// How often this device replaces its own leaf in a group it uses (post-compromise security;
/// a leaf from a key package then never lives long enough to expire).
pub const SELF_UPDATE_PERIOD_SECS: i64 = 7 * 86_400;

/// A group this device knows (it is in it, or was told about it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KnownGroup {
    pub id: GroupId,
    pub title: String,
    pub kind: GroupType,
    pub last_seq: u64,
}

impl Profile {
    /// Reads who may post in the channel `group` from the platform's member list, once this
    /// device is in it: from then on a post from anyone else is dropped. A failure is logged;
    /// until the list is read, posts are not checked.
    pub(super) fn learn_posters(&self, group: &GroupId, kind: GroupType) {
        if kind != GroupType::CHANNEL {
            return;
        }
        let req = crate::wire::platform::GroupRequest { group_id: group.0.to_vec(), ..Default::default() };
        let learned = self
            .platform
            .client
            .get_group(&req, self.platform.opt())
            .map_err(rpc("GetGroup"))
            .and_then(|g| {
                let users: Vec<u64> = g.members.iter().filter(|m| may_post_in_channel(m)).map(|m| m.user.user_id).collect();
                self.write(|c| posters::set_posters(c, &group.0, &users).context(|| format!("channel {}", short(group))))
            });
        if let Err(e) = learned {
            log::warn!("could not learn who posts in channel {}: {e}", short(group));
        }
    }

    /// Asks the platform how many key packages it holds for this device (an empty upload)
    /// and uploads new ones when fewer than `KEY_PACKAGES_LOW` remain. Returns the count on
    /// the platform. Runs at registration, when receiving starts, and after a Welcome used one.
    /// A batch older than half its lifetime is replaced whole (`e2e::group::key_packages_due`).
    pub fn keep_key_packages(&self) -> Result<u32> {
        let remaining = self.upload_key_packages(Vec::new())?;
        let now = crate::clock::unix_now();
        let made_at: Option<i64> =
            self.conn.query_row("SELECT key_packages_made_at FROM client_account WHERE id = 1", [], |r| r.get(0))?;
        let (count, renew) = mls_group::key_packages_due(remaining, made_at, now, KEY_PACKAGES_LOW, KEY_PACKAGES_TARGET);
        if count == 0 {
            return Ok(remaining);
        }
        let held = self.upload_fresh_key_packages(count)?;
        if renew {
            self.write(|c| Ok(c.execute("UPDATE client_account SET key_packages_made_at = ?1 WHERE id = 1", [now])?))?;
        }
        Ok(held)
    }

    fn upload_fresh_key_packages(&self, count: usize) -> Result<u32> {
        let fresh = self.write(|c| {
            mls_group::key_packages(c, count).context(|| "making key packages".to_string())
        })?;
        let now = self.upload_key_packages(fresh)?;
        log::info!(
            "uploaded {count} key packages for @{}; the platform holds {now}",
            self.username()
        );
        Ok(now)
    }

    /// Replaces this device's leaf in the group when it is older than `SELF_UPDATE_PERIOD_SECS`
    /// (or was never replaced: joined by a Welcome, or a profile of an earlier release).
    /// Failures are logged: the command that asked goes on, and the next one tries again.
    /// `in_follow_up`: one try (see `commit_once`); a command catches up and derives again.
    pub(super) fn self_update_if_due(&self, group: &GroupId, in_follow_up: bool) {
        let now = crate::clock::unix_now();
        let due = self.conn.query_row(
            "SELECT self_updated_at FROM client_groups WHERE group_id = ?1",
            params![group.0.to_vec()],
            |r| r.get::<_, i64>(0),
        );
        if !due.is_ok_and(|at| crate::clock::is_due(at, now, SELF_UPDATE_PERIOD_SECS)) || !matches!(mls_group::epoch(&self.conn, &group.0), Ok(Some(_))) {
            return;
        }
        let what = "updating our leaf";
        let derive = |c: &Connection| mls_group::self_update(c, &group.0).map(Some);
        let done = if in_follow_up {
            self.commit_once(group, what, derive).map(|ok| ok == Some(true))
        } else {
            self.commit_own(group, what, derive)
        };
        match done {
            Ok(true) => match self.write(|c| set_self_updated(c, group, now)) {
                Ok(()) => log::info!("group {}: replaced our leaf (self-update)", short(group)),
                Err(e) => log::warn!("group {}: recording our self-update: {e}", short(group)),
            },
            Ok(false) => log::info!("group {}: our self-update was not taken; tried again at the next command", short(group)),
            Err(e) => log::warn!("group {}: self-update failed (tried again at the next command): {e}", short(group)),
        }
    }

    fn upload_key_packages(&self, key_packages: Vec<Vec<u8>>) -> Result<u32> {
        let mut req = KeyPackagesUpload::new();
        req.key_packages = key_packages;
        self.platform
            .client
            .upload_key_packages(&req, self.platform.opt())
            .map(|r| r.remaining)
            .map_err(rpc("UploadKeyPackages"))
    }

    pub(super) fn send_to_group(
        &self,
        group: &GroupId,
        client_message_id: &str,
        message: Vec<u8>,
        group_info: Vec<u8>,
        welcome: Vec<u8>,
        file_refs: Vec<String>,
    ) -> Result<SendGroupMessageResponse> {
        let mut req = SendGroupMessageRequest::new();
        req.group_id = group.0.to_vec();
        req.client_message_id = client_message_id.to_string();
        req.message = message;
        req.group_info = group_info;
        req.welcome = welcome;
        // The files an application message carries: the platform sweeps uploads none named.
        req.file_refs = file_refs;
        req.names_files = true;
        self.platform
            .client
            .send_group_message(&req, self.platform.opt())
            .map_err(rpc("SendGroupMessage"))
    }

    /// Runs what a processed group delivery asks for; failures are logged (the next message or
    /// member takes it up again).
    pub(super) fn follow_up(&self, follow_up: FollowUp) {
        let named = |g: &[u8]| GroupId::from_slice(g);
        match follow_up {
            FollowUp::Joined(g) => {
                let Some(group) = named(&g.id) else { return };
                self.learn_posters(&group, g.kind);
                if let Err(e) = self.keep_key_packages() {
                    log::warn!(
                        "could not replenish the key packages of @{}: {e}",
                        self.username()
                    );
                }
                self.self_update_if_due(&group, true);
            }
            FollowUp::Rejoin(g) => {
                let Some(group) = named(&g.id) else { return };
                log::warn!("group {}: rejoining by external commit from the newest GroupInfo", short(&group));
                match self.join_external(&group, &g.title, g.kind) {
                    Ok(()) => {}
                    Err(e @ ClientError::E2e { source: E2eError::RejoinRefused { .. }, .. }) => {
                        log::error!("SECURITY ALERT: {e} (the next delivery tries again)")
                    }
                    Err(e) => log::warn!("rejoining group {} failed (the next delivery tries again): {e}", short(&group)),
                }
            }
            FollowUp::Join(g) => {
                let Some(group) = named(&g.id) else { return };
                if let Err(e) = self.join_external(&group, &g.title, g.kind) {
                    log::warn!("joining group {} after the approval failed: {e}", short(&group));
                }
            }
            FollowUp::RemoveLeaves { group, users } => {
                let Some(group) = named(&group) else { return };
                // One try: on a stale epoch another member's commit came first, and it is on
                // its way through the inbox (it removes them, or the next sender will).
                let what = format!("the removal of the leaves of {users:?}");
                match self.commit_once(&group, &what, |c| mls_group::remove_users(c, &group.0, &users)) {
                    Ok(None) => {}
                    Ok(Some(true)) => log::info!("group {}: removed the leaves of {users:?}", short(&group)),
                    Ok(Some(false)) => log::info!("group {}: removal of {users:?} not ours", short(&group)),
                    Err(e) => log::warn!("group {}: {what}: {e}", short(&group)),
                }
            }
            // The client reports gaps after every batch (`inbox`), and counts no sessions:
            // its imports return none of these.
            FollowUp::JoinersNoted { .. } | FollowUp::DepartedNoted { .. } | FollowUp::GapNoted { .. } | FollowUp::SessionStarted => {}
        }
    }

    /// Sends one commit `derive` makes and settles it, without catching up (a follow-up runs
    /// inside the receive loop, which brings whatever commit came first). `None`: nothing to
    /// commit; otherwise whether the platform accepted it.
    fn commit_once(
        &self,
        group: &GroupId,
        what: &str,
        derive: impl FnOnce(&Connection) -> std::result::Result<Option<mls_group::CommitOut>, E2eError>,
    ) -> Result<Option<bool>> {
        self.settle_commit(group)?;
        let Some(commit) = self.make_commit(group, what, derive)? else {
            return Ok(None);
        };
        let resp = self.send_recorded(group, &commit)?;
        Ok(Some(resp.status.enum_value() == Ok(Status::OK)))
    }
}

/// The first 8 bytes of the id in hex, as errors and logs name a group.
pub(super) fn short(group: &GroupId) -> String {
    mls_group::short_id(&group.0)
}

pub(super) fn sender_of(p: &PeerProfile) -> Sender {
    Sender {
        user_id: p.user_id,
        username: p.username.clone(),
        display_name: p.display_name.clone(),
        is_bot: p.is_bot,
    }
}

pub(super) fn remember_group(
    c: &Connection,
    id: &GroupId,
    title: &str,
    kind: GroupType,
    seq: u64,
) -> Result<()> {
    c.execute(
        "INSERT INTO client_groups (group_id, title, type, last_seq) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (group_id) DO UPDATE SET title = excluded.title, type = excluded.type,
             last_seq = max(last_seq, excluded.last_seq)",
        params![id.0.to_vec(), title, kind as i32, seq as i64],
    )?;
    Ok(())
}

/// Our leaf of the group was replaced at `at` (0: never; a self-update is due).
pub(super) fn set_self_updated(c: &Connection, id: &GroupId, at: i64) -> Result<()> {
    c.execute("UPDATE client_groups SET self_updated_at = ?2 WHERE group_id = ?1", params![id.0.to_vec(), at])?;
    Ok(())
}

/// The platform accepted a commit of ours at `group_seq`: merged ahead of what the inbox has
/// not read yet, so the past epochs stay until the inbox passes it.
pub(super) fn own_commit_accepted(c: &Connection, id: &GroupId, group_seq: u64) -> Result<()> {
    c.execute(
        "UPDATE client_groups SET own_commit_seq = max(own_commit_seq, ?2) WHERE group_id = ?1",
        params![id.0.to_vec(), group_seq as i64],
    )?;
    Ok(())
}

/// True while a commit of ours was accepted and the inbox has not passed it yet.
fn own_commit_outstanding(c: &Connection, id: &GroupId) -> Result<bool> {
    let seq: Option<i64> = c
        .query_row("SELECT own_commit_seq FROM client_groups WHERE group_id = ?1", [id.0.to_vec()], |r| r.get(0))
        .optional()?;
    Ok(seq.is_some_and(|s| s > 0))
}

/// Forward secrecy: a delivery past our latest accepted commit means nothing of an earlier
/// epoch can arrive any more (the platform orders everything), so their secrets go.
fn forget_past_epochs(c: &Connection, id: &GroupId, group_seq: u64) -> std::result::Result<(), E2eError> {
    let passed = c
        .execute(
            "UPDATE client_groups SET own_commit_seq = 0 WHERE group_id = ?1 AND own_commit_seq > 0 AND own_commit_seq < ?2",
            params![id.0.to_vec(), group_seq as i64],
        )
        .map_err(E2eError::Db)?;
    if passed > 0 {
        mls_group::delete_past_epochs(c, &id.0)?;
    }
    Ok(())
}

pub(super) fn forget_group(c: &Connection, id: &GroupId) -> Result<()> {
    mls_group::forget(c, &id.0).context(|| format!("forgetting group {}", short(id)))?;
    posters::forget(c, &id.0).context(|| format!("forgetting group {}", short(id)))?;
    c.execute(
        "DELETE FROM client_groups WHERE group_id = ?1",
        [id.0.to_vec()],
    )?;
    Ok(())
}

pub(super) fn known_groups(c: &Connection) -> Result<Vec<KnownGroup>> {
    let mut stmt = c.prepare(
        "SELECT group_id, title, type, last_seq FROM client_groups ORDER BY title, group_id",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, Vec<u8>>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, i32>(2)?,
            r.get::<_, i64>(3)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (id, title, kind, seq) = row?;
        let Some(id) = GroupId::from_slice(&id) else {
            log::warn!("a remembered group has a damaged id; skipped");
            continue;
        };
        let kind = protobuf::Enum::from_i32(kind).unwrap_or_default();
        out.push(KnownGroup {
            id,
            title,
            kind,
            last_seq: seq as u64,
        });
    }
    Ok(out)
}

fn known_title(c: &Connection, id: &GroupId) -> Result<Option<String>> {
    Ok(c.query_row(
        "SELECT title FROM client_groups WHERE group_id = ?1",
        [id.0.to_vec()],
        |r| r.get(0),
    )
    .optional()?)
}

/// What a group delivery is for this device, applied inside the transaction that accepted the
/// envelope: the event to show (if any) and what to do once it has committed. `Err` for a
/// delivery that cannot be processed (logged and acknowledged by the caller, like a private
/// message that does not open), except `E2eError::Db`, which is ours.
pub(super) fn open_delivery(
    c: &Connection,
    me: u64,
    envelope: &InboxEnvelope,
    delivery: &GroupDelivery,
) -> Opened {
    let id = GroupId::from_slice(&delivery.group_id).ok_or_else(|| {
        E2eError::Mls(format!(
            "a group delivery names a group by {} bytes",
            delivery.group_id.len()
        ))
    })?;
    let title = if delivery.title.is_empty() {
        known_title(c, &id)
            .map_err(db)?
            .unwrap_or_else(|| short(&id))
    } else {
        delivery.title.clone()
    };
    let kind = delivery.type_.enum_value_or_default();
    forget_past_epochs(c, &id, delivery.group_seq)?;
    let group = GroupRef {
        id,
        title: title.clone(),
        channel: kind == GroupType::CHANNEL,
    };
    let o = Opening { c, me, envelope, delivery, id, title, kind, group };
    match delivery.kind.enum_value() {
        Ok(group_delivery::Kind::WELCOME) => welcome(o),
        Ok(group_delivery::Kind::MLS_MESSAGE) => mls_message(o),
        Ok(group_delivery::Kind::MEMBERSHIP) => membership(o),
        Ok(group_delivery::Kind::TITLE) => title_change(o),
        Ok(group_delivery::Kind::JOIN_REQUEST) => join_request(o),
        Ok(group_delivery::Kind::DELETED) => deleted(o),
        Err(other) => {
            log::debug!(
                "group {}: a delivery of kind {other} from a newer release; skipped",
                short(&id)
            );
            Ok((None, None))
        }
    }
}

/// What opening a group delivery came to: the event to show, and what to do after the commit.
type Opened = std::result::Result<(Option<Incoming>, Option<FollowUp>), E2eError>;

/// One group delivery being opened, as every case reads it.
struct Opening<'a> {
    c: &'a Connection,
    me: u64,
    envelope: &'a InboxEnvelope,
    delivery: &'a GroupDelivery,
    id: GroupId,
    title: String,
    kind: GroupType,
    group: GroupRef,
}

/// A client error met while opening a delivery, as the e2e error the inbox reports.
fn db(e: ClientError) -> E2eError {
    match e {
        ClientError::Db(e) => E2eError::Db(e),
        other => E2eError::Mls(other.to_string()),
    }
}

/// A Welcome: this device joins by one of its key packages.
fn welcome(o: Opening<'_>) -> Opened {
    let Opening { c, envelope, delivery, id, title, kind, group, .. } = o;
    mls_group::join_welcome_to(c, &id.0, &envelope.ciphertext)?;
    remember_group(c, &id, &title, kind, delivery.group_seq).map_err(db)?;
    // Our leaf came from a key package: replaced right after (`FollowUp::Joined`).
    set_self_updated(c, &id, 0).map_err(db)?;
    Ok((
        Some(Incoming::GroupJoined { group }),
        Some(FollowUp::Joined(FollowGroup { id: id.0.to_vec(), title, kind })),
    ))
}

/// An MLS message of the group: a member's message or a commit.
fn mls_message(o: Opening<'_>) -> Opened {
    let Opening { c, envelope, delivery, id, title, kind, group, .. } = o;
    if mls_group::epoch(c, &id.0)?.is_none() {
        // Left or forgotten: what the platform still sent until our leaf went is unreadable.
        log::debug!(
            "group {}: a message for a group this device is not in; skipped",
            short(&id)
        );
        return Ok((None, None));
    }
    let received = match mls_group::receive(c, &id.0, &envelope.ciphertext) {
        Ok(received) => received,
        // A commit this device cannot process (it missed one, or it does not apply):
        // behind for good unless it rejoins. A leaf nobody vouched for is refused instead.
        Err(e @ E2eError::Mls(_)) if mls_group::is_commit(&envelope.ciphertext) => {
            log::warn!("group {}: a commit this device cannot process ({e}); it rejoins", short(&id));
            return Ok((None, Some(FollowUp::Rejoin(FollowGroup { id: id.0.to_vec(), title, kind }))));
        }
        // An old commit again: the platform replays it. Dropped with a warning, no rejoin.
        Err(e @ E2eError::ReplayedCommit { .. }) => {
            log::warn!("{e}");
            return Ok((None, None));
        }
        Err(e) => return Err(e),
    };
    remember_group(c, &id, &title, kind, delivery.group_seq).map_err(db)?;
    match received {
        Received::Application { sender, plaintext } => application(c, envelope, id, kind, group, sender, &plaintext),
        Received::Commit {
            added,
            removed,
            removed_me,
            epoch,
            ..
        } => {
            if removed_me {
                forget_group(c, &id).map_err(db)?;
            } else if !own_commit_outstanding(c, &id).map_err(db)? {
                // Nothing of the epoch this commit ended can arrive any more, and no
                // commit of ours keeps an earlier one open: its secrets go now.
                mls_group::delete_past_epochs(c, &id.0)?;
            }
            Ok((
                Some(Incoming::GroupCommit {
                    group,
                    added,
                    removed,
                    removed_me,
                    epoch,
                }),
                None,
            ))
        }
        Received::Ignored => Ok((None, None)),
    }
}

/// A member's application message: an event to show, after the channel's posters, the
/// sender, its vouched id and date, and its place in the sender's numbering are checked.
fn application(
    c: &Connection,
    envelope: &InboxEnvelope,
    id: GroupId,
    kind: GroupType,
    group: GroupRef,
    sender: mls_group::Device,
    plaintext: &[u8],
) -> Opened {
    let is_channel = kind == GroupType::CHANNEL;
    let (content, _) = crate::e2e::checked_group_content(c, &id.0, is_channel, envelope, sender, plaintext)?;
    // "… is typing" in the group: shown for a few seconds, no place in its history.
    if let Some(crate::wire::e2e::content::Body::ChatAction(a)) = content.body.as_ref() {
        let event = Incoming::GroupChatAction {
            group,
            from: super::message::sender(envelope),
            action: a.action.clone(),
        };
        return Ok((Some(event), None));
    }
    if let Some(crate::wire::e2e::content::Body::Edit(edit)) = content.body.as_ref() {
        return Ok((group_edit(c, envelope, group, edit)?, None));
    }
    if let Some(crate::wire::e2e::content::Body::Delete(delete)) = content.body.as_ref() {
        return Ok((group_delete(c, envelope, group, delete.message_id)?, None));
    }
    if !content.is_message() {
        log::debug!(
            "group {}: message {} is no text, file, location, venue, contact or dice; skipped",
            short(&id),
            envelope.message_id
        );
        return Ok((None, None));
    }
    // Remembered so that a button of it can be pressed (`group press`).
    let peer = super::history::group_peer(&id.0);
    super::history::remember_group_message(c, peer, envelope.message_id, envelope.date, &content, sender.0)
        .map_err(|e| E2eError::Mls(format!("remembering a group message: {e}")))?;
    // A selective keyboard is shown only to the members it is meant for.
    let ours = super::reply_keyboard::addressed_to_us(c, peer, &content).map_err(db)?;
    if ours {
        super::reply_keyboard::on_message(c, peer, envelope.message_id, &content).map_err(db)?;
    }
    let mut message = received_message(envelope, &content);
    message.chat_id = 0;
    if !ours {
        message.reply_markup = None;
    }
    Ok((Some(Incoming::GroupMessage { group, message }), None))
}

/// A member's role changed (joined, left, banned, invited, promoted).
fn membership(o: Opening<'_>) -> Opened {
    let Opening { c, me, delivery, id, title, kind, group, .. } = o;
    let change = delivery.change.get_or_default();
    let old = change.old.get_or_default();
    let new = change.new.get_or_default();
    let user = sender_of(new.user.get_or_default());
    let new_role = new.role.enum_value_or_default();
    let in_group = mls_group::epoch(c, &id.0)?.is_some();
    if in_group || user.user_id == me {
        remember_group(c, &id, &title, kind, delivery.group_seq).map_err(db)?;
    }
    if kind == GroupType::CHANNEL {
        posters::set_poster(c, &id.0, user.user_id, may_post_in_channel(new))?;
    }
    // Whoever left or was removed must lose their leaves; any member may commit it.
    let follow_up = if in_group && user.user_id != me && matches!(new_role, GroupRole::LEFT | GroupRole::BANNED) {
        Some(FollowUp::RemoveLeaves { group: id.0.to_vec(), users: vec![user.user_id] })
    } else if !in_group && user.user_id == me && new_role == GroupRole::INVITED && change.via_join_request {
        // Approved: this device joins by itself (a plain invitation waits for a Welcome).
        Some(FollowUp::Join(FollowGroup { id: id.0.to_vec(), title: title.clone(), kind }))
    } else {
        None
    };
    let event = Incoming::GroupMembership {
        group,
        user,
        old: old.role.enum_value_or_default(),
        new: new_role,
        actor: sender_of(change.actor.get_or_default()),
        invite_link: change.invite_link.link.clone(),
    };
    Ok((Some(event), follow_up))
}

/// The group got a new title.
fn title_change(o: Opening<'_>) -> Opened {
    let Opening { c, delivery, id, title: _, kind, .. } = o;
    let change = delivery.change.get_or_default();
    let title = change.title.clone();
    remember_group(c, &id, &title, kind, delivery.group_seq).map_err(db)?;
    let event = Incoming::GroupTitle {
        group: GroupRef { id, title, channel: kind == GroupType::CHANNEL },
        actor: sender_of(change.actor.get_or_default()),
    };
    Ok((Some(event), None))
}

/// A join request, or its decline.
fn join_request(o: Opening<'_>) -> Opened {
    let Opening { delivery, group, .. } = o;
    let r = delivery.join_request.get_or_default();
    let event = match r.outcome.enum_value_or_default() {
        crate::wire::platform::join_request::Outcome::DECLINED => {
            Incoming::JoinDeclined { group, by: sender_of(r.decided_by.get_or_default()) }
        }
        _ => Incoming::JoinRequest {
            group,
            user: sender_of(r.user.get_or_default()),
            invite_link: r.invite_link.link.clone(),
        },
    };
    Ok((Some(event), None))
}

/// The platform's notice that a message was deleted.
fn deleted(o: Opening<'_>) -> Opened {
    let Opening { c, delivery, id, .. } = o;
    // The platform checked the deleter's right, but its word alone deletes nothing: the
    // deleter's own MLS `Delete` that follows does (`e2e::deletions`, `group_delete`).
    let actor = delivery.change.actor.user_id;
    crate::e2e::deletions::note_notice(c, &id.0, delivery.deleted_message_id, actor, crate::clock::unix_now())?;
    Ok((None, None))
}


/// A member's edit of a group message: applied to the remembered message and shown only when
/// that member sent it (a bot's edit of its own message included); anything else is ignored
/// with a warning.
fn group_edit(
    c: &Connection,
    envelope: &InboxEnvelope,
    group: GroupRef,
    edit: &crate::wire::e2e::Edit,
) -> std::result::Result<Option<Incoming>, E2eError> {
    let peer = super::history::group_peer(&group.id.0);
    let fail = |e: ClientError| E2eError::Mls(format!("applying a group edit: {e}"));
    let sender = super::history::group_message_sender(c, peer, edit.message_id).map_err(fail)?;
    if sender != Some(envelope.sender_user_id) {
        log::warn!(
            "group {}: user {} sent an edit of message {}, which is not theirs (or not known here); ignored",
            short(&group.id),
            envelope.sender_user_id,
            edit.message_id
        );
        return Ok(None);
    }
    let now = super::history::apply_edit(c, peer, envelope.date, edit).map_err(fail)?;
    let (text, entities) = super::message::text_of(&now);
    Ok(Some(Incoming::GroupEdited {
        group,
        message_id: edit.message_id,
        from: super::message::sender(envelope),
        edit_date: if edit.edit_date != 0 { edit.edit_date } else { envelope.date },
        text,
        entities,
        keyboard: super::message::keyboard_from_wire(now.keyboard.as_ref()),
        shared: super::shared_item::Shared::from_content(&now),
    }))
}

/// A member's MLS `Delete` of a group message: the message is forgotten and shown deleted when
/// that member sent it, or the platform's notice named them its deleter (`e2e::deletions`);
/// any other is ignored with a warning.
fn group_delete(
    c: &Connection,
    envelope: &InboxEnvelope,
    group: GroupRef,
    message_id: u64,
) -> std::result::Result<Option<Incoming>, E2eError> {
    let peer = super::history::group_peer(&group.id.0);
    let fail = |e: ClientError| E2eError::Mls(format!("applying a group deletion: {e}"));
    let sender = super::history::group_message_sender(c, peer, message_id).map_err(fail)?;
    let deleter = envelope.sender_user_id;
    if !crate::e2e::deletions::may_delete(c, &group.id.0, message_id, deleter, sender)? {
        log::warn!(
            "group {}: user {deleter} asked to delete message {message_id}, which they did not send, and the platform did not name them its deleter; kept",
            short(&group.id)
        );
        return Ok(None);
    }
    super::history::forget(c, peer, message_id).map_err(fail)?;
    Ok(Some(Incoming::GroupDeleted { group, message_id, actor: super::message::sender(envelope) }))
}

#[cfg(test)]
mod tests {
    use protobuf::Message as _;

    use super::*;

    fn gid(first: u8) -> GroupId {
        let mut id = [0u8; 32];
        id[0] = first;
        GroupId(id)
    }

    #[test]
    fn remembered_groups_keep_the_newest_title_and_the_highest_seq() {
        let c = Connection::open_in_memory().expect("db");
        c.execute_batch(crate::client::schema::GROUPS_V4).expect("table");
        remember_group(&c, &gid(1), "Old", GroupType::GROUP, 5).expect("remember");
        remember_group(&c, &gid(1), "New", GroupType::GROUP, 3).expect("again");
        remember_group(&c, &gid(2), "Another", GroupType::CHANNEL, 1).expect("remember");
        let known = known_groups(&c).expect("list");
        assert_eq!(known.len(), 2);
        assert_eq!(
            (known[0].title.as_str(), known[0].kind),
            ("Another", GroupType::CHANNEL)
        );
        assert_eq!(
            (known[1].title.as_str(), known[1].last_seq),
            ("New", 5),
            "a redelivered old seq does not go back"
        );
        assert_eq!(
            known_title(&c, &gid(1)).expect("title").as_deref(),
            Some("New")
        );
        c.execute(
            "DELETE FROM client_groups WHERE group_id = ?1",
            [gid(1).0.to_vec()],
        )
        .expect("delete");
        assert_eq!(known_title(&c, &gid(1)).expect("title"), None);
    }

    /// A device of `user_id` with a profile's tables and openmls', registered as device 1.
    fn device(user_id: u64) -> Connection {
        let mut c = Connection::open_in_memory().expect("db");
        crate::migrations::migrate(&c, crate::client::schema::STEPS).expect("profile tables");
        crate::crypto::mls::migrate_storage(&mut c).expect("openmls tables");
        crate::e2e::create_device_keys(&c, &crate::crypto::IdentityKeyPair::generate()).expect("keys");
        crate::e2e::save_registration(&c, crate::e2e::Registration { user_id, device_id: 1 }).expect("registration");
        c.execute(
            "INSERT INTO client_account (id, server_url, identity_seed, user_id, device_id, device_secret, username, display_name)
             VALUES (1, 'http://127.0.0.1:1', x'00', ?1, 1, x'00', 'me', 'Me')",
            [user_id as i64],
        )
        .expect("account");
        c
    }

    fn post(sender: u64, ciphertext: Vec<u8>, group: &GroupId) -> (InboxEnvelope, GroupDelivery) {
        let delivery = GroupDelivery {
            group_id: group.0.to_vec(),
            type_: GroupType::CHANNEL.into(),
            kind: group_delivery::Kind::MLS_MESSAGE.into(),
            title: "News".into(),
            ..Default::default()
        };
        let envelope = InboxEnvelope { sender_user_id: sender, ciphertext, group: Some(delivery.clone()).into(), ..Default::default() };
        (envelope, delivery)
    }

    #[test]
    fn a_channel_post_from_a_subscriber_that_the_platform_let_through_is_dropped() {
        let (owner, subscriber, me) = (device(1), device(2), device(3));
        let id = GroupId(mls_group::new_group_id());
        let info = mls_group::create(&owner, &id.0).expect("create");
        let (_, joined) = mls_group::join_external(&subscriber, &info).expect("subscriber joins");
        mls_group::receive(&owner, &id.0, &joined.message).expect("owner");
        let (_, mine) = mls_group::join_external(&me, &joined.group_info).expect("this device joins");
        for other in [&owner, &subscriber] {
            mls_group::receive(other, &id.0, &mine.message).expect("processes");
        }
        posters::set_posters(&me, &id.0, &[1]).expect("the member list: user 1 owns it");

        let (bytes, _) = mls_group::encrypt(&subscriber, &id.0, b"not a post").expect("encrypt");
        let (envelope, delivery) = post(2, bytes, &id);
        let e = open_delivery(&me, 3, &envelope, &delivery).err().expect("dropped");
        assert!(e.to_string().contains("user 2 is neither its owner nor an administrator"), "{e}");

        let content = crate::e2e::text_content("a post");
        let (bytes, _) = mls_group::encrypt(&owner, &id.0, &content.write_to_bytes().expect("encode")).expect("encrypt");
        let (envelope, delivery) = post(1, bytes, &id);
        let (event, _) = open_delivery(&me, 3, &envelope, &delivery).expect("the owner's post");
        assert!(matches!(event, Some(Incoming::GroupMessage { .. })), "{event:?}");
    }

    /// A group Alice (user 1) made and this device (user 3) joined by external commit.
    fn alice_and_me_in_a_group() -> (Connection, Connection, GroupId) {
        let (alice, me) = (device(1), device(3));
        let id = GroupId(mls_group::new_group_id());
        let info = mls_group::create(&alice, &id.0).expect("create");
        let (_, joined) = mls_group::join_external(&me, &info).expect("this device joins");
        mls_group::receive(&alice, &id.0, &joined.message).expect("alice");
        (alice, me, id)
    }

    /// Alice's commit as the platform delivers it in a group.
    fn group_commit(commit: Vec<u8>, id: &GroupId) -> (InboxEnvelope, GroupDelivery) {
        let (mut envelope, mut delivery) = post(1, commit, id);
        delivery.type_ = GroupType::GROUP.into();
        envelope.group = Some(delivery.clone()).into();
        (envelope, delivery)
    }

    #[test]
    fn a_commit_this_device_cannot_process_makes_it_rejoin() {
        let (alice, me, id) = alice_and_me_in_a_group();
        // Two commits of Alice's; this device never gets the first.
        for _ in 0..2 {
            mls_group::self_update(&alice, &id.0).expect("commit");
            mls_group::commit_accepted(&alice, &id.0).expect("merge");
        }
        let second = mls_group::self_update(&alice, &id.0).expect("a third, not sent");
        let (envelope, delivery) = group_commit(second.message, &id);
        let (event, follow_up) = open_delivery(&me, 3, &envelope, &delivery).expect("kept, not an error");
        assert!(event.is_none());
        assert!(matches!(follow_up, Some(FollowUp::Rejoin(g)) if g.id == id.0.to_vec()), "a rejoin follows");
        // An application message it cannot read is an error as before, not a rejoin.
        let (unreadable, _) = mls_group::encrypt(&alice, &id.0, b"x").expect("encrypt");
        let (envelope, delivery) = post(1, unreadable, &id);
        assert!(open_delivery(&me, 3, &envelope, &delivery).is_err());
    }

    /// An old commit delivered again is a replay: dropped, and no rejoin (issue 45, part 2).
    #[test]
    fn a_replayed_old_commit_is_dropped_without_a_rejoin() {
        let (alice, me, id) = alice_and_me_in_a_group();
        let commit = mls_group::self_update(&alice, &id.0).expect("commit");
        mls_group::commit_accepted(&alice, &id.0).expect("merge");
        let (envelope, delivery) = group_commit(commit.message, &id);
        open_delivery(&me, 3, &envelope, &delivery).expect("the commit");
        let epoch = mls_group::epoch(&me, &id.0).expect("epoch");
        let (event, follow_up) = open_delivery(&me, 3, &envelope, &delivery).expect("dropped, not an error");
        assert!(event.is_none() && follow_up.is_none(), "nothing shown, no rejoin");
        assert_eq!(mls_group::epoch(&me, &id.0).expect("epoch"), epoch, "still at its epoch");
    }
}
