//! Becoming (or resuming as) a device of the bot on the platform at start-up.
//!
//! A fresh `state_dir` registers a new device: the device certificate and a registration
//! proof are signed by the bot identity key derived from the recovery secret, so the platform
//! refuses a token, recovery secret and state that do not belong to one bot.

use std::time::Duration;

use super::config::BotConfig;
use super::runtime::unix_now;
use super::store::{Store, StoreError};
use crate::crypto;
use crate::e2e::{self, Registration};
use crate::wire::platform::{ListDevicesRequest, LookupUserRequest, RegisterBotDeviceRequest, VerifyCredentialRequest};
use super::port::{GrpcPort, PlatformPort};
use crate::wire::{rpc, Credential, Invalid, Platform};

/// How long start-up waits for the platform before giving up (the process then exits).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a bot could not become (or resume as) its device on the platform. Said without the
/// bot's name: `StartError::Registration` and `check-config` put it first.
#[derive(Debug)]
pub enum RegistrationError {
    /// `bot_platform_endpoint` is not an endpoint.
    Endpoint(Invalid),
    /// Nothing answered at the endpoint within `CONNECT_TIMEOUT`.
    Unreachable { endpoint: String },
    /// The platform refused the bot's credential: what it means and what to do.
    Refused(String),
    /// A call to the platform failed: what it was for, and its status.
    Platform { what: &'static str, error: Box<grpcio::Error> },
    /// The config, the state and the platform disagree (the bot's username or first_name,
    /// the token's bot, the state_dir's bot).
    Mismatch(String),
    Store(StoreError),
}

impl std::fmt::Display for RegistrationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RegistrationError::Endpoint(why) => write!(f, "bot_platform_endpoint: {why}"),
            RegistrationError::Unreachable { endpoint } => write!(
                f,
                "cannot reach bot_platform_endpoint {endpoint} (no connection within {CONNECT_TIMEOUT:?}): is the \
                 platform server running there, and is the address the one @BotManager's config snippet gave?"
            ),
            RegistrationError::Refused(advice) => f.write_str(advice),
            RegistrationError::Platform { what, error } => write!(f, "{what}: {}", rpc::text(error)),
            RegistrationError::Mismatch(why) => f.write_str(why),
            RegistrationError::Store(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RegistrationError {}

impl From<StoreError> for RegistrationError {
    fn from(e: StoreError) -> Self {
        RegistrationError::Store(e)
    }
}

/// Connects, registers this runtime as a device if the state is new, checks the credential,
/// and returns the platform port authenticated as that device.
pub fn register_or_resume(endpoint: &str, bot: &BotConfig, store: &Store) -> Result<GrpcPort, RegistrationError> {
    let at = format!("bot @{}", bot.username);
    // Before registering anything: a refused config must not leave a device behind.
    let mut port = connect_checked(endpoint, bot)?;
    let existing = store.read(|c| Ok(e2e::registration(c)?))?;
    let reg = match existing {
        Some(reg) if reg.user_id != bot.compat_user_id => {
            return Err(RegistrationError::Mismatch(format!(
                "state_dir holds a device of bot {}, not of {}; use this bot's own state_dir",
                reg.user_id, bot.compat_user_id
            )))
        }
        Some(reg) => reg,
        None => register(&port, bot, store)?,
    };
    // A state_dir from before group leaves carried proof gets its proof here (idempotent).
    let seed = bot.identity().seed();
    store.write(move |c| Ok(e2e::leaf::save_own_proof(c, &crate::crypto::IdentityKeyPair::from_seed(&seed))?))?;
    port.set_credential(Credential::Bot { token: bot.token.clone(), device_id: Some(reg.device_id) });
    port.verify_credential(&VerifyCredentialRequest::new()).map_err(|e| refused(e, bot, reg.device_id))?;
    log::info!("{at}: running as device {} of bot {}", reg.device_id, reg.user_id);
    report_other_devices(&port, &at, reg.device_id);
    Ok(port)
}

/// Connects to the platform and checks, without registering anything, that the token is the
/// bot's current one and its username and first_name are the platform's: what start-up does
/// first, and all that `check-config --connect` does. The channel runs on the completion
/// queues every bot shares (`grpc-cq-<i>`).
pub fn connect_checked(endpoint: &str, bot: &BotConfig) -> Result<GrpcPort, RegistrationError> {
    let platform = Platform::connect_shared(endpoint, Credential::Bot { token: bot.token.clone(), device_id: None })
        .map_err(RegistrationError::Endpoint)?;
    if !platform.wait_connected(CONNECT_TIMEOUT) {
        return Err(RegistrationError::Unreachable { endpoint: endpoint.to_string() });
    }
    let port = GrpcPort::new(platform);
    port.verify_credential(&VerifyCredentialRequest::new()).map_err(|e| refused(e, bot, 0))?;
    check_profile(&port, bot)?;
    Ok(port)
}

/// A failed credential check as a start-up error: the refusal's meaning and what to do.
fn refused(e: grpcio::Error, bot: &BotConfig, device_id: u32) -> RegistrationError {
    if rpc::is_unauthenticated(&e) {
        let refusal = rpc::Refusal::of(&rpc::text(&e));
        RegistrationError::Refused(super::runtime::refusal_advice(refusal, &bot.username, device_id))
    } else {
        RegistrationError::Platform { what: "cannot check the credential with the platform", error: Box::new(e) }
    }
}

/// Logs how many OTHER runtimes of the bot are live (hold an Inbox stream now), warning when
/// there are any: each of them also receives and answers every message. Informational only:
/// a platform that cannot list devices does not stop the start.
fn report_other_devices(platform: &dyn PlatformPort, at: &str, own: u32) {
    let devices = match platform.list_devices(&ListDevicesRequest::new()) {
        Ok(r) => r.devices,
        Err(e) => {
            log::warn!("{at}: cannot list the bot's devices: {}", rpc::text(&e));
            return;
        }
    };
    let active = devices.iter().filter(|d| d.active).count();
    let live: Vec<u32> =
        devices.iter().filter(|d| d.active && d.connected && d.device_id != own).map(|d| d.device_id).collect();
    if live.is_empty() {
        log::info!("{at}: no other live device of the bot ({active} active in all, this one included)");
    } else {
        let list: Vec<String> = live.iter().map(|d| d.to_string()).collect();
        log::warn!(
            "{at}: {} other live device(s) of the bot are connected now (device {}): two live runtimes both \
             receive and answer every message. If that is not intended, stop the other runtime or remove its \
             device via @BotManager /devices and /removedevice",
            live.len(),
            list.join(", ")
        );
    }
}

/// `getMe` answers from the config, and SDKs route `/command@username` by it: a `username` or
/// `first_name` that is not the platform's (a typo, a stale copy) is refused at start rather
/// than served.
fn check_profile(platform: &dyn PlatformPort, bot: &BotConfig) -> Result<(), RegistrationError> {
    let mut req = LookupUserRequest::new();
    req.user_id = bot.compat_user_id;
    let profile = platform
        .lookup_user(&req)
        .map_err(|e| RegistrationError::Platform { what: "cannot look up the bot's own profile", error: Box::new(e) })?;
    if profile.username != bot.username {
        return Err(RegistrationError::Mismatch(format!(
            "username {:?} does not match the platform, which knows bot {} as @{}",
            bot.username, bot.compat_user_id, profile.username
        )));
    }
    if profile.display_name != bot.first_name {
        return Err(RegistrationError::Mismatch(format!(
            "first_name {:?} does not match the bot's display name on the platform, {:?}",
            bot.first_name, profile.display_name
        )));
    }
    Ok(())
}

fn register(platform: &dyn PlatformPort, bot: &BotConfig, store: &Store) -> Result<Registration, RegistrationError> {
    let identity = bot.identity();
    let seed = identity.seed();
    let keys = store.write(move |c| Ok(e2e::create_device_keys(c, &crypto::IdentityKeyPair::from_seed(&seed))?))?;
    let timestamp = unix_now();
    let statement = crypto::identity::bot_registration_statement(bot.compat_user_id, &keys.device_key, timestamp);
    let mut req = RegisterBotDeviceRequest::new();
    req.proof = identity.sign(&statement).to_vec();
    req.timestamp = timestamp;
    req.device = protobuf::MessageField::some(keys);
    let resp = platform
        .register_bot_device(&req)
        .map_err(|e| RegistrationError::Platform { what: "the platform refused to register this gateway as a device", error: Box::new(e) })?;
    if resp.bot_user_id != bot.compat_user_id {
        return Err(RegistrationError::Mismatch(format!(
            "the token belongs to bot {}, but compat_user_id is {}",
            resp.bot_user_id, bot.compat_user_id
        )));
    }
    let reg = Registration { user_id: resp.bot_user_id, device_id: resp.device_id };
    store.write(move |c| Ok(e2e::save_registration(c, reg)?))?;
    log::info!("bot @{}: registered new device {}", bot.username, reg.device_id);
    Ok(reg)
}

