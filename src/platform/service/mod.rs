//! The gRPC `Platform` service: decodes and checks each request (lengths, signatures, proofs),
//! authenticates the caller, runs one quick store transaction and answers.
//!
//! Unary handlers run on the unary workers (`super::unary_workers`), never on a gRPC
//! completion-queue thread, which moves the streaming calls' data; each does at most one short
//! SQLite transaction and never waits for anything else. The Inbox stream's waiting happens on
//! its own feeder thread (see `inbox`).
//!
//! This file holds the service state, the trait impl that only routes, and `unary`, the one
//! path of every unary call: read the credential, then on a worker check the caller
//! ([`Access`]), run the handler, answer. The handlers (request → result, no gRPC plumbing) are
//! grouped by what they act on, the way the store is:
//!
//! - `accounts`: accounts and credentials: RegisterUser (an account with its first device),
//!   LookupUser, VerifyCredential.
//! - `devices`: a device's keys: RegisterBotDevice (one more device of an existing bot
//!   account), GetPrekeyBundles, GetDeviceCertificates, UploadPrekeys, ListDevices (a bot's devices).
//! - `messaging`: SendMessages and Ack. The Inbox stream between them is `super::inbox` (a
//!   feeder thread per stream); only its caller check is here.
//!
//! - `profile`: a bot's public profile: Set/GetBotCommands, Set/GetBotDescription.
//! - `files`: UploadFile and DownloadFile, the encrypted file transport (a bounded thread per
//!   transfer; only their caller check is here).
//!
//! Groups and inline mode will each add a file here. The key checks and wire shapes that
//! the management bot shares are in `super::convert`.

mod accounts;
mod devices;
mod files;
mod groups;
mod inline;
mod messaging;
mod profile;

use std::sync::Arc;

use futures::channel::oneshot;
use grpcio::{ClientStreamingSink, RequestStream, RpcContext, ServerStreamingSink, UnarySink, UnarySinkResult};

use super::auth::{self, Caller, Need, Presented};
use super::convert;
use super::error::{PlatformError, Result};
use super::call_threads::CallThreads;
use super::inbox::{self, InboxHub};
use super::unary_workers::UnaryWorkers;
use super::store::{DeviceAddr, Store};
use crate::wire::platform as pb;

/// The service state; clones share it.
#[derive(Clone)]
pub struct PlatformService {
    store: Arc<Store>,
    hub: Arc<InboxHub>,
    /// The running file transfers (their threads are bounded).
    transfers: Arc<files::Transfers>,
    /// The threads of streaming calls, joined when the server stops.
    threads: Arc<CallThreads>,
    /// Where every unary call runs (`super::unary_workers`).
    workers: Arc<UnaryWorkers>,
}

impl PlatformService {
    pub fn new(store: Arc<Store>, hub: Arc<InboxHub>, threads: Arc<CallThreads>, workers: Arc<UnaryWorkers>) -> PlatformService {
        PlatformService { store, hub, transfers: Arc::default(), threads, workers }
    }

    /// One unary call: reads the credential from the call's metadata here, on the completion
    /// queue, then on a unary worker checks it as `access` says, runs `handler` with what the
    /// check yields, and answers (see `answer`).
    fn unary<A: Access, T: Send + 'static>(
        &self,
        ctx: &RpcContext<'_>,
        sink: UnarySink<T>,
        method: &'static str,
        access: A,
        handler: impl FnOnce(&PlatformService, A::Caller) -> Result<T> + Send + 'static,
    ) {
        let presented = auth::presented(ctx.request_headers());
        // The worker starts the answer's write itself (no hop back to this queue before the
        // client has it); this future on the call's completion queue keeps the call until the
        // write completed: gRPC core cancels a server call released before its close.
        let (started, writing) = oneshot::channel::<UnarySinkResult>();
        ctx.spawn(async move {
            if let Ok(write) = writing.await {
                if let Err(e) = write.await {
                    log::debug!("{method}: answer not delivered: {e}");
                }
            }
        });
        let service = self.clone();
        self.workers.run(Box::new(move || {
            let result = access.check(&service.store, presented).and_then(|caller| handler(&service, caller));
            let _ = started.send(answer(sink, method, result));
        }));
    }

    /// The caller check of a streaming call, made on the completion queue (the call's start
    /// is one short read; its data then moves on threads of its own).
    fn check_stream<A: Access>(&self, ctx: &RpcContext<'_>, access: A) -> Result<A::Caller> {
        access.check(&self.store, auth::presented(ctx.request_headers()))
    }
}

