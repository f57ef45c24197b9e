//! The gateway runtime: a device of each configured bot on the platform, serving the Bot API.
//!
//! Start-up (`serve`): config (placeholders refused) → state_dir lock → bind both listeners'
//! addresses → per bot: encrypted store, registration, inbox, outbox and webhook threads →
//! serve the two HTTP listeners → wait for SIGINT/SIGTERM. Everything that can fail locally is
//! checked before the first registration, so a start that fails leaves no device behind.

mod advice;
pub mod api;
pub mod botapi;
pub mod check;
pub mod config;
pub mod ctx;
pub mod groups;
mod health;
pub mod held_bots;
pub mod history;
pub mod inbox;
pub mod keyboard;
pub mod metrics;
pub mod outbox;
pub mod port;
pub mod registration;
pub mod runtime;
pub mod send_wait;
pub mod sender_check;
pub mod start_error;
pub mod state_commands;
pub mod state_dir;
pub mod status;
pub mod store;
pub mod threads;
pub mod updates;
pub mod wake;
pub mod webhook;
pub mod withheld;
#[cfg(test)]
mod testing;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{json, Value};

use api::{Backend, BotApi, Listener, ListenerKind};
use crate::http::HostRule;
use runtime::BotShared;

/// All configured bots, as the listeners see them.
pub struct Gateway {
    bots: HashMap<u64, Arc<BotShared>>,
    /// The Bot API listener's health, once it listens: both listeners' `/healthz` report it.
    bot_api: OnceLock<crate::http::Health>,
}

impl Backend for Gateway {
    fn bot(&self, token: &str) -> Option<Arc<dyn BotApi>> {
        let parsed = crate::wire::token::parse(token)?;
        let shared = self.bots.get(&parsed.numeric_id)?;
        if !shared.token_matches(token) {
            return None;
        }
        Some(shared.clone() as Arc<dyn BotApi>)
    }

    fn health(&self) -> Value {
        let mut bots: Vec<&Arc<BotShared>> = self.bots.values().collect();
        bots.sort_by_key(|b| b.compat_user_id);
        let list: Vec<Value> = bots.iter().map(|b| b.health()).collect();
        // Connected and storing: a bot whose commits fail (a full disk) is degraded too.
        let healthy = list.iter().all(|b| b["connected"] == true && b.get("storage_failing").is_none());
        // A bot with a dead thread is half-alive: say so, and let a supervisor restart us.
        // So is a bot whose credential the platform refuses (token replaced, bot disabled,
        // device removed): it will never receive again without the operator.
        let broken = list.iter().any(|b| b.get("failed_threads").is_some() || b["revoked"] == true);
        let listener = self.bot_api.get().map(|h| h.report());
        let serving = listener.as_ref().is_some_and(|r| r.serving);
        let mut bot_api = json!({"serving": serving});
        if let Some(r) = &listener {
            bot_api["connections"] = json!(r.connections);
            bot_api["workers"] = json!(r.workers);
        }
        match listener.as_ref().map(|r| r.problem) {
            None => bot_api["problem"] = json!("not listening yet"),
            Some(Some(p)) => bot_api["problem"] = json!(p),
            Some(None) => {}
        }
        json!({
            "ok": serving && !broken,
            "status": if !serving || broken { "unhealthy" } else if healthy { "ok" } else { "degraded" },
            "compatibility_profile_id": config::COMPATIBILITY_PROFILE_ID,
            "bot_api": bot_api,
            "bots": list,
        })
    }

    fn metrics(&self) -> String {
        let mut bots: Vec<&Arc<BotShared>> = self.bots.values().collect();
        bots.sort_by_key(|b| b.compat_user_id);
        let samples: Vec<metrics::BotSample<'_>> = bots.iter().map(|b| b.metrics_sample()).collect();
        metrics::render(&samples)
    }

    fn given_up(&self) -> Value {
        let mut bots: Vec<&Arc<BotShared>> = self.bots.values().collect();
        bots.sort_by_key(|b| b.compat_user_id);
        json!({ "bots": bots.iter().map(|b| b.given_up()).collect::<Vec<Value>>() })
    }
}

pub use start_error::StartError;

/// How long the bots' threads get to stop at shutdown (a webhook request in flight may take
/// its 30 s read timeout; it is not waited for beyond this).
const SHUTDOWN_DEADLINE: std::time::Duration = std::time::Duration::from_secs(5);

