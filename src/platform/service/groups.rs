//! Groups: the MLS delivery service (docs/groups.md, "The delivery service"). Each handler
//! decodes and checks the request's shape (ids, lengths, that MLS bytes parse as what they
//! claim to be, key packages verified), then the store runs the rules in one transaction
//! (`store::groups`) and the inbox feeders of the devices it wrote to are woken.

use openmls::prelude::*;

use super::super::convert::invalid;
use super::messaging::check_batch_len;
use super::super::error::{PlatformError, Result};
use super::super::inbox::InboxHub;
use super::super::store::{parse_group_info, DeviceAddr, GroupMessage, GroupSendOutcome, LinkSettings, NewGroup, Store, LINK_PREFIX};
use crate::wire::Invalid;
use crate::clock::unix_now;
use crate::crypto::mls;
use crate::e2e::group::short_id;
use crate::wire::platform::{self as pb, send_group_message_response::Status};

/// Group titles are 1 to 128 characters.
pub const TITLE_MAX: usize = 128;
/// Most key packages in one upload.
pub const KEY_PACKAGES_PER_REQUEST_MAX: usize = 100;
/// Largest accepted key package, in bytes.
pub const KEY_PACKAGE_MAX: usize = 64 << 10;

fn group_id(bytes: &[u8]) -> Result<Vec<u8>> {
    if bytes.len() != 32 {
        return Err(invalid(format!("group_id must be 32 bytes, got {}", bytes.len())));
    }
    Ok(bytes.to_vec())
}

pub(super) fn upload_key_packages(
    store: &Store,
    _hub: &InboxHub,
    caller: DeviceAddr,
    req: pb::KeyPackagesUpload,
) -> Result<pb::KeyPackagesUploadResponse> {
    let n = req.key_packages.len();
    // An empty upload only asks how many remain (as UploadPrekeys does).
    if n > KEY_PACKAGES_PER_REQUEST_MAX {
        return Err(invalid(format!("send at most {KEY_PACKAGES_PER_REQUEST_MAX} key packages, got {n}")));
    }
    let device_key = store
        .device(caller)?
        .filter(|d| d.active)
        .ok_or_else(|| PlatformError::Unauthenticated("this call needs an active device".into()))?
        .device_key;
    let identity_key = store
        .account_by_id(caller.user_id)?
        .ok_or_else(|| PlatformError::Unauthenticated("this call needs an active device".into()))?
        .identity_key;
    let crypto = openmls_rust_crypto::RustCrypto::default();
    for (i, bytes) in req.key_packages.iter().enumerate() {
        check_key_package(&crypto, bytes, caller, &device_key, &identity_key)
            .map_err(|e| invalid(format!("key package {i}: {e}")))?;
    }
    let remaining = store.upload_key_packages(caller, &req.key_packages, unix_now())?;
    Ok(pb::KeyPackagesUploadResponse { remaining, ..Default::default() })
}

/// A key package of the caller's device: it verifies, uses the platform's ciphersuite, and
/// its leaf names the device, carries its registered key, and the proof by which the account's
/// identity key vouches for that key.
fn check_key_package(
    crypto: &impl openmls_traits::crypto::OpenMlsCrypto,
    bytes: &[u8],
    caller: DeviceAddr,
    device_key: &[u8],
    identity_key: &[u8],
) -> std::result::Result<(), Invalid> {
    if bytes.is_empty() || bytes.len() > KEY_PACKAGE_MAX {
        return Err(Invalid::new(format!("must be 1 to {KEY_PACKAGE_MAX} bytes, got {}", bytes.len())));
    }
    let MlsMessageBodyIn::KeyPackage(kp) = mls::parse_message(bytes).map_err(|e| Invalid::new(e.to_string()))?.extract() else {
        return Err(Invalid::new("is an MLS message but not a KeyPackage"));
    };
    let kp = kp.validate(crypto, ProtocolVersion::Mls10).map_err(|e| Invalid(format!("does not verify: {e}")))?;
    if kp.ciphersuite() != mls::CIPHERSUITE {
        return Err(Invalid::new(format!("uses {:?}; the platform serves {:?}", kp.ciphersuite(), mls::CIPHERSUITE)));
    }
    let leaf = kp.leaf_node();
    if mls::device_of(leaf.credential()) != Some((caller.user_id, caller.device_id)) {
        return Err(Invalid::new("its credential does not name the calling device (user id, device id, identity key, certificate)"));
    }
    if leaf.signature_key().as_slice() != device_key {
        return Err(Invalid::new("its signature key is not the device's registered key"));
    }
    let vouched = mls::leaf_identity(leaf.credential()).and_then(|l| l.vouching_key(device_key));
    if vouched.map(|k| k.to_vec()).as_deref() != Some(identity_key) {
        return Err(Invalid::new("its credential carries no proof by the account's identity key"));
    }
    Ok(())
}

