fn main() {
    bot_gateway::wire::grpc_debug::exit_if_debug_switches("bot-gateway");
    if let Err(e) = bot_gateway::gateway::run_cli(std::env::args().skip(1).collect()) {
        // One line naming what failed; no backtrace even when RUST_BACKTRACE is set.
        eprintln!("bot-gateway: {e}");
        std::process::exit(1);
    }
}
