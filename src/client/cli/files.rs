//! `e2e-chat send-file` (one file, or an album) and `download`, and the reading of their
//! arguments (`send-file`'s also serve `group send-file`).

use std::path::PathBuf;

use serde_json::json;

use super::json::sent_json;
use super::usage::SEND_FILE_OPTIONS;
use crate::cli::{Args, CliError, Context};
use crate::client::cli_common::{message_id_arg, open_profile, ordered, print_line, usage, Global};
use crate::client::media;
use crate::client::message::MediaKind;

pub(super) fn send_file(global: &Global, a: &Args) -> Result<(), CliError> {
    let a = send_file_args(a)?;
    let profile = open_profile(global)?;
    let sent = match &a.paths[..] {
        [path] => vec![profile.send_file(&a.peer, path, a.kind, &a.caption).with_context(|| format!("send-file {} to {}", path.display(), a.peer))?],
        paths => profile.send_album(&a.peer, paths, a.kind, &a.caption).with_context(|| format!("send-file: an album of {} files to {}", paths.len(), a.peer))?,
    };
    for sent in sent {
        print_line(&sent_json(&sent))?;
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
pub(super) fn send_file_args(a: &Args) -> Result<SendFileArgs, CliError> {
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
    if paths.is_empty() || paths.len() > media::ALBUM_MAX {
        return Err(usage(format!(
            "send-file: expected @PEER and 1 file, or 2 to {} files for an album {SEND_FILE_OPTIONS}",
            media::ALBUM_MAX
        )));
    }
    let caption = a.value("--caption").unwrap_or("").to_string();
    Ok(SendFileArgs { peer: peer.to_string(), paths: paths.iter().map(PathBuf::from).collect(), kind, caption })
}

pub(super) fn download(global: &Global, a: &Args) -> Result<(), CliError> {
    let (peer, message_id, out) = download_args(a)?;
    let profile = open_profile(global)?;
    let size = profile.download(peer, message_id, &out)?;
    print_line(&ordered(&[("path", json!(out.display().to_string())), ("size", json!(size))]))
}

/// `download @PEER MESSAGE_ID OUT_PATH`.
fn download_args<'a>(a: &Args<'a>) -> Result<(&'a str, u64, PathBuf), CliError> {
    let [peer, id, out] = a.words[..] else {
        return Err(usage("download: expected @PEER MESSAGE_ID OUT_PATH".into()));
    };
    let message_id = message_id_arg("download: MESSAGE_ID", id)?;
    if out.is_empty() {
        return Err(usage("download: OUT_PATH is empty".into()));
    }
    Ok((peer, message_id, PathBuf::from(out)))
}


#[cfg(test)]
mod tests {
    use super::super::tests::strings;
    use super::super::{parse_command, run};
    use super::*;

    #[test]
    fn send_file_and_download_parse_their_arguments() {
        let send_file = |a: &[&str]| {
            let v = strings(a);
            let parsed = parse_command("send-file", None, &v)?;
            send_file_args(&parsed)
        };
        let a = send_file(&["@bot", "r.png", "--as", "document", "--caption=hi there"]).expect("ok");
        assert_eq!(
            a,
            SendFileArgs { peer: "@bot".into(), paths: vec!["r.png".into()], kind: Some(MediaKind::Document), caption: "hi there".into() }
        );
        let a = send_file(&["--caption", "--help", "@bot", "v.ogg"]).expect("a caption may look like an option");
        assert_eq!((a.kind, a.caption.as_str()), (None, "--help"));
        let err = send_file(&["@bot", "x", "--as", "gif"]).expect_err("unknown kind");
        assert!(err.to_string().contains("photo, document, audio, video, voice, animation, video_note, sticker"), "{err}");
        assert!(send_file(&["@bot"]).expect_err("no path").to_string().contains("1 file, or 2 to 10 files"));
        let album = send_file(&["@bot", "a.png", "b.png", "--caption", "two"]).expect("an album");
        assert_eq!((album.paths.len(), album.caption.as_str()), (2, "two"));
        let eleven: Vec<String> = std::iter::once("@bot".to_string()).chain((0..11).map(|i| format!("{i}.png"))).collect();
        let eleven: Vec<&str> = eleven.iter().map(String::as_str).collect();
        assert!(send_file(&eleven).expect_err("too many").to_string().contains("2 to 10 files"));
        assert!(send_file(&["@bot", "a", "--bogus"]).expect_err("unknown").to_string().contains("--bogus"));
        assert_eq!(send_file(&["@bot", "--", "-x.png"]).expect("ok").paths, vec![PathBuf::from("-x.png")]);

        let download = |a: &[&str]| {
            let v = strings(a);
            let parsed = parse_command("download", None, &v)?;
            download_args(&parsed).map(|(peer, id, out)| (peer.to_string(), id, out))
        };
        assert_eq!(download(&["@bob", "7", "/tmp/o.png"]).expect("ok"), ("@bob".into(), 7, PathBuf::from("/tmp/o.png")));
        assert!(download(&["@bob", "0", "o"]).expect_err("ids start at 1").to_string().contains("not a message id"));
        assert!(download(&["@bob", "7"]).expect_err("no path").to_string().contains("OUT_PATH"));
        let run_in = |args: &[&str]| {
            let mut all = strings(&["--profile", "/nonexistent/e2e"]);
            all.extend(strings(args));
            format!("{:#}", run(&all).expect_err("refused"))
        };
        assert!(run_in(&["send-file", "@bot", "a", "--as", "x"]).contains("--as"));
        assert!(run_in(&["download", "@bot", "1", "out"]).contains("no registered profile"));
    }
}
