//! How a sending method hands its message to the outbox and waits for the truth
//! (`outbox::submit` before): the HTTP side of the outbox. The outbox thread answers in the
//! platform's words (`SendFailure`); this file words it as the Bot API does.

use std::time::Duration;

use crate::clock::unix_now;
use crate::gateway::botapi::ApiError;
use crate::gateway::metrics::BotMetrics;
use crate::gateway::ctx::{Ctx, Sending};
use crate::gateway::send_wait::{SendFailure, Sent, Waited};
use crate::gateway::store::outbox;
use crate::crypto;
use crate::wire::e2e::Content;

/// How a caller of [`submit`] waits, besides the bot's `send_wait_seconds`: whether its client
/// has gone, so a wait for a message in flight ends with the connection (the HTTP workers pass
/// `crate::http::client_gone`).
#[derive(Clone, Copy)]
pub struct Wait {
    pub client_gone: fn() -> bool,
}

/// How often a wait for a message in flight looks whether its client is still there.
const CLIENT_CHECK: Duration = Duration::from_secs(1);
/// `retry_after` of the 429 that answers a withdrawn message.
pub const RETRY_AFTER_SECS: u32 = 5;

/// Records `content` for `chat_id` in the outbox and answers with the truth: the platform's
/// message id, or an error after which it is never sent (the HTTP side of the outbox).
///
/// Waits `send_wait_seconds` for the platform's answer. Then a message that was never handed
/// to the platform is withdrawn: 429 with `retry_after`, which SDKs and bots retry safely. One
/// that was handed is waited for until the platform answers (it may be in the platform's hands
/// already, so no error may be said of it); the wait ends early only when the client leaves or
/// the gateway stops, and then without any answer.
pub fn submit(shared: &Sending, chat_id: i64, content: Content, wait: Wait) -> Result<Sent, ApiError> {
    if shared.is_revoked() {
        return Err(shared.refusal());
    }
    let client_message_id = crypto::hex_encode(&crypto::random_bytes::<16>());
    // Register the waiter before the row exists for the thread, under the same lock the
    // thread uses to finish, so a fast acknowledgement cannot be missed.
    // Relaxed: the caller has no answer before the message is sealed, whose commit is synced
    // and carries this row with it; lost to a power failure before that, nothing was said.
    let waiting = shared.outbox.register(|| {
        shared
            .store
            .write_relaxed(move |c| outbox::insert(c, &client_message_id, chat_id, &content, unix_now()))
            .map_err(|e| ApiError::internal(format!("cannot record the message in the outbox: {e}")))
    })?;
    shared.outbox.wake.wake();
    let send_wait = shared.delivery.send_wait;
    if let Waited::Answer(answer) = waiting.wait(send_wait) {
        return answer.map_err(|failure| api_error(shared, failure));
    }
    let id = waiting.id();
    // Read before the withdrawal, whose own commit may succeed and clear it.
    let storage = shared.store.failing();
    match shared.store.write(move |c| outbox::withdraw(c, id)) {
        Ok(true) => {
            shared.outbox.forget(id);
            BotMetrics::add(&shared.metrics.outbox_withdrawn, 1);
            log::info!(
                "bot @{}: withdrew an unsent message to chat {chat_id} (outbox row {id}): the platform did not take it within {}s",
                shared.name,
                send_wait.as_secs()
            );
            // Say what kept it: the gateway's own storage, or the platform.
            let why = match storage {
                Some(storage) => format!("the gateway could not store the message ({storage})"),
                None => format!("the platform did not take the message within {}s", send_wait.as_secs()),
            };
            return Err(ApiError::retry_after(RETRY_AFTER_SECS, format!("{why}; it was NOT sent and will not be")));
        }
        Ok(false) => {}
        // Whether it was withdrawn is unknown, so it may still be sent: wait for its answer.
        Err(e) => log::error!("bot @{}: cannot withdraw outbox row {id} (chat {chat_id}): {e}", shared.name),
    }
    loop {
        match waiting.wait(CLIENT_CHECK) {
            Waited::Answer(answer) => return answer.map_err(|failure| api_error(shared, failure)),
            Waited::Released => {
                return Err(ApiError::unanswered(format!(
                    "the gateway is stopping while outbox row {id} (chat {chat_id}) is with the platform; it is sent after the restart"
                )));
            }
            Waited::TimedOut if (wait.client_gone)() => {
                shared.outbox.forget(id);
                log::info!(
                    "bot @{}: the caller of outbox row {id} (chat {chat_id}) left before the platform answered; it is sent all the same",
                    shared.name
                );
                return Err(ApiError::unanswered("the client left"));
            }
            Waited::TimedOut => {}
        }
    }
}

/// A message the outbox gave up, as the Bot API answers it.
fn api_error(shared: &Ctx, failure: SendFailure) -> ApiError {
    match failure {
        SendFailure::Refused(why) => ApiError::bad_request(why),
        SendFailure::GaveUp(why) => ApiError::platform(502, why),
        SendFailure::CredentialRefused => shared.refusal(),
    }
}

#[cfg(test)]
mod tests {
    //! What a sending call is answered, with a stand-in for `out/<n>` (no platform): the truth
    //! at the end of every wait.

    use std::sync::Arc;
    use std::thread;

    use super::*;
    use crate::e2e;
    use crate::gateway::runtime::{unix_now, BotShared};

