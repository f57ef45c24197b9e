//! The bot's groups over MLS (docs/groups.md): what `in/<n>` does with group deliveries, how
//! the bot joins a group it was added to, and how its own commits reach the platform. One
//! file per step: `import.rs`, `join.rs`, `joiners.rs`, `departed.rs`, `commit.rs`,
//! `self_update.rs`, `send.rs`.
//!
//! - **Import** (`import`, inside the inbox's writer job, like a private envelope): a role
//!   change becomes `my_chat_member` / `chat_member`, a title change a `new_chat_title`
//!   message, a join request `chat_join_request`, a deletion leaves the history; being added
//!   marks the group *invited*; a Welcome joins; an MLS message is processed by
//!   `e2e::group::receive` in the group's order, its text becoming a `message` update of the
//!   group's negative chat id (`channel_post` in a channel). MLS state, update and inbox
//!   cursor commit together.
//! - **Joining** (`join_invited`, on `in/<n>` when an import returns `FollowUp::Join` or
//!   `Rejoin`, at start, and when a failed join is due again): checks the
//!   bot's `groups` capability (a bot without it leaves at once, so the adding user sees a
//!   refusal), fetches the GroupInfo and joins by an external commit.
//! - **Our commits** (`commit`): made and recorded in one writer job with a client message id,
//!   then sent; a retry or a restart resends exactly the recorded commit, so a lost answer
//!   never leaves this device and the platform at different epochs. Accepted → merged;
//!   refused → discarded (an external join: the group is forgotten).
//! - **Self-updates** (`self_update_due`, after a Welcome join (`FollowUp::Joined`), when one
//!   left for later is due, and hourly):
//!   a commit replacing our own leaf right after a Welcome join and then every
//!   `group_self_update_days`.
//! - **Joiners** (`joiners`): a user a commit brings into the tree is noted until the
//!   platform's membership notice about them arrives; one it never announces becomes a
//!   `chat_member` update from the tree, a warning and a security alert.
//! - **Departed users** (`departed`): a user the platform says left or was banned is noted
//!   until their leaves are gone; the bot commits their removal before its next post (and
//!   posts nothing while the platform refuses it), or by itself once the platform has not
//!   asked for it within a minute.
//! - **Forward secrecy** (in `import`): once a delivery past our latest accepted commit
//!   arrives, the group's past epoch secrets are deleted and the writer checkpoints its log.
//! - **Sending** (`send`, on `out/<n>`): a group message is encrypted in the current epoch and
//!   committed before its first send; STALE_EPOCH means the inbox has commits to process
//!   first: the ciphertext is dropped (never resent for a stale epoch) and the message is
//!   encrypted again later; REMOVALS_PENDING makes this device commit those removals first.

mod commit;
mod departed;
mod import;
mod join;
mod joiners;
mod self_update;
mod send;

#[cfg(test)]
mod tests;

pub use commit::{commit_removals, settle_pending};
pub use departed::remove_overdue_departed;
pub use import::import;
pub use joiners::{report_unannounced_joiners, GRACE_SECS as JOINER_GRACE_SECS};
pub use join::{join_invited, keep_key_packages, keep_key_packages_at, know_channel_posters};
pub use self_update::self_update_due;
pub use send::{send, GroupSend};
