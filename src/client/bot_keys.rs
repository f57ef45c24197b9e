//! Bots whose identity only their owner holds: `/newbot` and `/rekey` in the dialog with the
//! management bot, with the identity secret drawn here and never sent (`e2e::bot_key`).
//!
//! The dialog is the one a person has (the same questions, in the same order); this module
//! answers them and attaches the key's proof to the answer that completes the request. The
//! secret is kept in the profile (`client_bot_secrets`) from before its proof leaves this
//! device, so a crash or a lost answer loses nothing, until a gateway config holds it
//! (`forget_bot_secret`, called by whoever wrote the config). The management bot's reply never
//! carries it.
//!
//! What else arrives while a reply is awaited is processed and remembered, but not returned.

use std::time::{Duration, Instant};

use rusqlite::{params, OptionalExtension};
use zeroize::Zeroizing;

use super::error::{ClientError, Result};
use super::profile::{write_txn, Profile};
use crate::clock::unix_now;
use crate::crypto::identity::BotKeyPurpose;
use crate::crypto::{self, fingerprint};
use crate::e2e::bot_key::DrawnBotKey;
use crate::wire::bot_account;
use crate::wire::e2e::{BotKeyProof, Content};
use crate::wire::platform::Profile as PeerProfile;

/// What the owner asks `/newbot` for.
#[derive(Debug, Clone)]
pub struct NewBot {
    /// Without a leading `@`.
    pub username: String,
    pub display_name: String,
    /// `default`, or a comma list of dm, groups, channels.
    pub capabilities: String,
}

/// A bot made by `create_bot`: what its gateway config needs, with the secret drawn here.
pub struct CreatedBot {
    pub token: String,
    pub bot_id_hex: String,
    pub secret_hex: Zeroizing<String>,
    pub compat_user_id: u64,
    pub username: String,
    pub first_name: String,
    pub capabilities: String,
    /// The management bot's final reply (it carries the config to fill in, never the secret).
    pub reply: String,
}

impl CreatedBot {
    /// The 30 digits a person reads aloud to compare the Bot ID.
    pub fn short_form(&self) -> String {
        short_form(self.compat_user_id, &self.bot_id_hex)
    }
}

/// A bot moved to a new identity by `rekey_bot`.
pub struct RekeyedBot {
    pub bot_id_hex: String,
    pub secret_hex: Zeroizing<String>,
    pub compat_user_id: u64,
    pub username: String,
    pub removed_devices: u64,
}

impl RekeyedBot {
    pub fn short_form(&self) -> String {
        short_form(self.compat_user_id, &self.bot_id_hex)
    }
}

fn short_form(user_id: u64, bot_id_hex: &str) -> String {
    crypto::hex_decode_32(bot_id_hex).map(|k| fingerprint::readable(user_id, &k)).unwrap_or_default()
}

/// How long each reply of the management bot is awaited.
pub const REPLY_WAIT: Duration = Duration::from_secs(60);

impl Profile {
    /// Creates a bot in the dialog with `manager` (`@BotManager`): answers `/newbot`'s three
    /// questions, draws the identity secret here and sends the key's proof with the last
    /// answer, then checks that the bot the platform made has that key. A refused answer ends
    /// the dialog (`/cancel`) with the manager's words.
    pub fn create_bot(&self, manager: &str, request: &NewBot) -> Result<CreatedBot> {
        let username = request.username.trim().trim_start_matches('@').to_string();
        let display_name = request.display_name.trim().to_string();
        bot_account::check_username(&username).map_err(|e| ClientError::Invalid(e.0))?;
        bot_account::check_display_name(&display_name).map_err(|e| ClientError::Invalid(e.0))?;
        let capabilities = bot_account::parse_capabilities(&request.capabilities).map_err(|e| ClientError::Invalid(e.0))?;
        let peer = self.lookup(manager)?;
        if !peer.is_bot {
            return Err(ClientError::Invalid(format!("@{} is not a bot, so not the management bot", peer.username)));
        }
        self.ask(&peer, &plain("/newbot"))?;
        for answer in [&username, &display_name] {
            let reply = self.ask(&peer, &plain(answer))?;
            if reply.starts_with("Invalid") {
                return Err(self.refused(&peer, &reply));
            }
        }
        let key = DrawnBotKey::draw();
        self.stash_bot_secret(&key, &username)?;
        let proof = key.proof(BotKeyPurpose::Creation, self.user_id(), &username, &capabilities, unix_now());
        let reply = self.ask(&peer, &with_proof(&capabilities, proof))?;
        if !reply.starts_with("Done!") {
            return Err(self.refused(&peer, &reply));
        }
        let field = |name: &str| {
            line(&reply, name).ok_or_else(|| ClientError::Invalid(format!("@{}'s final reply has no {name:?} line", peer.username)))
        };
        let bot_id_hex = field("Bot ID")?;
        check_bot_id(&peer, &key, &bot_id_hex)?;
        let compat_user_id = field("Numeric id")?
            .parse::<u64>()
            .map_err(|_| ClientError::Invalid(format!("@{}'s final reply has a malformed numeric id", peer.username)))?;
        Ok(CreatedBot {
            token: field("Token")?,
            bot_id_hex,
            secret_hex: key.secret_hex(),
            compat_user_id,
            username,
            first_name: display_name,
            capabilities,
            reply,
        })
    }

