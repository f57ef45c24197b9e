fn main() {
    bot_gateway::wire::grpc_debug::exit_if_debug_switches("platform-server");
    if let Err(e) = bot_gateway::platform::run_cli(std::env::args().skip(1).collect()) {
        // One line naming what failed; no backtrace even when RUST_BACKTRACE is set.
        eprintln!("platform-server: {e:#}");
        let usage = e.downcast_ref::<bot_gateway::cli::UsageError>().is_some();
        std::process::exit(if usage { bot_gateway::cli::USAGE_EXIT } else { 1 });
    }
}
