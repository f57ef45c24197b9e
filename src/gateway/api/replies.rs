//! `whr/<n>`: runs the Bot API call that a webhook receiver put in its 2xx answer
//! (`"method"` in a JSON, form or multipart body), through the same decoding and method table
//! as the HTTP listener. Anything else in an answer is ignored; a failing call is logged and
//! not retried, as in the Bot API.

use std::sync::{Arc, Weak};
use std::time::Duration;

use crossbeam_channel::{select, Receiver};
use serde_json::Value;

use super::{methods, request};
use crate::gateway::botapi::Params;
use crate::gateway::runtime::BotShared;
use crate::demand::Work;
use crate::gateway::webhook::Answer;

/// A Bot API call found in a receiver's answer.
struct Reply {
    update_id: i64,
    method: String,
    params: Params,
}

/// `whr/<n>` as work on demand (`crate::demand`): runs the calls in the answers `wh/<n>`
/// hands over (`webhook::Replies`, which starts it); ends after `idle` with none, or when the
/// bot stops.
pub struct ReplyRunner {
    /// Weak: `wh/<n>`'s work holds this one's demand, and the bot must still drop.
    shared: Weak<BotShared>,
    answers: Receiver<Answer>,
    idle: Duration,
}

impl ReplyRunner {
    pub fn new(shared: &Arc<BotShared>, answers: Receiver<Answer>, idle: Duration) -> ReplyRunner {
        ReplyRunner { shared: Arc::downgrade(shared), answers, idle }
    }
}

impl Work for ReplyRunner {
    fn run(&self) {
        let Some(shared) = self.shared.upgrade() else { return };
        loop {
            select! {
                recv(self.answers) -> answer => {
                    let Ok(answer) = answer else { return };
                    let (content_type, update_id) = (answer.content_type.as_deref(), answer.update_id);
                    if let Some(reply) = parse_reply(content_type, &answer.body, update_id, &shared.username) {
                        run(&shared, reply);
                    }
                }
                recv(shared.stop_signal()) -> _ => return,
                default(self.idle) => return,
            }
        }
    }

    fn pending(&self) -> bool {
        !self.answers.is_empty() && self.shared.upgrade().is_some_and(|s| !s.is_stopping())
    }

    fn failed(&self, name: &str) {
        if let Some(shared) = self.shared.upgrade() {
            shared.thread_failed(name);
        }
    }
}

fn parse_reply(content_type: Option<&str>, body: &[u8], update_id: i64, bot: &str) -> Option<Reply> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    let mut params = match request::decode(None, content_type, Some(body.len()), &mut &body[..]) {
        Ok(p) => p,
        Err(e) => {
            log::debug!("bot @{bot}: webhook answer to update {update_id} is not a method call: {}", e.loggable());
            return None;
        }
    };
    let method = params.optional_str("method").ok().flatten()?;
    // `method` names the call; it is not one of its parameters.
    params.insert_json("method", Value::Null);
    Some(Reply { update_id, method, params })
}

/// Runs one reply through the method table, so its parameters are decoded and validated by
/// the same mechanism as an HTTP call.
fn run(shared: &BotShared, Reply { update_id, method, params }: Reply) {
    match methods::dispatch(shared, &method, &params) {
        Ok(_) => log::debug!("bot @{}: webhook reply {method} to update {update_id} done", shared.username),
        Err(e) => log::warn!(
            "bot @{}: webhook reply {method} to update {update_id} failed: {}",
            shared.username,
            e.loggable()
        ),
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_in_json_form_and_multipart() {
        let r = parse_reply(
            Some("application/json"),
            br#"{"method":"sendChatAction","chat_id":42,"action":"typing"}"#,
            7,
            "b",
        )
        .expect("telegraf JSON reply");
        assert_eq!((r.update_id, r.method.as_str()), (7, "sendChatAction"));
        assert_eq!(r.params.required_i64("chat_id").expect("chat_id"), 42);
        assert!(!r.params.contains("method"), "method is not passed on as a parameter");

        let r = parse_reply(
            Some("application/x-www-form-urlencoded"),
            b"method=sendMessage&chat_id=5&text=hi+there",
            1,
            "b",
        )
        .expect("form reply");
        assert_eq!(r.method, "sendMessage");
        assert_eq!(r.params.required_str("text").expect("text"), "hi there");

        let body = "--webhookBoundaryX\r\nContent-Disposition: form-data; name=\"method\"\r\n\r\nsendMessage\r\n\
                    --webhookBoundaryX\r\nContent-Disposition: form-data; name=\"chat_id\"\r\n\r\n9\r\n\
                    --webhookBoundaryX\r\nContent-Disposition: form-data; name=\"text\"\r\n\r\nmulti\r\n--webhookBoundaryX--\r\n";
        let r = parse_reply(Some("multipart/form-data; boundary=webhookBoundaryX"), body.as_bytes(), 1, "b")
            .expect("aiogram multipart reply");
        assert_eq!((r.method.as_str(), r.params.required_i64("chat_id").expect("id")), ("sendMessage", 9));
    }

    #[test]
    fn answers_without_a_method_are_not_replies() {
        for (ct, body) in [
            (Some("application/json"), &b""[..]),
            (Some("application/json; charset=\"utf-8\""), b"  "),
            (Some("application/json"), b"{}"),
            (None, b"{\"ok\":true}"),
            (Some("text/html"), b"<html>ok</html>"),
            (Some("application/json"), b"not json"),
            (Some("application/json"), b"[1,2]"),
        ] {
            assert!(parse_reply(ct, body, 1, "b").is_none(), "{ct:?} {:?}", String::from_utf8_lossy(body));
        }
    }

}
