//! gRPC core's own debug switches. Its tracer (`GRPC_TRACE`) and its debug and info logs
//! (`GRPC_VERBOSITY`) print call metadata, and the metadata carries every caller's credential
//! (the bot token, a device secret; see `connect.rs`). gRPC core reads both variables once, when
//! it is first initialised, so every program of this package checks them before that and
//! refuses to start rather than let its logs carry a secret.

use super::invalid::Invalid;
use std::ffi::OsString;

/// Names gRPC core's tracer, whatever its value lists.
pub const TRACE_VAR: &str = "GRPC_TRACE";
/// gRPC core's log level; only these levels (any case) never print call metadata.
pub const VERBOSITY_VAR: &str = "GRPC_VERBOSITY";
const QUIET_VERBOSITIES: &[&str] = &["ERROR", "NONE"];

/// Why the environment `var` describes is refused, if it is: `GRPC_TRACE` set to anything
/// non-empty, or `GRPC_VERBOSITY` set to anything but ERROR or NONE. An empty value counts as
/// unset, as gRPC core treats it.
pub fn check_debug_switches(var: impl Fn(&str) -> Option<OsString>) -> Result<(), Invalid> {
    let set = |name: &str| var(name).filter(|v| !v.is_empty());
    let why = "gRPC core's tracer and its debug logs print call metadata, which carries the bot token and \
               device credentials";
    let fix = "RUST_LOG controls this program's own logs (e.g. RUST_LOG=debug)";
    if let Some(value) = set(TRACE_VAR) {
        return Err(Invalid::new(format!(
            "refusing to start: {TRACE_VAR} is set ({value:?}), and {why}; unset {TRACE_VAR}. {fix}"
        )));
    }
    if let Some(value) = set(VERBOSITY_VAR) {
        let quiet = value.to_str().is_some_and(|v| QUIET_VERBOSITIES.iter().any(|q| v.eq_ignore_ascii_case(q)));
        if !quiet {
            return Err(Invalid::new(format!(
                "refusing to start: {VERBOSITY_VAR} is {value:?}, and {why}; unset it or set it to ERROR or NONE. {fix}"
            )));
        }
    }
    Ok(())
}

/// The first call of every program (`bot-gateway`, `platform-server`, `e2e-chat`): exits with
/// status 1 and one line on stderr, naming `program`, when [`check_debug_switches`] refuses the
/// process environment.
pub fn exit_if_debug_switches(program: &str) {
    if let Err(e) = check_debug_switches(|name| std::env::var_os(name)) {
        eprintln!("{program}: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(vars: &[(&str, &str)]) -> Result<(), Invalid> {
        check_debug_switches(|name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| OsString::from(v)))
    }

    #[test]
    fn refuses_any_trace() {
        for value in ["all", "http", "-all", "api,call_error", "0"] {
            let e = check(&[(TRACE_VAR, value)]).expect_err(value);
            assert!(e.contains("GRPC_TRACE is set"), "{e}");
            assert!(e.contains("bot token"), "{e}");
            assert!(e.contains("RUST_LOG controls this program's own logs"), "{e}");
        }
        // Refused whatever the verbosity.
        assert!(check(&[(TRACE_VAR, "all"), (VERBOSITY_VAR, "ERROR")]).is_err());
    }

    #[test]
    fn refuses_verbose_levels() {
        for value in ["DEBUG", "debug", "INFO", "Info", "nonsense", " ERROR"] {
            let e = check(&[(VERBOSITY_VAR, value)]).expect_err(value);
            assert!(e.contains("GRPC_VERBOSITY is"), "{e}");
            assert!(e.contains("ERROR or NONE"), "{e}");
            assert!(e.contains("RUST_LOG"), "{e}");
        }
    }

    #[test]
    fn accepts_quiet_settings() {
        check(&[]).expect("unset");
        check(&[(TRACE_VAR, ""), (VERBOSITY_VAR, "")]).expect("empty counts as unset");
        for value in ["ERROR", "error", "NONE", "None"] {
            check(&[(VERBOSITY_VAR, value)]).expect(value);
        }
    }
}
