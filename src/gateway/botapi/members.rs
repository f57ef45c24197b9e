//! Bot API group objects: ChatMember (one variant per `status`), ChatMemberUpdated, the
//! ChatFullInfo of `getChat`, ChatInviteLink and ChatJoinRequest, with every field PTB and
//! aiogram require (SDK-COMPAT §6, SDK-TYPES): an unknown `status` or a missing required field
//! stops aiogram for good.

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
    /// Restricted by an administrator: may not send messages until `until_date` (0 = forever).
    Restricted { until_date: i64 },
    Left,
    /// Removed by an administrator (`kicked`) until `until_date` (0 = forever).
    Banned { until_date: i64 },
}

impl MemberStatus {
    /// The Bot API `status` value.
    pub fn name(self) -> &'static str {
        match self {
            MemberStatus::Owner => "creator",
            MemberStatus::Administrator(_) => "administrator",
            MemberStatus::Member => "member",
            MemberStatus::Restricted { .. } => "restricted",
            MemberStatus::Left => "left",
            MemberStatus::Banned { .. } => "kicked",
        }
    }

    /// True for statuses that count as being in the chat (getChatMemberCount).
    pub fn is_in_chat(self) -> bool {
        !matches!(self, MemberStatus::Left | MemberStatus::Banned { .. })
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
        MemberStatus::Restricted { until_date } => {
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
            o.insert("until_date".into(), json!(until_date));
        }
        MemberStatus::Banned { until_date } => {
            o.insert("until_date".into(), json!(until_date));
        }
        MemberStatus::Member | MemberStatus::Left => {}
    }
    Value::Object(o)
}

/// One role change as ChatMemberUpdated shows it.
pub struct MemberChange<'a> {
    pub chat: &'a ChatView,
    pub from: &'a UserView,
    pub date: i64,
    pub old: &'a MemberView,
    pub new: &'a MemberView,
    /// A join by invite link: the link (ChatInviteLink JSON), and whether a join request
    /// approved it.
    pub invite_link: Option<Value>,
    pub via_join_request: bool,
}

/// ChatMemberUpdated JSON (`my_chat_member`, `chat_member`).
pub fn chat_member_updated_json(c: &MemberChange<'_>) -> Value {
    let mut v = json!({
        "chat": chat_json(c.chat),
        "from": user_json(c.from),
        "date": c.date,
        "old_chat_member": chat_member_json(c.old),
        "new_chat_member": chat_member_json(c.new),
    });
    if let Some(link) = &c.invite_link {
        v["invite_link"] = link.clone();
    }
    if c.via_join_request {
        v["via_join_request"] = json!(true);
    }
    v
}

/// A ChatInviteLink as the platform records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InviteLinkView {
    pub invite_link: String,
    pub creator: UserView,
    pub creates_join_request: bool,
    pub is_primary: bool,
    pub is_revoked: bool,
    pub name: String,
    /// 0 when it never expires.
    pub expire_date: i64,
    /// 0 when unlimited.
    pub member_limit: u32,
    pub pending_join_request_count: u32,
}

/// ChatInviteLink JSON: the five required fields always, the optional ones when set.
pub fn invite_link_json(l: &InviteLinkView) -> Value {
    let mut v = json!({
        "invite_link": l.invite_link,
        "creator": user_json(&l.creator),
        "creates_join_request": l.creates_join_request,
        "is_primary": l.is_primary,
        "is_revoked": l.is_revoked,
    });
    if !l.name.is_empty() {
        v["name"] = json!(l.name);
    }
    if l.expire_date != 0 {
        v["expire_date"] = json!(l.expire_date);
    }
    if l.member_limit != 0 {
        v["member_limit"] = json!(l.member_limit);
    }
    if l.creates_join_request {
        v["pending_join_request_count"] = json!(l.pending_join_request_count);
    }
    v
}

/// ChatJoinRequest JSON (`chat_join_request`): `user_chat_id` is the user's private chat id,
/// which on this platform is the user's id.
pub fn chat_join_request_json(chat: &ChatView, user: &UserView, date: i64, invite_link: Option<Value>) -> Value {
    let mut v = json!({
        "chat": chat_json(chat),
        "from": user_json(user),
        "user_chat_id": user.id,
        "date": date,
    });
    if let Some(link) = invite_link {
        v["invite_link"] = link;
    }
    v
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
            (
                MemberStatus::Restricted { until_date: 0 },
                &["is_member", "can_send_messages", "can_edit_tag", "can_react_to_messages", "until_date"],
            ),
            (MemberStatus::Left, &["user"]),
            (MemberStatus::Banned { until_date: 9 }, &["user", "until_date"]),
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

    #[test]
    fn invite_links_and_join_requests_carry_what_the_sdks_require() {
        let mut link = InviteLinkView {
            invite_link: "e2e://join/abc".into(),
            creator: user(),
            creates_join_request: false,
            is_primary: true,
            is_revoked: false,
            name: String::new(),
            expire_date: 0,
            member_limit: 0,
            pending_join_request_count: 0,
        };
        let v = invite_link_json(&link);
        for f in ["invite_link", "creator", "creates_join_request", "is_primary", "is_revoked"] {
            assert!(v.get(f).is_some(), "{f}: {v}");
        }
        for f in ["name", "expire_date", "member_limit", "pending_join_request_count"] {
            assert!(v.get(f).is_none(), "{f} unset: {v}");
        }
        (link.name, link.expire_date, link.member_limit, link.creates_join_request) = ("n".into(), 7, 3, true);
        let v = invite_link_json(&link);
        assert_eq!((v["name"].as_str(), v["expire_date"].as_i64(), v["member_limit"].as_i64()), (Some("n"), Some(7), Some(3)));
        assert_eq!(v["pending_join_request_count"], 0);
        let chat = ChatView::Channel { id: -9, title: "C".into(), username: None };
        let r = chat_join_request_json(&chat, &user(), 11, Some(v));
        for f in ["chat", "from", "user_chat_id", "date", "invite_link"] {
            assert!(r.get(f).is_some(), "{f}: {r}");
        }
        assert_eq!(r["user_chat_id"], 5);
    }
}
