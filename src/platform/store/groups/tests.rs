//! The delivery service's rules against the store, with real MLS members (`e2e::group` on
//! in-memory device databases) and no server.

use protobuf::{Enum as _, Message as _};
use rusqlite::Connection;

use super::*;
use crate::e2e::group::Claimed;
use crate::crypto::IdentityKeyPair;
use crate::e2e::{self, group::CommitOut, group::Received, Registration};
use crate::platform::store::tests::{query_plan, store};
use crate::platform::store::group_log::{EveryReader, Listening};
use crate::platform::store::{read_inbox, InboxEntry, NewDevice, Reserved, SignedPrekey};

/// A device with its own e2e state (keys, MLS storage), registered on the store.
struct Dev {
    conn: Connection,
    addr: DeviceAddr,
}

fn new_device_state() -> (Connection, NewDevice, IdentityKeyPair) {
    crate::crypto::init();
    let account = IdentityKeyPair::generate();
    let (conn, device) = device_state_of(&account);
    (conn, device, account)
}

/// A new device of `account`: its e2e state, and what registering it sends.
fn device_state_of(account: &IdentityKeyPair) -> (Connection, NewDevice) {
    let mut conn = Connection::open_in_memory().expect("in-memory db");
    e2e::create_all_tables(&conn).expect("e2e tables");
    mls::migrate_storage(&mut conn).expect("openmls tables");
    let keys = e2e::create_device_keys(&conn, account).expect("device keys");
    let spk = keys.signed_prekey.as_ref().expect("spk");
    let device = NewDevice {
        device_key: keys.device_key.as_slice().try_into().expect("32"),
        certificate: keys.device_certificate.as_slice().try_into().expect("64"),
        signed_prekey: SignedPrekey {
            id: spk.id,
            public_key: spk.public_key.as_slice().try_into().expect("32"),
            signature: spk.signature.as_slice().try_into().expect("64"),
        },
        one_time_prekeys: Vec::new(),
    };
    (conn, device)
}

fn registered(conn: Connection, addr: DeviceAddr) -> Dev {
    e2e::save_registration(&conn, Registration { user_id: addr.user_id, device_id: addr.device_id }).expect("save");
    Dev { conn, addr }
}

fn user(store: &Store, name: &str) -> Dev {
    let (conn, device, account) = new_device_state();
    let addr = store.register_user(name, name, &account.public_key(), &device, &[9; 32], 100).expect("register");
    registered(conn, addr)
}

fn bot(store: &Store, name: &str, capabilities: &str) -> Dev {
    let (conn, device, account) = new_device_state();
    let (id, _) = store.create_bot(name, name, capabilities, &account.public_key(), None, 100).expect("bot");
    let device_id = store.register_bot_device(id, &device, 100).expect("bot device");
    registered(conn, DeviceAddr { user_id: id, device_id })
}

const GID: [u8; 32] = [7; 32];

fn create(store: &Store, owner: &Dev, group_type: pb::GroupType) -> pb::Group {
    let info = e2e::group::create(&owner.conn, &GID).expect("mls create");
    let g = NewGroup {
        group_id: GID.to_vec(),
        title: "Test group".into(),
        group_type,
        parsed_info: parse_group_info(&info).expect("info"),
        group_info: info,
    };
    store.create_group(owner.addr, g, 1000).expect("create group")
}

fn send(store: &Store, from: &Dev, cmid: &str, c: &CommitOut) -> GroupSendOutcome {
    let m = GroupMessage::decode(GID.to_vec(), cmid.into(), c.message.clone(), c.group_info.clone(), c.welcome.clone())
        .expect("decodes");
    store.send_group_message(from.addr, m, 2000, &EveryReader).expect("send").0
}

/// Alice's group with Bob and Carol joined by external commit, everyone caught up.
fn three_in_a_group(store: &Store) -> [Dev; 3] {
    let alice = user(store, "alice");
    let (bob, carol) = (user(store, "bob"), user(store, "carol"));
    create(store, &alice, pb::GroupType::GROUP);
    for (d, cmid) in [(&bob, "jb"), (&carol, "jc")] {
        store.add_group_member(alice.addr, &GID, d.addr.user_id, 1100).expect("invite");
        for member in [&alice, &bob, &carol] {
            catch_up(store, member);
        }
        join_external(store, d, cmid);
    }
    for d in [&alice, &bob, &carol] {
        catch_up(store, d);
    }
    [alice, bob, carol]
}

fn say(store: &Store, from: &Dev, cmid: &str, text: &str) -> GroupSendOutcome {
    let (bytes, _) = e2e::group::encrypt(&from.conn, &GID, text.as_bytes()).expect("encrypt");
    send(store, from, cmid, &CommitOut { message: bytes, ..Default::default() })
}

fn inbox(store: &Store, d: &Dev) -> Vec<InboxEntry> {
    let reader = store.open_reader().expect("reader");
    let entries = read_inbox(&reader, d.addr, 0, 1000).expect("read");
    let seqs: Vec<u64> = entries.iter().map(|e| e.seq).collect();
    store.ack(d.addr, &seqs).expect("ack");
    entries
}

fn kind(e: &InboxEntry) -> DeliveryKind {
    DeliveryKind::from_i32(e.group.as_ref().expect("group delivery").kind).expect("kind")
}

fn change(e: &InboxEntry) -> pb::MembershipChange {
    pb::MembershipChange::parse_from_bytes(e.group.as_ref().and_then(|g| g.change.as_ref()).expect("change"))
        .expect("decodes")
}

fn roles(g: &pb::Group) -> Vec<(u64, Role)> {
    g.members.iter().map(|m| (m.user.user_id, m.role.enum_value_or_default())).collect()
}

/// Processes every MLS delivery in `d`'s inbox in order (Welcomes included); returns what it
/// read, and the other entries' kinds.
fn catch_up(store: &Store, d: &Dev) -> (Vec<Received>, Vec<DeliveryKind>) {
    let (mut got, mut kinds) = (Vec::new(), Vec::new());
    for e in inbox(store, d) {
        kinds.push(kind(&e));
        match kind(&e) {
            DeliveryKind::MLS_MESSAGE => got.push(e2e::group::receive(&d.conn, &GID, &e.ciphertext).expect("process")),
            DeliveryKind::WELCOME => {
                e2e::group::join_welcome(&d.conn, &e.ciphertext).expect("welcome");
            }
            DeliveryKind::MEMBERSHIP | DeliveryKind::TITLE | DeliveryKind::JOIN_REQUEST | DeliveryKind::DELETED => {}
        }
    }
    (got, kinds)
}

fn ok(o: &GroupSendOutcome) -> (u64, u64, u64) {
    match o {
        GroupSendOutcome::Ok { epoch, group_seq, message_id, .. } => (*epoch, *group_seq, *message_id),
        other => panic!("expected OK, got {other:?}"),
    }
}

