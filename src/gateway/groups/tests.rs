//! The group steps against the in-memory platform (`port::fake`): a real bot store and real
//! MLS on both sides (the bot's, and a member's in its own database), with the platform's
//! answers scripted, honest or not.

use std::sync::Arc;

use grpcio::RpcStatusCode;
use rusqlite::Connection;

use super::*;
use crate::clock::unix_now;
use crate::crypto::{mls, IdentityKeyPair};
use crate::e2e::follow_up::FollowUp;
use crate::e2e::{self, group as mls_group, Registration};
use crate::gateway::botapi::types::UserView;
use crate::gateway::port::fake::FakePlatform;
use crate::gateway::port::refusal;
use crate::gateway::ctx::Parts;
use crate::gateway::send_wait::{SendFailure};
use crate::gateway::store::groups::{self as group_store, Membership};
use crate::gateway::store::{outbox, queue};
use crate::wire::e2e::{content::Body, Content, Text};
use crate::wire::platform::{
    group_delivery::Kind as DeliveryKind, send_group_message_response::Status, GroupDelivery, GroupInfoResponse,
    GroupMember, GroupRole, GroupType, InboxEnvelope, MembershipChange, Profile, ReserveMessageIdsResponse,
    ReservedMessageId, SendGroupMessageRequest, SendGroupMessageResponse, VerifyCredentialResponse,
};

const GID: [u8; 32] = [5; 32];
const ALICE: u64 = 100;

/// A member's device: its own database with device keys, a registration and MLS tables.
fn member_db(user_id: u64) -> Connection {
    let mut conn = Connection::open_in_memory().expect("db");
    e2e::create_all_tables(&conn).expect("e2e tables");
    mls::migrate_storage(&mut conn).expect("openmls tables");
    e2e::create_device_keys(&conn, &IdentityKeyPair::generate()).expect("device keys");
    e2e::save_registration(&conn, Registration { user_id, device_id: 1 }).expect("registration");
    conn
}

/// The test bot's parts (user 1, device 1; no whole bot) with device keys, on a fake platform that says it has the
/// `groups` capability.
fn bot() -> (Parts, Arc<FakePlatform>) {
    let bot = Parts::new();
    let fake = bot.fake.clone();
    let seed = bot.identity.seed();
    bot.store
        .write(move |c| {
            e2e::create_device_keys(c, &IdentityKeyPair::from_seed(&seed))?;
            Ok(e2e::save_registration(c, Registration { user_id: 1, device_id: 1 })?)
        })
        .expect("device keys");
    fake.answer_always("verify_credential", |_: crate::wire::platform::VerifyCredentialRequest| {
        Ok(VerifyCredentialResponse { capabilities: "groups".into(), ..Default::default() })
    });
    // Every group message reserves its id first (the platform cannot tell keyboards apart).
    fake.reserve_ids(1000, unix_now(), None);
    (bot, fake)
}

fn me(bot: &Parts) -> UserView {
    UserView { id: bot.ctx().user_id as i64, is_bot: true, first_name: "B".into(), username: Some("b_bot".into()) }
}

/// A MEMBERSHIP delivery: `user` now has `role` in the group, by `actor`.
fn membership(user: u64, role: GroupRole, actor: u64) -> InboxEnvelope {
    let member = |id: u64, role: GroupRole| GroupMember {
        user: Some(Profile { user_id: id, ..Default::default() }).into(),
        role: role.into(),
        ..Default::default()
    };
    let change = MembershipChange {
        new: Some(member(user, role)).into(),
        actor: Some(Profile { user_id: actor, ..Default::default() }).into(),
        ..Default::default()
    };
    InboxEnvelope {
        date: unix_now(),
        group: Some(GroupDelivery {
            group_id: GID.to_vec(),
            type_: GroupType::GROUP.into(),
            kind: DeliveryKind::MEMBERSHIP.into(),
            title: "Team".into(),
            change: Some(change).into(),
            ..Default::default()
        })
        .into(),
        ..Default::default()
    }
}

/// An MLS message of the group from `sender`, as the platform delivers it.
fn mls_message(sender: u64, message_id: u64, ciphertext: Vec<u8>) -> InboxEnvelope {
    InboxEnvelope {
        sender_user_id: sender,
        sender_username: "alice".into(),
        sender_display_name: "Alice".into(),
        message_id,
        date: unix_now(),
        ciphertext,
        group: Some(GroupDelivery {
            group_id: GID.to_vec(),
            type_: GroupType::GROUP.into(),
            kind: DeliveryKind::MLS_MESSAGE.into(),
            ..Default::default()
        })
        .into(),
        ..Default::default()
    }
}

/// Imports one delivery as `in/<n>` does, returning what it left to do after its commit.
fn import_one(bot: &Parts, env: InboxEnvelope) -> Result<Vec<FollowUp>, crate::gateway::store::StoreError> {
    let me = me(bot);
    bot.store.write(move |c| {
        let mut follow = Vec::new();
        import(c, &env, &me, &mut follow)?;
        Ok(follow)
    })
}

/// The last security alert, as `/healthz` would show it.
fn last_alert(bot: &Parts) -> Option<String> {
    bot.status.security_alert.lock().expect("status").as_ref().map(|(_, what)| what.clone())
}

fn status(bot: &Parts) -> Option<Membership> {
    bot.store.read(|c| group_store::by_group_id(c, &GID)).expect("read").map(|g| g.status)
}

/// Alice's group, which the bot was invited to (an INVITED delivery imported); the platform
/// serves `info` as its GroupInfo and takes every commit.
fn invited(bot: &Parts, fake: &FakePlatform, alice: &Connection) {
    let info = mls_group::create(alice, &GID).expect("create");
    fake.answer_always("get_group_info", move |_: crate::wire::platform::GroupRequest| {
        Ok(GroupInfoResponse { group_info: info.clone(), ..Default::default() })
    });
    let follow = import_one(bot, membership(1, GroupRole::INVITED, ALICE)).expect("invitation imported");
    assert_eq!(status(bot), Some(Membership::Invited));
    assert!(matches!(&follow[..], [FollowUp::Join(g)] if g.id == GID.to_vec()), "a join follows: {follow:?}");
}

fn ok_answer(message_id: u64) -> SendGroupMessageResponse {
    SendGroupMessageResponse { status: Status::OK.into(), message_id, date: unix_now(), ..Default::default() }
}

#[test]
fn an_invited_bot_joins_by_external_commit_that_the_members_process() {
    let (bot, fake) = bot();
    let alice = member_db(ALICE);
    invited(&bot, &fake, &alice);
    fake.answer_always("send_group_message", |_: SendGroupMessageRequest| Ok(ok_answer(0)));

    join_invited(&bot.ctx());

    assert_eq!(status(&bot), Some(Membership::Member));
    let sent = fake.calls_of("send_group_message");
    assert_eq!(sent.len(), 1, "one external commit");
    let commit: SendGroupMessageRequest = sent[0].request();
    assert_eq!(commit.group_id, GID.to_vec());
    assert!(!commit.group_info.is_empty(), "an external commit carries the new GroupInfo");
    // Alice's device takes the commit: the bot is a member of the MLS group now.
    assert!(matches!(mls_group::receive(&alice, &GID, &commit.message).expect("commit"), mls_group::Received::Commit { .. }));
    let members = mls_group::members(&alice, &GID).expect("members");
    assert!(members.iter().any(|d| d.0 == 1), "the bot's leaf is in Alice's tree");
}

#[test]
fn a_groupinfo_of_another_group_is_refused_and_no_commit_is_sent() {
    let (bot, fake) = bot();
    let alice = member_db(ALICE);
    import_one(&bot, membership(1, GroupRole::INVITED, ALICE)).expect("invitation");
    // A lying platform serves another group's GroupInfo for this one.
    let other = mls_group::create(&alice, &[9; 32]).expect("other group");
    fake.answer_always("get_group_info", move |_: crate::wire::platform::GroupRequest| {
        Ok(GroupInfoResponse { group_info: other.clone(), ..Default::default() })
    });

    join_invited(&bot.ctx());

    assert!(fake.calls_of("send_group_message").is_empty(), "nothing was committed");
    assert_eq!(status(&bot), Some(Membership::Invited), "still invited: tried again later");
    assert_eq!(bot.store.read(|c| Ok(mls_group::epoch(c, &[9; 32])?)).expect("read"), None, "the other group was not kept");
}

