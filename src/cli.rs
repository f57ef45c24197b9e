//! The command-line conventions of all three programs, in one place:
//!
//! - `--version` (or `-V`) prints `<program> <version> (compatibility_profile_id <id>)`;
//! - `--help`, `-h` and `help` print the program's help, `help COMMAND` and
//!   `COMMAND --help` that command's part of it;
//! - a usage error (an unknown command or option, a missing argument) says what exists and
//!   exits with status 2 ([`USAGE_EXIT`]); help and version exit 0; any other failure 1
//!   ([`CliError`] of `e2e-chat` and `platform-server` says which; [`exit_with`] prints it);
//! - options may come anywhere before `--`, and everything after `--` is an argument
//!   ([`Program::parse`], the one option parser of `e2e-chat`).
//!
//! A program's help text is the one source of its per-command help: a command's part is the
//! line that names it (`  bot-gateway serve CONFIG`, `  register USERNAME …`) and the lines
//! indented below it.

use std::error::Error;
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

impl Error for UsageError {}

/// Why a command of `e2e-chat` or `platform-server` did not do what it was asked: the command
/// line is wrong (exit status [`USAGE_EXIT`]) or doing it failed (1). `{e}` is this error's
/// own message, `{e:#}` that followed by its causes' ("context: cause: cause"), the one line
/// [`exit_with`] prints.
#[derive(Debug)]
pub enum CliError {
    Usage(UsageError),
    /// A failure its message says all of ("press: no answer from @bot ...").
    Failed(String),
    /// What was being done ("writing to stdout"), and the error that stopped it.
    Context { what: String, source: Box<dyn Error + Send + Sync> },
    /// An operation's own error, whose message names what failed (a `ClientError`).
    Operation(Box<dyn Error + Send + Sync>),
}

impl CliError {
    /// The program's exit status for this error.
    pub fn exit_status(&self) -> i32 {
        match self {
            CliError::Usage(_) => USAGE_EXIT,
            _ => 1,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Usage(e) => write!(f, "{e}")?,
            CliError::Failed(message) => f.write_str(message)?,
            CliError::Context { what, .. } => f.write_str(what)?,
            CliError::Operation(e) => write!(f, "{e}")?,
        }
        if f.alternate() {
            let mut cause = self.source();
            while let Some(e) = cause {
                write!(f, ": {e}")?;
                cause = e.source();
            }
        }
        Ok(())
    }
}

impl Error for CliError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            CliError::Usage(_) | CliError::Failed(_) => None,
            CliError::Context { source, .. } => Some(source.as_ref()),
            // The operation's error is this one's message: its causes come next.
            CliError::Operation(e) => e.source(),
        }
    }
}

impl From<UsageError> for CliError {
    fn from(e: UsageError) -> Self {
        CliError::Usage(e)
    }
}

/// `.context("what was being done")` on a failed operation's `Result`: a [`CliError::Context`].
pub trait Context<T> {
    fn context(self, what: &str) -> Result<T, CliError>;
    /// The same, with a message made only on failure.
    fn with_context(self, what: impl FnOnce() -> String) -> Result<T, CliError>;
}

impl<T, E: Error + Send + Sync + 'static> Context<T> for Result<T, E> {
    fn context(self, what: &str) -> Result<T, CliError> {
        self.with_context(|| what.to_string())
    }

    fn with_context(self, what: impl FnOnce() -> String) -> Result<T, CliError> {
        self.map_err(|e| CliError::Context { what: what(), source: Box::new(e) })
    }
}

/// Ends `program` after `e`: what stdout holds goes first, then one line on stderr naming what
/// failed (no backtrace, whatever RUST_BACKTRACE says), then the exit status of `e`.
pub fn exit_with(program: &str, e: &CliError) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let line = format!("{e:#}").replace('\n', " ");
    eprintln!("{program}: {line}");
    std::process::exit(e.exit_status())
}

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

/// One option a command takes: a switch (`--request`) or one with a value (`--name VALUE`,
/// `--name=VALUE`), optionally with a one-letter spelling too (`-V`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opt {
    pub name: &'static str,
    pub short: Option<&'static str>,
    pub takes_value: bool,
}

impl Opt {
    /// `--name VALUE` or `--name=VALUE`.
    pub const fn value(name: &'static str) -> Opt {
        Opt { name, short: None, takes_value: true }
    }

    /// `--name`, no value.
    pub const fn switch(name: &'static str) -> Opt {
        Opt { name, short: None, takes_value: false }
    }

    /// The same option, also spelled `short` (`-V`).
    pub const fn or(self, short: &'static str) -> Opt {
        Opt { short: Some(short), ..self }
    }
}

/// A parsed command line: its words (operands) in order and the options given.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Args<'a> {
    pub words: Vec<&'a str>,
    /// (option name, value); a switch has "" as its value.
    pub options: Vec<(&'static str, &'a str)>,
    /// `-h` or `--help` came before `--`.
    pub help: bool,
}