/// Who may make a call, and what its handler is told about the caller.
trait Access: Send + 'static {
    type Caller;
    /// Checks the credential the call presented (or why its metadata holds none that
    /// parses) against the store.
    fn check(self, store: &Store, presented: Result<Presented>) -> Result<Self::Caller>;
}

/// No credential is read or checked (RegisterUser, LookupUser).
struct Anyone;

impl Access for Anyone {
    type Caller = ();
    fn check(self, _store: &Store, _presented: Result<Presented>) -> Result<()> {
        Ok(())
    }
}

/// The credential in the call metadata, checked against the store for this need.
impl Access for Need {
    type Caller = Caller;
    fn check(self, store: &Store, presented: Result<Presented>) -> Result<Caller> {
        auth::authenticate(store, &presented?, self)
    }
}

/// `Need::Device`, and the handler gets the caller's device.
struct ActiveDevice;

impl Access for ActiveDevice {
    type Caller = DeviceAddr;
    fn check(self, store: &Store, presented: Result<Presented>) -> Result<DeviceAddr> {
        let caller = Need::Device.check(store, presented)?;
        caller.device().ok_or_else(|| PlatformError::Unauthenticated("this call needs a device".into()))
    }
}

/// Ends a streaming call whose caller check failed with that error's status.
fn fail_stream<F: std::future::Future<Output = ()> + Send + 'static>(
    method: &'static str,
    ctx: &RpcContext<'_>,
    err: PlatformError,
    fail: impl FnOnce(grpcio::RpcStatus) -> F,
) {
    log::debug!("{method}: {err}");
    ctx.spawn(fail(err.to_status()));
}

/// Starts the answer of a unary call, on its worker. (A job dropped unrun, the server
/// stopping, or whose handler panicked drops its sink, which cancels the call.)
fn answer<T>(sink: UnarySink<T>, method: &'static str, result: Result<T>) -> UnarySinkResult {
    match result {
        Ok(resp) => sink.success(resp),
        Err(err) => {
            match &err {
                PlatformError::Internal(_) => log::error!("{method}: {err}"),
                _ => log::debug!("{method}: {err}"),
            }
            sink.fail(err.to_status())
        }
    }
}

impl crate::wire::platform_grpc::Platform for PlatformService {
    // ── accounts ──

    fn register_user(
        &mut self,
        ctx: RpcContext,
        req: pb::RegisterUserRequest,
        sink: UnarySink<pb::RegisterUserResponse>,
    ) {
        self.unary(&ctx, sink, "RegisterUser", Anyone, |s, ()| accounts::register_user(&s.store, req));
    }

    fn lookup_user(&mut self, ctx: RpcContext, req: pb::LookupUserRequest, sink: UnarySink<pb::Profile>) {
        self.unary(&ctx, sink, "LookupUser", Anyone, |s, ()| accounts::lookup_user(&s.store, req));
    }

    fn verify_credential(
        &mut self,
        ctx: RpcContext,
        _req: pb::VerifyCredentialRequest,
        sink: UnarySink<pb::VerifyCredentialResponse>,
    ) {
        self.unary(&ctx, sink, "VerifyCredential", Need::Any, |s, caller| accounts::verify_credential(&s.store, caller));
    }

    // ── devices ──

    fn register_bot_device(
        &mut self,
        ctx: RpcContext,
        req: pb::RegisterBotDeviceRequest,
        sink: UnarySink<pb::RegisterBotDeviceResponse>,
    ) {
        self.unary(&ctx, sink, "RegisterBotDevice", Need::BotToken, |s, caller| {
            devices::register_bot_device(&s.store, caller, req)
        });
    }

    fn get_prekey_bundles(
        &mut self,
        ctx: RpcContext,
        req: pb::GetPrekeyBundlesRequest,
        sink: UnarySink<pb::GetPrekeyBundlesResponse>,
    ) {
        self.unary(&ctx, sink, "GetPrekeyBundles", ActiveDevice, |s, _| devices::get_prekey_bundles(&s.store, req));
    }

    fn get_device_certificates(
        &mut self,
        ctx: RpcContext,
        req: pb::GetDeviceCertificatesRequest,
        sink: UnarySink<pb::GetDeviceCertificatesResponse>,
    ) {
        self.unary(&ctx, sink, "GetDeviceCertificates", ActiveDevice, |s, _| {
            convert::device_certificates(&s.store, req)
        });
    }

    fn upload_prekeys(
        &mut self,
        ctx: RpcContext,
        req: pb::UploadPrekeysRequest,
        sink: UnarySink<pb::UploadPrekeysResponse>,
    ) {
        self.unary(&ctx, sink, "UploadPrekeys", ActiveDevice, |s, addr| devices::upload_prekeys(&s.store, addr, req));
    }

