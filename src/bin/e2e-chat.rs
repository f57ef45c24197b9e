fn main() -> anyhow::Result<()> {
    bot_gateway::wire::grpc_debug::exit_if_debug_switches("e2e-chat");
    bot_gateway::client::run_cli(std::env::args().skip(1).collect())
}
