//! One way to reach the platform server: a channel, the caller's credentials as call metadata,
//! and a per-call deadline. Used by the gateway and by the user client.

use super::invalid::Invalid;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use grpcio::{CallOption, ChannelBuilder, ChannelCredentialsBuilder, EnvBuilder, Environment, MetadataBuilder};

use super::platform_grpc::PlatformClient;

/// Metadata key carrying the caller's credential.
pub const AUTHORIZATION: &str = "authorization";
/// Metadata key naming the bot device a gateway runtime speaks for.
pub const DEVICE_ID: &str = "x-device-id";

/// The channel's reconnection backoff: the first retry, and the longest wait between two.
pub const RECONNECT_FIRST: Duration = Duration::from_millis(100);
pub const RECONNECT_MAX: Duration = Duration::from_secs(1);

/// Who is calling.
#[derive(Clone)]
pub enum Credential {
    Anonymous,
    /// A bot runtime: the token, and the device id once registered.
    Bot { token: String, device_id: Option<u32> },
    /// A user device.
    Device { user_id: u64, device_id: u32, secret_hex: String },
}

/// A connected platform client with a credential.
#[derive(Clone)]
pub struct Platform {
    pub client: PlatformClient,
    channel: grpcio::Channel,
    credential: Credential,
    timeout: Duration,
}

/// Parses `http://host:port` / `https://host:port` (a bare `host:port` is taken as http).
pub fn parse_endpoint(endpoint: &str) -> Result<(bool, String), Invalid> {
    let (tls, rest) = if let Some(r) = endpoint.strip_prefix("https://") {
        (true, r)
    } else if let Some(r) = endpoint.strip_prefix("http://") {
        (false, r)
    } else if endpoint.contains("://") {
        return Err(Invalid::new(format!("unsupported scheme in endpoint {endpoint:?} (use http:// or https://)")));
    } else {
        (false, endpoint)
    };
    let addr = rest.trim_end_matches('/');
    match addr.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok((tls, addr.to_string())),
        _ => Err(Invalid::new(format!("endpoint {endpoint:?} is not host:port"))),
    }
}

impl Platform {
    /// Builds a channel; does not wait for the connection (see `wait_connected`).
    pub fn connect(endpoint: &str, credential: Credential) -> Result<Platform, Invalid> {
        Platform::connect_named(endpoint, credential, "grpc-poll")
    }

    /// `connect` on the completion queues every channel of this process made by
    /// `connect_shared` uses (`grpc-cq-0`, `grpc-cq-1`): a gateway's bots share them, so a
    /// thousand bots are not a thousand gRPC threads. The queues live while any such channel
    /// does; the last one dropped joins their threads.
    pub fn connect_shared(endpoint: &str, credential: Credential) -> Result<Platform, Invalid> {
        Platform::connect_in(shared_environment(), endpoint, credential)
    }

    /// `connect`, with the channel's own completion-queue thread named `<thread>-0`.
    pub fn connect_named(endpoint: &str, credential: Credential, thread: &str) -> Result<Platform, Invalid> {
        Platform::connect_in(Arc::new(EnvBuilder::new().cq_count(1).name_prefix(thread).build()), endpoint, credential)
    }

    fn connect_in(env: Arc<Environment>, endpoint: &str, credential: Credential) -> Result<Platform, Invalid> {
        let (tls, addr) = parse_endpoint(endpoint)?;
        let builder = ChannelBuilder::new(env)
            .max_receive_message_len(64 << 20)
            .max_send_message_len(64 << 20)
            .keepalive_time(Duration::from_secs(30))
            .keepalive_timeout(Duration::from_secs(10))
            // gRPC's default reconnection backoff grows to two minutes (17-25 s after a short
            // outage): a client would stay away long after the platform came back. Retrying a
            // TCP connect once a second costs nothing and follows the platform within 2 s.
            .initial_reconnect_backoff(RECONNECT_FIRST)
            .max_reconnect_backoff(RECONNECT_MAX)
            .stream_initial_window_size(super::FILE_WINDOW_BYTES)
            .http2_max_frame_size(super::FILE_FRAME_BYTES);
        let channel = if tls {
            builder.set_credentials(ChannelCredentialsBuilder::new().build()).connect(&addr)
        } else {
            builder.connect(&addr)
        };
        Ok(Platform {
            client: PlatformClient::new(channel.clone()),
            channel,
            credential,
            timeout: Duration::from_secs(20),
        })
    }

    /// Waits until the channel is connected; false if it is not within `within`.
    pub fn wait_connected(&self, within: Duration) -> bool {
        futures::executor::block_on(self.channel.wait_for_connected(within))
    }

    pub fn credential(&self) -> &Credential {
        &self.credential
    }

    pub fn set_credential(&mut self, credential: Credential) {
        self.credential = credential;
    }

    /// Call options with the credential and the default deadline.
    pub fn opt(&self) -> CallOption {
        self.opt_with_timeout(Some(self.timeout))
    }

    /// Call options with the credential and a given deadline (`None` for a long-lived stream).
    pub fn opt_with_timeout(&self, timeout: Option<Duration>) -> CallOption {
        let mut md = MetadataBuilder::new();
        match &self.credential {
            Credential::Anonymous => {}
            Credential::Bot { token, device_id } => {
                md.add_str(AUTHORIZATION, &format!("Bot {token}")).expect("ascii metadata");
                if let Some(id) = device_id {
                    md.add_str(DEVICE_ID, &id.to_string()).expect("ascii metadata");
                }
            }
            Credential::Device { user_id, device_id, secret_hex } => {
                md.add_str(AUTHORIZATION, &format!("Device {user_id}:{device_id}:{secret_hex}"))
                    .expect("ascii metadata");
            }
        }
        let opt = CallOption::default().headers(md.build());
        match timeout {
            Some(t) => opt.timeout(t),
            None => opt,
        }
    }
}

/// Completion queues shared by `Platform::connect_shared` channels: two threads, each call's
/// completion is a few microseconds of work, and a bot's thread blocks on its own call.
fn shared_environment() -> Arc<Environment> {
    static SHARED: Mutex<Weak<Environment>> = Mutex::new(Weak::new());
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(env) = shared.upgrade() {
        return env;
    }
    let env = Arc::new(EnvBuilder::new().cq_count(2).name_prefix("grpc-cq").build());
    *shared = Arc::downgrade(&env);
    env
}
