//! The bot's groups over MLS (docs/groups.md): what `in/<n>` does with group deliveries, how
//! the bot joins a group it was added to, and how its own commits reach the platform.
//!
//! - **Import** (`import`, inside the inbox's writer job, like a private envelope): a role
//!   change becomes `my_chat_member` / `chat_member`, a title change a `new_chat_title`
//!   message, a join request `chat_join_request`, a deletion leaves the history; being added
//!   marks the group *invited*; a Welcome joins; an MLS message is processed by
//!   `e2e::group::receive` in the group's order, its text becoming a `message` update of the
//!   group's negative chat id (`channel_post` in a channel). MLS state, update and inbox
//!   cursor commit together.
//! - **Joining** (`join_invited`, on `in/<n>` after each batch and at start): checks the
//!   bot's `groups` capability (a bot without it leaves at once, so the adding user sees a
//!   refusal), fetches the GroupInfo and joins by an external commit.
//! - **Our commits** (`commit`): made and recorded in one writer job with a client message id,
//!   then sent; a retry or a restart resends exactly the recorded commit, so a lost answer
//!   never leaves this device and the platform at different epochs. Accepted → merged;
//!   refused → discarded (an external join: the group is forgotten).
//! - **Sending** (`send`, on `out/<n>`): a group message is encrypted in the current epoch and
//!   committed before its first send; STALE_EPOCH means the inbox has commits to process
//!   first: the ciphertext is dropped (never resent for a stale epoch) and the message is
//!   encrypted again later; REMOVALS_PENDING makes this device commit those removals first.

use protobuf::Message as _;
use rusqlite::Connection;

use super::botapi::types::UserView;
use super::botapi::ApiError;
use super::runtime::{unix_now, BotShared, Sent};
use super::store::groups::{self, GroupChat, Membership, PendingCommit};
use super::store::{chats, files, outbox, Result as StoreResult, StoreError};
use super::{keyboard, updates};
use crate::crypto;
use crate::e2e::group::{self as mls_group, CommitOut, Received};
use crate::wire::e2e::{content::Body, Content};
use crate::wire::platform::{
    group_delivery::Kind as DeliveryKind, send_group_message_response::Status as GroupStatus, GroupRequest, GroupRole,
    GroupType, InboxEnvelope, MessageIdReservation, ReserveMessageIdsRequest, SendGroupMessageRequest, SendGroupMessageResponse, VerifyCredentialRequest,
};

/// How often a join is tried again at once after the group moved on under it (STALE_EPOCH).
const JOIN_TRIES: usize = 5;

fn kind_name(t: GroupType) -> &'static str {
    match t {
        GroupType::CHANNEL => "channel",
        GroupType::GROUP => "group",
    }
}

