//! Commits: a staged commit is checked against the platform's membership (who may add or
//! remove which leaves, an external join's rights), and accepted commits advance the epoch,
//! the GroupInfo and the joined devices.

use super::*;
use openmls::prelude::tls_codec::Serialize as _;

use crate::wire::Invalid;

impl GroupMessage {
    /// The parts a commit consumes, leaving `self` usable for the idempotency record.
    pub(super) fn clone_parts(&self) -> CommitParts<'_> {
        CommitParts {
            message: self.message.clone(),
            bytes: &self.bytes,
            group_info: self.group_info.as_ref(),
            welcome: &self.welcome,
            group_id: &self.group_id,
            client_message_id: &self.client_message_id,
        }
    }
}

pub(super) struct CommitParts<'a> {
    group_id: &'a [u8],
    client_message_id: &'a str,
    message: ProtocolMessage,
    bytes: &'a [u8],
    group_info: Option<&'a (Vec<u8>, VerifiableGroupInfo)>,
    welcome: &'a [u8],
}

pub(super) fn join_device(tx: &Connection, group_id: &[u8], addr: DeviceAddr, now: i64) -> Result<()> {
    tx.prepare_cached(
        "INSERT OR REPLACE INTO group_devices (group_id, user_id, device_id, since) VALUES (?1, ?2, ?3, ?4)",
    )
    .and_then(|mut s| s.execute(params![group_id, addr.user_id, addr.device_id, now]))
    .map_err(db_error("recording a group device"))?;
    group_log::open(tx, group_id, addr)
}

fn drop_device(tx: &Connection, group_id: &[u8], addr: DeviceAddr) -> Result<()> {
    tx.prepare_cached("DELETE FROM group_devices WHERE group_id = ?1 AND user_id = ?2 AND device_id = ?3")
        .and_then(|mut s| s.execute(params![group_id, addr.user_id, addr.device_id]))
        .map_err(db_error("removing a group device"))?;
    group_log::close(tx, group_id, addr)
}

/// Checks a new leaf: its credential names a device whose registered, active key is the leaf's
/// signature key, and carries the proof (`crypto::mls::LeafIdentity`) by which the account's
/// registered identity key vouches for it. `Ok(Err(why))` for a leaf the platform refuses.
pub(super) fn check_leaf(
    tx: &Connection,
    credential: &Credential,
    signature_key: &[u8],
) -> Result<std::result::Result<DeviceAddr, Invalid>> {
    let Some(leaf) = mls::leaf_identity(credential) else {
        return Ok(Err(Invalid::new("a leaf's credential is not a basic credential naming a device (user id, device id)")));
    };
    let (user_id, device_id) = (leaf.user_id, leaf.device_id);
    let addr = DeviceAddr { user_id, device_id };
    Ok(match device_key(tx, addr)? {
        None => Err(Invalid(format!("a leaf names device {device_id} of user {user_id}, which is not an active device"))),
        Some(key) if key != signature_key => {
            Err(Invalid(format!("the leaf of device {device_id} of user {user_id} does not carry that device's registered key")))
        }
        Some(_) if leaf.vouching_key(signature_key).map(|k| k.to_vec()) != Some(profile(tx, user_id)?.identity_key) => {
            Err(Invalid(format!("the leaf of device {device_id} of user {user_id} carries no proof by that user's identity key")))
        }
        Some(_) => Ok(addr),
    })
}

/// What a checked commit does to the platform's membership.
#[derive(Default)]
struct CommitEffect {
    added: BTreeSet<DeviceAddr>,
    removed: BTreeSet<DeviceAddr>,
    /// The device that joined by this external commit.
    joiner: Option<DeviceAddr>,
}