#[test]
fn a_lost_answer_to_a_commit_resends_exactly_the_recorded_commit() {
    let (bot, fake) = bot();
    let alice = member_db(ALICE);
    invited(&bot, &fake, &alice);
    // The platform takes the commit but its answer is lost; the next try is answered.
    fake.answer_once::<SendGroupMessageResponse>("send_group_message", Err(refusal(RpcStatusCode::UNAVAILABLE, "answer lost")));
    fake.answer_once("send_group_message", Ok(ok_answer(0)));

    join_invited(&bot.ctx());
    assert_eq!(status(&bot), Some(Membership::Invited), "unanswered: not a member yet");
    join_invited(&bot.ctx());

    assert_eq!(status(&bot), Some(Membership::Member));
    let sent = fake.calls_of("send_group_message");
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].request, sent[1].request, "the same commit, byte for byte, with the same client message id");
}

#[test]
fn a_bot_without_the_capability_leaves_the_group_it_was_added_to() {
    let (bot, fake) = bot();
    let alice = member_db(ALICE);
    fake.answer_always("verify_credential", |_: crate::wire::platform::VerifyCredentialRequest| {
        Ok(VerifyCredentialResponse { capabilities: "inline".into(), ..Default::default() })
    });
    invited(&bot, &fake, &alice);
    fake.answer_always("leave_group", |_: crate::wire::platform::GroupRequest| Ok(crate::wire::platform::MembershipResponse::new()));

    join_invited(&bot.ctx());

    assert_eq!(fake.calls_of("leave_group").len(), 1);
    assert!(fake.calls_of("get_group_info").is_empty(), "no join attempted");
    assert_eq!(status(&bot), Some(Membership::Gone));
}

/// The bot, joined to Alice's group, and Alice's device having processed its join.
fn joined() -> (Parts, Arc<FakePlatform>, Connection) {
    let (bot, fake) = bot();
    let alice = member_db(ALICE);
    invited(&bot, &fake, &alice);
    fake.answer_once("send_group_message", Ok(ok_answer(0)));
    join_invited(&bot.ctx());
    let commit: SendGroupMessageRequest = fake.calls_of("send_group_message")[0].request();
    mls_group::receive(&alice, &GID, &commit.message).expect("Alice processes the join");
    (bot, fake, alice)
}

fn text(s: &str) -> Vec<u8> {
    use protobuf::Message as _;
    Content { body: Some(Body::Text(Text { text: s.into(), ..Default::default() })), ..Default::default() }
        .write_to_bytes()
        .expect("encode")
}

#[test]
fn a_members_message_becomes_a_group_update_and_a_forged_sender_is_refused() {
    let (bot, _fake, alice) = joined();
    let (hello, _) = mls_group::encrypt(&alice, &GID, &text("hello")).expect("encrypt");
    import_one(&bot, mls_message(ALICE, 7, hello)).expect("imported");
    let updates = bot.store.read(|c| queue::fetch(c, None, 10)).expect("queue");
    let message = updates.iter().find(|u| u.kind == "message").expect("a message update");
    assert_eq!(message.payload["text"], "hello", "{}", message.payload);
    assert_eq!(message.payload["from"]["id"], ALICE as i64);
    assert!(message.payload["chat"]["id"].as_i64().expect("chat id") < 0, "a group's chat id");

    // A platform that names another sender than the one who signed it is refused.
    let (forged, _) = mls_group::encrypt(&alice, &GID, &text("who am I")).expect("encrypt");
    let err = import_one(&bot, mls_message(200, 8, forged)).expect_err("refused");
    assert!(err.to_string().contains("user 200 sent a message signed by user 100"), "{err}");
    let after = bot.store.read(|c| queue::fetch(c, None, 10)).expect("queue");
    assert_eq!(after.len(), updates.len(), "no update from the forged delivery");
}

/// A join and a departure in a group are service messages besides their `chat_member`: the
/// member in `new_chat_members` or `left_chat_member`, who did it as `from`, under the
/// message id the platform gave the change; a promotion (no message id) is none.
#[test]
fn joins_and_departures_are_service_messages_too() {
    let (bot, _fake, _alice) = joined();
    let carol = 300;
    let from_left = |user: u64, role: GroupRole, old: GroupRole, actor: u64, message_id: u64| {
        let mut env = membership(user, role, actor);
        let change = env.group.as_mut().expect("group").change.as_mut().expect("change");
        change.old = Some(GroupMember { user: Some(Profile { user_id: user, ..Default::default() }).into(), role: old.into(), ..Default::default() }).into();
        env.message_id = message_id;
        env
    };
    import_one(&bot, from_left(carol, GroupRole::MEMBER, GroupRole::INVITED, ALICE, 21)).expect("joined");
    import_one(&bot, from_left(carol, GroupRole::ADMINISTRATOR, GroupRole::MEMBER, ALICE, 0)).expect("promoted");
    import_one(&bot, from_left(carol, GroupRole::LEFT, GroupRole::ADMINISTRATOR, carol, 22)).expect("left");
    let updates = bot.store.read(|c| queue::fetch(c, None, 20)).expect("queue");
    let service: Vec<&serde_json::Value> = updates
        .iter()
        .filter(|u| u.kind == "message" && (u.payload.get("new_chat_members").is_some() || u.payload.get("left_chat_member").is_some()))
        .map(|u| &u.payload)
        .collect();
    assert_eq!(service.len(), 2, "{service:?}");
    assert_eq!((service[0]["message_id"].as_u64(), service[0]["new_chat_members"][0]["id"].as_u64()), (Some(21), Some(carol)));
    assert_eq!(service[0]["from"]["id"].as_u64(), Some(ALICE));
    assert!(service[0]["chat"]["id"].as_i64().expect("chat") < 0);
    assert_eq!((service[1]["message_id"].as_u64(), service[1]["left_chat_member"]["id"].as_u64()), (Some(22), Some(carol)));
    assert_eq!(service[1]["from"]["id"].as_u64(), Some(carol));
    assert_eq!(updates.iter().filter(|u| u.kind == "chat_member").count(), 3, "each change is a chat_member too");
    // Both are in the history, without content: a bot may reply to them (welcome bots do).
    let chat_id = service[0]["chat"]["id"].as_i64().expect("chat");
    for id in [21, 22] {
        let kept = bot.store.read(|c| crate::gateway::store::chats::lookup(c, chat_id, id)).expect("read").expect("kept");
        assert!(kept.content.body.is_none() && !kept.from_bot, "{kept:?}");
    }
}

/// The bot's first outbox message to the group, as the outbox thread reads it.
fn outbox_text(bot: &Parts, s: &str) -> outbox::OutboxEntry {
    let chat_id = bot.store.read(|c| group_store::by_group_id(c, &GID)).expect("read").expect("group").chat_id;
    let content = Content { body: Some(Body::Text(Text { text: s.into(), ..Default::default() })), ..Default::default() };
    bot.store
        .write(move |c| {
            outbox::insert(c, "cmid-1", chat_id, &content, unix_now())?;
            Ok(outbox::pending(c, 1)?.remove(0))
        })
        .expect("outbox")
}

/// Sends the outbox's first message again; its message id once the platform took it.
fn send_pending(bot: &Parts) -> i64 {
    let entry = bot.store.read(|c| Ok(outbox::pending(c, 1)?.remove(0))).expect("still in the outbox");
    match send(&bot.ctx(), &entry) {
        Ok(GroupSend::Sent(sent)) => sent.message_id,
        other => panic!("not sent: {:?}", other.err()),
    }
}

#[test]
fn a_stale_epoch_drops_the_ciphertext_and_the_next_try_encrypts_anew() {
    let (bot, fake, alice) = joined();
    let entry = outbox_text(&bot, "hi all");
    fake.answer_once("send_group_message", Ok(SendGroupMessageResponse { status: Status::STALE_EPOCH.into(), epoch: 9, ..Default::default() }));
    assert!(matches!(send(&bot.ctx(), &entry), Ok(GroupSend::Later(_))));
    fake.answer_once("send_group_message", Ok(ok_answer(42)));
    assert_eq!(send_pending(&bot), 42);
    let sent = fake.calls_of("send_group_message");
    let (first, second): (SendGroupMessageRequest, SendGroupMessageRequest) = (sent[1].request(), sent[2].request());
    // A plain text reserved its id before each try, as a keyboard's message does.
    let reserved = fake.calls_of("reserve_message_ids");
    assert_eq!(reserved.len(), 2, "one reservation per try");
    let r: crate::wire::platform::ReserveMessageIdsRequest = reserved[0].request();
    assert_eq!(r.reservations[0].client_message_id, "cmid-1");
    assert_ne!(first.message, second.message, "never the stale ciphertext again");
    assert_eq!(first.client_message_id, second.client_message_id);
    assert!(bot.store.read(|c| outbox::pending(c, 10)).expect("read").is_empty(), "left the outbox");
    // Alice reads the second ciphertext.
    match mls_group::receive(&alice, &GID, &second.message).expect("receive") {
        mls_group::Received::Application { plaintext, .. } => {
            assert_eq!(plaintext.len(), crate::e2e::padding::SMALLEST_BUCKET, "padded");
            // Numbered and vouched for once, kept by the second try (`e2e::sequence`,
            // `e2e::vouch`): the reserved id is the one the platform answers every try.
            let got = crate::e2e::padding::parse(&plaintext).expect("content");
            assert_eq!((got.sender_seq, got.vouched.message_id), (1, 1000));
            let mut sent = crate::e2e::padding::parse(&text("hi all")).expect("content");
            sent.sender_seq = 1;
            sent.vouched = got.vouched.clone();
            assert_eq!(plaintext, crate::e2e::padding::padded_bytes(&sent));
        }
        _ => panic!("not an application message"),
    }
}

