//! What a bot tells its operator: its `/healthz` object, the sends its outbox gave up
//! (`/outbox/given-up`), its `/metrics` sample, and the advice a refused credential comes with
//! (shapes in docs/operations.md).

use std::sync::atomic::Ordering;

use serde_json::{json, Value};

use super::botapi::ApiError;
use super::runtime::{BotShared, CLOCK_OFFSET_WARN_SECS};
use super::store::webhook as webhook_store;
use super::store::{outbox, queue};
use super::advice::refusal_advice;

impl BotShared {
    /// See [`Ctx::refusal`](super::ctx::Ctx::refusal).
    pub fn refusal(&self) -> ApiError {
        self.ctx().refusal()
    }

    /// The queue's and the outbox's depth and whether a webhook is set (-1, -1, false when
    /// the store cannot be read): what `/healthz` and `/metrics` report.
    pub fn depths(&self) -> (i64, i64, bool) {
        self.store
            .read(|c| Ok((queue::depth(c)?, outbox::depth(c)?, webhook_store::is_set(c)?)))
            .unwrap_or((-1, -1, false))
    }

    /// This bot's sample for `/metrics`.
    pub fn metrics_sample(&self) -> super::metrics::BotSample<'_> {
        let (queue_depth, outbox_depth, _) = self.depths();
        super::metrics::BotSample {
            bot: format!("@{}", self.username),
            metrics: &self.metrics,
            queue_depth,
            outbox_depth,
            connected: self.status.connected.load(Ordering::SeqCst),
            credential_refused: self.is_revoked(),
            failed_threads: self.status.failed_threads.lock().unwrap_or_else(|e| e.into_inner()).len(),
            store_commits: self.store.notifier().commits(),
        }
    }

    /// The sends this bot's outbox gave up, newest first, for `/outbox/given-up` (shape in
    /// docs/operations.md): never their content.
    pub fn given_up(&self) -> Value {
        let listed = self.store.read(|c| outbox::given_up(c, outbox::GIVEN_UP_LIMIT as usize));
        let mut v = json!({ "username": self.username, "compat_user_id": self.compat_user_id });
        match listed {
            Ok(list) => {
                let sends: Vec<Value> = list
                    .into_iter()
                    .map(|g| {
                        let mut o = json!({
                            "chat_id": g.chat_id,
                            "kind": g.kind,
                            "client_message_id": g.client_message_id,
                            "submitted_at": g.submitted_at,
                            "given_up_at": g.given_up_at,
                            "handed_to_platform": g.handed,
                            "reason": g.reason,
                        });
                        if let Some(id) = g.message_id {
                            o["message_id"] = json!(id);
                        }
                        o
                    })
                    .collect();
                v["given_up"] = json!(sends);
            }
            Err(e) => v["error"] = json!(format!("cannot read the state store: {e}")),
        }
        v
    }

    /// Health of this bot for `/healthz` (shape in docs/operations.md).
    pub fn health(&self) -> Value {
        let (queue_depth, outbox_depth, webhook) = self.depths();
        let mut h = json!({
            "username": self.username,
            "compat_user_id": self.compat_user_id,
            // This runtime's device: the SPEC's bot_runtime_id (docs/decisions.md).
            "device_id": self.device_id(),
            "connected": self.status.connected.load(Ordering::SeqCst),
            "revoked": self.is_revoked(),
            "mode": if webhook { "webhook" } else { "polling" },
            "queue_depth": queue_depth,
            "outbox_depth": outbox_depth,
        });
        if let Some(e) = self.status.last_error.lock().expect("status lock").clone() {
            h["last_error"] = Value::String(e);
        }
        if let Some(why) = self.store.failing() {
            // It receives and sends nothing new until a commit succeeds again.
            h["storage_failing"] = Value::String(why);
        }
        if self.is_device_removed() {
            h["device_removed"] = json!(true);
        }
        if let Some(refusal) = *self.status.refusal.lock().unwrap_or_else(|e| e.into_inner()) {
            h["credential"] = json!(refusal.name());
            h["problem"] = json!(refusal_advice(refusal, &self.username, self.device_id()));
        }
        if let Some(offset) = *self.status.clock_offset.lock().unwrap_or_else(|e| e.into_inner()) {
            // The platform's clock minus ours; far off, it says so.
            h["clock_offset_seconds"] = json!(offset);
            if offset.abs() > CLOCK_OFFSET_WARN_SECS {
                h["clock_problem"] = json!(format!(
                    "this machine's clock is {}s {} the platform's: set it right (NTP)",
                    offset.abs(),
                    if offset < 0 { "ahead of" } else { "behind" }
                ));
            }
        }
        let failed = self.status.failed_threads.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if !failed.is_empty() {
            h["failed_threads"] = json!(failed);
        }
        if let Some((date, what)) = self.status.security_alert.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            let count = self.metrics.security_alerts.load(Ordering::Relaxed);
            h["security_alert"] = json!({"count": count, "last": what, "date": date});
        }
        h
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_clock_far_from_the_platforms_is_shown_in_healthz_with_its_offset() {
        let (_dir, bot) = crate::gateway::testing::test_bot(std::time::Duration::from_millis(10));
        assert!(bot.health().get("clock_offset_seconds").is_none(), "unknown before the platform said its time");
        let now = crate::clock::unix_now();
        bot.status.note_platform_time(&bot.username, now + 2, now);
        let h = bot.health();
        assert_eq!(h["clock_offset_seconds"], 2);
        assert!(h.get("clock_problem").is_none(), "two seconds is no problem: {h}");
        // Our clock a year ahead of the platform's.
        bot.status.note_platform_time(&bot.username, now - 365 * 86_400, now);
        let h = bot.health();
        assert_eq!(h["clock_offset_seconds"], -365 * 86_400);
        assert!(h["clock_problem"].as_str().is_some_and(|p| p.contains("ahead of the platform")), "{h}");
        // A platform that does not say its time changes nothing.
        bot.status.note_platform_time(&bot.username, 0, now);
        assert_eq!(bot.health()["clock_offset_seconds"], -365 * 86_400);
    }
}