pub(super) fn accept_commit(
    tx: &Connection,
    caller: DeviceAddr,
    me: &MemberRow,
    group: &GroupRow,
    m: CommitParts<'_>,
    now: i64,
    delivered: &mut BTreeSet<DeviceAddr>,
) -> Result<GroupSendOutcome> {
    let reject = |why: String| Ok(GroupSendOutcome::Rejected(why));
    if !matches!(m.message, ProtocolMessage::PublicMessage(_)) {
        return reject("commits must be sent as PublicMessage, so that the platform can check them".into());
    }
    let Some((info_bytes, info)) = m.group_info else {
        return reject("a commit needs the group_info of the epoch it starts".into());
    };
    let provider = MlsProvider::new(tx);
    let gid = GroupId::from_slice(m.group_id);
    let mut public = PublicGroup::load(provider.storage(), &gid)
        .map_err(mls_storage_error("loading a group's public state"))?
        .ok_or_else(|| PlatformError::Internal(format!("group {} has no public MLS state", short_id(m.group_id))))?;
    let processed = match public.process_message(provider.crypto(), m.message) {
        Ok(p) => p,
        Err(e) => return reject(format!("the commit does not verify: {e}")),
    };
    let sender = processed.sender().clone();
    let ProcessedMessageContent::StagedCommitMessage(staged) = processed.into_content() else {
        return reject("a PublicMessage must be a commit".into());
    };
    let before: BTreeMap<LeafNodeIndex, Member> = public.members().map(|l| (l.index, l)).collect();
    let joined = joined_devices(tx, m.group_id)?;
    let effect = match check_commit(tx, caller, me, m.group_id, &sender, &staged, &before, &joined)? {
        Ok(effect) => effect,
        Err(why) => return reject(why.0),
    };
    if !effect.added.is_empty() && m.welcome.is_empty() {
        return reject("a commit that adds devices needs their welcome".into());
    }
    if info.group_context() != staged.group_context() {
        return reject("group_info is not the GroupInfo of the epoch this commit starts".into());
    }
    let Some(info_tree) = info.extensions().ratchet_tree() else {
        return reject("group_info carries no ratchet tree".into());
    };
    // What joiners will trust: signed by the committer, and the tree the commit makes.
    if !signed_by_committer(&provider, info, &sender, &staged, &before) {
        return reject("group_info is not signed by the commit's sender".into());
    }
    let info_tree = info_tree.ratchet_tree().tls_serialize_detached();
    // The tree the commit makes is known once merged: merged in a savepoint, undone if it differs.
    tx.execute_batch("SAVEPOINT merge").map_err(db_error("merging a commit"))?;
    public.merge_commit(provider.storage(), *staged).map_err(mls_storage_error("merging a commit"))?;
    let commit_tree = public.export_ratchet_tree().tls_serialize_detached();
    if info_tree.is_err() || info_tree.ok() != commit_tree.ok() {
        tx.execute_batch("ROLLBACK TO merge; RELEASE merge").map_err(db_error("undoing a merge"))?;
        return reject("group_info carries another ratchet tree than the one this commit makes".into());
    }
    tx.execute_batch("RELEASE merge").map_err(db_error("merging a commit"))?;
    let epoch = public.group_context().epoch().as_u64();
    tx.prepare_cached("UPDATE groups SET epoch = ?2 WHERE group_id = ?1")
        .and_then(|mut s| s.execute(params![m.group_id, epoch]))
        .and_then(|_| tx.prepare_cached("UPDATE group_infos SET group_info = ?2 WHERE group_id = ?1"))
        .and_then(|mut s| s.execute(params![m.group_id, info_bytes]))
        .map_err(db_error("advancing a group's epoch"))?;

    // The commit, to every device that had a leaf (removed ones included) but the sender.
    let d = Delivery {
        group_id: m.group_id,
        kind: DeliveryKind::MLS_MESSAGE,
        epoch: group.epoch,
        sender: caller,
        message_id: 0,
        date: now,
        client_message_id: m.client_message_id,
        ciphertext: m.bytes,
        change: None,
    };
    let group_seq = deliver_to_group(tx, &d, &joined, delivered)?;
    for addr in &effect.removed {
        drop_device(tx, m.group_id, *addr)?;
    }
    for addr in effect.added.iter().chain(&effect.joiner) {
        join_device(tx, m.group_id, *addr, now)?;
    }
    if !effect.added.is_empty() {
        let d = Delivery { kind: DeliveryKind::WELCOME, epoch, ciphertext: m.welcome, client_message_id: "", ..d };
        deliver(tx, &d, effect.added.iter().copied(), delivered)?;
    }
    // An invited user whose device joined is a member now.
    let users: BTreeSet<u64> = effect.added.iter().chain(&effect.joiner).map(|a| a.user_id).collect();
    for user in users {
        if member(tx, m.group_id, user)?.is_some_and(|r| r.role == Role::INVITED) {
            // The user's (first) device that joined sends the change; it names who let the
            // user in (the adder, the approving administrator; the user themself by link).
            let actor =
                effect.joiner.iter().chain(&effect.added).copied().find(|a| a.user_id == user).unwrap_or(caller);
            let joined_by = admin::joined_by(tx, m.group_id, user)?;
            let cause = admin::invited_by(tx, m.group_id, user)?;
            let joined = MemberRow::new(Role::MEMBER, now);
            change_role_by_link(tx, m.group_id, epoch, actor, user, joined, now, joined_by, cause, delivered)?;
        }
    }
    Ok(GroupSendOutcome::Ok { epoch, group_seq, message_id: 0, date: now })
}

