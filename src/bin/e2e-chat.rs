fn main() {
    bot_gateway::wire::grpc_debug::exit_if_debug_switches("e2e-chat");
    if let Err(e) = bot_gateway::client::run_cli(std::env::args().skip(1).collect()) {
        bot_gateway::cli::exit_with("e2e-chat", &e);
    }
}
