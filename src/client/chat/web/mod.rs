//! `e2e-chat web`: chat mode in a browser. The same session as a terminal's (the reader and
//! sender threads, the outbox, the commands), with a page instead of a screen: the chat view
//! (`tui::view::View`) is served as JSON to a page embedded in the binary, and what the page
//! types goes through the same `handle_line`. Decryption and keys stay in this process; the
//! page talks only to this loopback server.
//!
//! - `model`: the view with a version, long-polled by the page.
//! - `server`: the HTTP handler (session token, `Host` and `Origin` checks, CSP) and its paths;
//!   `input` is what requests act through, `answer` what they are answered with.
//! - `files`: a message's file served to the page, and files the page sends (staged first).
//! - `identity`: the "who is this" panel (verify, trust).
//! - `token`: the session token, kept in the profile so a page reconnects after a restart.

mod answer;
mod files;
mod identity;
mod input;
pub(super) mod model;
mod server;
mod token;

use std::io::Write;
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;


use super::super::profile::Profile;
use super::super::tui::view::{ChatKey, View};
use super::screen::Screen;
use model::Page;
use super::{about_peer, run_session};
use crate::cli::{CliError, Context};
use crate::http::{HostRule, Limits, Server};

/// The dialog the page opens with when no peer is named: the platform's management bot, which
/// every profile can talk to.
const DEFAULT_PEER: &str = "@BotManager";
/// Where the server listens unless `--listen` says otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8090";

/// Serves the chat of the profile at `dir` on `listen` (loopback only) until SIGINT or SIGTERM.
pub(in crate::client) fn web(dir: &Path, server: Option<&str>, peer: Option<&str>, listen: &str, open: bool) -> Result<(), CliError> {
    // Before any thread starts, so that every thread leaves the signals to the main one.
    let blocked = crate::signals::block();
    let listener = bind_loopback(listen)?;
    let addr = listener.local_addr().context("reading the listener's address")?;
    let typist = Profile::open_at(dir, server)?;
    let peer_profile = typist.lookup(peer.unwrap_or(DEFAULT_PEER))?;
    let token = token::load_or_create(dir)?;
    let view = View::new(
        typist.username(),
        ChatKey::User(peer_profile.user_id),
        &format!("@{}", peer_profile.username),
        &about_peer(&typist, &peer_profile),
    );
    let page = Arc::new(Page::new(view));
    let stage_dir = files::make_stage().context("making a private directory for the files the page sends")?;
    let screen = Screen::Web(page.clone());
    let served = run_session(dir, server, typist, peer_profile, screen, |session| {
        let input = input::Input {
            typist: Profile::open_at(dir, server)?,
            screen: session.screen.clone(),
            target: session.target.clone(),
            jobs: session.jobs.clone(),
            stage_dir: stage_dir.clone(),
            staged: input::Staged::default(),
        };
        let handler = Arc::new(server::WebHandler::new(token.clone(), addr.port(), page.clone(), input));
        let limits = Limits {
            workers: 16,
            warm_workers: 2,
            // A file the page sends is up to 50 MiB (`files::stage`).
            max_body_bytes: crate::crypto::file::MAX_PLAINTEXT_LEN + 1,
            // A long poll waits up to 25 s for a change; a page's keep-alive lasts longer.
            idle_timeout: Duration::from_secs(120),
            hosts: HostRule::for_listener(addr, &[]),
            ..Limits::default()
        };
        let http = Server::from_listener("web", listener, limits, handler).context("starting the web server")?;
        let url = format!("http://{addr}/?token={token}");
        println!("open {url}");
        let _ = std::io::stdout().flush();
        eprintln!("e2e-chat web: serving the chat of @{} on http://{addr} (Ctrl-C stops it)", session.own);
        let mut opener = if open { open_browser(&url) } else { None };
        let signal = crate::signals::wait(&blocked);
        log::info!("{signal}: stopping the web chat");
        page.close();
        http.shutdown();
        // An opener still running (it may live as long as the browser) is left to init.
        if let Some(child) = opener.as_mut() {
            let _ = child.try_wait();
        }
        Ok(())
    });
    files::remove_stage(&stage_dir);
    served
}

/// Binds `listen`, which must be a loopback address: the page and its token are for this
/// machine's user only.
fn bind_loopback(listen: &str) -> Result<TcpListener, CliError> {
    let addrs: Vec<std::net::SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(listen)
        .map_err(|e| CliError::Usage(crate::cli::UsageError(format!("web: --listen {listen:?} is not an address: {e}"))))?
        .collect();
    let Some(addr) = addrs.first().filter(|a| a.ip().is_loopback()) else {
        return Err(CliError::Usage(crate::cli::UsageError(format!(
            "web: --listen {listen} is not a loopback address; the web chat listens on this machine only (say 127.0.0.1:8090)"
        ))));
    };
    TcpListener::bind(addr).context(&format!("listening on {addr}"))
}

/// Asks the desktop to open `url` (`xdg-open` on Linux, `open` on macOS); a failure is said,
/// not fatal: the address is printed.
fn open_browser(url: &str) -> Option<std::process::Child> {
    let program = if cfg!(target_os = "macos") { "open" } else { "xdg-open" };
    let null = std::process::Stdio::null;
    match std::process::Command::new(program).arg(url).stdin(null()).stdout(null()).stderr(null()).spawn() {
        Ok(child) => Some(child),
        Err(e) => {
            eprintln!("e2e-chat web: cannot run {program} ({e}); open the address above yourself");
            None
        }
    }
}
