fn main() {
    bot_gateway::wire::grpc_debug::exit_if_debug_switches("bot-gateway");
    bot_gateway::memory::return_large_buffers();
    if let Err(e) = bot_gateway::gateway::run_cli(std::env::args().skip(1).collect()) {
        // One line naming what failed; no backtrace even when RUST_BACKTRACE is set.
        eprintln!("bot-gateway: {e}");
        let usage = matches!(e, bot_gateway::gateway::StartError::Usage(_));
        std::process::exit(if usage { bot_gateway::cli::USAGE_EXIT } else { 1 });
    }
}
