//! The rules of group roles that every side reads the same way.

use super::platform::{GroupMember, GroupRole};

/// Holds a seat in the group: may read, and (as the type allows) write. A change into a seat
/// is a join, out of one a departure (the Bot API's service messages).
pub fn is_seated(role: GroupRole) -> bool {
    matches!(role, GroupRole::OWNER | GroupRole::ADMINISTRATOR | GroupRole::MEMBER | GroupRole::RESTRICTED)
}

/// Who may post in a channel: its owner, and administrators with `can_post_messages`. The
/// platform refuses other posts; a bot checks its own right before sending, and receivers drop
/// a post from anyone else (a platform that let it through).
pub fn may_post_in_channel(member: &GroupMember) -> bool {
    match member.role.enum_value_or_default() {
        GroupRole::OWNER => true,
        GroupRole::ADMINISTRATOR => member.rights.can_post_messages,
        _ => false,
    }
}
