//! Bot API group objects: ChatMember (one variant per `status`), ChatMemberUpdated and the
//! ChatFullInfo of `getChat`, with every field PTB and aiogram require (SDK-COMPAT §6,
//! SDK-TYPES): an unknown `status` or a missing required field stops aiogram for good.

use serde_json::{json, Map, Value};

use super::types::{chat_json, user_json, ChatView, UserView};

/// What an administrator may do, as the platform records it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AdminRights {
    pub can_change_info: bool,
    pub can_delete_messages: bool,
    pub can_invite_users: bool,
    pub can_restrict_members: bool,
    pub can_promote_members: bool,
    pub can_post_messages: bool,
    pub can_manage_chat: bool,
}

/// A member's place in a chat: the Bot API's six statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberStatus {
    Owner,
    Administrator(AdminRights),
    Member,
    /// Restricted by an administrator: may not send messages.
    Restricted,
    Left,
    /// Removed by an administrator (`kicked`).
    Banned,
}

impl MemberStatus {
    /// The Bot API `status` value.
    pub fn name(self) -> &'static str {
        match self {
            MemberStatus::Owner => "creator",
            MemberStatus::Administrator(_) => "administrator",
            MemberStatus::Member => "member",
            MemberStatus::Restricted => "restricted",
            MemberStatus::Left => "left",
            MemberStatus::Banned => "kicked",
        }
    }

    /// True for statuses that count as being in the chat (getChatMemberCount).
    pub fn is_in_chat(self) -> bool {
        !matches!(self, MemberStatus::Left | MemberStatus::Banned)
    }
}

/// One ChatMember.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberView {
    pub user: UserView,
    pub status: MemberStatus,
}

/// ChatMember JSON of the member's variant.
pub fn chat_member_json(m: &MemberView) -> Value {
    let mut o = Map::new();
    o.insert("status".into(), json!(m.status.name()));
    o.insert("user".into(), user_json(&m.user));
    match m.status {
        MemberStatus::Owner => {
            o.insert("is_anonymous".into(), json!(false));
        }
        MemberStatus::Administrator(r) => {
            for (k, v) in [
                ("can_be_edited", false),
                ("is_anonymous", false),
                ("can_manage_chat", r.can_manage_chat),
                ("can_delete_messages", r.can_delete_messages),
                ("can_manage_video_chats", false),
                ("can_restrict_members", r.can_restrict_members),
                ("can_promote_members", r.can_promote_members),
                ("can_change_info", r.can_change_info),
                ("can_invite_users", r.can_invite_users),
                ("can_post_stories", false),
                ("can_edit_stories", false),
                ("can_delete_stories", false),
                ("can_post_messages", r.can_post_messages),
            ] {
                o.insert(k.into(), json!(v));
            }
        }
        MemberStatus::Restricted => {
            o.insert("is_member".into(), json!(true));
            for k in [
                "can_send_messages",
                "can_send_audios",
                "can_send_documents",
                "can_send_photos",
                "can_send_videos",
                "can_send_video_notes",
                "can_send_voice_notes",
                "can_send_polls",
                "can_send_other_messages",
                "can_add_web_page_previews",
                "can_change_info",
                "can_invite_users",
                "can_pin_messages",
                "can_manage_topics",
                "can_edit_tag",
                "can_react_to_messages",
            ] {
                o.insert(k.into(), json!(false));
            }
            o.insert("until_date".into(), json!(0));
        }
        MemberStatus::Banned => {
            o.insert("until_date".into(), json!(0));
        }
        MemberStatus::Member | MemberStatus::Left => {}
    }
    Value::Object(o)
}

/// ChatMemberUpdated JSON (`my_chat_member`, `chat_member`).
pub fn chat_member_updated_json(chat: &ChatView, from: &UserView, date: i64, old: &MemberView, new: &MemberView) -> Value {
    json!({
        "chat": chat_json(chat),
        "from": user_json(from),
        "date": date,
        "old_chat_member": chat_member_json(old),
        "new_chat_member": chat_member_json(new),
    })
}

/// ChatFullInfo JSON (`getChat`): the chat plus what both SDKs require of a full chat.
pub fn chat_full_info_json(chat: &ChatView) -> Value {
    let mut v = chat_json(chat);
    let o = v.as_object_mut().expect("chat_json is an object");
    o.insert("accent_color_id".into(), json!(0));
    o.insert("max_reaction_count".into(), json!(11));
    o.insert(
        "accepted_gift_types".into(),
        json!({
            "unlimited_gifts": false,
            "limited_gifts": false,
            "unique_gifts": false,
            "premium_subscription": false,
            "gifts_from_channels": false,
        }),
    );
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user() -> UserView {
        UserView { id: 5, is_bot: false, first_name: "Ann".into(), username: None }
    }

    #[test]
    fn every_status_has_its_variant_s_required_fields() {
        let required: &[(MemberStatus, &[&str])] = &[
            (MemberStatus::Owner, &["user", "is_anonymous"]),
            (
                MemberStatus::Administrator(AdminRights::default()),
                &[
                    "can_be_edited",
                    "is_anonymous",
                    "can_manage_chat",
                    "can_delete_messages",
                    "can_manage_video_chats",
                    "can_restrict_members",
                    "can_promote_members",
                    "can_change_info",
                    "can_invite_users",
                    "can_post_stories",
                    "can_edit_stories",
                    "can_delete_stories",
                ],
            ),
            (MemberStatus::Member, &["user"]),
            (MemberStatus::Restricted, &["is_member", "can_send_messages", "can_edit_tag", "can_react_to_messages", "until_date"]),
            (MemberStatus::Left, &["user"]),
            (MemberStatus::Banned, &["user", "until_date"]),
        ];
        let names: Vec<&str> = required.iter().map(|(s, _)| s.name()).collect();
        assert_eq!(names, ["creator", "administrator", "member", "restricted", "left", "kicked"]);
        for (status, fields) in required {
            let v = chat_member_json(&MemberView { user: user(), status: *status });
            for f in *fields {
                assert!(v.get(*f).is_some(), "{} lacks {f}: {v}", status.name());
            }
            assert_eq!(super::super::types::find_null(&v, "member"), None);
        }
    }

    #[test]
    fn full_info_carries_what_the_sdks_require() {
        let v = chat_full_info_json(&ChatView::Group { id: -7, title: "T".into() });
        for f in ["id", "type", "title", "accent_color_id", "max_reaction_count", "accepted_gift_types"] {
            assert!(v.get(f).is_some(), "{f}");
        }
        assert_eq!(v["accepted_gift_types"].as_object().unwrap().len(), 5);
    }
}
