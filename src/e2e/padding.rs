//! Every end-to-end plaintext is padded to a size bucket before it is encrypted: 1 KiB, then
//! powers of two up to 64 KiB (a longer one keeps its size; files travel apart). The platform
//! then sees one size for a press, a reaction, a chat action and a short text. The smallest
//! bucket is 1 KiB, not less, because a real press carries the whole signed context of the
//! message it presses (its text and keyboard, the ids, the bot's signature): a press of a
//! 300-byte menu is about 470 bytes, and one of a menu up to about 850 bytes still fits. The
//! filler is `Content.padding`, a field receivers ignore, so the format stays one protobuf
//! message and earlier releases read padded messages as they are.

use protobuf::Message as _;

use crate::wire::e2e::Content;

/// The smallest bucket.
pub const SMALLEST_BUCKET: usize = 1024;
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

/// A press as a client sends it, a sample for the padding tests and `bench_padding`: it
/// carries the bot's signed context of a menu whose Content (a text and six buttons) encodes to
/// about `menu_len` bytes, with ids as large as real ones.
pub fn press_of_a_menu(menu_len: usize) -> Content {
    use crate::wire::e2e::{content::Body, CallbackPress, InlineButton, InlineKeyboard, KeyboardContext, KeyboardRow, SignedKeyboardContext, Text};
    let button = |i: usize| InlineButton { text: format!("Option {i}"), callback_data: format!("menu:item:{i:04}"), ..Default::default() };
    let keyboard = InlineKeyboard {
        rows: (0..3).map(|r| KeyboardRow { buttons: (0..2).map(|c| button(r * 2 + c)).collect(), ..Default::default() }).collect(),
        ..Default::default()
    };
    let mut menu = Content { keyboard: Some(keyboard).into(), ..Default::default() };
    let room = menu_len.saturating_sub(menu.compute_size() as usize + 3);
    menu.body = Some(Body::Text(Text { text: "m".repeat(room), ..Default::default() }));
    let context = KeyboardContext {
        bot_user_id: 4_469_723_243_970_631,
        chat_id: 3_920_040_318_611_755,
        message_id: 123_456,
        date: 1_800_000_000,
        message: Some(menu).into(),
        ..Default::default()
    };
    let signed = SignedKeyboardContext { context: context.write_to_bytes().expect("encode"), signature: vec![7; 64], ..Default::default() };
    let press = CallbackPress {
        press_id: "0f".repeat(16),
        message_id: 123_456,
        callback_data: "menu:item:0003".into(),
        context: Some(signed).into(),
        ..Default::default()
    };
    Content { body: Some(Body::Press(press)), ..Default::default() }
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
        sizes.push(padded_bytes(&press_of_a_menu(300)).len());
        assert_eq!(sizes, vec![SMALLEST_BUCKET; 5]);
        // The bucket holds presses of menus up to about 850 bytes.
        let press = press_of_a_menu(300);
        assert!((400..600).contains(&(press.compute_size() as usize)), "a 300-byte menu's press: {}", press.compute_size());
        assert_eq!(padded_bytes(&press_of_a_menu(850)).len(), SMALLEST_BUCKET);
    }

}
