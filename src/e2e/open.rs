//! Receiving: opening an inbox envelope with the current or previous session of the sender
//! device, or a session started from its X3DH prekey header.

use rusqlite::Connection;

use super::device::device_key;
use super::sequence::{Arrival, Conversation};
use super::{store, E2eError, Result};
use crate::crypto::x3dh::{self, PrekeyHeader};
use crate::crypto::{CryptoError, OneTimePrekeyPair, Session, SignedPrekeyPair};
use crate::wire::e2e::Content;
use crate::wire::platform::InboxEnvelope;

/// Which stored session slot a message was opened with.
enum Slot {
    Current,
    Previous,
    /// A session just accepted from this prekey header: on success its one-time prekey is
    /// deleted, or (without one) its ephemeral key remembered (`replay`).
    New { header: PrekeyHeader },
}

/// Decrypts one inbox envelope: finds or starts (X3DH responder) the session with the sender
/// device, decrypts, stores the advanced session, deletes a used one-time prekey.
///
/// On any error before decryption succeeds nothing is written. `BadContent` comes after the
/// writes: the message was authentic and its key is spent, so committing is right.
pub fn open_envelope(conn: &Connection, envelope: &InboxEnvelope) -> Result<Content> {
    open_envelope_noting(conn, envelope).map(|opened| opened.content)
}

/// What [`open_envelope_noting`] opened, and what it noticed on the way.
pub struct Opened {
    pub content: Content,
    /// Where the message fell in its sender's numbering (a gap noted is reported later,
    /// `sequence`).
    pub arrival: Arrival,
    /// The message carried an X3DH header: it started (or restarted) a session.
    pub started_session: bool,
}

/// `open_envelope`, also telling where the message fell in its sender's numbering and whether
/// it started a session.
pub fn open_envelope_noting(conn: &Connection, envelope: &InboxEnvelope) -> Result<Opened> {
    let (user_id, device_id) = (envelope.sender_user_id, envelope.sender_device_id);
    let (current, previous) = load_sessions(conn, user_id, device_id)?;
    let header = x3dh::peek_prekey_header(&envelope.ciphertext)?;
    let started_session = header.is_some();

    let (slot, session, plaintext) = match header {
        Some(header) => open_prekey_message(conn, envelope, &header, current.as_ref(), previous.as_ref())?,
        None => open_normal_message(envelope, current.as_ref(), previous.as_ref())?,
    };

    // Store the advanced session, then drop the used prekey (the peer device is recorded: a
    // session never starts with an unrecorded one).
    let session_bytes = session.to_bytes();
    match slot {
        Slot::Current => {
            let prev = previous.as_ref().map(Session::to_bytes);
            store::put_sessions(conn, user_id, device_id, &session_bytes, prev.as_deref().map(Vec::as_slice))?;
        }
        Slot::Previous => {
            // The previous session is the live one after all: promote it.
            let demoted = current.as_ref().map(Session::to_bytes);
            store::put_sessions(conn, user_id, device_id, &session_bytes, demoted.as_deref().map(Vec::as_slice))?;
        }
        Slot::New { header } => {
            let demoted = current.as_ref().map(Session::to_bytes);
            store::put_sessions(conn, user_id, device_id, &session_bytes, demoted.as_deref().map(Vec::as_slice))?;
            store::sends_again(conn, user_id, device_id)?;
            match header.one_time_prekey_id {
                Some(id) => {
                    store::delete_one_time_prekey(conn, id)?;
                    // Used up: no copy of its secret stays in the log past the commit.
                    super::wal::secrets_deleted();
                }
                None => super::replay::remember(conn, &header)?,
            }
        }
    }

    let conversation = Conversation::Private(user_id);
    let (content, arrival) = checked_content(conn, conversation, (user_id, device_id), &plaintext, envelope.message_id, envelope.date)?;
    Ok(Opened { content, arrival, started_session })
}

/// What a member's group message passes before its content: the platform's envelope names
/// the user whose leaf signed it, and in a channel that user may post (`posters`); then
/// `checked_content`.
pub fn checked_group_content(
    conn: &Connection,
    group_id: &[u8],
    is_channel: bool,
    envelope: &InboxEnvelope,
    sender: (u64, u32),
    plaintext: &[u8],
) -> Result<(Content, Arrival)> {
    let group = || super::group::short_id(group_id);
    if sender.0 != envelope.sender_user_id {
        return Err(E2eError::Mls(format!(
            "group {}: the platform says user {} sent a message signed by user {}",
            group(),
            envelope.sender_user_id,
            sender.0
        )));
    }
    if is_channel && super::posters::may_post(conn, group_id, sender.0)? == Some(false) {
        return Err(E2eError::Mls(format!(
            "channel {}: user {} is neither its owner nor an administrator with can_post_messages; their post is dropped",
            group(),
            sender.0
        )));
    }
    let conversation = Conversation::Group(group_id);
    checked_content(conn, conversation, sender, plaintext, envelope.message_id, envelope.date)
}