const HELP: &str = "\
bot-gateway: runs Bot HTTP API bots (python-telegram-bot, aiogram, telegraf, ...) on the
end-to-end encrypted platform, as a device of each bot

Usage:
  bot-gateway serve CONFIG
      Runs the gateway in the foreground with the config file CONFIG (see below): the Bot API
      on compat_listen_addr; /healthz, /metrics and /outbox/given-up (the messages it gave
      up, newest first) on extensions_listen_addr. Prints `compat listening on ADDR` and
      `extensions listening on ADDR` once serving; logs go to stderr (RUST_LOG: error, warn,
      info (default), debug). SIGTERM or SIGINT stops it gracefully. Exit status 1 when it
      cannot start (the message names what and the fix).

  bot-gateway check-config CONFIG [--connect]
      Checks CONFIG without starting anything: its fields, its mode (0600), state_dir
      (owner, mode 0700, writable) and the listen addresses. With --connect it also reaches
      bot_platform_endpoint and checks each bot's token, username and first_name there
      (registers nothing). Prints each problem and its fix; exit status 0 when all is well,
      1 when not.

  bot-gateway reset-state CONFIG @BOT
      Throws away one bot's state on purpose: its device, sessions, queued updates, history
      and groups. Its database files are moved aside (not deleted) and the next start
      registers a new device. Only while no gateway runs on the state_dir. The way on when a
      start refuses a bot whose database lost its contents and no copy with its -wal is left.

  bot-gateway backup CONFIG --out DIR
      Copies every bot's state database into DIR (made 0700), consistent and still encrypted,
      with SQLite's online backup API, while the gateway runs; each copy is checked, and
      DIR/backup.json names them. Back up daily, and before upgrades (docs/operations.md).

  bot-gateway restore CONFIG --from DIR
      Puts each bot's database from a backup DIR back into state_dir, once it passes the
      integrity check and belongs to the config's bot; the files it replaces are moved aside.
      Only while no gateway runs on the state_dir. What happened after the backup is lost;
      sessions are started anew at the bot's next message to each user; groups are rejoined.

  bot-gateway check-state CONFIG
      Checks every bot's state database whole (it opens with the bot's key, every page
      authenticates, SQLite's integrity check passes) without starting; safe while the
      gateway runs. Says which fault it found and the fix; exit status 1 when one is found.

  bot-gateway help [COMMAND]
      This help, or one command's part of it (also: COMMAND --help).

  bot-gateway --version
      The version and the compatibility_profile_id it implements.

Exit status: 0 success, help, version; 1 a failure (start-up, check-config problems);
2 a usage error.
";

/// The program's command-line conventions (`crate::cli`).
pub const PROGRAM: crate::cli::Program =
    crate::cli::Program { name: "bot-gateway", help: HELP, commands: &["serve", "check-config", "reset-state", "backup", "restore", "check-state", "help"] };

