//! What the gateway refuses, and why, in one table: Bot API methods of features this platform
//! does not have (payments, games, web apps, ...), methods not built yet, and the parameters
//! that would ask for such a feature. Every other parameter a method does not use is ignored,
//! as the reference server does (bots pass what their SDK fills in).
//!
//! docs/methods.md lists the same refusals in the same words; a test keeps the two alike.

use crate::gateway::botapi::{ApiError, Params};

/// A feature outside this gateway, and the methods that belong to it.
pub struct Feature {
    /// What the refusal names: "method sendInvoice: payments and Telegram Stars are not
    /// supported by this gateway".
    pub words: &'static str,
    pub methods: &'static [&'static str],
}

/// Whole features the platform does not have (spec item 12, and the parts of the Bot API
/// that belong to Telegram's own services).
pub static REFUSED_FEATURES: &[Feature] = &[
    Feature {
        words: "forum topics",
        methods: &[
            "getForumTopicIconStickers", "createForumTopic", "editForumTopic", "closeForumTopic", "reopenForumTopic",
            "deleteForumTopic", "unpinAllForumTopicMessages", "editGeneralForumTopic", "closeGeneralForumTopic",
            "reopenGeneralForumTopic", "hideGeneralForumTopic", "unhideGeneralForumTopic",
            "unpinAllGeneralForumTopicMessages",
        ],
    },
    Feature {
        words: "payments and Telegram Stars",
        methods: &[
            "sendInvoice", "createInvoiceLink", "answerShippingQuery", "answerPreCheckoutQuery", "getStarTransactions",
            "refundStarPayment", "editUserStarSubscription", "getMyStarBalance", "sendPaidMedia",
            "createChatSubscriptionInviteLink", "editChatSubscriptionInviteLink",
        ],
    },
    Feature { words: "games", methods: &["sendGame", "setGameScore", "getGameHighScores"] },
    Feature {
        words: "web apps",
        methods: &[
            "answerWebAppQuery", "savePreparedInlineMessage", "savePreparedKeyboardButton", "sendChatJoinRequestWebApp",
            "setUserEmojiStatus", "setChatMenuButton", "getChatMenuButton",
        ],
    },
    Feature {
        words: "gifts",
        methods: &[
            "sendGift", "getAvailableGifts", "convertGiftToStars", "upgradeGift", "transferGift", "getUserGifts",
            "getChatGifts", "giftPremiumSubscription",
        ],
    },
    Feature {
        words: "business accounts",
        methods: &[
            "getBusinessConnection", "readBusinessMessage", "deleteBusinessMessages", "setBusinessAccountName",
            "setBusinessAccountUsername", "setBusinessAccountBio", "setBusinessAccountProfilePhoto",
            "removeBusinessAccountProfilePhoto", "setBusinessAccountGiftSettings", "getBusinessAccountStarBalance",
            "transferBusinessAccountStars", "getBusinessAccountGifts", "sendChecklist", "editMessageChecklist",
        ],
    },
    Feature { words: "stories", methods: &["postStory", "editStory", "deleteStory", "repostStory"] },
    Feature {
        words: "sticker sets",
        methods: &[
            "getStickerSet", "getCustomEmojiStickers", "uploadStickerFile", "createNewStickerSet", "addStickerToSet",
            "setStickerPositionInSet", "deleteStickerFromSet", "replaceStickerInSet", "setStickerEmojiList",
            "setStickerKeywords", "setStickerMaskPosition", "setStickerSetTitle", "setStickerSetThumbnail",
            "setCustomEmojiStickerSetThumbnail", "deleteStickerSet", "setChatStickerSet", "deleteChatStickerSet",
        ],
    },
    Feature { words: "Telegram Passport", methods: &["setPassportDataErrors"] },
    Feature {
        words: "verification by a third party",
        methods: &["verifyUser", "verifyChat", "removeUserVerification", "removeChatVerification"],
    },
    Feature {
        words: "managed bots (bots are created and managed in the dialog with the management bot)",
        methods: &["getManagedBotToken", "replaceManagedBotToken", "getManagedBotAccessSettings", "setManagedBotAccessSettings"],
    },
    Feature { words: "suggested posts", methods: &["approveSuggestedPost", "declineSuggestedPost"] },
    Feature { words: "chat boosts", methods: &["getUserChatBoosts"] },
];