    const STAYS: Wait = Wait { client_gone: || false };
    const LEFT: Wait = Wait { client_gone: || true };

    fn bot(send_wait: Duration) -> (tempfile::TempDir, Arc<BotShared>) {
        crate::gateway::runtime::test_bot(send_wait)
    }

    /// Stands in for `out/<n>`: once woken, hands the one pending row to "the platform", then
    /// runs `then` with its row id.
    fn hand_over(bot: &Arc<BotShared>, then: impl FnOnce(&BotShared, i64) + Send + 'static) -> thread::JoinHandle<()> {
        let bot = bot.clone();
        thread::Builder::new()
            .name("fake-out".into())
            .spawn(move || {
                bot.outbox.wake.receiver().recv_timeout(Duration::from_secs(30)).expect("woken by submit");
                let row = bot.store.read(|c| outbox::pending(c, 1)).expect("pending")[0].id;
                assert!(bot.store.write(move |c| outbox::mark_handed(c, row, unix_now())).expect("hand"));
                then(&bot, row);
            })
            .expect("spawn")
    }

    fn depth(bot: &BotShared) -> i64 {
        bot.store.read(outbox::depth).expect("depth")
    }

    #[test]
    fn a_message_never_handed_is_withdrawn_and_answered_429() {
        let (_dir, bot) = bot(Duration::from_millis(300));
        let e = submit(&bot.sending(), 42, e2e::text_content("hi"), STAYS).expect_err("withdrawn");
        assert_eq!((e.status, e.retry_after), (429, Some(RETRY_AFTER_SECS)));
        assert!(e.description.starts_with("Too Many Requests: retry after 5 ("), "{e}");
        assert!(e.description.contains("it was NOT sent and will not be"), "{e}");
        assert_eq!(depth(&bot), 0, "nothing is left to be sent");
        assert_eq!(bot.metrics.outbox_withdrawn.load(std::sync::atomic::Ordering::Relaxed), 1);
    }

    /// When the gateway's own commits fail (a full disk), the 429 says so, not that the
    /// platform did not take the message; `/healthz` shows the bot degraded meanwhile.
    #[test]
    fn a_message_the_gateway_could_not_store_says_so() {
        let (_dir, bot) = bot(Duration::from_millis(300));
        let out = {
            let bot = bot.clone();
            thread::spawn(move || {
                bot.outbox.wake.receiver().recv_timeout(Duration::from_secs(30)).expect("woken by submit");
                // The outbox's next commit fails, as on a full disk (a job that ends the
                // batch's transaction itself makes its COMMIT fail).
                let failed = bot.store.write(|c| Ok(c.execute_batch("COMMIT")?));
                assert!(failed.is_err());
                assert!(bot.health().get("storage_failing").is_some(), "{}", bot.health());
            })
        };
        let e = submit(&bot.sending(), 42, e2e::text_content("hi"), STAYS).expect_err("withdrawn");
        out.join().expect("stand-in");
        assert_eq!(e.status, 429);
        assert!(e.description.contains("the gateway could not store the message ("), "{e}");
        assert!(!e.description.contains("platform did not take"), "{e}");
    }

    #[test]
    fn a_handed_message_is_waited_for_until_the_platform_answers() {
        let (_dir, bot) = bot(Duration::from_millis(500));
        let out = hand_over(&bot, |bot, row| {
            // The platform answers long after the caller's first wait.
            thread::sleep(Duration::from_millis(1500));
            bot.store.write(move |c| outbox::remove(c, row)).expect("remove");
            assert!(bot.outbox.finish(row, Ok(Sent { message_id: 9, date: 77 })), "the caller still waits");
        });
        let sent = submit(&bot.sending(), 42, e2e::text_content("hi"), STAYS).expect("the platform's answer");
        assert_eq!(sent, Sent { message_id: 9, date: 77 });
        out.join().expect("stand-in");
        assert_eq!(bot.metrics.outbox_withdrawn.load(std::sync::atomic::Ordering::Relaxed), 0);
    }

    #[test]
    fn a_handed_message_whose_client_left_gets_no_answer_and_is_still_sent() {
        let (_dir, bot) = bot(Duration::from_millis(300));
        let out = hand_over(&bot, |_, _| {});
        let e = submit(&bot.sending(), 42, e2e::text_content("hi"), LEFT).expect_err("no answer");
        assert!(e.is_unanswered(), "{e}");
        out.join().expect("stand-in");
        assert_eq!(depth(&bot), 1, "it stays in the outbox, to be sent");
    }

    #[test]
    fn stopping_ends_the_wait_without_an_answer_and_refuses_new_messages() {
        let (_dir, bot) = bot(Duration::from_millis(300));
        let out = hand_over(&bot, |bot, _| {
            thread::sleep(Duration::from_millis(800));
            bot.end_requests();
        });
        let e = submit(&bot.sending(), 42, e2e::text_content("hi"), STAYS).expect_err("no answer");
        assert!(e.is_unanswered(), "{e}");
        out.join().expect("stand-in");
        let e = submit(&bot.sending(), 42, e2e::text_content("late"), STAYS).expect_err("stopping");
        assert_eq!(e.status, 503, "{e}");
        assert!(e.description.contains("was not sent"), "{e}");
        assert_eq!(depth(&bot), 1, "only the handed message is kept; the late one was never recorded");
    }
}