    /// Moves `bot` (owned by this profile's user) to a new identity in the dialog with
    /// `manager`: draws the secret here, sends `/rekey @bot` with the key's proof, and checks the
    /// Bot ID the answer names.
    pub fn rekey_bot(&self, manager: &str, bot: &str) -> Result<RekeyedBot> {
        let peer = self.lookup(manager)?;
        // The username exactly as the platform spells it: the proof signs it.
        let target = self.lookup_unchecked(bot)?;
        if !target.is_bot {
            return Err(ClientError::Invalid(format!("@{} is not a bot", target.username)));
        }
        let key = DrawnBotKey::draw();
        self.stash_bot_secret(&key, &target.username)?;
        let proof = key.proof(BotKeyPurpose::Rekey, self.user_id(), &target.username, "", unix_now());
        let reply = self.ask(&peer, &with_proof(&format!("/rekey @{}", target.username), proof))?;
        if !reply.contains("has a new identity.") {
            return Err(ClientError::Invalid(format!("@{} refused: {}", peer.username, first_line(&reply))));
        }
        let bot_id_hex =
            line(&reply, "Bot ID").ok_or_else(|| ClientError::Invalid(format!("@{}'s reply has no Bot ID", peer.username)))?;
        check_bot_id(&peer, &key, &bot_id_hex)?;
        let removed_devices = line(&reply, "Devices removed").and_then(|n| n.parse().ok()).unwrap_or(0);
        Ok(RekeyedBot {
            bot_id_hex,
            secret_hex: key.secret_hex(),
            compat_user_id: target.user_id,
            username: target.username,
            removed_devices,
        })
    }

    /// The secret this profile drew for the bot with this Bot ID, while no config holds it.
    pub fn stashed_bot_secret(&self, bot_id_hex: &str) -> Result<Option<Zeroizing<String>>> {
        let secret: Option<Zeroizing<Vec<u8>>> = self
            .conn
            .query_row("SELECT secret FROM client_bot_secrets WHERE bot_id_hex = ?1", params![bot_id_hex], |r| r.get(0))
            .optional()?
            .map(Zeroizing::new);
        Ok(secret.map(|s| Zeroizing::new(crypto::hex_encode(&s))))
    }

    /// Forgets a drawn secret once a gateway config holds it (the profile keeps no copy).
    pub fn forget_bot_secret(&self, bot_id_hex: &str) -> Result<()> {
        write_txn(&self.conn, |c| {
            c.execute("DELETE FROM client_bot_secrets WHERE bot_id_hex = ?1", params![bot_id_hex])?;
            // No copy of the row stays in the write-ahead log either.
            crate::e2e::wal::secrets_deleted();
            Ok(())
        })
    }

    fn stash_bot_secret(&self, key: &DrawnBotKey, username: &str) -> Result<()> {
        write_txn(&self.conn, |c| {
            c.execute(
                "INSERT INTO client_bot_secrets (bot_id_hex, secret, username, drawn_at) VALUES (?1, ?2, ?3, ?4)",
                params![key.bot_id_hex(), &key.secret()[..], username, unix_now()],
            )?;
            Ok(())
        })
    }

    /// Sends `content` to the management bot and waits for its next message.
    fn ask(&self, manager: &PeerProfile, content: &Content) -> Result<String> {
        self.send_content(manager, content)?;
        let deadline = Instant::now() + REPLY_WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ClientError::Invalid(format!("@{} did not answer within {REPLY_WAIT:?}", manager.username)));
            }
            for message in self.receive(left, 1)? {
                if message.sender.user_id == manager.user_id {
                    return Ok(message.text);
                }
            }
        }
    }

    /// Ends an unfinished `/newbot` after a refusal, whose first line is the error.
    fn refused(&self, manager: &PeerProfile, reply: &str) -> ClientError {
        if let Err(e) = self.ask(manager, &plain("/cancel")) {
            log::warn!("could not cancel the unfinished /newbot with @{}: {e}", manager.username);
        }
        ClientError::Invalid(format!("@{} refused: {}", manager.username, first_line(reply)))
    }
}

/// The platform must have made the bot under the key drawn here; anything else is refused.
fn check_bot_id(manager: &PeerProfile, key: &DrawnBotKey, bot_id_hex: &str) -> Result<()> {
    if !bot_id_hex.eq_ignore_ascii_case(&key.bot_id_hex()) {
        return Err(ClientError::Invalid(format!(
            "SECURITY WARNING: @{} answered with Bot ID {bot_id_hex}, not the key this device drew ({}); \
             do not use this bot",
            manager.username,
            key.bot_id_hex()
        )));
    }
    Ok(())
}

fn plain(text: &str) -> Content {
    crate::e2e::text_content(text)
}

fn with_proof(text: &str, proof: BotKeyProof) -> Content {
    let mut content = plain(text);
    content.bot_key = protobuf::MessageField::some(proof);
    content
}

/// The value of the reply line `<name>: <value>`.
fn line(reply: &str, name: &str) -> Option<String> {
    let prefix = format!("{name}: ");
    reply.lines().find_map(|l| l.strip_prefix(&prefix)).map(|v| v.trim().to_string())
}

fn first_line(reply: &str) -> &str {
    reply.lines().next().unwrap_or_default()
}
