//! How openmls' state is encoded in its SQLite tables (`openmls_sqlite_storage` leaves the
//! encoding of keys and values to us).
//!
//! JSON, as every release before this one wrote, except for the values a group rewrites or
//! reads whole for each message: the message secrets (the secret tree with every sender's
//! ratchet, written after each message opened) and the ratchet tree (read whenever the group is
//! loaded). In JSON every byte of them is a decimal number; their encoding and the size of the
//! blob were a third of a group message's import. They are MessagePack (field names kept,
//! so the encoding describes itself as JSON does) behind a marker byte.
//!
//! Why by type and not everything: the storage crate encodes the KEYS with the same codec (the
//! group id of every row), and a row is found by comparing those bytes, so a key must keep
//! the encoding it was written with. Values are recognised by their first byte when read, so
//! a value written by an earlier release (JSON) still reads, and is written compact the next
//! time the group changes it. No key type is in [`COMPACT`]; a type missing from it (a future
//! openmls renaming one) is only written as JSON again, which still reads.

use openmls_sqlite_storage::Codec;

/// The schema step of every database that holds openmls state, from this codec on: nothing
/// changes in the file, but its version keeps a release from before the codec (which reads
/// JSON only) from opening a file that may hold compact values (`crate::migrations` refuses a
/// newer file).
pub const SCHEMA_STEP: &str = "-- openmls values may be compact from here on (crypto::mls_codec)";

/// Starts every compact value: 0xC1 is never used by MessagePack and cannot start JSON text.
const MARKER: u8 = 0xC1;

/// The values written compact, by their full type names in openmls.
const COMPACT: [&str; 2] = ["openmls::group::mls_group::past_secrets::MessageSecretsStore", "openmls::treesync::TreeSync"];

/// The codec of every MLS provider (`mls::MlsProvider`).
#[derive(Default)]
pub struct StorageCodec;

/// A value that could not be encoded or decoded.
#[derive(Debug)]
pub enum StorageCodecError {
    Json(serde_json::Error),
    Encode(rmp_serde::encode::Error),
    Decode(rmp_serde::decode::Error),
}

impl std::fmt::Display for StorageCodecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StorageCodecError::Json(e) => write!(f, "MLS state (JSON): {e}"),
            StorageCodecError::Encode(e) => write!(f, "encoding MLS state: {e}"),
            StorageCodecError::Decode(e) => write!(f, "decoding MLS state: {e}"),
        }
    }
}

impl std::error::Error for StorageCodecError {}

/// True when values of type `T` (or references to it) are written compact.
fn is_compact<T: ?Sized>() -> bool {
    #[cfg(test)]
    if JSON_ONLY.with(std::cell::Cell::get) {
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
        let mut bytes = vec![MARKER];
        rmp_serde::encode::write_named(&mut bytes, value).map_err(StorageCodecError::Encode)?;
        Ok(bytes)
    }

    fn from_slice<T: serde::de::DeserializeOwned>(slice: &[u8]) -> Result<T, Self::Error> {
        match slice.split_first() {
            Some((&MARKER, compact)) => rmp_serde::from_slice(compact).map_err(StorageCodecError::Decode),
            _ => serde_json::from_slice(slice).map_err(StorageCodecError::Json),
        }
    }
}

#[cfg(test)]
thread_local! {
    static JSON_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Tests: while on, this thread writes every value as JSON, as releases before this codec did.
#[cfg(test)]
pub(crate) fn write_json_only(on: bool) {
    JSON_ONLY.with(|j| j.set(on));
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
        let mut compact = vec![MARKER];
        rmp_serde::encode::write_named(&mut compact, &sample).expect("msgpack");
        assert_eq!(StorageCodec::from_slice::<Sample>(&compact).expect("decode"), sample);
        assert!(StorageCodec::from_slice::<Sample>(&compact[..compact.len() - 1]).is_err(), "a cut value is an error");
    }
}
