//! Sending from a profile (a text, a button press, a reaction): look the peer up, make sure there is a session with each
//! of its devices (fetching prekey bundles for the ones without), seal, and hand the
//! ciphertexts to the platform; when the platform says our device list is stale, update it and
//! send again under the same client message id.
//!
//! The client's send is not durable (a crashed `send` is simply re-run by the person), so a
//! retry may encrypt again; the gateway's outbox, which must not, does this differently.

use rusqlite::Connection;

use super::error::{ClientError, E2eContext, Result, rpc};
use super::history;
use super::message::{Entity, GroupId, ReactionType, SentMessage, SentPress};
use super::profile::Profile;
use crate::wire::rpc::code as rpc_code;
use crate::crypto;
use crate::e2e;
use crate::wire::e2e::{content::Body, CallbackPress, Content, KeyboardContext, Reaction, Text};
use protobuf::Message as _;
use crate::wire::platform::{
    send_result, DeviceCiphertext, GetPrekeyBundlesRequest, GetPrekeyBundlesResponse, LookupUserRequest, MessageIdReservation,
    OutgoingMessage, Profile as PeerProfile, ReserveMessageIdsRequest, SendMessagesRequest, SendResult,
};

/// A fresh client message id: 16 random bytes in hex.
pub(super) fn new_client_message_id() -> String {
    crypto::hex_encode(&crypto::random_bytes::<16>())
}

/// Rounds of "stale device list, update, resend" before giving up.
pub const MAX_SEND_ATTEMPTS: usize = 5;

impl Profile {
    /// Finds a user by username (case-insensitive, leading `@` optional).
    /// Looks a user up on the platform and checks that the name still stands for the account
    /// it stood for (bound on first use; another one is `NameRebound`) and the identity key
    /// served against the one pinned for them (pinned on first use): a changed key is
    /// `IdentityChanged`.
    ///
    /// A name this process checked less than `CHECKED_NAME_TTL` ago is answered from memory: it
    /// stands for the account it is bound to whatever the platform says now, so asking again
    /// would only cost the round trip (the echo path sends to the same name every time).
    pub fn lookup(&self, username: &str) -> Result<PeerProfile> {
        if let Some(p) = self.recently_checked(username) {
            return Ok(p);
        }
        let p = self.lookup_unchecked(username)?;
        self.check_name(username, &p)?;
        self.check_pinned(&p)?;
        self.checked(username, &p);
        Ok(p)
    }

    /// `lookup` without the name and pin checks: for `verify` and `trust`, which show a change.
    pub(super) fn lookup_unchecked(&self, username: &str) -> Result<PeerProfile> {
        let name = username.trim_start_matches('@');
        if name.is_empty() {
            return Err(ClientError::Invalid("no username given".to_string()));
        }
        let mut req = LookupUserRequest::new();
        req.username = name.to_string();
        match self.platform.client.lookup_user(&req, self.platform.opt()) {
            Ok(p) if p.user_id != 0 => Ok(p),
            Ok(_) => Err(ClientError::NoSuchUser(name.to_string())),
            Err(e) if rpc_code(&e) == Some(grpcio::RpcStatusCode::NOT_FOUND) => {
                Err(ClientError::NoSuchUser(name.to_string()))
            }
            Err(status) => Err(ClientError::Rpc { call: "LookupUser", status }),
        }
    }

    /// Sends a plain text message to `peer` (a username, `@` optional).
    pub fn send_text(&self, peer: &str, text: &str) -> Result<SentMessage> {
        self.send_message(peer, text, &[], None)
    }

    /// Sends a text message with formatting entities and optionally as a reply.
    pub fn send_message(
        &self,
        peer: &str,
        text: &str,
        entities: &[Entity],
        reply_to_message_id: Option<u64>,
    ) -> Result<SentMessage> {
        let peer = self.lookup(peer)?;
        let mut t = Text::new();
        t.text = text.to_string();
        t.entities = entities.iter().map(Entity::to_wire).collect();
        let mut content = Content::new();
        content.set_text(t);
        content.reply_to_message_id = reply_to_message_id.unwrap_or(0);
        self.send_content(&peer, &content)
    }