#[test]
fn removals_pending_makes_the_bot_commit_the_removal_first() {
    let (bot, fake, _alice) = joined();
    let entry = outbox_text(&bot, "after the ban");
    fake.answer_once(
        "send_group_message",
        Ok(SendGroupMessageResponse { status: Status::REMOVALS_PENDING.into(), pending_removals: vec![ALICE], ..Default::default() }),
    );
    fake.answer_once("send_group_message", Ok(ok_answer(0)));
    // The removal accepted, the post goes again at once (no backoff).
    assert!(matches!(send(&bot.ctx(), &entry), Ok(GroupSend::Again(_))));
    let sent = fake.calls_of("send_group_message");
    assert_eq!(sent.len(), 3, "join, the refused message, the removal commit");
    let removal: SendGroupMessageRequest = sent[2].request();
    assert!(removal.client_message_id != "cmid-1" && !removal.message.is_empty());
    let members = bot.store.read(|c| Ok(mls_group::members(c, &GID)?)).expect("members");
    assert!(!members.iter().any(|d| d.0 == ALICE), "Alice's leaf is gone from the bot's tree");
}

#[test]
fn a_ban_by_the_bot_is_a_removal_it_owes() {
    let (bot, _fake, _alice) = joined();
    let follow = import_one(&bot, membership(ALICE, GroupRole::BANNED, 1)).expect("imported");
    assert_eq!(follow, vec![FollowUp::RemoveLeaves { group: GID.to_vec(), users: vec![ALICE] }], "the bot's own removal");
    let follow = import_one(&bot, membership(300, GroupRole::LEFT, 300)).expect("imported");
    assert!(matches!(&follow[..], [FollowUp::DepartedNoted { user: 300, .. }]), "someone else's departure is checked later: {follow:?}");
}

/// A text with one button for the group, in the outbox under `cmid`.
fn keyboard_post(bot: &Parts, cmid: &'static str) -> outbox::OutboxEntry {
    let chat_id = bot.store.read(|c| group_store::by_group_id(c, &GID)).expect("read").expect("group").chat_id;
    let mut content = Content { body: Some(Body::Text(Text { text: "pick".into(), ..Default::default() })), ..Default::default() };
    content.keyboard = Some(crate::wire::e2e::InlineKeyboard {
        rows: vec![crate::wire::e2e::KeyboardRow {
            buttons: vec![crate::wire::e2e::InlineButton { text: "A".into(), callback_data: "a".into(), ..Default::default() }],
            ..Default::default()
        }],
        ..Default::default()
    })
    .into();
    bot.store
        .write(move |c| {
            outbox::insert(c, cmid, chat_id, &content, unix_now())?;
            Ok(outbox::pending(c, 1)?.remove(0))
        })
        .expect("outbox")
}

#[test]
fn a_keyboard_in_a_group_needs_a_reserved_id_and_a_refusal_gives_the_message_up() {
    let (bot, fake, _alice) = joined();
    let entry = keyboard_post(&bot, "cmid-k");
    fake.answer_once(
        "reserve_message_ids",
        Ok(ReserveMessageIdsResponse {
            ids: vec![ReservedMessageId { error: "too many".into(), ..Default::default() }],
            ..Default::default()
        }),
    );
    match send(&bot.ctx(), &entry) {
        Ok(GroupSend::GaveUp(_, failure)) => assert_eq!(failure, SendFailure::Refused("the platform refused the message: too many".into())),
        other => panic!("not given up: {:?}", other.err()),
    }
    assert_eq!(fake.calls_of("send_group_message").len(), 1, "only the join: the message was never sent");
}

/// A keyboard's context is signed for the reserved id and stored with the message's number in
/// the one job that hands it over and seals it: a post with buttons costs the writer jobs of
/// any post (that one, and the record), and the member reads a context naming the message.
#[test]
fn a_keyboard_in_a_group_is_signed_and_stored_in_the_sealing_job() {
    let (bot, fake, alice) = joined();
    let entry = keyboard_post(&bot, "cmid-k2");
    fake.answer_once("send_group_message", Ok(ok_answer(1000)));
    let commits = bot.store.notifier().commits();
    assert!(matches!(send(&bot.ctx(), &entry), Ok(GroupSend::Sent(_))));
    assert_eq!(bot.store.notifier().commits() - commits, 2, "sealed with its context, then recorded");
    let sent: SendGroupMessageRequest = fake.calls_of("send_group_message").last().expect("the post").request();
    let plaintext = match mls_group::receive(&alice, &GID, &sent.message).expect("receive") {
        mls_group::Received::Application { plaintext, .. } => plaintext,
        _ => panic!("not an application message"),
    };
    let got = crate::e2e::padding::parse(&plaintext).expect("content");
    assert_eq!((got.sender_seq, got.vouched.message_id), (1, 1000));
    let context = <crate::wire::e2e::KeyboardContext as protobuf::Message>::parse_from_bytes(&got.keyboard.context.context).expect("signed context");
    assert_eq!((context.message_id, context.group_id.as_slice()), (1000, &GID[..]));
}

/// The GroupInfo Alice's group has now: the one the bot's join commit carried.
fn current_group_info(fake: &FakePlatform) -> Vec<u8> {
    let commits = fake.calls_of("send_group_message");
    commits.last().expect("the bot's join").request::<SendGroupMessageRequest>().group_info
}

fn epoch(bot: &Parts) -> Option<u64> {
    bot.store.read(|c| Ok(mls_group::epoch(c, &GID)?)).expect("epoch")
}

#[test]
fn a_joiner_nobody_vouched_for_is_refused_raises_the_alert_and_the_group_goes_on() {
    let (bot, fake, alice) = joined();
    let before = epoch(&bot);
    let forged = mls_group::forge::external_commit(&current_group_info(&fake), |s| mls_group::forge::leaf_as(77, 1, None, s));
    assert!(crate::gateway::inbox::import_reported(&bot.ctx(), vec![InboxEnvelope { seq: 10, ..mls_message(77, 0, forged) }]).is_some());
    assert_eq!(epoch(&bot), before, "the forged commit is not merged");
    assert_eq!(bot.metrics.security_alerts.load(std::sync::atomic::Ordering::Relaxed), 1);
    let alert = last_alert(&bot).expect("shown in /healthz");
    assert!(alert.contains("device 1 of user 77 carries no proof"), "{alert}");
    let last_error = bot.status.last_error.lock().expect("status").clone();
    assert!(last_error.is_none(), "an alert, not a decryption failure: {last_error:?}");

    // Alice's next message is read: the group goes on.
    let (hello, _) = mls_group::encrypt(&alice, &GID, &text("still here")).expect("encrypt");
    assert!(crate::gateway::inbox::import_reported(&bot.ctx(), vec![InboxEnvelope { seq: 11, ..mls_message(ALICE, 9, hello) }]).is_some());
    let updates = bot.store.read(|c| queue::fetch(c, None, 10)).expect("queue");
    assert!(updates.iter().any(|u| u.payload["text"] == "still here"), "{updates:?}");
}

#[test]
fn a_tree_with_a_leaf_nobody_vouched_for_is_not_joined() {
    let (bot, fake) = bot();
    let info = mls_group::forge::unvouched_group_info(&GID);
    fake.answer_always("get_group_info", move |_: crate::wire::platform::GroupRequest| {
        Ok(GroupInfoResponse { group_info: info.clone(), ..Default::default() })
    });
    import_one(&bot, membership(1, GroupRole::INVITED, ALICE)).expect("invitation imported");
    join_invited(&bot.ctx());
    assert!(fake.calls_of("send_group_message").is_empty(), "no commit is sent");
    assert_eq!((status(&bot), epoch(&bot)), (Some(Membership::Invited), None), "still invited, nothing stored");
    assert_eq!(bot.metrics.security_alerts.load(std::sync::atomic::Ordering::Relaxed), 1);
    assert!(last_alert(&bot).expect("alert").contains("carries no proof"));
}

