//! Who a peer is: the account identity key this profile pinned for each user it met (trust on
//! first use, `e2e::leaf::pin_identity`), checked on every lookup so that a key the platform
//! changes stops the conversation loudly; `verify` shows what a person compares (a bot's Bot
//! ID and its short form, or a user's safety number); `--mark` records that they did; `trust`
//! accepts a changed key (docs/verify.md). Names are bound too: the account a name stood for
//! when this profile first looked it up is kept (`client_names`), and a lookup that answers
//! another account is refused until `trust`, so the platform cannot re-point a name.

use std::time::{Duration, Instant};

use rusqlite::{params, Connection, OptionalExtension};

use super::error::{ClientError, E2eContext, Result};
use super::profile::Profile;
use crate::clock::unix_now;
use crate::crypto::{fingerprint, hex_encode};
use crate::e2e::leaf::{self, Pin};
use crate::e2e::{self, OnIdentityChange, Refusal};
use crate::wire::platform::{InboxEnvelope, Profile as PeerProfile};
use crate::wire::rpc::code as rpc_code;

/// A peer's identity as this profile knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerIdentity {
    pub user_id: u64,
    pub username: String,
    pub is_bot: bool,
    /// The key pinned for them: what `verify` shows and what sessions are checked against.
    pub pinned_key: [u8; 32],
    /// The key the platform serves now, when it is not the pinned one.
    pub changed_to: Option<[u8; 32]>,
    /// When the person marked the pinned key as checked.
    pub verified_at: Option<i64>,
    /// The account the name stood for, when the platform now answers another one.
    pub name_was: Option<u64>,
    /// What a person compares: for a bot its Bot ID's short form, for a user the safety
    /// number of the two of them.
    pub readable: String,
}

impl PeerIdentity {
    /// The Bot ID (a bot's identity key in hex) or the user's identity key in hex.
    pub fn pinned_hex(&self) -> String {
        hex_encode(&self.pinned_key)
    }
}

fn served_key(p: &PeerProfile) -> Result<[u8; 32]> {
    p.identity_key
        .as_slice()
        .try_into()
        .map_err(|_| ClientError::Invalid(format!("the platform served no valid identity key for @{}", p.username)))
}

/// The refusal when the platform serves another key than the pinned one.
pub(super) fn changed_error(p: &PeerProfile) -> ClientError {
    ClientError::IdentityChanged { username: p.username.clone(), user_id: p.user_id }
}

/// How long a name this process looked up and checked is taken from memory (`lookup`): long
/// enough for a conversation, short enough that a chat left open sees a new display name or a
/// re-pointed name (the warning) within minutes. A new process always asks the platform.
pub(super) const CHECKED_NAME_TTL: Duration = Duration::from_secs(300);

/// A name as bindings keep it: lowercase (the platform's names are), without `@`.
fn name_key(name: &str) -> String {
    name.trim_start_matches('@').to_lowercase()
}

/// The account `name` stood for when this profile first looked it up.
fn bound_user(c: &Connection, name: &str) -> rusqlite::Result<Option<u64>> {
    c.query_row("SELECT user_id FROM client_names WHERE name = ?1", params![name_key(name)], |r| r.get::<_, i64>(0))
        .optional()
        .map(|id| id.map(|id| id as u64))
}

/// Binds `name` to `user_id`, in place of any account it stood for.
fn bind_name(c: &Connection, name: &str, user_id: u64) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO client_names (name, user_id, bound_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (name) DO UPDATE SET user_id = excluded.user_id, bound_at = excluded.bound_at",
        params![name_key(name), user_id as i64, unix_now()],
    )?;
    Ok(())
}

fn verified_at(c: &Connection, user_id: u64, key: &[u8; 32]) -> rusqlite::Result<Option<i64>> {
    c.query_row(
        "SELECT verified_at FROM client_verified WHERE user_id = ?1 AND identity_key = ?2",
        params![user_id as i64, key.to_vec()],
        |r| r.get(0),
    )
    .optional()
}

impl Profile {
    /// Before a private envelope is opened: when it starts a session from a device this profile
    /// has not recorded, the device's certificate is fetched (no one-time prekey is used up) and
    /// checked against its account's identity key, and that key against the pin
    /// (`e2e::record_certified_devices`). A device that fails is not recorded, so the open
    /// refuses its message; why is returned for the event. A changed identity key is `Err`: the
    /// envelope is then left unacknowledged, and shows once the person accepts the key (`trust`).
    pub(super) fn check_new_sender(&self, envelope: &InboxEnvelope) -> Result<Option<Refusal>> {
        let requests = e2e::devices_to_certify(&self.conn, std::slice::from_ref(envelope))
            .context(|| format!("reading the devices of user {}", envelope.sender_user_id))?;
        let Some(request) = requests.into_iter().next() else {
            return Ok(None);
        };
        let answer = match self.platform.client.get_device_certificates(&request, self.platform.opt()) {
            Ok(answer) => answer,
            Err(e) if rpc_code(&e) == Some(grpcio::RpcStatusCode::NOT_FOUND) => return Ok(Some(Refusal::NotServed)),
            Err(status) => return Err(ClientError::Rpc { call: "GetDeviceCertificates", status }),
        };
        let certified = self.write(|c| {
            e2e::record_certified_devices(c, &request, &answer, OnIdentityChange::Refuse)
                .context(|| format!("checking device {} of user {}", envelope.sender_device_id, envelope.sender_user_id))
        })?;
        match certified.refused.first() {
            Some((_, Refusal::IdentityChanged)) => Err(ClientError::IdentityChanged {
                username: envelope.sender_username.clone(),
                user_id: envelope.sender_user_id,
            }),
            Some((_, why)) => Ok(Some(*why)),
            None => Ok(None),
        }
    }