    /// Presses the callback button with `callback_data` under message `message_id` of `peer`'s
    /// dialog, sending back the keyboard's signed context exactly as it arrived. Refused when
    /// the message is not remembered (never received, deleted, or older than the newest
    /// `MAX_REMEMBERED`) or has no such button. The bot's answer arrives later as an
    /// `Incoming::CallbackAnswer` with the returned press id.
    pub fn press(&self, peer: &str, message_id: u64, callback_data: &str) -> Result<SentPress> {
        let peer = self.lookup(peer)?;
        let name = peer.username.as_str();
        // The bot's message, or ours carrying the bot's buttons (a chosen inline result).
        let message = match history::load(&self.conn, peer.user_id, message_id)? {
            Some(m) => Some(m),
            None => history::load_sent(&self.conn, peer.user_id, message_id)?.filter(|m| m.keyboard.is_some()),
        };
        let message = message.ok_or_else(|| ClientError::Invalid(format!("no message {message_id} from @{name} is known to this profile")))?;
        self.press_on(&peer, &message, message_id, callback_data)
    }

    /// Presses a button of a bot's message in a group: the press goes privately to the bot
    /// that signed the keyboard, as for a private message.
    pub fn press_in_group(&self, group: &GroupId, message_id: u64, callback_data: &str) -> Result<SentPress> {
        let message = history::load(&self.conn, history::group_peer(&group.0), message_id)?.ok_or_else(|| {
            ClientError::Invalid(format!("no message {message_id} of this group is known to this profile"))
        })?;
        let bot = message
            .keyboard
            .context
            .as_ref()
            .and_then(|signed| KeyboardContext::parse_from_bytes(&signed.context).ok())
            .map(|ctx| ctx.bot_user_id)
            .filter(|&id| id != 0)
            .ok_or_else(|| ClientError::Invalid(format!("message {message_id} of this group has no bot's buttons")))?;
        let mut req = LookupUserRequest::new();
        req.user_id = bot;
        let peer = self
            .platform
            .client
            .lookup_user(&req, self.platform.opt())
            .map_err(rpc("LookupUser"))?;
        self.press_on(&peer, &message, message_id, callback_data)
    }

    fn press_on(&self, peer: &PeerProfile, message: &Content, message_id: u64, callback_data: &str) -> Result<SentPress> {
        let name = peer.username.as_str();
        let keyboard = message
            .keyboard
            .as_ref()
            .ok_or_else(|| ClientError::Invalid(format!("message {message_id} from @{name} has no buttons")))?;
        // A link button has no callback data: it is opened, never pressed.
        if callback_data.is_empty() || !keyboard.rows.iter().flat_map(|r| &r.buttons).any(|b| b.callback_data == callback_data) {
            return Err(ClientError::Invalid(format!(
                "message {message_id} from @{name} has no button with that callback data"
            )));
        }
        if keyboard.context.is_none() {
            // The bot will refuse it; sending still lets the person see the bot's answer.
            log::warn!("the keyboard of message {message_id} from @{name} came without a signed context");
        }
        let press_id = crypto::hex_encode(&crypto::random_bytes::<16>());
        let mut press = CallbackPress::new();
        press.press_id = press_id.clone();
        press.message_id = message_id;
        press.callback_data = callback_data.to_string();
        press.context = keyboard.context.clone();
        let mut content = Content::new();
        content.set_press(press);
        let sent = self.send_content(peer, &content)?;
        Ok(SentPress { press_id, sent })
    }

    /// Sets our reaction to message `message_id` of `peer`'s dialog to `emoji`, replacing the
    /// previous one; an empty `emoji` removes it.
    pub fn react(&self, peer: &str, message_id: u64, emoji: &str) -> Result<SentMessage> {
        if message_id == 0 {
            return Err(ClientError::Invalid("a reaction needs a message id".to_string()));
        }
        let peer = self.lookup(peer)?;
        let mut reaction = Reaction::new();
        reaction.message_id = message_id;
        if !emoji.is_empty() {
            reaction.reactions.push(ReactionType::Emoji(emoji.to_string()).to_wire());
        }
        let mut content = Content::new();
        content.set_reaction(reaction);
        self.send_content(&peer, &content)
    }

