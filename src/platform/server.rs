//! A running platform server: the gRPC environment, the bound port, the service state, the
//! management bot, and an orderly stop. Used by the CLI and by tests that start a server
//! in-process.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use grpcio::{ChannelBuilder, EnvBuilder, ServerBuilder, ServerCredentials};

use super::call_threads::CallThreads;
use super::error::{PlatformError, Result};
use super::inbox::InboxHub;
use super::manager::{ManagerBot, ManagerConfig};
use super::service::PlatformService;
use super::store::Store;
use super::unary_workers::UnaryWorkers;
use crate::wire::platform_grpc::create_platform;

/// Largest gRPC message accepted or sent (matches the client side in `wire::connect`).
const MAX_MESSAGE_LEN: i32 = 64 << 20;
/// Idempotency records older than this are forgotten at start-up.
const SENT_RECORD_RETENTION_SECS: i64 = 30 * 24 * 3600;

/// What a server runs besides the gRPC service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerOptions {
    /// The built-in management bot; `None` runs without it.
    pub manager: Option<ManagerConfig>,
    /// This server's address as gateways reach it, for the config @BotManager hands out;
    /// `None`: `http://` and the bound address, when that is a specific host.
    pub advertise_url: Option<String>,
}

impl Default for ServerOptions {
    /// With the management bot as `@BotManager`.
    fn default() -> Self {
        ServerOptions { manager: Some(ManagerConfig::default()), advertise_url: None }
    }
}

/// A started server; stops on `shutdown` or drop.
pub struct RunningServer {
    // Field order: the server must stop before the state it serves goes away.
    server: Option<grpcio::Server>,
    manager: Option<ManagerBot>,
    host: String,
    port: u16,
    hub: Arc<InboxHub>,
    store: Arc<Store>,
    /// The Inbox feeders and file transfers, joined once every call is cancelled.
    threads: Arc<CallThreads>,
    /// The unary calls' threads, stopped and joined after the streaming calls' threads.
    workers: Arc<UnaryWorkers>,
}

/// Splits `host:port`, accepting `[v6]:port`.
fn split_listen(listen: &str) -> Result<(String, u16)> {
    let bad = || PlatformError::InvalidArgument(format!("listen address {listen:?} is not host:port"));
    let (host, port) = listen.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    if host.is_empty() {
        return Err(bad());
    }
    Ok((host.to_string(), port))
}

/// The endpoint a gateway should use: the advertised URL when given, else `http://HOST:PORT`
/// as bound; `None` (a placeholder in the config snippet, and a warning) when the server
/// listens on every interface and so cannot know which of its names users reach it by.
fn advertised_endpoint(advertise_url: Option<&str>, host: &str, port: u16) -> Option<String> {
    if let Some(url) = advertise_url {
        return Some(url.trim_end_matches('/').to_string());
    }
    let bare = host.trim_matches(['[', ']']);
    if bare.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_unspecified()) {
        log::warn!(
            "listening on {host}:{port} (every interface): @BotManager's config snippet leaves bot_platform_endpoint \
             as a placeholder; give --advertise-url with the address gateways reach this server by"
        );
        return None;
    }
    Some(format!("http://{host}:{port}"))
}

impl RunningServer {
    /// Opens the store in `data_dir` (created 0700 if missing), binds `listen` (port 0 picks a
    /// free port) and starts serving, with the management bot as `@BotManager`.
    pub fn start(listen: &str, data_dir: &Path) -> Result<RunningServer> {
        RunningServer::start_with(listen, data_dir, &ServerOptions::default())
    }

    /// `start` with explicit options.
    pub fn start_with(listen: &str, data_dir: &Path, options: &ServerOptions) -> Result<RunningServer> {
        crate::crypto::init();
        let (host, _) = split_listen(listen)?;
        let store = Arc::new(Store::open(data_dir)?);
        let cutoff = crate::clock::unix_now() - SENT_RECORD_RETENTION_SECS;
        let pruned = store.prune_sent_records(cutoff)?;
        if pruned > 0 {
            log::info!("forgot {pruned} sent-message records older than 30 days");
        }
        let swept = store.sweep_staged_uploads();
        if swept > 0 {
            log::info!("deleted {swept} incomplete file uploads left by an earlier run");
        }
        let swept = store.sweep_unnamed_files(crate::clock::unix_now(), usize::MAX >> 1);
        if swept > 0 {
            log::info!("deleted {swept} uploads no message named within a day");
        }
        let hub = Arc::new(InboxHub::new());
        let call_threads = Arc::new(CallThreads::default());
        let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).clamp(2, 8);
        let workers = Arc::new(
            UnaryWorkers::start(threads)
                .map_err(|e| PlatformError::Internal(format!("cannot start the unary call threads: {e}")))?,
        );
        let service = PlatformService::new(store.clone(), hub.clone(), call_threads.clone(), workers.clone());

