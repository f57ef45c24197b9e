//! Receiving: the device's Inbox stream read on a named thread into a bounded channel, and the
//! loop that opens each envelope, decodes it into an `Incoming` event (applying messages,
//! edits and deletions to the remembered messages in the same transaction), commits, and only
//! then acknowledges it.
//!
//! An envelope that cannot be opened (not authentic, a changed device key, an unknown prekey)
//! is logged and acknowledged anyway, so one bad message never blocks the inbox. Envelopes the
//! reader thread has read ahead but `receive` has not processed stay unacknowledged, so the
//! platform delivers them again on the next stream.

use std::time::{Duration, Instant};

use crossbeam_channel::{at, never, Receiver};
use rusqlite::Connection;

use super::error::{ClientError, E2eContext, Result, rpc};
use crate::wire::rpc::text as rpc_text;
use super::profile::Profile;
use super::group_delivery;
use crate::e2e::follow_up::FollowUp;
use super::history;
use super::reply_keyboard;
use super::inline;
use super::message::{keyboard_from_wire, received_message, sender, text_of, Incoming, ReactionType, ReceivedMessage, Shared};
use super::reader::{InboxEvent, InboxReader};
use crate::e2e::{self, inbound, E2eError};
use crate::wire::e2e::content::Body;
use crate::wire::e2e::Content;
use crate::wire::platform::{AckRequest, InboxEnvelope, UploadPrekeysRequest};

/// Replenish one-time prekeys when the platform holds fewer than this.
pub const REPLENISH_BELOW: u32 = e2e::ONE_TIME_PREKEY_TARGET / 2;


/// How `receive_until` ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEnd {
    /// `stop` fired.
    Stopped,
    /// The Inbox stream failed or the server ended it; why, in one line.
    Closed(String),
}

/// One envelope opened: what to show, whether it used a one-time prekey, and what a group
/// delivery asks for after its commit.
struct Processed {
    event: Option<Incoming>,
    was_prekey: bool,
    follow_up: Option<FollowUp>,
}

/// Why `receive_session` should stop waiting.
enum Wake {
    Event(InboxEvent),
    Deadline,
    Stop,
}

/// Whether a wait for arrivals is over, asked after each batch.
type DoneCheck<'a> = &'a dyn Fn(&Profile) -> Result<bool>;

impl Profile {
    /// Receives up to `max_count` messages, waiting at most `timeout` in all. Returns early once
    /// `max_count` arrived. Fails only if the inbox stream cannot be opened or breaks before
    /// any message arrived (later calls reconnect). Other events (edits, reactions, ...) are
    /// processed and acknowledged but not returned; `receive_events` returns them.
    pub fn receive(&self, timeout: Duration, max_count: usize) -> Result<Vec<ReceivedMessage>> {
        let mut out = Vec::new();
        self.receive_with(timeout, max_count, |m| out.push(m.clone()))?;
        Ok(out)
    }

    /// Like `receive`, but hands each message to `on_message` as soon as it is committed and
    /// acknowledged (for printing while waiting). Returns how many arrived.
    pub fn receive_with(
        &self,
        timeout: Duration,
        max_count: usize,
        mut on_message: impl FnMut(&ReceivedMessage),
    ) -> Result<usize> {
        self.receive_loop(Some(Instant::now() + timeout), max_count, None, &mut messages_only(&mut on_message))
    }

    /// Receives until `stop` gets a message or is disconnected (its sender dropped), handing
    /// each message to `on_message`. Returns `Stopped`, or `Closed` with the reason when the
    /// stream broke (also before any message: the caller reports and reconnects); fails only if
    /// the stream cannot be opened or an envelope cannot be committed.
    pub fn receive_until(&self, stop: &Receiver<()>, mut on_message: impl FnMut(&ReceivedMessage)) -> Result<StreamEnd> {
        let (_, closed) = self.receive_session(None, usize::MAX, Some(stop), &mut messages_only(&mut on_message), None)?;
        Ok(closed.map_or(StreamEnd::Stopped, StreamEnd::Closed))
    }

    /// Receives up to `max_count` events of any kind, waiting at most `timeout` in all.
    pub fn receive_events(&self, timeout: Duration, max_count: usize) -> Result<Vec<Incoming>> {
        let mut out = Vec::new();
        self.receive_events_with(timeout, max_count, |e| out.push(e.clone()))?;
        Ok(out)
    }