#[test]
fn an_invitation_to_a_group_the_bot_is_in_never_drops_its_state() {
    let (bot, fake, _alice) = joined();
    let before = epoch(&bot);
    let asked = fake.calls_of("get_group_info").len();
    import_one(&bot, membership(1, GroupRole::INVITED, ALICE)).expect("imported");
    assert_eq!(status(&bot), Some(Membership::Member));
    join_invited(&bot.ctx());
    assert_eq!(fake.calls_of("get_group_info").len(), asked, "no rejoin from the platform's GroupInfo");
    assert_eq!(epoch(&bot), before);
}

/// `env`, a delivery of a channel.
fn in_channel(mut env: InboxEnvelope) -> InboxEnvelope {
    env.group.as_mut().expect("a group delivery").type_ = GroupType::CHANNEL.into();
    env
}

fn member_with(user: u64, role: GroupRole, can_post: bool) -> GroupMember {
    GroupMember {
        user: Some(Profile { user_id: user, ..Default::default() }).into(),
        role: role.into(),
        rights: Some(crate::wire::platform::AdminRights { can_post_messages: can_post, ..Default::default() }).into(),
        ..Default::default()
    }
}

/// A WELCOME delivery of the group carrying `welcome`.
fn welcome_delivery(welcome: Vec<u8>) -> InboxEnvelope {
    InboxEnvelope {
        date: unix_now(),
        ciphertext: welcome,
        group: Some(GroupDelivery {
            group_id: GID.to_vec(),
            type_: GroupType::GROUP.into(),
            kind: DeliveryKind::WELCOME.into(),
            title: "Team".into(),
            ..Default::default()
        })
        .into(),
        ..Default::default()
    }
}

#[test]
fn a_post_the_platform_lets_through_from_someone_without_the_right_is_dropped() {
    let (bot, fake) = bot();
    let alice = member_db(ALICE);
    let info = mls_group::create(&alice, &GID).expect("create");
    fake.answer_always("get_group_info", move |_: crate::wire::platform::GroupRequest| {
        Ok(GroupInfoResponse { group_info: info.clone(), ..Default::default() })
    });
    fake.answer_always("verify_credential", |_: crate::wire::platform::VerifyCredentialRequest| {
        Ok(VerifyCredentialResponse { capabilities: "groups,channels".into(), ..Default::default() })
    });
    // The platform's member list: user 300 owns the channel; Alice is a subscriber.
    fake.answer_always("get_group", |_: crate::wire::platform::GroupRequest| {
        let members = vec![member_with(300, GroupRole::OWNER, false), member_with(ALICE, GroupRole::MEMBER, false)];
        Ok(crate::wire::platform::Group { group_id: GID.to_vec(), members, ..Default::default() })
    });
    fake.answer_always("send_group_message", |_: SendGroupMessageRequest| Ok(ok_answer(0)));
    import_one(&bot, in_channel(membership(1, GroupRole::INVITED, 300))).expect("invited");
    join_invited(&bot.ctx());
    let commit: SendGroupMessageRequest = fake.calls_of("send_group_message")[0].request();
    mls_group::receive(&alice, &GID, &commit.message).expect("Alice processes the join");
    assert_eq!(fake.calls_of("get_group").len(), 1, "the posters are read once joined");

    let posts = |bot: &Parts| bot.store.read(|c| queue::fetch(c, None, 10)).expect("queue").into_iter().filter(|u| u.kind == "channel_post").count();
    let (post, _) = mls_group::encrypt(&alice, &GID, &text("a subscriber's post")).expect("encrypt");
    let e = import_one(&bot, in_channel(mls_message(ALICE, 5, post))).expect_err("dropped");
    assert!(e.to_string().contains("neither its owner nor an administrator with can_post_messages"), "{e}");
    assert_eq!(posts(&bot), 0);

    // Promoted with the right to post (a role change the bot receives): her posts count.
    let mut promoted = membership(ALICE, GroupRole::ADMINISTRATOR, 300);
    let change = promoted.group.as_mut().unwrap().change.as_mut().unwrap();
    change.new = Some(member_with(ALICE, GroupRole::ADMINISTRATOR, true)).into();
    import_one(&bot, in_channel(promoted)).expect("promotion");
    let (post, _) = mls_group::encrypt(&alice, &GID, &text("an administrator's post")).expect("encrypt");
    import_one(&bot, in_channel(mls_message(ALICE, 6, post))).expect("a post");
    assert_eq!(posts(&bot), 1);
}

/// `mls_message` at a place in the group's order.
fn mls_message_at(sender: u64, message_id: u64, ciphertext: Vec<u8>, group_seq: u64) -> InboxEnvelope {
    let mut env = mls_message(sender, message_id, ciphertext);
    env.group.mut_or_insert_default().group_seq = group_seq;
    env
}

/// The commits the bot sent, in order.
fn commits_sent(fake: &FakePlatform) -> Vec<SendGroupMessageRequest> {
    fake.calls_of("send_group_message").iter().map(|c| c.request()).collect()
}

const WEEK: i64 = 7 * 86_400;

#[test]
fn after_every_lifetime_passed_the_bot_joins_by_link_and_self_updates_on_its_period() {
    let (bot, fake) = bot();
    let alice = member_db(ALICE);
    // Alice's group, whose only leaf lasts two seconds and is never updated.
    let info = mls_group::create_lasting(&alice, &GID, 2).expect("create");
    fake.answer_always("get_group_info", move |_: crate::wire::platform::GroupRequest| {
        Ok(GroupInfoResponse { group_info: info.clone(), ..Default::default() })
    });
    import_one(&bot, membership(1, GroupRole::INVITED, ALICE)).expect("invitation");
    fake.answer_always("send_group_message", |_: SendGroupMessageRequest| Ok(ok_answer(0)));
    std::thread::sleep(std::time::Duration::from_secs(3));

    join_invited(&bot.ctx());
    assert_eq!(status(&bot), Some(Membership::Member), "joined although Alice's leaf expired");
    let join = commits_sent(&fake).remove(0);
    mls_group::receive(&alice, &GID, &join.message).expect("Alice processes the join");

    // A fresh leaf from the join: no self-update until the period has passed.
    self_update_due(&bot.ctx(), unix_now());
    assert_eq!(commits_sent(&fake).len(), 1);
    self_update_due(&bot.ctx(), unix_now() + WEEK + 1);
    let sent = commits_sent(&fake);
    assert_eq!(sent.len(), 2, "one self-update a week later");
    match mls_group::receive(&alice, &GID, &sent[1].message).expect("Alice processes the update") {
        mls_group::Received::Commit { added, removed, .. } => assert!(added.is_empty() && removed.is_empty()),
        other => panic!("not a commit: {other:?}"),
    }
    self_update_due(&bot.ctx(), unix_now() + WEEK + 2);
    assert_eq!(commits_sent(&fake).len(), 2, "recorded: not again before the next period");
    // The clock goes back a week (the update was made under a clock that was ahead): the
    // leaf dated in the future is replaced now, not a week from now, and then not again.
    self_update_due(&bot.ctx(), unix_now());
    let sent = commits_sent(&fake);
    assert_eq!(sent.len(), 3, "a leaf dated ahead of the clock is due");
    mls_group::receive(&alice, &GID, &sent[2].message).expect("Alice processes the second update");
    self_update_due(&bot.ctx(), unix_now());
    assert_eq!(commits_sent(&fake).len(), 3, "recorded at the clock's time: not due again");

    // Messages still flow both ways.
    let (hello, _) = mls_group::encrypt(&alice, &GID, &text("still here")).expect("encrypt");
    import_one(&bot, mls_message(ALICE, 7, hello)).expect("imported");
    let (back, _) = bot.store.write(|c| Ok(mls_group::encrypt(c, &GID, b"hi")?)).expect("encrypt");
    assert!(matches!(mls_group::receive(&alice, &GID, &back).expect("decrypt"), mls_group::Received::Application { .. }));
}