pub(super) fn claim_key_packages(
    store: &Store,
    _hub: &InboxHub,
    caller: DeviceAddr,
    req: pb::ClaimKeyPackagesRequest,
) -> Result<pb::ClaimKeyPackagesResponse> {
    let (taken, devices_without) = store.claim_key_packages(caller, req.user_id)?;
    Ok(pb::ClaimKeyPackagesResponse {
        key_packages: taken
            .into_iter()
            .map(|(device_id, key_package)| pb::DeviceKeyPackage { device_id, key_package, ..Default::default() })
            .collect(),
        devices_without,
        ..Default::default()
    })
}

pub(super) fn create_group(
    store: &Store,
    _hub: &InboxHub,
    caller: DeviceAddr,
    req: pb::CreateGroupRequest,
) -> Result<pb::Group> {
    let group_id = group_id(&req.group_id)?;
    check_title(&req.title)?;
    let group_type = req.type_.enum_value().map_err(|v| invalid(format!("unknown group type {v}")))?;
    let parsed_info = parse_group_info(&req.group_info)?;
    let group = NewGroup { group_id, title: req.title, group_type, group_info: req.group_info, parsed_info };
    let created = store.create_group(caller, group, unix_now())?;
    log::info!("user {} created group {}", caller.user_id, short_id(&created.group_id));
    Ok(created)
}

pub(super) fn get_group(
    store: &Store,
    _hub: &InboxHub,
    caller: DeviceAddr,
    req: pb::GroupRequest,
) -> Result<pb::Group> {
    let only = req.only_members.then_some(&req.member_ids[..]);
    if only.is_some_and(|users| users.len() > MEMBER_IDS_MAX) {
        return Err(PlatformError::InvalidArgument(format!("member_ids lists at most {MEMBER_IDS_MAX} users")));
    }
    store.get_group_with(caller.user_id, &group_id(&req.group_id)?, only)
}

/// Users one GetGroup may ask for by id (`only_members`): a point query each.
const MEMBER_IDS_MAX: usize = 100;

pub(super) fn get_group_info(
    store: &Store,
    _hub: &InboxHub,
    caller: DeviceAddr,
    req: pb::GroupRequest,
) -> Result<pb::GroupInfoResponse> {
    let (group_info, epoch) = store.group_info(caller.user_id, &group_id(&req.group_id)?)?;
    Ok(pb::GroupInfoResponse { group_info, epoch, ..Default::default() })
}

pub(super) fn list_groups(
    store: &Store,
    _hub: &InboxHub,
    caller: DeviceAddr,
    _req: pb::ListGroupsRequest,
) -> Result<pb::ListGroupsResponse> {
    Ok(pb::ListGroupsResponse { groups: store.list_groups(caller.user_id)?, ..Default::default() })
}

/// A membership change's answer, after waking the devices it told.
fn membership(
    hub: &InboxHub,
    (group, told): (pb::Group, std::collections::BTreeSet<DeviceAddr>),
) -> pb::MembershipResponse {
    hub.notify(&told);
    pb::MembershipResponse { group: Some(group).into(), ..Default::default() }
}

pub(super) fn add_group_member(
    store: &Store,
    hub: &InboxHub,
    caller: DeviceAddr,
    req: pb::AddGroupMemberRequest,
) -> Result<pb::MembershipResponse> {
    let changed = store.add_group_member(caller, &group_id(&req.group_id)?, req.user_id, unix_now())?;
    Ok(membership(hub, changed))
}

pub(super) fn remove_group_member(
    store: &Store,
    hub: &InboxHub,
    caller: DeviceAddr,
    req: pb::RemoveGroupMemberRequest,
) -> Result<pb::MembershipResponse> {
    let changed = store.remove_group_member(caller, &group_id(&req.group_id)?, req.user_id, req.until_date.max(0), unix_now())?;
    Ok(membership(hub, changed))
}

pub(super) fn leave_group(
    store: &Store,
    hub: &InboxHub,
    caller: DeviceAddr,
    req: pb::GroupRequest,
) -> Result<pb::MembershipResponse> {
    let changed = store.leave_group(caller, &group_id(&req.group_id)?, unix_now())?;
    Ok(membership(hub, changed))
}

fn check_title(title: &str) -> Result<()> {
    let len = title.chars().count();
    if title.trim().is_empty() || len > TITLE_MAX || title.chars().any(char::is_control) {
        return Err(invalid(format!(
            "title must be 1 to {TITLE_MAX} characters without control characters, got {len} characters"
        )));
    }
    Ok(())
}

