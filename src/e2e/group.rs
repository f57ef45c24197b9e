//! MLS group membership of this device, shared by the gateway and the user client: key
//! packages, creating a group, joining (external commit or Welcome), commits that add or remove
//! members, and encrypting and processing group messages.
//!
//! Like the rest of `e2e`, every function works on the caller's connection and opens no
//! transaction: openmls writes its state through `crypto::mls::MlsProvider` on that
//! connection, so a processed message, the advanced epoch and what the caller derives from it
//! (an update, a cursor) commit together, and a failed job rolls all of it back. The stored
//! state is the truth: a call works on the copy of the group kept from an earlier call only
//! when nothing wrote the group since, else loads it (`kept`: every call on a group goes
//! through `with_group`; a creation or a join keeps the group it makes).
//!
//! Commits are two-step. `add`, `remove_users`, `self_update` leave a *pending* commit; the caller sends it to
//! the platform and then calls `commit_accepted` (merge) or `commit_refused` (discard; after a
//! STALE_EPOCH answer the caller processes what it missed and derives the commit again). An
//! external join is already merged when `join_external` returns (openmls 0.9): if the platform
//! refuses it, `forget` the group and join again from a fresh GroupInfo.
//!
//! Groups live for years (docs/groups.md, "Lifetimes"): joins skip the lifetime check of leaves
//! that were never updated (RFC 9420 §7.3 allows it; otherwise a group would become unjoinable
//! once its oldest such leaf expires), each member replaces its own leaf with `self_update`, and
//! `delete_past_epochs` drops the secrets of earlier epochs once nothing of them can still
//! arrive.

use openmls::messages::group_info::GroupInfo;
use openmls::prelude::*;
use rusqlite::Connection;

use super::leaf::{self, LeafRefusal, Untrusted};
use super::{kept, rejoin};
use super::{device_key, registration, E2eError, Result};
use crate::crypto::mls::{self, DeviceSigner, MlsProvider};

/// What a commit sends to the platform (SendGroupMessageRequest).
#[derive(Debug, Clone, Default)]
pub struct CommitOut {
    /// The commit (PublicMessage).
    pub message: Vec<u8>,
    /// The GroupInfo of the epoch the commit starts, ratchet tree included.
    pub group_info: Vec<u8>,
    /// The Welcome for the devices the commit adds; empty when it adds none.
    pub welcome: Vec<u8>,
    /// The epoch the commit was made in (the platform's current one if it is accepted).
    pub epoch: u64,
    /// An external join only: the devices of users new to this device. On a rejoin, those of
    /// users the last verified tree did not hold (`rejoin`); on a first join, every other
    /// member. Empty for other commits.
    pub newcomers: Vec<Device>,
    /// An external join only: checked against a verified tree of this device (a rejoin).
    pub rejoined: bool,
}

/// A device named by a leaf: (user id, device id).
pub type Device = (u64, u32);

/// What one processed group message was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// An application message and its plaintext, from a member's device.
    Application { sender: Device, plaintext: Vec<u8> },
    /// A commit, merged: the devices it added and removed, and the epoch it started. When it
    /// removed this device, the group is inactive now and `removed_me` is set. `new_users`:
    /// the users of `added` who had no other leaf in the tree (a member's further device is
    /// no new member), found from the group in hand rather than from a second load.
    Commit { added: Vec<Device>, removed: Vec<Device>, removed_me: bool, epoch: u64, new_users: Vec<u64> },
    /// Anything else (a standalone proposal, an echo of our own message): nothing to do.
    Ignored,
}

fn mls_err(what: &str) -> impl FnOnce(mls::MlsError) -> E2eError + '_ {
    move |e| E2eError::Mls(format!("{what}: {e}"))
}

fn fail<E: std::fmt::Debug>(what: &'static str) -> impl Fn(E) -> E2eError {
    move |e| E2eError::Mls(format!("{what}: {e:?}"))
}

/// This device: its key as MLS signer, and its leaf credential (with its proof).
fn me(conn: &Connection) -> Result<(CredentialWithKey, DeviceSigner)> {
    let reg = registration(conn)?.ok_or(E2eError::NotInitialized)?;
    let signer = signer(conn)?;
    let credential = mls::credential_with_key(reg.user_id, reg.device_id, &leaf::own_proof(conn)?, &signer);
    Ok((credential, signer))
}

/// This device's key as MLS signer: all that a message, an add or a removal signs with (the
/// credential is read only where a leaf is made).
fn signer(conn: &Connection) -> Result<DeviceSigner> {
    Ok(DeviceSigner(device_key(conn)?))
}

/// A leaf a member does not trust, as the error of the step that met it.
fn untrusted(group_id: &[u8], refusal: LeafRefusal) -> E2eError {
    E2eError::UntrustedLeaf { group: short_id(group_id), refusal }
}

/// Checks every leaf of a group being joined but this device's own (`leaf::LeafCheck`).
fn check_members(conn: &Connection, group_id: &[u8], members: impl Iterator<Item = Member>, own: &[u8]) -> Result<()> {
    let check = leaf::LeafCheck::new(conn)?;
    for m in members.filter(|m| m.signature_key != own) {
        check.check(&m.credential, &m.signature_key)?.map_err(|r| untrusted(group_id, r))?;
    }
    Ok(())
}

/// Runs `f` on this device's state of a group; `None` when none is stored. The state is the
/// copy kept from an earlier call when nothing wrote the group since, else loaded (`kept`). It
/// is kept again when `f` succeeds and the group is still active; after an error (which the
/// caller rolls back) it is dropped. `f` must not call this module on the same group: that
/// call would load and write a second copy, which the first would then be kept over.
fn with_group<T>(
    conn: &Connection,
    group_id: &[u8],
    f: impl FnOnce(&MlsProvider<&Connection>, &mut MlsGroup) -> Result<T>,
) -> Result<Option<T>> {
    let provider = MlsProvider::new(conn);
    let (group, held) = kept::take(conn, &provider, group_id)?;
    let Some(mut group) = group else { return Ok(None) };
    let out = f(&provider, &mut group)?;
    kept::put(conn, group_id, held, group)?;
    Ok(Some(out))
}

/// [`with_group`] on a group this device must hold.
fn with_member<T>(
    conn: &Connection,
    group_id: &[u8],
    f: impl FnOnce(&MlsProvider<&Connection>, &mut MlsGroup) -> Result<T>,
) -> Result<T> {
    with_group(conn, group_id, f)?.ok_or_else(|| E2eError::Mls(format!("not a member of group {}", short_id(group_id))))
}

/// The first 8 bytes of a group id in hex: enough to name it in logs and errors.
pub fn short_id(group_id: &[u8]) -> String {
    rejoin::hex_start(group_id)
}

/// A fresh random 32-byte group id.
pub fn new_group_id() -> [u8; 32] {
    crate::crypto::random_bytes::<32>()
}

/// `count` new key packages of this device, for the platform to hand out (each used once);
/// their private keys are stored here until a Welcome uses them. They are valid for
/// `mls::KEY_PACKAGE_LIFETIME_SECS`.
pub fn key_packages(conn: &Connection, count: usize) -> Result<Vec<Vec<u8>>> {
    key_packages_lasting(conn, count, mls::KEY_PACKAGE_LIFETIME_SECS)
}

/// `key_packages` valid for `lifetime_secs` from now (tests use a few seconds).
pub fn key_packages_lasting(conn: &Connection, count: usize, lifetime_secs: u64) -> Result<Vec<Vec<u8>>> {
    let (credential, signer) = me(conn)?;
    let provider = MlsProvider::new(conn);
    (0..count)
        .map(|_| {
            let bundle = KeyPackage::builder()
                .key_package_lifetime(Lifetime::new(lifetime_secs))
                .build(mls::CIPHERSUITE, &provider, &signer, credential.clone())
                .map_err(fail("making a key package"))?;
            mls::to_bytes(&MlsMessageOut::from(bundle.key_package().clone())).map_err(mls_err("key package"))
        })
        .collect()
}

/// How many key packages a device should make and upload now, given how many valid ones the
/// platform holds and when it made the batch it relies on (`None`: unknown, a state of an
/// earlier release). A batch older than half its lifetime is replaced whole (`renew`: record
/// the new time once uploaded), so a claimed key package has most of its lifetime left;
/// otherwise the stock is topped up to `target` once it falls below `low`.
pub fn key_packages_due(remaining: u32, made_at: Option<i64>, now: i64, low: u32, target: u32) -> (usize, bool) {
    let half_life = i64::try_from(mls::KEY_PACKAGE_LIFETIME_SECS / 2).unwrap_or(i64::MAX);
    if made_at.is_none_or(|t| crate::clock::is_due(t, now, half_life)) {
        return (target as usize, true);
    }
    if remaining < low {
        return (target.saturating_sub(remaining) as usize, false);
    }
    (0, false)
}

/// Starts a group with this device as its only member; returns its GroupInfo (epoch 0) for
/// the platform.
pub fn create(conn: &Connection, group_id: &[u8]) -> Result<Vec<u8>> {
    create_lasting(conn, group_id, mls::KEY_PACKAGE_LIFETIME_SECS)
}

/// `create` with the creator's first leaf valid for `lifetime_secs` (tests use a few seconds).
pub fn create_lasting(conn: &Connection, group_id: &[u8], lifetime_secs: u64) -> Result<Vec<u8>> {
    let (credential, signer) = me(conn)?;
    let provider = MlsProvider::new(conn);
    let held = kept::Held::new(conn);
    let group = MlsGroup::new_with_group_id(
        &provider,
        &signer,
        &mls::create_config_lasting(lifetime_secs),
        GroupId::from_slice(group_id),
        credential,
    )
    .map_err(fail("creating a group"))?;
    let info = group.export_group_info(provider.crypto(), &signer, true).map_err(fail("exporting a GroupInfo"))?;
    kept::put(conn, group_id, held, group)?;
    mls::to_bytes(&info).map_err(mls_err("GroupInfo"))
}

