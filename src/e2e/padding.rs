//! Every end-to-end plaintext is padded to a size bucket before it is encrypted: 256 bytes,
//! then powers of two up to 64 KiB (a longer one keeps its size; files travel apart). The
//! platform then sees one size for a press, a reaction, a chat action and a short text. The
//! filler is `Content.padding`, a field receivers ignore, so the format stays one protobuf
//! message and earlier releases read padded messages as they are.

use protobuf::Message as _;

use crate::wire::e2e::Content;

/// The smallest bucket.
pub const SMALLEST_BUCKET: usize = 256;
/// The largest bucket; a plaintext above it is not padded.
pub const LARGEST_BUCKET: usize = 64 * 1024;
/// The encoded tag of field 100, length-delimited.
const PADDING_TAG_LEN: usize = 2;

/// A received plaintext as a Content, its padding dropped (nothing stores it).
pub fn parse(plaintext: &[u8]) -> Option<Content> {
    let mut content = Content::parse_from_bytes(plaintext).ok()?;
    content.padding = Vec::new();
    Some(content)
}

/// `content` encoded and padded to its bucket (its own `padding`, if any, replaced).
pub fn padded_bytes(content: &Content) -> Vec<u8> {
    let mut padded = content.clone();
    padded.padding.clear();
    let base = padded.compute_size() as usize;
    if let Some(len) = filler_len(base) {
        padded.padding = vec![0; len];
    }
    let bytes = padded.write_to_bytes().expect("encoding a message in memory cannot fail");
    debug_assert!(bytes.len() > LARGEST_BUCKET || bytes.len().is_power_of_two());
    bytes
}

/// How many filler bytes bring an encoding of `base` bytes exactly to a bucket, counting the
/// field's tag and length; `None` above the largest bucket. A bucket that no filler length
/// fits exactly (the length's own size jumps past it) passes on to the next one.
fn filler_len(base: usize) -> Option<usize> {
    let mut bucket = (base + PADDING_TAG_LEN + 1).max(SMALLEST_BUCKET).next_power_of_two();
    while bucket <= LARGEST_BUCKET {
        let room = bucket - base - PADDING_TAG_LEN;
        // room = varint_len(n) + n for some n?
        for length_len in 1..=3 {
            // An empty field is not encoded at all: at least one byte.
            if let Some(n) = room.checked_sub(length_len).filter(|n| *n > 0) {
                if varint_len(n) == length_len {
                    return Some(n);
                }
            }
        }
        bucket *= 2;
    }
    None
}

fn varint_len(n: usize) -> usize {
    match n {
        0..=0x7f => 1,
        0x80..=0x3fff => 2,
        _ => 3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::e2e::{content::Body, CallbackPress, ChatAction, Reaction, ReactionType};

    #[test]
    fn every_size_lands_exactly_on_a_bucket_and_reads_back_the_same() {
        for len in (0..3000).chain([16_000, 40_000, 65_000]) {
            let content = crate::e2e::text_content(&"x".repeat(len));
            let bytes = padded_bytes(&content);
            assert!(bytes.len().is_power_of_two() && bytes.len() >= SMALLEST_BUCKET, "{len} → {}", bytes.len());
            let base = content.compute_size() as usize;
            assert!(bytes.len() <= SMALLEST_BUCKET.max(4 * (base + 3)), "{len} → {}: the next bucket or the one after", bytes.len());
            assert_eq!(parse(&bytes).expect("parses"), content, "the same content, without its padding");
        }
        let huge = crate::e2e::text_content(&"x".repeat(70_000));
        assert_eq!(padded_bytes(&huge).len(), huge.compute_size() as usize, "above the largest bucket: as it is");
    }

    #[test]
    fn a_press_a_reaction_a_chat_action_and_a_text_have_one_size() {
        let kinds = [
            Body::Press(CallbackPress { press_id: "0f".repeat(16), message_id: 7, callback_data: "buy".into(), ..Default::default() }),
            Body::Reaction(Reaction {
                message_id: 7,
                reactions: vec![{
                    let mut r = ReactionType::new();
                    r.set_emoji("👍".into());
                    r
                }],
                ..Default::default()
            }),
            Body::ChatAction(ChatAction { action: "typing".into(), ..Default::default() }),
        ];
        let mut sizes: Vec<usize> =
            kinds.into_iter().map(|b| padded_bytes(&Content { body: Some(b), ..Default::default() }).len()).collect();
        sizes.push(padded_bytes(&crate::e2e::text_content("Hello, how are you today?")).len());
        assert_eq!(sizes, vec![SMALLEST_BUCKET; 4]);
    }
}
