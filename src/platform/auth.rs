//! Who is calling: parses the `authorization` / `x-device-id` call metadata (see the top of
//! proto/platform.proto and src/wire/connect.rs) and checks it against the store.
//!
//! Secrets are compared as digests in constant time and never appear in errors or logs.

use grpcio::Metadata;

use super::error::{PlatformError, Result};
use super::rules;
use crate::wire::token::BotToken;
use super::store::{AccountStatus, DeviceAddr, Store};
use crate::wire::connect::{AUTHORIZATION, DEVICE_ID};

/// A credential as presented, before it is checked. `Debug` never prints a secret.
#[derive(Clone, PartialEq, Eq)]
pub enum Presented {
    None,
    Bot { token: BotToken, device_id: Option<u32> },
    Device { addr: DeviceAddr, secret: [u8; 32] },
}

impl std::fmt::Debug for Presented {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Presented::None => f.write_str("None"),
            Presented::Bot { token, device_id } => f.debug_struct("Bot").field("token", token).field("device_id", device_id).finish(),
            Presented::Device { addr, .. } => f.debug_struct("Device").field("addr", addr).field("secret", &"<redacted>").finish(),
        }
    }
}

/// What a call needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// A bot token; a device id is not needed (RegisterBotDevice).
    BotToken,
    /// Any valid credential; a bot may omit the device id (VerifyCredential).
    Any,
    /// An active device: a user device, or a bot token with the id of an active bot device.
    Device,
}

/// An authenticated caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller {
    pub user_id: u64,
    /// `None` only for a bot that gave no device id (allowed by `Need::BotToken` and `Need::Any`).
    pub device_id: Option<u32>,
    pub is_bot: bool,
}

impl Caller {
    /// The caller's device; only `None` when the call did not need one.
    pub fn device(&self) -> Option<DeviceAddr> {
        self.device_id.map(|device_id| DeviceAddr { user_id: self.user_id, device_id })
    }
}

fn unauthenticated(msg: impl Into<String>) -> PlatformError {
    PlatformError::Unauthenticated(msg.into())
}

/// Reads the credential from call metadata.
pub fn presented(headers: &Metadata) -> Result<Presented> {
    let mut authorization = None;
    let mut device_header = None;
    for (key, value) in headers.iter() {
        if key.eq_ignore_ascii_case(AUTHORIZATION) {
            authorization = Some(value);
        } else if key.eq_ignore_ascii_case(DEVICE_ID) {
            device_header = Some(value);
        }
    }
    let device_id = match device_header {
        None => None,
        Some(v) => Some(
            std::str::from_utf8(v)
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok())
                .filter(|id| *id > 0)
                .ok_or_else(|| unauthenticated(format!("{DEVICE_ID} must be a positive device number")))?,
        ),
    };
    let Some(value) = authorization else { return Ok(Presented::None) };
    let value = std::str::from_utf8(value).map_err(|_| unauthenticated("authorization metadata is not text"))?;
    parse_authorization(value, device_id)
}

/// Parses `Bot <token>` or `Device <user_id>:<device_id>:<secret hex>`.
pub fn parse_authorization(value: &str, device_id: Option<u32>) -> Result<Presented> {
    let (scheme, rest) = value.trim().split_once(' ').unwrap_or((value, ""));
    if scheme.eq_ignore_ascii_case("Bot") {
        let token = rules::parse_bot_token(rest.trim())?;
        return Ok(Presented::Bot { token, device_id });
    }
    if scheme.eq_ignore_ascii_case("Device") {
        let malformed =
            || unauthenticated("malformed device credential: expected Device <user_id>:<device_id>:<64 hex>");
        let mut parts = rest.trim().splitn(3, ':');
        let user_id = parts.next().and_then(|p| p.parse::<u64>().ok()).ok_or_else(malformed)?;
        let device_id = parts.next().and_then(|p| p.parse::<u32>().ok()).ok_or_else(malformed)?;
        let secret = parts.next().and_then(crate::crypto::hex_decode_32).ok_or_else(malformed)?;
        return Ok(Presented::Device { addr: DeviceAddr { user_id, device_id }, secret });
    }
    Err(unauthenticated(
        "unsupported authorization scheme: use `Bot <token>` or `Device <user_id>:<device_id>:<secret>`",
    ))
}

