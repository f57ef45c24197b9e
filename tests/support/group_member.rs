//! Users as real MLS group members (`e2e::group` over their own in-memory databases, real gRPC
//! to the platform), and a world of a platform and one bot for group tests and benchmarks.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crossbeam_channel::Receiver;
use rusqlite::Connection;
use serde_json::Value;

use bot_gateway::crypto::{mls, IdentityKeyPair};
use bot_gateway::e2e::{self, group::CommitOut, group::Received, Registration};
use bot_gateway::wire::e2e::Content;
use bot_gateway::wire::platform::{self as pb, group_delivery::Kind, send_group_message_response::Status};
use bot_gateway::wire::{Credential, Platform};
use protobuf::Message as _;

use super::{gateway_config, platform_bin, write_config, PlatformServer};

/// A user's device: keys and MLS state in its own database, its client and Inbox stream.
pub struct Member {
    pub conn: Connection,
    pub p: Platform,
    pub user_id: u64,
    pub inbox: Receiver<pb::InboxEnvelope>,
    /// Group texts received, in order, with the sender's user id.
    pub texts: Vec<(u64, String)>,
    /// Every group content received, in order: (sender, message id, content).
    pub contents: Vec<(u64, u64, Content)>,
    /// Reads the Inbox stream into `inbox`; ends with the stream (the platform stopping) or
    /// when `close_inbox` cancels the call.
    _reader: std::thread::JoinHandle<()>,
    close: Option<futures::channel::oneshot::Sender<()>>,
}

/// A fresh device database: the e2e and openmls tables, device keys and a registration.
pub fn device_db(identity: &IdentityKeyPair) -> (Connection, pb::DeviceKeys) {
    let mut conn = Connection::open_in_memory().expect("db");
    e2e::create_all_tables(&conn).expect("e2e tables");
    mls::migrate_storage(&mut conn).expect("openmls tables");
    let keys = e2e::create_device_keys(&conn, identity).expect("device keys");
    (conn, keys)
}

/// A new user `name` with one device, through the platform's raw API: its database (see
/// [`device_db`]), its connection as that device, and its user id.
pub fn register_device(url: &str, name: &str) -> (Connection, Platform, u64) {
    let anon = Platform::connect(url, Credential::Anonymous).expect("endpoint");
    let identity = IdentityKeyPair::generate();
    let (conn, keys) = device_db(&identity);
    let req = pb::RegisterUserRequest {
        username: name.into(),
        display_name: format!("User {name}"),
        identity_key: identity.public_key().to_vec(),
        device: Some(keys).into(),
        ..Default::default()
    };
    let reg = anon.client.register_user(&req, anon.opt()).expect("registers");
    e2e::save_registration(&conn, Registration { user_id: reg.user_id, device_id: reg.device_id }).expect("save");
    let secret_hex = bot_gateway::crypto::hex_encode(&reg.device_secret);
    let p = Platform::connect(url, Credential::Device { user_id: reg.user_id, device_id: reg.device_id, secret_hex }).expect("endpoint");
    (conn, p, reg.user_id)
}

impl Member {
    pub fn register(url: &str, name: &str) -> Member {
        let (conn, p, user_id) = register_device(url, name);
        let kps = e2e::group::key_packages(&conn, 3).expect("key packages");
        p.client.upload_key_packages(&pb::KeyPackagesUpload { key_packages: kps, ..Default::default() }, p.opt()).expect("upload");
        let mut stream = p.client.inbox(&pb::InboxRequest::default(), p.opt_with_timeout(None)).expect("inbox");
        let (tx, inbox) = crossbeam_channel::bounded(256);
        let (close, mut closed) = futures::channel::oneshot::channel::<()>();
        let reader = std::thread::Builder::new()
            .name(format!("inbox-{name}"))
            .spawn(move || {
                use futures::future::{select, Either};
                use futures::StreamExt as _;
                // Returning drops the stream, which cancels the call.
                while let Either::Left((Some(Ok(e)), _)) = futures::executor::block_on(select(stream.next(), &mut closed)) {
                    if tx.send(e).is_err() {
                        return;
                    }
                }
            })
            .expect("reader");
        Member { conn, p, user_id, inbox, texts: Vec::new(), contents: Vec::new(), _reader: reader, close: Some(close) }
    }

    /// Ends this member's Inbox stream: the platform keeps its deliveries and sends it none
    /// (a member who is offline). For benchmarks whose load must not include the members'
    /// own reading.
    pub fn close_inbox(&mut self) {
        self.close.take();
    }

    /// Takes every delivery that arrives within `quiet` of the previous one, in order, as a
    /// member does: Welcomes joined, commits merged, texts kept.
    pub fn pump(&mut self, quiet: Duration) {
        while let Ok(e) = self.inbox.recv_timeout(quiet) {
            self.process(e);
        }
    }

