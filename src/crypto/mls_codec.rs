//! How openmls' state is encoded in its SQLite tables (`openmls_sqlite_storage` leaves the
//! encoding of keys and values to us).
//!
//! JSON, as every release before this one wrote, except for the values a group rewrites or
//! reads whole for each message: the message secrets (the secret tree with every sender's
//! ratchet, written after each message opened) and the ratchet tree (read whenever the group is
//! loaded). Those are binary behind a marker byte:
//! - postcard (`BINARY`), written from schema step [`SCHEMA_STEP_BINARY`] on. openmls
//!   serializes its keys and signatures as sequences of numbers; postcard writes each as the
//!   byte it is, where MessagePack wrote a number per byte and JSON a decimal. In a channel of
//!   10,000 the tree is 2.7 MB as MLS sends it and was 6.8 MB as MessagePack, and decoding it
//!   number by number was the first cost of every load (issue 48, docs/decisions/0128).
//! - MessagePack (`MESSAGEPACK`, field names kept), as the releases between wrote: still read.
//!
//! Why by type and not everything: the storage crate encodes the KEYS with the same codec (the
//! group id of every row), and a row is found by comparing those bytes, so a key must keep
//! the encoding it was written with. Values are recognised by their first byte when read, so
//! a value written by an earlier release (JSON, MessagePack) still reads, and is written in the
//! current form the next time the group changes it. No key type is in [`COMPACT`]; a type
//! missing from it (a future openmls renaming one) is only written as JSON again, which still
//! reads.

use openmls_sqlite_storage::Codec;

/// The schema step of every database that holds openmls state, from this codec on: nothing
/// changes in the file, but its version keeps a release from before the codec (which reads
/// JSON only) from opening a file that may hold compact values (`crate::migrations` refuses a
/// newer file).
pub const SCHEMA_STEP: &str = "-- openmls values may be compact from here on (crypto::mls_codec)";

/// The schema step of every database that holds openmls state from postcard on: nothing
/// changes in the file, but its version keeps a release that reads only JSON and MessagePack
/// from opening a file that may hold postcard values.
pub const SCHEMA_STEP_BINARY: &str = "-- openmls values may be postcard from here on (crypto::mls_codec)";

/// Starts a MessagePack value: 0xC1 is never used by MessagePack and cannot start JSON text.
const MESSAGEPACK: u8 = 0xC1;

/// Starts a postcard value: 0xC7 cannot start JSON text either (JSON starts with ASCII).
const BINARY: u8 = 0xC7;

/// The values written compact, by their full type names in openmls.
const COMPACT: [&str; 2] = ["openmls::group::mls_group::past_secrets::MessageSecretsStore", "openmls::treesync::TreeSync"];

/// The codec of every MLS provider (`mls::MlsProvider`).
#[derive(Default)]
pub struct StorageCodec;

/// A value that could not be encoded or decoded.
#[derive(Debug)]
pub enum StorageCodecError {
    Json(serde_json::Error),
    Binary(postcard::Error),
    Decode(rmp_serde::decode::Error),
}

impl std::fmt::Display for StorageCodecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StorageCodecError::Json(e) => write!(f, "MLS state (JSON): {e}"),
            StorageCodecError::Binary(e) => write!(f, "MLS state (postcard): {e}"),
            StorageCodecError::Decode(e) => write!(f, "decoding MLS state (MessagePack): {e}"),
        }
    }
}

impl std::error::Error for StorageCodecError {}

/// True when values of type `T` (or references to it) are written compact.
fn is_compact<T: ?Sized>() -> bool {
    #[cfg(test)]
    if ERA.with(std::cell::Cell::get) == Era::Json {
        return false;
    }
    let name = std::any::type_name::<T>().trim_start_matches('&');
    COMPACT.contains(&name)
}

impl Codec for StorageCodec {
    type Error = StorageCodecError;

    fn to_vec<T: serde::Serialize>(value: &T) -> Result<Vec<u8>, Self::Error> {
        if !is_compact::<T>() {
            return serde_json::to_vec(value).map_err(StorageCodecError::Json);
        }
        #[cfg(test)]
        if ERA.with(std::cell::Cell::get) == Era::MessagePack {
            let mut bytes = vec![MESSAGEPACK];
            rmp_serde::encode::write_named(&mut bytes, value).expect("MessagePack encodes what postcard does");
            return Ok(bytes);
        }
        postcard::to_extend(value, vec![BINARY]).map_err(StorageCodecError::Binary)
    }

    fn from_slice<T: serde::de::DeserializeOwned>(slice: &[u8]) -> Result<T, Self::Error> {
        match slice.split_first() {
            Some((&BINARY, value)) => match postcard::take_from_bytes(value) {
                Ok((decoded, [])) => Ok(decoded),
                Ok(_) => Err(StorageCodecError::Binary(postcard::Error::DeserializeBadEncoding)),
                Err(e) => Err(StorageCodecError::Binary(e)),
            },
            Some((&MESSAGEPACK, value)) => rmp_serde::from_slice(value).map_err(StorageCodecError::Decode),
            _ => serde_json::from_slice(slice).map_err(StorageCodecError::Json),
        }
    }
}

/// Tests: how this thread writes values, as which releases did.
#[cfg(test)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Era {
    /// Every value JSON, as releases before the compact codec.
    Json,
    /// The tree and the secrets MessagePack, as releases before postcard.
    MessagePack,
    /// As this release does.
    Current,
}

#[cfg(test)]
thread_local! {
    static ERA: std::cell::Cell<Era> = const { std::cell::Cell::new(Era::Current) };
}

/// Tests: this thread writes values as `era` did, until set back to `Era::Current`.
#[cfg(test)]
pub(crate) fn write_as(era: Era) {
    ERA.with(|e| e.set(era));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    struct Sample {
        bytes: Vec<u8>,
        n: u64,
    }

    #[test]
    fn only_the_listed_types_are_compact_and_both_encodings_read() {
        assert!(is_compact::<&&openmls::treesync::TreeSync>());
        assert!(!is_compact::<openmls::group::GroupId>(), "keys stay JSON");
        assert!(!is_compact::<Sample>());
        let sample = Sample { bytes: vec![0, 127, 128, 255], n: 7 };
        let json = StorageCodec::to_vec(&sample).expect("encode");
        assert_eq!(json, serde_json::to_vec(&sample).expect("json"), "other values are JSON, as before");
        assert_eq!(StorageCodec::from_slice::<Sample>(&json).expect("decode"), sample);
        let mut packed = vec![MESSAGEPACK];
        rmp_serde::encode::write_named(&mut packed, &sample).expect("msgpack");
        assert_eq!(StorageCodec::from_slice::<Sample>(&packed).expect("decode"), sample, "MessagePack still reads");
        assert!(StorageCodec::from_slice::<Sample>(&packed[..packed.len() - 1]).is_err(), "a cut value is an error");
        let binary = postcard::to_extend(&sample, vec![BINARY]).expect("postcard");
        assert_eq!(binary.len(), 1 + 1 + 4 + 1, "a byte is a byte: marker, length, the bytes, n");
        assert_eq!(StorageCodec::from_slice::<Sample>(&binary).expect("decode"), sample);
        assert!(StorageCodec::from_slice::<Sample>(&binary[..binary.len() - 1]).is_err(), "a cut value is an error");
        let mut longer = binary.clone();
        longer.push(0);
        assert!(StorageCodec::from_slice::<Sample>(&longer).is_err(), "so is one with bytes left over");
    }
}