    /// Seals `content` for every device of `peer` and sends it, updating the device list when
    /// the platform reports it stale.
    pub fn send_content(&self, peer: &PeerProfile, content: &Content) -> Result<SentMessage> {
        self.send_content_as(peer, content, &new_client_message_id())
    }

    /// `send_content` under a given client message id: the platform takes one message per
    /// id, so sending again under the id of a message it already took (a retry after a lost
    /// answer, a queued message sent again) answers with that message instead of a second one.
    pub(super) fn send_content_as(&self, peer: &PeerProfile, content: &Content, client_message_id: &str) -> Result<SentMessage> {
        let name = peer.username.as_str();
        if peer.user_id == self.user_id() {
            return Err(ClientError::Invalid("cannot send a message to yourself".to_string()));
        }
        let mut content = content.clone();
        let mut reserved = None;
        if !matches!(content.body, Some(Body::ChatAction(_))) {
            let reservation = MessageIdReservation {
                client_message_id: client_message_id.to_string(),
                recipient_user_id: peer.user_id,
                ..Default::default()
            };
            let (message_id, date) = self.reserve_message_id(reservation, &format!("@{name}"))?;
            e2e::vouch::vouch(&mut content, message_id, date);
            reserved = Some((message_id, date));
        }
        // A text or file is remembered in the transaction that seals it, under its reserved
        // id: the platform's answer needs no commit of its own.
        let remembered = reserved.filter(|_| history::worth_remembering(&content));
        let mut ciphertexts = self.seal_for_all(peer, &mut content, remembered)?;
        let content = &content;
        let sent = self.send_sealed(peer, client_message_id, &mut ciphertexts, content);
        match (&sent, remembered) {
            (Ok(sent), Some(early)) if early == (sent.message_id, sent.date) => {}
            (Ok(sent), _) => {
                self.forget_remembered(peer.user_id, remembered);
                self.remember_sent(peer.user_id, content, sent);
            }
            (Err(_), _) => self.forget_remembered(peer.user_id, remembered),
        }
        sent
    }

    /// Forgets a text remembered when it was sealed, which the platform did not take under
    /// that id (a refusal, or another id).
    fn forget_remembered(&self, peer: u64, remembered: Option<(u64, i64)>) {
        let Some((message_id, _)) = remembered else { return };
        if let Err(e) = self.write(|c| history::forget_sent(c, peer, message_id)) {
            log::warn!("message {message_id} was not sent under that id, and this profile could not forget it: {e}");
        }
    }

    /// Sends sealed `ciphertexts`, mending them while the platform reports the device list
    /// stale.
    fn send_sealed(
        &self,
        peer: &PeerProfile,
        client_message_id: &str,
        ciphertexts: &mut Vec<DeviceCiphertext>,
        content: &Content,
    ) -> Result<SentMessage> {
        let name = peer.username.as_str();
        for attempt in 1..=MAX_SEND_ATTEMPTS {
            let result = self.send_once(peer, client_message_id, ciphertexts, content)?;
            match result.status.enum_value() {
                Ok(send_result::Status::OK) => {
                    return Ok(SentMessage { chat_id: peer.user_id, message_id: result.message_id, date: result.date });
                }
                Ok(send_result::Status::STALE_DEVICES) => {
                    log::info!(
                        "device list of @{name} is stale (attempt {attempt}): missing {:?}, removed {:?}",
                        result.missing_devices,
                        result.removed_devices
                    );
                    self.reseal_after_stale(peer, content, ciphertexts, &result.missing_devices, &result.removed_devices)?;
                }
                Ok(send_result::Status::UNKNOWN_RECIPIENT) => return Err(ClientError::NoSuchUser(name.to_string())),
                Ok(send_result::Status::REJECTED) | Err(_) => {
                    let reason = if result.error.is_empty() { "no reason given".to_string() } else { result.error.clone() };
                    return Err(ClientError::Rejected { to: name.to_string(), reason });
                }
            }
        }
        Err(ClientError::Invalid(format!(
            "sending to @{name}: the device list kept changing after {MAX_SEND_ATTEMPTS} attempts"
        )))
    }