    fn list_devices(
        &mut self,
        ctx: RpcContext,
        _req: pb::ListDevicesRequest,
        sink: UnarySink<pb::ListDevicesResponse>,
    ) {
        self.unary(&ctx, sink, "ListDevices", Need::Device, |s, caller| {
            devices::list_devices(&s.store, &s.hub, caller)
        });
    }

    fn certify_device(
        &mut self,
        ctx: RpcContext,
        req: pb::CertifyDeviceRequest,
        sink: UnarySink<pb::CertifyDeviceResponse>,
    ) {
        self.unary(&ctx, sink, "CertifyDevice", ActiveDevice, |s, addr| devices::certify_device(&s.store, addr, req));
    }

    fn remove_device(
        &mut self,
        ctx: RpcContext,
        req: pb::RemoveDeviceRequest,
        sink: UnarySink<pb::RemoveDeviceResponse>,
    ) {
        self.unary(&ctx, sink, "RemoveDevice", Need::Device, |s, caller| {
            devices::remove_device(&s.store, &s.hub, caller, req)
        });
    }

    // ── messaging ──

    fn send_messages(
        &mut self,
        ctx: RpcContext,
        req: pb::SendMessagesRequest,
        sink: UnarySink<pb::SendMessagesResponse>,
    ) {
        self.unary(&ctx, sink, "SendMessages", ActiveDevice, |s, addr| {
            messaging::send_messages(&s.store, &s.hub, addr, req)
        });
    }

    fn inbox(&mut self, ctx: RpcContext, _req: pb::InboxRequest, sink: ServerStreamingSink<pb::InboxEnvelope>) {
        match self.check_stream(&ctx, ActiveDevice) {
            Ok(addr) => inbox::start(&self.hub, &self.store, &self.threads, &ctx, addr, sink),
            Err(err) => {
                log::debug!("Inbox: {err}");
                let status = err.to_status();
                ctx.spawn(async move {
                    let _ = sink.fail(status).await;
                });
            }
        }
    }

    fn ack(&mut self, ctx: RpcContext, req: pb::AckRequest, sink: UnarySink<pb::AckResponse>) {
        self.unary(&ctx, sink, "Ack", ActiveDevice, |s, addr| messaging::ack(&s.store, addr, req));
    }

    // ── inline sessions ──

    fn start_inline_session(
        &mut self,
        ctx: RpcContext,
        req: pb::StartInlineSessionRequest,
        sink: UnarySink<pb::StartInlineSessionResponse>,
    ) {
        self.unary(&ctx, sink, "StartInlineSession", ActiveDevice, |s, addr| {
            inline::start_inline_session(&s.store, addr, req)
        });
    }

    fn choose_inline_result(
        &mut self,
        ctx: RpcContext,
        req: pb::ChooseInlineResultRequest,
        sink: UnarySink<pb::ChooseInlineResultResponse>,
    ) {
        self.unary(&ctx, sink, "ChooseInlineResult", ActiveDevice, |s, addr| {
            inline::choose_inline_result(&s.store, addr, req)
        });
    }

    fn reserve_message_ids(
        &mut self,
        ctx: RpcContext,
        req: pb::ReserveMessageIdsRequest,
        sink: UnarySink<pb::ReserveMessageIdsResponse>,
    ) {
        self.unary(&ctx, sink, "ReserveMessageIds", ActiveDevice, |s, addr| {
            messaging::reserve_message_ids(&s.store, addr, req)
        });
    }

    // ── bot profile ──

    fn set_bot_commands(
        &mut self,
        ctx: RpcContext,
        req: pb::SetBotCommandsRequest,
        sink: UnarySink<pb::SetBotCommandsResponse>,
    ) {
        self.unary(&ctx, sink, "SetBotCommands", Need::Device, |s, caller| {
            profile::set_bot_commands(&s.store, caller, req)
        });
    }

    fn get_bot_commands(
        &mut self,
        ctx: RpcContext,
        req: pb::GetBotCommandsRequest,
        sink: UnarySink<pb::GetBotCommandsResponse>,
    ) {
        self.unary(&ctx, sink, "GetBotCommands", Need::Device, |s, caller| {
            profile::get_bot_commands(&s.store, caller, req)
        });
    }

    fn set_bot_description(
        &mut self,
        ctx: RpcContext,
        req: pb::SetBotDescriptionRequest,
        sink: UnarySink<pb::SetBotDescriptionResponse>,
    ) {
        self.unary(&ctx, sink, "SetBotDescription", Need::Device, |s, caller| {
            profile::set_bot_description(&s.store, caller, req)
        });
    }

