//! `verify` and `trust`: who a peer is, as this profile pinned them (`client::identity`).

use serde_json::json;

use crate::client::cli_common::{open_profile, ordered, print_line, usage, Global};
use crate::client::PeerIdentity;
use crate::cli::{Args, CliError};
use crate::crypto::hex_encode;

fn one_peer<'a>(command: &str, a: &'a Args) -> Result<&'a str, CliError> {
    match a.words[..] {
        [peer] => Ok(peer),
        [] => Err(usage(format!("{command}: @PEER missing"))),
        _ => Err(usage(format!("{command}: expected exactly one @PEER"))),
    }
}

/// The `verify` / `trust` line: who, the pinned key and what a person reads, whether it was
/// checked, and the platform's other key when it changed.
fn identity_line(id: &PeerIdentity) -> String {
    let mut fields = vec![("user", json!(id.username)), ("user_id", json!(id.user_id)), ("is_bot", json!(id.is_bot))];
    if id.is_bot {
        fields.push(("bot_id", json!(id.pinned_hex())));
        fields.push(("short_form", json!(id.readable)));
    } else {
        fields.push(("identity_key", json!(id.pinned_hex())));
        fields.push(("safety_number", json!(id.readable)));
    }
    fields.push(("verified", json!(id.verified_at.is_some())));
    if let Some(at) = id.verified_at {
        fields.push(("verified_at", json!(at)));
    }
    if let Some(was) = id.name_was {
        fields.push(("name_was_user_id", json!(was)));
    }
    fields.push(("key_changed", json!(id.changed_to.is_some())));
    if let Some(new) = id.changed_to {
        fields.push(("served_key", json!(hex_encode(&new))));
    }
    ordered(&fields)
}

pub(super) fn verify(global: &Global, a: &Args) -> Result<(), CliError> {
    let peer = one_peer("verify", a)?;
    let profile = open_profile(global)?;
    let mut id = profile.peer_identity(peer)?;
    if a.switch("--mark") {
        if id.changed_to.is_some() || id.name_was.is_some() {
            return Err(CliError::Failed(format!(
                "verify --mark: the platform serves another account or key for @{} than the one this profile met; compare it first, then `e2e-chat trust @{}`",
                id.username, id.username
            )));
        }
        id.verified_at = Some(profile.mark_verified(&id)?);
    }
    if id.changed_to.is_some() {
        log::warn!("SECURITY WARNING: the platform serves another identity key for @{} than the pinned one", id.username);
    }
    if let Some(was) = id.name_was {
        log::warn!("SECURITY WARNING: the platform now says @{} is user {}, but this profile met the name as user {was}", id.username, id.user_id);
    }
    print_line(&identity_line(&id))
}

pub(super) fn trust(global: &Global, a: &Args) -> Result<(), CliError> {
    let peer = one_peer("trust", a)?;
    let profile = open_profile(global)?;
    let id = profile.trust(peer)?;
    print_line(&identity_line(&id))
}