/// Entry point of the `bot-gateway` program. Help and version print and return; usage errors
/// are [`StartError::Usage`] (exit status 2).
pub fn run_cli(args: Vec<String>) -> Result<(), StartError> {
    use crate::cli::{Early, UsageError};
    let usage = |e: UsageError| StartError::Usage(e.0);
    if let Early::Print(text) = PROGRAM.early(&args).map_err(usage)? {
        let text = if text == HELP { format!("{HELP}\n{}", config::reference()) } else { text };
        crate::cli::print(&text);
        return Ok(());
    }
    let needs_config = |cmd: &str| UsageError(format!("{cmd} needs the config file: bot-gateway {cmd} CONFIG (see bot-gateway {cmd} --help)"));
    match args.first().map(String::as_str) {
        Some("serve") => match &args[1..] {
            [path] if !path.starts_with('-') => serve(Path::new(path)),
            [] => Err(usage(needs_config("serve"))),
            [flag] => Err(usage(PROGRAM.unknown_option("serve", flag, &[]))),
            [_, extra, ..] => Err(usage(UsageError(format!("serve takes one config file; unexpected {extra:?}")))),
        },
        Some("check-config") => {
            let mut path = None;
            let mut connect = false;
            for a in &args[1..] {
                match a.as_str() {
                    "--connect" => connect = true,
                    flag if flag.starts_with('-') => return Err(usage(PROGRAM.unknown_option("check-config", flag, &["--connect"]))),
                    p if path.is_none() => path = Some(p),
                    extra => return Err(usage(UsageError(format!("check-config takes one config file; unexpected {extra:?}")))),
                }
            }
            let path = path.ok_or_else(|| usage(needs_config("check-config")))?;
            if check::run(Path::new(path), connect) {
                Ok(())
            } else {
                Err(StartError::CheckFailed)
            }
        }
        Some("reset-state") => match &args[1..] {
            [path, bot] if !path.starts_with('-') && !bot.starts_with('-') => reset_state(Path::new(path), bot),
            [flag, ..] if flag.starts_with('-') => Err(usage(PROGRAM.unknown_option("reset-state", flag, &[]))),
            _ => Err(usage(UsageError("reset-state needs the config file and the bot: bot-gateway reset-state CONFIG @BOT".into()))),
        },
        Some(cmd @ ("backup" | "restore")) => {
            let (flag, action) = if cmd == "backup" { ("--out", "backup CONFIG --out DIR") } else { ("--from", "restore CONFIG --from DIR") };
            let [path, given, dir] = &args[1..] else {
                return Err(usage(UsageError(format!("{cmd} needs the config file and the directory: bot-gateway {action}"))));
            };
            if path.starts_with('-') || given != flag {
                let odd = if path.starts_with('-') { path } else { given };
                return Err(usage(PROGRAM.unknown_option(cmd, odd, &[flag])));
            }
            let said = if cmd == "backup" {
                state_commands::backup(Path::new(path), Path::new(dir))?
            } else {
                state_commands::restore(Path::new(path), Path::new(dir))?
            };
            crate::cli::print(&format!("{said}\n"));
            Ok(())
        }
        Some("check-state") => match &args[1..] {
            [path] if !path.starts_with('-') => {
                let (report, ok) = state_commands::check_state(Path::new(path))?;
                crate::cli::print(&format!("{report}\n"));
                if ok {
                    Ok(())
                } else {
                    Err(StartError::State("check-state found problems (see above)".into()))
                }
            }
            [] => Err(usage(needs_config("check-state"))),
            [flag, ..] if flag.starts_with('-') => Err(usage(PROGRAM.unknown_option("check-state", flag, &[]))),
            [_, extra, ..] | [extra] => Err(usage(UsageError(format!("check-state takes one config file; unexpected {extra:?}")))),
        },
        Some(flag) if flag.starts_with('-') => Err(usage(UsageError(format!(
            "unknown option {flag}; the options are --help and --version (see bot-gateway --help)"
        )))),
        Some(cmd) => Err(usage(PROGRAM.unknown_command(cmd))),
        None => Err(usage(UsageError("no command given; the commands are: serve, check-config, reset-state, backup, restore, check-state, help (see bot-gateway --help)".into()))),
    }
}

/// `reset-state CONFIG @BOT`: takes the state_dir's lock (so no gateway runs on it), then
/// `held_bots::reset`, and prints what was thrown away.
fn reset_state(config_path: &Path, bot: &str) -> Result<(), StartError> {
    let config = config::load(config_path).map_err(StartError::Config)?;
    let name = bot.trim_start_matches('@');
    let Some(bot) = config.bots.iter().find(|b| b.username.eq_ignore_ascii_case(name)) else {
        let known: Vec<String> = config.bots.iter().map(|b| format!("@{}", b.username)).collect();
        return Err(StartError::Usage(format!("{} has no bot @{name}; its bots are {}", config_path.display(), known.join(", "))));
    };
    let state = state_dir::StateDir::open(&config.state_dir).map_err(StartError::StateDir)?;
    let said = held_bots::reset(&state, bot.compat_user_id, &bot.username, crate::clock::unix_now()).map_err(StartError::Held)?;
    crate::cli::print(&format!("{said}\n"));
    Ok(())
}