/// Joins a group by an external commit from the platform's GroupInfo. The group is stored at
/// the new epoch on return; send the commit, `join_accepted` once the platform takes it, and
/// `forget` the group if it is refused. A rejoin of a group this device holds a verified state
/// of (or kept one of) is checked against that tree first (`rejoin`): a GroupInfo signed by
/// none of its leaves, or older, fails with `RejoinRefused` before anything is touched. Every
/// leaf of the new tree is checked (`leaf`): one this device does not trust fails the join
/// with `UntrustedLeaf`, and the caller rolls back what was stored.
pub fn join_external_to(conn: &Connection, group_id: &[u8], group_info: &[u8]) -> Result<CommitOut> {
    join_external_as(conn, Some(group_id), group_info).map(|(_, out)| out)
}

/// `join_external_to` whichever group the GroupInfo names; returns its id (tests, benchmarks).
pub fn join_external(conn: &Connection, group_info: &[u8]) -> Result<(Vec<u8>, CommitOut)> {
    join_external_as(conn, None, group_info)
}

/// Refuses a GroupInfo or Welcome of another group than the one the member asked for, before
/// anything is stored: the platform chose it, and that group's checks (`rejoin`) are not the
/// ones this join was for.
fn is_expected(expected: Option<&[u8]>, group_id: &[u8], what: &str) -> Result<()> {
    match expected {
        Some(e) if e != group_id => {
            Err(E2eError::Mls(format!("the platform's {what} for group {} is of group {}", short_id(e), short_id(group_id))))
        }
        _ => Ok(()),
    }
}

fn join_external_as(conn: &Connection, expected: Option<&[u8]>, group_info: &[u8]) -> Result<(Vec<u8>, CommitOut)> {
    let (credential, signer) = me(conn)?;
    let provider = MlsProvider::new(conn);
    let MlsMessageBodyIn::GroupInfo(info) = mls::parse_message(group_info).map_err(mls_err("GroupInfo"))?.extract()
    else {
        return Err(E2eError::Mls("the platform's GroupInfo is not a GroupInfo".into()));
    };
    let group_id = info.group_id().as_slice().to_vec();
    is_expected(expected, &group_id, "GroupInfo")?;
    let epoch = info.epoch().as_u64();
    let (held, kept_at) = kept::take(conn, &provider, &group_id)?;
    let reference = rejoin::reference(conn, &group_id, held.as_ref())?;
    if let Some(tree) = &reference {
        let signer = rejoin::check(provider.crypto(), &group_id, &info, tree)?;
        log::debug!("group {}: rejoining from a GroupInfo of epoch {epoch} signed by user {} device {}", short_id(&group_id), signer.0, signer.1);
        // The state held goes below: its tree stays the reference until a join is accepted.
        rejoin::keep(conn, &group_id, tree)?;
    }
    // The state held, or a leftover of an earlier attempt (refused, or lost in a crash),
    // would block the join: deleted, without loading it a second time.
    if let Some(mut held) = held {
        held.delete(provider.storage()).map_err(fail("deleting a group"))?;
    }
    let (mut group, bundle) = MlsGroup::external_commit_builder()
        .with_config(mls::join_config())
        .skip_lifetime_validation()
        .build_group(&provider, info, credential)
        .map_err(fail("joining a group"))?
        .load_psks(provider.storage())
        .map_err(fail("joining a group"))?
        .build(provider.rand(), provider.crypto(), &signer, |_| true)
        .map_err(fail("joining a group"))?
        .finalize(&provider)
        .map_err(fail("joining a group"))?;
    let own_key = signer.0.public_key();
    let own = own_key.as_slice();
    check_members(conn, &group_id, group.members(), own)?;
    let newcomers = match &reference {
        Some(tree) => rejoin::newcomers(tree, group.members(), own),
        None => group.members().filter(|m| m.signature_key != own).filter_map(|m| mls::device_of(&m.credential)).collect(),
    };
    // openmls keeps the epoch the join ended as a past one, though a joiner never had its
    // secrets: every message would rewrite it with the current epoch's.
    group.delete_past_epoch_secrets(&provider, PastEpochDeletion::delete_all()).map_err(fail("joining a group"))?;
    let (commit, _welcome, info) = bundle.into_messages();
    let group_info = match info {
        Some(info) => mls::to_bytes(&info).map_err(mls_err("GroupInfo"))?,
        None => mls::to_bytes(&group.export_group_info(provider.crypto(), &signer, true).map_err(fail("exporting a GroupInfo"))?)
            .map_err(mls_err("GroupInfo"))?,
    };
    let message = mls::to_bytes(&commit).map_err(mls_err("commit"))?;
    let rejoined = reference.is_some();
    kept::put(conn, &group_id, kept_at, group)?;
    Ok((group_id, CommitOut { message, group_info, welcome: Vec::new(), epoch, newcomers, rejoined }))
}

/// The platform accepted this device's external join: its state is the verified one now.
pub fn join_accepted(conn: &Connection, group_id: &[u8]) -> Result<()> {
    rejoin::settled(conn, group_id)
}

/// Joins group `group_id` from a Welcome made for one of this device's key packages; a
/// Welcome to another group is refused. Every leaf of the group's tree is checked first, as
/// for `join_external_to`.
pub fn join_welcome_to(conn: &Connection, group_id: &[u8], welcome: &[u8]) -> Result<()> {
    join_welcome_as(conn, Some(group_id), welcome).map(drop)
}

/// `join_welcome_to` whichever group the Welcome is for; returns its id (tests, benchmarks).
pub fn join_welcome(conn: &Connection, welcome: &[u8]) -> Result<Vec<u8>> {
    join_welcome_as(conn, None, welcome)
}

fn join_welcome_as(conn: &Connection, expected: Option<&[u8]>, welcome: &[u8]) -> Result<Vec<u8>> {
    let provider = MlsProvider::new(conn);
    let MlsMessageBodyIn::Welcome(welcome) = mls::parse_message(welcome).map_err(mls_err("Welcome"))?.extract() else {
        return Err(E2eError::Mls("the delivery is not a Welcome".into()));
    };
    let staged = StagedWelcome::build_from_welcome(&provider, &mls::join_config(), welcome)
        .map_err(fail("opening a Welcome"))?
        .skip_lifetime_validation()
        .build()
        .map_err(fail("opening a Welcome"))?;
    let group_id = staged.group_context().group_id().as_slice().to_vec();
    is_expected(expected, &group_id, "Welcome")?;
    check_members(conn, &group_id, staged.members(), device_key(conn)?.public_key().as_slice())?;
    // A group left or lost earlier under the same id gives way to the new membership.
    forget(conn, &group_id)?;
    rejoin::settled(conn, &group_id)?;
    let held = kept::Held::new(conn);
    let group = staged.into_group(&provider).map_err(fail("joining from a Welcome"))?;
    kept::put(conn, &group_id, held, group)?;
    Ok(group_id)
}

/// A key package ClaimKeyPackages handed out, and the device it was handed out for.
#[derive(Clone, Debug)]
pub struct Claimed {
    pub user_id: u64,
    pub device_id: u32,
    pub key_package: Vec<u8>,
}

impl Claimed {
    /// Key packages of one device, as claimed for it.
    pub fn of(user_id: u64, device_id: u32, key_packages: &[Vec<u8>]) -> Vec<Claimed> {
        key_packages.iter().map(|kp| Claimed { user_id, device_id, key_package: kp.clone() }).collect()
    }
}

/// A pending commit adding the devices of `claimed`. Each key package must verify, carry a leaf
/// this device trusts (`leaf`), and name the device it was claimed for; else `UntrustedLeaf`.
pub fn add(conn: &Connection, group_id: &[u8], claimed: &[Claimed]) -> Result<CommitOut> {
    let signer = signer(conn)?;
    let crypto = openmls_rust_crypto::RustCrypto::default();
    let mut packages = Vec::with_capacity(claimed.len());
    let check = leaf::LeafCheck::new(conn)?;
    for c in claimed {
        let MlsMessageBodyIn::KeyPackage(kp) = mls::parse_message(&c.key_package).map_err(mls_err("key package"))?.extract()
        else {
            return Err(E2eError::Mls("a key package from the platform is not a key package".into()));
        };
        let kp = kp.validate(&crypto, ProtocolVersion::Mls10).map_err(fail("checking a key package"))?;
        let leaf_node = kp.leaf_node();
        let device = check.check(leaf_node.credential(), leaf_node.signature_key().as_slice())?.map_err(|r| untrusted(group_id, r))?;
        if device != (c.user_id, c.device_id) {
            let why = Untrusted::NotRequested { user_id: c.user_id, device_id: c.device_id };
            return Err(untrusted(group_id, LeafRefusal { user_id: device.0, device_id: device.1, why }));
        }
        packages.push(kp);
    }
    with_member(conn, group_id, |provider, group| {
        let epoch = group.epoch().as_u64();
        let (commit, welcome, info) = group.add_members(provider, &signer, &packages).map_err(fail("adding members"))?;
        commit_out(provider, group, &signer, commit, Some(welcome), info, epoch)
    })
}

/// A pending commit removing every leaf of `users`; `None` when none of them has a leaf.
pub fn remove_users(conn: &Connection, group_id: &[u8], users: &[u64]) -> Result<Option<CommitOut>> {
    remove_leaves(conn, group_id, users, &[])
}