#[test]
fn a_welcome_join_after_every_lifetime_passed_is_followed_by_a_self_update() {
    let (bot, fake) = bot();
    let alice = member_db(ALICE);
    mls_group::create_lasting(&alice, &GID, 2).expect("create");
    let kp = bot.store.write(|c| Ok(mls_group::key_packages_lasting(c, 1, 2)?)).expect("key package");
    let add = mls_group::add(&alice, &GID, &mls_group::Claimed::of(1, 1, &kp)).expect("add the bot");
    mls_group::commit_accepted(&alice, &GID).expect("merge");
    fake.answer_always("send_group_message", |_: SendGroupMessageRequest| Ok(ok_answer(0)));
    std::thread::sleep(std::time::Duration::from_secs(3));

    import_one(&bot, welcome_delivery(add.welcome)).expect("Welcome join although every leaf expired");
    assert_eq!(status(&bot), Some(Membership::Member));
    self_update_due(&bot.ctx(), unix_now());
    let sent = commits_sent(&fake);
    assert_eq!(sent.len(), 1, "a self-update right after the Welcome join");
    assert!(matches!(mls_group::receive(&alice, &GID, &sent[0].message).expect("commit"), mls_group::Received::Commit { .. }));
    let (hello, _) = mls_group::encrypt(&alice, &GID, &text("welcome")).expect("encrypt");
    import_one(&bot, mls_message(ALICE, 1, hello)).expect("imported");
    let updates = bot.store.read(|c| queue::fetch(c, None, 10)).expect("queue");
    assert!(updates.iter().any(|u| u.kind == "message" && u.payload["text"] == "welcome"));
}

#[test]
fn two_removals_due_together_make_one_commit() {
    let (bot, fake, alice) = joined();
    let (bob, carol) = (member_db(300), member_db(400));
    let mut kps = mls_group::Claimed::of(300, 1, &mls_group::key_packages(&bob, 1).expect("kp"));
    kps.extend(mls_group::Claimed::of(400, 1, &mls_group::key_packages(&carol, 1).expect("kp")));
    let add = mls_group::add(&alice, &GID, &kps).expect("add");
    mls_group::commit_accepted(&alice, &GID).expect("merge");
    import_one(&bot, mls_message(ALICE, 0, add.message)).expect("the bot processes the add");
    fake.answer_always("send_group_message", |_: SendGroupMessageRequest| Ok(ok_answer(0)));

    commit_removals(&bot.ctx(), vec![(GID.to_vec(), 300), (GID.to_vec(), 400)]);

    let sent = commits_sent(&fake);
    assert_eq!(sent.len(), 2, "the join and ONE removal commit");
    match mls_group::receive(&alice, &GID, &sent[1].message).expect("commit") {
        mls_group::Received::Commit { mut removed, .. } => {
            removed.sort();
            assert_eq!(removed, vec![(300, 1), (400, 1)]);
        }
        other => panic!("not a commit: {other:?}"),
    }
}

/// The texts of the bot's queued message updates, in order.
fn queued_texts(bot: &Parts) -> Vec<String> {
    let updates = bot.store.read(|c| queue::fetch(c, None, 10)).expect("queue");
    updates.iter().filter(|u| u.kind == "message").map(|u| u.payload["text"].as_str().unwrap_or_default().to_string()).collect()
}

#[test]
fn once_the_inbox_passes_our_commit_the_past_epoch_no_longer_opens() {
    let (bot, fake, alice) = joined();
    // Alice's messages of the current epoch, accepted before the bot's commit (seq 10).
    let (early, _) = mls_group::encrypt(&alice, &GID, &text("before")).expect("encrypt");
    let (late, _) = mls_group::encrypt(&alice, &GID, &text("also before")).expect("encrypt");
    fake.answer_once("send_group_message", Ok(SendGroupMessageResponse { group_seq: 10, ..ok_answer(0) }));
    self_update_due(&bot.ctx(), unix_now() + WEEK + 1);
    let update = commits_sent(&fake).pop().expect("the self-update");

    // Read after our commit was merged: the past epoch opens it.
    import_one(&bot, mls_message_at(ALICE, 1, early, 9)).expect("a message of the past epoch");
    // A delivery past our commit: the past epoch is deleted with it.
    mls_group::receive(&alice, &GID, &update.message).expect("Alice processes the update");
    let (after, _) = mls_group::encrypt(&alice, &GID, &text("after")).expect("encrypt");
    import_one(&bot, mls_message_at(ALICE, 2, after, 11)).expect("a message of the new epoch");
    let err = import_one(&bot, mls_message_at(ALICE, 3, late, 12)).expect_err("the past epoch is gone");
    assert!(err.to_string().contains("processing a group message"), "{err}");
    let texts = queued_texts(&bot);
    assert_eq!(texts, ["before", "after"]);
}

#[test]
fn another_members_commit_deletes_the_epoch_it_ended_unless_a_commit_of_ours_is_unread() {
    let (bot, fake, alice) = joined();
    // A message of epoch 1 the platform could never deliver after Alice's commit (it refuses
    // a message of an ended epoch): a forged replay by the platform.
    let (stale, _) = mls_group::encrypt(&alice, &GID, &text("epoch 1")).expect("encrypt");
    let update = mls_group::self_update(&alice, &GID).expect("Alice updates");
    mls_group::commit_accepted(&alice, &GID).expect("merge");
    import_one(&bot, mls_message_at(ALICE, 0, update.message, 5)).expect("Alice's commit");
    assert_eq!(epoch(&bot), Some(2));
    let err = import_one(&bot, mls_message_at(ALICE, 1, stale, 6)).expect_err("epoch 1 is gone");
    assert!(err.to_string().contains("processing a group message"), "{err}");
    let (now, _) = mls_group::encrypt(&alice, &GID, &text("epoch 2")).expect("encrypt");
    import_one(&bot, mls_message_at(ALICE, 2, now, 7)).expect("the current epoch opens");

    // While a commit of ours is unread, the epochs before it stay (its messages may come).
    let (early, _) = mls_group::encrypt(&alice, &GID, &text("before ours")).expect("encrypt");
    fake.answer_once("send_group_message", Ok(SendGroupMessageResponse { group_seq: 20, ..ok_answer(0) }));
    self_update_due(&bot.ctx(), unix_now() + WEEK + 1);
    let ours = commits_sent(&fake).pop().expect("the bot's self-update");
    assert_eq!(epoch(&bot), Some(3));
    import_one(&bot, mls_message_at(ALICE, 3, early, 19)).expect("epoch 2, read after our commit was merged");
    mls_group::receive(&alice, &GID, &ours.message).expect("Alice processes the bot's update");
    let texts = queued_texts(&bot);
    assert_eq!(texts, ["epoch 2", "before ours"]);
}

#[test]
fn key_packages_are_replaced_once_older_than_half_their_lifetime() {
    let (bot, fake) = bot();
    fake.answer_always("upload_key_packages", |r: crate::wire::platform::KeyPackagesUpload| {
        Ok(crate::wire::platform::KeyPackagesUploadResponse { remaining: 20 + r.key_packages.len() as u32, ..Default::default() })
    });
    let uploaded = |fake: &FakePlatform| -> Vec<usize> {
        fake.calls_of("upload_key_packages")
            .iter()
            .map(|c| c.request::<crate::wire::platform::KeyPackagesUpload>().key_packages.len())
            .filter(|n| *n > 0)
            .collect()
    };
    let now = unix_now();
    // A state_dir of an earlier release does not know their age: replaced.
    keep_key_packages_at(&bot.ctx(), now);
    assert_eq!(uploaded(&fake), [20]);
    // Plenty, and young: nothing to do.
    keep_key_packages_at(&bot.ctx(), now + 41 * 86_400);
    assert_eq!(uploaded(&fake), [20]);
    // Half of the 84 days has passed: a fresh batch.
    keep_key_packages_at(&bot.ctx(), now + 42 * 86_400);
    assert_eq!(uploaded(&fake), [20, 20]);
    keep_key_packages_at(&bot.ctx(), now + 43 * 86_400);
    assert_eq!(uploaded(&fake), [20, 20], "counted from the new batch");
}

#[test]
fn a_member_that_cannot_process_a_commit_rejoins_and_reads_the_next_message() {
    let (bot, fake, alice) = joined();
    // Two commits of Alice's; the bot never gets the first, so it cannot process the second.
    let _missed = mls_group::self_update(&alice, &GID).expect("first commit");
    mls_group::commit_accepted(&alice, &GID).expect("merge");
    let second = mls_group::self_update(&alice, &GID).expect("second commit");
    mls_group::commit_accepted(&alice, &GID).expect("merge");
    import_one(&bot, mls_message(ALICE, 0, second.message.clone())).expect("kept, not dropped");
    assert_eq!(status(&bot), Some(Membership::Invited), "marked to rejoin");

    // It rejoins from the newest GroupInfo, replacing its own old leaf.
    fake.answer_once("get_group_info", Ok(GroupInfoResponse { group_info: second.group_info.clone(), ..Default::default() }));
    fake.answer_once("send_group_message", Ok(ok_answer(0)));
    join_invited(&bot.ctx());
    assert_eq!(status(&bot), Some(Membership::Member));
    let rejoin: SendGroupMessageRequest = fake.calls_of("send_group_message").last().expect("the rejoin").request();
    match mls_group::receive(&alice, &GID, &rejoin.message).expect("Alice processes the rejoin") {
        mls_group::Received::Commit { added, removed, .. } => {
            assert!(added.is_empty() && removed.is_empty(), "the same device, its old leaf replaced: {added:?} {removed:?}")
        }
        other => panic!("expected a commit, got {other:?}"),
    }
    let devices = mls_group::members(&alice, &GID).expect("members");
    assert_eq!(devices.iter().filter(|d| d.0 == 1).count(), 1, "one leaf of the bot: {devices:?}");
    let (hello, _) = mls_group::encrypt(&alice, &GID, &text("welcome back")).expect("encrypt");
    import_one(&bot, mls_message(ALICE, 12, hello)).expect("read");
    let updates = bot.store.read(|c| queue::fetch(c, None, 10)).expect("queue");
    assert!(updates.iter().any(|u| u.payload["text"] == "welcome back"), "{updates:?}");
}

