//! Files on the web page: a message's file served to the page (fetched and checked whole first,
//! decrypted as it is written, never kept in plaintext), and files the person picks or drops,
//! staged in the profile directory and then sent (two to ten as an album).
//!
//! What the page may show inline is a short list of image, audio and video types; anything
//! else, whatever type the sender claimed, is an attachment. Every file answer carries
//! `nosniff` and a sandbox CSP, so a file can never run as a page of this origin.

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use serde_json::{json, Value};

use super::super::super::history::group_peer;
use super::super::super::message::GroupId;
use super::super::super::profile::Profile;
use super::super::lock;
use super::answer::{json_response, text};
use super::input::Input;
use crate::crypto::file::MAX_PLAINTEXT_LEN;
use crate::http::{Request, Response};

/// Types a browser may show inline; anything else is downloaded.
const INLINE_TYPES: [&str; 12] = [
    "image/jpeg",
    "image/png",
    "image/gif",
    "image/webp",
    "audio/mpeg",
    "audio/ogg",
    "audio/mp4",
    "audio/wav",
    "video/mp4",
    "video/webm",
    "video/ogg",
    "audio/webm",
];
/// What a file answer allows: nothing runs, nothing loads.
const FILE_CSP: &str = "default-src 'none'; sandbox";
/// Files staged and not sent yet; more must be sent (or the server restarted) first.
pub const MAX_STAGED: usize = 10;

/// Where staged files wait: a directory of this server's own in the system's temporary
/// directory, private to the user (0700). Not in the profile: a profile never sends a file
/// from inside itself (`Profile::send_file`), so nothing of the keys can be sent by mistake.
pub fn make_stage() -> std::io::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("e2e-chat-web-{}", crate::crypto::hex_encode(&crate::crypto::random_bytes::<8>())));
    fs::DirBuilder::new().mode(0o700).create(&dir)?;
    Ok(dir)
}

/// Removes the staging directory and what is left in it.
pub fn remove_stage(dir: &Path) {
    if let Err(e) = fs::remove_dir_all(dir) {
        if e.kind() != std::io::ErrorKind::NotFound {
            log::warn!("cannot remove {}: {e}", dir.display());
        }
    }
}

/// `GET /api/file?chat=KEY&id=N`: the file of message N of conversation KEY (`user:ID` or
/// `group:HEX`), checked whole, then decrypted into the answer.
pub fn serve(input: &Input, chat: &str, message_id: u64) -> Response {
    let Some(peer_key) = history_key(chat) else {
        return text(400, "Bad Request: chat must be user:ID or group:HEX");
    };
    let (media, verified) = match input.typist.verified_file(peer_key, message_id) {
        Ok(found) => found,
        Err(e) => return text(404, &format!("Not Found: {e}")),
    };
    let inline = INLINE_TYPES.contains(&media.mime_type.as_str());
    let content_type = if inline { media.mime_type.as_str() } else { "application/octet-stream" };
    let disposition = format!("{}; {}", if inline { "inline" } else { "attachment" }, file_name_params(&media.file_name));
    let len = verified.len;
    Response::streamed(
        200,
        content_type,
        len,
        Box::new(move |out: &mut dyn Write| verified.write_plaintext(out).map(|_| ()).map_err(std::io::Error::other)),
    )
    .with_header("Content-Disposition", &disposition)
    .with_header("Content-Security-Policy", FILE_CSP)
    .served()
}

/// The conversation's key in the profile's history: a dialog's user id, or the group's.
fn history_key(chat: &str) -> Option<u64> {
    match chat.split_once(':')? {
        ("user", id) => id.parse().ok(),
        ("group", hex) => {
            let bytes = crate::crypto::hex_decode(hex)?;
            Some(group_peer(&GroupId::from_slice(&bytes)?.0))
        }
        _ => None,
    }
}

/// `filename="…"` (ASCII, quotes and controls dropped) and `filename*` (the name as UTF-8).
fn file_name_params(name: &str) -> String {
    let ascii: String = name.chars().filter(|c| c.is_ascii_graphic() && !matches!(c, '"' | '\\') || *c == ' ').collect();
    let encoded: String = name
        .bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b"-._~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect();
    format!("filename=\"{}\"; filename*=UTF-8''{encoded}", if ascii.is_empty() { "file" } else { &ascii })
}

