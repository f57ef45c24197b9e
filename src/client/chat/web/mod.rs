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
        let opened = if open { open_browser(dir, &url) } else { None };
        let signal = crate::signals::wait(&blocked);
        log::info!("{signal}: stopping the web chat");
        page.close();
        http.shutdown();
        // An opener still running (it may live as long as the browser) is left to init.
        if let Some((mut child, page)) = opened {
            let _ = child.try_wait();
            let _ = std::fs::remove_file(page);
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

/// Asks the desktop (`xdg-open` on Linux, `open` on macOS) to open a page of the profile that
/// forwards to `url`, as Jupyter opens its own: the session token stays off the opener's and
/// the browser's command lines, which every user of the machine can read. Returns the opener
/// and that page, removed when the chat stops. A failure is said, not fatal: the address is
/// printed.
fn open_browser(dir: &Path, url: &str) -> Option<(std::process::Child, std::path::PathBuf)> {
    let page = match forwarding_page(dir, url) {
        Ok(page) => page,
        Err(e) => {
            eprintln!("e2e-chat web: cannot write the page that opens the chat ({e}); open the address above yourself");
            return None;
        }
    };
    let program = if cfg!(target_os = "macos") { "open" } else { "xdg-open" };
    let null = std::process::Stdio::null;
    match std::process::Command::new(program).arg(&page).stdin(null()).stdout(null()).stderr(null()).spawn() {
        Ok(child) => Some((child, page)),
        Err(e) => {
            eprintln!("e2e-chat web: cannot run {program} ({e}); open the address above yourself");
            let _ = std::fs::remove_file(&page);
            None
        }
    }
}

/// Writes `web-open.html` in the profile (readable by its owner only): a page that forwards
/// to `url`. Returns its absolute path.
fn forwarding_page(dir: &Path, url: &str) -> std::io::Result<std::path::PathBuf> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = std::fs::canonicalize(dir)?.join("web-open.html");
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&path)?;
    write!(
        file,
        "<!DOCTYPE html><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0;url={url}\"><title>e2e-chat</title><a href=\"{url}\">Open the chat</a>\n"
    )?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    /// The page the desktop opens forwards to the address with its token, and only the
    /// profile's owner can read it.
    #[test]
    fn the_forwarding_page_is_the_owners_and_names_the_address() {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = "http://127.0.0.1:8090/?token=00ff";
        let page = super::forwarding_page(dir.path(), url).expect("written");
        assert!(page.is_absolute() && page.ends_with("web-open.html"), "{}", page.display());
        assert_eq!(std::fs::metadata(&page).expect("stat").permissions().mode() & 0o777, 0o600);
        let html = std::fs::read_to_string(&page).expect("read");
        assert!(html.contains(&format!("http-equiv=\"refresh\" content=\"0;url={url}\"")), "{html}");
    }
}