/// The platform delivers an old commit again (issue 45, part 2): it is dropped, logged and
/// counted, and the bot stays a member at its epoch; it does not rejoin from the platform's
/// GroupInfo.
#[test]
fn a_replayed_old_commit_is_dropped_and_never_starts_a_rejoin() {
    let (bot, fake, alice) = joined();
    let first = mls_group::self_update(&alice, &GID).expect("first commit");
    mls_group::commit_accepted(&alice, &GID).expect("merge");
    import_one(&bot, mls_message(ALICE, 0, first.message.clone())).expect("processed");
    let epoch = bot.store.read(|c| Ok(mls_group::epoch(c, &GID)?)).expect("epoch");
    let replay = InboxEnvelope { seq: 40, client_message_id: "replay".into(), ..mls_message(ALICE, 0, first.message) };
    assert!(crate::gateway::inbox::import_reported(&bot.ctx(), vec![replay]).is_some());
    assert_eq!(status(&bot), Some(Membership::Member), "not marked to rejoin");
    assert_eq!(bot.store.read(|c| Ok(mls_group::epoch(c, &GID)?)).expect("epoch"), epoch, "the group stays at its epoch");
    assert_eq!(bot.metrics.replayed_commits.load(std::sync::atomic::Ordering::Relaxed), 1, "counted");
    let asked = fake.calls_of("get_group_info").len();
    join_invited(&bot.ctx());
    assert_eq!(fake.calls_of("get_group_info").len(), asked, "no GroupInfo asked for: no rejoin");
    // The group goes on.
    let (hello, _) = mls_group::encrypt(&alice, &GID, &text("still here")).expect("encrypt");
    import_one(&bot, mls_message(ALICE, 12, hello)).expect("read");
    let updates = bot.store.read(|c| queue::fetch(c, None, 10)).expect("queue");
    assert!(updates.iter().any(|u| u.payload["text"] == "still here"), "{updates:?}");
}

#[test]
fn a_group_message_delivered_twice_is_one_update() {
    let (bot, _fake, alice) = joined();
    let (hello, _) = mls_group::encrypt(&alice, &GID, &text("only once")).expect("encrypt");
    // The same ciphertext again, under another seq and client message id (a replaying platform).
    let first = InboxEnvelope { seq: 30, client_message_id: "a".into(), ..mls_message(ALICE, 7, hello.clone()) };
    let again = InboxEnvelope { seq: 31, client_message_id: "b".into(), ..mls_message(ALICE, 7, hello) };
    assert!(crate::gateway::inbox::import_reported(&bot.ctx(), vec![first, again]).is_some());
    let updates = bot.store.read(|c| queue::fetch(c, None, 10)).expect("queue");
    assert_eq!(updates.iter().filter(|u| u.payload["text"] == "only once").count(), 1, "{updates:?}");
}

const CAROL: u64 = 300;

/// Carol's device joins the bot's group by external commit (a leaf her account vouches for):
/// the commit as the platform delivers it.
fn carol_joins(fake: &FakePlatform) -> InboxEnvelope {
    let carol = member_db(CAROL);
    let (_, joined) = mls_group::join_external(&carol, &current_group_info(fake)).expect("carol joins");
    InboxEnvelope { seq: 20, ..mls_message(CAROL, 0, joined.message) }
}

fn chat_member_updates(bot: &Parts) -> Vec<serde_json::Value> {
    let updates = bot.store.read(|c| queue::fetch(c, None, 100)).expect("queue");
    updates.into_iter().filter(|u| u.kind == "chat_member").map(|u| u.payload).collect()
}

fn alerts(bot: &Parts) -> u64 {
    bot.metrics.security_alerts.load(std::sync::atomic::Ordering::Relaxed)
}

#[test]
fn a_joiner_the_platform_never_announces_becomes_a_chat_member_update_and_an_alert() {
    let (bot, fake, _alice) = joined();
    bot.store.write(|c| queue::store_allowed_updates(c, &["message".into(), "chat_member".into()])).expect("filter");
    let follow = crate::gateway::inbox::import_reported(&bot.ctx(), vec![carol_joins(&fake)]).expect("imported");
    assert!(
        matches!(&follow[..], [FollowUp::JoinersNoted { group, due }] if *group == GID.to_vec() && *due >= unix_now() + joiners::GRACE_SECS - 1),
        "a check of the joiner is owed: {follow:?}"
    );
    // Within the grace the platform's notice may still come: nothing is reported.
    report_unannounced_joiners(&bot.ctx(), unix_now());
    assert!(chat_member_updates(&bot).is_empty());
    assert_eq!(alerts(&bot), 0);

    report_unannounced_joiners(&bot.ctx(), unix_now() + joiners::GRACE_SECS + 1);
    let reported = chat_member_updates(&bot);
    assert_eq!(reported.len(), 1, "{reported:?}");
    assert_eq!(reported[0]["new_chat_member"]["user"]["id"], CAROL as i64);
    assert_eq!(reported[0]["new_chat_member"]["status"], "member");
    assert_eq!(reported[0]["old_chat_member"]["status"], "left");
    assert_eq!(reported[0]["from"]["id"], CAROL as i64, "she let herself in");
    assert_eq!(alerts(&bot), 1);
    let alert = last_alert(&bot).expect("shown in /healthz");
    assert!(alert.contains("user 300 joined") && alert.contains("never announced"), "{alert}");
    // Reported once.
    report_unannounced_joiners(&bot.ctx(), unix_now() + 10 * joiners::GRACE_SECS);
    assert_eq!((chat_member_updates(&bot).len(), alerts(&bot)), (1, 1));
}

#[test]
fn a_joiner_the_platform_announces_is_one_chat_member_update_and_no_alert() {
    let (bot, fake, _alice) = joined();
    bot.store.write(|c| queue::store_allowed_updates(c, &["message".into(), "chat_member".into()])).expect("filter");
    let mut notice = InboxEnvelope { seq: 21, ..membership(CAROL, GroupRole::MEMBER, CAROL) };
    let change = notice.group.as_mut().expect("group").change.as_mut().expect("change");
    change.old = Some(GroupMember { user: change.new.user.clone(), role: GroupRole::INVITED.into(), ..Default::default() }).into();
    assert!(crate::gateway::inbox::import_reported(&bot.ctx(), vec![carol_joins(&fake), notice]).is_some());
    report_unannounced_joiners(&bot.ctx(), unix_now() + joiners::GRACE_SECS + 1);
    let updates = chat_member_updates(&bot);
    assert_eq!(updates.len(), 1, "the platform's notice alone: {updates:?}");
    assert_eq!(updates[0]["new_chat_member"]["user"]["id"], CAROL as i64);
    assert_eq!(alerts(&bot), 0);
}

/// A notice that does not seat the joiner ("left") does not announce them (issue 45, part 4):
/// a silent reader whose leaf is in the tree is still reported and alerted.
#[test]
fn a_left_notice_about_a_silent_joiner_still_alerts() {
    let (bot, fake, _alice) = joined();
    bot.store.write(|c| queue::store_allowed_updates(c, &["message".into(), "chat_member".into()])).expect("filter");
    let notice = InboxEnvelope { seq: 21, ..membership(CAROL, GroupRole::LEFT, CAROL) };
    assert!(crate::gateway::inbox::import_reported(&bot.ctx(), vec![carol_joins(&fake), notice]).is_some());
    report_unannounced_joiners(&bot.ctx(), unix_now() + joiners::GRACE_SECS + 1);
    let seated: Vec<_> = chat_member_updates(&bot).into_iter().filter(|u| u["new_chat_member"]["status"] == "member").collect();
    assert_eq!(seated.len(), 1, "reported from the tree: {seated:?}");
    assert_eq!(seated[0]["new_chat_member"]["user"]["id"], CAROL as i64);
    assert_eq!(alerts(&bot), 1, "a reader the platform says left is still alerted");
}

