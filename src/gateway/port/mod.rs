//! The platform as one bot's runtime sees it: every call the gateway makes goes through
//! [`PlatformPort`], held by the bot's shared state (`BotShared::platform`).
//!
//! - `grpc.rs`: the real port, the bot device's gRPC channel to the platform server.
//! - `fake.rs` (tests only): an in-memory platform whose answers a test scripts, so unit tests
//!   drive the inbox, outbox, groups, administration and media code without a server, and can
//!   play a malicious platform (a forged commit, another group's GroupInfo, a dropped answer,
//!   a file with other bytes).
//!
//! A call answers as gRPC does (`grpcio::Result`): a refusal is a status with its code and
//! message, so `wire::rpc` reads a fake's refusal exactly as a real one.

use std::pin::Pin;

use crate::e2e::file::FileTransport;
use crate::e2e::group::short_id;
use crate::gateway::store::StoreError;
use crate::wire::platform::*;
use crate::wire::rpc;

pub mod grpc;

#[cfg(test)]
pub mod fake;

pub use grpc::GrpcPort;

/// An answer of the platform.
pub type Reply<T> = grpcio::Result<T>;

/// A call sent and not yet answered (`wire::in_flight`).
pub use crate::wire::in_flight::Pending;

/// A credential check sent and not yet answered ([`PlatformPort::start_verify_credential`]).
pub type PendingCheck = Pending<VerifyCredentialResponse>;

/// An acknowledgement sent and not yet answered ([`PlatformPort::start_ack`]).
pub type PendingAck = Pending<AckResponse>;

/// The platform's Inbox stream: envelopes until the platform ends it (or the call fails).
pub type InboxStream = Pin<Box<dyn futures::Stream<Item = grpcio::Result<InboxEnvelope>> + Send>>;

/// Calls `$then!` with the list of the platform's unary calls the gateway makes: the method's
/// name (the generated client's), its request and its response. One list makes the trait, the
/// gRPC port and the fake, so they cannot drift apart.
macro_rules! unary_calls {
    ($then:ident) => {
        $then! {
            // Start-up and the credential.
            verify_credential(VerifyCredentialRequest) -> VerifyCredentialResponse;
            register_bot_device(RegisterBotDeviceRequest) -> RegisterBotDeviceResponse;
            lookup_user(LookupUserRequest) -> Profile;
            list_devices(ListDevicesRequest) -> ListDevicesResponse;
            certify_device(CertifyDeviceRequest) -> CertifyDeviceResponse;
            remove_device(RemoveDeviceRequest) -> RemoveDeviceResponse;
            // Private dialogs.
            get_prekey_bundles(GetPrekeyBundlesRequest) -> GetPrekeyBundlesResponse;
            get_device_certificates(GetDeviceCertificatesRequest) -> GetDeviceCertificatesResponse;
            upload_prekeys(UploadPrekeysRequest) -> UploadPrekeysResponse;
            send_messages(SendMessagesRequest) -> SendMessagesResponse;
            reserve_message_ids(ReserveMessageIdsRequest) -> ReserveMessageIdsResponse;
            // The bot's profile.
            set_bot_commands(SetBotCommandsRequest) -> SetBotCommandsResponse;
            get_bot_commands(GetBotCommandsRequest) -> GetBotCommandsResponse;
            set_bot_description(SetBotDescriptionRequest) -> SetBotDescriptionResponse;
            get_bot_description(GetBotDescriptionRequest) -> BotDescription;
            // Groups and channels.
            upload_key_packages(KeyPackagesUpload) -> KeyPackagesUploadResponse;
            get_group(GroupRequest) -> Group;
            get_group_info(GroupRequest) -> GroupInfoResponse;
            leave_group(GroupRequest) -> MembershipResponse;
            send_group_message(SendGroupMessageRequest) -> SendGroupMessageResponse;
            // Administration.
            set_group_title(SetGroupTitleRequest) -> MembershipResponse;
            remove_group_member(RemoveGroupMemberRequest) -> MembershipResponse;
            unban_group_member(UnbanGroupMemberRequest) -> MembershipResponse;
            restrict_group_member(RestrictGroupMemberRequest) -> MembershipResponse;
            promote_group_member(PromoteGroupMemberRequest) -> MembershipResponse;
            delete_group_message(DeleteGroupMessageRequest) -> DeleteGroupMessageResponse;
            create_invite_link(CreateInviteLinkRequest) -> InviteLink;
            edit_invite_link(EditInviteLinkRequest) -> InviteLink;
            revoke_invite_link(InviteLinkRequest) -> InviteLink;
            export_invite_link(GroupRequest) -> InviteLink;
            approve_join_request(JoinRequestDecision) -> MembershipResponse;
            decline_join_request(JoinRequestDecision) -> MembershipResponse;
        }
    };
}
pub(crate) use unary_calls;