pub(super) fn set_group_title(
    store: &Store,
    hub: &InboxHub,
    caller: DeviceAddr,
    req: pb::SetGroupTitleRequest,
) -> Result<pb::MembershipResponse> {
    check_title(&req.title)?;
    let changed = store.set_group_title(caller, &group_id(&req.group_id)?, &req.title, unix_now())?;
    Ok(membership(hub, changed))
}

pub(super) fn send_group_message(
    store: &Store,
    hub: &InboxHub,
    caller: DeviceAddr,
    req: pb::SendGroupMessageRequest,
) -> Result<pb::SendGroupMessageResponse> {
    store.name_files(caller, req.names_files, &req.file_refs)?;
    let m = decode_group_message(req)?;
    let (outcome, told) = store.send_group_message(caller, m, unix_now(), hub)?;
    hub.notify(&told);
    Ok(group_send_response(outcome))
}

/// SendGroupMessages: a message that does not decode is REJECTED with why, the rest go in one
/// transaction (`Store::send_group_messages`).
pub(super) fn send_group_messages(
    store: &Store,
    hub: &InboxHub,
    caller: DeviceAddr,
    req: pb::SendGroupMessagesRequest,
) -> Result<pb::SendGroupMessagesResponse> {
    check_batch_len(req.messages.len(), "group messages")?;
    let named: Vec<String> = req.messages.iter().flat_map(|m| m.file_refs.iter().cloned()).collect();
    store.name_files(caller, req.messages.iter().any(|m| m.names_files), &named)?;
    // In order: None for a message that decoded (its outcome comes from the store), or why not.
    let mut refusals = Vec::with_capacity(req.messages.len());
    let mut valid = Vec::with_capacity(req.messages.len());
    for m in req.messages {
        match decode_group_message(m) {
            Ok(m) => {
                valid.push(m);
                refusals.push(None);
            }
            Err(e) => refusals.push(Some(e.to_string())),
        }
    }
    let (outcomes, told) = store.send_group_messages(caller, &valid, unix_now(), hub)?;
    hub.notify(&told);
    let mut outcomes = outcomes.into_iter();
    let results = refusals
        .into_iter()
        .map(|refusal| group_send_response(match refusal {
            None => outcomes.next().expect("one outcome per decoded message"),
            Some(why) => GroupSendOutcome::Rejected(why),
        }))
        .collect();
    Ok(pb::SendGroupMessagesResponse { results, ..Default::default() })
}

fn decode_group_message(req: pb::SendGroupMessageRequest) -> Result<GroupMessage> {
    let group_id = group_id(&req.group_id)?;
    GroupMessage::decode(group_id, req.client_message_id, req.message, req.group_info, req.welcome)
}

fn group_send_response(outcome: GroupSendOutcome) -> pb::SendGroupMessageResponse {
    let mut r = pb::SendGroupMessageResponse::default();
    match outcome {
        GroupSendOutcome::Ok { epoch, group_seq, message_id, date } => {
            r.status = Status::OK.into();
            (r.epoch, r.group_seq, r.message_id, r.date) = (epoch, group_seq, message_id, date);
        }
        GroupSendOutcome::Stale { epoch } => {
            r.status = Status::STALE_EPOCH.into();
            r.epoch = epoch;
        }
        GroupSendOutcome::Rejected(error) => {
            r.status = Status::REJECTED.into();
            r.error = error;
        }
        GroupSendOutcome::RemovalsPending { users, devices } => {
            r.status = Status::REMOVALS_PENDING.into();
            r.error = "commit the removal of the leaves of the users who left or were removed, and of removed devices, first".into();
            r.pending_removals = users;
            r.pending_device_removals = devices
                .into_iter()
                .map(|d| pb::LeafDevice { user_id: d.user_id, device_id: d.device_id, ..Default::default() })
                .collect();
        }
    }
    r
}

// ── Administration (store/groups/admin.rs has the rules) ──

pub(super) fn unban_group_member(
    store: &Store,
    hub: &InboxHub,
    caller: DeviceAddr,
    req: pb::UnbanGroupMemberRequest,
) -> Result<pb::MembershipResponse> {
    let changed = store.unban_group_member(caller, &group_id(&req.group_id)?, req.user_id, req.only_if_banned, unix_now())?;
    Ok(membership(hub, changed))
}

pub(super) fn restrict_group_member(
    store: &Store,
    hub: &InboxHub,
    caller: DeviceAddr,
    req: pb::RestrictGroupMemberRequest,
) -> Result<pb::MembershipResponse> {
    let gid = group_id(&req.group_id)?;
    let changed =
        store.restrict_group_member(caller, &gid, req.user_id, req.can_send_messages, req.until_date.max(0), unix_now())?;
    Ok(membership(hub, changed))
}

