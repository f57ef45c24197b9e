fn main() -> anyhow::Result<()> {
    bot_gateway::platform::run_cli(std::env::args().skip(1).collect())
}