impl<'a> Args<'a> {
    /// The value of option `name` (the last one when it was given more than once).
    pub fn value(&self, name: &str) -> Option<&'a str> {
        self.options.iter().rev().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }

    /// Whether switch `name` was given.
    pub fn switch(&self, name: &str) -> bool {
        self.options.iter().any(|(n, _)| *n == name)
    }
}

/// Where [`Program::parse`] stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// At the end: options anywhere before `--`, words in between.
    End,
    /// At the first word (a command): the rest is returned unparsed, for the command's parse.
    FirstWord,
}

impl Program {
    /// The one option parser of the program's commands, with the conventions of most
    /// command-line tools:
    ///
    /// - options may come anywhere before `--`, before, between or after the words;
    /// - `--name VALUE` and `--name=VALUE` (the next argument is the value whatever it looks
    ///   like: `--caption --help` is a caption); a switch takes no `=VALUE`;
    /// - `--` ends the options: everything after it is a word, so a text that starts with
    ///   `-` goes after it; a lone `-` is a word;
    /// - `-h`/`--help` anywhere before `--` asks for help ([`Args::help`]; parsing stops);
    /// - any other argument that starts with `-` is an unknown option: a usage error that
    ///   names it and `options`, in `context` (the command).
    ///
    /// With [`Until::FirstWord`] parsing stops at the first word (a command), which starts
    /// the returned rest (empty when there is none); a `--` before it is a usage error.
    pub fn parse<'a>(
        &self,
        context: &str,
        args: &'a [String],
        options: &[Opt],
        until: Until,
    ) -> Result<(Args<'a>, &'a [String]), UsageError> {
        // "send: X", but "X" alone before the command (the program's name starts the line).
        let error = |message: String| UsageError(if context == self.name { message } else { format!("{context}: {message}") });
        let mut parsed = Args::default();
        let mut i = 0;
        while i < args.len() {
            let arg = args[i].as_str();
            i += 1;
            if arg == "--" {
                if until == Until::FirstWord {
                    return Err(error("the command goes before --".into()));
                }
                parsed.words.extend(args[i..].iter().map(String::as_str));
                return Ok((parsed, &[]));
            }
            if is_help(arg) {
                parsed.help = true;
                return Ok((parsed, &[]));
            }
            if arg == "-" || !arg.starts_with('-') {
                if until == Until::FirstWord {
                    return Ok((parsed, &args[i - 1..]));
                }
                parsed.words.push(arg);
                continue;
            }
            let (name, inline) = match arg.split_once('=') {
                Some((n, v)) if n.starts_with("--") => (n, Some(v)),
                _ => (arg, None),
            };
            let Some(opt) = options.iter().find(|o| o.name == name || o.short == Some(name)) else {
                let mut known: Vec<&str> = options.iter().map(|o| o.name).collect();
                known.push("--help");
                let mut e = self.unknown_option(context, name, &known);
                e.0.push_str("; an argument that starts with - goes after --");
                return Err(e);
            };
            let value = match (opt.takes_value, inline) {
                (true, Some(v)) => v,
                (true, None) => match args.get(i) {
                    Some(v) => {
                        i += 1;
                        v.as_str()
                    }
                    None => return Err(error(format!("{} needs a value", opt.name))),
                },
                (false, Some(_)) => return Err(error(format!("{} takes no value", opt.name))),
                (false, None) => "",
            };
            parsed.options.push((opt.name, value));
        }
        Ok((parsed, &[]))
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

    #[test]
    fn a_cli_error_prints_its_context_chain_and_says_its_exit_status() {
        let io = || std::io::Error::new(std::io::ErrorKind::BrokenPipe, "pipe closed");
        let usage = CliError::from(UsageError("send: @PEER missing".into()));
        assert_eq!((format!("{usage:#}"), usage.exit_status(), usage.source().is_none()), ("send: @PEER missing".into(), USAGE_EXIT, true));
        let failed = Err::<(), _>(io()).context("writing to stdout").expect_err("failed");
        assert_eq!((failed.to_string(), format!("{failed:#}")), ("writing to stdout".into(), "writing to stdout: pipe closed".into()));
        assert_eq!((failed.exit_status(), failed.source().map(|e| e.to_string())), (1, Some("pipe closed".into())));
        // An operation's own error is the message; what caused it follows.
        let outer = Err::<(), _>(failed).with_context(|| "saving @bot".into()).expect_err("failed");
        let operation = CliError::Operation(Box::new(outer));
        assert_eq!(format!("{operation:#}"), "saving @bot: writing to stdout: pipe closed");
        assert_eq!(operation.source().map(|e| e.to_string()), Some("writing to stdout".into()));
        assert_eq!(format!("{:#}", CliError::Failed("no answer".into())), "no answer");
    }

    const OPTIONS: &[Opt] = &[Opt::value("--reply-to"), Opt::switch("--request"), Opt::switch("--version").or("-V")];

    fn parse(a: &[String]) -> Result<Args<'_>, UsageError> {
        demo().parse("send", a, OPTIONS, Until::End).map(|(parsed, rest)| {
            assert!(rest.is_empty(), "Until::End leaves nothing");
            parsed
        })
    }

    #[test]
    fn options_may_come_anywhere_before_the_double_dash() {
        // Before, between and after the words mean the same.
        for a in [
            args(&["@bot", "hello", "--reply-to", "5", "world"]),
            args(&["--reply-to", "5", "@bot", "hello", "world"]),
            args(&["@bot", "hello", "world", "--reply-to=5"]),
        ] {
            let p = parse(&a).expect("parses");
            assert_eq!((p.words.clone(), p.value("--reply-to"), p.help), (vec!["@bot", "hello", "world"], Some("5"), false), "{a:?}");
        }
        // The last of a repeated option counts; a switch; a short spelling.
        let a = args(&["--reply-to", "1", "x", "--reply-to=2", "--request", "-V"]);
        let p = parse(&a).expect("parses");
        assert_eq!((p.value("--reply-to"), p.switch("--request"), p.switch("--version")), (Some("2"), true, true));
        assert_eq!(p.value("--absent"), None);
        // A value is the next argument whatever it looks like; `--name=` is an empty value.
        let a = args(&["--reply-to", "--help", "--reply-to=", "w"]);
        let p = parse(&a).expect("parses");
        assert_eq!((p.value("--reply-to"), p.help, p.words.clone()), (Some(""), false, vec!["w"]));
    }

    #[test]
    fn after_the_double_dash_everything_is_a_word() {
        let a = args(&["@bot", "--reply-to", "3", "--", "-5", "degrees", "--reply-to", "4", "--help", "--"]);
        let p = parse(&a).expect("parses");
        assert_eq!(p.words, vec!["@bot", "-5", "degrees", "--reply-to", "4", "--help", "--"]);
        assert_eq!((p.value("--reply-to"), p.help), (Some("3"), false));
        // A lone "-" is a word.
        assert_eq!(parse(&args(&["-", "x"])).expect("parses").words, vec!["-", "x"]);
        assert_eq!(parse(&args(&["--"])).expect("parses"), Args::default());
    }

    #[test]
    fn unknown_options_and_missing_values_are_usage_errors() {
        let err = parse(&args(&["@bot", "hi", "--frob"])).expect_err("unknown");
        assert!(err.0.contains("unknown option --frob for send") && err.0.contains("--reply-to, --request, --version, --help"), "{err}");
        assert!(err.0.contains("goes after --"), "says where a text starting with - goes: {err}");
        let err = parse(&args(&["@bot", "-5", "degrees"])).expect_err("a text starting with -");
        assert!(err.0.contains("unknown option -5"), "{err}");
        let err = parse(&args(&["@bot", "--frob=1"])).expect_err("unknown");
        assert!(err.0.contains("unknown option --frob for"), "named without its value: {err}");
        let err = parse(&args(&["@bot", "hi", "--reply-to"])).expect_err("no value");
        assert_eq!(err.0, "send: --reply-to needs a value");
        let err = parse(&args(&["--request=yes"])).expect_err("a switch");
        assert_eq!(err.0, "send: --request takes no value");
    }

    #[test]
    fn help_before_the_double_dash_and_until_the_first_word() {
        for a in [args(&["@bot", "hi", "--help"]), args(&["-h", "@bot"]), args(&["--reply-to=1", "--help", "--bogus"])] {
            assert!(parse(&a).expect("parses").help, "{a:?}");
        }
        assert!(parse(&args(&["--frob", "--help"])).is_err(), "the first problem counts");
        // Until the first word: the command and all after it are left for the command's parse.
        let p = demo();
        let a = args(&["--request", "send", "@bot", "--bogus"]);
        let (top, rest) = p.parse("demo", &a, OPTIONS, Until::FirstWord).expect("parses");
        assert!(top.switch("--request") && top.words.is_empty());
        assert_eq!(rest, &a[1..]);
        let (top, rest) = p.parse("demo", &a[..1], OPTIONS, Until::FirstWord).expect("parses");
        assert!(top.switch("--request") && rest.is_empty());
        let err = p.parse("demo", &args(&["--", "send"]), OPTIONS, Until::FirstWord).expect_err("-- first");
        assert_eq!(err.0, "the command goes before --", "the program's name is not repeated");
        assert!(p.parse("demo", &args(&["--bogus", "send"]), OPTIONS, Until::FirstWord).is_err());
    }
}