/// `POST /api/stage?name=NAME`, the file as the body: kept until it is sent; answers its id.
/// The body is read without holding the input, so a slow upload does not stop the page.
pub fn stage(input: &Mutex<Input>, rq: &mut Request<'_>, name: &str) -> Response {
    let stage_dir = {
        let input = input.lock().unwrap_or_else(PoisonError::into_inner);
        if input.staged.files.len() >= MAX_STAGED {
            return text(409, "Conflict: ten files wait to be sent already; send them first");
        }
        input.stage_dir.clone()
    };
    match rq.body_length() {
        Some(n) if n > MAX_PLAINTEXT_LEN => return text(413, "Payload Too Large: a file is at most 50 MiB"),
        Some(0) => return text(400, "Bad Request: the file is empty"),
        _ => {}
    }
    let id = crate::crypto::hex_encode(&crate::crypto::random_bytes::<16>());
    let dir = stage_dir.join(&id);
    let path = dir.join(safe_name(name));
    let written = fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).and_then(|()| {
        let mut file = fs::File::create(&path)?;
        let n = std::io::copy(&mut rq.body().take(MAX_PLAINTEXT_LEN + 1), &mut file)?;
        file.sync_all()?;
        Ok(n)
    });
    match written {
        Ok(n) if n > 0 && n <= MAX_PLAINTEXT_LEN => {
            input.lock().unwrap_or_else(PoisonError::into_inner).staged.files.insert(id.clone(), path);
            json_response(200, &json!({ "id": id }))
        }
        Ok(n) => {
            let _ = fs::remove_dir_all(&dir);
            text(if n == 0 { 400 } else { 413 }, "Bad Request: a file has 1 byte to 50 MiB")
        }
        Err(e) => {
            let _ = fs::remove_dir_all(&dir);
            text(400, &format!("Bad Request: the file could not be read: {e}"))
        }
    }
}

/// A name safe to create in the staging directory: no separators, no controls, no dot files.
fn safe_name(name: &str) -> String {
    let cleaned: String = name.chars().filter(|c| !c.is_control() && !matches!(c, '/' | '\\')).take(100).collect();
    let cleaned = cleaned.trim().trim_start_matches('.').to_string();
    if cleaned.is_empty() { "file".to_string() } else { cleaned }
}

/// `POST /api/send-files {"ids": [...], "caption": "..."}`: the staged files into the open
/// conversation, one message, or an album of two to ten in a dialog.
pub fn send(input: &mut Input, body: &Value) -> Response {
    let ids: Vec<String> = body["ids"].as_array().map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect()).unwrap_or_default();
    let caption = body["caption"].as_str().unwrap_or_default().to_string();
    if ids.is_empty() {
        return text(400, "Bad Request: ids must name one or more staged files");
    }
    let Some(paths) = ids.iter().map(|id| input.staged.files.get(id).cloned()).collect::<Option<Vec<PathBuf>>>() else {
        return text(404, "Not Found: a file with that id was not staged (or was sent already)");
    };
    let (peer, group) = {
        let target = lock(&input.target);
        (target.peer.as_ref().map(|p| (p.username.clone(), p.user_id)), target.group.as_ref().map(|(id, _)| *id))
    };
    let sent = send_paths(&input.typist, peer.as_ref().map(|(name, _)| name.as_str()), group.as_ref(), &paths, &caption);
    for id in &ids {
        if let Some(path) = input.staged.files.remove(id) {
            if let Some(dir) = path.parent() {
                let _ = fs::remove_dir_all(dir);
            }
        }
    }
    match sent {
        Ok(message_ids) => {
            // Shown as the profile remembers them: the page draws our files as it draws theirs.
            let peer_key = group.map(|g| group_peer(&g.0)).or(peer.map(|(_, user_id)| user_id)).unwrap_or_default();
            for message_id in &message_ids {
                input.screen.own_message(&input.typist, peer_key, *message_id);
            }
            json_response(200, &json!({ "message_ids": message_ids }))
        }
        Err(e) => {
            log::warn!("the page's files were not sent: {e}");
            text(502, &format!("Bad Gateway: the files were not sent: {e}"))
        }
    }
}

fn send_paths(profile: &Profile, peer: Option<&str>, group: Option<&GroupId>, paths: &[PathBuf], caption: &str) -> Result<Vec<u64>, super::super::super::error::ClientError> {
    match (group, peer) {
        (Some(group), _) => paths
            .iter()
            .enumerate()
            .map(|(i, p)| profile.send_group_file(group, p, None, if i == 0 { caption } else { "" }).map(|s| s.message_id))
            .collect(),
        (None, Some(peer)) if paths.len() >= 2 => Ok(profile.send_album(peer, paths, None, caption)?.into_iter().map(|s| s.message_id).collect()),
        (None, Some(peer)) => Ok(vec![profile.send_file(peer, &paths[0], None, caption)?.message_id]),
        (None, None) => Err(super::super::super::error::ClientError::Invalid("no conversation is open".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_made_safe_and_keys_read() {
        assert_eq!(safe_name("../../etc/passwd"), "etcpasswd");
        assert_eq!(safe_name(".hidden"), "hidden");
        assert_eq!(safe_name("\u{1b}[2J"), "[2J");
        assert_eq!(safe_name(""), "file");
        assert_eq!(history_key("user:42"), Some(42));
        assert_eq!(history_key("group:zz"), None);
        assert_eq!(history_key("other:1"), None);
        let hex = "ab".repeat(32);
        assert_eq!(history_key(&format!("group:{hex}")), Some(group_peer(&[0xab; 32])));
        assert_eq!(file_name_params("a\"b é.png"), "filename=\"ab .png\"; filename*=UTF-8''a%22b%20%C3%A9.png");
    }
}