/// AdminRights as bits in field order (the store's form).
fn rights_bits(r: &pb::AdminRights) -> u32 {
    [
        r.can_change_info,
        r.can_delete_messages,
        r.can_invite_users,
        r.can_restrict_members,
        r.can_promote_members,
        r.can_post_messages,
        r.can_manage_chat,
    ]
    .iter()
    .enumerate()
    .fold(0, |bits, (i, on)| if *on { bits | 1 << i } else { bits })
}

pub(super) fn promote_group_member(
    store: &Store,
    hub: &InboxHub,
    caller: DeviceAddr,
    req: pb::PromoteGroupMemberRequest,
) -> Result<pb::MembershipResponse> {
    let bits = rights_bits(req.rights.get_or_default());
    let changed = store.promote_group_member(caller, &group_id(&req.group_id)?, req.user_id, bits, unix_now())?;
    Ok(membership(hub, changed))
}

pub(super) fn delete_group_message(
    store: &Store,
    hub: &InboxHub,
    caller: DeviceAddr,
    req: pb::DeleteGroupMessageRequest,
) -> Result<pb::DeleteGroupMessageResponse> {
    if req.message_id == 0 {
        return Err(invalid("message_id is required"));
    }
    let told = store.delete_group_message(caller, &group_id(&req.group_id)?, req.message_id, unix_now())?;
    hub.notify(&told);
    Ok(pb::DeleteGroupMessageResponse::new())
}

// ── Invite links and join requests ──

/// A link as sent: `e2e://join/` and a token of URL-safe base64.
fn check_link(link: &str) -> Result<&str> {
    let token = link.strip_prefix(LINK_PREFIX).unwrap_or("");
    if token.is_empty() || token.len() > 64 || !token.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        return Err(invalid(format!("invite link must look like {LINK_PREFIX}<token>")));
    }
    Ok(link)
}

fn link_settings(s: &pb::InviteLinkSettings) -> LinkSettings {
    LinkSettings {
        name: s.name.clone(),
        expire_date: s.expire_date,
        member_limit: s.member_limit,
        creates_join_request: s.creates_join_request,
    }
}

pub(super) fn create_invite_link(
    store: &Store,
    _hub: &InboxHub,
    caller: DeviceAddr,
    req: pb::CreateInviteLinkRequest,
) -> Result<pb::InviteLink> {
    let settings = link_settings(req.settings.get_or_default());
    store.create_invite_link(caller, &group_id(&req.group_id)?, &settings, unix_now())
}

pub(super) fn edit_invite_link(
    store: &Store,
    _hub: &InboxHub,
    caller: DeviceAddr,
    req: pb::EditInviteLinkRequest,
) -> Result<pb::InviteLink> {
    let settings = link_settings(req.settings.get_or_default());
    store.edit_invite_link(caller, &group_id(&req.group_id)?, check_link(&req.link)?, &settings, unix_now())
}

pub(super) fn revoke_invite_link(
    store: &Store,
    _hub: &InboxHub,
    caller: DeviceAddr,
    req: pb::InviteLinkRequest,
) -> Result<pb::InviteLink> {
    store.revoke_invite_link(caller, &group_id(&req.group_id)?, check_link(&req.link)?, unix_now())
}

pub(super) fn export_invite_link(
    store: &Store,
    _hub: &InboxHub,
    caller: DeviceAddr,
    req: pb::GroupRequest,
) -> Result<pb::InviteLink> {
    store.export_invite_link(caller, &group_id(&req.group_id)?, unix_now())
}

pub(super) fn join_by_link(
    store: &Store,
    hub: &InboxHub,
    caller: DeviceAddr,
    req: pb::JoinByLinkRequest,
) -> Result<pb::JoinByLinkResponse> {
    let (answer, told) = store.join_by_link(caller, check_link(&req.link)?, unix_now())?;
    hub.notify(&told);
    Ok(answer)
}

pub(super) fn approve_join_request(
    store: &Store,
    hub: &InboxHub,
    caller: DeviceAddr,
    req: pb::JoinRequestDecision,
) -> Result<pb::MembershipResponse> {
    let changed = store.decide_join_request(caller, &group_id(&req.group_id)?, req.user_id, true, unix_now())?;
    Ok(membership(hub, changed))
}

pub(super) fn decline_join_request(
    store: &Store,
    hub: &InboxHub,
    caller: DeviceAddr,
    req: pb::JoinRequestDecision,
) -> Result<pb::MembershipResponse> {
    let changed = store.decide_join_request(caller, &group_id(&req.group_id)?, req.user_id, false, unix_now())?;
    Ok(membership(hub, changed))
}