#[test]
fn an_external_join_keeps_no_past_epoch() {
    let (bot, _fake, alice) = joined();
    let size = |bot: &Parts| {
        let sql = "SELECT length(group_data) FROM openmls_group_data WHERE data_type = 'message_secrets'";
        bot.store.read(|c| Ok(c.query_row(sql, [], |r| r.get::<_, i64>(0))?)).expect("message secrets")
    };
    let (m, _) = mls_group::encrypt(&alice, &GID, &text("x")).expect("encrypt");
    import_one(&bot, mls_message(ALICE, 9, m)).expect("imported");
    let kept = size(&bot);
    bot.store.write(|c| Ok(mls_group::delete_past_epochs(c, &GID)?)).expect("delete past epochs");
    assert_eq!(size(&bot), kept, "there was no past epoch to delete");
}

/// Alice makes two commits; the bot never gets the first, so it cannot process the second and
/// is marked to rejoin. Returns the second (its GroupInfo is the honest one to rejoin from).
fn bot_falls_behind(bot: &Parts, alice: &Connection) -> mls_group::CommitOut {
    let _missed = mls_group::self_update(alice, &GID).expect("first commit");
    mls_group::commit_accepted(alice, &GID).expect("merge");
    let second = mls_group::self_update(alice, &GID).expect("second commit");
    mls_group::commit_accepted(alice, &GID).expect("merge");
    import_one(bot, mls_message(ALICE, 0, second.message.clone())).expect("kept, not dropped");
    assert_eq!(status(bot), Some(Membership::Invited), "marked to rejoin");
    second
}

/// Issue 45, part 2: the bot must rejoin, and the platform serves a tree of its own making
/// under the group's id (a real account's leaf, Mallory's, which signed it). No leaf of the
/// tree the bot verified signed it: no commit is sent, the alert is raised, the bot keeps its
/// verified state, and the honest GroupInfo later rejoins it.
#[test]
fn a_rejoin_from_a_tree_no_verified_leaf_signed_is_refused_and_the_state_kept() {
    let (bot, fake, alice) = joined();
    let before = epoch(&bot);
    let honest = bot_falls_behind(&bot, &alice);
    let commits = fake.calls_of("send_group_message").len();
    let theirs = mls_group::create(&member_db(900), &GID).expect("the platform's own tree");
    fake.answer_once("get_group_info", Ok(GroupInfoResponse { group_info: theirs, ..Default::default() }));
    join_invited(&bot.ctx());
    assert_eq!(fake.calls_of("send_group_message").len(), commits, "no commit sent");
    assert_eq!((status(&bot), epoch(&bot)), (Some(Membership::Invited), before), "the verified state is kept");
    assert_eq!(alerts(&bot), 1);
    let alert = last_alert(&bot).expect("alert");
    assert!(alert.contains("signed by none of the 2 leaves") && alert.contains("not rejoined"), "{alert}");

    fake.answer_once("get_group_info", Ok(GroupInfoResponse { group_info: honest.group_info, ..Default::default() }));
    fake.answer_once("send_group_message", Ok(ok_answer(0)));
    join_invited(&bot.ctx());
    assert_eq!(status(&bot), Some(Membership::Member), "rejoined from the tree Alice signed");
    let kept: i64 = bot.store.read(|c| Ok(c.query_row("SELECT COUNT(*) FROM e2e_verified_trees", [], |r| r.get(0))?)).expect("read");
    assert_eq!(kept, 0, "accepted: the joined state is the reference now");
}

/// A user the bot's verified tree did not hold, found in the tree it rejoins, is a newcomer:
/// reported and alerted unless the platform's member list seats them.
#[test]
fn a_rejoins_newcomer_the_platform_does_not_seat_is_reported() {
    for (role, alerted) in [(GroupRole::MEMBER, 0), (GroupRole::LEFT, 1)] {
        let (bot, fake, alice) = joined();
        bot.store.write(|c| queue::store_allowed_updates(c, &["message".into(), "chat_member".into()])).expect("filter");
        // Alice adds Carol by Welcome; the bot never gets that commit.
        let carol = member_db(CAROL);
        let kps = mls_group::key_packages(&carol, 1).expect("key package");
        let _add = mls_group::add(&alice, &GID, &mls_group::Claimed::of(CAROL, 1, &kps)).expect("add");
        mls_group::commit_accepted(&alice, &GID).expect("merge");
        let update = mls_group::self_update(&alice, &GID).expect("update");
        mls_group::commit_accepted(&alice, &GID).expect("merge");
        import_one(&bot, mls_message(ALICE, 0, update.message.clone())).expect("kept");
        fake.answer_once("get_group_info", Ok(GroupInfoResponse { group_info: update.group_info, ..Default::default() }));
        fake.answer_once("send_group_message", Ok(ok_answer(0)));
        fake.answer_once(
            "get_group",
            Ok(crate::wire::platform::Group { members: vec![member_with(CAROL, role, false)], ..Default::default() }),
        );
        join_invited(&bot.ctx());
        assert_eq!(status(&bot), Some(Membership::Member));
        report_unannounced_joiners(&bot.ctx(), unix_now() + joiners::GRACE_SECS + 1);
        assert_eq!(alerts(&bot), alerted, "{role:?}");
        assert_eq!(chat_member_updates(&bot).len() as u64, alerted, "{role:?}");
    }
}

/// On a first join every member already in the tree is checked against the platform's member
/// list (issue 45, part 2): Carol has a leaf, the platform lists only Alice, so Carol is
/// reported to the bot and alerted; Alice, whom it lists, is not.
#[test]
fn a_first_join_reports_a_member_of_the_tree_the_platform_does_not_list() {
    let (bot, fake) = bot();
    bot.store.write(|c| queue::store_allowed_updates(c, &["message".into(), "chat_member".into()])).expect("filter");
    let alice = member_db(ALICE);
    mls_group::create(&alice, &GID).expect("create");
    let kps = mls_group::key_packages(&member_db(CAROL), 1).expect("key package");
    let add = mls_group::add(&alice, &GID, &mls_group::Claimed::of(CAROL, 1, &kps)).expect("add");
    mls_group::commit_accepted(&alice, &GID).expect("merge");
    fake.answer_once("get_group_info", Ok(GroupInfoResponse { group_info: add.group_info, ..Default::default() }));
    fake.answer_once("send_group_message", Ok(ok_answer(0)));
    let listed = crate::wire::platform::Group { members: vec![member_with(ALICE, GroupRole::OWNER, true)], ..Default::default() };
    fake.answer_once("get_group", Ok(listed));
    import_one(&bot, membership(1, GroupRole::INVITED, ALICE)).expect("invitation imported");
    join_invited(&bot.ctx());
    assert_eq!(status(&bot), Some(Membership::Member));
    report_unannounced_joiners(&bot.ctx(), unix_now() + joiners::GRACE_SECS + 1);
    let reported: Vec<_> = chat_member_updates(&bot).into_iter().map(|u| u["new_chat_member"]["user"]["id"].clone()).collect();
    assert_eq!(reported, vec![serde_json::json!(CAROL)]);
    assert_eq!(alerts(&bot), 1);
}

/// Carol joins the bot's group by external commit, announced, and Alice processes her join;
/// then Alice bans her and the platform never asks anyone to remove her leaf.
fn carol_joined_then_banned(bot: &Parts, fake: &FakePlatform, alice: &Connection) {
    let joins = carol_joins(fake);
    mls_group::receive(alice, &GID, &joins.ciphertext).expect("Alice processes Carol's join");
    let seated = InboxEnvelope { seq: 21, ..membership(CAROL, GroupRole::MEMBER, CAROL) };
    assert!(crate::gateway::inbox::import_reported(&bot.ctx(), vec![joins, seated]).is_some());
    let banned = InboxEnvelope { seq: 22, ..membership(CAROL, GroupRole::BANNED, ALICE) };
    let follow = crate::gateway::inbox::import_reported(&bot.ctx(), vec![banned]).expect("imported");
    // Alice banned her: her removal is Alice's to commit, or the bot's after a grace.
    assert!(matches!(&follow[..], [FollowUp::DepartedNoted { user: CAROL, .. }]), "{follow:?}");
}

fn bot_members(bot: &Parts) -> Vec<mls_group::Device> {
    bot.store.read(|c| Ok(mls_group::members(c, &GID)?)).expect("members")
}