    fn process(&mut self, e: pb::InboxEnvelope) {
        self.ack(vec![e.seq]);
        let Some(g) = e.group.as_ref() else { return };
        match g.kind.enum_value_or_default() {
            Kind::WELCOME => {
                e2e::group::join_welcome(&self.conn, &e.ciphertext).expect("joins from the Welcome");
            }
            Kind::MLS_MESSAGE => {
                if e2e::group::epoch(&self.conn, &g.group_id).expect("epoch").is_none() {
                    return; // not in the group (removed, or never joined)
                }
                match e2e::group::receive(&self.conn, &g.group_id, &e.ciphertext) {
                    Ok(Received::Application { sender, plaintext }) => {
                        let content = Content::parse_from_bytes(&plaintext).expect("content");
                        if content.has_text() {
                            self.texts.push((sender.0, content.text().text.clone()));
                        }
                        self.contents.push((sender.0, e.message_id, content));
                    }
                    Ok(Received::Commit { removed_me: true, .. }) => {
                        e2e::group::forget(&self.conn, &g.group_id).expect("forget");
                    }
                    Ok(_) => {}
                    Err(err) => panic!("user {} cannot process a group message: {err}", self.user_id),
                }
            }
            Kind::MEMBERSHIP | Kind::TITLE | Kind::JOIN_REQUEST | Kind::DELETED => {}
        }
    }

    /// Acknowledges, unread, every delivery already received (one Ack call); returns how many.
    /// Only for application messages, which leave the epoch alone: a commit skipped this way
    /// would leave the member behind.
    pub fn discard_pending(&self) -> usize {
        let seqs: Vec<u64> = self.inbox.try_iter().map(|e| e.seq).collect();
        let n = seqs.len();
        if n > 0 {
            self.ack(seqs);
        }
        n
    }

    fn ack(&self, seqs: Vec<u64>) {
        self.p.client.ack(&pb::AckRequest { seqs, ..Default::default() }, self.p.opt()).expect("ack");
    }

    /// The SendGroupMessage of `out` to group `gid`, with a fresh client message id.
    pub fn request(&self, gid: &[u8], out: &CommitOut) -> pb::SendGroupMessageRequest {
        pb::SendGroupMessageRequest {
            group_id: gid.to_vec(),
            client_message_id: bot_gateway::crypto::hex_encode(&bot_gateway::crypto::random_bytes::<16>()),
            message: out.message.clone(),
            group_info: out.group_info.clone(),
            welcome: out.welcome.clone(),
            ..Default::default()
        }
    }

    pub fn send(&self, gid: &[u8], out: &CommitOut) -> pb::SendGroupMessageResponse {
        self.p.client.send_group_message(&self.request(gid, out), self.p.opt()).expect("send call")
    }

    /// Several messages in one SendGroupMessages call; the answers in order.
    pub fn send_batch(&self, messages: Vec<pb::SendGroupMessageRequest>) -> Vec<pb::SendGroupMessageResponse> {
        let req = pb::SendGroupMessagesRequest { messages, ..Default::default() };
        self.p.client.send_group_messages(&req, self.p.opt()).expect("batch call").results
    }

    /// Commits `out` (made by this member) and merges it when accepted.
    pub fn commit(&self, gid: &[u8], out: &CommitOut) {
        let r = self.send(gid, out);
        assert_eq!(r.status.enum_value_or_default(), Status::OK, "commit refused: {}", r.error);
        e2e::group::commit_accepted(&self.conn, gid).expect("merge");
    }

    pub fn say(&self, gid: &[u8], text: &str) -> pb::SendGroupMessageResponse {
        let (message, _) = e2e::group::encrypt(&self.conn, gid, &e2e::text_content(text).write_to_bytes().unwrap()).expect("encrypt");
        self.send(gid, &CommitOut { message, ..Default::default() })
    }

    /// Presses a button of a group message: privately to the bot, as in a private chat.
    pub fn press(&self, bot_id: u64, message_id: u64, content: &Content, data: &str) {
        if e2e::known_devices(&self.conn, bot_id).expect("devices").is_empty() {
            let req = pb::GetPrekeyBundlesRequest { user_id: bot_id, ..Default::default() };
            let bundles = self.p.client.get_prekey_bundles(&req, self.p.opt()).expect("bundles");
            e2e::add_sessions(&self.conn, &bundles.profile, &bundles.bundles).expect("sessions");
        }
        let mut press = Content::new();
        press.set_press(bot_gateway::wire::e2e::CallbackPress {
            press_id: "press1".into(),
            message_id,
            callback_data: data.into(),
            context: content.keyboard.context.clone(),
            ..Default::default()
        });
        let ciphertexts = e2e::seal(&self.conn, bot_id, &press).expect("seal");
        let m = pb::OutgoingMessage {
            client_message_id: "press-cmid-1".into(),
            recipient_user_id: bot_id,
            ciphertexts,
            ..Default::default()
        };
        let req = pb::SendMessagesRequest { messages: vec![m], ..Default::default() };
        let r = self.p.client.send_messages(&req, self.p.opt()).expect("send");
        assert_eq!(r.results[0].status.enum_value_or_default(), pb::send_result::Status::OK, "{:?}", r.results[0]);
    }