    /// Like `receive_events`, handing each event to `on_event` as soon as it is committed and
    /// acknowledged. Returns how many arrived.
    pub fn receive_events_with(
        &self,
        timeout: Duration,
        max_count: usize,
        mut on_event: impl FnMut(&Incoming),
    ) -> Result<usize> {
        self.receive_loop(Some(Instant::now() + timeout), max_count, None, &mut |e| {
            on_event(e);
            true
        })
    }

    /// Receives events of any kind until `stop` gets a message or is disconnected; ends like
    /// `receive_until`.
    pub fn receive_events_until(&self, stop: &Receiver<()>, mut on_event: impl FnMut(&Incoming)) -> Result<StreamEnd> {
        let (_, closed) = self.receive_session(
            None,
            usize::MAX,
            Some(stop),
            &mut |e| {
                on_event(e);
                true
            },
            None,
        )?;
        Ok(closed.map_or(StreamEnd::Stopped, StreamEnd::Closed))
    }

    fn receive_loop(
        &self,
        deadline: Option<Instant>,
        max_count: usize,
        stop: Option<&Receiver<()>>,
        // Takes each event; says whether it counts towards `max_count`.
        on_event: &mut dyn FnMut(&Incoming) -> bool,
    ) -> Result<usize> {
        match self.receive_session(deadline, max_count, stop, on_event, None)? {
            (0, Some(why)) => Err(ClientError::InboxClosed(why)),
            (count, Some(why)) => {
                log::warn!("inbox stream of @{} closed after {count} messages: {why}", self.username());
                Ok(count)
            }
            (count, None) => Ok(count),
        }
    }

    /// Receives until `done` says so (checked before each envelope), `deadline` passes or the
    /// stream closes (the reason is returned), handing every event to `on_event`. Events kept
    /// from an earlier catch-up stay kept.
    pub(super) fn receive_until_done(
        &self,
        deadline: Instant,
        done: &dyn Fn(&Profile) -> Result<bool>,
        on_event: &mut dyn FnMut(&Incoming),
    ) -> Result<Option<String>> {
        let (_, closed) = self.receive_session(
            Some(deadline),
            usize::MAX,
            None,
            &mut |e| {
                on_event(e);
                true
            },
            Some(done),
        )?;
        Ok(closed)
    }

    /// One session on the Inbox stream: how many messages arrived, and why the stream closed
    /// if it did (rather than the deadline, the count, `stop` or `done` ending the wait).
    /// Without `done`, the events a catch-up kept are handed out first.
    fn receive_session(
        &self,
        deadline: Option<Instant>,
        max_count: usize,
        stop: Option<&Receiver<()>>,
        // Takes each event; says whether it counts towards `max_count`.
        on_event: &mut dyn FnMut(&Incoming) -> bool,
        done: Option<DoneCheck<'_>>,
    ) -> Result<(usize, Option<String>)> {
        let mut count = 0;
        if done.is_none() {
            while count < max_count {
                let Some(event) = self.pending.borrow_mut().pop_front() else { break };
                count += usize::from(on_event(&event));
            }
            if count >= max_count {
                return Ok((count, None));
            }
        }
        if self.inbox.borrow().is_none() {
            if let Err(e) = self.keep_signed_prekey() {
                log::warn!("could not rotate or publish the signed prekey of @{}: {e}", self.username());
            }
            if let Err(e) = self.keep_key_packages() {
                log::warn!("could not publish key packages of @{}: {e}", self.username());
            }
            let now = crate::clock::unix_now();
            let expired = self.write(|c| {
                e2e::expire_skipped_keys(c, now).context(|| "deleting skipped message keys older than 30 days".to_string())
            });
            if let Err(e) = expired {
                log::warn!("@{}: {e}", self.username());
            }
            let reader = InboxReader::start(&self.platform, self.dir())?;
            *self.inbox.borrow_mut() = Some(reader);
        }
        let never_stop = never();
        let stop = stop.unwrap_or(&never_stop);
        let timer = deadline.map(at).unwrap_or_else(never);
        let mut prekey_messages = 0;
        let mut failure = None;
        while count < max_count {
            if let Some(done) = done {
                if done(self)? {
                    break;
                }
            }
            let wake = {
                let inbox = self.inbox.borrow();
                let events = inbox.as_ref().expect("started above; cleared only before break").events();
                crossbeam_channel::select! {
                    recv(events) -> ev => match ev {
                        Ok(ev) => Wake::Event(ev),
                        Err(_) => Wake::Event(InboxEvent::Closed("the inbox reader stopped".to_string())),
                    },
                    recv(stop) -> _ => Wake::Stop,
                    recv(timer) -> _ => Wake::Deadline,
                }
            };
            match wake {
                Wake::Event(InboxEvent::Envelope(envelope)) => {
                    let processed = self.process_envelope(&envelope).inspect_err(|_| {
                        // Not acknowledged: reconnect next time so the platform sends it again.
                        *self.inbox.borrow_mut() = None;
                    })?;
                    if let Some(Processed { event, was_prekey, follow_up }) = processed {
                        prekey_messages += usize::from(was_prekey);
                        if let Some(follow_up) = follow_up {
                            self.follow_up(follow_up);
                        }
                        if let Some(event) = event {
                            count += usize::from(on_event(&event));
                        }
                    }
                }
                Wake::Event(InboxEvent::Closed(why)) => {
                    *self.inbox.borrow_mut() = None;
                    failure = Some(why);
                    break;
                }
                Wake::Deadline | Wake::Stop => break,
            }
        }
        self.report_withheld();
        if prekey_messages > 0 {
            if let Err(e) = self.replenish_prekeys() {
                log::warn!("could not replenish one-time prekeys of @{}: {e}", self.username());
            }
        }
        Ok((count, failure))
    }