fn serve(config_path: &Path) -> Result<(), StartError> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info,refinery_core=warn"))
        // ureq logs every webhook URL at debug/info level, and a URL may carry a secret path.
        .filter_module("ureq", log::LevelFilter::Warn)
        .init();
    // Everything we create in state_dir (databases, WAL files, the lock) is 0600.
    // SAFETY: umask only changes this process's file-creation mask.
    unsafe { libc::umask(0o077) };
    raise_descriptor_limit();
    crate::crypto::init();
    let signals = crate::signals::block();

    let config = config::load(config_path).map_err(StartError::Config)?;
    for warning in &config.warnings {
        log::warn!("{warning}");
    }
    let state = state_dir::StateDir::open(&config.state_dir).map_err(StartError::StateDir)?;
    // Bound now, served once the bots are up: a port in use must fail the start before any
    // bot registers a device.
    let bind = |field: &'static str, addr: std::net::SocketAddr| {
        std::net::TcpListener::bind(addr).map_err(|why| StartError::Listen { field, addr, why })
    };
    let compat_socket = bind("compat_listen_addr", config.compat_listen_addr)?;
    let ext_socket = bind("extensions_listen_addr", config.extensions_listen_addr)?;

    let held = held_bots::HeldBots::load(state.path()).map_err(StartError::Held)?;
    let (bots, running) = start_bots(&config, &state, &Holdings { held: Mutex::new(held), config_path })?;
    let upkeep = threads::UpkeepTicker::start(&running).map_err(|why| StartError::Thread { bot: "(all)".into(), why })?;
    let bot_count = bots.len();
    let gateway = Arc::new(Gateway { bots, bot_api: OnceLock::new() });

    let compat = Listener::on(
        "compat-http",
        compat_socket,
        gateway.clone() as Arc<dyn Backend>,
        ListenerKind::Compat,
        api::compat_limits(bot_count, HostRule::for_listener(config.compat_listen_addr, &config.allowed_host_names)),
    )
    .map_err(|why| StartError::Listen { field: "compat_listen_addr", addr: config.compat_listen_addr, why })?;
    let _ = gateway.bot_api.set(compat.health());
    let ext = Listener::on(
        "ext-http",
        ext_socket,
        gateway.clone() as Arc<dyn Backend>,
        ListenerKind::Extensions { bot_api: compat.local_addr() },
        api::extensions_limits(HostRule::for_listener(config.extensions_listen_addr, &config.allowed_host_names)),
    )
    .map_err(|why| StartError::Listen { field: "extensions_listen_addr", addr: config.extensions_listen_addr, why })?;
    log::info!("Bot API on http://{}, extensions on http://{}", compat.local_addr(), ext.local_addr());
    announce_listeners(compat.local_addr(), ext.local_addr());

    let sig = crate::signals::wait(&signals);
    log::info!("signal {sig} received, stopping");
    // Long polls and waits for the outbox end first, so the listeners can join their workers; then the bots' threads
    // stop (every step they take is a transaction, so stopping anywhere is safe) and are
    // joined; the last handle on each store closes it, which joins its writer.
    for bot in gateway.bots.values() {
        bot.end_requests();
    }
    compat.shutdown();
    ext.shutdown();
    upkeep.stop();
    let deadline = std::time::Instant::now() + SHUTDOWN_DEADLINE;
    for threads in running {
        threads.stop(deadline);
    }
    drop(gateway);
    drop(state);
    log::info!("stopped");
    Ok(())
}

/// Bots started at once: a start is mostly waiting (round trips to the platform, fsyncs), so
/// a gateway of a thousand bots starts several at a time.
const STARTERS: usize = 4;

/// Opens, registers and starts every bot of the config, `STARTERS` at a time (threads
/// `start-<i>`, joined before this returns). The first failure in config order is the error.
/// A started bot: its shared state and its threads.
type Started = (Arc<BotShared>, threads::BotThreads);
/// Every bot started: by user id, and their threads.
type StartedBots = (HashMap<u64, Arc<BotShared>>, Vec<threads::BotThreads>);

/// What the state_dir held before this start (`held_bots`), recorded as bots start, and the
/// config's path for the sentence that refuses a bot whose database lost everything.
struct Holdings<'a> {
    held: Mutex<held_bots::HeldBots>,
    config_path: &'a Path,
}

fn start_bots(config: &config::Config, state: &state_dir::StateDir, holdings: &Holdings<'_>) -> Result<StartedBots, StartError> {
    let next = AtomicUsize::new(0);
    let results: Vec<Mutex<Option<Result<Started, StartError>>>> =
        config.bots.iter().map(|_| Mutex::new(None)).collect();
    let failed = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for k in 0..STARTERS.min(config.bots.len()) {
            let (next, results, failed) = (&next, &results, &failed);
            let starter = move || loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                // After a failure the rest are not started: the gateway will not run.
                if i >= config.bots.len() || failed.load(Ordering::SeqCst) {
                    return;
                }
                let outcome = start_bot(config, state, holdings, i);
                if outcome.is_err() {
                    failed.store(true, Ordering::SeqCst);
                }
                *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(outcome);
            };
            if let Err(e) = std::thread::Builder::new().name(format!("start-{k}")).spawn_scoped(scope, starter) {
                log::error!("cannot start a bot starter thread: {e}");
            }
        }
    });
    let mut bots = HashMap::new();
    let mut running = Vec::new();
    for result in results {
        match result.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(Ok((shared, threads))) => {
                bots.insert(shared.compat_user_id, shared);
                running.push(threads);
            }
            Some(Err(e)) => return Err(e),
            // Not started because another failed (that error comes in its place), or no
            // starter thread could run at all.
            None if failed.load(Ordering::SeqCst) => continue,
            None => return Err(StartError::Thread { bot: "(all)".into(), why: std::io::Error::other("no bot starter thread could run") }),
        }
    }
    Ok((bots, running))
}