/// Imports one group delivery (the envelope's `group` is set) inside the inbox's writer job.
pub fn import(c: &Connection, env: &InboxEnvelope, me: &UserView) -> StoreResult<()> {
    let d = env.group.get_or_default();
    let gid = d.group_id.as_slice();
    let kind = kind_name(d.type_.enum_value_or_default());
    let now = unix_now();
    match d.kind.enum_value_or_default() {
        DeliveryKind::MEMBERSHIP => {
            let change = d.change.get_or_default();
            let new = change.new.get_or_default();
            let about_me = new.user.user_id == me.id as u64;
            let known = groups::by_group_id(c, gid)?;
            let status = match (about_me, new.role.enum_value_or_default()) {
                (true, GroupRole::INVITED) => Membership::Invited,
                (true, GroupRole::LEFT | GroupRole::BANNED) => {
                    // Out: nothing more arrives, and the epoch secrets are deleted.
                    mls_group::forget(c, gid)?;
                    groups::clear_commit(c, gid)?;
                    Membership::Gone
                }
                (true, _) => Membership::Member,
                // Someone else's change: our own standing stays as it was.
                (false, _) => match &known {
                    Some(g) => g.status,
                    None => return Ok(()), // a group we are not in (yet)
                },
            };
            let group = groups::upsert(c, gid, &d.title, kind, status, now)?;
            updates::enqueue_member_change(c, me, &group, change, env.date)
        }
        DeliveryKind::TITLE => {
            let change = d.change.get_or_default();
            let Some(known) = groups::by_group_id(c, gid)? else { return Ok(()) };
            let group = groups::upsert(c, gid, &change.title, kind, known.status, now)?;
            updates::enqueue_new_chat_title(c, &group, change.actor.get_or_default(), env.message_id, env.date)
        }
        DeliveryKind::WELCOME => {
            // Invited and added at once: this runtime may have joined by its own external
            // commit already (which replaced the leaf the Welcome is for). Keep that state.
            if mls_group::epoch(c, gid)?.is_some() {
                log::debug!("ignoring a Welcome to group {}: joined already", mls_group::short_id(gid));
                return Ok(());
            }
            let joined = mls_group::join_welcome(c, &env.ciphertext)?;
            if joined != gid {
                return Err(StoreError::Refused(format!(
                    "a Welcome for group {} arrived as group {}",
                    mls_group::short_id(&joined),
                    mls_group::short_id(gid)
                )));
            }
            groups::upsert(c, gid, &d.title, kind, Membership::Member, now)?;
            Ok(())
        }
        DeliveryKind::JOIN_REQUEST => {
            let Some(group) = groups::by_group_id(c, gid)? else { return Ok(()) };
            updates::enqueue_join_request(c, &group, d.join_request.get_or_default())
        }
        DeliveryKind::DELETED => {
            // The platform checked the deleter's right; the message leaves the history (the
            // Bot API has no update for a deletion).
            let Some(group) = groups::by_group_id(c, gid)? else { return Ok(()) };
            chats::forget(c, group.chat_id, d.deleted_message_id as i64)
        }
        DeliveryKind::MLS_MESSAGE => {
            let Some(group) = groups::by_group_id(c, gid)? else {
                return Err(StoreError::Refused(format!("a message of group {} we are not in", mls_group::short_id(gid))));
            };
            match mls_group::receive(c, gid, &env.ciphertext)? {
                Received::Application { sender, plaintext } => import_message(c, env, me, &group, sender.0, &plaintext),
                Received::Commit { removed_me, .. } => {
                    // Another member's commit won this epoch: a commit of ours made in it is
                    // void (openmls discarded it while merging).
                    groups::clear_commit(c, gid)?;
                    if removed_me {
                        groups::set_status(c, gid, Membership::Gone, now)?;
                    }
                    Ok(())
                }
                Received::Ignored => Ok(()),
            }
        }
    }
}

/// A member's application message: its content enters the group's history, and a message (a
/// text, file, location, venue, contact or dice) becomes a `message` update.
fn import_message(
    c: &Connection,
    env: &InboxEnvelope,
    me: &UserView,
    group: &GroupChat,
    sender: u64,
    plaintext: &[u8],
) -> StoreResult<()> {
    if sender != env.sender_user_id {
        return Err(StoreError::Refused(format!(
            "group {}: the platform says user {} sent a message signed by user {sender}",
            mls_group::short_id(&group.group_id),
            env.sender_user_id
        )));
    }
    let content = Content::parse_from_bytes(plaintext).map_err(|_| StoreError::E2e(crate::e2e::E2eError::BadContent))?;
    groups::remember_user(
        c,
        &groups::GroupUser {
            user_id: sender,
            username: env.sender_username.clone(),
            first_name: env.sender_display_name.clone(),
            is_bot: env.sender_is_bot,
        },
    )?;
    // Bots do not see bots' messages, their own (another runtime's) included.
    if env.sender_is_bot || sender == me.id as u64 {
        return Ok(());
    }
    match &content.body {
        _ if content.is_message() => {
            let content = super::history::checked_user_message(content, sender)?;
            if let Some(Body::Media(media)) = &content.body {
                files::issue(c, media, unix_now())?;
            }
            let entry = chats::HistoryEntry {
                chat_id: group.chat_id,
                message_id: env.message_id as i64,
                from_bot: false,
                sender_id: sender as i64,
                date: env.date,
                content,
                edit_date: 0,
            };
            chats::record(c, &entry)?;
            updates::enqueue_group_message(c, me, group, &entry)
        }
        // A member's edit of their own message (a channel's poster's of their post).
        Some(Body::Edit(edit)) => updates::enqueue_user_edit(c, me, updates::ChatRef::Group(group), sender, edit, env.date),
        _ => Ok(()),
    }
}