    fn get_bot_description(
        &mut self,
        ctx: RpcContext,
        req: pb::GetBotDescriptionRequest,
        sink: UnarySink<pb::BotDescription>,
    ) {
        self.unary(&ctx, sink, "GetBotDescription", Need::Device, |s, caller| {
            profile::get_bot_description(&s.store, caller, req)
        });
    }

    // ── files ──

    fn upload_file(
        &mut self,
        ctx: RpcContext,
        requests: RequestStream<pb::FileChunk>,
        sink: ClientStreamingSink<pb::UploadFileResponse>,
    ) {
        match self.check_stream(&ctx, ActiveDevice) {
            Ok(addr) => files::upload(&self.store, &self.transfers, &self.threads, &ctx, addr, requests, sink),
            Err(err) => fail_stream("UploadFile", &ctx, err, |status| async move {
                let _ = sink.fail(status).await;
                drop(requests);
            }),
        }
    }

    fn download_file(
        &mut self,
        ctx: RpcContext,
        req: pb::DownloadFileRequest,
        sink: ServerStreamingSink<pb::FileChunk>,
    ) {
        match self.check_stream(&ctx, ActiveDevice) {
            Ok(addr) => files::download(&self.store, &self.transfers, &self.threads, &ctx, addr, req, sink),
            Err(err) => fail_stream("DownloadFile", &ctx, err, |status| async move {
                let _ = sink.fail(status).await;
            }),
        }
    }
    // ── groups (the MLS delivery service) ──

    fn upload_key_packages(&mut self, ctx: RpcContext, req: pb::KeyPackagesUpload, sink: UnarySink<pb::KeyPackagesUploadResponse>) {
        self.unary(&ctx, sink, "UploadKeyPackages", ActiveDevice, |s, addr| groups::upload_key_packages(&s.store, &s.hub, addr, req));
    }

    fn claim_key_packages(&mut self, ctx: RpcContext, req: pb::ClaimKeyPackagesRequest, sink: UnarySink<pb::ClaimKeyPackagesResponse>) {
        self.unary(&ctx, sink, "ClaimKeyPackages", ActiveDevice, |s, addr| groups::claim_key_packages(&s.store, &s.hub, addr, req));
    }

    fn create_group(&mut self, ctx: RpcContext, req: pb::CreateGroupRequest, sink: UnarySink<pb::Group>) {
        self.unary(&ctx, sink, "CreateGroup", ActiveDevice, |s, addr| groups::create_group(&s.store, &s.hub, addr, req));
    }

    fn get_group(&mut self, ctx: RpcContext, req: pb::GroupRequest, sink: UnarySink<pb::Group>) {
        self.unary(&ctx, sink, "GetGroup", ActiveDevice, |s, addr| groups::get_group(&s.store, &s.hub, addr, req));
    }

    fn get_group_info(&mut self, ctx: RpcContext, req: pb::GroupRequest, sink: UnarySink<pb::GroupInfoResponse>) {
        self.unary(&ctx, sink, "GetGroupInfo", ActiveDevice, |s, addr| groups::get_group_info(&s.store, &s.hub, addr, req));
    }

    fn list_groups(&mut self, ctx: RpcContext, req: pb::ListGroupsRequest, sink: UnarySink<pb::ListGroupsResponse>) {
        self.unary(&ctx, sink, "ListGroups", ActiveDevice, |s, addr| groups::list_groups(&s.store, &s.hub, addr, req));
    }

    fn add_group_member(&mut self, ctx: RpcContext, req: pb::AddGroupMemberRequest, sink: UnarySink<pb::MembershipResponse>) {
        self.unary(&ctx, sink, "AddGroupMember", ActiveDevice, |s, addr| groups::add_group_member(&s.store, &s.hub, addr, req));
    }

    fn remove_group_member(&mut self, ctx: RpcContext, req: pb::RemoveGroupMemberRequest, sink: UnarySink<pb::MembershipResponse>) {
        self.unary(&ctx, sink, "RemoveGroupMember", ActiveDevice, |s, addr| groups::remove_group_member(&s.store, &s.hub, addr, req));
    }

    fn leave_group(&mut self, ctx: RpcContext, req: pb::GroupRequest, sink: UnarySink<pb::MembershipResponse>) {
        self.unary(&ctx, sink, "LeaveGroup", ActiveDevice, |s, addr| groups::leave_group(&s.store, &s.hub, addr, req));
    }

