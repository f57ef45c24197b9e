//! Importing one group delivery inside the inbox's writer job: a role change, a title, a
//! Welcome, a join request, a deletion, or an MLS message (a member's message or a commit).
//! MLS state, update and inbox cursor commit together.

use rusqlite::Connection;

use crate::clock::unix_now;
use crate::e2e::follow_up::{FollowUp, GroupRef};
use crate::e2e::group::{self as mls_group, Received};
use crate::e2e::posters;
use crate::e2e::sequence::Arrival;
use crate::gateway::botapi::types::UserView;
use crate::gateway::history::checked_user_message;
use crate::gateway::store::groups::{self, GroupChat, Membership};
use crate::gateway::store::{chats, files, Result as StoreResult, StoreError};
use crate::gateway::updates;
use crate::wire::e2e::content::Body;
use crate::wire::platform::{group_delivery::Kind as DeliveryKind, GroupRole, GroupType, InboxEnvelope};
use crate::wire::roles::may_post_in_channel;

fn kind_name(t: GroupType) -> &'static str {
    match t {
        GroupType::CHANNEL => "channel",
        GroupType::GROUP => "group",
    }
}

/// Imports one group delivery (the envelope's `group` is set) inside the inbox's writer job,
/// adding to `follow` what it leaves to do after the commit (a join, a removal, a check).
pub fn import(c: &Connection, env: &InboxEnvelope, me: &UserView, follow: &mut Vec<FollowUp>) -> StoreResult<()> {
    let d = env.group.get_or_default();
    let gid = d.group_id.as_slice();
    let kind = kind_name(d.type_.enum_value_or_default());
    let group_ref = |title: &str| GroupRef { id: gid.to_vec(), title: title.to_owned(), kind: d.type_.enum_value_or_default() };
    let now = unix_now();
    forget_past_epochs(c, gid, d.group_seq)?;
    match d.kind.enum_value_or_default() {
        DeliveryKind::MEMBERSHIP => {
            let change = d.change.get_or_default();
            let new = change.new.get_or_default();
            let about_me = new.user.user_id == me.id as u64;
            let known = groups::by_group_id(c, gid)?;
            let status = match (about_me, new.role.enum_value_or_default()) {
                // Invited to a group this device is an active member of: the platform's word
                // never makes it drop its state and rejoin from the platform's GroupInfo.
                (true, GroupRole::INVITED) if mls_group::epoch(c, gid)?.is_some() => {
                    log::warn!("ignoring an invitation to group {}: this device is a member of it", mls_group::short_id(gid));
                    Membership::Member
                }
                (true, GroupRole::INVITED) => {
                    follow.push(FollowUp::Join(group_ref(&d.title)));
                    Membership::Invited
                }
                (true, GroupRole::LEFT | GroupRole::BANNED) => {
                    // Out: nothing more arrives, and the epoch secrets are deleted.
                    mls_group::forget(c, gid)?;
                    posters::forget(c, gid)?;
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
            // The platform seated this user: a join noted from a commit is announced. A notice
            // that does not seat them ("left", "invited") announces nothing: a reader with a
            // leaf stays unannounced until the platform says they are in.
            if crate::wire::roles::is_seated(new.role.enum_value_or_default()) {
                groups::joiner_announced(c, gid, new.user.user_id)?;
                groups::clear_departed(c, gid, new.user.user_id)?;
            } else if !about_me && matches!(new.role.enum_value_or_default(), GroupRole::LEFT | GroupRole::BANNED) {
                // Their leaves must go before the bot posts again (`departed`): at once when
                // this bot removed them, else by whoever the platform asks, or by this bot
                // after a grace.
                groups::note_departed(c, gid, new.user.user_id, now)?;
                follow.push(match change.actor.user_id == me.id as u64 {
                    true => FollowUp::RemoveLeaves { group: gid.to_vec(), users: vec![new.user.user_id] },
                    false => FollowUp::DepartedNoted { group: gid.to_vec(), user: new.user.user_id, due: now + super::departed::GRACE_SECS },
                });
            }
            let group = groups::upsert(c, gid, &d.title, kind, status, now)?;
            if group.is_channel() {
                posters::set_poster(c, gid, new.user.user_id, may_post_in_channel(new))?;
            }
            let made = updates::member_change_updates(me, &group, change, env.date);
            updates::store(c, made.and(updates::member_service_message_updates(me, &group, change, env.message_id, env.date)))
        }
        DeliveryKind::TITLE => {
            let change = d.change.get_or_default();
            let Some(known) = groups::by_group_id(c, gid)? else { return Ok(()) };
            let group = groups::upsert(c, gid, &change.title, kind, known.status, now)?;
            updates::store(c, updates::new_chat_title_updates(&group, change.actor.get_or_default(), env.message_id, env.date))
        }
        DeliveryKind::WELCOME => {
            // Invited and added at once: this runtime may have joined by its own external
            // commit already (which replaced the leaf the Welcome is for). Keep that state.
            if mls_group::epoch(c, gid)?.is_some() {
                log::debug!("ignoring a Welcome to group {}: joined already", mls_group::short_id(gid));
                return Ok(());
            }
            mls_group::join_welcome_to(c, gid, &env.ciphertext)?;
            groups::upsert(c, gid, &d.title, kind, Membership::Member, now)?;
            // Our leaf came from a key package: replace it right away (`FollowUp::Joined`).
            groups::set_self_updated(c, gid, 0)?;
            follow.push(FollowUp::Joined(group_ref(&d.title)));
            Ok(())
        }
        DeliveryKind::JOIN_REQUEST => {
            let Some(group) = groups::by_group_id(c, gid)? else { return Ok(()) };
            updates::store(c, updates::join_request_updates(&group, d.join_request.get_or_default()))
        }
        DeliveryKind::DELETED => {
            // The platform checked the deleter's right, but its word alone deletes nothing: the
            // deleter's own MLS `Delete` that follows does (`e2e::deletions`).
            let actor = d.change.actor.user_id;
            Ok(crate::e2e::deletions::note_notice(c, gid, d.deleted_message_id, actor, now)?)
        }
        DeliveryKind::MLS_MESSAGE => {
            let Some(group) = groups::by_group_id(c, gid)? else {
                return Err(StoreError::Refused(format!("a message of group {} we are not in", mls_group::short_id(gid))));
            };
            if group.status == Membership::Invited {
                // Not (back) in the group yet: nothing of it can be read here. The group moved
                // on, so the join is tried again: a rejoin refused for its GroupInfo may find
                // one the verified tree vouches for now.
                log::warn!(
                    "group {}: message {} arrived while this device is not in the group; dropped, and the join is tried again",
                    mls_group::short_id(gid),
                    env.message_id
                );
                follow.push(FollowUp::Join(group_ref(&group.title)));
                return Ok(());
            }
            let received = match mls_group::receive(c, gid, &env.ciphertext) {
                Ok(received) => received,
                // A commit this device cannot process (it missed one, or a member sent one that
                // does not apply) would leave it behind for good: it rejoins by external commit
                // from the newest GroupInfo, which replaces its old leaf (`join_invited`, after
                // this batch). A leaf nobody vouched for is not that: it is refused and alerted.
                Err(e @ crate::e2e::E2eError::Mls(_)) if group.status == Membership::Member && mls_group::is_commit(&env.ciphertext) => {
                    log::warn!(
                        "group {}: a commit this device cannot process ({e}); rejoining by external commit from the newest GroupInfo",
                        mls_group::short_id(gid)
                    );
                    groups::set_status(c, gid, Membership::Invited, now)?;
                    follow.push(FollowUp::Rejoin(group_ref(&group.title)));
                    return Ok(());
                }
                Err(e) => return Err(e.into()),
            };
            match received {
                Received::Application { sender, plaintext } => import_message(c, env, me, &group, sender, &plaintext, follow),
                Received::Commit { new_users, removed_me, .. } => {
                    // Reported if the platform leaves out its notice (`joiners`).
                    if super::joiners::note_new_members(c, gid, &new_users, env.sender_user_id, me.id as u64, env.date)? {
                        follow.push(FollowUp::JoinersNoted { group: gid.to_vec(), due: now + super::joiners::GRACE_SECS });
                    }
                    // Another member's commit won this epoch: a commit of ours made in it is
                    // void (openmls discarded it while merging).
                    groups::clear_commit(c, gid)?;
                    if removed_me {
                        return groups::set_status(c, gid, Membership::Gone, now);
                    }
                    // Nothing of the epoch this commit ended can arrive any more (the platform
                    // orders everything), and no commit of ours keeps an earlier one open: its
                    // secrets go now, not after our next commit (forward secrecy; and every
                    // message would rewrite them with the current epoch's).
                    if !groups::own_commit_outstanding(c, gid)? {
                        mls_group::delete_past_epochs(c, gid)?;
                    }
                    Ok(())
                }
                Received::Ignored => Ok(()),
            }
        }
    }
}

/// Forward secrecy: a delivery past our latest accepted commit means nothing of the epochs
/// before it can arrive any more (the platform orders everything), so their secrets go (and
/// the writer checkpoints after the batch, `e2e::wal`).
fn forget_past_epochs(c: &Connection, gid: &[u8], group_seq: u64) -> StoreResult<()> {
    if groups::passed_own_commit(c, gid, group_seq)? {
        mls_group::delete_past_epochs(c, gid)?;
    }
    Ok(())
}

/// A member's application message: its content enters the group's history, and a message (a
/// text, file, location, venue, contact or dice) becomes a `message` update.
fn import_message(
    c: &Connection,
    env: &InboxEnvelope,
    me: &UserView,
    group: &GroupChat,
    device: mls_group::Device,
    plaintext: &[u8],
    follow: &mut Vec<FollowUp>,
) -> StoreResult<()> {
    let sender = device.0;
    let (content, arrival) = crate::e2e::checked_group_content(c, &group.group_id, group.is_channel(), env, device, plaintext)?;
    if let Arrival::Gap(_) = arrival {
        follow.push(FollowUp::GapNoted { due: unix_now() + crate::e2e::sequence::GRACE_SECS });
    }
    groups::remember_user(
        c,
        &groups::GroupUser {
            user_id: sender,
            username: env.sender_username.clone(),
            first_name: env.sender_display_name.clone(),
            is_bot: env.sender_is_bot,
        },
    )?;
    // A deletion counts whoever sent it, an administrator bot included.
    if let Some(Body::Delete(delete)) = &content.body {
        return delete_message(c, group, sender, delete.message_id);
    }
    // Bots do not see bots' messages, their own (another runtime's) included.
    if env.sender_is_bot || sender == me.id as u64 {
        return Ok(());
    }
    match &content.body {
        _ if content.is_message() => {
            let content = checked_user_message(content, sender)?;
            files::issue_carried(c, &content, unix_now())?;
            let entry = chats::HistoryEntry {
                chat_id: group.chat_id,
                message_id: env.message_id as i64,
                from_bot: false,
                sender_id: sender as i64,
                date: env.date,
                content,
                edit_date: 0,
            };
            updates::store(c, updates::group_message_updates(c, me, group, entry)?)
        }
        // A member's edit of their own message (a channel's poster's of their post).
        Some(Body::Edit(edit)) => updates::store(c, updates::user_edit_updates(c, me, updates::ChatRef::Group(group), sender, edit, env.date)?),
        _ => Ok(()),
    }
}

/// A member's MLS `Delete`: the message leaves the history (the Bot API has no update for a
/// deletion) when that member sent it, or the platform's notice named them its deleter
/// (`e2e::deletions`). Any other is logged and kept.
fn delete_message(c: &Connection, group: &GroupChat, deleter: u64, message_id: u64) -> StoreResult<()> {
    let sender = chats::lookup(c, group.chat_id, message_id as i64)?.map(|e| e.sender_id as u64);
    if crate::e2e::deletions::may_delete(c, &group.group_id, message_id, deleter, sender)? {
        return chats::forget(c, group.chat_id, message_id as i64);
    }
    log::warn!(
        "group {}: user {deleter} asked to delete message {message_id}, which they did not send, and the platform did not name them its deleter; kept",
        mls_group::short_id(&group.group_id)
    );
    Ok(())
}