/// A pending commit removing, in one commit, every leaf of `users` and the leaves of `devices`
/// (removed devices of users who stay); `None` when none of them has a leaf.
pub fn remove_leaves(conn: &Connection, group_id: &[u8], users: &[u64], devices: &[Device]) -> Result<Option<CommitOut>> {
    let signer = signer(conn)?;
    // Sets, not scans per leaf: a ban of a hundred in a tree of thousands.
    let (users, devices): (std::collections::HashSet<u64>, std::collections::HashSet<Device>) =
        (users.iter().copied().collect(), devices.iter().copied().collect());
    with_member(conn, group_id, |provider, group| {
        let leaves: Vec<LeafNodeIndex> = group
            .members()
            .filter(|m| mls::device_of(&m.credential).is_some_and(|d| users.contains(&d.0) || devices.contains(&d)))
            .map(|m| m.index)
            .collect();
        if leaves.is_empty() {
            return Ok(None);
        }
        let epoch = group.epoch().as_u64();
        let (commit, welcome, info) = group.remove_members(provider, &signer, &leaves).map_err(fail("removing members"))?;
        commit_out(provider, group, &signer, commit, welcome, info, epoch).map(Some)
    })
}

/// A pending commit that replaces this device's own leaf (new HPKE and path keys, signed
/// anew): post-compromise security, and a leaf no lifetime check can expire. Sent and settled
/// like every other commit.
pub fn self_update(conn: &Connection, group_id: &[u8]) -> Result<CommitOut> {
    let (credential, signer) = me(conn)?;
    with_member(conn, group_id, |provider, group| {
        let epoch = group.epoch().as_u64();
        // The current credential: a leaf made before leaves carried proof gets its proof here.
        let leaf = LeafNodeParameters::builder().with_credential_with_key(credential).build();
        let bundle = group.self_update(provider, &signer, leaf).map_err(fail("updating our own leaf"))?;
        let (commit, welcome, info) = bundle.into_contents();
        let welcome = welcome.map(|w| MlsMessageOut::from_welcome(w, ProtocolVersion::Mls10));
        commit_out(provider, group, &signer, commit, welcome, info, epoch)
    })
}

/// Forward secrecy once our own commits are behind us: deletes the secrets of every past
/// epoch of the group (kept only for messages sent before a commit of ours that we merged
/// ahead of reading them; see `mls::MAX_PAST_EPOCHS`). Call it when the inbox has passed our
/// latest accepted commit; whoever commits the transaction then checkpoints (`wal`). Groups
/// made with a larger window get the current one. A group left or forgotten keeps nothing.
pub fn delete_past_epochs(conn: &Connection, group_id: &[u8]) -> Result<()> {
    with_group(conn, group_id, |provider, group| {
        group.delete_past_epoch_secrets(provider, PastEpochDeletion::delete_all()).map_err(fail("deleting past epoch secrets"))?;
        super::wal::secrets_deleted();
        let window = PastEpochDeletionPolicy::MaxEpochs(mls::MAX_PAST_EPOCHS);
        if group.past_epoch_deletion_policy() != &window {
            group.set_past_epoch_deletion_policy(provider, window).map_err(fail("narrowing the past epoch window"))?;
        }
        Ok(())
    })
    .map(drop)
}

fn commit_out(
    provider: &MlsProvider<&Connection>,
    group: &MlsGroup,
    signer: &DeviceSigner,
    commit: MlsMessageOut,
    welcome: Option<MlsMessageOut>,
    info: Option<GroupInfo>,
    epoch: u64,
) -> Result<CommitOut> {
    let group_info = match info {
        Some(info) => mls::to_bytes(&MlsMessageOut::from(info)).map_err(mls_err("GroupInfo"))?,
        // Only without the ratchet-tree extension would a commit carry none; export it then.
        None => mls::to_bytes(&group.export_group_info(provider.crypto(), signer, true).map_err(fail("exporting a GroupInfo"))?)
            .map_err(mls_err("GroupInfo"))?,
    };
    Ok(CommitOut {
        message: mls::to_bytes(&commit).map_err(mls_err("commit"))?,
        group_info,
        welcome: match welcome {
            Some(w) => mls::to_bytes(&w).map_err(mls_err("Welcome"))?,
            None => Vec::new(),
        },
        epoch,
        ..CommitOut::default()
    })
}

/// The platform accepted our pending commit: merge it.
pub fn commit_accepted(conn: &Connection, group_id: &[u8]) -> Result<()> {
    with_member(conn, group_id, |provider, group| group.merge_pending_commit(provider).map_err(fail("merging our commit")))
}

/// The platform refused our pending commit: discard it.
pub fn commit_refused(conn: &Connection, group_id: &[u8]) -> Result<()> {
    with_member(conn, group_id, |provider, group| group.clear_pending_commit(provider.storage()).map_err(fail("discarding our commit")))
}

/// Encrypts an application message in the current epoch; returns it and that epoch.
pub fn encrypt(conn: &Connection, group_id: &[u8], plaintext: &[u8]) -> Result<(Vec<u8>, u64)> {
    let signer = signer(conn)?;
    with_member(conn, group_id, |provider, group| {
        let message = group.create_message(provider, &signer, plaintext).map_err(fail("encrypting a group message"))?;
        Ok((mls::to_bytes(&message).map_err(mls_err("application message"))?, group.epoch().as_u64()))
    })
}

/// Encrypts `content` for the group's members, padded as a private message is (`padding`).
pub fn encrypt_content(conn: &Connection, group_id: &[u8], content: &crate::wire::e2e::Content) -> Result<(Vec<u8>, u64)> {
    encrypt(conn, group_id, &super::padding::padded_bytes(content))
}

/// Processes one message the platform delivered, in the group's order: decrypts an
/// application message, or checks and merges a commit. A commit bringing a leaf this device does
/// not trust (`leaf`: an added key package, the committer's new leaf, an updated leaf) is not
/// merged: `UntrustedLeaf`. A device that joined by external commit is reported as added.
pub fn receive(conn: &Connection, group_id: &[u8], bytes: &[u8]) -> Result<Received> {
    with_member(conn, group_id, |provider, group| receive_loaded(conn, provider, group, group_id, bytes))
}

fn receive_loaded(
    conn: &Connection,
    provider: &MlsProvider<&Connection>,
    group: &mut MlsGroup,
    group_id: &[u8],
    bytes: &[u8],
) -> Result<Received> {
    let message = mls::parse_message(bytes)
        .map_err(mls_err("group message"))?
        .try_into_protocol_message()
        .map_err(fail("group message"))?;
    if message.group_id().as_slice() != group_id {
        return Err(E2eError::Mls(format!("a message for another group arrived as {}", short_id(group_id))));
    }
    // An old commit again is the platform replaying it: openmls would fail it, and a failed
    // commit makes a member rejoin from the platform's GroupInfo.
    let (epoch, current) = (message.epoch().as_u64(), group.epoch().as_u64());
    if message.content_type() == ContentType::Commit && epoch < current {
        return Err(E2eError::ReplayedCommit { group: short_id(group_id), epoch, current });
    }
    let processed = group.process_message(provider, message).map_err(fail("processing a group message"))?;
    let sender = processed.credential().clone();
    let sender_kind = match processed.sender() {
        Sender::NewMemberCommit => SenderKind::Joiner,
        _ => SenderKind::Other,
    };
    match processed.into_content() {
        ProcessedMessageContent::ApplicationMessage(m) => {
            let sender = mls::device_of(&sender)
                .ok_or_else(|| E2eError::Mls("a group message from a leaf that names no device".into()))?;
            Ok(Received::Application { sender, plaintext: m.into_bytes() })
        }
        ProcessedMessageContent::StagedCommitMessage(staged) => {
            let mut added = Vec::new();
            let check = leaf::LeafCheck::new(conn)?;
            for (leaf_node, is_new_member) in new_leaves(&staged) {
                let device = check.check(leaf_node.credential(), leaf_node.signature_key().as_slice())?.map_err(|r| untrusted(group_id, r))?;
                if is_new_member {
                    added.push(device);
                }
            }
            if matches!(sender_kind, SenderKind::Joiner) {
                check_external_removals(group, group_id, &staged)?;
            }
            let mut removed: Vec<Device> = staged
                .remove_proposals()
                .filter_map(|p| group.member(p.remove_proposal().removed()).and_then(mls::device_of))
                .collect();
            if matches!(sender_kind, SenderKind::Joiner) {
                // An external joiner: added by its path; replacing its own old leaf, it rejoined.
                let joiner = staged.update_path_leaf_node().and_then(|l| mls::device_of(l.credential()));
                match joiner {
                    Some(d) if removed.contains(&d) => removed.retain(|r| *r != d),
                    Some(d) => added.push(d),
                    None => {}
                }
            }
            let new_users = new_users(group, &added, &removed);
            let removed_me = staged.self_removed();
            group.merge_staged_commit(provider, *staged).map_err(fail("merging a commit"))?;
            Ok(Received::Commit { added, removed, removed_me, epoch: group.epoch().as_u64(), new_users })
        }
        _ => Ok(Received::Ignored),
    }
}

/// The users of `added` with no leaf in the tree before the commit but one it removes: one
/// pass over the leaves, and none when nothing was added (almost every commit of a big group
/// adds one member, so the pass stops at nothing cheaper than the tree it has in memory).
fn new_users(group: &MlsGroup, added: &[Device], removed: &[Device]) -> Vec<u64> {
    let mut users: Vec<u64> = added.iter().map(|d| d.0).collect();
    users.sort_unstable();
    users.dedup();
    if users.is_empty() {
        return users;
    }
    let seated: std::collections::HashSet<u64> = group
        .members()
        .filter_map(|m| mls::device_of(&m.credential))
        .filter(|d| users.binary_search(&d.0).is_ok() && !removed.contains(d))
        .map(|d| d.0)
        .collect();
    users.retain(|u| !seated.contains(u));
    users
}