/// How the platform answered one of our commits.
#[derive(Debug)]
enum CommitAnswer {
    Accepted,
    /// STALE_EPOCH, REJECTED or REMOVALS_PENDING: discarded here.
    Refused(SendGroupMessageResponse),
    /// Nothing to commit.
    Nothing,
}

/// Makes (unless one is recorded already) and sends our commit of a group, and settles it.
fn commit(
    shared: &BotShared,
    gid: &[u8],
    make: impl FnOnce(&Connection) -> StoreResult<Option<(CommitOut, bool)>> + Send + 'static,
) -> Result<CommitAnswer, String> {
    let g = gid.to_vec();
    let pending = shared
        .store
        .write(move |c| {
            if let Some(p) = groups::pending_commit(c, &g)? {
                return Ok(Some(p));
            }
            let Some((out, external)) = make(c)? else { return Ok(None) };
            let req = SendGroupMessageRequest {
                group_id: g.clone(),
                client_message_id: crypto::hex_encode(&crypto::random_bytes::<16>()),
                message: out.message,
                group_info: out.group_info,
                welcome: out.welcome,
                ..Default::default()
            };
            let request = req.write_to_bytes().map_err(|e| StoreError::Corrupt(format!("encode commit: {e}")))?;
            let p = PendingCommit { client_message_id: req.client_message_id, request, external };
            groups::set_pending_commit(c, &g, &p)?;
            Ok(Some(p))
        })
        .map_err(|e| e.to_string())?;
    match pending {
        Some(p) => settle(shared, gid, p),
        None => Ok(CommitAnswer::Nothing),
    }
}

/// Sends a recorded commit (again) and records the answer: merged when accepted, discarded
/// when refused. A failed call leaves it recorded for the next try.
fn settle(shared: &BotShared, gid: &[u8], p: PendingCommit) -> Result<CommitAnswer, String> {
    let req = SendGroupMessageRequest::parse_from_bytes(&p.request).map_err(|e| format!("stored commit: {e}"))?;
    let resp = shared
        .platform
        .client
        .send_group_message(&req, shared.platform.opt())
        .map_err(|e| format!("sending a commit of group {}: {e}", mls_group::short_id(gid)))?;
    let accepted = resp.status.enum_value_or_default() == GroupStatus::OK;
    let (g, cmid, external) = (gid.to_vec(), p.client_message_id, p.external);
    shared
        .store
        .write(move |c| {
            if !groups::clear_pending_commit(c, &g, &cmid)? {
                return Ok(()); // settled meanwhile (a retry's answer, or a commit that lost)
            }
            match (accepted, external) {
                (true, true) => groups::set_status(c, &g, Membership::Member, unix_now()),
                (true, false) => Ok(mls_group::commit_accepted(c, &g)?),
                (false, true) => Ok(mls_group::forget(c, &g)?),
                (false, false) => Ok(mls_group::commit_refused(c, &g)?),
            }
        })
        .map_err(|e| e.to_string())?;
    Ok(if accepted { CommitAnswer::Accepted } else { CommitAnswer::Refused(resp) })
}

/// Before the inbox processes a group's messages: a commit of ours still awaiting its answer
/// (a lost reply, a crash) is settled first, or the messages of the epoch it started would not
/// open. `Err` when one could not be settled (the platform unreachable): the batch must wait.
pub fn settle_pending(shared: &BotShared, envelopes: &[InboxEnvelope]) -> Result<(), String> {
    let mut seen: Vec<&[u8]> = Vec::new();
    for d in envelopes.iter().filter_map(|e| e.group.as_ref()) {
        let gid = d.group_id.as_slice();
        if d.kind.enum_value_or_default() != DeliveryKind::MLS_MESSAGE || seen.contains(&gid) {
            continue;
        }
        seen.push(gid);
        let owned = gid.to_vec();
        let pending = shared.store.read(move |c| groups::pending_commit(c, &owned)).map_err(|e| e.to_string())?;
        if let Some(p) = pending {
            settle(shared, gid, p)?;
        }
    }
    Ok(())
}

