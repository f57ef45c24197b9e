//! `bot-gateway check-config CONFIG [--connect]`: validates a config without starting
//! anything, with the same checks `serve` makes at start-up (`config::check_mode`,
//! `config::read`, `state_dir::check_existing`, `registration::connect_checked`), and prints
//! every finding on stdout: `ok:`, `warning:` or `problem:` and what to do.

use std::path::Path;

use super::{config, registration, state_dir};

/// Runs the checks and prints the findings; true when nothing is a problem.
pub fn run(path: &Path, connect: bool) -> bool {
    crate::crypto::init();
    let mut r = Report::default();
    match config::check_mode(path) {
        Ok(()) => r.ok(format!("config {} is readable by its owner only", path.display())),
        Err(e) => r.problem(e.to_string()),
    }
    let config = match config::read(path) {
        Ok(c) => c,
        Err(e) => {
            r.problem(e.to_string());
            return r.finish(path);
        }
    };
    let names: Vec<String> = config.bots.iter().map(|b| format!("@{}", b.username)).collect();
    r.ok(format!("fields are valid ({} bot(s): {})", config.bots.len(), names.join(", ")));
    for w in &config.warnings {
        r.warning(w.clone());
    }
    let in_use = match state_dir::check(&config.state_dir) {
        Ok((note, in_use)) => {
            r.ok(note);
            in_use
        }
        Err(e) => {
            r.problem(e.to_string());
            false
        }
    };
    for (field, addr) in [("compat_listen_addr", config.compat_listen_addr), ("extensions_listen_addr", config.extensions_listen_addr)] {
        match std::net::TcpListener::bind(addr) {
            Ok(_) => r.ok(format!("{field} {addr} can be bound")),
            // The running gateway holds its own ports.
            Err(_) if in_use => r.ok(format!("{field} {addr}: not tried, the running gateway holds state_dir")),
            Err(e) => r.problem(format!("{field} {addr} cannot be bound: {e} (another program on that port? choose a free one)")),
        }
    }
    if connect {
        for bot in &config.bots {
            match registration::connect_checked(&config.bot_platform_endpoint, bot) {
                Ok(_) => r.ok(format!(
                    "bot @{}: {} accepts the token; username and first_name match",
                    bot.username, config.bot_platform_endpoint
                )),
                Err(e) => r.problem(format!("bot @{}: {e}", bot.username)),
            }
        }
    } else {
        r.note("the platform was not contacted; add --connect to check the endpoint and each bot's token".into());
    }
    r.finish(path)
}

#[derive(Default)]
struct Report {
    problems: usize,
}

impl Report {
    fn line(&self, kind: &str, text: &str) {
        crate::cli::print(&format!("{kind}: {text}\n"));
    }
    fn ok(&mut self, text: String) {
        self.line("ok", &text);
    }
    fn note(&mut self, text: String) {
        self.line("note", &text);
    }
    fn warning(&mut self, text: String) {
        self.line("warning", &text);
    }
    fn problem(&mut self, text: String) {
        self.problems += 1;
        self.line("problem", &text);
    }
    fn finish(self, path: &Path) -> bool {
        if self.problems == 0 {
            crate::cli::print(&format!("config {} is ready: bot-gateway serve {}\n", path.display(), path.display()));
        } else {
            crate::cli::print(&format!("{} problem(s) in config {}\n", self.problems, path.display()));
        }
        self.problems == 0
    }
}