/// Whether `info` is signed by the commit's sender: its new leaf's key (its path), else the
/// key of its leaf before the commit. A joiner checks this signature against the tree's leaf
/// of the signer; checking it here keeps a committer from storing a GroupInfo no one can join
/// by.
fn signed_by_committer(
    provider: &MlsProvider<&Connection>,
    info: &VerifiableGroupInfo,
    sender: &Sender,
    staged: &StagedCommit,
    before: &BTreeMap<LeafNodeIndex, Member>,
) -> bool {
    let key = match (staged.update_path_leaf_node(), sender) {
        (Some(leaf), _) => leaf.signature_key().clone(),
        (None, Sender::Member(index)) => match before.get(index) {
            Some(m) => m.signature_key.clone().into(),
            None => return false,
        },
        _ => return false,
    };
    let key = OpenMlsSignaturePublicKey::from_signature_key(key, SignatureScheme::ED25519);
    info.verify_no_out(provider.crypto(), &key).is_ok()
}

/// Checks a staged commit against the platform's membership; `Ok(Err(why))` refuses it.
#[allow(clippy::too_many_arguments)]
fn check_commit(
    tx: &Connection,
    caller: DeviceAddr,
    me: &MemberRow,
    group_id: &[u8],
    sender: &Sender,
    staged: &StagedCommit,
    before: &BTreeMap<LeafNodeIndex, Member>,
    joined: &BTreeSet<DeviceAddr>,
) -> Result<std::result::Result<CommitEffect, Invalid>> {
    let mut effect = CommitEffect::default();
    for p in staged.queued_proposals() {
        if !matches!(
            p.proposal(),
            Proposal::Add(_) | Proposal::Remove(_) | Proposal::Update(_) | Proposal::ExternalInit(_)
        ) {
            return Ok(Err(Invalid::new(format!("a commit with a {:?} proposal is not accepted", p.proposal().proposal_type()))));
        }
    }
    // Who commits: a joined device of a seated member, or an external joiner.
    let path_leaf = staged.update_path_leaf_node();
    match sender {
        Sender::Member(index) => {
            let leaf = before.get(index);
            if leaf.and_then(|l| mls::device_of(&l.credential)) != Some((caller.user_id, caller.device_id)) {
                return Ok(Err(Invalid::new("the commit's sender leaf is not the calling device")));
            }
            if !seated(me.role) || !joined.contains(&caller) {
                return Ok(Err(Invalid::new("only a member's device with a leaf may commit")));
            }
        }
        Sender::NewMemberCommit => {
            if !(seated(me.role) || me.role == Role::INVITED) {
                return Ok(Err(Invalid::new("only a member or an invited user may join by external commit")));
            }
            effect.joiner = Some(caller);
        }
        _ => return Ok(Err(Invalid::new("a commit must come from a member or an external joiner"))),
    }
    if let Some(leaf) = path_leaf {
        match check_leaf(tx, leaf.credential(), leaf.signature_key().as_slice())? {
            Ok(addr) if addr == caller => {}
            Ok(_) => return Ok(Err(Invalid::new("the commit's own leaf must name the calling device"))),
            Err(why) => return Ok(Err(why)),
        }
    } else if effect.joiner.is_some() {
        return Ok(Err(Invalid::new("an external commit needs an update path")));
    }
    for add in staged.add_proposals() {
        let leaf = add.add_proposal().key_package().leaf_node();
        let addr = match check_leaf(tx, leaf.credential(), leaf.signature_key().as_slice())? {
            Ok(addr) => addr,
            Err(why) => return Ok(Err(why)),
        };
        let role = member(tx, group_id, addr.user_id)?.map(|m| m.role);
        if !role.is_some_and(|r| seated(r) || r == Role::INVITED) {
            return Ok(Err(Invalid::new(format!(
                "user {} is not invited to this group: AddGroupMember comes before the commit that adds their devices",
                addr.user_id
            ))));
        }
        if joined.contains(&addr) || !effect.added.insert(addr) {
            return Ok(Err(Invalid::new(format!("device {} of user {} has a leaf already", addr.device_id, addr.user_id))));
        }
    }
    for remove in staged.remove_proposals() {
        let index = remove.remove_proposal().removed();
        let Some(leaf) = before.get(&index) else {
            return Ok(Err(Invalid::new(format!("the commit removes leaf {index:?}, which is empty"))));
        };
        let Some((user_id, device_id)) = mls::device_of(&leaf.credential) else {
            return Ok(Err(Invalid::new("the commit removes a leaf that names no device")));
        };
        let addr = DeviceAddr { user_id, device_id };
        let gone = member(tx, group_id, user_id)?.is_none_or(|m| matches!(m.role, Role::LEFT | Role::BANNED));
        let own_old_leaf = effect.joiner == Some(addr);
        let device_removed = device_key(tx, addr)?.is_none();
        if !(gone || own_old_leaf || device_removed) {
            return Ok(Err(Invalid::new(format!(
                "user {user_id} is a member: RemoveGroupMember comes before the commit that removes their leaves"
            ))));
        }
        effect.removed.insert(addr);
    }
    if let Some(joiner) = effect.joiner {
        // A rejoin replaces the device's old leaf: it stays joined.
        effect.removed.remove(&joiner);
    }
    Ok(Ok(effect))
}