/// Opens, registers and starts the bot at `i` in the config.
fn start_bot(config: &config::Config, state: &state_dir::StateDir, holdings: &Holdings<'_>, i: usize) -> Result<Started, StartError> {
    let bot = &config.bots[i];
    let name = &bot.username;
    let index = i + 1;
    log::info!("bot #{index} is @{name}: its threads are wr/{index}, ins/{index}, in/{index}, out/{index} (and wh/{index}, whr/{index} while a webhook delivers)");
    let db = state.bot_database(bot.compat_user_id);
    // A bot this state_dir held whose database lost everything is not started as a new one.
    let held = holdings.held.lock().unwrap_or_else(|e| e.into_inner()).get(bot.compat_user_id);
    if let Some(held) = held {
        if let Some(what) = held_bots::lost(&db, &bot.recovery_secret) {
            let config_path = holdings.config_path.display().to_string();
            return Err(StartError::LostState { bot: name.clone(), why: held_bots::refusal(&db, held, &what, &config_path, name) });
        }
    }
    if let Some(previous) = &bot.previous_recovery_secret {
        // After a /rekey: the state is moved to the new secret's key first (kept whole).
        store::rekey::move_to_new_secret(&db, previous, &bot.recovery_secret, &bot.bot_id_hex)
            .map_err(|why| StartError::Store { bot: name.clone(), why: Box::new(why) })?;
    }
    let store = store::Store::open(&db, &bot.recovery_secret, &bot.bot_id_hex, &threads::thread_name("wr", index))
        .map_err(|why| StartError::Store { bot: name.clone(), why: Box::new(why) })?;
    let platform = match registration::register_or_resume(&config.bot_platform_endpoint, bot, &store) {
        Ok(p) => p,
        Err(why) => {
            store.discard_new();
            return Err(StartError::Registration { bot: name.clone(), why });
        }
    };
    let shared = Arc::new(BotShared::new(bot, store, Arc::new(platform)).with_delivery(config.delivery.clone()));
    let recorded = holdings.held.lock().unwrap_or_else(|e| e.into_inner()).record(bot.compat_user_id, shared.device_id(), crate::clock::unix_now());
    if let Err(e) = recorded {
        // The bot runs; only the guard against a lost database waits for the next start.
        log::error!("bot @{name}: cannot record it in {}: {e}", held_bots::FILE);
    }
    if let Err(e) = inbox::replenish_prekeys(&shared.ctx()) {
        log::warn!("bot @{name}: one-time prekey top-up failed: {e}");
    }
    let upkeep = inbox::SignedPrekeyUpkeep::at_start(&shared.ctx());
    let threads = threads::BotThreads::start(&shared, index, upkeep).map_err(|why| StartError::Thread { bot: name.clone(), why })?;
    Ok((shared, threads))
}

/// Raises the soft limit on open descriptors to the hard limit (systemd's default soft limit
/// is 1024), so that bursts of connections run into the listeners' own bounds, not into
/// EMFILE. The listeners survive EMFILE anyway; this only makes it rarer.
fn raise_descriptor_limit() {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 || lim.rlim_cur >= lim.rlim_max {
            return;
        }
        let wanted = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &wanted) != 0 {
            // macOS refuses values above OPEN_MAX for an "unlimited" hard limit.
            let capped = libc::rlimit { rlim_cur: lim.rlim_max.min(10_240), rlim_max: lim.rlim_max };
            libc::setrlimit(libc::RLIMIT_NOFILE, &capped);
        }
    }
}

/// Prints the bound addresses for whoever started us. stdout may already be closed (a
/// supervisor that only wanted the first line, launchd with no stdout): that must not stop a
/// running gateway, so write errors are ignored instead of panicking as `println!` would.
fn announce_listeners(compat: std::net::SocketAddr, ext: std::net::SocketAddr) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "compat listening on {compat}").and_then(|_| writeln!(out, "extensions listening on {ext}")).and_then(|_| out.flush());
}