    /// Opens one envelope and applies it to the remembered messages (or, for group traffic,
    /// to the group's MLS state) in one transaction, then acknowledges it. `None` for a
    /// redelivery or an envelope that could not be opened (logged); an event of `None` for a
    /// content that is nothing for a user device (an empty or unknown kind, a press).
    fn process_envelope(&self, envelope: &InboxEnvelope) -> Result<Option<Processed>> {
        // Our commit of the group left unanswered goes first: the delivery may follow it.
        if let Some(group) = envelope.group.as_ref().and_then(|d| super::GroupId::from_slice(&d.group_id)) {
            self.settle_commit(&group)?;
        }
        let was_prekey = e2e::starts_session(envelope);
        // A device starting a session is checked first (a changed identity key stops here).
        let refusal = if was_prekey { self.check_new_sender(envelope)? } else { None };
        let outcome = self.write(|c| {
            if inbound::is_repeat(c, envelope.seq, envelope.sender_user_id, &envelope.client_message_id)? {
                return Ok(None);
            }
            inbound::accept(c, envelope.seq, envelope.sender_user_id, &envelope.client_message_id)?;
            // A savepoint per envelope: one that fails keeps nothing (a half-applied group
            // delivery, a pin of a leaf whose commit was refused), but still counts as seen.
            c.execute_batch("SAVEPOINT envelope")?;
            let opened = match envelope.group.as_ref() {
                Some(delivery) => group_delivery::open_delivery(c, self.user_id(), envelope, delivery),
                None => match e2e::open_envelope(c, envelope) {
                    Ok(content) => Ok((incoming(c, envelope, content)?, None)),
                    Err(e) => Err(e),
                },
            };
            c.execute_batch(if opened.is_ok() { "RELEASE envelope" } else { "ROLLBACK TO envelope; RELEASE envelope" })?;
            match opened {
                Ok(opened) => Ok(Some(Ok(opened))),
                // A database failure is ours, not the message's: do not acknowledge.
                Err(E2eError::Db(e)) => Err(ClientError::Db(e)),
                Err(e) => Ok(Some(Err(e))),
            }
        })?;
        self.ack(envelope.seq);
        match outcome {
            None => {
                log::debug!("inbox envelope {} was already processed", envelope.seq);
                Ok(None)
            }
            Some(Err(E2eError::UntrustedLeaf { group, refusal })) => {
                let text = format!("group {group}: {refusal}");
                log::error!("SECURITY ALERT: {text} (message {} from user {})", envelope.message_id, envelope.sender_user_id);
                let group = envelope.group.as_ref().and_then(group_ref);
                let event = Incoming::SecurityAlert { group, user_id: refusal.user_id, device_id: refusal.device_id, text };
                Ok(Some(Processed { event: Some(event), was_prekey, follow_up: None }))
            }
            Some(Err(e @ E2eError::Unvouched { .. })) => {
                let E2eError::Unvouched { user_id, device_id, .. } = e else { unreachable!("matched above") };
                let text = format!("@{}: {e}", envelope.sender_username);
                log::error!("SECURITY ALERT: {text}");
                let group = envelope.group.as_ref().and_then(group_ref);
                let event = Incoming::SecurityAlert { group, user_id, device_id, text };
                Ok(Some(Processed { event: Some(event), was_prekey, follow_up: None }))
            }
            Some(Err(E2eError::UnverifiedDevice { user_id, device_id })) if refusal == Some(e2e::Refusal::BadCertificate) => {
                let text = format!(
                    "@{} (user {user_id}) device {device_id} started a conversation, but {}",
                    envelope.sender_username,
                    e2e::Refusal::BadCertificate
                );
                log::error!("SECURITY ALERT: {text} (message {})", envelope.message_id);
                let event = Incoming::SecurityAlert { group: None, user_id, device_id, text };
                Ok(Some(Processed { event: Some(event), was_prekey, follow_up: None }))
            }
            Some(Err(e)) => {
                let what = if envelope.group.is_some() { "group message" } else { "message" };
                log::error!(
                    "could not open {what} {} from @{} (user {} device {}): {e}",
                    envelope.message_id,
                    envelope.sender_username,
                    envelope.sender_user_id,
                    envelope.sender_device_id
                );
                Ok(None)
            }
            Some(Ok((event, follow_up))) => {
                if event.is_none() {
                    log::debug!(
                        "message {} from user {} carries nothing for a user device; skipped",
                        envelope.message_id,
                        envelope.sender_user_id
                    );
                }
                Ok(Some(Processed { event, was_prekey, follow_up }))
            }
        }
    }

