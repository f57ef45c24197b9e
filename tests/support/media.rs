//! Files as a user's client sends them, for the tests and the soak.

use bot_gateway::client::Profile;
use bot_gateway::e2e::file::{upload_encrypted, UploadedFile};
use bot_gateway::wire::e2e::media::Kind;
use bot_gateway::wire::e2e::{Content, Media, Text};

/// What the user's client sends: the file uploaded encrypted, and its Media content.
pub fn send_file(user: &Profile, bot: &str, kind: Kind, mime: &str, name: &str, bytes: &[u8], caption: &str) -> UploadedFile {
    let up = upload_encrypted(user.platform(), bytes).expect("upload");
    let media = Media {
        kind: kind.into(),
        mime_type: mime.into(),
        file_name: name.into(),
        width: if matches!(kind, Kind::PHOTO | Kind::VIDEO) { 640 } else { 0 },
        height: if matches!(kind, Kind::PHOTO | Kind::VIDEO) { 480 } else { 0 },
        duration: if matches!(kind, Kind::AUDIO | Kind::VIDEO | Kind::VOICE) { 7 } else { 0 },
        caption: protobuf::MessageField::from_option(
            (!caption.is_empty()).then(|| Text { text: caption.into(), ..Default::default() }),
        ),
        ..up.to_media()
    };
    let mut content = Content::new();
    content.set_media(media);
    let peer = user.lookup(bot).expect("lookup bot");
    user.send_content(&peer, &content).expect("send the file");
    up
}
