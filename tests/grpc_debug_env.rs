//! gRPC core's debug switches print call metadata, which carries the bot token and device
//! credentials, so every program refuses to start with them (`src/wire/grpc_debug.rs`): the
//! real binaries exit at once with a message naming the variable, and print no secret.

mod support;

use std::io::Read;
use std::process::Command;
use std::time::Duration;

use support::{gateway_bin, gateway_config, platform_bin, write_config, PlatformServer, Proc};

/// Runs `cmd` with `env` (and the most verbose `RUST_LOG`), expecting it to exit non-zero within
/// a few seconds with `<name>: refusing to start: <var>` on stderr, `var` being the first
/// variable of `env`; returns stdout and stderr.
fn refused(name: &str, mut cmd: Command, env: &[(&str, &str)]) -> (String, String) {
    cmd.envs(env.iter().copied()).env("RUST_LOG", "trace");
    let (mut proc, mut out) = Proc::spawn(name, cmd);
    let status = proc
        .wait_exit(Duration::from_secs(10))
        .unwrap_or_else(|| panic!("{name} kept running with {env:?}; stderr:\n{}", proc.stderr_text()));
    assert!(!status.success(), "{name} with {env:?} exited successfully");
    let var = env[0].0;
    let mut stdout = String::new();
    out.read_to_string(&mut stdout).expect("read stdout");
    // The stderr reader thread may still be copying the last bytes.
    let mut stderr = proc.stderr_text();
    for _ in 0..50 {
        if stderr.ends_with('\n') {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        stderr = proc.stderr_text();
    }
    assert!(stderr.starts_with(&format!("{name}: refusing to start: {var} ")), "{name} stderr:\n{stderr}");
    assert!(stderr.contains("call metadata"), "{name} says why: {stderr}");
    assert!(stderr.contains("RUST_LOG controls this program's own logs"), "{name} names RUST_LOG: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{name} prints one line: {stderr}");
    (stdout, stderr)
}

#[test]
fn gateway_refuses_grpc_debug_switches_without_printing_the_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let platform = PlatformServer::start(&dir.path().join("platform"));
    let bot = platform.create_bot("trace_bot", "Trace Bot");
    let config = dir.path().join("gateway.json");
    write_config(&config, &gateway_config(&platform.url, &dir.path().join("state"), &bot));
    let token = bot["token"].as_str().expect("token");
    let secret = token.split_once(':').expect("id:secret").1;
    // The first is what printed the token (in every traced call's metadata) before.
    let cases: [&[(&str, &str)]; 4] = [
        &[("GRPC_TRACE", "all"), ("GRPC_VERBOSITY", "DEBUG")],
        &[("GRPC_TRACE", "all")],
        &[("GRPC_VERBOSITY", "DEBUG")],
        &[("GRPC_VERBOSITY", "info")],
    ];
    for env in cases {
        let mut cmd = Command::new(gateway_bin());
        cmd.arg("serve").arg(&config);
        let (stdout, stderr) = refused("bot-gateway", cmd, env);
        for text in [&stdout, &stderr] {
            assert!(!text.contains(secret), "{env:?}: the token's secret was printed");
            assert!(!text.contains(&secret.to_uppercase()), "{env:?}: the token's secret was printed");
        }
        assert!(!dir.path().join("state").join("gateway.lock").exists(), "{env:?}: nothing was started");
    }
}

#[test]
fn platform_server_refuses_grpc_debug_switches() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases: [&[(&str, &str)]; 3] =
        [&[("GRPC_TRACE", "all"), ("GRPC_VERBOSITY", "DEBUG")], &[("GRPC_TRACE", "http,api")], &[("GRPC_VERBOSITY", "debug")]];
    for env in cases {
        let mut cmd = Command::new(platform_bin());
        cmd.args(["--listen", "127.0.0.1:0", "--data-dir"]).arg(dir.path().join("platform"));
        let (stdout, _) = refused("platform-server", cmd, env);
        assert!(!stdout.contains("listening on"), "{env:?}: the server must not listen");
    }
    // A quiet level is accepted: the same server starts with GRPC_VERBOSITY=ERROR.
    let mut cmd = Command::new(platform_bin());
    cmd.args(["--listen", "127.0.0.1:0", "--data-dir"]).arg(dir.path().join("platform"));
    cmd.env("GRPC_VERBOSITY", "ERROR").env_remove("GRPC_TRACE");
    let (proc, mut out) = Proc::spawn("platform-server", cmd);
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).expect("read the first line");
    assert!(line.starts_with("listening on "), "{line:?}; stderr:\n{}", proc.stderr_text());
}

#[test]
fn e2e_chat_refuses_grpc_debug_switches() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new(support::bin_path("e2e-chat"));
    cmd.arg("--profile").arg(dir.path().join("profile")).args(["listen", "--timeout", "1"]);
    refused("e2e-chat", cmd, &[("GRPC_TRACE", "all")]);
}
