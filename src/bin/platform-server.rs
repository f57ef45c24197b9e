fn main() {
    bot_gateway::wire::grpc_debug::exit_if_debug_switches("platform-server");
    if let Err(e) = bot_gateway::platform::run_cli(std::env::args().skip(1).collect()) {
        // One line naming what failed; no backtrace even when RUST_BACKTRACE is set.
        eprintln!("platform-server: {e:#}");
        std::process::exit(1);
    }
}