    /// Acknowledges one envelope. A failure only means a redelivery, which is recognised.
    fn ack(&self, seq: u64) {
        let mut req = AckRequest::new();
        req.seqs.push(seq);
        if let Err(e) = self.platform.client.ack(&req, self.platform.opt()) {
            log::warn!("could not acknowledge inbox envelope {seq}: {}", rpc_text(&e));
        }
    }

    /// Logs the messages a peer's device numbered that have not arrived a minute after their
    /// gap was noticed (`e2e::sequence`): withheld by the platform, or lost before it.
    fn report_withheld(&self) {
        let before = crate::clock::unix_now() - e2e::sequence::GRACE_SECS;
        match e2e::sequence::withheld_due(&self.conn, before) {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => return log::warn!("reading the gaps in what peers sent: {e}"),
        }
        match self.write(|c| e2e::sequence::take_withheld(c, before).context(|| "taking the gaps in what peers sent".to_string())) {
            Ok(withheld) => withheld.iter().for_each(|w| log::warn!("{}", w.describe())),
            Err(e) => log::warn!("taking the gaps in what peers sent: {e}"),
        }
    }

    /// Asks the platform how many one-time prekeys it still holds for this device and uploads
    /// new ones when fewer than `REPLENISH_BELOW` remain. Returns the count on the platform.
    pub fn replenish_prekeys(&self) -> Result<u32> {
        let remaining = self.upload_prekeys(UploadPrekeysRequest::new())?;
        if remaining >= REPLENISH_BELOW {
            return Ok(remaining);
        }
        let fresh = self.write(|c| {
            e2e::replenish_one_time_prekeys(c, remaining).map_err(|e| match e {
                E2eError::Db(e) => ClientError::Db(e),
                source => ClientError::E2e { context: "generating one-time prekeys".to_string(), source },
            })
        })?;
        let count = fresh.len();
        let mut req = UploadPrekeysRequest::new();
        req.one_time_prekeys = fresh;
        let now = self.upload_prekeys(req)?;
        log::info!("uploaded {count} one-time prekeys for @{}; the platform holds {now}", self.username());
        Ok(now)
    }

    /// Replaces the signed prekey when it is due (`e2e::SignedPrekeySchedule::DEFAULT`) and
    /// publishes the newest one, due or not: a crash between a rotation's commit and its upload
    /// leaves nothing else to tell. Runs whenever receiving starts (docs/decisions.md,
    /// "Transport and state"). Returns the id the platform now serves.
    pub fn keep_signed_prekey(&self) -> Result<u32> {
        let schedule = e2e::SignedPrekeySchedule::DEFAULT;
        let what = || "rotating the signed prekey".to_string();
        let fresh = if e2e::signed_prekey_due(&self.conn, &schedule).context(what)? {
            self.write(|c| e2e::rotate_signed_prekey_if_due(c, &schedule).context(what))?
        } else {
            None
        };
        let key = match fresh {
            Some(key) => {
                log::info!("new signed prekey {} for @{}", key.id, self.username());
                key
            }
            None => e2e::current_signed_prekey(&self.conn).context(what)?,
        };
        let id = key.id;
        let mut req = UploadPrekeysRequest::new();
        req.signed_prekey = protobuf::MessageField::some(key);
        self.upload_prekeys(req)?;
        Ok(id)
    }