/// openmls lets an external commit carry Remove proposals and leaves their check to the
/// application: a joiner may remove only its own earlier leaf (a rejoin), the same user and
/// device under the same identity key. Anything else is refused before anything is merged,
/// whatever the platform accepted.
fn check_external_removals(group: &MlsGroup, group_id: &[u8], staged: &StagedCommit) -> Result<()> {
    let removed: Vec<Option<mls::LeafIdentity>> =
        staged.remove_proposals().map(|p| group.member(p.remove_proposal().removed()).and_then(mls::leaf_identity)).collect();
    let joiner = staged.update_path_leaf_node().and_then(|l| mls::leaf_identity(l.credential()));
    let refused = |user_id, device_id| {
        let (u, d) = joiner.as_ref().map_or((0, 0), |j| (j.user_id, j.device_id));
        Err(untrusted(group_id, LeafRefusal { user_id: u, device_id: d, why: Untrusted::RemovesAnother { user_id, device_id } }))
    };
    match (&removed[..], &joiner) {
        ([], _) => Ok(()),
        ([Some(old)], Some(new)) if is_earlier_leaf_of(old, new) => Ok(()),
        ([Some(old)], _) => refused(old.user_id, old.device_id),
        _ => refused(0, 0),
    }
}

/// Whether `old` is an earlier leaf of the device `new` is: the same user and device, and
/// (when the old leaf carries proof) the same identity key.
fn is_earlier_leaf_of(old: &mls::LeafIdentity, new: &mls::LeafIdentity) -> bool {
    let key = |l: &mls::LeafIdentity| l.proof.map(|p| p.identity_key);
    (old.user_id, old.device_id) == (new.user_id, new.device_id) && (old.proof.is_none() || key(old) == key(new))
}

/// Who sent a processed message, as far as `receive` cares.
enum SenderKind {
    /// A device joining by external commit.
    Joiner,
    Other,
}

/// The leaves a commit brings in or changes: added key packages' (`true`: a new member),
/// updated ones, and the committer's new leaf (its path).
fn new_leaves(staged: &StagedCommit) -> Vec<(&LeafNode, bool)> {
    let mut leaves: Vec<(&LeafNode, bool)> = staged
        .queued_proposals()
        .filter_map(|p| match p.proposal() {
            Proposal::Add(add) => Some((add.key_package().leaf_node(), true)),
            Proposal::Update(update) => Some((update.leaf_node(), false)),
            _ => None,
        })
        .collect();
    leaves.extend(staged.update_path_leaf_node().map(|l| (l, false)));
    leaves
}

/// Whether `bytes` is a commit (a PublicMessage carrying one), as a delivery that failed to
/// process is told apart from an application message.
pub fn is_commit(bytes: &[u8]) -> bool {
    match mls::parse_message(bytes).map(|m| m.extract()) {
        Ok(MlsMessageBodyIn::PublicMessage(m)) => m.content_type() == ContentType::Commit,
        _ => false,
    }
}

/// The current epoch of a group this device is in; `None` when it is not (or no longer) in it.
pub fn epoch(conn: &Connection, group_id: &[u8]) -> Result<Option<u64>> {
    Ok(with_group(conn, group_id, |_, g| Ok(g.is_active().then(|| g.epoch().as_u64())))?.flatten())
}

/// Which of `users` have a leaf in the group now; `None` when this device is not (or no
/// longer) in it.
pub fn users_with_leaves(conn: &Connection, group_id: &[u8], users: &[u64]) -> Result<Option<Vec<u64>>> {
    let asked: std::collections::HashSet<u64> = users.iter().copied().collect();
    let found = with_group(conn, group_id, |_, group| {
        if !group.is_active() {
            return Ok(None);
        }
        let mut found: Vec<u64> =
            group.members().filter_map(|m| mls::device_of(&m.credential)).map(|d| d.0).filter(|u| asked.contains(u)).collect();
        found.sort_unstable();
        found.dedup();
        Ok(Some(found))
    })?;
    Ok(found.flatten())
}

/// The devices that have a leaf in the group now.
pub fn members(conn: &Connection, group_id: &[u8]) -> Result<Vec<Device>> {
    with_member(conn, group_id, |_, group| Ok(group.members().filter_map(|m| mls::device_of(&m.credential)).collect()))
}

/// Deletes this device's state of a group (after leaving it, or before joining it anew).
pub fn forget(conn: &Connection, group_id: &[u8]) -> Result<()> {
    with_group(conn, group_id, |provider, group| group.delete(provider.storage()).map_err(fail("deleting a group"))).map(drop)
}

/// What a test playing a dishonest platform makes: leaves nobody vouched for, and external
/// commits that bring them into a group.
#[cfg(test)]
pub(crate) mod forge {
    use super::*;

    /// A leaf credential of `signer`'s key, naming `(user, device)`: with the given proof, or
    /// none (the 12-byte form of earlier releases).
    pub fn leaf_as(user: u64, device: u32, proof: Option<mls::LeafProof>, signer: &DeviceSigner) -> CredentialWithKey {
        let identity = match proof {
            Some(proof) => mls::credential_identity(user, device, &proof),
            None => mls::credential_identity(user, device, &mls::LeafProof { identity_key: [0; 32], certificate: [0; 64], created_at: None })[..12].to_vec(),
        };
        CredentialWithKey { credential: BasicCredential::new(identity).into(), signature_key: signer.0.public_key().to_vec().into() }
    }

    /// An external commit into the group of `info` (a GroupInfo as the platform stores it) with
    /// the leaf `leaf` makes for a fresh key.
    pub fn external_commit(info: &[u8], leaf: impl FnOnce(&DeviceSigner) -> CredentialWithKey) -> Vec<u8> {
        let signer = DeviceSigner(crate::crypto::IdentityKeyPair::generate());
        let credential = leaf(&signer);
        external_commit_as(info, &signer, credential)
    }

    /// An external commit into the group of `info`, signed by `signer`, with the leaf `credential`.
    pub fn external_commit_as(info: &[u8], signer: &DeviceSigner, credential: CredentialWithKey) -> Vec<u8> {
        let mut conn = Connection::open_in_memory().expect("db");
        mls::migrate_storage(&mut conn).expect("openmls tables");
        let provider = MlsProvider::new(&conn);
        let MlsMessageBodyIn::GroupInfo(info) = mls::parse_message(info).expect("info").extract() else { panic!("not a GroupInfo") };
        let (_, bundle) = MlsGroup::external_commit_builder()
            .with_config(mls::join_config())
            .build_group(&provider, info, credential)
            .expect("build")
            .load_psks(provider.storage())
            .expect("psks")
            .build(provider.rand(), provider.crypto(), signer, |_| true)
            .expect("commit")
            .finalize(&provider)
            .expect("finalize");
        mls::to_bytes(&bundle.into_messages().0).expect("bytes")
    }