/// Joins every group the bot was added to and has not joined yet.
pub fn join_invited(shared: &BotShared) {
    let invited = match shared.store.read(groups::invited) {
        Ok(g) => g,
        Err(e) => {
            log::warn!("bot @{}: reading the groups to join: {e}", shared.username);
            return;
        }
    };
    if invited.is_empty() {
        return;
    }
    // The bot's capabilities as the platform holds them now (@BotManager may change them).
    let p = &shared.platform;
    let capabilities = match p.client.verify_credential(&VerifyCredentialRequest::new(), p.opt()) {
        Ok(r) => r.capabilities,
        Err(e) => {
            log::warn!("bot @{}: reading its capabilities before joining groups failed (tried again later): {e}", shared.username);
            return;
        }
    };
    for group in invited {
        if let Err(e) = join(shared, &group, &capabilities) {
            log::warn!("bot @{}: joining group {:?} failed (tried again later): {e}", shared.username, group.title);
        }
    }
}

fn join(shared: &BotShared, group: &GroupChat, capabilities: &str) -> Result<(), String> {
    let p = &shared.platform;
    let gid = group.group_id.clone();
    let needed = if group.kind == "channel" { "channels" } else { "groups" };
    if !capabilities.split(',').any(|c| c.trim().eq_ignore_ascii_case(needed)) {
        log::warn!(
            "bot @{}: added to {} {:?}, but the bot lacks the `{needed}` capability (set it with @BotManager); leaving it",
            shared.username,
            group.kind,
            group.title
        );
        let req = GroupRequest { group_id: gid.clone(), ..Default::default() };
        p.client.leave_group(&req, p.opt()).map_err(|e| format!("leaving: {e}"))?;
        let g = gid.clone();
        return shared.store.write(move |c| groups::set_status(c, &g, Membership::Gone, unix_now())).map_err(|e| e.to_string());
    }
    for _ in 0..JOIN_TRIES {
        let req = GroupRequest { group_id: gid.clone(), ..Default::default() };
        let info = p.client.get_group_info(&req, p.opt()).map_err(|e| format!("fetching the GroupInfo: {e}"))?.group_info;
        let expected = gid.clone();
        let answer = commit(shared, &gid, move |c| {
            let (joined, out) = mls_group::join_external(c, &info)?;
            if joined != expected {
                return Err(StoreError::Refused("the platform's GroupInfo is of another group".into()));
            }
            Ok(Some((out, true)))
        })?;
        match answer {
            CommitAnswer::Accepted | CommitAnswer::Nothing => {
                log::info!("bot @{}: joined {} {:?}", shared.username, group.kind, group.title);
                return Ok(());
            }
            CommitAnswer::Refused(r) if r.status.enum_value_or_default() == GroupStatus::STALE_EPOCH => continue,
            CommitAnswer::Refused(r) => {
                let g = gid.clone();
                shared.store.write(move |c| groups::set_status(c, &g, Membership::Gone, unix_now())).map_err(|e| e.to_string())?;
                return Err(format!("the platform refused the join: {}", r.error));
            }
        }
    }
    Err(format!("the group kept moving on ({JOIN_TRIES} tries)"))
}

/// The members this bot banned (or removed by `unbanChatMember`) in a batch: (group, user).
/// Their leaves are the bot's to remove, right after the batch (`commit_removals`).
pub fn removals_by(me: u64, envelopes: &[InboxEnvelope]) -> Vec<(Vec<u8>, u64)> {
    let mut due: Vec<(Vec<u8>, u64)> = Vec::new();
    for d in envelopes.iter().filter_map(|e| e.group.as_ref()) {
        let Some(change) = d.change.as_ref().filter(|_| d.kind.enum_value_or_default() == DeliveryKind::MEMBERSHIP) else {
            continue;
        };
        let (user, role) = (change.new.user.user_id, change.new.role.enum_value_or_default());
        let gone = matches!(role, GroupRole::BANNED | GroupRole::LEFT);
        if gone && change.actor.user_id == me && user != me && !due.contains(&(d.group_id.clone(), user)) {
            due.push((d.group_id.clone(), user));
        }
    }
    due
}

