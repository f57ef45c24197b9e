fn main() {
    bot_gateway::wire::grpc_debug::exit_if_debug_switches("platform-server");
    if let Err(e) = bot_gateway::platform::run_cli(std::env::args().skip(1).collect()) {
        bot_gateway::cli::exit_with("platform-server", &e);
    }
}