/// Checks a presented credential against the store.
pub fn authenticate(store: &Store, presented: &Presented, need: Need) -> Result<Caller> {
    match presented {
        Presented::None => Err(unauthenticated("this call needs a credential (authorization metadata)")),
        Presented::Device { addr, secret } => {
            if need == Need::BotToken {
                return Err(unauthenticated("this call needs a bot token"));
            }
            let device = store.device(*addr)?;
            let matches = device
                .as_ref()
                .and_then(|d| d.secret_digest)
                .is_some_and(|digest| crate::crypto::constant_time_eq(&digest, &crate::crypto::digest(secret)));
            if !matches {
                return Err(unauthenticated(format!(
                    "device credential for device {} of user {} is unknown or wrong",
                    addr.device_id, addr.user_id
                )));
            }
            if !device.is_some_and(|d| d.active) {
                return Err(unauthenticated(format!(
                    "device {} of user {} is no longer active",
                    addr.device_id, addr.user_id
                )));
            }
            store.device_seen(*addr, crate::clock::unix_now(), false);
            Ok(Caller { user_id: addr.user_id, device_id: Some(addr.device_id), is_bot: false })
        }
        Presented::Bot { token, device_id } => {
            let bot_id = token.numeric_id;
            let credential =
                store.bot_credential(bot_id)?.ok_or_else(|| unauthenticated(crate::wire::rpc::TOKEN_REVOKED))?;
            // Before the token: disabling drops the token's digest, and the bot's gateway must
            // learn that it was disabled (for good), not that its token was replaced.
            if credential.status != AccountStatus::Active {
                return Err(unauthenticated(crate::wire::rpc::bot_disabled_message(bot_id)));
            }
            let digest = rules::token_digest(&token.secret);
            let valid = credential.token_digest.is_some_and(|stored| crate::crypto::constant_time_eq(&stored, &digest));
            if !valid {
                return Err(unauthenticated(crate::wire::rpc::TOKEN_REVOKED));
            }
            let device_id = match (need, device_id) {
                (Need::BotToken, _) => None,
                (Need::Any, None) => None,
                (Need::Device, None) => {
                    return Err(unauthenticated(format!(
                        "this call needs {DEVICE_ID} naming a registered device of bot {bot_id}"
                    )))
                }
                (_, Some(device_id)) => {
                    let addr = DeviceAddr { user_id: bot_id, device_id: *device_id };
                    match store.device(addr)? {
                        None => {
                            return Err(unauthenticated(format!("device {device_id} does not belong to bot {bot_id}")))
                        }
                        Some(d) if d.removed => {
                            return Err(unauthenticated(store.removal_message(addr)?))
                        }
                        Some(d) if !d.active => {
                            return Err(unauthenticated(format!(
                                "device {device_id} of bot {bot_id} is no longer active"
                            )))
                        }
                        Some(_) => {
                            store.device_seen(addr, crate::clock::unix_now(), false);
                            Some(*device_id)
                        }
                    }
                }
            };
            Ok(Caller { user_id: bot_id, device_id, is_bot: true })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::store::{NewDevice, SignedPrekey};

    fn device(seed: u8) -> NewDevice {
        NewDevice {
            device_key: [seed; 32],
            certificate: [seed; 64],
            signed_prekey: SignedPrekey { id: 1, public_key: [1; 32], signature: [2; 64] },
            one_time_prekeys: vec![],
        }
    }

    fn bot(token: &str, device_id: Option<u32>) -> Presented {
        parse_authorization(&format!("Bot {token}"), device_id).expect("well-formed")
    }

    #[test]
    fn parses_both_schemes() {
        let secret = "0f".repeat(32);
        match parse_authorization(&format!("Device 42:3:{secret}"), None).expect("device") {
            Presented::Device { addr, secret } => {
                assert_eq!(addr, DeviceAddr { user_id: 42, device_id: 3 });
                assert_eq!(secret, [0x0f; 32]);
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(matches!(bot(&format!("7:{secret}"), Some(2)), Presented::Bot { device_id: Some(2), .. }));
        for presented in [parse_authorization(&format!("Device 42:3:{secret}"), None).expect("device"), bot(&format!("7:{secret}"), None)] {
            let shown = format!("{presented:?}");
            assert!(shown.contains("<redacted>") && !shown.contains("15, 15") && !shown.contains(&secret), "{shown}");
        }
        assert!(parse_authorization("Basic abc", None).is_err());
        assert!(parse_authorization(&format!("Device 42:{secret}"), None).is_err());
        assert!(parse_authorization("Bot 7:abc", None).is_err());
    }

    #[test]
    fn bot_tokens_are_checked_by_digest() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(dir.path()).expect("store");
        let (id, token) = store.create_bot("auth_bot", "Auth", "default", &[1; 32], None, 1).expect("bot");
        let (other_id, _) = store.create_bot("other_bot", "Other", "default", &[2; 32], None, 1).expect("bot");
        store.register_bot_device(id, &device(1), 1).expect("device");
        store.register_bot_device(other_id, &device(2), 1).expect("device");

        let ok = authenticate(&store, &bot(&token, None), Need::BotToken).expect("token is valid");
        assert_eq!(ok, Caller { user_id: id, device_id: None, is_bot: true });
        let ok = authenticate(&store, &bot(&token, Some(1)), Need::Device).expect("device 1 is the bot's");
        assert_eq!(ok.device(), Some(DeviceAddr { user_id: id, device_id: 1 }));

        let err = authenticate(&store, &bot(&token, None), Need::Device).expect_err("device id needed");
        assert!(err.message().contains("x-device-id"), "{err}");
        let err = authenticate(&store, &bot(&token, Some(2)), Need::Device).expect_err("not this bot's device");
        assert_eq!(err.message(), format!("device 2 does not belong to bot {id}"));

        store.remove_device(DeviceAddr { user_id: id, device_id: 1 }, 5).expect("remove");
        let err = authenticate(&store, &bot(&token, Some(1)), Need::Device).expect_err("removed device");
        assert!(err.message().starts_with(crate::wire::rpc::DEVICE_REMOVED), "{err}");
        assert!(err.message().contains("@BotManager"), "{err}");
        assert!(authenticate(&store, &bot(&token, None), Need::Any).is_ok(), "the token itself stays valid");
        store.register_bot_device(id, &device(4), 1).expect("device 2");

        let wrong = format!("{id}:{}", "00".repeat(32));
        let err = authenticate(&store, &bot(&wrong, None), Need::BotToken).expect_err("wrong secret");
        assert_eq!(err, PlatformError::Unauthenticated("bot token revoked or unknown".into()));

        let rotated = store.rotate_bot_token(id).expect("rotate");
        assert!(authenticate(&store, &bot(&token, Some(2)), Need::Device).is_err(), "old token revoked");
        assert!(authenticate(&store, &bot(&rotated, Some(2)), Need::Device).is_ok());
        store.set_bot_status(id, AccountStatus::Disabled).expect("disable");
        let err = authenticate(&store, &bot(&rotated, Some(2)), Need::Any).expect_err("disabled");
        assert_eq!(err.code(), grpcio::RpcStatusCode::UNAUTHENTICATED);
        assert!(authenticate(&store, &Presented::None, Need::Any).is_err());
    }

    #[test]
    fn device_secrets_are_checked_by_digest() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(dir.path()).expect("store");
        let secret = [5u8; 32];
        let addr = store
            .register_user("dev_user", "Dev", &[1; 32], &device(3), &crate::crypto::digest(&secret), 1)
            .expect("user");
        let good = Presented::Device { addr, secret };
        assert_eq!(authenticate(&store, &good, Need::Device).expect("valid").device(), Some(addr));
        assert!(authenticate(&store, &good, Need::BotToken).is_err(), "a user device is not a bot token");
        let bad = Presented::Device { addr, secret: [6; 32] };
        assert!(authenticate(&store, &bad, Need::Device).is_err());
        let unknown = Presented::Device { addr: DeviceAddr { user_id: addr.user_id, device_id: 9 }, secret };
        assert!(authenticate(&store, &unknown, Need::Device).is_err());
        store.deactivate_device(addr).expect("deactivate");
        assert!(authenticate(&store, &good, Need::Device).is_err(), "inactive device");
    }
}