/// Commits the removal of the leaves of users this bot removed, so that they read nothing sent
/// after it. A failure is only logged: the platform refuses application messages until the
/// leaves are gone (REMOVALS_PENDING), so the next sender commits them then.
pub fn commit_removals(shared: &BotShared, due: Vec<(Vec<u8>, u64)>) {
    for (gid, user) in due {
        let g = gid.clone();
        let answer = commit(shared, &gid, move |c| {
            if mls_group::epoch(c, &g)?.is_none() {
                return Ok(None); // not in the group (any more)
            }
            Ok(mls_group::remove_users(c, &g, &[user])?.map(|out| (out, false)))
        });
        match answer {
            Ok(a) => log::debug!("bot @{}: removal of user {user} from group {}: {a:?}", shared.username, mls_group::short_id(&gid)),
            Err(e) => log::warn!(
                "bot @{}: committing the removal of user {user} from group {} failed (the next sender commits it): {e}",
                shared.username,
                mls_group::short_id(&gid)
            ),
        }
    }
}

/// What happened to one outbox message of a group.
pub enum GroupSend {
    /// Acknowledged: left the outbox.
    Sent(Sent),
    /// Given up and recorded (`outbox::give_up`): left the outbox unsent; the error is its
    /// caller's answer.
    GaveUp(outbox::GivenUp, ApiError),
    /// Its caller withdrew it before it was handed to the platform: nothing was sent.
    Withdrawn,
    /// Not sent this time (the epoch moved on, removals were due): tried again later.
    Later(String),
}

/// Gives `entry` up in a writer job: recorded, removed; `Withdrawn` when its caller was first.
fn give_up(shared: &BotShared, entry: &outbox::OutboxEntry, error: ApiError) -> Result<GroupSend, String> {
    let (e, reason) = (entry.clone(), error.description.clone());
    let record = shared.store.write(move |c| outbox::give_up(c, &e, &reason, unix_now())).map_err(|e| e.to_string())?;
    Ok(record.map_or(GroupSend::Withdrawn, |r| GroupSend::GaveUp(r, error)))
}

/// Sends one outbox message to a group: signs its keyboard (with a reserved message id) and
/// encrypts it, committed first, unless a ciphertext of the current attempt is recorded; sends;
/// records the answer.
pub fn send(shared: &BotShared, entry: &outbox::OutboxEntry) -> Result<GroupSend, String> {
    let (id, chat_id) = (entry.id, entry.chat_id);
    let group = shared.store.read(move |c| groups::by_chat_id(c, chat_id)).map_err(|e| e.to_string())?;
    let Some(group) = group.filter(|g| g.status == Membership::Member) else {
        return give_up(shared, entry, ApiError::bad_request(format!("chat {chat_id} is a group the bot is not a member of")));
    };
    let mut entry = entry.clone();
    if keyboard::needs_context(&entry.content) {
        match reserve_id(shared, &group.group_id, &entry.client_message_id)? {
            Ok((message_id, date)) => {
                let chat = keyboard::KeyboardChat::Group(&group.group_id);
                keyboard::attach_context(&shared.identity, shared.compat_user_id, chat, message_id, date, &mut entry.content);
                let content = entry.content.clone();
                shared.store.write(move |c| outbox::set_content(c, id, &content)).map_err(|e| e.to_string())?;
            }
            Err(refused) => {
                return give_up(shared, &entry, ApiError::bad_request(format!("the platform refused the message: {refused}")));
            }
        }
    }
    let (gid, content, cmid) = (group.group_id.clone(), entry.content.clone(), entry.client_message_id.clone());
    let req = shared
        .store
        .write(move |c| {
            // Committed with what is sent: from now on its caller can no longer withdraw it.
            if !outbox::mark_handed(c, id, unix_now())? {
                return Ok(None);
            }
            if let Some(req) = outbox::group_sealed(c, id)? {
                return Ok(Some(req));
            }
            let plaintext = content.write_to_bytes().map_err(|e| StoreError::Corrupt(format!("encode content: {e}")))?;
            let (message, _epoch) = mls_group::encrypt(c, &gid, &plaintext)?;
            let req = SendGroupMessageRequest { group_id: gid, client_message_id: cmid, message, ..Default::default() };
            outbox::set_group_sealed(c, id, Some(&req))?;
            Ok(Some(req))
        })
        .map_err(|e| e.to_string())?;
    let Some(req) = req else { return Ok(GroupSend::Withdrawn) };
    let resp = shared
        .platform
        .client
        .send_group_message(&req, shared.platform.opt())
        .map_err(|e| format!("group {}: {e}", mls_group::short_id(&req.group_id)))?;
    let bot_user_id = shared.compat_user_id;
    match resp.status.enum_value_or_default() {
        GroupStatus::OK => {
            let sent = Sent { message_id: resp.message_id as i64, date: resp.date };
            shared
                .store
                .write(move |c| {
                    outbox::remove(c, entry.id)?;
                    super::history::record_in_history(c, bot_user_id, &entry, &sent)
                })
                .map_err(|e| e.to_string())?;
            Ok(GroupSend::Sent(sent))
        }
        GroupStatus::STALE_EPOCH => {
            // Never resent: encrypted again once the inbox has processed the newer epoch.
            encrypt_again_later(shared, id, "the group's epoch moved on")?;
            Ok(GroupSend::Later(format!("group {}: epoch {} is current; catching up", mls_group::short_id(&req.group_id), resp.epoch)))
        }
        GroupStatus::REMOVALS_PENDING => {
            encrypt_again_later(shared, id, "removals were due first")?;
            let (users, gid) = (resp.pending_removals.clone(), req.group_id.clone());
            let g = gid.clone();
            let answer = commit(shared, &gid, move |c| Ok(mls_group::remove_users(c, &g, &users)?.map(|out| (out, false))))?;
            Ok(GroupSend::Later(format!("group {}: committed the removals due first ({answer:?})", mls_group::short_id(&gid))))
        }
        GroupStatus::REJECTED => {
            let mut handed = entry.clone();
            handed.handed = true;
            give_up(shared, &handed, ApiError::bad_request(format!("the platform rejected the message: {}", resp.error)))
        }
    }
}