        let env = Arc::new(EnvBuilder::new().cq_count(threads).name_prefix("grpc-platform").build());
        let args = ChannelBuilder::new(env.clone())
            .max_receive_message_len(MAX_MESSAGE_LEN)
            .max_send_message_len(MAX_MESSAGE_LEN)
            // Clients ping every 30 s to keep idle Inbox streams alive; accept that instead of
            // answering with GOAWAY (too_many_pings).
            .http2_min_recv_ping_interval_without_data(Duration::from_secs(10))
            .http2_max_ping_strikes(0)
            .keepalive_time(Duration::from_secs(60))
            .keepalive_timeout(Duration::from_secs(20))
            .stream_initial_window_size(crate::wire::FILE_WINDOW_BYTES)
            .http2_max_frame_size(crate::wire::FILE_FRAME_BYTES)
            // gRPC sets SO_REUSEPORT by default, which would let a second server bind the same port.
            .reuse_port(false)
            .build_args();
        let mut server = ServerBuilder::new(env)
            .channel_args(args)
            .register_service(create_platform(service))
            .build()
            .map_err(|e| PlatformError::Internal(format!("cannot build the gRPC server: {e}")))?;
        let port = server
            .add_listening_port(listen, ServerCredentials::insecure())
            .map_err(|e| PlatformError::InvalidArgument(format!("cannot listen on {listen}: {e}")))?;
        // Bound but not serving yet: the management bot learns the address users reached.
        let endpoint = advertised_endpoint(options.advertise_url.as_deref(), &host, port);
        let manager = match &options.manager {
            Some(config) => Some(ManagerBot::start(data_dir, store.clone(), hub.clone(), config, endpoint)?),
            None => None,
        };
        server.start();
        log::info!("platform server on {host}:{port}, data in {}", store.path().display());
        Ok(RunningServer { server: Some(server), manager, host, port, hub, store, threads: call_threads, workers })
    }

    /// The bound port (the real one when 0 was asked for).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `host:port` as bound, e.g. `127.0.0.1:40123`.
    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// An endpoint for `wire::Platform::connect`, e.g. `http://127.0.0.1:40123`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.address())
    }

    /// The server's store (for tests and in-process tools).
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The management bot, when it runs.
    pub fn manager(&self) -> Option<&ManagerBot> {
        self.manager.as_ref()
    }

    /// Ends every Inbox stream and the management bot, then stops accepting and cancels what
    /// is left.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(mut server) = self.server.take() {
            self.hub.close_all();
            if let Some(manager) = self.manager.take() {
                manager.stop();
            }
            let done = server.shutdown();
            server.cancel_all_calls();
            if let Err(e) = futures::executor::block_on(done) {
                log::warn!("gRPC server shutdown: {e}");
            }
            self.threads.join_all();
            self.workers.stop();
            log::info!("platform server on {}:{} stopped", self.host, self.port);
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses() {
        assert_eq!(split_listen("127.0.0.1:0").expect("valid"), ("127.0.0.1".to_string(), 0));
        assert_eq!(split_listen("[::1]:50051").expect("valid"), ("[::1]".to_string(), 50051));
        assert!(split_listen("127.0.0.1").is_err());
        assert!(split_listen(":80").is_err());
        assert!(split_listen("host:99999").is_err());
    }

    #[test]
    fn binds_an_ephemeral_port_and_stops() {
        let dir = tempfile::tempdir().expect("temp dir");
        let server = RunningServer::start("127.0.0.1:0", &dir.path().join("d")).expect("start");
        assert_ne!(server.port(), 0);
        assert_eq!(server.address(), format!("127.0.0.1:{}", server.port()));
        // The port is really taken while the server runs.
        assert!(std::net::TcpListener::bind(("127.0.0.1", server.port())).is_err());
        server.shutdown();
        assert!(dir.path().join("d").join(super::super::store::DB_FILE).exists());
        assert!(dir.path().join("d").join(super::super::manager::DB_FILE).exists());
    }

    #[test]
    fn a_taken_manager_username_fails_the_start_and_none_runs_without() {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("d");
        let store = Store::open(&data).expect("store");
        store.create_bot("taken_name", "Someone", "default", &[1; 32], None, 1).expect("bot");
        drop(store);
        let options =
            ServerOptions { manager: Some(ManagerConfig { username: "Taken_Name".into(), display_name: "M".into() }), advertise_url: None };
        let err = RunningServer::start_with("127.0.0.1:0", &data, &options).err().expect("refused");
        assert!(err.message().contains("@Taken_Name is taken"), "{err}");
        let server = RunningServer::start_with("127.0.0.1:0", &data, &ServerOptions { manager: None, advertise_url: None }).expect("start");
        assert!(server.manager().is_none());
        server.shutdown();

        // One data directory, one management bot: a second server on it is refused.
        let first = RunningServer::start("127.0.0.1:0", &data).expect("start");
        let err = RunningServer::start("127.0.0.1:0", &data).err().expect("second server refused");
        assert!(err.message().contains("in use by another platform-server"), "{err}");
        first.shutdown();
    }
}
