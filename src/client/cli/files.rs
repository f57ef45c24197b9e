//! The file commands: send-file (one file, or an album) and download.

use super::json::sent_line;
use super::*;

pub(super) fn send_file(global: &Global, a: &Args) -> anyhow::Result<()> {
    let a = send_file_args(a)?;
    let profile = open_profile(global)?;
    let sent = match &a.paths[..] {
        [path] => vec![profile.send_file(&a.peer, path, a.kind, &a.caption).with_context(|| format!("send-file {} to {}", path.display(), a.peer))?],
        paths => profile.send_album(&a.peer, paths, a.kind, &a.caption).with_context(|| format!("send-file: an album of {} files to {}", paths.len(), a.peer))?,
    };
    for sent in sent {
        print_line(&sent_line(&sent))?;
    }
    Ok(())
}

/// What `send-file` was asked to send.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct SendFileArgs {
    pub(super) peer: String,
    /// One file, or 2 to 10: an album.
    pub(super) paths: Vec<PathBuf>,
    /// `None`: guessed from each file's name.
    pub(super) kind: Option<MediaKind>,
    pub(super) caption: String,
}

/// `send-file @PEER PATH [PATH...] [--as KIND] [--caption TEXT]`.
pub(super) fn send_file_args(a: &Args) -> anyhow::Result<SendFileArgs> {
    let kind = match a.value("--as") {
        Some(v) => Some(MediaKind::from_name(v).ok_or_else(|| {
            let names: Vec<&str> = MediaKind::ALL.iter().map(|k| k.name()).collect();
            usage(format!("send-file: --as {v:?} is not one of {}", names.join(", ")))
        })?),
        None => None,
    };
    let [peer, paths @ ..] = &a.words[..] else {
        return Err(usage(format!("send-file: expected @PEER PATH [PATH...] {SEND_FILE_OPTIONS}")));
    };
    if paths.is_empty() || paths.len() > crate::client::media::ALBUM_MAX {
        return Err(usage(format!(
            "send-file: expected @PEER and 1 file, or 2 to {} files for an album {SEND_FILE_OPTIONS}",
            crate::client::media::ALBUM_MAX
        )));
    }
    let caption = a.value("--caption").unwrap_or("").to_string();
    Ok(SendFileArgs { peer: peer.to_string(), paths: paths.iter().map(PathBuf::from).collect(), kind, caption })
}

pub(super) const SEND_FILE_OPTIONS: &str = "[--as photo|document|audio|video|voice|animation|video_note|sticker] [--caption TEXT]";

pub(super) fn download(global: &Global, a: &Args) -> anyhow::Result<()> {
    let (peer, message_id, out) = download_args(a)?;
    let profile = open_profile(global)?;
    let size = profile.download(peer, message_id, &out)?;
    print_line(&ordered(&[("path", json!(out.display().to_string())), ("size", json!(size))]))
}

/// `download @PEER MESSAGE_ID OUT_PATH`.
pub(super) fn download_args<'a>(a: &Args<'a>) -> anyhow::Result<(&'a str, u64, PathBuf)> {
    let [peer, id, out] = a.words[..] else {
        return Err(usage("download: expected @PEER MESSAGE_ID OUT_PATH".into()));
    };
    let message_id = message_id_arg("download: MESSAGE_ID", id)?;
    if out.is_empty() {
        return Err(usage("download: OUT_PATH is empty".into()));
    }
    Ok((peer, message_id, PathBuf::from(out)))
}
