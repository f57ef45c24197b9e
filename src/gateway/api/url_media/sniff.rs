//! What a file by URL is: its first bytes against the method (a photo must be an image, a
//! sticker a WEBP or PNG one), the server's Content-Type when it says something useful, and a
//! name from the URL. An upload gets the same from its part (`media::upload`).

use url::Url;

use crate::http::percent::percent_decode_path;
use crate::gateway::botapi::types::MediaKind;

/// Bytes read before anything is sent on: enough for every signature below.
pub const HEAD: usize = 16;

/// The image formats a photo may be, by their signatures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Image {
    Jpeg,
    Png,
    Gif,
    Webp,
    Bmp,
}

impl Image {
    pub fn of(head: &[u8]) -> Option<Image> {
        Some(match head {
            [0xff, 0xd8, 0xff, ..] => Image::Jpeg,
            [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n', ..] => Image::Png,
            [b'G', b'I', b'F', b'8', b'7' | b'9', b'a', ..] => Image::Gif,
            [b'R', b'I', b'F', b'F', _, _, _, _, b'W', b'E', b'B', b'P', ..] => Image::Webp,
            [b'B', b'M', ..] => Image::Bmp,
            _ => return None,
        })
    }

    pub fn mime_type(self) -> &'static str {
        match self {
            Image::Jpeg => "image/jpeg",
            Image::Png => "image/png",
            Image::Gif => "image/gif",
            Image::Webp => "image/webp",
            Image::Bmp => "image/bmp",
        }
    }
}

/// The MIME type the file goes with, from its first bytes and the server's Content-Type
/// (`declared`, already reduced by [`media_type`]); why it is not a file of `kind` otherwise.
/// A photo or a sticker is what its bytes show; any other kind is taken as it comes, with the
/// type the server named (`None`: guessed from the name, as for an upload without a type),
/// but a web page is no audio, video or voice note.
pub fn check(kind: MediaKind, head: &[u8], declared: Option<&str>) -> Result<Option<String>, String> {
    let image = Image::of(head);
    let named = || declared.map(|t| format!(" (the server calls it {t})")).unwrap_or_default();
    match kind {
        MediaKind::Photo => match image {
            Some(i) => Ok(Some(i.mime_type().to_string())),
            None => Err(format!("the content is not a JPEG, PNG, GIF, WEBP or BMP image{}", named())),
        },
        MediaKind::Sticker => match image {
            Some(i @ (Image::Webp | Image::Png)) => Ok(Some(i.mime_type().to_string())),
            _ => Err(format!("a sticker must be a WEBP or PNG image{}", named())),
        },
        _ if kind != MediaKind::Document && declared == Some("text/html") => {
            Err(format!("the URL is a web page (text/html), not a file for a {}", kind.name()))
        }
        _ => Ok(declared.filter(|t| *t != "application/octet-stream").map(str::to_string)),
    }
}

/// A Content-Type header's `type/subtype`, lower case and without parameters, when it is one.
pub fn media_type(header: Option<&str>) -> Option<String> {
    let t = header?.split(';').next()?.trim().to_ascii_lowercase();
    let token = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$&^_.+-".contains(&b));
    let (main, sub) = t.split_once('/')?;
    (t.len() <= 100 && token(main) && token(sub)).then_some(t)
}

/// The file's name: the last non-empty segment of the URL's path, percent-decoded ("" when
/// there is none, as for a part without a file name).
pub fn file_name(url: &Url) -> String {
    let last = url.path_segments().and_then(|s| s.filter(|s| !s.is_empty()).last()).unwrap_or_default();
    percent_decode_path(last).unwrap_or_else(|| last.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    #[test]
    fn a_photo_must_be_an_image_and_a_sticker_a_webp_or_png_one() {
        let images: [(&[u8], Image); 6] = [
            (b"\xff\xd8\xff\xe0\0\x10JFIF", Image::Jpeg),
            (PNG, Image::Png),
            (b"GIF89a\x01\0", Image::Gif),
            (b"GIF87a\x01\0", Image::Gif),
            (b"RIFF\x24\0\0\0WEBPVP8 ", Image::Webp),
            (b"BM\x36\0\0\0", Image::Bmp),
        ];
        for (head, image) in images {
            assert_eq!(Image::of(head), Some(image));
            assert_eq!(check(MediaKind::Photo, head, Some("application/octet-stream")), Ok(Some(image.mime_type().to_string())));
        }
        for not in [&b"hello, world"[..], b"<!doctype html>", b"RIFF\x24\0\0\0WAVEfmt ", b"\x89PNX", b"", b"%PDF-1.7"] {
            assert_eq!(Image::of(not), None, "{not:?}");
        }
        let e = check(MediaKind::Photo, b"hello, world", Some("text/plain")).expect_err("text");
        assert_eq!(e, "the content is not a JPEG, PNG, GIF, WEBP or BMP image (the server calls it text/plain)");
        // The bytes decide, not the server's word.
        assert!(check(MediaKind::Photo, b"hello", Some("image/png")).is_err());
        assert_eq!(check(MediaKind::Sticker, PNG, None), Ok(Some("image/png".into())));
        assert_eq!(check(MediaKind::Sticker, b"RIFF\0\0\0\0WEBPVP8L", None), Ok(Some("image/webp".into())));
        assert!(check(MediaKind::Sticker, b"\xff\xd8\xff\xe0", None).expect_err("jpeg").starts_with("a sticker must be"));
    }

    #[test]
    fn other_kinds_take_the_servers_type_but_no_web_page_is_a_video() {
        assert_eq!(check(MediaKind::Document, b"%PDF-1.7", Some("application/pdf")), Ok(Some("application/pdf".into())));
        assert_eq!(check(MediaKind::Document, b"<html>", Some("text/html")), Ok(Some("text/html".into())));
        assert_eq!(check(MediaKind::Audio, b"ID3\x04", Some("application/octet-stream")), Ok(None));
        assert_eq!(check(MediaKind::Video, b"\0\0\0\x18ftypmp42", None), Ok(None));
        for kind in [MediaKind::Video, MediaKind::Audio, MediaKind::Voice, MediaKind::Animation, MediaKind::VideoNote] {
            let e = check(kind, b"<!doctype html>", Some("text/html")).expect_err("a page");
            assert!(e.starts_with("the URL is a web page (text/html)"), "{e}");
        }
    }

    #[test]
    fn content_types_are_reduced_to_type_and_subtype() {
        assert_eq!(media_type(Some("Image/PNG")), Some("image/png".into()));
        assert_eq!(media_type(Some("text/plain; charset=utf-8")), Some("text/plain".into()));
        assert_eq!(media_type(Some(" video/mp4 ")), Some("video/mp4".into()));
        for bad in ["", "png", "image/", "/png", "image/png/x", "text/plain\u{7f}", "a b/c"] {
            assert_eq!(media_type(Some(bad)), None, "{bad:?}");
        }
        assert_eq!(media_type(Some(&format!("x/{}", "y".repeat(120)))), None);
        assert_eq!(media_type(None), None);
    }

    #[test]
    fn the_name_is_the_paths_last_segment() {
        let name = |u: &str| file_name(&Url::parse(u).expect("url"));
        assert_eq!(name("https://cdn.example/a/b/cat%20one.jpg?sig=secret#x"), "cat one.jpg");
        assert_eq!(name("https://cdn.example/files/report.pdf/"), "report.pdf");
        assert_eq!(name("http://example.com"), "");
        assert_eq!(name("http://example.com/%ff.bin"), "%ff.bin");
    }
}
