//! Which update kinds a bot gets (`allowed_updates`): the list checked, the default, the
//! filter applied when an update is created; and reading the queue in order.

use rusqlite::Connection;
use serde_json::Value;

use crate::gateway::botapi::types::{
    self,
    UPDATE_KINDS,
};
use crate::gateway::store::{queue, Result as StoreResult};
use crate::wire::Invalid;


/// Every update type of the Bot API as of this release, for the documentation and the tests;
/// only [`UPDATE_KINDS`] are ever produced.
pub const BOT_API_KINDS: &[&str] = &[
    "message", "edited_message", "channel_post", "edited_channel_post", "business_connection",
    "business_message", "edited_business_message", "deleted_business_messages", "message_reaction",
    "message_reaction_count", "inline_query", "chosen_inline_result", "callback_query", "shipping_query",
    "pre_checkout_query", "purchased_paid_media", "poll", "poll_answer", "my_chat_member", "chat_member",
    "chat_join_request", "chat_boost", "removed_chat_boost",
];

/// Most names an `allowed_updates` list may hold, and the longest name.
pub(super) const MAX_ALLOWED_NAMES: usize = 100;

pub(super) const MAX_KIND_NAME: usize = 64;

/// Checks an `allowed_updates` list. Any name is accepted, as the reference server does:
/// SDKs send their whole list of update types (python-telegram-bot 22.8's `Update.ALL_TYPES`
/// has `managed_bot` and `guest_message`, newer than this gateway), and a refusal would stop
/// such a bot at its first poll. Only the kinds this gateway produces are ever delivered. A
/// list only refuses what no SDK sends: more than 100 names, or an empty or overlong one.
pub fn validate_kinds(list: &[String]) -> Result<(), Invalid> {
    if list.len() > MAX_ALLOWED_NAMES {
        return Err(Invalid::new(format!("allowed_updates may name at most {MAX_ALLOWED_NAMES} update types, got {}", list.len())));
    }
    match list.iter().find(|k| k.is_empty() || k.len() > MAX_KIND_NAME) {
        Some(k) => Err(Invalid::new(format!("allowed_updates names must be 1 to {MAX_KIND_NAME} bytes, got {} bytes", k.len()))),
        None => Ok(()),
    }
}

/// The default set: everything except `message_reaction`, which must be asked for. The
/// administrative kinds (`chat_member`, `chat_join_request`) are in it, as SPEC "Filtering"
/// says (the reference Bot API leaves `chat_member` out; docs/decisions.md).
pub fn default_kinds() -> Vec<String> {
    UPDATE_KINDS.iter().filter(|k| **k != "message_reaction").map(|k| k.to_string()).collect()
}

/// The kinds in force: the stored filter, or the default set when none (or `[]`) was given.
pub fn effective_kinds(stored: Option<&[String]>) -> Vec<String> {
    match stored {
        Some(k) if !k.is_empty() => k.to_vec(),
        _ => default_kinds(),
    }
}

/// Whether a new update of `kind` goes into the queue under the stored filter. The filter is
/// applied here, when an update is created, and nowhere else: whatever is queued is served
/// until acknowledged.
pub fn admits(conn: &Connection, kind: &str) -> StoreResult<bool> {
    let kinds = effective_kinds(queue::stored_allowed_updates(conn)?.as_deref());
    Ok(kinds.iter().any(|k| k == kind))
}

/// Up to `limit` queued updates from `offset` on, as Update objects.
pub fn fetch(conn: &Connection, offset: Option<i64>, limit: u32) -> StoreResult<Vec<Value>> {
    Ok(queue::fetch(conn, offset, limit)?.into_iter().map(|u| types::update_json(u.update_id, &u.kind, u.payload)).collect())
}

/// Up to `limit` queued updates from `offset` on (the webhook's next run), each with its id.
pub fn run_from(conn: &Connection, offset: i64, limit: u32) -> StoreResult<Vec<(i64, Value)>> {
    Ok(queue::fetch(conn, Some(offset), limit)?
        .into_iter()
        .map(|u| (u.update_id, types::update_json(u.update_id, &u.kind, u.payload)))
        .collect())
}