/// What every opened plaintext passes, private or group, for every program that receives: it
/// is a content, it vouches for the envelope it came in, `message_id` and `date` as the
/// platform delivered them (`vouch`), and its sender's number is noted (`sequence`).
fn checked_content(
    conn: &Connection,
    conversation: Conversation,
    sender: (u64, u32),
    plaintext: &[u8],
    message_id: u64,
    date: i64,
) -> Result<(Content, Arrival)> {
    let content = super::padding::parse(plaintext).ok_or(E2eError::BadContent)?;
    super::vouch::check(conn, sender, &content, message_id, date)?;
    let arrival = super::sequence::received(conn, conversation, sender, content.sender_seq, crate::clock::unix_now())?;
    Ok((content, arrival))
}

fn load_sessions(conn: &Connection, user_id: u64, device_id: u32) -> Result<(Option<Session>, Option<Session>)> {
    match store::sessions(conn, user_id, device_id)? {
        None => Ok((None, None)),
        Some((current, previous)) => {
            let current = Session::from_bytes(&current)?;
            let previous = match previous {
                Some(p) => Some(Session::from_bytes(&p)?),
                None => None,
            };
            Ok((Some(current), previous))
        }
    }
}

/// A message carrying an X3DH header: either a repeat for a session we already accepted from
/// that header, or the start of a new session.
fn open_prekey_message(
    conn: &Connection,
    envelope: &InboxEnvelope,
    header: &PrekeyHeader,
    current: Option<&Session>,
    previous: Option<&Session>,
) -> Result<(Slot, Session, Vec<u8>)> {
    let (user_id, device_id) = (envelope.sender_user_id, envelope.sender_device_id);
    for (slot, existing) in [(Slot::Current, current), (Slot::Previous, previous)] {
        if let Some(existing) = existing.filter(|s| s.was_accepted_from(header)) {
            let mut session = existing.clone();
            let plaintext = session.decrypt(&envelope.ciphertext)?;
            return Ok((slot, session, plaintext));
        }
    }

    if super::replay::seen(conn, header)? {
        log::warn!("user {user_id} device {device_id}: a first message that started a session before came again; it starts nothing");
        return Err(CryptoError::DuplicateMessage.into());
    }
    // The device was recorded when we started a session with it, or when its certificate was
    // checked (`certify`): never on its own word.
    match store::peer_device_key(conn, user_id, device_id)? {
        None => return Err(E2eError::UnverifiedDevice { user_id, device_id }),
        Some(recorded) if recorded.as_slice() != header.initiator_device_key.as_slice() => {
            log::warn!("user {user_id} device {device_id} started a session with a key other than the recorded one");
            return Err(E2eError::DeviceKeyChanged { user_id, device_id });
        }
        Some(_) => {}
    }
    let signed = store::signed_prekey(conn, header.signed_prekey_id)?
        .ok_or(CryptoError::UnknownPrekey(header.signed_prekey_id))?;
    let signed = SignedPrekeyPair::from_bytes(&signed)?;
    let one_time = match header.one_time_prekey_id {
        Some(id) => {
            let bytes = store::one_time_prekey(conn, id)?.ok_or(CryptoError::UnknownPrekey(id))?;
            Some(OneTimePrekeyPair::from_bytes(&bytes)?)
        }
        None => None,
    };
    let own = device_key(conn)?;
    let mut session = x3dh::accept_session(&own, &signed, one_time.as_ref(), header)?;
    let plaintext = session.decrypt(&envelope.ciphertext)?;
    Ok((Slot::New { header: header.clone() }, session, plaintext))
}

