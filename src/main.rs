fn main() -> anyhow::Result<()> {
    bot_gateway::gateway::run_cli(std::env::args().skip(1).collect())
}