    /// The profile of `name` if this process looked it up and checked it less than
    /// `CHECKED_NAME_TTL` ago.
    pub(super) fn recently_checked(&self, name: &str) -> Option<PeerProfile> {
        let names = self.checked_names.borrow();
        names.get(&name_key(name)).filter(|(_, at)| at.elapsed() < CHECKED_NAME_TTL).map(|(p, _)| p.clone())
    }

    /// Remembers that `name` was looked up and checked just now, as `p`.
    pub(super) fn checked(&self, name: &str, p: &PeerProfile) {
        self.checked_names.borrow_mut().insert(name_key(name), (p.clone(), Instant::now()));
    }

    /// Checks that `name` still stands for the account it stood for when this profile first
    /// looked it up (binding it then: trust on first use, said in the log). Another account is
    /// `NameRebound`, whatever its keys.
    pub(super) fn check_name(&self, name: &str, p: &PeerProfile) -> Result<()> {
        let bound = bound_user(&self.conn, name)?;
        match bound {
            Some(was) if was == p.user_id => Ok(()),
            Some(was) => Err(ClientError::NameRebound { name: name_key(name), was, now: p.user_id }),
            None => {
                self.write(|c| Ok(bind_name(c, name, p.user_id)?))?;
                log::warn!(
                    "first contact with @{}: the name is bound to user {} from now on (trust on first use; `e2e-chat verify @{}` shows what to compare)",
                    name_key(name),
                    p.user_id,
                    name_key(name)
                );
                Ok(())
            }
        }
    }

    /// Checks a looked-up profile against the pinned key, pinning it the first time.
    pub(super) fn check_pinned(&self, p: &PeerProfile) -> Result<()> {
        let key = served_key(p)?;
        // Read first: a lookup of a peer met before writes nothing.
        let pinned = leaf::pinned_identity(&self.conn, p.user_id).context(|| format!("reading the pin of @{}", p.username))?;
        if pinned == Some(key) {
            return Ok(());
        }
        let pin = self.write(|c| leaf::pin_identity(c, p.user_id, &key).context(|| format!("pinning the identity of @{}", p.username)))?;
        match pin {
            Pin::Changed { .. } => Err(changed_error(p)),
            Pin::New | Pin::Same => Ok(()),
        }
    }

    /// The identity of `name` as this profile pins it (pinned now if it never met them), with
    /// the platform's current key when that differs.
    pub fn peer_identity(&self, name: &str) -> Result<PeerIdentity> {
        let p = self.lookup_unchecked(name)?;
        let name_was = match self.check_name(name, &p) {
            Err(ClientError::NameRebound { was, .. }) => Some(was),
            other => other.map(|()| None)?,
        };
        Ok(PeerIdentity { name_was, ..self.identity_of(p)? })
    }

    /// `peer_identity` of a profile already looked up.
    fn identity_of(&self, p: PeerProfile) -> Result<PeerIdentity> {
        let served = served_key(&p)?;
        let pin = self.write(|c| leaf::pin_identity(c, p.user_id, &served).context(|| format!("pinning the identity of @{}", p.username)))?;
        let (pinned_key, changed_to) = match pin {
            Pin::Changed { pinned } => (pinned, Some(served)),
            Pin::New | Pin::Same => (served, None),
        };
        let verified_at = verified_at(&self.conn, p.user_id, &pinned_key)?;
        let readable = if p.is_bot {
            fingerprint::readable(p.user_id, &pinned_key)
        } else {
            fingerprint::safety_number((self.user_id(), &self.identity_key()), (p.user_id, &pinned_key))
        };
        Ok(PeerIdentity { user_id: p.user_id, username: p.username, is_bot: p.is_bot, pinned_key, changed_to, verified_at, name_was: None, readable })
    }

    /// Records that the person checked `identity`'s pinned key (`verify --mark`).
    pub fn mark_verified(&self, identity: &PeerIdentity) -> Result<i64> {
        let now = unix_now();
        self.write(|c| {
            c.execute(
                "INSERT INTO client_verified (user_id, identity_key, verified_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (user_id) DO UPDATE SET identity_key = excluded.identity_key, verified_at = excluded.verified_at",
                params![identity.user_id as i64, identity.pinned_key.to_vec(), now],
            )?;
            Ok(now)
        })
    }

    /// Accepts the account the platform answers now for `name` and the key it serves for it,
    /// in place of the bound account and the pinned key (`trust`): sessions start again under
    /// it, and an earlier mark no longer counts.
    pub fn trust(&self, name: &str) -> Result<PeerIdentity> {
        self.checked_names.borrow_mut().clear();
        let p = self.lookup_unchecked(name)?;
        let served = served_key(&p)?;
        self.write(|c| {
            bind_name(c, name, p.user_id)?;
            leaf::repin_identity(c, p.user_id, &served).context(|| format!("pinning the identity of @{}", p.username))?;
            c.execute("DELETE FROM client_verified WHERE user_id = ?1", params![p.user_id as i64])?;
            Ok(())
        })?;
        self.identity_of(p)
    }

    /// Whether the person marked `user_id`'s pinned key as checked (chat mode shows it).
    pub fn is_verified(&self, user_id: u64) -> Result<bool> {
        let Some(pinned) = leaf::pinned_identity(&self.conn, user_id).context(|| format!("reading the pin of user {user_id}"))? else {
            return Ok(false);
        };
        Ok(verified_at(&self.conn, user_id, &pinned)?.is_some())
    }
}