    pub fn create_group(&self, title: &str) -> Vec<u8> {
        let gid = e2e::group::new_group_id().to_vec();
        let group_info = e2e::group::create(&self.conn, &gid).expect("create");
        let req = pb::CreateGroupRequest { group_id: gid.clone(), title: title.into(), group_info, ..Default::default() };
        self.p.client.create_group(&req, self.p.opt()).expect("CreateGroup");
        gid
    }

    /// A channel: a group of type CHANNEL (this member owns it).
    pub fn create_channel(&self, title: &str) -> Vec<u8> {
        let gid = e2e::group::new_group_id().to_vec();
        let group_info = e2e::group::create(&self.conn, &gid).expect("create");
        let req = pb::CreateGroupRequest {
            group_id: gid.clone(),
            title: title.into(),
            type_: pb::GroupType::CHANNEL.into(),
            group_info,
            ..Default::default()
        };
        self.p.client.create_group(&req, self.p.opt()).expect("CreateGroup");
        gid
    }

    /// Gives `user_id` administrator rights (AdminRights fields set to true).
    pub fn promote(&self, gid: &[u8], user_id: u64, rights: pb::AdminRights) -> grpcio::Result<pb::MembershipResponse> {
        let req = pb::PromoteGroupMemberRequest { group_id: gid.to_vec(), user_id, rights: Some(rights).into(), ..Default::default() };
        self.p.client.promote_group_member(&req, self.p.opt())
    }

    /// Follows an invite link; when admitted at once, joins by an external commit.
    pub fn join_by_link(&self, link: &str) -> grpcio::Result<pb::JoinByLinkResponse> {
        let r = self.p.client.join_by_link(&pb::JoinByLinkRequest { link: link.into(), ..Default::default() }, self.p.opt())?;
        if r.status.enum_value_or_default() == pb::join_by_link_response::Status::INVITED {
            self.join_external(&r.group_id);
        }
        Ok(r)
    }

    /// Joins a group this member is INVITED to by an external commit.
    pub fn join_external(&self, gid: &[u8]) {
        let info = self.group_info(gid).group_info;
        let (_, out) = e2e::group::join_external(&self.conn, &info).expect("external join");
        let r = self.send(gid, &out);
        assert_eq!(r.status.enum_value_or_default(), Status::OK, "external join refused: {}", r.error);
    }

    /// Waits (bounded) for a group delivery of `kind` and returns it, processing what comes
    /// before it as `pump` does.
    pub fn wait_delivery(&mut self, kind: Kind, within: Duration) -> pb::InboxEnvelope {
        let deadline = std::time::Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let e = self.inbox.recv_timeout(left).unwrap_or_else(|_| panic!("no {kind:?} delivery for user {}", self.user_id));
            if e.group.as_ref().is_some_and(|g| g.kind.enum_value_or_default() == kind) {
                self.ack(vec![e.seq]);
                return e;
            }
            self.process(e);
        }
    }

    pub fn invite(&self, gid: &[u8], user_id: u64) -> grpcio::Result<pb::MembershipResponse> {
        let req = pb::AddGroupMemberRequest { group_id: gid.to_vec(), user_id, ..Default::default() };
        self.p.client.add_group_member(&req, self.p.opt())
    }

    /// The platform's current GroupInfo (for external joins) of a group.
    pub fn group_info(&self, gid: &[u8]) -> pb::GroupInfoResponse {
        let req = pb::GroupRequest { group_id: gid.to_vec(), ..Default::default() };
        self.p.client.get_group_info(&req, self.p.opt()).expect("GetGroupInfo")
    }

    /// Adds users by their key packages, all in one commit: the Welcome path.
    pub fn add_by_welcome(&self, gid: &[u8], others: &[&Member]) {
        let mut kps = Vec::new();
        for other in others {
            self.invite(gid, other.user_id).expect("invite");
            let req = pb::ClaimKeyPackagesRequest { user_id: other.user_id, ..Default::default() };
            let claimed = self.p.client.claim_key_packages(&req, self.p.opt()).expect("claim");
            kps.extend(claimed.key_packages.into_iter().map(|k| e2e::group::Claimed {
                user_id: other.user_id,
                device_id: k.device_id,
                key_package: k.key_package,
            }));
        }
        let out = e2e::group::add(&self.conn, gid, &kps).expect("add");
        self.commit(gid, &out);
    }
}

/// A platform server in `dir` and a bot with `capabilities`, its gateway config written (not
/// started): (platform, the `create-bot` JSON, the config's path).
pub fn bot_world(dir: &Path, capabilities: &str) -> (PlatformServer, Value, PathBuf) {
    bot_gateway::crypto::init();
    let platform = PlatformServer::start(&dir.join("platform"));
    let out = std::process::Command::new(platform_bin())
        .args(["create-bot", "--data-dir"])
        .arg(&platform.data_dir)
        .args(["--username", "group_bot", "--name", "Group Bot", "--capabilities", capabilities])
        .output()
        .expect("create-bot");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bot: Value = serde_json::from_slice(&out.stdout).expect("json");
    let config = dir.join("gateway.json");
    write_config(&config, &gateway_config(&platform.url, &dir.join("state"), &bot));
    (platform, bot, config)
}
