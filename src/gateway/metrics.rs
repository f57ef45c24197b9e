//! `/metrics` on the extensions listener: the Prometheus text format 0.0.4, rendered by hand
//! over atomics (no registry, no crate; docs/operations.md lists every metric).
//!
//! Each bot has one [`BotMetrics`] in its `BotShared`; the threads and the HTTP routes count
//! where the events happen (`in/<n>`: updates received, envelopes dropped, stream connections;
//! `wh/<n>`: webhook attempts and failures; `out/<n>`: sends given up; the HTTP workers:
//! messages withdrawn unsent; the routes: requests by method and status and the
//! latency of getUpdates and sendMessage; the acknowledgements of getUpdates and the webhook:
//! updates delivered). Gauges (queue and outbox depth, connection state) are read when scraped.
//! Counters start at zero with the process, as Prometheus expects.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// `Content-Type` of the text format this module renders.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Upper bounds (seconds) of the latency histograms: from a platform call on loopback (a few
/// hundred microseconds) to a 50 s long poll.
const BUCKETS: [f64; 17] =
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 60.0];

/// A latency histogram: one counter per bucket (not cumulative; summed when rendered), the
/// count and the sum in microseconds.
#[derive(Default)]
pub struct Histogram {
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl Histogram {
    pub fn observe(&self, took: Duration) {
        let secs = took.as_secs_f64();
        if let Some(i) = BUCKETS.iter().position(|&b| secs <= b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_micros.fetch_add(took.as_micros().min(u64::MAX as u128) as u64, Ordering::Relaxed);
    }
}

/// How long the platform took to answer each kind of call, over every bot of the process (a
/// label per bot and method would be thousands of series in a gateway of many bots). Filled by
/// the gRPC port ([`PLATFORM_CALLS`]).
pub struct PlatformCalls {
    /// By the port's method name (`send_messages`); rendered as the RPC's (`SendMessages`).
    calls: Mutex<BTreeMap<&'static str, Histogram>>,
}

/// The platform calls of this process.
pub static PLATFORM_CALLS: PlatformCalls = PlatformCalls { calls: Mutex::new(BTreeMap::new()) };

impl PlatformCalls {
    /// A call to `method` answered (or failed) after `took`.
    pub fn observe(&self, method: &'static str, took: Duration) {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).entry(method).or_default().observe(took);
    }
}

/// One bot's counters.
#[derive(Default)]
pub struct BotMetrics {
    pub updates_received: AtomicU64,
    pub updates_delivered: AtomicU64,
    pub webhook_attempts: AtomicU64,
    pub webhook_failures: AtomicU64,
    pub decrypt_failures: AtomicU64,
    /// Group leaves refused because nobody vouched for them (`BotShared::security_alert`).
    pub security_alerts: AtomicU64,
    /// Private messages kept out of the queue because the platform served another identity
    /// key for their sender than the pinned one (`accept_identity_changes` off).
    pub identity_changes: AtomicU64,
    /// Group commits for an epoch already passed, delivered again: dropped, no rejoin.
    pub replayed_commits: AtomicU64,
    /// Messages a sender numbered that never arrived (`e2e::sequence`): withheld by the
    /// platform, or lost before it.
    pub withheld_messages: AtomicU64,
    /// Inbox streams opened; every one after the first is a reconnect.
    pub stream_connects: AtomicU64,
    /// Sends the outbox gave up (recorded in the `given_up` table, logged at warn).
    pub outbox_given_up: AtomicU64,
    /// Messages withdrawn unsent when their call's wait ended (answered 429).
    pub outbox_withdrawn: AtomicU64,
    /// Bot API requests by (canonical method name, HTTP status). Bounded: the method is one
    /// of the method table's names or `other`, the status one of a few dozen codes.
    requests: Mutex<BTreeMap<(&'static str, u16), u64>>,
    pub get_updates_seconds: Histogram,
    pub send_message_seconds: Histogram,
}

impl BotMetrics {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// A Bot API request answered with `status` after `took`.
    pub fn request(&self, method: &'static str, status: u16, took: Duration) {
        *self.requests.lock().unwrap_or_else(|e| e.into_inner()).entry((method, status)).or_insert(0) += 1;
        match method {
            "getUpdates" => self.get_updates_seconds.observe(took),
            "sendMessage" => self.send_message_seconds.observe(took),
            _ => {}
        }
    }
}

/// What a scrape reads of one bot besides its counters.
pub struct BotSample<'a> {
    /// `@username`, the `bot` label.
    pub bot: String,
    pub metrics: &'a BotMetrics,
    /// -1 when the store could not be read.
    pub queue_depth: i64,
    pub outbox_depth: i64,
    pub connected: bool,
    pub credential_refused: bool,
    pub failed_threads: usize,
    /// Transactions its state database committed since the gateway started (`store::writer`).
    pub store_commits: u64,
}

/// The whole `/metrics` body: the bots', then the process' ([`PLATFORM_CALLS`], memory,
/// threads, descriptors).
pub fn render(bots: &[BotSample<'_>]) -> String {
    render_with(bots, &PLATFORM_CALLS)
}

fn render_with(bots: &[BotSample<'_>], calls: &PlatformCalls) -> String {
    let mut out = String::new();
    let r = &mut out;
    header(r, "botgw_info", "gauge", "Version and compatibility profile of this gateway (always 1).");
    let _ = writeln!(
        r,
        "botgw_info{{version=\"{}\",compatibility_profile_id=\"{}\"}} 1",
        esc(env!("CARGO_PKG_VERSION")),
        esc(crate::compat::COMPATIBILITY_PROFILE_ID)
    );
    gauge(r, bots, "botgw_queue_depth", "Updates stored and not yet acknowledged by the bot.", |b| b.queue_depth as f64);
    gauge(r, bots, "botgw_outbox_depth", "Outgoing messages not yet accepted by the platform.", |b| b.outbox_depth as f64);
    gauge(r, bots, "botgw_platform_connected", "1 while the bot's inbox stream to the platform is open.", |b| f64::from(u8::from(b.connected)));
    gauge(r, bots, "botgw_credential_refused", "1 once the platform refused the bot's credential (token replaced, bot disabled, device removed).", |b| f64::from(u8::from(b.credential_refused)));
    gauge(r, bots, "botgw_failed_threads", "Threads of the bot that panicked (the bot is unhealthy).", |b| b.failed_threads as f64);
    header(r, "botgw_store_commits_total", "counter", "Transactions the bot's state database committed (its writer thread; one commit may carry many jobs).");
    for b in bots {
        let _ = writeln!(r, "botgw_store_commits_total{{bot=\"{}\"}} {}", esc(&b.bot), b.store_commits);
    }
    counter(r, bots, "botgw_updates_received_total", "Updates decrypted and stored in the queue.", |m| &m.updates_received);
    counter(r, bots, "botgw_updates_delivered_total", "Updates acknowledged by the bot (getUpdates offset or webhook 2xx) and removed from the queue.", |m| &m.updates_delivered);
    counter(r, bots, "botgw_webhook_attempts_total", "Webhook POSTs attempted.", |m| &m.webhook_attempts);
    counter(r, bots, "botgw_webhook_failures_total", "Webhook POSTs that failed (no 2xx answer).", |m| &m.webhook_failures);
    counter(r, bots, "botgw_outbox_given_up_total", "Outgoing messages the outbox gave up without sending them (listed at /outbox/given-up).", |m| &m.outbox_given_up);
    counter(r, bots, "botgw_outbox_withdrawn_total", "Outgoing messages withdrawn unsent because the platform had not taken them within send_wait_seconds (answered 429).", |m| &m.outbox_withdrawn);
    counter(r, bots, "botgw_decrypt_failures_total", "Incoming envelopes dropped because they could not be decrypted or were refused.", |m| &m.decrypt_failures);
    counter(r, bots, "botgw_withheld_messages_total", "Messages a user's device numbered in a conversation with the bot that never arrived within a minute: withheld by the platform, or lost before it.", |m| &m.withheld_messages);
    counter(r, bots, "botgw_replayed_commits_total", "Group commits for an epoch the group had passed, delivered again (a replaying platform): dropped, and never a reason to rejoin.", |m| &m.replayed_commits);
    counter(r, bots, "botgw_security_alerts_total", "Devices refused because their account did not vouch for them (a group leaf, or a device starting a private session whose certificate does not verify): the platform or a member tried to add a device (see /healthz).", |m| &m.security_alerts);
    counter(r, bots, "botgw_identity_changes_total", "Private messages kept out of the queue because the platform served another identity key for their sender than the one pinned when the bot first met them (see accept_identity_changes).", |m| &m.identity_changes);
    header(r, "botgw_platform_reconnects_total", "counter", "Inbox streams reopened after the first one.");
    for b in bots {
        let connects = b.metrics.stream_connects.load(Ordering::Relaxed);
        let _ = writeln!(r, "botgw_platform_reconnects_total{{bot=\"{}\"}} {}", esc(&b.bot), connects.saturating_sub(1));
    }
    header(r, "botgw_bot_api_requests_total", "counter", "Bot API requests answered, by method and HTTP status.");
    for b in bots {
        for ((method, status), n) in b.metrics.requests.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let _ = writeln!(
                r,
                "botgw_bot_api_requests_total{{bot=\"{}\",method=\"{}\",status=\"{status}\"}} {n}",
                esc(&b.bot),
                esc(method)
            );
        }
    }
    histogram(r, bots, "botgw_get_updates_duration_seconds", "Time to answer getUpdates (long polls included).", |m| &m.get_updates_seconds);
    histogram(r, bots, "botgw_send_message_duration_seconds", "Time to answer sendMessage (until the platform accepted it).", |m| &m.send_message_seconds);
    platform_calls(r, calls);
    process(r);
    out
}

fn platform_calls(r: &mut String, calls: &PlatformCalls) {
    let name = "botgw_platform_call_duration_seconds";
    header(r, name, "histogram", "Time the platform took to answer a call the gateway waited for (all bots), by RPC; streams, file transfers and calls sent without waiting (acknowledgements, webhook credential checks) are not in it.");
    for (method, h) in calls.calls.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        samples(r, name, &format!("method=\"{}\"", esc(&rpc_name(method))), h);
    }
}

/// `send_messages` → `SendMessages`: the port's method as the platform's RPC is named.
fn rpc_name(method: &str) -> String {
    method
        .split('_')
        .map(|word| {
            let mut chars = word.chars();
            chars.next().map(|first| first.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
        })
        .collect()
}

fn header(r: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(r, "# HELP {name} {}", help.replace('\\', "\\\\").replace('\n', "\\n"));
    let _ = writeln!(r, "# TYPE {name} {kind}");
}

fn gauge(r: &mut String, bots: &[BotSample<'_>], name: &str, help: &str, value: impl Fn(&BotSample<'_>) -> f64) {
    header(r, name, "gauge", help);
    for b in bots {
        let _ = writeln!(r, "{name}{{bot=\"{}\"}} {}", esc(&b.bot), value(b));
    }
}

fn counter(r: &mut String, bots: &[BotSample<'_>], name: &str, help: &str, value: impl Fn(&BotMetrics) -> &AtomicU64) {
    header(r, name, "counter", help);
    for b in bots {
        let _ = writeln!(r, "{name}{{bot=\"{}\"}} {}", esc(&b.bot), value(b.metrics).load(Ordering::Relaxed));
    }
}

fn histogram(r: &mut String, bots: &[BotSample<'_>], name: &str, help: &str, of: impl Fn(&BotMetrics) -> &Histogram) {
    header(r, name, "histogram", help);
    for b in bots {
        samples(r, name, &format!("bot=\"{}\"", esc(&b.bot)), of(b.metrics));
    }
}

/// One histogram's samples under `labels` (already escaped).
fn samples(r: &mut String, name: &str, labels: &str, h: &Histogram) {
    let count = h.count.load(Ordering::Relaxed);
    let mut cumulative = 0;
    for (bound, n) in BUCKETS.iter().zip(&h.buckets) {
        cumulative += n.load(Ordering::Relaxed);
        let _ = writeln!(r, "{name}_bucket{{{labels},le=\"{bound}\"}} {cumulative}");
    }
    let _ = writeln!(r, "{name}_bucket{{{labels},le=\"+Inf\"}} {count}");
    let sum = h.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
    let _ = writeln!(r, "{name}_sum{{{labels}}} {sum}");
    let _ = writeln!(r, "{name}_count{{{labels}}} {count}");
}

/// The process: resident memory, threads and open descriptors, from `/proc/self` on Linux.
/// Elsewhere (macOS) these are left out: reading them there needs Mach calls not worth it for
/// three gauges (`ps`/`lsof` answer the same).
fn process(r: &mut String) {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return };
    let field = |key: &str| {
        status.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
    };
    if let Some(kib) = field("VmRSS:") {
        header(r, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
        let _ = writeln!(r, "process_resident_memory_bytes {}", kib * 1024);
    }
    if let Some(threads) = field("Threads:") {
        header(r, "process_threads", "gauge", "Threads of the gateway process.");
        let _ = writeln!(r, "process_threads {threads}");
    }
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        header(r, "process_open_fds", "gauge", "Open file descriptors.");
        // The directory listing holds one descriptor itself.
        let _ = writeln!(r, "process_open_fds {}", fds.count().saturating_sub(1));
    }
}

/// A label value: `\`, `"` and newlines escaped.
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_histograms_and_escapes_labels() {
        let m = BotMetrics::default();
        BotMetrics::add(&m.updates_received, 3);
        m.request("getUpdates", 200, Duration::from_millis(30));
        m.request("getUpdates", 200, Duration::from_secs(70));
        m.request("sendMessage", 400, Duration::from_millis(2));
        m.stream_connects.store(3, Ordering::Relaxed);
        let sample = BotSample {
            bot: "@a\"b".into(),
            metrics: &m,
            queue_depth: 4,
            outbox_depth: 0,
            connected: true,
            credential_refused: false,
            failed_threads: 0,
            store_commits: 9,
        };
        let calls = PlatformCalls { calls: Mutex::new(BTreeMap::new()) };
        calls.observe("reserve_message_ids", Duration::from_micros(400));
        calls.observe("reserve_message_ids", Duration::from_micros(2000));
        let text = render_with(&[sample], &calls);
        for line in [
            "botgw_queue_depth{bot=\"@a\\\"b\"} 4",
            "botgw_updates_received_total{bot=\"@a\\\"b\"} 3",
            "botgw_store_commits_total{bot=\"@a\\\"b\"} 9",
            "botgw_platform_reconnects_total{bot=\"@a\\\"b\"} 2",
            "botgw_bot_api_requests_total{bot=\"@a\\\"b\",method=\"getUpdates\",status=\"200\"} 2",
            "botgw_bot_api_requests_total{bot=\"@a\\\"b\",method=\"sendMessage\",status=\"400\"} 1",
            "botgw_get_updates_duration_seconds_bucket{bot=\"@a\\\"b\",le=\"0.025\"} 0",
            "botgw_get_updates_duration_seconds_bucket{bot=\"@a\\\"b\",le=\"0.05\"} 1",
            "botgw_get_updates_duration_seconds_bucket{bot=\"@a\\\"b\",le=\"60\"} 1",
            "botgw_get_updates_duration_seconds_bucket{bot=\"@a\\\"b\",le=\"+Inf\"} 2",
            "botgw_get_updates_duration_seconds_count{bot=\"@a\\\"b\"} 2",
            "# TYPE botgw_send_message_duration_seconds histogram",
            "botgw_platform_call_duration_seconds_bucket{method=\"ReserveMessageIds\",le=\"0.0005\"} 1",
            "botgw_platform_call_duration_seconds_bucket{method=\"ReserveMessageIds\",le=\"0.001\"} 1",
            "botgw_platform_call_duration_seconds_bucket{method=\"ReserveMessageIds\",le=\"0.0025\"} 2",
            "botgw_platform_call_duration_seconds_sum{method=\"ReserveMessageIds\"} 0.0024",
            "botgw_platform_call_duration_seconds_count{method=\"ReserveMessageIds\"} 2",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
        }
        assert!(text.ends_with('\n'));
        // Each TYPE line once, before its samples.
        let types: Vec<&str> = text.lines().filter(|l| l.starts_with("# TYPE ")).collect();
        let mut unique = types.clone();
        unique.dedup();
        assert_eq!(types.len(), unique.len());
    }
}