/// Methods of the Bot API this gateway does not serve yet: a call gets 400 saying so, not a
/// 404 that reads like a typo.
pub const NOT_YET: &[&str] = &[
    "logOut", "close", "sendMessageDraft", "sendLivePhoto", "sendRichMessage",
    "sendRichMessageDraft", "getUserProfileAudios", "getUserPersonalChatMessages",
    "setChatAdministratorCustomTitle", "setChatMemberTag", "banChatSenderChat", "unbanChatSenderChat",
    "setChatPermissions", "setChatPhoto", "deleteChatPhoto", "setChatDescription", "pinChatMessage",
    "unpinChatMessage", "unpinAllChatMessages", "setMyDefaultAdministratorRights", "getMyDefaultAdministratorRights",
    "deleteMessageReaction", "deleteAllMessageReactions", "setMyProfilePhoto", "removeMyProfilePhoto",
    "answerChatJoinRequestQuery", "answerGuestQuery",
];

/// A parameter refused because it asks for a feature this gateway lacks; `methods` empty means
/// every method.
pub struct RefusedParam {
    pub name: &'static str,
    pub methods: &'static [&'static str],
    /// Follows "<name>: " in the description.
    pub why: &'static str,
}

/// The parameters refused when given a value (not `false`, `0`, `""`, `[]` or `{}`: SDKs fill
/// those in for "not set").
pub static REFUSED_PARAMS: &[RefusedParam] = &[
    RefusedParam { name: "message_thread_id", methods: &[], why: "forum topics are not supported by this gateway" },
    RefusedParam { name: "business_connection_id", methods: &[], why: "business accounts are not supported by this gateway" },
    RefusedParam {
        name: "direct_messages_topic_id",
        methods: &[],
        why: "channel direct messages are not supported by this gateway",
    },
    RefusedParam { name: "suggested_post_parameters", methods: &[], why: "suggested posts are not supported by this gateway" },
    RefusedParam {
        name: "certificate",
        methods: &["setWebhook"],
        why: "a custom certificate is not supported: the gateway delivers to https URLs with a publicly trusted certificate, \
              or to plain http on localhost",
    },
    RefusedParam { name: "ip_address", methods: &["setWebhook"], why: "a fixed ip_address is not supported: the webhook URL is resolved normally" },
    RefusedParam {
        name: "is_anonymous",
        methods: &["promoteChatMember"],
        why: "anonymous administrators are not supported by this gateway",
    },
    RefusedParam {
        name: "allow_adding_options",
        methods: &["sendPoll"],
        why: "options added after sending are not supported by this gateway",
    },
];

/// The parameters of `sendPoll` that would format or illustrate its texts: the platform's
/// poll carries plain text, so they are refused rather than dropped.
const POLL_FORMATTING: &[&str] = &[
    "question_parse_mode", "question_entities", "explanation_parse_mode", "explanation_entities", "description",
    "description_parse_mode", "description_entities", "media", "explanation_media",
];

/// The feature an unserved Bot API method belongs to, or that it is not built yet; `None` for
/// a name that is no Bot API method this gateway knows of (a 404).
pub fn refused_method(name: &str) -> Option<ApiError> {
    if let Some(f) = REFUSED_FEATURES.iter().find(|f| f.methods.iter().any(|m| m.eq_ignore_ascii_case(name))) {
        return Some(ApiError::bad_request(format!("method {name}: {} are not supported by this gateway", f.words)));
    }
    // Any forum-topic method, also one added to the Bot API after this list.
    if name.to_ascii_lowercase().contains("forumtopic") {
        return Some(ApiError::bad_request(format!("method {name}: forum topics are not supported by this gateway")));
    }
    NOT_YET
        .iter()
        .any(|m| m.eq_ignore_ascii_case(name))
        .then(|| ApiError::bad_request(format!("method {name} is not supported by this gateway yet (see docs/methods.md)")))
}

/// 400 for the first refused parameter `method` was given with a value.
pub fn check_params(method: &str, params: &Params) -> Result<(), ApiError> {
    for p in REFUSED_PARAMS {
        if (p.methods.is_empty() || p.methods.contains(&method)) && is_set(params, p.name) {
            return Err(ApiError::bad_request(format!("{}: {}", p.name, p.why)));
        }
    }
    if method == "sendPoll" {
        if let Some(name) = POLL_FORMATTING.iter().find(|n| is_set(params, n)) {
            return Err(ApiError::bad_request(format!(
                "{name}: formatted poll texts, descriptions and media are not supported by this gateway"
            )));
        }
    }
    Ok(())
}

