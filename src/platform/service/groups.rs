//! Groups: the MLS delivery service (docs/groups.md). Not served yet: every call answers
//! FAILED_PRECONDITION until the delivery service lands.

use super::super::error::{PlatformError, Result};
use super::super::inbox::InboxHub;
use super::super::store::{DeviceAddr, Store};
use crate::wire::platform as pb;

fn not_yet<T>() -> Result<T> {
    Err(PlatformError::FailedPrecondition("groups are not served by this platform yet".into()))
}

pub(super) fn upload_key_packages(_store: &Store, _hub: &InboxHub, _caller: DeviceAddr, _req: pb::KeyPackagesUpload) -> Result<pb::KeyPackagesUploadResponse> {
    not_yet()
}

pub(super) fn claim_key_packages(_store: &Store, _hub: &InboxHub, _caller: DeviceAddr, _req: pb::ClaimKeyPackagesRequest) -> Result<pb::ClaimKeyPackagesResponse> {
    not_yet()
}

pub(super) fn create_group(_store: &Store, _hub: &InboxHub, _caller: DeviceAddr, _req: pb::CreateGroupRequest) -> Result<pb::Group> {
    not_yet()
}

pub(super) fn get_group(_store: &Store, _hub: &InboxHub, _caller: DeviceAddr, _req: pb::GroupRequest) -> Result<pb::Group> {
    not_yet()
}

pub(super) fn get_group_info(_store: &Store, _hub: &InboxHub, _caller: DeviceAddr, _req: pb::GroupRequest) -> Result<pb::GroupInfoResponse> {
    not_yet()
}

pub(super) fn list_groups(_store: &Store, _hub: &InboxHub, _caller: DeviceAddr, _req: pb::ListGroupsRequest) -> Result<pb::ListGroupsResponse> {
    not_yet()
}

pub(super) fn add_group_member(_store: &Store, _hub: &InboxHub, _caller: DeviceAddr, _req: pb::AddGroupMemberRequest) -> Result<pb::MembershipResponse> {
    not_yet()
}

pub(super) fn remove_group_member(_store: &Store, _hub: &InboxHub, _caller: DeviceAddr, _req: pb::RemoveGroupMemberRequest) -> Result<pb::MembershipResponse> {
    not_yet()
}

pub(super) fn leave_group(_store: &Store, _hub: &InboxHub, _caller: DeviceAddr, _req: pb::GroupRequest) -> Result<pb::MembershipResponse> {
    not_yet()
}

pub(super) fn send_group_message(_store: &Store, _hub: &InboxHub, _caller: DeviceAddr, _req: pb::SendGroupMessageRequest) -> Result<pb::SendGroupMessageResponse> {
    not_yet()
}