    /// The id and date the platform reserves for the message sent next under a client message
    /// id (the same again for the same id), which its content vouches for (`e2e::vouch`).
    /// `to` names the chat for errors.
    pub(super) fn reserve_message_id(&self, reservation: MessageIdReservation, to: &str) -> Result<(u64, i64)> {
        let req = ReserveMessageIdsRequest { reservations: vec![reservation], ..Default::default() };
        let resp = self
            .platform
            .client
            .reserve_message_ids(&req, self.platform.opt())
            .map_err(rpc("ReserveMessageIds"))?;
        match resp.ids.into_iter().next() {
            Some(r) if r.message_id != 0 => Ok((r.message_id, r.date)),
            Some(r) => Err(ClientError::Invalid(format!("the platform refused a message id for a message to {to}: {}", r.error))),
            None => Err(ClientError::Invalid(format!("the platform answered a reservation for {to} without an id"))),
        }
    }

    fn send_once(&self, peer: &PeerProfile, client_message_id: &str, ciphertexts: &[DeviceCiphertext], content: &Content) -> Result<SendResult> {
        let mut msg = OutgoingMessage::new();
        msg.client_message_id = client_message_id.to_string();
        msg.recipient_user_id = peer.user_id;
        msg.ciphertexts = ciphertexts.to_vec();
        // The files it carries: the platform sweeps uploads that no message named.
        msg.file_refs = e2e::file::refs_in(content);
        let mut req = SendMessagesRequest::new();
        req.messages.push(msg);
        req.names_files = true;
        let resp = self
            .platform
            .client
            .send_messages(&req, self.platform.opt())
            .map_err(rpc("SendMessages"))?;
        resp.results
            .into_iter()
            .find(|r| r.client_message_id == client_message_id)
            .ok_or_else(|| ClientError::Invalid(format!("the platform answered a send to @{} without a result", peer.username)))
    }

    /// Numbers `content` (`e2e::sequence`: once for every attempt of a send, in the transaction
    /// that seals it, so a failed seal uses up no number) and seals it for every device we hold
    /// a session with; when there is none, fetches the bundles of all the peer's devices first.
    fn seal_for_all(&self, peer: &PeerProfile, content: &mut Content, remembered: Option<(u64, i64)>) -> Result<Vec<DeviceCiphertext>> {
        let name = peer.username.as_str();
        let numbered = |c: &Connection, content: &mut Content| {
            let conversation = e2e::sequence::Conversation::Private(peer.user_id);
            e2e::sequence::number(c, conversation, content).context(|| format!("numbering a message to @{name}"))?;
            if let Some((message_id, date)) = remembered {
                history::remember_sent(c, peer.user_id, message_id, date, content)?;
            }
            seal(c, peer, content)
        };
        let have = e2e::devices_with_session(&self.conn, peer.user_id).context(|| format!("sessions with @{name}"))?;
        if !have.is_empty() {
            return self.write(|c| numbered(c, content));
        }
        let bundles = self.fetch_bundles(peer, &[])?;
        if bundles.bundles.is_empty() {
            return Err(ClientError::Invalid(format!("@{name} has no devices to send to")));
        }
        self.write(|c| {
            add_sessions(c, peer, &bundles)?;
            numbered(c, content)
        })
    }

    /// Starts sessions with the missing devices that have none (fetching their bundles), then
    /// mends `ciphertexts` the one way every sender does (`e2e::reseal_after_stale`).
    fn reseal_after_stale(
        &self,
        peer: &PeerProfile,
        content: &Content,
        ciphertexts: &mut Vec<DeviceCiphertext>,
        missing: &[u32],
        removed: &[u32],
    ) -> Result<()> {
        let name = peer.username.as_str();
        if !removed.is_empty() {
            self.learn_removals(peer, removed)?;
        }
        let need = e2e::devices_without_session(&self.conn, peer.user_id, missing).context(|| format!("sessions with @{name}"))?;
        let bundles = if need.is_empty() { None } else { Some(self.fetch_bundles(peer, &need)?) };
        self.write(|c| {
            if let Some(bundles) = &bundles {
                add_sessions(c, peer, bundles)?;
            }
            e2e::reseal_after_stale(c, peer.user_id, ciphertexts, missing, removed, content)
                .context(|| format!("updating the devices of @{name}"))
        })?;
        Ok(())
    }