/// A message without a header: the current session, else the previous one.
fn open_normal_message(
    envelope: &InboxEnvelope,
    current: Option<&Session>,
    previous: Option<&Session>,
) -> Result<(Slot, Session, Vec<u8>)> {
    let Some(current) = current else {
        return Err(E2eError::NoSession { user_id: envelope.sender_user_id, device_id: envelope.sender_device_id });
    };
    let mut session = current.clone();
    let first_error = match session.decrypt(&envelope.ciphertext) {
        Ok(plaintext) => return Ok((Slot::Current, session, plaintext)),
        Err(e) => e,
    };
    if let Some(previous) = previous {
        let mut session = previous.clone();
        if let Ok(plaintext) = session.decrypt(&envelope.ciphertext) {
            return Ok((Slot::Previous, session, plaintext));
        }
    }
    Err(first_error.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::testing::{open_text, Device};
    use super::super::text_content;
    use super::super::seal::{add_sessions, key32, known_devices, seal};
    use super::super::{local_one_time_prekey_count, ONE_TIME_PREKEY_TARGET};
    use crate::crypto::identity;

    #[test]
    fn first_message_via_prekey_then_replies_both_ways() {
        let alice = Device::new(1, 1);
        let bob = Device::new(2, 1);
        let used = bob.keys.one_time_prekeys[3].id;
        add_sessions(&alice.conn, &bob.profile(), &[bob.bundle(Some(3))]).expect("add session");
        assert_eq!(known_devices(&alice.conn, 2).expect("known"), vec![1]);

        let first = alice.send(&bob, "hello bob");
        assert!(x3dh::peek_prekey_header(&first.ciphertext).expect("peek").is_some());
        assert!(store::one_time_prekey(&bob.conn, used).expect("read").is_some());
        super::super::wal::take_mark();
        assert_eq!(open_text(&bob, &first), "hello bob");
        // The one-time prekey is consumed (and the commit checkpoints the log: no copy of its
        // secret stays there), and alice's device is recorded.
        assert!(store::one_time_prekey(&bob.conn, used).expect("read").is_none());
        assert!(super::super::wal::take_mark(), "the used prekey asks for a checkpoint");
        assert_eq!(local_one_time_prekey_count(&bob.conn).expect("count"), ONE_TIME_PREKEY_TARGET - 1);
        assert_eq!(known_devices(&bob.conn, 1).expect("known"), vec![1]);

        // A second message before bob answers still carries the header and reuses the session.
        let second = alice.send(&bob, "still there?");
        assert!(x3dh::peek_prekey_header(&second.ciphertext).expect("peek").is_some());
        assert_eq!(open_text(&bob, &second), "still there?");

        let reply = bob.send(&alice, "hi alice");
        assert_eq!(open_text(&alice, &reply), "hi alice");
        let third = alice.send(&bob, "third");
        assert!(x3dh::peek_prekey_header(&third.ciphertext).expect("peek").is_none());
        assert_eq!(open_text(&bob, &third), "third");

        // Out of order within a chain.
        let r1 = bob.send(&alice, "r1");
        let r2 = bob.send(&alice, "r2");
        assert_eq!(open_text(&alice, &r2), "r2");
        assert_eq!(open_text(&alice, &r1), "r1");

        // A replay is refused and leaves the session usable.
        assert!(open_envelope(&bob.conn, &third).is_err());
        assert!(open_envelope(&bob.conn, &first).is_err());
        let fourth = alice.send(&bob, "fourth");
        assert_eq!(open_text(&bob, &fourth), "fourth");
    }

    #[test]
    fn content_fields_survive() {
        let alice = Device::new(1, 1);
        let bob = Device::new(2, 7);
        add_sessions(&alice.conn, &bob.profile(), &[bob.bundle(None)]).expect("add session");
        let mut content = text_content("bold move");
        content.mut_text().entities.push({
            let mut e = crate::wire::e2e::Entity::new();
            e.type_ = "bold".into();
            e.offset = 0;
            e.length = 4;
            e
        });
        content.reply_to_message_id = 42;
        let sealed = seal(&alice.conn, 2, &content).expect("seal");
        bob.introduce(&alice);
        let opened = open_envelope(&bob.conn, &alice.envelope(sealed[0].ciphertext.clone())).expect("open");
        assert_eq!(opened, content);
    }

    #[test]
    fn changed_device_key_is_refused() {
        let alice = Device::new(1, 1);
        let bob = Device::new(2, 1);
        add_sessions(&alice.conn, &bob.profile(), &[bob.bundle(Some(0))]).expect("add session");
        assert_eq!(open_text(&bob, &alice.send(&bob, "hi")), "hi");

        // Another device claims to be alice's device 1 with a different key.
        let mallory = Device::new(1, 1);
        add_sessions(&mallory.conn, &bob.profile(), &[bob.bundle(Some(1))]).expect("add session");
        let forged = mallory.send(&bob, "it is me, alice");
        match open_envelope(&bob.conn, &forged) {
            Err(E2eError::DeviceKeyChanged { user_id: 1, device_id: 1 }) => {}
            other => panic!("expected DeviceKeyChanged, got {other:?}"),
        }
        // Nothing was consumed or replaced: the prekey is still there and alice still works.
        assert!(store::one_time_prekey(&bob.conn, bob.keys.one_time_prekeys[1].id).expect("read").is_some());
        assert_eq!(open_text(&bob, &alice.send(&bob, "still me")), "still me");

        // A bundle presenting a changed key for a recorded device is refused as well.
        let mut swapped = bob.bundle(Some(2));
        let impostor = Device::new(2, 1);
        swapped.device_key = impostor.keys.device_key.clone();
        swapped.device_certificate =
            identity::sign_device_certificate(&bob.account, &key32(&swapped.device_key, "k").expect("32")).to_vec();
        match add_sessions(&alice.conn, &bob.profile(), &[swapped]) {
            Err(E2eError::DeviceKeyChanged { user_id: 2, device_id: 1 }) => {}
            other => panic!("expected DeviceKeyChanged, got {other:?}"),
        }
    }

    #[test]
    fn unknown_prekey_no_session_and_bad_content() {
        let alice = Device::new(1, 1);
        let bob = Device::new(2, 1);
        let carol = Device::new(3, 1);
        add_sessions(&alice.conn, &bob.profile(), &[bob.bundle(Some(0))]).expect("add session");
        assert_eq!(open_text(&bob, &alice.send(&bob, "hi")), "hi");
        // Carol got the same (already used) one-time prekey: bob no longer holds it.
        add_sessions(&carol.conn, &bob.profile(), &[bob.bundle(Some(0))]).expect("add session");
        match open_envelope(&bob.conn, &carol.send(&bob, "me too")) {
            Err(E2eError::Crypto(CryptoError::UnknownPrekey(id))) => assert_eq!(id, bob.keys.one_time_prekeys[0].id),
            other => panic!("expected UnknownPrekey, got {other:?}"),
        }
        // A message without header from a device bob has no session with.
        let reply = bob.send(&alice, "answer");
        let mut misrouted = reply.clone();
        misrouted.sender_user_id = 3;
        assert!(matches!(
            open_envelope(&carol.conn, &misrouted),
            Err(E2eError::NoSession { user_id: 3, device_id: 1 })
        ));
        // A plaintext that is not a Content.
        let sealed = {
            let (cur, prev) = store::sessions(&alice.conn, 2, 1).expect("read").expect("session");
            let mut s = Session::from_bytes(&cur).expect("decode");
            let ct = s.encrypt(&[0xff, 0xff, 0xff]);
            store::put_sessions(&alice.conn, 2, 1, &s.to_bytes(), prev.as_deref().map(Vec::as_slice)).expect("store");
            ct
        };
        assert!(matches!(open_envelope(&bob.conn, &alice.envelope(sealed)), Err(E2eError::BadContent)));
    }

    #[test]
    fn simultaneous_session_start_converges() {
        let alice = Device::new(1, 1);
        let bob = Device::new(2, 1);
        add_sessions(&alice.conn, &bob.profile(), &[bob.bundle(Some(0))]).expect("alice starts");
        add_sessions(&bob.conn, &alice.profile(), &[alice.bundle(Some(0))]).expect("bob starts");
        let a1 = alice.send(&bob, "a1");
        let b1 = bob.send(&alice, "b1");
        assert_eq!(open_text(&bob, &a1), "a1");
        assert_eq!(open_text(&alice, &b1), "b1");
        for round in 0..3 {
            let a = alice.send(&bob, &format!("a{round}"));
            assert_eq!(open_text(&bob, &a), format!("a{round}"));
            let b = bob.send(&alice, &format!("b{round}"));
            assert_eq!(open_text(&alice, &b), format!("b{round}"));
        }
    }

    #[test]
    fn a_first_message_without_a_one_time_prekey_replayed_later_starts_nothing() {
        let alice = Device::new(1, 1);
        let bob = Device::new(2, 1);
        // The platform had no one-time prekey of Bob's left.
        add_sessions(&alice.conn, &bob.profile(), &[bob.bundle(None)]).expect("session");
        let first = alice.send(&bob, "/start");
        assert_eq!(open_text(&bob, &first), "/start");
        // Two later sessions push the first one out of Bob's current and previous slots.
        for text in ["again", "and again"] {
            add_sessions(&alice.conn, &bob.profile(), &[bob.bundle(None)]).expect("session");
            assert_eq!(open_text(&bob, &alice.send(&bob, text)), text);
        }
        // The platform delivers the very first message again.
        match open_envelope(&bob.conn, &first) {
            Err(E2eError::Crypto(CryptoError::DuplicateMessage)) => {}
            other => panic!("a replay must start nothing, got {other:?}"),
        }
        assert_eq!(open_text(&bob, &alice.send(&bob, "still talking")), "still talking");
        // Keys under a pruned signed prekey are forgotten (a replay then fails as an unknown
        // prekey); those under a kept one stay.
        bob.conn
            .execute("INSERT INTO e2e_accepted_ephemerals (ephemeral_key, signed_prekey_id) VALUES (x'01', 999)", [])
            .expect("a key under a signed prekey that is gone");
        super::super::replay::forget_pruned(&bob.conn).expect("forget");
        let left: i64 = bob.conn.query_row("SELECT count(*) FROM e2e_accepted_ephemerals", [], |r| r.get(0)).expect("count");
        assert_eq!(left, 3, "the three first messages under the current signed prekey");
    }
}