/// Drops the recorded ciphertext of an outbox message the platform did not take, so that the
/// next try encrypts it anew (in the epoch the inbox has reached by then).
fn encrypt_again_later(shared: &BotShared, id: i64, why: &'static str) -> Result<(), String> {
    shared
        .store
        .write(move |c| {
            outbox::set_group_sealed(c, id, None)?;
            outbox::note_failure(c, id, why)
        })
        .map_err(|e| e.to_string())
}

/// How many unused key packages the platform should hold for this device (members adding the
/// bot by key package — the Welcome path — take one each).
const KEY_PACKAGE_TARGET: u32 = 20;

/// Tops this device's key packages on the platform back up to `KEY_PACKAGE_TARGET`.
pub fn keep_key_packages(shared: &BotShared) {
    let p = &shared.platform;
    let result = (|| -> Result<(), String> {
        let remaining = p
            .client
            .upload_key_packages(&crate::wire::platform::KeyPackagesUpload::new(), p.opt())
            .map_err(|e| e.to_string())?
            .remaining;
        if remaining >= KEY_PACKAGE_TARGET / 2 {
            return Ok(());
        }
        let count = (KEY_PACKAGE_TARGET - remaining) as usize;
        let fresh = shared.store.write(move |c| Ok(mls_group::key_packages(c, count)?)).map_err(|e: StoreError| e.to_string())?;
        let req = crate::wire::platform::KeyPackagesUpload { key_packages: fresh, ..Default::default() };
        p.client.upload_key_packages(&req, p.opt()).map_err(|e| e.to_string())?;
        Ok(())
    })();
    if let Err(e) = result {
        log::warn!("bot @{}: key package top-up failed (tried again later): {e}", shared.username);
    }
}

/// The message id (and date) the platform reserves in a group for one client message id, so
/// that a keyboard's signed context can name it; `Ok(Err(why))` when the platform refuses.
fn reserve_id(shared: &BotShared, group_id: &[u8], cmid: &str) -> Result<Result<(u64, i64), String>, String> {
    let req = ReserveMessageIdsRequest {
        reservations: vec![MessageIdReservation {
            client_message_id: cmid.to_string(),
            group_id: group_id.to_vec(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let resp = shared
        .platform
        .client
        .reserve_message_ids(&req, shared.platform.opt())
        .map_err(|e| format!("reserving a group message id: {e}"))?;
    let r = resp.ids.into_iter().next().ok_or("the platform answered no reservation")?;
    Ok(if r.message_id != 0 { Ok((r.message_id, r.date)) } else { Err(r.error) })
}