macro_rules! port_trait {
    ($($name:ident($req:ty) -> $resp:ty;)*) => {
        /// The platform, one call per method: the unary calls of `unary_calls!`, the Inbox
        /// stream, and the file transfers.
        pub trait PlatformPort: Send + Sync {
            $(fn $name(&self, req: &$req) -> Reply<$resp>;)*

            /// Sends a `VerifyCredential` without waiting for its answer, so that several can be
            /// in flight at once (the webhook checks a few attempts ahead).
            fn start_verify_credential(&self) -> PendingCheck;

            /// Sends an `Ack` without waiting for its answer, so that the inbox imports the
            /// next batch meanwhile (a busy platform answers one in tens of milliseconds). The
            /// gateway's only `Ack`: there is no waiting one.
            fn start_ack(&self, req: &AckRequest) -> PendingAck;

            /// Opens the Inbox stream (no deadline: it lives until the bot stops or the
            /// platform ends it).
            fn inbox(&self) -> Reply<InboxStream>;

            /// Where the media methods upload and download files (`e2e::file`, shared with
            /// the user client): the gRPC channel, or the fake's files in memory.
            fn files(&self) -> &dyn FileTransport;

            /// This runtime's device number on the platform (0 before registration).
            fn device_id(&self) -> u32;
        }
    };
}
unary_calls!(port_trait);

/// A refusal as the platform words one: its status code and message.
pub fn refusal(code: grpcio::RpcStatusCode, message: impl Into<String>) -> grpcio::Error {
    grpcio::Error::RpcFailure(grpcio::RpcStatus::with_message(code, message.into()))
}

/// Why a thread's step that calls the platform failed (a group step, a prekey or key package
/// top-up): it is tried again later, and nothing of it was half done.
#[derive(Debug)]
pub enum StepError {
    /// The bot's store failed, or refused what the step would have written.
    Store(StoreError),
    /// A platform call failed: which call, the group it was about (if any), and its status.
    Platform { call: &'static str, group: Option<String>, error: Box<grpcio::Error> },
    /// The platform answered something this device cannot accept.
    Refused(String),
}

impl StepError {
    /// A failed platform call.
    pub fn platform(call: &'static str, error: grpcio::Error) -> StepError {
        StepError::Platform { call, group: None, error: Box::new(error) }
    }

    /// A failed platform call about the group `group_id`.
    pub fn group_call(call: &'static str, group_id: &[u8], error: grpcio::Error) -> StepError {
        StepError::Platform { call, group: Some(short_id(group_id)), error: Box::new(error) }
    }
}

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StepError::Store(e) => write!(f, "store: {e}"),
            StepError::Platform { call, group: Some(group), error } => write!(f, "{call} (group {group}): {}", rpc::text(error)),
            StepError::Platform { call, group: None, error } => write!(f, "{call}: {}", rpc::text(error)),
            StepError::Refused(why) => f.write_str(why),
        }
    }
}

impl From<StoreError> for StepError {
    fn from(e: StoreError) -> StepError {
        StepError::Store(e)
    }
}