    /// The platform says these devices of `peer` are gone: the removals their account signed,
    /// if any, are fetched with their certificates and recorded (`e2e::removals`), so that the
    /// devices stay out even if the platform serves them again. A failed fetch is logged: the
    /// platform's word still ends the sessions.
    fn learn_removals(&self, peer: &PeerProfile, removed: &[u32]) -> Result<()> {
        let req = crate::wire::platform::GetDeviceCertificatesRequest {
            user_id: peer.user_id,
            device_ids: removed.to_vec(),
            ..Default::default()
        };
        let answer = match self.platform.client.get_device_certificates(&req, self.platform.opt()) {
            Ok(answer) => answer,
            Err(e) => {
                log::warn!("cannot fetch the removals of devices {removed:?} of @{}: {}", peer.username, crate::wire::rpc::text(&e));
                return Ok(());
            }
        };
        let removals: Vec<_> = answer.devices.iter().filter_map(|d| d.removal.as_ref().cloned()).collect();
        self.write(|c| {
            e2e::removals::record_removals(c, peer.user_id, &peer.identity_key, &removals)
                .context(|| format!("recording removed devices of @{}", peer.username))
        })?;
        Ok(())
    }

    /// Prekey bundles of `peer`'s devices (`device_ids` empty: all of them), and the signed
    /// removals of its devices, answered for the profile looked up.
    fn fetch_bundles(&self, peer: &PeerProfile, device_ids: &[u32]) -> Result<GetPrekeyBundlesResponse> {
        let name = peer.username.as_str();
        let mut req = GetPrekeyBundlesRequest::new();
        req.user_id = peer.user_id;
        req.device_ids = device_ids.to_vec();
        let mut resp = match self.platform.client.get_prekey_bundles(&req, self.platform.opt()) {
            Ok(r) => r,
            Err(e) if rpc_code(&e) == Some(grpcio::RpcStatusCode::NOT_FOUND) => {
                return Err(ClientError::NoSuchUser(name.to_string()))
            }
            Err(status) => return Err(ClientError::Rpc { call: "GetPrekeyBundles", status }),
        };
        // The bundles are checked against the identity we looked up (and pinned); a different
        // one here means the account's key changed since: the SECURITY WARNING, and the next
        // lookup asks the platform again.
        if let Some(p) = resp.profile.as_ref() {
            if !p.identity_key.is_empty() && p.identity_key != peer.identity_key {
                self.checked_names.borrow_mut().clear();
                return Err(ClientError::IdentityChanged { username: name.to_string(), user_id: peer.user_id });
            }
        }
        resp.profile = protobuf::MessageField::some(peer.clone());
        Ok(resp)
    }
}

/// Starts sessions from a fetched answer (its signed removals first: `e2e::start_sessions`).
fn add_sessions(conn: &Connection, peer: &PeerProfile, answer: &GetPrekeyBundlesResponse) -> Result<()> {
    let what = if peer.is_bot { "bot" } else { "user" };
    e2e::start_sessions(conn, answer).context(|| format!("starting sessions with {what} @{}", peer.username))
}

fn seal(conn: &Connection, peer: &PeerProfile, content: &Content) -> Result<Vec<DeviceCiphertext>> {
    e2e::seal(conn, peer.user_id, content).context(|| format!("encrypting for @{}", peer.username))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entities_round_trip_through_the_wire_shape() {
        let e = Entity { kind: "text_link".into(), offset: 2, length: 3, url: Some("https://x.test".into()), language: None };
        let w = e.to_wire();
        assert_eq!(w.type_, "text_link");
        assert_eq!(w.language, "");
        assert_eq!(Entity::from_wire(&w), e);
        assert_eq!(Entity::from_wire(&Entity::new("bold", 0, 1).to_wire()), Entity::new("bold", 0, 1));
    }
}
