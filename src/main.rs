fn main() {
    bot_gateway::wire::grpc_debug::exit_if_debug_switches("bot-gateway");
    return_large_buffers();
    if let Err(e) = bot_gateway::gateway::run_cli(std::env::args().skip(1).collect()) {
        // One line naming what failed; no backtrace even when RUST_BACKTRACE is set.
        eprintln!("bot-gateway: {e}");
        let usage = matches!(e, bot_gateway::gateway::StartError::Usage(_));
        std::process::exit(if usage { bot_gateway::cli::USAGE_EXIT } else { 1 });
    }
}

/// glibc raises its mmap threshold each time a large buffer is freed, so later request
/// bodies and answers of up to 32 MiB come from per-thread arenas that keep their memory:
/// under `scripts/soak`'s hostile bodies the gateway's RSS crept from 28 to 80 MiB in 90 s
/// and kept growing. A fixed threshold hands every buffer over 128 KiB back when it is freed
/// (38 MiB after the same soak, falling once it ends).
fn return_large_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes a tunable of the allocator; called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}