    fn set_group_title(&mut self, ctx: RpcContext, req: pb::SetGroupTitleRequest, sink: UnarySink<pb::MembershipResponse>) {
        self.unary(&ctx, sink, "SetGroupTitle", ActiveDevice, |s, addr| groups::set_group_title(&s.store, &s.hub, addr, req));
    }

    fn send_group_message(&mut self, ctx: RpcContext, req: pb::SendGroupMessageRequest, sink: UnarySink<pb::SendGroupMessageResponse>) {
        self.unary(&ctx, sink, "SendGroupMessage", ActiveDevice, |s, addr| groups::send_group_message(&s.store, &s.hub, addr, req));
    }

    fn send_group_messages(&mut self, ctx: RpcContext, req: pb::SendGroupMessagesRequest, sink: UnarySink<pb::SendGroupMessagesResponse>) {
        self.unary(&ctx, sink, "SendGroupMessages", ActiveDevice, |s, addr| groups::send_group_messages(&s.store, &s.hub, addr, req));
    }

    fn unban_group_member(&mut self, ctx: RpcContext, req: pb::UnbanGroupMemberRequest, sink: UnarySink<pb::MembershipResponse>) {
        self.unary(&ctx, sink, "UnbanGroupMember", ActiveDevice, |s, addr| groups::unban_group_member(&s.store, &s.hub, addr, req));
    }

    fn restrict_group_member(&mut self, ctx: RpcContext, req: pb::RestrictGroupMemberRequest, sink: UnarySink<pb::MembershipResponse>) {
        self.unary(&ctx, sink, "RestrictGroupMember", ActiveDevice, |s, addr| groups::restrict_group_member(&s.store, &s.hub, addr, req));
    }

    fn promote_group_member(&mut self, ctx: RpcContext, req: pb::PromoteGroupMemberRequest, sink: UnarySink<pb::MembershipResponse>) {
        self.unary(&ctx, sink, "PromoteGroupMember", ActiveDevice, |s, addr| groups::promote_group_member(&s.store, &s.hub, addr, req));
    }

    fn delete_group_message(&mut self, ctx: RpcContext, req: pb::DeleteGroupMessageRequest, sink: UnarySink<pb::DeleteGroupMessageResponse>) {
        self.unary(&ctx, sink, "DeleteGroupMessage", ActiveDevice, |s, addr| groups::delete_group_message(&s.store, &s.hub, addr, req));
    }

    fn create_invite_link(&mut self, ctx: RpcContext, req: pb::CreateInviteLinkRequest, sink: UnarySink<pb::InviteLink>) {
        self.unary(&ctx, sink, "CreateInviteLink", ActiveDevice, |s, addr| groups::create_invite_link(&s.store, &s.hub, addr, req));
    }

    fn edit_invite_link(&mut self, ctx: RpcContext, req: pb::EditInviteLinkRequest, sink: UnarySink<pb::InviteLink>) {
        self.unary(&ctx, sink, "EditInviteLink", ActiveDevice, |s, addr| groups::edit_invite_link(&s.store, &s.hub, addr, req));
    }

    fn revoke_invite_link(&mut self, ctx: RpcContext, req: pb::InviteLinkRequest, sink: UnarySink<pb::InviteLink>) {
        self.unary(&ctx, sink, "RevokeInviteLink", ActiveDevice, |s, addr| groups::revoke_invite_link(&s.store, &s.hub, addr, req));
    }

    fn export_invite_link(&mut self, ctx: RpcContext, req: pb::GroupRequest, sink: UnarySink<pb::InviteLink>) {
        self.unary(&ctx, sink, "ExportInviteLink", ActiveDevice, |s, addr| groups::export_invite_link(&s.store, &s.hub, addr, req));
    }

    fn join_by_link(&mut self, ctx: RpcContext, req: pb::JoinByLinkRequest, sink: UnarySink<pb::JoinByLinkResponse>) {
        self.unary(&ctx, sink, "JoinByLink", ActiveDevice, |s, addr| groups::join_by_link(&s.store, &s.hub, addr, req));
    }

    fn approve_join_request(&mut self, ctx: RpcContext, req: pb::JoinRequestDecision, sink: UnarySink<pb::MembershipResponse>) {
        self.unary(&ctx, sink, "ApproveJoinRequest", ActiveDevice, |s, addr| groups::approve_join_request(&s.store, &s.hub, addr, req));
    }

    fn decline_join_request(&mut self, ctx: RpcContext, req: pb::JoinRequestDecision, sink: UnarySink<pb::MembershipResponse>) {
        self.unary(&ctx, sink, "DeclineJoinRequest", ActiveDevice, |s, addr| groups::decline_join_request(&s.store, &s.hub, addr, req));
    }
}