    fn upload_prekeys(&self, req: UploadPrekeysRequest) -> Result<u32> {
        self.platform
            .client
            .upload_prekeys(&req, self.platform.opt())
            .map(|r| r.one_time_prekeys_remaining)
            .map_err(rpc("UploadPrekeys"))
    }
}

/// Hands only messages to `on_message`; they alone count.
/// The group a delivery belongs to, as an alert names it.
fn group_ref(d: &crate::wire::platform::GroupDelivery) -> Option<super::GroupRef> {
    let id = super::GroupId::from_slice(&d.group_id)?;
    let title = if d.title.is_empty() { id.hex()[..16].to_string() } else { d.title.clone() };
    Some(super::GroupRef { id, title, channel: d.type_.enum_value_or_default() == crate::wire::platform::GroupType::CHANNEL })
}

fn messages_only(on_message: &mut dyn FnMut(&ReceivedMessage)) -> impl FnMut(&Incoming) -> bool + '_ {
    move |e| match e {
        Incoming::Message(m) => {
            on_message(m);
            true
        }
        _ => false,
    }
}

/// What an opened content is for the user, applied to the remembered messages (inside the
/// transaction that opened it). `None` for nothing a user device shows.
fn incoming(c: &Connection, envelope: &InboxEnvelope, content: Content) -> Result<Option<Incoming>> {
    let peer = envelope.sender_user_id;
    let event = match content.body.as_ref() {
        // A file message is remembered whole (reference, key, digest) so `download` finds it.
        _ if content.is_message() => {
            history::remember(c, peer, envelope.message_id, envelope.date, &content)?;
            reply_keyboard::on_message(c, peer, envelope.message_id, &content)?;
            Incoming::Message(received_message(envelope, &content))
        }
        // A peer edits only its own messages: an edit naming one of ours is ignored.
        Some(Body::Edit(edit)) if history::load_sent(c, peer, edit.message_id)?.is_some() => {
            log::warn!("user {peer} sent an edit of our message {}; ignored", edit.message_id);
            return Ok(None);
        }
        Some(Body::Edit(edit)) => {
            let now = history::apply_edit(c, peer, envelope.date, edit)?;
            let (text, entities) = text_of(&now);
            Incoming::Edited {
                chat_id: peer,
                message_id: edit.message_id,
                edit_date: if edit.edit_date != 0 { edit.edit_date } else { envelope.date },
                text,
                entities,
                keyboard: keyboard_from_wire(now.keyboard.as_ref()),
                shared: Shared::from_content(&now),
            }
        }
        Some(Body::Delete(delete)) => {
            history::forget(c, peer, delete.message_id)?;
            // A bot deletes the user's messages of its dialog too (the Bot API's deleteMessage
            // in a private chat): it arrived end to end from the peer's device, the one other
            // party of this dialog.
            if envelope.sender_is_bot {
                history::forget_sent(c, peer, delete.message_id)?;
            }
            Incoming::Deleted { chat_id: peer, message_id: delete.message_id }
        }
        Some(Body::Reaction(r)) => Incoming::Reaction {
            chat_id: peer,
            message_id: r.message_id,
            from: sender(envelope),
            reactions: r.reactions.iter().filter_map(ReactionType::from_wire).collect(),
        },
        Some(Body::ChatAction(a)) => Incoming::ChatAction { chat_id: peer, from: sender(envelope), action: a.action.clone() },
        Some(Body::CallbackAnswer(a)) => Incoming::CallbackAnswer {
            chat_id: peer,
            press_id: a.press_id.clone(),
            text: a.text.clone(),
            show_alert: a.show_alert,
            url: a.url.clone(),
        },
        // Presses go to bots; an empty body is a kind from a newer release.
        Some(Body::InlineResults(r)) => match inline::remember_results(c, peer, r)? {
            Some((results, button)) => Incoming::InlineResults { chat_id: peer, session_id: r.session_id, results, button },
            None => return Ok(None),
        },
        // Presses and inline queries go to bots; an empty body is a kind from a newer release
        // (every message kind was taken by `is_message` above).
        _ => return Ok(None),
    };
    Ok(Some(event))
}
