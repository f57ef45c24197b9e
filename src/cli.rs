//! The command-line conventions of all three programs, in one place:
//!
//! - `--version` (or `-V`) prints `<program> <version> (compatibility_profile_id <id>)`;
//! - `--help`, `-h` and `help` print the program's help, `help COMMAND` and
//!   `COMMAND --help` that command's part of it;
//! - a usage error (an unknown command or option, a missing argument) says what exists and
//!   exits with status 2 ([`USAGE_EXIT`]); help and version exit 0; any other failure 1.
//!
//! A program's help text is the one source of its per-command help: a command's part is the
//! line that names it (`  bot-gateway serve CONFIG`, `  register USERNAME …`) and the lines
//! indented below it.

use std::fmt;

/// Exit status of a usage error (the convention of BSD `sysexits` and most CLIs).
pub const USAGE_EXIT: i32 = 2;

/// A command line that does not say what the program can do: exit status [`USAGE_EXIT`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// One program's name, help text and commands.
pub struct Program {
    pub name: &'static str,
    /// The whole `--help` text.
    pub help: &'static str,
    /// The commands `help COMMAND` and `COMMAND --help` know.
    pub commands: &'static [&'static str],
}

/// What the command line asks for before any command runs.
#[derive(Debug, PartialEq, Eq)]
pub enum Early {
    /// Print this on stdout and exit 0.
    Print(String),
    /// Nothing: run the command.
    Run,
}

/// `<program> <version> (compatibility_profile_id <id>)`.
pub fn version_line(program: &str) -> String {
    format!(
        "{program} {} (compatibility_profile_id {})",
        env!("CARGO_PKG_VERSION"),
        crate::compat::COMPATIBILITY_PROFILE_ID
    )
}

fn is_help(arg: &str) -> bool {
    arg == "--help" || arg == "-h"
}

impl Program {
    /// `--version`, `--help`, `help [COMMAND]` and `COMMAND --help` when they come first
    /// (after the program name); an unknown `help COMMAND` is a usage error.
    pub fn early(&self, args: &[String]) -> Result<Early, UsageError> {
        let first = args.first().map(String::as_str);
        let second = args.get(1).map(String::as_str);
        match (first, second) {
            (Some("--version" | "-V"), _) => Ok(Early::Print(format!("{}\n", version_line(self.name)))),
            (Some(h), _) if is_help(h) => Ok(Early::Print(self.help.to_string())),
            (Some("help"), None) => Ok(Early::Print(self.help.to_string())),
            (Some("help"), Some(cmd)) => self.command_help(cmd).map(Early::Print).ok_or_else(|| self.unknown_command(cmd)),
            (Some(cmd), Some(h)) if is_help(h) && self.commands.contains(&cmd) => {
                Ok(Early::Print(self.command_help(cmd).unwrap_or_else(|| self.help.to_string())))
            }
            _ => Ok(Early::Run),
        }
    }

    /// The part of the help text about `command`: its line and the lines indented below it.
    pub fn command_help(&self, command: &str) -> Option<String> {
        if !self.commands.contains(&command) {
            return None;
        }
        let lines: Vec<&str> = self.help.lines().collect();
        let indent = |l: &str| l.len() - l.trim_start().len();
        let start = lines.iter().position(|l| {
            let mut words = l.split_whitespace();
            let mut word = words.next();
            if word == Some(self.name) {
                word = words.next();
            }
            indent(l) > 0 && word.map(|w| w.trim_matches(['[', ']'])) == Some(command)
        })?;
        let own = indent(lines[start]);
        let mut text = format!("Usage:\n{}\n", lines[start]);
        for l in &lines[start + 1..] {
            if l.trim().is_empty() || indent(l) <= own {
                break;
            }
            text.push_str(l);
            text.push('\n');
        }
        text.push_str(&format!("\n(all commands: {} --help)\n", self.name));
        Some(text)
    }

    /// "unknown command X; the commands are: a, b, c".
    pub fn unknown_command(&self, command: &str) -> UsageError {
        UsageError(format!(
            "unknown command {command:?}; the commands are: {} (see {} --help)",
            self.commands.join(", "),
            self.name
        ))
    }

    /// "unknown option --x for COMMAND; its options are: --a, --b".
    pub fn unknown_option(&self, context: &str, option: &str, options: &[&str]) -> UsageError {
        let known = if options.is_empty() { "it takes no options".to_string() } else { format!("its options are: {}", options.join(", ")) };
        UsageError(format!("unknown option {option} for {context}; {known} (see {} --help)", self.name))
    }

    /// Prints a usage error the way every program does and exits with [`USAGE_EXIT`].
    pub fn exit_usage(&self, e: &UsageError) -> ! {
        eprintln!("{}: {e}", self.name);
        std::process::exit(USAGE_EXIT)
    }
}

/// Prints `text` on stdout, ignoring a closed pipe (`bot-gateway --help | head`).
pub fn print(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELP: &str = "\
demo: a demo

Usage:
  demo serve CONFIG
      Serves.
      More.

  demo [check] CONFIG [--connect]
      Checks.
  other line
";

    fn demo() -> Program {
        Program { name: "demo", help: HELP, commands: &["serve", "check"] }
    }

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn help_version_and_command_help() {
        let p = demo();
        assert_eq!(p.early(&args(&["--help"])), Ok(Early::Print(HELP.into())));
        assert_eq!(p.early(&args(&["help"])), Ok(Early::Print(HELP.into())));
        let Ok(Early::Print(v)) = p.early(&args(&["--version"])) else { panic!("version") };
        assert!(v.starts_with("demo ") && v.contains(crate::compat::COMPATIBILITY_PROFILE_ID), "{v}");
        let Ok(Early::Print(serve)) = p.early(&args(&["serve", "--help"])) else { panic!("serve help") };
        assert!(serve.contains("demo serve CONFIG") && serve.contains("More.") && !serve.contains("Checks."), "{serve}");
        let Ok(Early::Print(check)) = p.early(&args(&["help", "check"])) else { panic!("check help") };
        assert!(check.contains("--connect") && check.contains("Checks.") && !check.contains("other line"), "{check}");
        let err = p.early(&args(&["help", "frob"])).expect_err("unknown");
        assert!(err.0.contains("\"frob\"") && err.0.contains("serve, check"), "{err}");
        assert_eq!(p.early(&args(&["serve", "x.json"])), Ok(Early::Run));
        assert_eq!(p.early(&args(&[])), Ok(Early::Run));
    }
}
