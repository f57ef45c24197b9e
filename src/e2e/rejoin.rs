//! A rejoin joins only the group this device was in. A device that holds a verified state of a
//! group and joins it again by external commit (it could not process a commit, or the platform
//! refused its last try) accepts the GroupInfo the platform serves only when
//! - it is signed by a leaf of the last verified tree, under the signature key that tree holds
//!   (a tree the platform built itself, with the real members' key packages and one leaf of its
//!   own, is signed by no one this device knew), and
//! - its epoch is not lower than that tree's (no older state served again).
//!
//! Users in the new tree that the verified one did not hold are the rejoin's newcomers: the
//! caller reports them unless the platform announces them.
//!
//! The reference is the stored openmls state while there is one. A rejoin replaces that state,
//! so just before, the tree is kept in `e2e_verified_trees`: a rejoin the platform then refuses
//! (the merged join is forgotten) is checked against the same tree at the next try, never
//! against nothing. An accepted join, or a Welcome, drops the kept tree (`settled`).

use openmls::messages::group_info::VerifiableGroupInfo;
use openmls::prelude::*;
use rusqlite::{params, Connection, OptionalExtension};

use super::{E2eError, Result};
use crate::crypto::mls;

/// A device named by a leaf: (user id, device id), as `group::Device`.
pub type Device = (u64, u32);

/// The table of this module (a step of each database holding `e2e` tables).
pub const TABLES: &str = "
    CREATE TABLE e2e_verified_trees (
        group_id BLOB PRIMARY KEY,
        epoch    INTEGER NOT NULL,
        leaves   BLOB NOT NULL
    );";

/// A leaf of a verified tree: its device and signature key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leaf {
    pub device: Device,
    pub signature_key: Vec<u8>,
}

/// The last tree this device verified of a group, and its epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    pub epoch: u64,
    pub leaves: Vec<Leaf>,
}

impl Tree {
    /// The tree of a group state this device holds.
    pub fn of(group: &MlsGroup) -> Tree {
        let leaves = group
            .members()
            .filter_map(|m| Some(Leaf { device: mls::device_of(&m.credential)?, signature_key: m.signature_key }))
            .collect();
        Tree { epoch: group.epoch().as_u64(), leaves }
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.leaves.len() * 46);
        for l in &self.leaves {
            out.extend_from_slice(&l.device.0.to_be_bytes());
            out.extend_from_slice(&l.device.1.to_be_bytes());
            out.extend_from_slice(&(l.signature_key.len() as u16).to_be_bytes());
            out.extend_from_slice(&l.signature_key);
        }
        out
    }

    fn decode(epoch: u64, mut bytes: &[u8]) -> Option<Tree> {
        let mut leaves = Vec::new();
        while !bytes.is_empty() {
            let user = u64::from_be_bytes(bytes.get(..8)?.try_into().ok()?);
            let device = u32::from_be_bytes(bytes.get(8..12)?.try_into().ok()?);
            let len = u16::from_be_bytes(bytes.get(12..14)?.try_into().ok()?) as usize;
            let signature_key = bytes.get(14..14 + len)?.to_vec();
            leaves.push(Leaf { device: (user, device), signature_key });
            bytes = &bytes[14 + len..];
        }
        Some(Tree { epoch, leaves })
    }
}

/// The tree a join of `group_id` must be checked against: the state held (`current`, when it is
/// active), else the one kept at an earlier rejoin; `None` for a first join.
pub(super) fn reference(conn: &Connection, group_id: &[u8], current: Option<&MlsGroup>) -> Result<Option<Tree>> {
    let unreadable = || E2eError::Mls(format!("the verified tree kept of group {} is unreadable", hex_start(group_id)));
    if let Some(group) = current.filter(|g| g.is_active()) {
        return Ok(Some(Tree::of(group)));
    }
    let row = conn
        .prepare_cached("SELECT epoch, leaves FROM e2e_verified_trees WHERE group_id = ?1")?
        .query_row([group_id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?)))
        .optional()?;
    match row {
        None => Ok(None),
        Some((epoch, leaves)) => Tree::decode(epoch as u64, &leaves)
            .map(Some)
            .ok_or_else(unreadable),
    }
}

/// Keeps `tree` as the reference of the group's next rejoins (until `settled`).
pub(super) fn keep(conn: &Connection, group_id: &[u8], tree: &Tree) -> Result<()> {
    conn.prepare_cached("INSERT OR REPLACE INTO e2e_verified_trees (group_id, epoch, leaves) VALUES (?1, ?2, ?3)")?
        .execute(params![group_id, tree.epoch as i64, tree.encode()])?;
    Ok(())
}

/// A join of the group was accepted (or came by Welcome): its state is the reference again.
pub fn settled(conn: &Connection, group_id: &[u8]) -> Result<()> {
    conn.prepare_cached("DELETE FROM e2e_verified_trees WHERE group_id = ?1")?.execute([group_id])?;
    Ok(())
}

/// Checks a served GroupInfo against the last verified tree; returns the device that signed it.
pub(super) fn check(crypto: &impl OpenMlsCrypto, group_id: &[u8], info: &VerifiableGroupInfo, tree: &Tree) -> Result<Device> {
    let refused = |why: String| E2eError::RejoinRefused { group: hex_start(group_id), why };
    let signer = tree.leaves.iter().find(|l| {
        let key = OpenMlsSignaturePublicKey::from_signature_key(l.signature_key.clone().into(), SignatureScheme::ED25519);
        info.verify_no_out(crypto, &key).is_ok()
    });
    let Some(signer) = signer else {
        let leaves = tree.leaves.len();
        return Err(refused(format!("it is signed by none of the {leaves} leaves of the verified tree (epoch {})", tree.epoch)));
    };
    let epoch = info.epoch().as_u64();
    if epoch < tree.epoch {
        return Err(refused(format!("its epoch {epoch} is older than the verified state's {}", tree.epoch)));
    }
    Ok(signer.device)
}

/// The devices of users in `members` whom the verified tree did not hold (`own`, this device's
/// signature key, left out).
pub(super) fn newcomers(tree: &Tree, members: impl Iterator<Item = Member>, own: &[u8]) -> Vec<Device> {
    // A set, not a scan per member: a tree of thousands.
    let known: std::collections::HashSet<u64> = tree.leaves.iter().map(|l| l.device.0).collect();
    members
        .filter(|m| m.signature_key != own)
        .filter_map(|m| mls::device_of(&m.credential))
        .filter(|d| !known.contains(&d.0))
        .collect()
}

/// A group's name in logs and errors: its first 8 bytes in hex (`group::short_id`).
pub(super) fn hex_start(group_id: &[u8]) -> String {
    crate::crypto::hex_encode(&group_id[..group_id.len().min(8)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_tree_reads_back_as_written() {
        let tree = Tree {
            epoch: 7,
            leaves: vec![
                Leaf { device: (1, 1), signature_key: vec![1; 32] },
                Leaf { device: (u64::MAX, u32::MAX), signature_key: vec![2; 32] },
            ],
        };
        assert_eq!(Tree::decode(7, &tree.encode()), Some(tree));
        assert_eq!(Tree::decode(1, &[0; 13]), None, "a cut record is unreadable, not a shorter tree");
    }
}