/// Invite, Welcome-add, external join, messages in one order, idempotency, a stale commit and
/// a stale application message, and the group's seq running through all of it.
#[test]
fn adds_joins_messages_and_epochs() {
    let (_d, store) = store();
    let alice = user(&store, "alice");
    let bob = user(&store, "bob");
    let carol = user(&store, "carol");
    let g = create(&store, &alice, pb::GroupType::GROUP);
    assert_eq!((g.epoch, roles(&g)), (0, vec![(alice.addr.user_id, Role::OWNER)]));
    let again = e2e::group::create(&bob.conn, &GID).expect("mls");
    let dup = NewGroup {
        group_id: GID.to_vec(),
        title: "x".into(),
        group_type: pb::GroupType::GROUP,
        parsed_info: parse_group_info(&again).unwrap(),
        group_info: again,
    };
    assert!(matches!(store.create_group(bob.addr, dup, 1), Err(PlatformError::AlreadyExists(_))));
    // A creator whose group the platform refused forgets it (as `e2e-chat` does).
    e2e::group::forget(&bob.conn, &GID).expect("forget");

    // Bob is invited and told; he is not a member yet.
    let (g, told) = store.add_group_member(alice.addr, &GID, bob.addr.user_id, 1100).expect("invite");
    assert!(told.contains(&bob.addr));
    assert_eq!(roles(&g)[1], (bob.addr.user_id, Role::INVITED));
    let notice = inbox(&store, &bob);
    assert_eq!(notice.len(), 1);
    let c = change(&notice[0]);
    assert_eq!((c.old.role.enum_value_or_default(), c.new.role.enum_value_or_default()), (Role::LEFT, Role::INVITED));
    assert_eq!(c.actor.user_id, alice.addr.user_id);
    assert_eq!(notice[0].group.as_ref().unwrap().title, "Test group");
    assert!(
        matches!(store.get_group(bob.addr.user_id, &GID), Err(PlatformError::NotFound(_))),
        "invited is not a member"
    );
    assert!(store.group_info(carol.addr.user_id, &GID).is_err(), "GroupInfo only for members and invitees");

    // Bob joins by external commit from the platform's GroupInfo.
    let (info, epoch) = store.group_info(bob.addr.user_id, &GID).expect("info");
    assert_eq!(epoch, 0);
    let (_, join) = e2e::group::join_external(&bob.conn, &info).expect("join");
    let joined = send(&store, &bob, "join-1", &join);
    let (epoch, seq_join, _) = ok(&joined);
    assert_eq!(epoch, 1);
    assert_eq!(send(&store, &bob, "join-1", &join), joined, "a repeat answers the first result");
    let (got, kinds) = catch_up(&store, &alice);
    assert_eq!(kinds, vec![DeliveryKind::MEMBERSHIP, DeliveryKind::MLS_MESSAGE, DeliveryKind::MEMBERSHIP]);
    assert!(matches!(got[0], Received::Commit { epoch: 1, .. }));
    assert_eq!(roles(&store.get_group(alice.addr.user_id, &GID).unwrap())[1], (bob.addr.user_id, Role::MEMBER));
    inbox(&store, &bob);

    // Carol is invited and added from a key package: she gets the Welcome.
    let kps = e2e::group::key_packages(&carol.conn, 2).expect("kps");
    assert_eq!(store.upload_key_packages(carol.addr, &kps, 1200).expect("upload"), 2);
    store.add_group_member(bob.addr, &GID, carol.addr.user_id, 1200).expect("a member invites");
    let (claimed, without) = store.claim_key_packages(alice.addr, carol.addr.user_id).expect("claim");
    assert_eq!((claimed.len(), without.len()), (1, 0));
    let add = e2e::group::add(&alice.conn, &GID, &Claimed::of(carol.addr.user_id, claimed[0].0, &[claimed[0].1.clone()])).expect("add");
    let mut no_welcome = add.clone();
    no_welcome.welcome.clear();
    assert!(
        matches!(send(&store, &alice, "add-0", &no_welcome), GroupSendOutcome::Rejected(e) if e.contains("welcome"))
    );
    let (epoch, seq_add, _) = ok(&send(&store, &alice, "add-1", &add));
    assert!(seq_add > seq_join);
    assert_eq!(epoch, 2);
    e2e::group::commit_accepted(&alice.conn, &GID).expect("merge");
    let (_, kinds) = catch_up(&store, &carol);
    assert_eq!(kinds, vec![DeliveryKind::MEMBERSHIP, DeliveryKind::WELCOME, DeliveryKind::MEMBERSHIP]);
    catch_up(&store, &bob);
    inbox(&store, &alice);

    // Messages both ways, one order; ids per group from 1, and Bob's and Carol's joins took
    // the first two (their service messages).
    let (_, s1, id1) = ok(&say(&store, &bob, "m1", "from bob"));
    let (_, s2, id2) = ok(&say(&store, &carol, "m2", "from carol"));
    assert_eq!((id1, id2), (3, 4));
    assert!(s2 > s1);
    let (got, _) = catch_up(&store, &alice);
    let texts: Vec<Vec<u8>> = got
        .into_iter()
        .map(|r| match r {
            Received::Application { plaintext, .. } => plaintext,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(texts, vec![b"from bob".to_vec(), b"from carol".to_vec()]);
    assert_eq!(catch_up(&store, &bob).0.len(), 1, "the sender does not get its own message");
    catch_up(&store, &carol);

    // Two commits for epoch 2: the first wins, the second is STALE and not remembered.
    let dave = user(&store, "dave");
    store.add_group_member(alice.addr, &GID, dave.addr.user_id, 1300).expect("invite dave");
    let kps = e2e::group::key_packages(&dave.conn, 2).expect("kps");
    store.upload_key_packages(dave.addr, &kps, 1300).expect("upload");
    let a = e2e::group::add(&alice.conn, &GID, &Claimed::of(dave.addr.user_id, dave.addr.device_id, &kps[..1])).expect("alice adds");
    let b = e2e::group::add(&bob.conn, &GID, &Claimed::of(dave.addr.user_id, dave.addr.device_id, &kps[1..])).expect("bob adds");
    let stale_app = e2e::group::encrypt(&carol.conn, &GID, b"old epoch").expect("encrypt").0;
    assert_eq!(ok(&send(&store, &alice, "race-a", &a)).0, 3);
    e2e::group::commit_accepted(&alice.conn, &GID).expect("merge");
    assert_eq!(send(&store, &bob, "race-b", &b), GroupSendOutcome::Stale { epoch: 3 });
    assert_eq!(
        send(&store, &carol, "late", &CommitOut { message: stale_app, ..Default::default() }),
        GroupSendOutcome::Stale { epoch: 3 }
    );
    e2e::group::commit_refused(&bob.conn, &GID).expect("discard");
    catch_up(&store, &bob);
    catch_up(&store, &carol);
    catch_up(&store, &dave);
    // Bob's commit, re-derived, is now a repeat of nothing: dave's device has a leaf.
    let again = e2e::group::add(&bob.conn, &GID, &Claimed::of(dave.addr.user_id, dave.addr.device_id, &kps[1..]));
    if let Ok(again) = again {
        assert!(
            matches!(send(&store, &bob, "race-b", &again), GroupSendOutcome::Rejected(e) if e.contains("has a leaf"))
        );
        e2e::group::commit_refused(&bob.conn, &GID).expect("discard");
    }
    for d in [&alice, &bob, &carol, &dave] {
        assert_eq!(e2e::group::epoch(&d.conn, &GID).unwrap(), Some(3), "no fork");
    }
    ok(&say(&store, &dave, "d1", "dave here"));
    for d in [&alice, &bob, &carol] {
        assert!(matches!(&catch_up(&store, d).0[..], [Received::Application { .. }]));
    }
}

/// Adds only of invited users' devices with their registered key; leaving blocks messages
/// until the removal commit, which the leaver receives, and nothing after it.
#[test]
fn membership_rules_and_removals() {
    let (_d, store) = store();
    let alice = user(&store, "alice");
    let bob = user(&store, "bob");
    let eve = user(&store, "eve");
    create(&store, &alice, pb::GroupType::GROUP);

    let kps = e2e::group::key_packages(&eve.conn, 1).expect("kps");
    let sneak = e2e::group::add(&alice.conn, &GID, &Claimed::of(eve.addr.user_id, eve.addr.device_id, &kps)).expect("add");
    assert!(
        matches!(send(&store, &alice, "sneak", &sneak), GroupSendOutcome::Rejected(e) if e.contains("not invited"))
    );
    e2e::group::commit_refused(&alice.conn, &GID).expect("discard");
    // A refused commit changes nothing: the epoch stays, the cmid is free.
    assert_eq!(store.get_group(alice.addr.user_id, &GID).unwrap().epoch, 0);

    // A bot needs the groups capability; one with it may be invited.
    let plain = bot(&store, "plain_bot", "default");
    let err = store.add_group_member(alice.addr, &GID, plain.addr.user_id, 1).unwrap_err();
    assert_eq!(err, PlatformError::FailedPrecondition("bot @plain_bot does not have the groups capability".into()));
    let grouped = bot(&store, "group_bot", "dm,groups");
    store.add_group_member(alice.addr, &GID, grouped.addr.user_id, 1).expect("invite bot");

    store.add_group_member(alice.addr, &GID, bob.addr.user_id, 1).expect("invite bob");
    let (info, _) = store.group_info(bob.addr.user_id, &GID).unwrap();
    let (_, join) = e2e::group::join_external(&bob.conn, &info).unwrap();
    ok(&send(&store, &bob, "j", &join));
    catch_up(&store, &alice);
    assert!(matches!(
        store.add_group_member(bob.addr, &GID, alice.addr.user_id, 1),
        Err(PlatformError::AlreadyExists(e)) if e.contains("@alice")
    ));
    assert!(matches!(
        store.remove_group_member(bob.addr, &GID, alice.addr.user_id, 0, 1),
        Err(PlatformError::PermissionDenied(e)) if e.contains("can_restrict_members")
    ));
    assert!(
        matches!(store.leave_group(alice.addr, &GID, 1), Err(PlatformError::FailedPrecondition(e)) if e.contains("owner"))
    );

    // Restricted: reads, may not write.
    set_member(&store.lock(), &GID, bob.addr.user_id, &MemberRow::new(Role::RESTRICTED, 1))
        .unwrap();
    assert!(matches!(say(&store, &bob, "r", "hi"), GroupSendOutcome::Rejected(e) if e.contains("restricted")));
    set_member(&store.lock(), &GID, bob.addr.user_id, &MemberRow::new(Role::MEMBER, 1)).unwrap();

    // Bob leaves: messages wait for the removal of his leaf.
    inbox(&store, &bob);
    let (g, _) = store.leave_group(bob.addr, &GID, 3000).expect("leave");
    assert!(roles(&g).contains(&(bob.addr.user_id, Role::LEFT)));
    assert_eq!(say(&store, &alice, "blocked", "hello?"), GroupSendOutcome::RemovalsPending { users: vec![bob.addr.user_id], devices: vec![] });
    // Removing a member who did not leave is refused.
    let carol = user(&store, "carol");
    store.add_group_member(alice.addr, &GID, carol.addr.user_id, 1).unwrap();
    let (info, _) = store.group_info(carol.addr.user_id, &GID).unwrap();
    let (_, join) = e2e::group::join_external(&carol.conn, &info).unwrap();
    ok(&send(&store, &carol, "cj", &join));
    catch_up(&store, &alice);
    let wrong = e2e::group::remove_users(&alice.conn, &GID, &[carol.addr.user_id]).unwrap().expect("leaf");
    assert!(
        matches!(send(&store, &alice, "rm-carol", &wrong), GroupSendOutcome::Rejected(e) if e.contains("is a member"))
    );
    e2e::group::commit_refused(&alice.conn, &GID).unwrap();

    let removal = e2e::group::remove_users(&alice.conn, &GID, &[bob.addr.user_id]).unwrap().expect("leaf");
    ok(&send(&store, &alice, "rm-bob", &removal));
    e2e::group::commit_accepted(&alice.conn, &GID).unwrap();
    let (got, _) = catch_up(&store, &bob);
    assert!(got.iter().any(|r| matches!(r, Received::Commit { removed_me: true, .. })), "{got:?}");
    catch_up(&store, &carol);
    ok(&say(&store, &alice, "after", "bob cannot read this"));
    assert!(inbox(&store, &bob).is_empty(), "nothing after the removing commit");
    assert_eq!(catch_up(&store, &carol).0.len(), 1);
    assert!(store.prune_sent_records(i64::MAX).expect("prune") >= 4, "group records are pruned with the others");
}

/// A group's only leaf must be the caller's device, with its registered key.
#[test]
fn create_checks_the_leaf_and_key_packages_are_claimed_once() {
    let (_d, store) = store();
    let alice = user(&store, "alice");
    let bob = user(&store, "bob");
    let info = e2e::group::create(&alice.conn, &GID).expect("mls");
    let g = NewGroup {
        group_id: GID.to_vec(),
        title: "t".into(),
        group_type: pb::GroupType::GROUP,
        parsed_info: parse_group_info(&info).unwrap(),
        group_info: info.clone(),
    };
    assert!(
        matches!(store.create_group(bob.addr, g, 1), Err(PlatformError::InvalidArgument(e)) if e.contains("not the caller"))
    );
    let wrong_id = NewGroup {
        group_id: vec![8; 32],
        title: "t".into(),
        group_type: pb::GroupType::GROUP,
        parsed_info: parse_group_info(&info).unwrap(),
        group_info: info,
    };
    assert!(matches!(store.create_group(alice.addr, wrong_id, 1), Err(PlatformError::InvalidArgument(_))));
    assert!(store.list_groups(alice.addr.user_id).unwrap().is_empty(), "a refused creation leaves nothing");

    let kps = e2e::group::key_packages(&bob.conn, 3).unwrap();
    store.upload_key_packages(bob.addr, &kps, 1).unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let (taken, without) = store.claim_key_packages(alice.addr, bob.addr.user_id).unwrap();
        assert!(without.is_empty());
        seen.push(taken[0].1.clone());
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 3, "each key package handed out once");
    assert_eq!(store.claim_key_packages(alice.addr, bob.addr.user_id).unwrap(), (vec![], vec![bob.addr.device_id]));
    assert!(matches!(store.claim_key_packages(alice.addr, 424242), Err(PlatformError::NotFound(_))));
}

/// An expired key package is never handed out (the adder could not use it) and is deleted;
/// the count an upload answers holds only valid ones.
#[test]
fn expired_key_packages_are_not_handed_out() {
    let (_d, store) = store();
    let alice = user(&store, "alice");
    let bob = user(&store, "bob");
    let now = crate::clock::unix_now();
    let long = e2e::group::key_packages(&bob.conn, 1).unwrap();
    let short = e2e::group::key_packages_lasting(&bob.conn, 2, 60).unwrap();
    store.upload_key_packages(bob.addr, &long, now).unwrap();
    // The newest are handed out first: the short-lived ones, while they are valid.
    assert_eq!(store.upload_key_packages(bob.addr, &short, now).unwrap(), 3);
    let (taken, _) = store.claim_key_packages_at(alice.addr, bob.addr.user_id, now).unwrap();
    assert_eq!(taken[0].1, short[1]);

    // Two minutes later the other short one has expired: the long-lived one comes instead.
    let later = now + 120;
    let (taken, without) = store.claim_key_packages_at(alice.addr, bob.addr.user_id, later).unwrap();
    assert!(without.is_empty());
    assert_eq!(taken[0].1, long[0], "the expired key package was skipped");
    let (taken, without) = store.claim_key_packages_at(alice.addr, bob.addr.user_id, later).unwrap();
    assert_eq!((taken, without), (vec![], vec![bob.addr.device_id]), "and it is gone, not kept for later");
    let n: i64 = store.lock().query_row("SELECT count(*) FROM key_packages", [], |r| r.get(0)).expect("count");
    assert_eq!(n, 0);

    // An upload counts only what is still valid.
    let again = e2e::group::key_packages_lasting(&bob.conn, 1, 60).unwrap();
    store.upload_key_packages(bob.addr, &again, now).unwrap();
    assert_eq!(store.upload_key_packages(bob.addr, &[], later).unwrap(), 0, "the expired one was dropped");
}

/// `d` joins by an external commit from the platform's GroupInfo; the owner catches up.
fn join_external(store: &Store, d: &Dev, cmid: &str) {
    let (info, _) = store.group_info(d.addr.user_id, &GID).expect("info");
    let (_, join) = e2e::group::join_external(&d.conn, &info).expect("join");
    ok(&send(store, d, cmid, &join));
}

fn role_of(store: &Store, owner: &Dev, user: &Dev) -> Role {
    let g = store.get_group(owner.addr.user_id, &GID).expect("group");
    roles(&g).into_iter().find(|(u, _)| *u == user.addr.user_id).map(|(_, r)| r).unwrap_or(Role::LEFT)
}

#[test]
fn promotions_restrictions_bans_and_deletions() {
    let (_d, store) = store();
    let alice = user(&store, "alice");
    let bob = user(&store, "bob");
    let carol = user(&store, "carol");
    create(&store, &alice, pb::GroupType::GROUP);
    for (d, cmid) in [(&bob, "jb"), (&carol, "jc")] {
        store.add_group_member(alice.addr, &GID, d.addr.user_id, 1100).expect("invite");
        join_external(&store, d, cmid);
        catch_up(&store, &alice);
    }
    catch_up(&store, &bob);
    catch_up(&store, &carol);

    // Bob is promoted with restrict + promote; he cannot grant what he lacks.
    let denied = |r: Result<(pb::Group, BTreeSet<DeviceAddr>)>| matches!(r, Err(PlatformError::PermissionDenied(_)));
    assert!(denied(store.promote_group_member(bob.addr, &GID, carol.addr.user_id, CAN_RESTRICT, 1200)), "a member");
    store.promote_group_member(alice.addr, &GID, bob.addr.user_id, CAN_RESTRICT | CAN_PROMOTE, 1200).expect("promote");
    assert_eq!(role_of(&store, &alice, &bob), Role::ADMINISTRATOR);
    assert!(denied(store.promote_group_member(bob.addr, &GID, carol.addr.user_id, CAN_DELETE, 1200)), "not his right");
    assert!(denied(store.promote_group_member(bob.addr, &GID, alice.addr.user_id, CAN_RESTRICT, 1200)), "the owner");

    // Carol is restricted until 5000: her message is refused, and accepted after it ends.
    let (_, told) = store.restrict_group_member(bob.addr, &GID, carol.addr.user_id, false, 5000, 1300).expect("restrict");
    assert!(told.contains(&carol.addr));
    let c = inbox(&store, &carol).iter().filter(|e| kind(e) == DeliveryKind::MEMBERSHIP).map(change).next_back().expect("told");
    assert_eq!((c.new.role.enum_value_or_default(), c.new.until_date), (Role::RESTRICTED, 5000));
    catch_up(&store, &alice);
    catch_up(&store, &bob);
    let (bytes, _) = e2e::group::encrypt(&carol.conn, &GID, b"hi").expect("encrypt");
    let m = GroupMessage::decode(GID.to_vec(), "c1".into(), bytes, Vec::new(), Vec::new()).expect("decodes");
    let refused = store.send_group_message(carol.addr, m, 2000, &EveryReader).expect("send").0;
    assert!(matches!(refused, GroupSendOutcome::Rejected(ref e) if e.contains("restricted")), "{refused:?}");
    let (bytes, _) = e2e::group::encrypt(&carol.conn, &GID, b"later").expect("encrypt");
    let m = GroupMessage::decode(GID.to_vec(), "c2".into(), bytes, Vec::new(), Vec::new()).expect("decodes");
    let (_, _, carol_msg) = ok(&store.send_group_message(carol.addr, m, 6000, &EveryReader).expect("send").0);

    // Deletions: Bob (no delete right) may not delete Carol's message; Alice may; twice is NOT_FOUND.
    assert!(matches!(
        store.delete_group_message(bob.addr, &GID, carol_msg, 6100),
        Err(PlatformError::PermissionDenied(_))
    ));
    let told = store.delete_group_message(alice.addr, &GID, carol_msg, 6100).expect("owner deletes");
    assert!(told.contains(&carol.addr) && told.contains(&bob.addr));
    let deleted = inbox(&store, &bob).into_iter().find(|e| kind(e) == DeliveryKind::DELETED).expect("DELETED");
    assert_eq!(deleted.message_id, carol_msg);
    assert!(matches!(store.delete_group_message(alice.addr, &GID, carol_msg, 6100), Err(PlatformError::NotFound(_))));

    // Bob bans Carol until 9000; her link join is refused until unbanned.
    store.remove_group_member(bob.addr, &GID, carol.addr.user_id, 9000, 6200).expect("ban");
    assert_eq!(role_of(&store, &alice, &carol), Role::BANNED);
    let link = store.export_invite_link(alice.addr, &GID, 6200).expect("export").link;
    assert!(matches!(store.join_by_link(carol.addr, &link, 6300), Err(PlatformError::FailedPrecondition(e)) if e.contains("banned")));
    let (g, _) = store.unban_group_member(bob.addr, &GID, carol.addr.user_id, true, 6300).expect("unban");
    assert_eq!(roles(&g).iter().find(|(u, _)| *u == carol.addr.user_id).map(|(_, r)| *r), Some(Role::LEFT));
    let (answer, _) = store.join_by_link(carol.addr, &link, 6400).expect("joins by link");
    assert_eq!(answer.status.enum_value_or_default(), pb::join_by_link_response::Status::INVITED);
    // only_if_banned leaves a member alone; without it, a member is removed.
    let (g, told) = store.unban_group_member(bob.addr, &GID, alice.addr.user_id, true, 6400).expect("no-op");
    assert!(told.is_empty());
    assert_eq!(roles(&g)[0].1, Role::OWNER);
}

#[test]
fn invite_links_and_join_requests() {
    let (_d, store) = store();
    let alice = user(&store, "alice");
    let bob = user(&store, "bob");
    let carol = user(&store, "carol");
    let dave = user(&store, "dave");
    let no_channels = bot(&store, "grp_bot", "dm,groups");
    create(&store, &alice, pb::GroupType::CHANNEL);
    let invalid = |r: Result<pb::InviteLink>| matches!(r, Err(PlatformError::InvalidArgument(_)));
    let s = |name: &str, expire_date, member_limit, creates_join_request| LinkSettings {
        name: name.into(),
        expire_date,
        member_limit,
        creates_join_request,
    };
    assert!(invalid(store.create_invite_link(alice.addr, &GID, &s(&"x".repeat(33), 0, 0, false), 1000)));
    assert!(invalid(store.create_invite_link(alice.addr, &GID, &s("", 999, 0, false), 1000)), "expired at birth");
    assert!(invalid(store.create_invite_link(alice.addr, &GID, &s("", 0, 3, true), 1000)), "exclusive");
    assert!(matches!(
        store.create_invite_link(bob.addr, &GID, &s("", 0, 0, false), 1000),
        Err(PlatformError::NotFound(_))
    ));

    // A link for one member: Bob joins by it (INVITED, then MEMBER carrying the link); Carol finds it full.
    let one = store.create_invite_link(alice.addr, &GID, &s("one", 0, 1, false), 1000).expect("create");
    assert!(one.link.starts_with(LINK_PREFIX) && one.link.len() == LINK_PREFIX.len() + 22, "{}", one.link);
    assert_eq!((one.name.as_str(), one.member_limit, one.is_primary), ("one", 1, false));
    let (answer, told) = store.join_by_link(bob.addr, &one.link, 1100).expect("join");
    assert!(told.contains(&alice.addr));
    assert_eq!(answer.type_.enum_value_or_default(), pb::GroupType::CHANNEL);
    join_external(&store, &bob, "jb");
    let changes: Vec<_> = inbox(&store, &alice).iter().filter(|e| kind(e) == DeliveryKind::MEMBERSHIP).map(change).collect();
    assert_eq!(changes.len(), 2);
    assert_eq!(changes[1].new.role.enum_value_or_default(), Role::MEMBER);
    assert_eq!(changes[1].invite_link.link, one.link, "the join names the link");
    assert!(matches!(store.join_by_link(carol.addr, &one.link, 1200), Err(PlatformError::FailedPrecondition(e)) if e.contains("limit")));
    assert!(matches!(store.join_by_link(bob.addr, &one.link, 1200), Err(PlatformError::AlreadyExists(_)) | Err(PlatformError::FailedPrecondition(_))));

    // Expired, revoked, unknown; a bot without `channels`.
    let soon = store.create_invite_link(alice.addr, &GID, &s("", 1300, 0, false), 1200).expect("create");
    assert!(matches!(store.join_by_link(carol.addr, &soon.link, 1300), Err(PlatformError::FailedPrecondition(e)) if e.contains("expired")));
    let revoked = store.revoke_invite_link(alice.addr, &GID, &soon.link, 1200).expect("revoke");
    assert!(revoked.is_revoked);
    assert!(matches!(store.join_by_link(carol.addr, &soon.link, 1250), Err(PlatformError::FailedPrecondition(e)) if e.contains("revoked")));
    assert!(matches!(store.join_by_link(carol.addr, "e2e://join/nope", 1250), Err(PlatformError::NotFound(_))));
    let open = store.export_invite_link(alice.addr, &GID, 1250).expect("export");
    assert!(open.is_primary);
    assert!(matches!(store.join_by_link(no_channels.addr, &open.link, 1250), Err(PlatformError::FailedPrecondition(e)) if e.contains("channels")));
    let again = store.export_invite_link(alice.addr, &GID, 1260).expect("export again");
    assert!(matches!(store.join_by_link(carol.addr, &open.link, 1260), Err(PlatformError::FailedPrecondition(e)) if e.contains("revoked")), "the old primary is revoked");
    assert!(again.is_primary);

    // Join requests: the owner is told; approved (Carol joins by commit), declined (Dave is told).
    let ask = store.create_invite_link(alice.addr, &GID, &s("ask", 0, 0, true), 1300).expect("create");
    for d in [&carol, &dave] {
        let (answer, told) = store.join_by_link(d.addr, &ask.link, 1400).expect("ask");
        assert_eq!(answer.status.enum_value_or_default(), pb::join_by_link_response::Status::REQUESTED);
        assert!(told.contains(&alice.addr) && !told.contains(&bob.addr), "the owner only");
        assert!(store.join_by_link(d.addr, &ask.link, 1401).expect("again").1.is_empty(), "one request per user");
    }
    let requests: Vec<_> = inbox(&store, &alice).into_iter().filter(|e| kind(e) == DeliveryKind::JOIN_REQUEST).collect();
    assert_eq!(requests.len(), 2);
    let r = pb::JoinRequest::parse_from_bytes(requests[0].group.as_ref().unwrap().change.as_ref().unwrap()).unwrap();
    assert_eq!((r.user.user_id, r.invite_link.link.as_str()), (carol.addr.user_id, ask.link.as_str()));
    assert_eq!(store.revoke_invite_link(alice.addr, &GID, &ask.link, 1400).map(|l| l.pending_join_request_count).ok(), Some(2));
    assert!(matches!(store.decide_join_request(bob.addr, &GID, carol.addr.user_id, true, 1500), Err(PlatformError::PermissionDenied(_))));
    store.decide_join_request(alice.addr, &GID, carol.addr.user_id, true, 1500).expect("approve");
    join_external(&store, &carol, "jc");
    let joined = inbox(&store, &alice).iter().filter(|e| kind(e) == DeliveryKind::MEMBERSHIP).map(change).next_back().expect("joined");
    assert_eq!((joined.new.role.enum_value_or_default(), joined.via_join_request), (Role::MEMBER, true));
    let (_, told) = store.decide_join_request(alice.addr, &GID, dave.addr.user_id, false, 1600).expect("decline");
    assert!(told.contains(&dave.addr) && !told.contains(&carol.addr));
    let outcome = inbox(&store, &dave).into_iter().find(|e| kind(e) == DeliveryKind::JOIN_REQUEST).expect("told");
    let r = pb::JoinRequest::parse_from_bytes(outcome.group.as_ref().unwrap().change.as_ref().unwrap()).unwrap();
    assert_eq!(r.outcome.enum_value_or_default(), pb::join_request::Outcome::DECLINED);
    assert_eq!(role_of(&store, &alice, &dave), Role::LEFT);
    assert!(matches!(store.decide_join_request(alice.addr, &GID, dave.addr.user_id, true, 1700), Err(PlatformError::NotFound(_))));
}

/// The MEMBERSHIP changes in `d`'s inbox as (user, new role, actor); its MLS messages are
/// processed on the way, as `catch_up` does.
fn member_changes(store: &Store, d: &Dev) -> Vec<(u64, Role, u64)> {
    let mut changes = Vec::new();
    for e in inbox(store, d) {
        match kind(&e) {
            DeliveryKind::MLS_MESSAGE => {
                e2e::group::receive(&d.conn, &GID, &e.ciphertext).expect("process");
            }
            DeliveryKind::MEMBERSHIP => {
                let c = change(&e);
                changes.push((c.new.user.user_id, c.new.role.enum_value_or_default(), c.actor.user_id));
            }
            _ => {}
        }
    }
    changes
}

/// A join (INVITED → MEMBER, made by the joiner's own commit) names who let the user in, as
/// the Bot API's `from`: the member who added them (external join or Welcome), the user
/// themself by link, the administrator who approved their request. Bans and promotions name
/// the administrator.
#[test]
fn a_join_names_who_let_the_user_in() {
    let (_d, store) = store();
    let alice = user(&store, "alice");
    let bob = user(&store, "bob");
    let carol = user(&store, "carol");
    let dave = user(&store, "dave");
    let erin = user(&store, "erin");
    create(&store, &alice, pb::GroupType::GROUP);

    // Alice adds Bob; Bob joins by his own external commit: the join names Alice.
    store.add_group_member(alice.addr, &GID, bob.addr.user_id, 1100).expect("invite");
    join_external(&store, &bob, "jb");
    let (a, b) = (alice.addr.user_id, bob.addr.user_id);
    assert_eq!(member_changes(&store, &alice), vec![(b, Role::INVITED, a), (b, Role::MEMBER, a)]);
    catch_up(&store, &bob);

    // Bob (a member) adds Erin; Alice commits her key package (the Welcome path): Bob let her in.
    let kps = e2e::group::key_packages(&erin.conn, 1).expect("kps");
    store.upload_key_packages(erin.addr, &kps, 1200).expect("upload");
    store.add_group_member(bob.addr, &GID, erin.addr.user_id, 1200).expect("bob invites");
    let add = e2e::group::add(&alice.conn, &GID, &Claimed::of(erin.addr.user_id, erin.addr.device_id, &kps)).expect("add");
    ok(&send(&store, &alice, "add-erin", &add));
    e2e::group::commit_accepted(&alice.conn, &GID).expect("merge");
    let e = erin.addr.user_id;
    assert_eq!(member_changes(&store, &alice), vec![(e, Role::INVITED, b), (e, Role::MEMBER, b)]);
    catch_up(&store, &bob);
    catch_up(&store, &erin);

    // Carol joins by a link: she let herself in.
    let link = store.export_invite_link(alice.addr, &GID, 1300).expect("link").link;
    store.join_by_link(carol.addr, &link, 1300).expect("join by link");
    join_external(&store, &carol, "jc");
    let c = carol.addr.user_id;
    assert_eq!(member_changes(&store, &alice), vec![(c, Role::INVITED, c), (c, Role::MEMBER, c)]);
    catch_up(&store, &bob);
    catch_up(&store, &erin);
    catch_up(&store, &carol);

    // Bob, promoted to invite, approves Dave's request: the join names Bob, not the owner.
    store.promote_group_member(alice.addr, &GID, b, CAN_INVITE | CAN_RESTRICT, 1400).expect("promote");
    assert_eq!(member_changes(&store, &alice), vec![(b, Role::ADMINISTRATOR, a)], "a promotion names the promoter");
    let ask = LinkSettings { creates_join_request: true, ..LinkSettings::default() };
    let ask = store.create_invite_link(alice.addr, &GID, &ask, 1400).expect("ask link").link;
    store.join_by_link(dave.addr, &ask, 1400).expect("ask");
    store.decide_join_request(bob.addr, &GID, dave.addr.user_id, true, 1500).expect("approve");
    join_external(&store, &dave, "jd");
    let d = dave.addr.user_id;
    assert_eq!(member_changes(&store, &alice), vec![(d, Role::INVITED, b), (d, Role::MEMBER, b)]);

    // Bob bans Carol: the ban names Bob. A later rejoin forgets who invited her before.
    store.remove_group_member(bob.addr, &GID, c, 0, 1600).expect("ban");
    assert_eq!(member_changes(&store, &alice), vec![(c, Role::BANNED, b)]);
    assert_eq!(admin::invited_by(&store.open_reader().expect("reader"), &GID, c).expect("read"), None);
}

/// In a channel only its staff hear of joins and departures: the owner, administrators, bots
/// and the user concerned. A subscriber hears of its own changes only, so a join into a channel
/// of thousands is not a notice per subscriber (issue 48).
#[test]
fn only_a_channels_staff_and_bots_hear_of_its_members() {
    let (_d, store) = store();
    let alice = user(&store, "alice");
    let bob = user(&store, "bob");
    let carol = user(&store, "carol");
    let helper = bot(&store, "helper_bot", "channels");
    create(&store, &alice, pb::GroupType::CHANNEL);
    let (a, b, c) = (alice.addr.user_id, bob.addr.user_id, carol.addr.user_id);
    for (d, cmid) in [(&bob, "jb"), (&helper, "jh")] {
        store.add_group_member(alice.addr, &GID, d.addr.user_id, 1100).expect("invite");
        join_external(&store, d, cmid);
        for member in [&alice, &bob, &helper] {
            if e2e::group::epoch(&member.conn, &GID).expect("epoch").is_some() {
                catch_up(&store, member);
            }
        }
    }
    // Carol subscribes: the owner and the bot hear of it, Bob (a subscriber) does not.
    store.add_group_member(alice.addr, &GID, c, 1200).expect("invite carol");
    join_external(&store, &carol, "jc");
    assert_eq!(member_changes(&store, &alice), vec![(c, Role::INVITED, a), (c, Role::MEMBER, a)]);
    assert_eq!(member_changes(&store, &helper), vec![(c, Role::INVITED, a), (c, Role::MEMBER, a)]);
    assert_eq!(member_changes(&store, &bob), vec![], "a subscriber does not see another come");
    // Bob, promoted, is staff: he hears of Carol's ban, and she of her own.
    store.promote_group_member(alice.addr, &GID, b, CAN_RESTRICT, 1300).expect("promote");
    assert_eq!(member_changes(&store, &bob), vec![(b, Role::ADMINISTRATOR, a)], "his own change");
    catch_up(&store, &carol);
    store.remove_group_member(alice.addr, &GID, c, 0, 1400).expect("ban");
    assert_eq!(member_changes(&store, &bob), vec![(c, Role::BANNED, a)]);
    assert_eq!(member_changes(&store, &helper), vec![(b, Role::ADMINISTRATOR, a), (c, Role::BANNED, a)]);
    assert_eq!(member_changes(&store, &carol), vec![(c, Role::BANNED, a)]);
    // A question about a few members answers with their rows only, in the list's order; the
    // answer to an action names the caller and the user concerned.
    let some = store.get_group_with(b, &GID, Some(&[c, 999, a])).expect("some members");
    assert_eq!(roles(&some), vec![(a, Role::OWNER), (c, Role::BANNED)]);
    assert!(store.get_group_with(b, &GID, Some(&[])).expect("no members").members.is_empty());
    assert_eq!(store.get_group(b, &GID).expect("all").members.len(), 4);
    let (told, _) = store.unban_group_member(bob.addr, &GID, c, true, 1500).expect("unban");
    assert_eq!(roles(&told), vec![(b, Role::ADMINISTRATOR), (c, Role::LEFT)]);
}

/// Alice's group, Bob invited to it, and the GroupInfo he may join by.
fn bob_invited() -> (tempfile::TempDir, Store, Dev, Vec<u8>) {
    let (d, store) = store();
    let alice = user(&store, "alice");
    let bob = user(&store, "bob");
    create(&store, &alice, pb::GroupType::GROUP);
    store.add_group_member(alice.addr, &GID, bob.addr.user_id, 1100).expect("invite");
    let (info, _) = store.group_info(bob.addr.user_id, &GID).expect("info");
    (d, store, bob, info)
}

/// An invited device's external commit whose leaf carries its registered key but no proof by
/// the user's identity key (none at all, or another account's) is refused; with it, accepted.
#[test]
fn a_leaf_must_carry_the_proof_of_the_users_identity_key() {
    use crate::crypto::mls::{DeviceSigner, LeafProof};
    use crate::e2e::group::forge::{external_commit_as, leaf_as};
    let (_d, store, bob, info) = bob_invited();
    let signer = DeviceSigner(e2e::device_key(&bob.conn).expect("bob's device key"));
    let (user, device) = (bob.addr.user_id, bob.addr.device_id);
    let other = IdentityKeyPair::generate();
    let by_other = LeafProof {
        identity_key: other.public_key(),
        certificate: crate::crypto::identity::sign_device_certificate(&other, &signer.0.public_key()),
        created_at: None,
    };
    for (what, leaf) in [("no proof", leaf_as(user, device, None, &signer)), ("another account's proof", leaf_as(user, device, Some(by_other), &signer))] {
        let message = external_commit_as(&info, &signer, leaf);
        let m = GroupMessage::decode(GID.to_vec(), format!("forged-{what}"), message, info.clone(), Vec::new()).expect("decodes");
        match store.send_group_message(bob.addr, m, 2000, &EveryReader).expect("send").0 {
            GroupSendOutcome::Rejected(e) => assert!(e.contains("carries no proof by that user's identity key"), "{what}: {e}"),
            other => panic!("{what}: expected a refusal, got {other:?}"),
        }
    }
    join_external(&store, &bob, "honest");
}

/// A commit whose GroupInfo does not verify under the committer's key is refused, and the
/// group stays at its epoch; the same commit with its own GroupInfo is taken.
#[test]
fn a_group_info_the_committer_did_not_sign_is_refused() {
    let (_d, store, bob, info) = bob_invited();
    let (_, join) = e2e::group::join_external(&bob.conn, &info).expect("join");
    let mut broken = join.clone();
    *broken.group_info.last_mut().expect("a signature") ^= 1;
    match send(&store, &bob, "join-broken", &broken) {
        GroupSendOutcome::Rejected(e) => assert!(e.contains("group_info is not signed by the commit's sender"), "{e}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(store.group_info(bob.addr.user_id, &GID).expect("info").1, 0, "still at epoch 0");
    assert_eq!(ok(&send(&store, &bob, "join", &join)).0, 1);
}

/// A removed device of a user who stays keeps its leaf until a member commits its removal:
/// nobody sends before that (REMOVALS_PENDING names the device), nothing is delivered to it,
/// and its stored state reads nothing sent after.
#[test]
fn a_removed_device_loses_its_leaf_before_anyone_sends_and_reads_nothing_after() {
    let (_d, store) = store();
    let alice = user(&store, "alice");
    let (conn, device, account) = new_device_state();
    let (bot_id, _) = store.create_bot("two_bot", "two_bot", "groups", &account.public_key(), None, 100).expect("bot");
    let first = store.register_bot_device(bot_id, &device, 100).expect("device");
    let kept = registered(conn, DeviceAddr { user_id: bot_id, device_id: first });
    let (conn, device) = device_state_of(&account);
    let second = store.register_bot_device(bot_id, &device, 100).expect("second device");
    let stolen = registered(conn, DeviceAddr { user_id: bot_id, device_id: second });
    create(&store, &alice, pb::GroupType::GROUP);
    store.add_group_member(alice.addr, &GID, bot_id, 1100).expect("invite");
    inbox(&store, &stolen);
    join_external(&store, &kept, "kept");
    join_external(&store, &stolen, "stolen");
    catch_up(&store, &alice);
    catch_up(&store, &kept);
    ok(&say(&store, &alice, "before", "before"));
    catch_up(&store, &kept);
    catch_up(&store, &stolen);

    store.remove_device(stolen.addr, 3000).expect("removed");
    let pending = say(&store, &alice, "blocked", "after?");
    assert_eq!(pending, GroupSendOutcome::RemovalsPending { users: vec![], devices: vec![stolen.addr] });
    let removal = e2e::group::remove_leaves(&alice.conn, &GID, &[], &[(bot_id, second)]).expect("remove").expect("a leaf");
    ok(&send(&store, &alice, "remove-stolen", &removal));
    e2e::group::commit_accepted(&alice.conn, &GID).expect("merge");
    let (got, _) = catch_up(&store, &kept);
    assert!(matches!(&got[..], [Received::Commit { removed, .. }] if removed == &vec![(bot_id, second)]), "{got:?}");

    let (secret, _) = e2e::group::encrypt(&alice.conn, &GID, b"after the removal").expect("encrypt");
    ok(&send(&store, &alice, "after", &CommitOut { message: secret.clone(), ..Default::default() }));
    assert!(inbox(&store, &stolen).is_empty(), "nothing is delivered to the removed device");
    assert!(e2e::group::receive(&stolen.conn, &GID, &removal.message).is_ok(), "it may still read its own removal");
    assert!(e2e::group::receive(&stolen.conn, &GID, &secret).is_err(), "its stored state cannot read what follows");
    let (got, _) = catch_up(&store, &kept);
    assert!(matches!(&got[..], [Received::Application { plaintext, .. }] if plaintext == b"after the removal"));
}

/// A GroupInfo with the right context and a valid signature by the committer, but another
/// ratchet tree than the one its commit makes (a member's poisoned GroupInfo) is refused: a
/// joiner would trust that tree.
#[test]
fn a_group_info_whose_tree_is_not_the_commits_is_refused() {
    use openmls::prelude::tls_codec::{Serialize as _, VLBytes};
    use openmls::prelude::{Extension, Extensions, GroupId, MlsMessageBodyIn, RatchetTreeExtension};
    let (_d, store, bob, info) = bob_invited();
    // The tree of epoch 0 (Alice's leaf alone), not the one Bob's join makes.
    let MlsMessageBodyIn::GroupInfo(first) = mls::parse_message(&info).expect("info").extract() else { panic!("info") };
    let provider = crate::crypto::mls::MlsProvider::new(&bob.conn);
    let tree = first
        .extensions()
        .ratchet_tree()
        .expect("a tree")
        .ratchet_tree()
        .clone()
        .into_verified(mls::CIPHERSUITE, provider.crypto(), &GroupId::from_slice(&GID))
        .expect("a valid tree");
    let (_, join) = e2e::group::join_external(&bob.conn, &info).expect("join");
    let MlsMessageBodyIn::GroupInfo(honest) = mls::parse_message(&join.group_info).expect("info").extract() else { panic!("info") };
    // Bob's GroupInfo again with the old tree, signed by Bob as the platform checks.
    let extensions: Vec<Extension> = honest
        .extensions()
        .iter()
        .map(|e| match e {
            Extension::RatchetTree(_) => Extension::RatchetTree(RatchetTreeExtension::new(tree.clone())),
            other => other.clone(),
        })
        .collect();
    let extensions = Extensions::<openmls::messages::group_info::GroupInfo>::from_vec(extensions).expect("extensions");
    let context = honest.group_context().tls_serialize_detached().expect("context");
    // MLSMessage header (4 bytes) ‖ GroupInfoTBS ‖ signature (2-byte length, 64 bytes); the TBS
    // ends with the confirmation tag (1-byte length, a 32-byte MAC) and the signer (4 bytes).
    let tbs = &join.group_info[4..join.group_info.len() - 66];
    let tag_and_signer = &tbs[tbs.len() - 37..];
    let mut forged_tbs = context.clone();
    forged_tbs.extend(extensions.tls_serialize_detached().expect("extensions"));
    forged_tbs.extend_from_slice(tag_and_signer);
    let mut sign_content = VLBytes::new(b"MLS 1.0 GroupInfoTBS".to_vec()).tls_serialize_detached().expect("label");
    sign_content.extend(VLBytes::new(forged_tbs.clone()).tls_serialize_detached().expect("content"));
    let signature = e2e::device_key(&bob.conn).expect("bob's key").sign(&sign_content);
    let mut forged = join.group_info[..4].to_vec();
    forged.extend(forged_tbs);
    forged.extend(VLBytes::new(signature.to_vec()).tls_serialize_detached().expect("signature"));
    mls::parse_message(&forged).expect("still a well-formed GroupInfo");

    let poisoned = CommitOut { group_info: forged, ..join.clone() };
    match send(&store, &bob, "join-poisoned", &poisoned) {
        GroupSendOutcome::Rejected(e) => assert!(e.contains("another ratchet tree than the one this commit makes"), "{e}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(store.group_info(bob.addr.user_id, &GID).expect("info").1, 0, "still at epoch 0: the merge was undone");
    assert_eq!(ok(&send(&store, &bob, "join", &join)).0, 1);
}

/// Application messages of one device sent in one batch (`send_group_messages`, whose checks
/// read each group once) are answered exactly as each would be alone: delivered in order, a
/// repeat answered as the first, a commit refused, and a pending removal or a restriction
/// holding back every message of the batch.
#[test]
fn a_batch_is_answered_as_its_messages_would_be_alone() {
    let (_d, store) = store();
    let alice = user(&store, "alice");
    let bob = user(&store, "bob");
    create(&store, &alice, pb::GroupType::GROUP);
    store.add_group_member(alice.addr, &GID, bob.addr.user_id, 1).expect("invite bob");
    let (info, _) = store.group_info(bob.addr.user_id, &GID).unwrap();
    let (_, join) = e2e::group::join_external(&bob.conn, &info).unwrap();
    ok(&send(&store, &bob, "j", &join));
    catch_up(&store, &alice);
    catch_up(&store, &bob);

    let text = |d: &Dev, cmid: &str, text: &str| {
        let (bytes, _) = e2e::group::encrypt(&d.conn, &GID, text.as_bytes()).expect("encrypt");
        let c = CommitOut { message: bytes, ..Default::default() };
        GroupMessage::decode(GID.to_vec(), cmid.into(), c.message, c.group_info, c.welcome).expect("decodes")
    };
    let batch = |d: &Dev, messages: Vec<GroupMessage>| store.send_group_messages(d.addr, &messages, 2000, &EveryReader).expect("batch").0;

    // In order, a repeat answered as the first, a commit refused.
    let update = e2e::group::self_update(&alice.conn, &GID).expect("update");
    let commit = GroupMessage::decode(GID.to_vec(), "c".into(), update.message, update.group_info, update.welcome).expect("decodes");
    let out = batch(&alice, vec![text(&alice, "b1", "one"), text(&alice, "b2", "two"), text(&alice, "b1", "again"), commit]);
    let (first, second) = (ok(&out[0]), ok(&out[1]));
    assert_eq!((second.1, second.2), (first.1 + 1, first.2 + 1), "consecutive seq and message id");
    assert_eq!(ok(&out[2]), first, "a repeat is answered as the first");
    assert!(matches!(&out[3], GroupSendOutcome::Rejected(e) if e.contains("send a commit alone")), "{:?}", out[3]);
    e2e::group::commit_refused(&alice.conn, &GID).expect("discard");
    let (got, _) = catch_up(&store, &bob);
    let texts: Vec<String> = got
        .iter()
        .map(|r| match r {
            Received::Application { plaintext, .. } => String::from_utf8_lossy(plaintext).into_owned(),
            other => panic!("expected a text, got {other:?}"),
        })
        .collect();
    assert_eq!(texts, ["one", "two"]);

    // A restricted member's batch is refused message by message.
    set_member(&store.lock(), &GID, bob.addr.user_id, &MemberRow::new(Role::RESTRICTED, 1)).unwrap();
    let out = batch(&bob, vec![text(&bob, "r1", "x"), text(&bob, "r2", "y")]);
    assert!(out.iter().all(|o| matches!(o, GroupSendOutcome::Rejected(e) if e.contains("restricted"))), "{out:?}");
    set_member(&store.lock(), &GID, bob.addr.user_id, &MemberRow::new(Role::MEMBER, 1)).unwrap();

    // Bob leaves: every message of the batch waits for the removal of his leaf.
    store.leave_group(bob.addr, &GID, 3000).expect("leave");
    let out = batch(&alice, vec![text(&alice, "w1", "x"), text(&alice, "w2", "y")]);
    let pending = || GroupSendOutcome::RemovalsPending { users: vec![bob.addr.user_id], devices: vec![] };
    assert_eq!(out, [pending(), pending()]);
}

/// The `refs` of every stored group delivery, oldest first.
fn deliveries(store: &Store) -> Vec<i64> {
    let conn = store.lock();
    let mut stmt = conn.prepare("SELECT refs FROM group_deliveries ORDER BY id").unwrap();
    let refs = stmt.query_map([], |r| r.get(0)).unwrap().collect::<rusqlite::Result<Vec<i64>>>().unwrap();
    refs
}

/// The group rows (`group_log`): how many there are, and how many deliveries they hold.
fn group_rows(store: &Store) -> (i64, i64) {
    let conn = store.lock();
    let rows = conn.query_row("SELECT count(*) FROM inbox WHERE account_id = 0", [], |r| r.get(0)).unwrap();
    let deliveries = conn.query_row("SELECT count(*) FROM group_deliveries", [], |r| r.get(0)).unwrap();
    (rows, deliveries)
}

/// A group message is one inbox row, however many devices read it: each reads it whole through
/// its cursor, the sender does not, and it is gone once every cursor has acknowledged it or
/// was dropped with its device.
#[test]
fn a_group_message_is_one_row_read_by_every_cursor_and_released_after_the_last() {
    let (_d, store) = store();
    let [alice, bob, carol] = three_in_a_group(&store);
    assert!(deliveries(&store).is_empty(), "every delivery so far was acknowledged");
    assert_eq!(group_rows(&store), (0, 0));

    let (secret, _) = e2e::group::encrypt(&alice.conn, &GID, b"once").expect("encrypt");
    let (epoch, group_seq, message_id) = ok(&send(&store, &alice, "once", &CommitOut { message: secret.clone(), ..Default::default() }));
    assert_eq!(group_rows(&store), (1, 1), "one row and one copy for bob and carol");
    let personal: i64 =
        store.lock().query_row("SELECT count(*) FROM inbox WHERE account_id <> 0", [], |r| r.get(0)).unwrap();
    assert_eq!(personal, 0, "no row per device");
    assert!(inbox(&store, &alice).is_empty(), "the sender does not read its own message");

    let bobs = inbox(&store, &bob);
    assert_eq!(bobs.len(), 1);
    let e = &bobs[0];
    assert_eq!((&e.ciphertext, e.sender, e.sender_username.as_str()), (&secret, alice.addr, "alice"), "read whole through the row");
    assert_eq!((e.message_id, e.client_message_id.as_str()), (message_id, "once"));
    let g = e.group.as_ref().expect("a group delivery");
    assert_eq!((g.group_id.as_slice(), g.group_seq, g.epoch, g.title.as_str()), (&GID[..], group_seq, epoch, "Test group"));
    assert_eq!((kind(e), g.change.clone()), (DeliveryKind::MLS_MESSAGE, None));
    assert!(inbox(&store, &bob).is_empty(), "bob's acknowledgement moved his cursor past it");
    assert_eq!(group_rows(&store), (1, 1), "carol has not read it yet");
    let reader = store.open_reader().expect("reader");
    let carols = read_inbox(&reader, carol.addr, 0, 10).expect("read");
    assert_eq!((carols.len(), carols[0].seq, &carols[0].ciphertext), (1, e.seq, &secret), "the same row, the same seq");
    assert!(matches!(e2e::group::receive(&carol.conn, &GID, &secret), Ok(Received::Application { .. })));

    store.remove_device(carol.addr, 3000).expect("removed");
    assert_eq!(group_rows(&store), (0, 0), "dropping carol's cursor released the row and its delivery");
    assert!(e2e::group::receive(&bob.conn, &GID, &e.ciphertext).is_ok(), "bob read what he was given");
}

/// A cursor reads what was sent while its device had a leaf: not what came before its join,
/// the commit that removed it but nothing after; private rows and group rows merge in the
/// order they were sent; an acknowledgement covers the group's rows before it.
#[test]
fn a_cursor_reads_what_came_while_its_device_had_a_leaf_in_send_order() {
    let (_d, store) = store();
    let alice = user(&store, "alice");
    let (bob, carol) = (user(&store, "bob"), user(&store, "carol"));
    create(&store, &alice, pb::GroupType::GROUP);
    store.add_group_member(alice.addr, &GID, bob.addr.user_id, 1100).expect("invite bob");
    catch_up(&store, &alice);
    join_external(&store, &bob, "jb");
    catch_up(&store, &alice);
    catch_up(&store, &bob);
    ok(&say(&store, &alice, "before", "before carol"));
    store.add_group_member(alice.addr, &GID, carol.addr.user_id, 1100).expect("invite carol");
    join_external(&store, &carol, "jc");
    for d in [&alice, &bob] {
        catch_up(&store, d);
    }
    let (got, _) = catch_up(&store, &carol);
    assert!(got.is_empty(), "carol reads nothing sent before she joined: {got:?}");

    // Two group messages with a private one between: carol reads them in that order.
    ok(&say(&store, &alice, "g1", "one"));
    let private = crate::platform::store::inbox::InboxRow { to: carol.addr, sender: bob.addr, message_id: 1, date: 2000, client_message_id: "p", ciphertext: b"p" };
    crate::platform::store::inbox::append_inbox(&store.lock(), &private).expect("private row");
    ok(&say(&store, &bob, "g2", "two"));
    let reader = store.open_reader().expect("reader");
    let read = read_inbox(&reader, carol.addr, 0, 10).expect("read");
    let order: Vec<&str> = read.iter().map(|e| e.client_message_id.as_str()).collect();
    assert_eq!(order, ["g1", "p", "g2"]);
    assert!(read.windows(2).all(|w| w[0].seq < w[1].seq));
    // A limit holds across both kinds of rows.
    assert_eq!(read_inbox(&reader, carol.addr, 0, 2).expect("read").len(), 2);
    assert_eq!(read_inbox(&reader, carol.addr, read[0].seq, 10).expect("read").len(), 2, "after a seq");

    // Acknowledging the last group row covers the first; the private row stays until its own.
    store.ack(carol.addr, &[read[2].seq]).expect("ack");
    let left: Vec<String> = read_inbox(&reader, carol.addr, 0, 10).expect("read").into_iter().map(|e| e.client_message_id).collect();
    assert_eq!(left, ["p"]);
    store.ack(carol.addr, &[read[1].seq]).expect("ack");

    // Carol's removal: she reads the commit that removes her, not what follows.
    store.remove_group_member(alice.addr, &GID, carol.addr.user_id, 0, 2100).expect("ban");
    let removal = e2e::group::remove_users(&alice.conn, &GID, &[carol.addr.user_id]).expect("remove").expect("leaf");
    ok(&send(&store, &alice, "rm", &removal));
    e2e::group::commit_accepted(&alice.conn, &GID).unwrap();
    catch_up(&store, &bob);
    ok(&say(&store, &alice, "after", "after carol"));
    let kinds: Vec<(DeliveryKind, String)> =
        inbox(&store, &carol).iter().map(|e| (kind(e), e.client_message_id.clone())).collect();
    assert!(kinds.contains(&(DeliveryKind::MLS_MESSAGE, "rm".to_string())), "{kinds:?}");
    assert!(!kinds.iter().any(|(_, c)| c == "after"), "{kinds:?}");
    let cursors: i64 = store
        .lock()
        .query_row("SELECT count(*) FROM group_cursors WHERE user_id = ?1", [carol.addr.user_id], |r| r.get(0))
        .unwrap();
    assert_eq!(cursors, 0, "her closed cursor, read to its end, is gone");
    assert_eq!(group_rows(&store).0, 3, "g2, rm and after: alice has not read g2, bob none of them");
    catch_up(&store, &bob);
    assert_eq!(group_rows(&store).0, 3, "alice's cursor is still before g2, and holds what follows");
    catch_up(&store, &alice);
    assert_eq!(group_rows(&store), (0, 0), "every row was read by every cursor, and released");
}

/// A group message id is reserved only for a device with a leaf: a seated member's device that
/// never joined the tree is refused (one row read, `has_leaf`), its joined device is not.
#[test]
fn only_a_device_with_a_leaf_reserves_a_group_message_id() {
    let (_d, store) = store();
    let alice = user(&store, "alice");
    let (conn, device, account) = new_device_state();
    let (bot_id, _) = store.create_bot("res_bot", "res_bot", "groups", &account.public_key(), None, 100).expect("bot");
    let first = store.register_bot_device(bot_id, &device, 100).expect("device");
    let joined = registered(conn, DeviceAddr { user_id: bot_id, device_id: first });
    let (_conn, device) = device_state_of(&account);
    let second = store.register_bot_device(bot_id, &device, 100).expect("second device");
    create(&store, &alice, pb::GroupType::GROUP);
    store.add_group_member(alice.addr, &GID, bot_id, 1100).expect("invite");
    join_external(&store, &joined, "joined");
    let reserve = |addr: DeviceAddr, cmid: &str| {
        store.reserve_message_ids(addr, &[(cmid.to_string(), 0, GID.to_vec())], 2000).expect("reserve").remove(0)
    };
    assert!(matches!(reserve(alice.addr, "a1"), Reserved::Id { .. }), "the owner has a leaf");
    assert!(matches!(reserve(joined.addr, "b1"), Reserved::Id { .. }), "the joined device has a leaf");
    let unjoined = reserve(DeviceAddr { user_id: bot_id, device_id: second }, "b2");
    assert!(matches!(&unjoined, Reserved::Refused(why) if why.contains("no leaf")), "{unjoined:?}");
}

/// A channel's staff are found without reading its subscribers: the owner and administrators
/// by role, the bots from the platform's bots, and each one's devices by key (reading the
/// group's devices would be a read per subscriber, per change and per join).
#[test]
fn a_channels_staff_are_found_without_a_scan() {
    let (_d, store) = store();
    let conn = store.lock();
    let plan = query_plan(&conn, super::CHANNEL_STAFF_DEVICES, params![GID.to_vec(), 1, 2]);
    assert!(plan.iter().any(|step| step.starts_with("SEARCH m") && step.contains("group_members_by_role")), "by role: {plan:#?}");
    assert!(plan.iter().any(|step| step.starts_with("SCAN a") && step.contains("accounts_bots")), "the bots: {plan:#?}");
    let devices: Vec<&String> = plan.iter().filter(|step| step.contains(" g ")).collect();
    assert!(
        devices.len() == 2 && devices.iter().all(|step| step.contains("(group_id=? AND user_id=?)")),
        "a group's devices are looked up per staff member, never read all: {plan:#?}"
    );
    assert!(!plan.iter().any(|step| step.starts_with("SCAN") && !step.contains("accounts_bots")), "nothing else scanned: {plan:#?}");
}

/// A platform data directory of step 15, whose GroupInfos sit in `groups`, opens with them in
/// `group_infos`: the same bytes are served, and the next commit replaces them there.
#[test]
fn group_infos_of_step_15_move_to_their_own_table() {
    let (dir, store) = store();
    let alice = user(&store, "alice");
    create(&store, &alice, pb::GroupType::GROUP);
    let (info, epoch) = store.group_info(alice.addr.user_id, &GID).expect("info");
    drop(store);
    {
        // Back to step 15, as the release before left it.
        let conn = Connection::open(dir.path().join("data").join(crate::platform::store::DB_FILE)).expect("raw");
        conn.execute_batch(
            "DROP TABLE group_cursors; DROP INDEX inbox_group_rows; DROP INDEX devices_inactive;
             DROP INDEX group_members_by_role; DROP INDEX accounts_bots; ALTER TABLE groups ADD COLUMN group_info BLOB NOT NULL DEFAULT X'';
             UPDATE groups SET group_info = (SELECT group_info FROM group_infos i WHERE i.group_id = groups.group_id);
             DROP TABLE group_infos; PRAGMA user_version = 15;",
        )
        .expect("as step 15");
    }
    let store = Store::open(&dir.path().join("data")).expect("upgraded");
    assert_eq!(store.group_info(alice.addr.user_id, &GID).expect("info"), (info, epoch), "the same GroupInfo");
    let columns: Vec<String> = store
        .lock()
        .prepare("SELECT name FROM pragma_table_info('groups')")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert!(!columns.iter().any(|c| c == "group_info"), "the blob left `groups`: {columns:?}");
    let cursors: i64 = store.lock().query_row("SELECT count(*) FROM group_cursors WHERE until_seq IS NULL", [], |r| r.get(0)).unwrap();
    assert_eq!(cursors, 1, "step 17 opened a cursor for the device with a leaf");
    let update = e2e::group::self_update(&alice.conn, &GID).expect("self-update");
    assert!(matches!(send(&store, &alice, "u1", &update), GroupSendOutcome::Ok { epoch: 1, .. }), "the commit is taken");
    assert_eq!(store.group_info(alice.addr.user_id, &GID).expect("info"), (update.group_info.clone(), 1), "and its GroupInfo served");
}

/// What an application message checks before it goes (removals owed, removed devices with
/// leaves) is read from the departed members and the platform's removed devices, never from
/// the group's leaves: nothing is scanned but the removed devices' index.
#[test]
fn an_application_messages_checks_read_no_leaf_of_the_group() {
    let (_d, store) = store();
    let conn = store.lock();
    let gid: &[u8] = &GID;
    let bound: [&dyn rusqlite::ToSql; 3] = [&gid, &3, &4];
    for (sql, n) in [(super::USERS_OWED_REMOVAL, 3), (super::REMOVED_DEVICES_WITH_LEAVES, 1)] {
        let plan = query_plan(&conn, sql, &bound[..n]);
        assert!(plan.iter().any(|step| step.starts_with("SEARCH g USING PRIMARY KEY")), "a leaf looked up: {plan:#?}");
        assert!(!plan.iter().any(|step| step.starts_with("SCAN") && !step.contains("devices_inactive")), "nothing else scanned: {plan:#?}");
    }
}

/// Waking a group's readers after a message costs the smaller of the group and of the devices
/// listening: with more listeners than readers, every reader but the sender is told (the hub
/// wakes those listening); with fewer, only the listeners that read the group.
#[test]
fn a_group_message_wakes_its_listening_readers_but_its_sender() {
    struct Few(Vec<DeviceAddr>);
    impl Listening for Few {
        fn count(&self) -> usize {
            self.0.len()
        }
        fn devices(&self) -> Vec<DeviceAddr> {
            self.0.clone()
        }
    }
    let (_d, store) = store();
    let [alice, bob, carol] = three_in_a_group(&store);
    let stranger = DeviceAddr { user_id: 999, device_id: 1 };
    let told = |cmid: &str, listening: &dyn Listening| {
        let (bytes, _) = e2e::group::encrypt(&alice.conn, &GID, cmid.as_bytes()).expect("encrypt");
        let m = GroupMessage::decode(GID.to_vec(), cmid.into(), bytes, Vec::new(), Vec::new()).expect("decodes");
        let (outcome, told) = store.send_group_message(alice.addr, m, 2000, listening).expect("send");
        assert!(matches!(outcome, GroupSendOutcome::Ok { .. }), "{outcome:?}");
        told
    };
    let set = |devices: &[DeviceAddr]| devices.iter().copied().collect::<BTreeSet<_>>();
    assert_eq!(told("all", &EveryReader), set(&[bob.addr, carol.addr]));
    // Four listeners, three readers: the readers are read, the sender left out.
    assert_eq!(told("many", &Few(vec![bob.addr, stranger, alice.addr, DeviceAddr { user_id: 998, device_id: 1 }])), set(&[bob.addr, carol.addr]));
    // Two listeners, three readers: each listener is checked; the stranger reads nothing.
    assert_eq!(told("few", &Few(vec![stranger, bob.addr])), set(&[bob.addr]));
    assert_eq!(told("sender alone", &Few(vec![alice.addr])), set(&[]));
}
