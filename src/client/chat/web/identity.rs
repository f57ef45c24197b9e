//! The page's "who is this" panel: the open dialog's peer as this profile knows them (the Bot
//! ID and its short form, or the safety number; whether the person checked it; a key or name
//! the platform changed), and the two things a person does with it: mark it verified, or
//! accept a changed key (`trust`). The same steps as `e2e-chat verify --mark` and `trust`.
//! For a group: its members as the platform lists them, each with the devices that hold a leaf
//! in this device's tree, which are the devices a message to the group is encrypted for.

use serde_json::{json, Value};

use super::super::super::identity::PeerIdentity;
use super::super::super::message::{role_name, GroupId};
use super::super::super::tui::view::ChatKey;
use super::super::{about_peer, lock};
use super::answer::{json_response, text};
use super::input::Input;
use crate::http::Response;
use crate::wire::platform::{GroupRole, GroupType};

/// `GET /api/identity`: the open dialog's peer, or the open group's members.
pub fn show(input: &Input) -> Response {
    let group = lock(&input.target).group.clone();
    if let Some((id, title)) = group {
        return group_members(input, &id, &title);
    }
    let Some(name) = open_peer(input) else {
        return text(409, "Conflict: no conversation is open");
    };
    match input.typist.peer_identity(&name) {
        Ok(id) => json_response(200, &identity_json(&id)),
        Err(e) => text(502, &format!("Bad Gateway: {e}")),
    }
}

/// `POST /api/identity {"action": "verify" | "trust"}`.
pub fn act(input: &Input, body: &Value) -> Response {
    let Some(name) = open_peer(input) else {
        return text(409, "Conflict: a group has no identity to verify; open a dialog");
    };
    let done = match body["action"].as_str() {
        Some("verify") => input.typist.peer_identity(&name).and_then(|mut id| {
            if id.changed_to.is_some() || id.name_was.is_some() {
                return Ok(Err(format!(
                    "the platform serves another key or account for @{} than the one this profile met: compare it, then trust it",
                    id.username
                )));
            }
            id.verified_at = Some(input.typist.mark_verified(&id)?);
            Ok(Ok(id))
        }),
        Some("trust") => input.typist.trust(&name).map(Ok),
        _ => return text(400, "Bad Request: action must be \"verify\" or \"trust\""),
    };
    match done {
        Ok(Ok(id)) => {
            // The header's words change with it.
            if let Ok(p) = input.typist.lookup(&name) {
                input.screen.open(ChatKey::User(p.user_id), &format!("@{}", p.username), &about_peer(&input.typist, &p));
            }
            json_response(200, &identity_json(&id))
        }
        Ok(Err(refused)) => text(409, &format!("Conflict: {refused}")),
        Err(e) => text(502, &format!("Bad Gateway: {e}")),
    }
}

fn group_members(input: &Input, id: &GroupId, title: &str) -> Response {
    let details = match input.typist.group_members(id) {
        Ok(details) => details,
        Err(e) => return text(502, &format!("Bad Gateway: the members of {title} cannot be listed: {e}")),
    };
    let leaves = match input.typist.group_devices(id) {
        Ok(leaves) => leaves,
        Err(e) => return text(500, &format!("Internal Server Error: the tree of {title} cannot be read: {e}")),
    };
    let members: Vec<Value> = details
        .members
        .iter()
        .filter(|m| !matches!(m.role, GroupRole::LEFT | GroupRole::BANNED))
        .map(|m| {
            json!({
                "username": m.user.username,
                "user_id": m.user.user_id,
                "is_bot": m.user.is_bot,
                "role": role_name(m.role),
                "devices": leaves.iter().filter(|(user, _)| *user == m.user.user_id).count(),
            })
        })
        .collect();
    json_response(200, &json!({ "group": true, "title": title, "channel": details.kind == GroupType::CHANNEL, "members": members }))
}

fn open_peer(input: &Input) -> Option<String> {
    let target = lock(&input.target);
    match target.group {
        Some(_) => None,
        None => target.peer.as_ref().map(|p| format!("@{}", p.username)),
    }
}

fn identity_json(id: &PeerIdentity) -> Value {
    json!({
        "username": id.username,
        "user_id": id.user_id,
        "is_bot": id.is_bot,
        "key": id.pinned_hex(),
        "readable": id.readable,
        "verified_at": id.verified_at,
        "changed_to": id.changed_to.map(|k| crate::crypto::hex_encode(&k)),
        "name_was": id.name_was,
    })
}
