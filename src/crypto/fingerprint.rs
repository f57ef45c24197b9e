//! What a person compares to know who they talk to: an account identity key as 30 digits
//! (six groups of five) that can be read aloud, and for two users a safety number of 60 digits
//! that both compute alike. The digits come from SHA-512 (libsodium) iterated over a version
//! label, the user id and the key, as Signal's safety numbers do, so that finding another key
//! with the same digits costs far more than one hash per try. A bot's full fingerprint is its
//! Bot ID (the hex of its identity key); the digits are its short form.

use sodiumoxide::crypto::hash::sha512;

const LABEL: &[u8] = b"bot-gateway fingerprint v1";
/// SHA-512 rounds per fingerprint.
const ROUNDS: usize = 5200;

/// The 30 digits of `user_id`'s identity key, as "12345 67890 …".
pub fn readable(user_id: u64, identity_key: &[u8; 32]) -> String {
    groups(&digits(user_id, identity_key))
}

/// The safety number of two users: each one's 30 digits, the smaller user id's first, so both
/// sides print the same 60 digits.
pub fn safety_number(a: (u64, &[u8; 32]), b: (u64, &[u8; 32])) -> String {
    let (first, second) = if a.0 <= b.0 { (a, b) } else { (b, a) };
    let mut all = digits(first.0, first.1);
    all.push_str(&digits(second.0, second.1));
    groups(&all)
}

fn digits(user_id: u64, identity_key: &[u8; 32]) -> String {
    let mut input = Vec::with_capacity(LABEL.len() + 8 + 32);
    input.extend_from_slice(LABEL);
    input.extend_from_slice(&user_id.to_be_bytes());
    input.extend_from_slice(identity_key);
    let mut hash = sha512::hash(&input).0;
    for _ in 1..ROUNDS {
        let mut next = hash.to_vec();
        next.extend_from_slice(identity_key);
        hash = sha512::hash(&next).0;
    }
    // Six chunks of five bytes, each as a number below 100000.
    hash.chunks(5).take(6).map(|c| format!("{:05}", c.iter().fold(0u64, |n, b| n << 8 | u64::from(*b)) % 100_000)).collect()
}

fn groups(digits: &str) -> String {
    digits.as_bytes().chunks(5).map(|c| std::str::from_utf8(c).expect("ASCII digits")).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readable_digits_are_stable_and_tell_keys_apart() {
        crate::crypto::init();
        let (a, b) = ([1u8; 32], [2u8; 32]);
        let ra = readable(7, &a);
        assert_eq!(ra.len(), 35, "30 digits in six groups: {ra}");
        assert!(ra.split(' ').all(|g| g.len() == 5 && g.bytes().all(|c| c.is_ascii_digit())));
        assert_eq!(ra, readable(7, &a), "the same key gives the same digits");
        assert_ne!(ra, readable(7, &b), "another key");
        assert_ne!(ra, readable(8, &a), "another user");
    }

    /// Known answers, computed once outside this code (Python's hashlib, from the construction
    /// in the module doc): a change of the rounds, the label, the encoding of the user id or
    /// the chunking fails here, since every verify a person already did would silently stop
    /// matching.
    #[test]
    fn the_digits_are_the_known_answers() {
        crate::crypto::init();
        let counting: [u8; 32] = std::array::from_fn(|i| i as u8);
        let falling: [u8; 32] = std::array::from_fn(|i| 0xff - i as u8);
        assert_eq!(readable(7, &counting), "56770 05463 35922 54543 73817 18457");
        assert_eq!(readable(1_234_567, &falling), "46437 91751 92584 16611 29227 18935");
        let expected = "00829 31849 22595 20167 55622 35390 43174 73058 47941 69732 77316 69006";
        assert_eq!(safety_number((3, &counting), (9, &falling)), expected);
        assert_eq!(safety_number((9, &falling), (3, &counting)), expected);
    }

    #[test]
    fn both_sides_compute_one_safety_number() {
        crate::crypto::init();
        let (alice, bob) = ((3, [3u8; 32]), (9, [9u8; 32]));
        let from_alice = safety_number((alice.0, &alice.1), (bob.0, &bob.1));
        let from_bob = safety_number((bob.0, &bob.1), (alice.0, &alice.1));
        assert_eq!(from_alice, from_bob);
        assert_eq!(from_alice.len(), 71, "60 digits in twelve groups");
        assert!(from_alice.starts_with(&readable(3, &alice.1)));
        assert_ne!(from_alice, safety_number((alice.0, &alice.1), (bob.0, &[8u8; 32])), "bob's key changed");
    }
}