/// Issue 45, part 4: a banned user whose leaf stays gets no further bot post. The bot commits
/// the removal before posting; while the platform refuses it, nothing is posted and the alert
/// is raised; once accepted, the post follows in the epoch without her.
#[test]
fn a_banned_user_whose_leaf_stays_gets_no_further_bot_post() {
    let (bot, fake, alice) = joined();
    carol_joined_then_banned(&bot, &fake, &alice);
    let entry = outbox_text(&bot, "after the ban");
    let before = fake.calls_of("send_group_message").len();
    let refused = SendGroupMessageResponse { status: Status::REJECTED.into(), error: "not now".into(), ..Default::default() };
    fake.answer_once("send_group_message", Ok(refused));
    assert!(matches!(send(&bot.ctx(), &entry), Ok(GroupSend::Later(_))));
    let sent = fake.calls_of("send_group_message");
    assert_eq!(sent.len(), before + 1, "the removal commit only: no post");
    assert!(mls_group::is_commit(&sent[before].request::<SendGroupMessageRequest>().message));
    assert_eq!(alerts(&bot), 1);
    assert!(bot_members(&bot).iter().any(|d| d.0 == CAROL), "refused: her leaf stays in the bot's tree");

    fake.answer_once("send_group_message", Ok(ok_answer(0)));
    fake.answer_once("send_group_message", Ok(ok_answer(50)));
    assert_eq!(send_pending(&bot), 50);
    let sent = fake.calls_of("send_group_message");
    let (removal, post): (SendGroupMessageRequest, SendGroupMessageRequest) = (sent[before + 1].request(), sent[before + 2].request());
    match mls_group::receive(&alice, &GID, &removal.message).expect("Alice processes the removal") {
        mls_group::Received::Commit { removed, .. } => assert_eq!(removed, vec![(CAROL, 1)]),
        other => panic!("expected a commit, got {other:?}"),
    }
    assert!(matches!(mls_group::receive(&alice, &GID, &post.message).expect("Alice reads"), mls_group::Received::Application { .. }));
    assert!(!bot_members(&bot).iter().any(|d| d.0 == CAROL));
}

/// A departed user's leaf the platform has not asked anyone to remove within the grace is
/// removed by the bot itself, with no post to wait for.
#[test]
fn an_overdue_removal_is_committed_by_the_bot() {
    let (bot, fake, alice) = joined();
    carol_joined_then_banned(&bot, &fake, &alice);
    let before = fake.calls_of("send_group_message").len();
    remove_overdue_departed(&bot.ctx(), unix_now());
    assert_eq!(fake.calls_of("send_group_message").len(), before, "within the grace: the platform's turn");
    fake.answer_once("send_group_message", Ok(ok_answer(0)));
    remove_overdue_departed(&bot.ctx(), unix_now() + super::departed::GRACE_SECS + 1);
    assert_eq!(fake.calls_of("send_group_message").len(), before + 1, "the removal");
    assert!(!bot_members(&bot).iter().any(|d| d.0 == CAROL));
    remove_overdue_departed(&bot.ctx(), unix_now() + super::departed::GRACE_SECS + 1);
    assert_eq!(fake.calls_of("send_group_message").len(), before + 1, "nothing left to remove");
}

/// Alice's content `body`, vouched for as message `vouched_id` dated `date`, delivered by the
/// platform as message `id` of that date.
fn vouched(alice: &Connection, body: Body, id: u64, vouched_id: u64, date: i64) -> InboxEnvelope {
    let mut content = Content { body: Some(body), ..Default::default() };
    e2e::vouch::vouch(&mut content, vouched_id, date);
    let (ciphertext, _) = mls_group::encrypt(alice, &GID, &crate::e2e::padding::padded_bytes(&content)).expect("encrypt");
    InboxEnvelope { date, ..mls_message(ALICE, id, ciphertext) }
}

fn group_chat_id(bot: &Parts) -> i64 {
    bot.store.read(|c| group_store::by_group_id(c, &GID)).expect("read").expect("group").chat_id
}

fn in_history(bot: &Parts, message_id: i64) -> bool {
    let chat_id = group_chat_id(bot);
    bot.store.read(move |c| crate::gateway::store::chats::lookup(c, chat_id, message_id)).expect("read").is_some()
}

/// The platform delivers Alice's message under the id of another of hers (so that a reply,
/// an edit or a deletion would land on the wrong one), or redated: the bot refuses it.
#[test]
fn a_message_under_another_id_or_date_than_its_sender_vouched_for_is_refused() {
    let (bot, _fake, alice) = joined();
    let now = unix_now();
    let hello = |s: &str| Body::Text(Text { text: s.into(), ..Default::default() });
    import_one(&bot, vouched(&alice, hello("first"), 7, 7, now)).expect("imported");
    let swapped = import_one(&bot, vouched(&alice, hello("second"), 9, 8, now)).expect_err("swapped");
    assert!(swapped.to_string().contains("its sender sealed it as message 8"), "{swapped}");
    let redated = InboxEnvelope { date: now, ..vouched(&alice, hello("third"), 10, 10, now - 3600) };
    let err = import_one(&bot, redated).expect_err("redated");
    assert!(err.to_string().contains("dated"), "{err}");
    // Once Alice's device vouched, a content without it is a downgrade.
    let (plain, _) = mls_group::encrypt(&alice, &GID, &text("no id")).expect("encrypt");
    let err = import_one(&bot, mls_message(ALICE, 11, plain)).expect_err("downgrade");
    assert!(err.to_string().contains("vouched for its messages before"), "{err}");
    let texts = queued_texts(&bot);
    assert_eq!(texts, ["first"], "only the message that is what it vouches for");
    assert!(in_history(&bot, 7) && !in_history(&bot, 9) && !in_history(&bot, 8));
}

/// The platform's DELETED notice alone keeps the message; the deleter's own MLS `Delete`
/// removes it when the deleter sent it, or when the notice named the deleter.
#[test]
fn a_group_message_leaves_the_history_only_on_a_delete_from_its_sender_or_the_named_deleter() {
    let (bot, _fake, alice) = joined();
    let now = unix_now();
    let mls_at = |id: u64, body: Body| vouched(&alice, body, id, id, now);
    let notice = |deleted: u64, actor: u64| {
        let mut env = membership(0, GroupRole::MEMBER, actor);
        let g = env.group.as_mut().expect("group");
        g.kind = DeliveryKind::DELETED.into();
        g.deleted_message_id = deleted;
        env
    };
    let delete = |id: u64| Body::Delete(crate::wire::e2e::Delete { message_id: id, ..Default::default() });
    import_one(&bot, mls_at(7, Body::Text(Text { text: "mine".into(), ..Default::default() }))).expect("imported");
    import_one(&bot, notice(7, ALICE)).expect("notice");
    assert!(in_history(&bot, 7), "the platform's word alone deletes nothing");
    import_one(&bot, mls_at(8, delete(7))).expect("alice deletes her own");
    assert!(!in_history(&bot, 7));

    // A message of the bot's own, which Alice may delete only when the platform names her.
    let chat_id = group_chat_id(&bot);
    bot.store
        .write(move |c| {
            let entry = crate::gateway::store::chats::HistoryEntry {
                chat_id,
                message_id: 20,
                from_bot: true,
                sender_id: 1,
                date: now,
                content: Content::default(),
                edit_date: 0,
            };
            crate::gateway::store::chats::record(c, &entry)
        })
        .expect("history");
    import_one(&bot, mls_at(9, delete(20))).expect("imported, not applied");
    assert!(in_history(&bot, 20), "not hers, and no notice named her");
    import_one(&bot, notice(20, ALICE)).expect("notice");
    import_one(&bot, mls_at(10, delete(20))).expect("an administrator's deletion");
    assert!(!in_history(&bot, 20));
}

/// The bot's own group message vouches for the id the platform reserved for it.
#[test]
fn the_bots_group_message_vouches_for_its_reserved_id() {
    let (bot, fake, alice) = joined();
    outbox_text(&bot, "hello");
    fake.answer_once("send_group_message", Ok(ok_answer(1000)));
    assert_eq!(send_pending(&bot), 1000);
    let sent: SendGroupMessageRequest = fake.calls_of("send_group_message")[1].request();
    let mls_group::Received::Application { plaintext, sender } = mls_group::receive(&alice, &GID, &sent.message).expect("receive") else {
        panic!("not an application message")
    };
    let content = crate::e2e::padding::parse(&plaintext).expect("content");
    assert_eq!(content.vouched.message_id, 1000);
    let reserved: crate::wire::platform::ReserveMessageIdsRequest = fake.calls_of("reserve_message_ids")[0].request();
    assert_eq!(reserved.reservations[0].client_message_id, "cmid-1");
    e2e::vouch::check(&alice, sender, &content, 1000, content.vouched.date).expect("what alice checks");
}
