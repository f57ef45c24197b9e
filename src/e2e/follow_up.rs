//! What importing a delivery leaves to do once its transaction has committed: the network
//! calls and the timed checks it owes (network calls never run inside the import's write). The
//! gateway's import and e2e-chat's inbox return these values, and one driver on each side
//! runs them (`gateway::inbox::follow_up`, `client::group_delivery`'s `follow_up`).

use crate::wire::platform::GroupType;

/// One thing an imported delivery asks for after its commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FollowUp {
    /// This device was added to a group (invited, or its join request approved): join it by
    /// an external commit.
    Join(GroupRef),
    /// A commit of the group could not be processed: rejoin by external commit from the newest
    /// GroupInfo (replacing the old leaf), or this device stays behind for good.
    Rejoin(GroupRef),
    /// A Welcome used one of this device's key packages and it is in the group now: top the
    /// key packages up, replace its leaf at once, and learn who posts if it is a channel.
    Joined(GroupRef),
    /// These users left or were removed, and removing their leaves falls to this device:
    /// commit their removal.
    RemoveLeaves { group: Vec<u8>, users: Vec<u64> },
    /// A commit brought users into the tree whom the platform has not announced: they are
    /// reported at `due` (unix seconds) if it still has not.
    JoinersNoted { group: Vec<u8>, due: i64 },
    /// The platform said `user` left; if no one has removed their leaves by `due`, this device
    /// does.
    DepartedNoted { group: Vec<u8>, user: u64, due: i64 },
    /// A sender's numbering skipped messages: the ones still missing at `due` are reported as
    /// withheld (`e2e::sequence`).
    GapNoted { due: i64 },
    /// A peer started a session with one of this device's one-time prekeys: the stock on the
    /// platform shrank.
    SessionStarted,
}

/// The group a join asks for, as the delivery named it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupRef {
    pub id: Vec<u8>,
    pub title: String,
    pub kind: GroupType,
}

impl FollowUp {
    /// The time a timed check is due at (unix seconds), for the one that is.
    pub fn due(&self) -> Option<i64> {
        match self {
            FollowUp::JoinersNoted { due, .. } | FollowUp::DepartedNoted { due, .. } | FollowUp::GapNoted { due } => Some(*due),
            _ => None,
        }
    }
}