/// Whether `name` carries a value that asks for something: an uploaded part, or a value other
/// than `false`, `0`, `""` (also as form text) or an empty array or object.
fn is_set(params: &Params, name: &str) -> bool {
    use serde_json::Value;
    if params.file(name).is_some() {
        return true;
    }
    match params.get(name) {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::Number(n)) => n.as_f64() != Some(0.0),
        Some(Value::String(s)) => !matches!(s.trim().to_ascii_lowercase().as_str(), "" | "0" | "false"),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(Value::Bool(true)) => true,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{form, p};
    use super::*;

    #[test]
    fn refused_methods_name_their_feature() {
        let e = refused_method("sendinvoice").expect("payments");
        assert_eq!(e.status, 400);
        assert!(e.description.contains("method sendinvoice: payments and Telegram Stars are not supported"), "{e}");
        assert!(refused_method("sendGame").unwrap().description.contains("games are not supported"));
        assert!(refused_method("answerWebAppQuery").unwrap().description.contains("web apps are not supported"));
        assert!(refused_method("createForumTopicV2").unwrap().description.contains("forum topics"));
        assert!(refused_method("logOut").unwrap().description.contains("not supported by this gateway yet"));
        assert!(refused_method("sendPigeon").is_none());
    }

    #[test]
    fn no_method_is_listed_twice_or_both_served_and_refused() {
        let mut seen = std::collections::BTreeSet::new();
        let refused = REFUSED_FEATURES.iter().flat_map(|f| f.methods.iter()).chain(NOT_YET.iter());
        for m in refused {
            assert!(seen.insert(m.to_ascii_lowercase()), "{m} is listed twice");
            assert!(super::super::find(m).is_none(), "{m} is served and refused");
        }
    }

    #[test]
    fn refused_parameters_need_a_value_and_the_method() {
        assert!(check_params("sendMessage", &p(json!({"message_thread_id": 0, "business_connection_id": ""}))).is_ok());
        assert!(check_params("sendMessage", &form(&[("message_thread_id", "0"), ("is_anonymous", "true")])).is_ok());
        let e = check_params("sendPhoto", &form(&[("message_thread_id", "7")])).expect_err("thread");
        assert_eq!(e.description, "Bad Request: message_thread_id: forum topics are not supported by this gateway");
        let e = check_params("promoteChatMember", &p(json!({"is_anonymous": true}))).expect_err("anonymous");
        assert!(e.description.contains("anonymous administrators"), "{e}");
        assert!(check_params("promoteChatMember", &p(json!({"is_anonymous": false}))).is_ok());
        let e = check_params("sendPoll", &p(json!({"question_entities": [{"type": "bold", "offset": 0, "length": 1}]})));
        assert!(e.expect_err("formatted").description.contains("formatted poll texts"));
        assert!(check_params("sendPoll", &p(json!({"question_entities": [], "description": ""}))).is_ok());
        let e = check_params("setWebhook", &p(json!({"ip_address": "1.2.3.4"}))).expect_err("ip");
        assert!(e.description.contains("ip_address: a fixed ip_address is not supported"), "{e}");
    }

    #[test]
    fn docs_list_every_refusal_in_the_same_words() {
        let docs = include_str!("../../../../docs/methods.md");
        for f in REFUSED_FEATURES {
            assert!(docs.contains(f.words), "docs/methods.md does not name the feature {:?}", f.words);
            for m in f.methods {
                assert!(docs.contains(&format!("`{m}`")), "docs/methods.md does not list {m} under {:?}", f.words);
            }
        }
        for m in NOT_YET {
            assert!(docs.contains(&format!("`{m}`")), "docs/methods.md does not list {m} as not served yet");
        }
        for p in REFUSED_PARAMS {
            assert!(docs.contains(&format!("`{}`", p.name)) && docs.contains(p.why), "docs/methods.md: {} ({})", p.name, p.why);
        }
        for m in super::super::METHODS {
            assert!(docs.contains(&format!("| `{}` |", m.name)), "docs/methods.md has no parameter row for {}", m.name);
        }
    }
}
