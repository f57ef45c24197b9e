//! Becoming (or resuming as) a device of the bot on the platform at start-up.
//!
//! A fresh `state_dir` registers a new device: the device certificate and a registration
//! proof are signed by the bot identity key derived from the recovery secret, so the platform
//! refuses a token, recovery secret and state that do not belong to one bot.
//!
//! A bot whose owner moved it to a new identity (`/rekey`; the state was re-encrypted under the
//! new secret by `store::rekey`) has a device of the old identity in its state, which the
//! platform removed: that device is forgotten (keys, sessions; the queue, history and files
//! stay), its groups are joined again, and a new device is registered under the new identity.

use std::time::Duration;

use super::config::BotConfig;
use super::runtime::unix_now;
use super::store::{Store, StoreError};
use crate::crypto;
use crate::e2e::{self, Registration};
use crate::wire::platform::{
    BotDevice, CertifyDeviceRequest, DeviceRemoval, ListDevicesRequest, LookupUserRequest, RegisterBotDeviceRequest,
    RemoveDeviceRequest, VerifyCredentialRequest,
};
use zeroize::Zeroizing;
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
        Some(reg) if identity_moved(store, bot)? => {
            log::warn!(
                "{at}: the bot has a new identity (Bot ID {}); device {} of the old one is forgotten and a new device \
                 is registered (the queue and history stay)",
                bot.bot_id_hex,
                reg.device_id
            );
            store.write(|c| {
                crate::e2e::forget_own_device(c)?;
                super::store::groups::join_again_as_new_device(c)?;
                Ok(())
            })?;
            register(&port, bot, store)?
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
    certify_own_device(&port, store, bot, reg, &at)?;
    if let Some(devices) = report_other_devices(&port, &at, reg.device_id) {
        sign_removals(&port, store, &bot.identity(), bot.compat_user_id, &devices, &at)?;
    }
    Ok(port)
}

/// Whether the state's device was registered under another identity than the config's: the
/// owner moved the bot to a new key.
fn identity_moved(store: &Store, bot: &BotConfig) -> Result<bool, RegistrationError> {
    let own = store.read(|c| Ok(crate::e2e::own_identity_key(c)?))?;
    Ok(own.is_some_and(|key| key != bot.identity().public_key()))
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
        RegistrationError::Refused(super::advice::refusal_advice(refusal, &bot.username, device_id))
    } else {
        RegistrationError::Platform { what: "cannot check the credential with the platform", error: Box::new(e) }
    }
}

/// Gives the platform this device's second-version certificate, once (`e2e::leaf`): it binds
/// the bot's user id, the device id and a time, so the device cannot be relabelled. A platform
/// that does not take it is logged, and the start goes on (receivers still read the first
/// version).
fn certify_own_device(platform: &dyn PlatformPort, store: &Store, bot: &BotConfig, reg: Registration, at: &str) -> Result<(), RegistrationError> {
    let seed = Zeroizing::new(bot.identity().seed());
    let now = unix_now();
    let certificate = store.write(move |c| Ok(e2e::leaf::certify_own_device(c, &crypto::IdentityKeyPair::from_seed(&seed), reg, now)?))?;
    if store.read(|c| Ok(e2e::leaf::own_certificate_v2_uploaded(c)?))? {
        return Ok(());
    }
    let request = CertifyDeviceRequest { certificate: protobuf::MessageField::some(certificate), ..Default::default() };
    match platform.certify_device(&request) {
        Ok(_) => store.write(|c| Ok(e2e::leaf::set_own_certificate_v2_uploaded(c)?))?,
        Err(e) => log::warn!("{at}: the platform did not take this device's certificate (version 2): {}", rpc::text(&e)),
    }
    Ok(())
}

/// Signs the removal of every device of the bot the platform lists as removed (its owner's
/// `/removedevice`) whose removal carries no signature yet, and records it here too: from then
/// on users' clients refuse that device, whatever the platform serves later (`e2e::removals`).
/// At start (from the list start-up reads anyway) and in the hourly upkeep (`inbox`).
pub(super) fn sign_removals(
    platform: &dyn PlatformPort,
    store: &Store,
    identity: &crypto::IdentityKeyPair,
    bot_user_id: u64,
    devices: &[BotDevice],
    at: &str,
) -> Result<(), StoreError> {
    for d in devices.iter().filter(|d| !d.active && d.removed_at > 0 && !d.removal_signed) {
        let Ok(device_key) = <[u8; 32]>::try_from(d.device_key.as_slice()) else { continue };
        let statement = crypto::identity::device_removal_statement(&identity.public_key(), bot_user_id, d.device_id, &device_key, d.removed_at);
        let removal = DeviceRemoval {
            device_id: d.device_id,
            device_key: d.device_key.clone(),
            removed_at: d.removed_at,
            signature: identity.sign(&statement).to_vec(),
            ..Default::default()
        };
        let request = RemoveDeviceRequest { removal: protobuf::MessageField::some(removal.clone()), ..Default::default() };
        match platform.remove_device(&request) {
            Ok(_) => log::info!("{at}: signed the removal of device {} of the bot", d.device_id),
            Err(e) => {
                log::warn!("{at}: the platform did not take the signed removal of device {}: {}", d.device_id, rpc::text(&e));
                continue;
            }
        }
        let own_key = identity.public_key();
        store.write(move |c| Ok(e2e::removals::record_removals(c, bot_user_id, &own_key, &[removal])?))?;
    }
    Ok(())
}

/// The hourly part of `sign_removals`: the bot's devices listed again, any new removal signed.
pub(super) fn sign_new_removals(platform: &dyn PlatformPort, store: &Store, identity: &crypto::IdentityKeyPair, bot_user_id: u64, at: &str) {
    let devices = match platform.list_devices(&ListDevicesRequest::new()) {
        Ok(r) => r.devices,
        Err(e) => {
            log::warn!("{at}: cannot list the bot's devices to sign their removals: {}", rpc::text(&e));
            return;
        }
    };
    if let Err(e) = sign_removals(platform, store, identity, bot_user_id, &devices, at) {
        log::warn!("{at}: recording a signed removal: {e}");
    }
}

/// Logs how many OTHER runtimes of the bot are live (hold an Inbox stream now), warning when
/// there are any: each of them also receives and answers every message, and returns the list.
/// Informational only: a platform that cannot list devices does not stop the start.
fn report_other_devices(platform: &dyn PlatformPort, at: &str, own: u32) -> Option<Vec<BotDevice>> {
    let devices = match platform.list_devices(&ListDevicesRequest::new()) {
        Ok(r) => r.devices,
        Err(e) => {
            log::warn!("{at}: cannot list the bot's devices: {}", rpc::text(&e));
            return None;
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
    Some(devices)
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

