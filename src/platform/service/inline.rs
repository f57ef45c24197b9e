//! Inline sessions: StartInlineSession and ChooseInlineResult (a user's calls). The bot's answers
//! are ordinary SendMessages bound to a session (`OutgoingMessage.inline_session_id`).

use super::super::error::Result;
use super::super::store::{DeviceAddr, Store};
use crate::clock::unix_now;
use crate::wire::platform as pb;

pub(super) fn start_inline_session(
    store: &Store,
    caller: DeviceAddr,
    req: pb::StartInlineSessionRequest,
) -> Result<pb::StartInlineSessionResponse> {
    let s = store.start_inline_session(caller.user_id, req.bot_user_id, unix_now())?;
    Ok(pb::StartInlineSessionResponse { session_id: s.id, expires_at: s.expires_at, ..Default::default() })
}

pub(super) fn choose_inline_result(
    store: &Store,
    caller: DeviceAddr,
    req: pb::ChooseInlineResultRequest,
) -> Result<pb::ChooseInlineResultResponse> {
    let repeat = store.choose_inline_result(caller.user_id, req.session_id, &req.result_id, unix_now())?;
    Ok(pb::ChooseInlineResultResponse { repeat, ..Default::default() })
}
