fn main() -> anyhow::Result<()> {
    bot_gateway::client::run_cli(std::env::args().skip(1).collect())
}