    /// The GroupInfo of a group `group_id` made by a device the platform invented: its one leaf
    /// (device 5 of user 1) carries no proof.
    pub fn unvouched_group_info(group_id: &[u8]) -> Vec<u8> {
        let mut conn = Connection::open_in_memory().expect("db");
        mls::migrate_storage(&mut conn).expect("openmls tables");
        let signer = DeviceSigner(crate::crypto::IdentityKeyPair::generate());
        let provider = MlsProvider::new(&conn);
        let leaf = leaf_as(1, 5, None, &signer);
        let group = MlsGroup::new_with_group_id(&provider, &signer, &mls::create_config(), GroupId::from_slice(group_id), leaf)
            .expect("create");
        mls::to_bytes(&group.export_group_info(provider.crypto(), &signer, true).expect("info")).expect("bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::Device as TestDevice;
    use super::forge::{external_commit as forged_join, leaf_as};
    use super::leaf::pinned_identity;
    use super::*;
    use crate::crypto::mls_codec::{write_as, Era};
    use crate::crypto::mls_versions;

    fn device(user: u64, dev: u32) -> TestDevice {
        let mut d = TestDevice::new(user, dev).on_disk();
        mls::migrate_storage(&mut d.conn).expect("openmls tables");
        d
    }

    /// Bob in Alice's group (by Welcome, at epoch 1).
    fn alice_and_bob() -> (TestDevice, TestDevice, [u8; 32]) {
        let alice = device(1, 1);
        let bob = device(2, 1);
        let gid = new_group_id();
        create(&alice.conn, &gid).expect("create");
        let kps = key_packages(&bob.conn, 1).expect("key package");
        let add_bob = add(&alice.conn, &gid, &Claimed::of(2, 1, &kps)).expect("add");
        commit_accepted(&alice.conn, &gid).expect("merge");
        join_welcome(&bob.conn, &add_bob.welcome).expect("welcome");
        (alice, bob, gid)
    }

    /// What the platform does for the tests here: accept in order, hand the commit to the others.
    fn send_commit(from: &TestDevice, gid: &[u8], commit: &CommitOut, others: &[&TestDevice]) -> Vec<Received> {
        commit_accepted(&from.conn, gid).expect("merge own commit");
        others.iter().map(|o| receive(&o.conn, gid, &commit.message).expect("member processes the commit")).collect()
    }

    /// The group as stored, loaded past the kept copies.
    fn stored_group(conn: &Connection, gid: &[u8]) -> MlsGroup {
        MlsGroup::load(MlsProvider::new(conn).storage(), &GroupId::from_slice(gid)).expect("load").expect("stored")
    }

    /// `f` in a transaction, as the gateway's writer and the client run every write: only
    /// what a transaction wrote is kept (`kept`).
    fn in_tx<T>(conn: &Connection, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        conn.execute_batch("SAVEPOINT test_tx").expect("begin");
        let out = f(conn);
        let end = if out.is_ok() { "RELEASE test_tx" } else { "ROLLBACK TO test_tx; RELEASE test_tx" };
        conn.execute_batch(end).expect("end");
        out
    }

    fn opened(conn: &Connection, gid: &[u8], bytes: &[u8]) -> Vec<u8> {
        match in_tx(conn, |c| receive(c, gid, bytes)).expect("opens") {
            Received::Application { plaintext, .. } => plaintext,
            other => panic!("expected a message, got {other:?}"),
        }
    }

    #[test]
    fn a_kept_group_opens_what_loading_each_time_opens() {
        let (alice, bob, gid) = alice_and_bob();
        let text = |i: usize| format!("message {i}").into_bytes();
        for i in 0..3 {
            assert_eq!(opened(&bob.conn, &gid, &encrypt(&alice.conn, &gid, &text(i)).expect("encrypt").0), text(i));
            assert_eq!(kept::kept_at(&bob.conn, &gid), mls_versions::read(&bob.conn, &gid).unwrap().map(|v| v.version), "kept at the stored version");
        }
        // A message that fails drops the copy; the next one opens from storage.
        let (good, _) = encrypt(&alice.conn, &gid, &text(3)).expect("encrypt");
        let mut bad = good.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(in_tx(&bob.conn, |c| receive(c, &gid, &bad)).is_err());
        assert_eq!(kept::kept_at(&bob.conn, &gid), None, "dropped after an error");
        assert_eq!(opened(&bob.conn, &gid, &good), text(3));
        // A commit moves the kept group to the new epoch with the storage.
        let update = self_update(&alice.conn, &gid).expect("self update");
        commit_accepted(&alice.conn, &gid).expect("merge");
        assert!(matches!(in_tx(&bob.conn, |c| receive(c, &gid, &update.message)).expect("commit"), Received::Commit { epoch: 2, .. }));
        assert!(kept::kept_at(&bob.conn, &gid).is_some(), "kept at the new epoch");
        assert_eq!(opened(&bob.conn, &gid, &encrypt(&alice.conn, &gid, &text(4)).expect("encrypt").0), text(4));
        // Storage and the kept copy agree: the stored state opens the next message too.
        kept::release(bob.conn.path().expect("a file"));
        assert_eq!(kept::kept_at(&bob.conn, &gid), None, "bob's database released");
        assert_eq!(epoch(&alice.conn, &gid).expect("epoch"), Some(2));
        assert!(kept::kept_at(&alice.conn, &gid).is_some(), "alice's database keeps its group");
        assert_eq!(stored_group(&bob.conn, &gid).epoch().as_u64(), 2);
        assert_eq!(opened(&bob.conn, &gid, &encrypt(&alice.conn, &gid, &text(5)).expect("encrypt").0), text(5));
    }

    /// A receive rolled back (a savepoint, as the inbox's per-envelope retry does) leaves a kept
    /// copy that used up the message's key while the stored state did not: it must not be used.
    #[test]
    fn a_receive_rolled_back_is_received_again_from_the_stored_state() {
        let (alice, bob, gid) = alice_and_bob();
        let (message, _) = encrypt(&alice.conn, &gid, b"twice").expect("encrypt");
        bob.conn.execute_batch("SAVEPOINT envelope").expect("savepoint");
        assert_eq!(opened(&bob.conn, &gid, &message), b"twice");
        assert!(kept::kept_at(&bob.conn, &gid).is_some());
        bob.conn.execute_batch("ROLLBACK TO envelope; RELEASE envelope").expect("rollback");
        assert_eq!(opened(&bob.conn, &gid, &message), b"twice", "opened from the stored state, whose key is unused");
    }

    /// Another copy of the group (another connection, another process) writes its sending
    /// ratchet forward: a kept copy from before would send again under a used key (nonce
    /// reuse). It is of an older version, so it is not used.
    #[test]
    fn a_kept_copy_never_sends_after_another_copy_wrote() {
        let (alice, bob, gid) = alice_and_bob();
        let first = in_tx(&alice.conn, |c| encrypt(c, &gid, b"one")).expect("encrypt").0;
        assert!(kept::kept_at(&alice.conn, &gid).is_some());
        let other = Connection::open(alice.conn.path().expect("a file")).expect("a second connection");
        let signer = signer(&other).expect("signer");
        let provider = MlsProvider::new(&other);
        let second = stored_group(&other, &gid).create_message(&provider, &signer, b"two").expect("another copy sends");
        let second = mls::to_bytes(&second).expect("bytes");
        let third = in_tx(&alice.conn, |c| encrypt(c, &gid, b"three")).expect("encrypt").0;
        for (bytes, text) in [(first, &b"one"[..]), (second, b"two"), (third, b"three")] {
            assert_eq!(opened(&bob.conn, &gid, &bytes), text);
        }
    }

    /// A call on a group inside a call on the same group would load a second copy, and the
    /// outer copy would then be kept over the inner one's writes: it fails instead. Another
    /// connection, or the same group once the outer call ended, is taken as before.
    #[test]
    fn a_group_taken_again_inside_a_call_on_it_is_refused() {
        let (alice, bob, gid) = alice_and_bob();
        let inner = with_member(&alice.conn, &gid, |_, _| Ok(encrypt(&alice.conn, &gid, b"nested")));
        let message = format!("{:?}", inner.expect("the outer call ends well").expect_err("the inner call is refused"));
        assert!(message.contains("taken again inside a call on it"), "{message}");
        let other = Connection::open(alice.conn.path().expect("a file")).expect("a second connection");
        with_member(&alice.conn, &gid, |_, _| Ok(epoch(&other, &gid))).expect("outer").expect("another connection's copy");
        let sent = in_tx(&alice.conn, |c| encrypt(c, &gid, b"after")).expect("taken again once given back").0;
        assert_eq!(opened(&bob.conn, &gid, &sent), b"after");
    }

    /// A write outside a transaction committed alone, and another process may have written
    /// since: nothing of it is kept.
    #[test]
    fn a_write_outside_a_transaction_keeps_nothing() {
        let (alice, bob, gid) = alice_and_bob();
        encrypt(&alice.conn, &gid, b"alone").expect("encrypt");
        assert_eq!(kept::kept_at(&alice.conn, &gid), None);
        in_tx(&alice.conn, |c| encrypt(c, &gid, b"in a transaction")).expect("encrypt");
        assert!(kept::kept_at(&alice.conn, &gid).is_some());
        // Reading keeps what it read, at the version read before.
        kept::release(bob.conn.path().expect("a file"));
        assert_eq!(members(&bob.conn, &gid).expect("members").len(), 2);
        assert_eq!(kept::kept_at(&bob.conn, &gid), mls_versions::read(&bob.conn, &gid).unwrap().map(|v| v.version));
    }

    /// A database of an earlier release has openmls' tables without the versions: opening it
    /// adds them; and a trigger lost (a table rebuilt by openmls' migration) comes back.
    #[test]
    fn the_group_versions_are_made_at_every_open() {
        let triggers = |c: &Connection| -> i64 {
            c.query_row("SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'openmls_%_versioned_%'", [], |r| r.get(0))
                .expect("count")
        };
        let mut conn = Connection::open_in_memory().expect("db");
        openmls_sqlite_storage::SqliteStorageProvider::<crate::crypto::mls_codec::StorageCodec, &mut Connection>::new(&mut conn)
            .run_migrations()
            .expect("openmls tables alone");
        assert_eq!(triggers(&conn), 0);
        mls::migrate_storage(&mut conn).expect("open");
        assert_eq!(triggers(&conn), 9);
        conn.execute_batch("DROP TRIGGER openmls_group_data_versioned_insert").expect("drop");
        mls::migrate_storage(&mut conn).expect("open again");
        assert_eq!(triggers(&conn), 9);
    }

    /// The first byte of each of the group's state values, by kind, and every group id key.
    fn stored(conn: &Connection) -> (std::collections::BTreeMap<String, u8>, Vec<Vec<u8>>) {
        let mut values = conn.prepare("SELECT data_type, group_data FROM openmls_group_data").expect("values");
        let values = values
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?[0])))
            .expect("rows")
            .map(|r| r.expect("row"))
            .collect();
        let mut keys = conn.prepare("SELECT DISTINCT group_id FROM openmls_group_data").expect("keys");
        let keys = keys.query_map([], |r| r.get(0)).expect("rows").map(|r| r.expect("row")).collect();
        (values, keys)
    }

    #[test]
    fn state_an_earlier_release_wrote_in_json_opens_and_is_rewritten_compact() {
        state_an_earlier_release_wrote_opens_and_is_rewritten(Era::Json, b'{');
    }

    /// Issue 48: the tree and secrets a release wrote as MessagePack open, and are rewritten
    /// as postcard.
    #[test]
    fn state_an_earlier_release_wrote_in_messagepack_opens_and_is_rewritten_as_postcard() {
        state_an_earlier_release_wrote_opens_and_is_rewritten(Era::MessagePack, 0xC1);
    }

    /// A group's state written as `era` wrote it (the tree and the secrets starting with
    /// `first`) opens in this release; each message rewrites the secrets as postcard (0xC7),
    /// a commit the tree; nothing else changes its encoding.
    fn state_an_earlier_release_wrote_opens_and_is_rewritten(era: Era, first: u8) {
        let alice = device(1, 1);
        let bob = device(2, 1);
        let gid = new_group_id();
        write_as(era);
        create(&alice.conn, &gid).expect("create");
        let kps = key_packages(&bob.conn, 1).expect("key package");
        let add_bob = add(&alice.conn, &gid, &Claimed::of(2, 1, &kps)).expect("add");
        commit_accepted(&alice.conn, &gid).expect("merge");
        join_welcome(&bob.conn, &add_bob.welcome).expect("welcome");
        let (first_message, _) = encrypt(&alice.conn, &gid, b"one").expect("encrypt");
        assert!(matches!(receive(&bob.conn, &gid, &first_message).expect("opens"), Received::Application { .. }));
        let (old, old_keys) = stored(&bob.conn);
        assert_eq!((old["message_secrets"], old["tree"]), (first, first), "{old:?}");
        write_as(Era::Current);
        // A new release starts with nothing kept.
        for d in [&alice, &bob] {
            kept::release(d.conn.path().expect("a file"));
        }

        // This release opens it; each message rewrites the message secrets as postcard.
        let (second, _) = encrypt(&alice.conn, &gid, b"two").expect("encrypt");
        assert_eq!(receive(&bob.conn, &gid, &second).expect("opens"), Received::Application { sender: (1, 1), plaintext: b"two".to_vec() });
        let (now, keys) = stored(&bob.conn);
        assert_eq!(now["message_secrets"], 0xC7, "{now:?}");
        assert_eq!(now["tree"], first, "the tree changes with a commit");
        assert_eq!(keys, old_keys, "keys keep their bytes: rows are found by them");
        // A commit writes the tree as postcard; a fresh load reads it, and the next message opens.
        let update = self_update(&alice.conn, &gid).expect("self update");
        commit_accepted(&alice.conn, &gid).expect("merge");
        assert!(matches!(receive(&bob.conn, &gid, &update.message).expect("commit"), Received::Commit { epoch: 2, .. }));
        assert_eq!(stored(&bob.conn).0["tree"], 0xC7);
        kept::release(bob.conn.path().expect("a file"));
        assert_eq!(members(&bob.conn, &gid).expect("members").len(), 2);
        let (third, _) = encrypt(&alice.conn, &gid, b"three").expect("encrypt");
        assert_eq!(receive(&bob.conn, &gid, &third).expect("opens"), Received::Application { sender: (1, 1), plaintext: b"three".to_vec() });
        // Everything else the earlier release wrote is still JSON.
        let (after, _) = stored(&bob.conn);
        assert!(after.iter().all(|(kind, &b)| b == b'{' || b == b'[' || b == b'"' || b.is_ascii_digit() || (b == 0xC7 && (kind == "tree" || kind == "message_secrets"))), "{after:?}");
    }

    #[test]
    fn a_group_info_or_a_welcome_of_another_group_is_refused_before_anything_is_stored() {
        let alice = device(1, 1);
        let (bob, bot) = (device(2, 1), device(3, 7));
        let (gid, asked) = (new_group_id(), new_group_id());
        let info = create(&alice.conn, &gid).expect("create");
        let e = join_external_to(&bot.conn, &asked, &info).expect_err("another group's GroupInfo");
        assert!(e.to_string().contains("is of group"), "{e}");
        assert_eq!((epoch(&bot.conn, &gid).unwrap(), epoch(&bot.conn, &asked).unwrap()), (None, None), "nothing stored");
        join_external_to(&bot.conn, &gid, &info).expect("the asked group's GroupInfo");
        assert_eq!(epoch(&bot.conn, &gid).unwrap(), Some(1));

        let kps = key_packages(&bob.conn, 1).expect("key packages");
        let add_bob = add(&alice.conn, &gid, &Claimed::of(2, 1, &kps)).expect("add");
        let e = join_welcome_to(&bob.conn, &asked, &add_bob.welcome).expect_err("another group's Welcome");
        assert!(e.to_string().contains("is of group"), "{e}");
        assert_eq!((epoch(&bob.conn, &gid).unwrap(), epoch(&bob.conn, &asked).unwrap()), (None, None), "nothing stored");
    }

    #[test]
    fn create_external_join_welcome_messages_removal_and_a_stale_commit() {
        let alice = device(1, 1);
        let bob = device(2, 1);
        let bot = device(3, 7);
        let gid = new_group_id();
        let info = create(&alice.conn, &gid).expect("create");
        assert_eq!(epoch(&alice.conn, &gid).unwrap(), Some(0));

        // The bot joins by external commit; it is at epoch 1 at once, Alice after processing.
        let (joined, commit) = join_external(&bot.conn, &info).expect("external join");
        assert_eq!(joined, gid.to_vec());
        assert_eq!(commit.epoch, 0);
        assert_eq!(epoch(&bot.conn, &gid).unwrap(), Some(1));
        match receive(&alice.conn, &gid, &commit.message).expect("alice processes the join") {
            Received::Commit { added, removed, removed_me, epoch, new_users } => {
                assert_eq!(added, vec![(3, 7)], "an external joiner is reported as added");
                assert_eq!(new_users, vec![3], "a user new to the tree");
                assert!(removed.is_empty());
                assert!(!removed_me);
                assert_eq!(epoch, 1);
            }
            other => panic!("expected a commit, got {other:?}"),
        }

        // Bob is added from a key package and joins from the Welcome.
        let kps = key_packages(&bob.conn, 2).expect("key packages");
        assert_eq!(kps.len(), 2);
        let add_bob = add(&alice.conn, &gid, &Claimed::of(2, 1, &kps[..1])).expect("add");
        assert!(!add_bob.welcome.is_empty());
        let seen = send_commit(&alice, &gid, &add_bob, &[&bot]);
        assert!(matches!(&seen[0], Received::Commit { added, .. } if added == &vec![(2, 1)]), "{seen:?}");
        assert_eq!(join_welcome(&bob.conn, &add_bob.welcome).expect("welcome"), gid.to_vec());
        let mut all = members(&bob.conn, &gid).unwrap();
        all.sort();
        assert_eq!(all, vec![(1, 1), (2, 1), (3, 7)]);
        assert_eq!(users_with_leaves(&bob.conn, &gid, &[9, 3, 1, 3]).unwrap(), Some(vec![1, 3]), "the asked ones with a leaf");

        // Application messages reach everyone, with the sending device.
        let (hi, at) = encrypt(&bot.conn, &gid, b"hello group").expect("encrypt");
        assert_eq!(at, 2);
        for member in [&alice, &bob] {
            assert_eq!(
                receive(&member.conn, &gid, &hi).expect("decrypt"),
                Received::Application { sender: (3, 7), plaintext: b"hello group".to_vec() }
            );
        }

        // Two commits for one epoch: the platform takes Alice's; Bob's is refused, and Bob
        // catches up with Alice's, then derives his again.
        let remove_bot = remove_users(&alice.conn, &gid, &[3]).expect("remove").expect("the bot has a leaf");
        let racing = remove_users(&bob.conn, &gid, &[3]).expect("remove").expect("leaf");
        assert_eq!(racing.epoch, remove_bot.epoch);
        commit_refused(&bob.conn, &gid).expect("discard the losing commit");
        let seen = send_commit(&alice, &gid, &remove_bot, &[&bob, &bot]);
        assert!(matches!(&seen[0], Received::Commit { removed, removed_me: false, .. } if removed == &vec![(3, 7)]));
        assert!(matches!(&seen[1], Received::Commit { removed_me: true, .. }), "{seen:?}");
        assert_eq!(epoch(&bot.conn, &gid).unwrap(), None, "the removed bot is out");
        assert_eq!(users_with_leaves(&bot.conn, &gid, &[1, 2]).unwrap(), None, "and asks nobody's leaf");
        assert_eq!(users_with_leaves(&alice.conn, &gid, &[3]).unwrap(), Some(vec![]), "its leaf is gone");
        assert!(remove_users(&bob.conn, &gid, &[3]).expect("moot now").is_none());
        assert_eq!(epoch(&alice.conn, &gid).unwrap(), epoch(&bob.conn, &gid).unwrap());

        // The removed device cannot read what follows.
        let (secret, _) = encrypt(&alice.conn, &gid, b"after the removal").expect("encrypt");
        assert!(receive(&bot.conn, &gid, &secret).is_err());
        assert!(matches!(receive(&bob.conn, &gid, &secret).unwrap(), Received::Application { .. }));

        // A refused external join is forgotten and made again from a newer GroupInfo.
        forget(&bot.conn, &gid).expect("forget");
        assert_eq!(epoch(&bot.conn, &gid).unwrap(), None);
    }

    fn refusal(e: E2eError) -> LeafRefusal {
        match e {
            E2eError::UntrustedLeaf { refusal, .. } => refusal,
            other => panic!("expected an untrusted leaf, got {other}"),
        }
    }

    #[test]
    fn a_leaf_the_platform_makes_up_is_refused_by_every_member_and_nothing_is_merged() {
        let alice = device(1, 1);
        let bob = device(2, 1);
        let gid = new_group_id();
        let info = create(&alice.conn, &gid).expect("create");
        let (_, joined) = join_external(&bob.conn, &info).expect("bob joins");
        assert!(matches!(receive(&alice.conn, &gid, &joined.message).expect("alice"), Received::Commit { .. }));
        let info = joined.group_info;
        let bob_identity = bob.account.public_key();
        let other_account = crate::crypto::IdentityKeyPair::generate();

        let forgeries: Vec<(&str, Vec<u8>, Untrusted)> = vec![
            ("a leaf without proof", forged_join(&info, |s| leaf_as(77, 1, None, s)), Untrusted::NoProof),
            (
                "a certificate over another key",
                forged_join(&info, |s| {
                    let other_key = crate::crypto::IdentityKeyPair::generate().public_key();
                    let certificate = crate::crypto::identity::sign_device_certificate(&other_account, &other_key);
                    leaf_as(77, 1, Some(mls::LeafProof { identity_key: other_account.public_key(), certificate, created_at: None }), s)
                }),
                Untrusted::BadCertificate,
            ),
            (
                "a new device of bob under another identity",
                forged_join(&info, |s| {
                    let certificate = crate::crypto::identity::sign_device_certificate(&other_account, &s.0.public_key());
                    leaf_as(2, 9, Some(mls::LeafProof { identity_key: other_account.public_key(), certificate, created_at: None }), s)
                }),
                Untrusted::IdentityChanged,
            ),
        ];
        assert_ne!(bob_identity, other_account.public_key());
        for (what, commit, why) in forgeries {
            for member in [&alice, &bob] {
                let before = epoch(&member.conn, &gid).unwrap();
                let e = receive(&member.conn, &gid, &commit).expect_err(what);
                assert_eq!(refusal(e).why, why, "{what}");
                assert_eq!(epoch(&member.conn, &gid).unwrap(), before, "{what}: not merged");
            }
        }
        // The honest group goes on.
        let (hi, _) = encrypt(&alice.conn, &gid, b"still us").expect("encrypt");
        assert!(matches!(receive(&bob.conn, &gid, &hi).expect("bob reads"), Received::Application { .. }));
    }

    /// An external commit may remove only the joiner's own earlier leaf. Carol's device key,
    /// rejoining under another device id of hers (a certificate her account did sign), makes
    /// openmls remove her old leaf, device 2: another device than the joiner's. Every member
    /// refuses it and merges nothing; her real rejoin, as device 2, goes through.
    #[test]
    fn an_external_commit_that_removes_another_leaf_is_refused_by_every_member() {
        let alice = device(1, 1);
        let carol = device(4, 2);
        let gid = new_group_id();
        let info = create(&alice.conn, &gid).expect("create");
        let (_, joined) = join_external(&carol.conn, &info).expect("carol joins");
        assert!(matches!(receive(&alice.conn, &gid, &joined.message).expect("alice"), Received::Commit { .. }));
        let carol_key = crate::e2e::device_key(&carol.conn).expect("carol's key");
        let signer = DeviceSigner(carol_key.clone());
        let certificate = crate::crypto::identity::sign_device_certificate(&carol.account, &carol_key.public_key());
        let proof = mls::LeafProof { identity_key: carol.account.public_key(), certificate, created_at: None };
        let forged = super::forge::external_commit_as(&joined.group_info, &signer, leaf_as(4, 3, Some(proof), &signer));
        let before = epoch(&alice.conn, &gid).unwrap();
        let e = receive(&alice.conn, &gid, &forged).expect_err("removes device 2 of user 4");
        assert_eq!(refusal(e), LeafRefusal { user_id: 4, device_id: 3, why: Untrusted::RemovesAnother { user_id: 4, device_id: 2 } });
        assert_eq!(epoch(&alice.conn, &gid).unwrap(), before, "not merged");

        // Her own rejoin as the same device removes her earlier leaf and is accepted.
        let (_, rejoined) = join_external(&carol.conn, &joined.group_info).expect("carol rejoins");
        match receive(&alice.conn, &gid, &rejoined.message).expect("a rejoin") {
            Received::Commit { added, removed, .. } => assert!(added.is_empty() && removed.is_empty(), "a rejoin: {added:?} {removed:?}"),
            other => panic!("expected a commit, got {other:?}"),
        }
    }

    fn rejoin_refusal(e: E2eError) -> String {
        match e {
            E2eError::RejoinRefused { why, .. } => why,
            other => panic!("expected a refused rejoin, got {other:?}"),
        }
    }

    /// Issue 45, part 2: the platform serves Bob, who must rejoin, a tree of its own making:
    /// the same group id, a leaf vouched for by a real account (Mallory's), signed by it. No
    /// leaf of the tree Bob verified signed it: refused before anything is touched, and Bob
    /// keeps his state and reads Alice's next message.
    #[test]
    fn a_group_info_signed_by_a_leaf_outside_the_verified_tree_is_refused_and_the_state_kept() {
        let (alice, bob, gid) = alice_and_bob();
        let mallory = device(9, 1);
        let theirs = create(&mallory.conn, &gid).expect("the platform's own tree");
        let before = epoch(&bob.conn, &gid).unwrap();
        let why = rejoin_refusal(join_external(&bob.conn, &theirs).expect_err("refused"));
        assert!(why.contains("signed by none of the 2 leaves"), "{why}");
        assert_eq!(epoch(&bob.conn, &gid).unwrap(), before, "the verified state is kept");
        let (hi, _) = encrypt(&alice.conn, &gid, b"still us").expect("encrypt");
        assert!(matches!(receive(&bob.conn, &gid, &hi).expect("bob reads"), Received::Application { .. }));
    }

    /// A GroupInfo of an epoch older than the verified state's, though signed by Alice, is
    /// refused: the platform serves no older tree again.
    #[test]
    fn a_group_info_older_than_the_verified_state_is_refused() {
        let (alice, bob, gid) = alice_and_bob();
        let old = mls::to_bytes(&stored_group(&alice.conn, &gid).export_group_info(
            MlsProvider::new(&alice.conn).crypto(),
            &signer(&alice.conn).unwrap(),
            true,
        ).unwrap()).unwrap();
        let update = self_update(&alice.conn, &gid).expect("update");
        send_commit(&alice, &gid, &update, &[&bob]);
        let why = rejoin_refusal(join_external(&bob.conn, &old).expect_err("refused"));
        assert!(why.contains("epoch 1 is older than the verified state's 2"), "{why}");
        assert_eq!(epoch(&bob.conn, &gid).unwrap(), Some(2));
    }

    /// An honest rejoin: Bob missed Alice's commit adding Carol. He rejoins from the GroupInfo
    /// Alice signed; Carol is his rejoin's newcomer. The platform refuses that rejoin (the
    /// merged join is forgotten): the tree Bob verified is still the reference, so the
    /// platform's own tree is refused at the next try, and an accepted join settles it.
    #[test]
    fn a_rejoin_names_its_newcomers_and_a_refused_one_keeps_the_verified_tree() {
        let (alice, bob, gid) = alice_and_bob();
        let carol = device(3, 1);
        let kps = key_packages(&carol.conn, 1).expect("key package");
        let add_carol = add(&alice.conn, &gid, &Claimed::of(3, 1, &kps)).expect("add");
        commit_accepted(&alice.conn, &gid).expect("merge");
        let (_, out) = join_external(&bob.conn, &add_carol.group_info).expect("rejoin");
        assert!(out.rejoined);
        assert_eq!(out.newcomers, vec![(3, 1)]);

        // Refused by the platform: the join is forgotten, the verified tree stays.
        forget(&bob.conn, &gid).expect("forget");
        let mallory = device(9, 1);
        let theirs = create(&mallory.conn, &gid).expect("the platform's own tree");
        rejoin_refusal(join_external(&bob.conn, &theirs).expect_err("still checked"));
        let (_, out) = join_external(&bob.conn, &add_carol.group_info).expect("rejoin again");
        assert_eq!((out.rejoined, out.newcomers), (true, vec![(3, 1)]));
        join_accepted(&bob.conn, &gid).expect("accepted");
        let kept: i64 = bob.conn.query_row("SELECT COUNT(*) FROM e2e_verified_trees", [], |r| r.get(0)).unwrap();
        assert_eq!(kept, 0, "settled: the state is the reference again");
        // A first join reports every other member.
        let dave = device(4, 1);
        let (_, first) = join_external(&dave.conn, &add_carol.group_info).expect("first join");
        assert!(!first.rejoined);
        assert_eq!(first.newcomers.iter().map(|d| d.0).collect::<Vec<_>>(), vec![1, 2, 3]);
    }

    /// Issue 45, part 4: a new leaf of this device's own user (a "device of the bot" the
    /// platform made up) must carry a certificate of this device's own account; one certified
    /// by any other key is refused by this device, and by every other member, who pinned the
    /// account's key.
    #[test]
    fn a_leaf_of_my_own_user_my_account_did_not_certify_is_refused() {
        let (alice, bob, gid) = alice_and_bob();
        let update = self_update(&alice.conn, &gid).expect("update");
        send_commit(&alice, &gid, &update, &[&bob]);
        let other = crate::crypto::IdentityKeyPair::generate();
        let forged = forged_join(&update.group_info, |s| {
            let certificate = crate::crypto::identity::sign_device_certificate(&other, &s.0.public_key());
            leaf_as(1, 9, Some(mls::LeafProof { identity_key: other.public_key(), certificate, created_at: None }), s)
        });
        for member in [&alice, &bob] {
            let e = receive(&member.conn, &gid, &forged).expect_err("refused");
            assert_eq!(refusal(e).user_id, 1);
            assert_eq!(epoch(&member.conn, &gid).unwrap(), Some(2), "not merged");
        }
    }

    #[test]
    fn only_the_joiners_own_earlier_leaf_may_go() {
        let proof = |k: u8| Some(mls::LeafProof { identity_key: [k; 32], certificate: [0; 64], created_at: None });
        let leaf = |user_id, device_id, p| mls::LeafIdentity { user_id, device_id, proof: p };
        assert!(is_earlier_leaf_of(&leaf(4, 2, proof(1)), &leaf(4, 2, proof(1))));
        assert!(is_earlier_leaf_of(&leaf(4, 2, None), &leaf(4, 2, proof(1))), "a leaf from before proofs");
        assert!(!is_earlier_leaf_of(&leaf(1, 1, proof(1)), &leaf(4, 2, proof(1))), "another member");
        assert!(!is_earlier_leaf_of(&leaf(4, 3, proof(1)), &leaf(4, 2, proof(1))), "another device of the user");
        assert!(!is_earlier_leaf_of(&leaf(4, 2, proof(1)), &leaf(4, 2, proof(2))), "another identity key");
    }

    /// A device its account removed (a signed removal this member checked) is never a leaf
    /// again, whatever the platform hands out: not under its id, not its key under another.
    #[test]
    fn a_leaf_of_a_device_its_account_removed_is_refused() {
        let alice = device(1, 1);
        let carol = device(4, 2);
        let gid = new_group_id();
        create(&alice.conn, &gid).expect("create");
        let carols = key_packages(&carol.conn, 2).expect("kps");
        let key = crate::e2e::device_key(&carol.conn).expect("carol's key").public_key();
        let removal = crate::e2e::removals::signed_removal(&carol.account, 4, 2, &key, 77);
        let recorded = crate::e2e::removals::record_removals(&alice.conn, 4, &carol.account.public_key(), &[removal]).expect("record");
        assert_eq!(recorded, vec![2]);
        let e = add(&alice.conn, &gid, &Claimed::of(4, 2, &carols[..1])).expect_err("a removed device");
        assert_eq!(refusal(e), LeafRefusal { user_id: 4, device_id: 2, why: Untrusted::Removed });
    }

    #[test]
    fn a_tree_with_a_leaf_nobody_vouches_for_is_not_joined() {
        // The platform serves a GroupInfo of a group it made, with a leaf of its own.
        let info = super::forge::unvouched_group_info(&new_group_id());
        let bot = device(3, 7);
        let e = join_external(&bot.conn, &info).expect_err("an untrusted tree");
        assert_eq!(refusal(e), LeafRefusal { user_id: 1, device_id: 5, why: Untrusted::NoProof });
    }

    #[test]
    fn a_claimed_key_package_must_be_trusted_and_name_the_device_asked_for() {
        let alice = device(1, 1);
        let bob = device(2, 1);
        let carol = device(4, 2);
        let gid = new_group_id();
        create(&alice.conn, &gid).expect("create");
        let carols = key_packages(&carol.conn, 1).expect("kps");
        // Handed out as bob's: refused, naming what it is.
        let e = add(&alice.conn, &gid, &Claimed::of(2, 1, &carols)).expect_err("another device's package");
        assert_eq!(refusal(e), LeafRefusal { user_id: 4, device_id: 2, why: Untrusted::NotRequested { user_id: 2, device_id: 1 } });
        // A package of bob's device whose proof is another account's: refused.
        let bobs = key_packages(&bob.conn, 1).expect("kps");
        pin(&alice, 2, [9; 32]);
        let e = add(&alice.conn, &gid, &Claimed::of(2, 1, &bobs)).expect_err("another identity");
        assert_eq!(refusal(e).why, Untrusted::IdentityChanged);
        // The right package of the right device.
        alice.conn.execute("DELETE FROM e2e_identity_pins WHERE user_id = 2", []).expect("unpin");
        let out = add(&alice.conn, &gid, &Claimed::of(2, 1, &bobs)).expect("add bob");
        assert!(!out.welcome.is_empty());
        assert_eq!(pinned_identity(&alice.conn, 2).unwrap(), Some(bob.account.public_key()), "pinned on first use");
    }

    fn pin(d: &TestDevice, user: u64, key: [u8; 32]) {
        d.conn
            .execute("INSERT INTO e2e_identity_pins (user_id, identity_key, pinned_at) VALUES (?1, ?2, 0)", rusqlite::params![user as i64, key.to_vec()])
            .expect("pin");
    }

    #[test]
    fn an_application_message_delivered_twice_is_read_once() {
        let alice = device(1, 1);
        let bob = device(2, 1);
        let gid = new_group_id();
        let info = create(&alice.conn, &gid).expect("create");
        let (_, joined) = join_external(&bob.conn, &info).expect("join");
        receive(&alice.conn, &gid, &joined.message).expect("alice");
        let (hi, _) = encrypt(&alice.conn, &gid, b"once").expect("encrypt");
        assert!(matches!(receive(&bob.conn, &gid, &hi).expect("first"), Received::Application { .. }));
        assert!(receive(&bob.conn, &gid, &hi).is_err(), "the same ciphertext again is refused (its key is used up)");
    }

    #[test]
    fn key_packages_are_topped_up_when_few_and_renewed_when_half_their_lifetime_passed() {
        let day = 86_400;
        assert_eq!(key_packages_due(20, None, 100 * day, 10, 20), (20, true), "an unknown age counts as old");
        assert_eq!(key_packages_due(20, Some(0), 41 * day, 10, 20), (0, false));
        assert_eq!(key_packages_due(4, Some(0), 41 * day, 10, 20), (16, false));
        assert_eq!(key_packages_due(20, Some(0), 42 * day, 10, 20), (20, true), "half of 84 days");
        // Made under a clock a year ahead, now set back: their lifetimes start in the future
        // (the platform refuses them), so the batch is replaced now.
        assert_eq!(key_packages_due(20, Some(365 * day), day, 10, 20), (20, true), "dated ahead of the clock");
        assert_eq!(key_packages_due(20, Some(day + 60), day, 10, 20), (0, false), "a minute ahead is only recent");
    }

    /// The encryption key of a device's leaf in `viewer`'s tree: it changes when that device
    /// updates its leaf.
    fn leaf_key(viewer: &TestDevice, gid: &[u8], of: Device) -> Vec<u8> {
        let group = stored_group(&viewer.conn, gid);
        let member = group.members().find(|m| mls::device_of(&m.credential) == Some(of)).expect("a leaf of the device");
        member.encryption_key
    }

    #[test]
    fn expired_lifetimes_break_no_join_and_self_updates_replace_the_leaf() {
        let alice = device(1, 1);
        let bob = device(2, 1);
        let bot = device(3, 7);
        let gid = new_group_id();
        // Alice's first leaf and Bob's key package last two seconds; Alice's add commit has no
        // path, so both leaves keep those lifetimes.
        create_lasting(&alice.conn, &gid, 2).expect("create");
        let kps = key_packages_lasting(&bob.conn, 1, 2).expect("key package");
        let add_bob = add(&alice.conn, &gid, &Claimed::of(2, 1, &kps)).expect("add while the key package is valid");
        commit_accepted(&alice.conn, &gid).expect("merge");
        std::thread::sleep(std::time::Duration::from_secs(3));

        // Every lifetime in the tree has passed: a Welcome join and an external join still work.
        assert_eq!(join_welcome(&bob.conn, &add_bob.welcome).expect("Welcome join after expiry"), gid.to_vec());
        let (_, joined) = join_external(&bot.conn, &add_bob.group_info).expect("external join after expiry");
        for member in [&alice, &bob] {
            assert!(matches!(receive(&member.conn, &gid, &joined.message).expect("join"), Received::Commit { .. }));
        }
        let (hi, _) = encrypt(&bob.conn, &gid, b"still here").expect("encrypt");
        for member in [&alice, &bot] {
            assert!(matches!(receive(&member.conn, &gid, &hi).expect("decrypt"), Received::Application { .. }));
        }

        // Bob replaces his leaf: a commit with a path that everyone merges.
        let before = leaf_key(&alice, &gid, (2, 1));
        let update = self_update(&bob.conn, &gid).expect("self-update");
        assert!(update.welcome.is_empty() && !update.group_info.is_empty());
        let seen = send_commit(&bob, &gid, &update, &[&alice, &bot]);
        assert!(seen.iter().all(|r| matches!(r, Received::Commit { added, removed, .. } if added.is_empty() && removed.is_empty())));
        assert_ne!(leaf_key(&alice, &gid, (2, 1)), before, "Bob's leaf has new keys");
        assert_eq!(leaf_key(&bot, &gid, (2, 1)), leaf_key(&bob, &gid, (2, 1)));
        let (after, _) = encrypt(&alice.conn, &gid, b"after the update").expect("encrypt");
        for member in [&bob, &bot] {
            assert!(matches!(receive(&member.conn, &gid, &after).expect("decrypt"), Received::Application { .. }));
        }
    }

    #[test]
    fn past_epoch_secrets_are_gone_once_our_commit_is_behind_us() {
        let alice = device(1, 1);
        let bob = device(2, 1);
        let gid = new_group_id();
        create(&alice.conn, &gid).expect("create");
        let add_bob = add(&alice.conn, &gid, &Claimed::of(2, 1, &key_packages(&bob.conn, 1).expect("kp"))).expect("add");
        commit_accepted(&alice.conn, &gid).expect("merge");
        join_welcome(&bob.conn, &add_bob.welcome).expect("welcome");

        // Bob's messages of epoch 1 were accepted before Alice's commit, which she merged on
        // the platform's OK, ahead of reading them: the past epoch opens them.
        let (early, _) = encrypt(&bob.conn, &gid, b"sent before the commit").expect("encrypt");
        let (held_back, _) = encrypt(&bob.conn, &gid, b"also of epoch 1").expect("encrypt");
        self_update(&alice.conn, &gid).expect("self-update");
        commit_accepted(&alice.conn, &gid).expect("merge");
        assert_eq!(epoch(&alice.conn, &gid).unwrap(), Some(2));
        assert!(matches!(receive(&alice.conn, &gid, &early).expect("past epoch"), Received::Application { .. }));

        // Her inbox passed her commit: epoch 1 is deleted, and what is left of it no longer opens.
        delete_past_epochs(&alice.conn, &gid).expect("delete");
        assert!(receive(&alice.conn, &gid, &held_back).is_err(), "a message of the deleted epoch must not open");
        delete_past_epochs(&alice.conn, &gid).expect("deleting twice is harmless");
        delete_past_epochs(&alice.conn, &[9; 32]).expect("a group we are not in: nothing to do");
    }
}
