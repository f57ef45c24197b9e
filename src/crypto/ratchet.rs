//! The Double Ratchet (Signal's published spec): X25519, HKDF-SHA256 / HMAC-SHA256 chains,
//! XChaCha20-Poly1305 with associated data binding both device keys and the header.
//!
//! Owns the session state, the envelope format (`e2e.CryptoEnvelope`) and the persisted form
//! (`e2e.SessionState`). X3DH (`x3dh`) creates sessions; storage and session selection are the
//! caller's concern.
//!
//! Initialisation follows libsignal: the X3DH secret gives a root key and a first chain key. The
//! responder sends on that chain under its signed prekey as ratchet key (so it can answer
//! before any DH ratchet step); the initiator receives on it and performs the first DH ratchet
//! step at once towards the signed prekey.

use std::collections::VecDeque;
use std::fmt;

use protobuf::{Message, MessageField};
use sodiumoxide::crypto::aead::xchacha20poly1305_ietf as aead;
use sodiumoxide::utils::memzero;

use self::consts::{MAX_PREVIOUS_RATCHET_KEYS, MAX_SKIP, MAX_SKIPPED_KEYS, SKIPPED_KEY_MAX_AGE_SECS};
use super::kdf::{hkdf_sha256, hmac_sha256};
use super::{CryptoError, PrekeyHeader, Result, X25519KeyPair};
use crate::clock::unix_now;
use crate::wire::e2e;

// ── Limits ──

/// Limits of the session state.
pub mod consts {
    /// Most message keys one ratchet step may skip (per chain, as in Signal's `MAX_SKIP`). A
    /// header claiming a larger gap fails with `TooManySkipped` before any work is done, so a
    /// forged header cannot make us derive millions of keys.
    pub const MAX_SKIP: u32 = 1000;
    /// Most skipped message keys a session keeps in total; the oldest are evicted first (a
    /// message that old then fails as `DuplicateMessage`). Bounds the stored state to ~140 KB.
    pub const MAX_SKIPPED_KEYS: usize = 2000;
    /// Earlier peer ratchet keys remembered, so that a replay on an old chain is reported as
    /// `DuplicateMessage` rather than an authentication failure.
    pub const MAX_PREVIOUS_RATCHET_KEYS: usize = 64;
    /// How long a skipped message key waits for its message: 30 days. A message later than
    /// that fails as `DuplicateMessage`; an old key is a secret that a stolen device would give
    /// away, for a message that will most likely never come.
    pub const SKIPPED_KEY_MAX_AGE_SECS: i64 = 30 * 24 * 3600;
}

/// Envelope and session state format version.
const VERSION: u32 = 1;
/// Ratchet header: ratchet public key (32), previous chain length (u32 BE), number (u32 BE).
const HEADER_LEN: usize = 40;
const INIT_INFO: &[u8] = b"bot-gateway/ratchet/init/v1";
const ROOT_INFO: &[u8] = b"bot-gateway/ratchet/root/v1";
const MESSAGE_KEY_INFO: &[u8] = b"bot-gateway/ratchet/message-key/v1";

// ── KDFs ──

/// (root key, first chain key) from the X3DH secret.
fn kdf_init(sk: &[u8; 32]) -> ([u8; 32], [u8; 32]) {
    let mut out = [0u8; 64];
    hkdf_sha256(&[0u8; 32], sk, INIT_INFO, &mut out);
    split(out)
}

/// KDF_RK: HKDF with the root key as salt and the DH output as input key material.
fn kdf_rk(root_key: &[u8; 32], dh_out: &[u8; 32]) -> ([u8; 32], [u8; 32]) {
    let mut out = [0u8; 64];
    hkdf_sha256(root_key, dh_out, ROOT_INFO, &mut out);
    split(out)
}

/// KDF_CK: (message key, next chain key) = (HMAC(ck, 0x01), HMAC(ck, 0x02)).
fn kdf_ck(chain_key: &[u8; 32]) -> ([u8; 32], [u8; 32]) {
    (hmac_sha256(chain_key, &[0x01]), hmac_sha256(chain_key, &[0x02]))
}

fn split(mut out: [u8; 64]) -> ([u8; 32], [u8; 32]) {
    let a = out[..32].try_into().expect("32-byte half");
    let b = out[32..].try_into().expect("32-byte half");
    memzero(&mut out);
    (a, b)
}

/// The AEAD key and nonce of one message key. Each message key is used once, so a derived
/// nonce never repeats under its key.
fn aead_key_nonce(message_key: &[u8; 32]) -> (aead::Key, aead::Nonce) {
    let mut out = [0u8; 56];
    hkdf_sha256(&[0u8; 32], message_key, MESSAGE_KEY_INFO, &mut out);
    let key = aead::Key(out[..32].try_into().expect("32-byte key"));
    let nonce = aead::Nonce(out[32..].try_into().expect("24-byte nonce"));
    memzero(&mut out);
    (key, nonce)
}

// ── Envelope ──

/// The ratchet header of one message.
struct Header {
    ratchet_key: [u8; 32],
    previous_chain_length: u32,
    number: u32,
}

impl Header {
    fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..32].copy_from_slice(&self.ratchet_key);
        b[32..36].copy_from_slice(&self.previous_chain_length.to_be_bytes());
        b[36..].copy_from_slice(&self.number.to_be_bytes());
        b
    }
    fn decode(b: &[u8]) -> Result<Self> {
        if b.len() != HEADER_LEN {
            return Err(CryptoError::Malformed("ratchet header"));
        }
        Ok(Header {
            ratchet_key: b[..32].try_into().expect("32-byte key"),
            previous_chain_length: u32::from_be_bytes(b[32..36].try_into().expect("4 bytes")),
            number: u32::from_be_bytes(b[36..].try_into().expect("4 bytes")),
        })
    }
}

/// Parses and checks the outer shape of an envelope (nothing is authenticated yet).
pub(crate) fn decode_envelope(bytes: &[u8]) -> Result<e2e::CryptoEnvelope> {
    let env = e2e::CryptoEnvelope::parse_from_bytes(bytes).map_err(|_| CryptoError::Malformed("envelope"))?;
    if env.version != VERSION {
        return Err(CryptoError::Malformed("envelope version"));
    }
    if env.header.len() != HEADER_LEN {
        return Err(CryptoError::Malformed("ratchet header"));
    }
    if env.ciphertext.len() < aead::TAGBYTES {
        return Err(CryptoError::Malformed("envelope ciphertext"));
    }
    Ok(env)
}

// ── Session ──

/// A message key kept for a message that has not arrived yet.
#[derive(Clone)]
struct SkippedKey {
    ratchet_key: [u8; 32],
    number: u32,
    message_key: [u8; 32],
    /// When it was derived (the project's clock): it goes `SKIPPED_KEY_MAX_AGE_SECS` later.
    stored_at: i64,
}

impl Drop for SkippedKey {
    fn drop(&mut self) {
        memzero(&mut self.message_key);
    }
}

/// One device-to-device session.
///
/// Debug output shows no key material. Secrets are zeroed when the session is dropped (the
/// encoded form from `to_bytes` is the caller's to protect).
#[derive(Clone)]
pub struct Session {
    /// Initiator device key || responder device key.
    ad: [u8; 64],
    peer_device_key: [u8; 32],
    root_key: [u8; 32],
    own_ratchet: X25519KeyPair,
    remote_ratchet: Option<[u8; 32]>,
    sending_chain: [u8; 32],
    receiving_chain: Option<[u8; 32]>,
    sending_counter: u32,
    receiving_counter: u32,
    previous_sending_length: u32,
    /// Oldest first.
    skipped: VecDeque<SkippedKey>,
    /// Earlier peer ratchet keys, oldest first.
    previous_remote: VecDeque<[u8; 32]>,
    pending_prekey: Option<PrekeyHeader>,
    accepted_from: Option<PrekeyHeader>,
}

impl Drop for Session {
    fn drop(&mut self) {
        memzero(&mut self.root_key);
        memzero(&mut self.sending_chain);
        if let Some(ck) = self.receiving_chain.as_mut() {
            memzero(ck);
        }
    }
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("peer_device_key", &super::hex_encode(&self.peer_device_key))
            .field("sending_counter", &self.sending_counter)
            .field("receiving_counter", &self.receiving_counter)
            .field("skipped_keys", &self.skipped.len())
            .field("pending_prekey", &self.pending_prekey.is_some())
            .field("accepted", &self.accepted_from.is_some())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// The initiator's session right after X3DH: receives on the first chain under the
    /// responder's signed prekey and has already stepped its sending chain towards it.
    pub(crate) fn new_initiator(
        sk: &[u8; 32],
        ad: [u8; 64],
        peer_device_key: [u8; 32],
        their_signed_prekey: [u8; 32],
        header: PrekeyHeader,
    ) -> Result<Self> {
        let (root0, chain0) = kdf_init(sk);
        let own_ratchet = X25519KeyPair::generate();
        let mut dh_out = own_ratchet.dh(&their_signed_prekey)?;
        let (root_key, sending_chain) = kdf_rk(&root0, &dh_out);
        memzero(&mut dh_out);
        Ok(Session {
            ad,
            peer_device_key,
            root_key,
            own_ratchet,
            remote_ratchet: Some(their_signed_prekey),
            sending_chain,
            receiving_chain: Some(chain0),
            sending_counter: 0,
            receiving_counter: 0,
            previous_sending_length: 0,
            skipped: VecDeque::new(),
            previous_remote: VecDeque::new(),
            pending_prekey: Some(header),
            accepted_from: None,
        })
    }

    /// The responder's session right after X3DH: sends on the first chain with its signed
    /// prekey as ratchet key; the initiator's first message triggers the first DH step.
    pub(crate) fn new_responder(
        sk: &[u8; 32],
        ad: [u8; 64],
        peer_device_key: [u8; 32],
        signed_prekey: X25519KeyPair,
        header: PrekeyHeader,
    ) -> Result<Self> {
        let (root_key, sending_chain) = kdf_init(sk);
        Ok(Session {
            ad,
            peer_device_key,
            root_key,
            own_ratchet: signed_prekey,
            remote_ratchet: None,
            sending_chain,
            receiving_chain: None,
            sending_counter: 0,
            receiving_counter: 0,
            previous_sending_length: 0,
            skipped: VecDeque::new(),
            previous_remote: VecDeque::new(),
            pending_prekey: None,
            accepted_from: Some(header),
        })
    }

    /// Encrypts into envelope bytes (the value of `DeviceCiphertext.ciphertext`). Until the
    /// first message from the peer is decrypted, envelopes carry the X3DH header.
    pub fn encrypt(&mut self, plaintext: &[u8]) -> Vec<u8> {
        let (mut message_key, next) = kdf_ck(&self.sending_chain);
        self.sending_chain = next;
        let header = Header {
            ratchet_key: self.own_ratchet.public,
            previous_chain_length: self.previous_sending_length,
            number: self.sending_counter,
        }
        .encode();
        // 2^32 messages without a reply from the peer is far beyond any real conversation.
        self.sending_counter = self.sending_counter.checked_add(1).expect("fewer than 2^32 messages per chain");
        let (key, nonce) = aead_key_nonce(&message_key);
        memzero(&mut message_key);
        let ciphertext = aead::seal(plaintext, Some(&self.message_ad(&header)), &nonce, &key);

        let mut env = e2e::CryptoEnvelope::new();
        env.version = VERSION;
        env.prekey = self.pending_prekey.as_ref().map(PrekeyHeader::to_proto).into();
        env.header = header.to_vec();
        env.ciphertext = ciphertext;
        env.write_to_bytes().expect("an in-memory protobuf message encodes")
    }

    /// Decrypts envelope bytes. On any error the session is left as it was (but for skipped
    /// keys past their age, which go in any case).
    ///
    /// Errors: `Malformed` (not an envelope), `DuplicateMessage` (key already used or
    /// evicted), `TooManySkipped` (gap above `consts::MAX_SKIP`), `DecryptionFailed` (not
    /// authentic for this session), `InvalidKey` (a low-order ratchet key).
    pub fn decrypt(&mut self, envelope: &[u8]) -> Result<Vec<u8>> {
        self.decrypt_at(envelope, unix_now())
    }

    /// `decrypt` at `now` (the project's clock; a test passes a later time): skipped keys
    /// older than `SKIPPED_KEY_MAX_AGE_SECS` are gone first.
    pub fn decrypt_at(&mut self, envelope: &[u8], now: i64) -> Result<Vec<u8>> {
        let env = decode_envelope(envelope)?;
        let header = Header::decode(&env.header)?;
        // Expired keys go whatever comes of this message; the rest works on a copy and commits
        // only on success.
        self.expire_skipped(now);
        let mut next = self.clone();
        let plaintext = next.decrypt_on_copy(&header, &env.header, &env.ciphertext, now)?;
        // The peer has answered, so it holds the session: stop sending the X3DH header.
        next.pending_prekey = None;
        *self = next;
        Ok(plaintext)
    }

    /// Deletes the skipped message keys older than `SKIPPED_KEY_MAX_AGE_SECS` at `now`; true
    /// when there were any (the caller stores the session again).
    pub fn expire_skipped(&mut self, now: i64) -> bool {
        let before = self.skipped.len();
        self.skipped.retain(|k| !crate::clock::is_due(k.stored_at, now, SKIPPED_KEY_MAX_AGE_SECS));
        self.skipped.len() != before
    }

    fn decrypt_on_copy(&mut self, header: &Header, header_bytes: &[u8], ciphertext: &[u8], now: i64) -> Result<Vec<u8>> {
        if let Some(pos) =
            self.skipped.iter().position(|k| k.ratchet_key == header.ratchet_key && k.number == header.number)
        {
            let entry = self.skipped.remove(pos).expect("position is in range");
            return self.open(&entry.message_key, header_bytes, ciphertext);
        }
        if self.remote_ratchet == Some(header.ratchet_key) {
            if header.number < self.receiving_counter {
                return Err(CryptoError::DuplicateMessage);
            }
        } else if self.previous_remote.contains(&header.ratchet_key) {
            // An earlier chain whose key for this number is gone: used already or evicted.
            return Err(CryptoError::DuplicateMessage);
        } else {
            self.skip_message_keys(header.previous_chain_length, now)?;
            self.dh_ratchet(&header.ratchet_key)?;
        }
        self.skip_message_keys(header.number, now)?;
        let chain = self.receiving_chain.as_ref().expect("a receiving chain exists after the checks above");
        let (mut message_key, next) = kdf_ck(chain);
        self.receiving_chain = Some(next);
        self.receiving_counter += 1;
        let result = self.open(&message_key, header_bytes, ciphertext);
        memzero(&mut message_key);
        result
    }

    fn open(&self, message_key: &[u8; 32], header_bytes: &[u8], ciphertext: &[u8]) -> Result<Vec<u8>> {
        let (key, nonce) = aead_key_nonce(message_key);
        aead::open(ciphertext, Some(&self.message_ad(header_bytes)), &nonce, &key)
            .map_err(|()| CryptoError::DecryptionFailed)
    }

    /// Session AD followed by the exact header bytes.
    fn message_ad(&self, header_bytes: &[u8]) -> Vec<u8> {
        let mut ad = Vec::with_capacity(self.ad.len() + header_bytes.len());
        ad.extend_from_slice(&self.ad);
        ad.extend_from_slice(header_bytes);
        ad
    }

    /// Stores the keys of the current receiving chain up to (not including) `until`.
    fn skip_message_keys(&mut self, until: u32, now: i64) -> Result<()> {
        let Some(mut chain) = self.receiving_chain else {
            return Ok(());
        };
        if u64::from(until) > u64::from(self.receiving_counter) + u64::from(MAX_SKIP) {
            return Err(CryptoError::TooManySkipped);
        }
        let ratchet_key = self.remote_ratchet.expect("a receiving chain always has a remote ratchet key");
        while self.receiving_counter < until {
            let (message_key, next) = kdf_ck(&chain);
            chain = next;
            self.skipped.push_back(SkippedKey { ratchet_key, number: self.receiving_counter, message_key, stored_at: now });
            if self.skipped.len() > MAX_SKIPPED_KEYS {
                self.skipped.pop_front();
            }
            self.receiving_counter += 1;
        }
        self.receiving_chain = Some(chain);
        memzero(&mut chain);
        Ok(())
    }

    /// A DH ratchet step towards the peer's new ratchet key.
    fn dh_ratchet(&mut self, their_key: &[u8; 32]) -> Result<()> {
        if let Some(old) = self.remote_ratchet.replace(*their_key) {
            self.previous_remote.push_back(old);
            if self.previous_remote.len() > MAX_PREVIOUS_RATCHET_KEYS {
                self.previous_remote.pop_front();
            }
        }
        self.previous_sending_length = self.sending_counter;
        self.sending_counter = 0;
        self.receiving_counter = 0;
        let mut dh_out = self.own_ratchet.dh(their_key)?;
        let (root_key, receiving_chain) = kdf_rk(&self.root_key, &dh_out);
        self.own_ratchet = X25519KeyPair::generate();
        dh_out = self.own_ratchet.dh(their_key)?;
        let (root_key, sending_chain) = kdf_rk(&root_key, &dh_out);
        memzero(&mut dh_out);
        self.root_key = root_key;
        self.receiving_chain = Some(receiving_chain);
        self.sending_chain = sending_chain;
        Ok(())
    }

    /// The peer's Ed25519 device key.
    pub fn peer_device_key(&self) -> [u8; 32] {
        self.peer_device_key
    }
    /// True when this session was created (as responder) from exactly this header, so a
    /// repeated prekey message belongs to it rather than starting a new session.
    pub fn was_accepted_from(&self, header: &PrekeyHeader) -> bool {
        self.accepted_from.as_ref() == Some(header)
    }
    /// True while outgoing envelopes still carry the X3DH header (initiator, no reply yet).
    pub fn has_pending_prekey(&self) -> bool {
        self.pending_prekey.is_some()
    }

    /// The persisted form (`e2e.SessionState`); it holds every secret of the session, so the
    /// buffer is wiped when dropped.
    pub fn to_bytes(&self) -> zeroize::Zeroizing<Vec<u8>> {
        let mut m = e2e::SessionState::new();
        m.version = VERSION;
        m.associated_data = self.ad.to_vec();
        m.peer_device_key = self.peer_device_key.to_vec();
        m.root_key = self.root_key.to_vec();
        m.own_ratchet_secret = self.own_ratchet.secret_bytes().to_vec();
        m.own_ratchet_public = self.own_ratchet.public.to_vec();
        m.remote_ratchet_key = self.remote_ratchet.map(|k| k.to_vec()).unwrap_or_default();
        m.sending_chain_key = self.sending_chain.to_vec();
        m.receiving_chain_key = self.receiving_chain.map(|k| k.to_vec()).unwrap_or_default();
        m.sending_counter = self.sending_counter;
        m.receiving_counter = self.receiving_counter;
        m.previous_sending_length = self.previous_sending_length;
        m.skipped = self
            .skipped
            .iter()
            .map(|k| {
                let mut s = e2e::SkippedMessageKey::new();
                s.ratchet_key = k.ratchet_key.to_vec();
                s.message_number = k.number;
                s.message_key = k.message_key.to_vec();
                s.stored_at = k.stored_at;
                s
            })
            .collect();
        m.previous_remote_ratchet_keys = self.previous_remote.iter().map(|k| k.to_vec()).collect();
        m.pending_prekey = self.pending_prekey.as_ref().map(PrekeyHeader::to_proto).into();
        m.accepted_from = self.accepted_from.as_ref().map(PrekeyHeader::to_proto).into();
        let bytes = m.write_to_bytes().expect("an in-memory protobuf message encodes");
        // The message's copies of the keys are not needed any more.
        for field in [&mut m.root_key, &mut m.own_ratchet_secret, &mut m.sending_chain_key, &mut m.receiving_chain_key] {
            memzero(field);
        }
        for s in m.skipped.iter_mut() {
            memzero(&mut s.message_key);
        }
        zeroize::Zeroizing::new(bytes)
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut m = e2e::SessionState::parse_from_bytes(bytes).map_err(|_| CryptoError::Malformed("session state"))?;
        let session = Self::from_state(&m);
        for field in [&mut m.root_key, &mut m.own_ratchet_secret, &mut m.sending_chain_key, &mut m.receiving_chain_key] {
            memzero(field);
        }
        for s in m.skipped.iter_mut() {
            memzero(&mut s.message_key);
        }
        session
    }

    fn from_state(m: &e2e::SessionState) -> Result<Self> {
        fn key32(b: &[u8], what: &'static str) -> Result<[u8; 32]> {
            b.try_into().map_err(|_| CryptoError::Malformed(what))
        }
        fn optional_key32(b: &[u8], what: &'static str) -> Result<Option<[u8; 32]>> {
            if b.is_empty() {
                Ok(None)
            } else {
                key32(b, what).map(Some)
            }
        }
        fn header(h: &MessageField<e2e::PrekeyMessageHeader>) -> Result<Option<PrekeyHeader>> {
            h.as_ref().map(PrekeyHeader::from_proto).transpose()
        }
        if m.version != VERSION {
            return Err(CryptoError::Malformed("session state version"));
        }
        let remote_ratchet = optional_key32(&m.remote_ratchet_key, "session remote ratchet key")?;
        let receiving_chain = optional_key32(&m.receiving_chain_key, "session receiving chain")?;
        if receiving_chain.is_some() && remote_ratchet.is_none() {
            return Err(CryptoError::Malformed("session state (receiving chain without ratchet key)"));
        }
        if m.skipped.len() > MAX_SKIPPED_KEYS || m.previous_remote_ratchet_keys.len() > MAX_PREVIOUS_RATCHET_KEYS {
            return Err(CryptoError::Malformed("session state (too many stored keys)"));
        }
        let skipped = m
            .skipped
            .iter()
            .map(|s| {
                Ok(SkippedKey {
                    ratchet_key: key32(&s.ratchet_key, "skipped key ratchet key")?,
                    number: s.message_number,
                    message_key: key32(&s.message_key, "skipped message key")?,
                    // Kept by an earlier release, which recorded no time: counted from now.
                    stored_at: if s.stored_at == 0 { unix_now() } else { s.stored_at },
                })
            })
            .collect::<Result<VecDeque<_>>>()?;
        let previous_remote = m
            .previous_remote_ratchet_keys
            .iter()
            .map(|k| key32(k, "previous ratchet key"))
            .collect::<Result<VecDeque<_>>>()?;
        Ok(Session {
            ad: m.associated_data.as_slice().try_into().map_err(|_| CryptoError::Malformed("session associated data"))?,
            peer_device_key: key32(&m.peer_device_key, "session peer device key")?,
            root_key: key32(&m.root_key, "session root key")?,
            // Loading a session used to derive this public key from the secret: a tenth of an
            // inbound message's cost. States of earlier releases have none stored.
            own_ratchet: match optional_key32(&m.own_ratchet_public, "session ratchet public key")? {
                Some(public) => X25519KeyPair::from_parts(key32(&m.own_ratchet_secret, "session ratchet secret")?, public),
                None => X25519KeyPair::from_secret(key32(&m.own_ratchet_secret, "session ratchet secret")?),
            },
            remote_ratchet,
            sending_chain: key32(&m.sending_chain_key, "session sending chain")?,
            receiving_chain,
            sending_counter: m.sending_counter,
            receiving_counter: m.receiving_counter,
            previous_sending_length: m.previous_sending_length,
            skipped,
            previous_remote,
            pending_prekey: header(&m.pending_prekey)?,
            accepted_from: header(&m.accepted_from)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::x3dh::{accept_session, initiate_session, peek_prekey_header, PrekeyBundle};
    use crate::crypto::{IdentityKeyPair, OneTimePrekeyPair, SignedPrekeyPair};

    /// An initiator session (alice) and the responder session (bob) accepted from alice's first
    /// message, which bob has decrypted; bob's answer has not reached alice yet.
    fn pair() -> (Session, Session) {
        let (a, mut b, first) = accepted_pair();
        assert_eq!(b.decrypt(&first).expect("first message"), b"hello bob");
        (a, b)
    }

    /// Alice's session, bob's freshly accepted session and alice's first (prekey) message,
    /// not yet decrypted by bob.
    fn accepted_pair() -> (Session, Session, Vec<u8>) {
        crate::crypto::init();
        let alice = IdentityKeyPair::generate();
        let bob = IdentityKeyPair::generate();
        let spk = SignedPrekeyPair::generate(1, &bob);
        let opk = OneTimePrekeyPair::generate_batch(9, 1).remove(0);
        let bundle = PrekeyBundle {
            device_key: bob.public_key(),
            signed_prekey_id: 1,
            signed_prekey: spk.key.public,
            signed_prekey_signature: spk.signature.to_vec(),
            one_time_prekey: Some((9, opk.key.public)),
        };
        let mut a = initiate_session(&alice, &bundle).expect("bundle verifies");
        let first = a.encrypt(b"hello bob");
        let header = peek_prekey_header(&first).expect("decodes").expect("prekey header");
        let b = accept_session(&bob, &spk, Some(&opk), &header).expect("accepts");
        (a, b, first)
    }

    fn flip(bytes: &[u8], index: usize, bit: u8) -> Vec<u8> {
        let mut v = bytes.to_vec();
        v[index] ^= 1 << bit;
        v
    }

    /// Re-encodes an envelope after changing its parsed parts, so tampering hits exactly the
    /// field meant (not the protobuf framing).
    fn tamper(envelope: &[u8], f: impl FnOnce(&mut e2e::CryptoEnvelope)) -> Vec<u8> {
        let mut env = e2e::CryptoEnvelope::parse_from_bytes(envelope).expect("parses");
        f(&mut env);
        env.write_to_bytes().expect("encodes")
    }

    #[test]
    fn messages_both_ways_over_many_turns() {
        let (mut a, mut b) = pair();
        for turn in 0..50u32 {
            // Varying burst lengths exercise chains of different lengths in both directions.
            for i in 0..(turn % 4 + 1) {
                let m = format!("a->b {turn} {i}");
                assert_eq!(b.decrypt(&a.encrypt(m.as_bytes())).expect("a->b"), m.as_bytes());
            }
            for i in 0..(turn % 3 + 1) {
                let m = format!("b->a {turn} {i}");
                assert_eq!(a.decrypt(&b.encrypt(m.as_bytes())).expect("b->a"), m.as_bytes());
            }
        }
        // Empty plaintexts work too.
        assert_eq!(b.decrypt(&a.encrypt(b"")).expect("empty"), b"");
        assert!(a.skipped.is_empty() && b.skipped.is_empty());
    }

    #[test]
    fn a_stored_state_keeps_its_ratchet_public_key_and_one_of_an_earlier_release_loads_without_it() {
        let (mut a, mut b) = pair();
        assert_eq!(b.decrypt(&a.encrypt(b"one")).expect("one"), b"one");
        let stored = e2e::SessionState::parse_from_bytes(&b.to_bytes()).expect("parses");
        assert_eq!(stored.own_ratchet_public, b.own_ratchet.public.to_vec());
        // An earlier release stored no public key: it is derived from the secret.
        let mut earlier = stored.clone();
        earlier.own_ratchet_public.clear();
        for state in [stored, earlier] {
            let mut loaded = Session::from_bytes(&state.write_to_bytes().expect("encodes")).expect("loads");
            assert_eq!(loaded.own_ratchet.public, b.own_ratchet.public);
            let mut a = Session::from_bytes(&a.to_bytes()).expect("alice loads");
            assert_eq!(a.decrypt(&loaded.encrypt(b"reply")).expect("reply"), b"reply");
            assert_eq!(loaded.decrypt(&a.encrypt(b"two")).expect("two"), b"two");
        }
    }

    #[test]
    fn responder_can_send_before_decrypting_anything() {
        let (mut a, mut b, first) = accepted_pair();
        // Bob answers on the initial chain (his signed prekey as ratchet key) right away.
        let early = b.encrypt(b"early");
        assert_eq!(peek_prekey_header(&early).expect("decodes"), None);
        assert_eq!(b.decrypt(&first).expect("first"), b"hello bob");
        let later = b.encrypt(b"later");
        assert_eq!(a.decrypt(&later).expect("later"), b"later");
        assert_eq!(a.decrypt(&early).expect("early, from a skipped key"), b"early");
        assert_eq!(b.decrypt(&a.encrypt(b"more")).expect("more"), b"more");
        assert_eq!(a.decrypt(&b.encrypt(b"and more")).expect("and more"), b"and more");
    }

    #[test]
    fn responder_can_send_before_the_initiator_ratchets() {
        let (mut a, mut b) = pair();
        // Bob's first answers ride the initial chain; alice's later messages cross them.
        let b1 = b.encrypt(b"b1");
        let a2 = a.encrypt(b"a2");
        let b2 = b.encrypt(b"b2");
        assert_eq!(b.decrypt(&a2).expect("a2"), b"a2");
        assert_eq!(a.decrypt(&b2).expect("b2"), b"b2");
        assert_eq!(a.decrypt(&b1).expect("b1 from a skipped key"), b"b1");
        assert_eq!(b.decrypt(&a.encrypt(b"a3")).expect("a3"), b"a3");
        assert_eq!(a.decrypt(&b.encrypt(b"b3")).expect("b3"), b"b3");
    }

    #[test]
    fn out_of_order_delivery_within_and_across_ratchet_steps() {
        let (mut a, mut b) = pair();
        let a_chain1: Vec<_> = (0..5).map(|i| a.encrypt(format!("a1-{i}").as_bytes())).collect();
        // Bob answers only after the first of them, so alice ratchets between her chains.
        assert_eq!(b.decrypt(&a_chain1[0]).expect("a1-0"), b"a1-0");
        assert_eq!(a.decrypt(&b.encrypt(b"b1")).expect("b1"), b"b1");
        let a_chain2: Vec<_> = (0..3).map(|i| a.encrypt(format!("a2-{i}").as_bytes())).collect();
        // Newest chain first, then the old chain backwards, then the rest.
        assert_eq!(b.decrypt(&a_chain2[2]).expect("a2-2"), b"a2-2");
        assert_eq!(b.decrypt(&a_chain1[4]).expect("a1-4"), b"a1-4");
        assert_eq!(b.decrypt(&a_chain1[2]).expect("a1-2"), b"a1-2");
        assert_eq!(b.decrypt(&a_chain2[0]).expect("a2-0"), b"a2-0");
        assert_eq!(b.decrypt(&a_chain1[1]).expect("a1-1"), b"a1-1");
        assert_eq!(b.decrypt(&a_chain1[3]).expect("a1-3"), b"a1-3");
        assert_eq!(b.decrypt(&a_chain2[1]).expect("a2-1"), b"a2-1");
        assert!(b.skipped.is_empty(), "every skipped key was used and deleted");
        // Each of them is refused the second time.
        for env in a_chain1.iter().chain(&a_chain2) {
            assert_eq!(b.decrypt(env), Err(CryptoError::DuplicateMessage));
        }
        assert_eq!(a.decrypt(&b.encrypt(b"still fine")).expect("after"), b"still fine");
    }

    #[test]
    fn skipping_beyond_max_skip_is_refused_and_the_session_survives() {
        let (mut a, mut b) = pair();
        assert_eq!(a.decrypt(&b.encrypt(b"sync")).expect("sync"), b"sync");
        let envs: Vec<_> = (0..=MAX_SKIP + 1).map(|i| a.encrypt(&i.to_be_bytes())).collect();
        let before = b.to_bytes();
        // Message number MAX_SKIP + 1 needs MAX_SKIP + 1 skipped keys: one too many.
        let last = envs.last().expect("non-empty");
        assert_eq!(b.decrypt(last), Err(CryptoError::TooManySkipped));
        assert_eq!(b.to_bytes(), before, "a refused message leaves the session unchanged");
        // Exactly MAX_SKIP skipped keys are fine.
        assert_eq!(b.decrypt(&envs[MAX_SKIP as usize]).expect("at the bound"), MAX_SKIP.to_be_bytes());
        assert_eq!(b.skipped.len(), MAX_SKIP as usize);
        assert_eq!(b.decrypt(last).expect("now within bound"), (MAX_SKIP + 1).to_be_bytes());
        assert_eq!(b.decrypt(&envs[0]).expect("skipped key"), 0u32.to_be_bytes());
        assert_eq!(a.decrypt(&b.encrypt(b"reply")).expect("reply"), b"reply");
        assert_eq!(b.decrypt(&a.encrypt(b"next")).expect("next"), b"next");
    }

    #[test]
    fn too_many_skipped_in_previous_chain_is_refused() {
        let (mut a, mut b) = pair();
        assert_eq!(a.decrypt(&b.encrypt(b"sync")).expect("sync"), b"sync");
        for i in 0..=MAX_SKIP + 1 {
            let _ = a.encrypt(&i.to_be_bytes());
        }
        // Alice ratchets; her next message's header says her last chain had MAX_SKIP + 2.
        let b_msg = b.encrypt(b"b");
        assert_eq!(a.decrypt(&b_msg).expect("b"), b"b");
        let next_chain = a.encrypt(b"new chain");
        let before = b.to_bytes();
        assert_eq!(b.decrypt(&next_chain), Err(CryptoError::TooManySkipped));
        assert_eq!(b.to_bytes(), before);
    }

    #[test]
    fn skipped_key_store_is_capped_oldest_first() {
        let (mut a, mut b) = pair();
        let mut oldest = None;
        // Three chains with 900 undelivered messages each: 2700 keys, more than the cap.
        for round in 0..3 {
            let envs: Vec<_> = (0..901).map(|_| a.encrypt(b"x")).collect();
            if round == 0 {
                oldest = Some(envs[0].clone());
            }
            assert_eq!(b.decrypt(&envs[900]).expect("last of chain"), b"x");
            assert_eq!(a.decrypt(&b.encrypt(b"turn")).expect("turn"), b"turn");
        }
        assert_eq!(b.skipped.len(), MAX_SKIPPED_KEYS);
        let oldest = oldest.expect("set in round 0");
        assert_eq!(b.decrypt(&oldest), Err(CryptoError::DuplicateMessage), "evicted key");
        assert!(b.to_bytes().len() < 200_000);
    }

    #[test]
    fn replayed_ciphertext_is_refused() {
        let (mut a, mut b) = pair();
        let env = a.encrypt(b"once");
        assert_eq!(b.decrypt(&env).expect("first time"), b"once");
        let before = b.to_bytes();
        assert_eq!(b.decrypt(&env), Err(CryptoError::DuplicateMessage));
        assert_eq!(b.to_bytes(), before);
        // The very first (prekey) message replayed on the session it created is a duplicate.
        let (_, mut b, first) = accepted_pair();
        assert_eq!(b.decrypt(&first).expect("first"), b"hello bob");
        assert_eq!(b.decrypt(&first), Err(CryptoError::DuplicateMessage));
        // So is a reply replayed to the initiator.
        let (mut a, mut b) = pair();
        let reply = b.encrypt(b"r");
        assert_eq!(a.decrypt(&reply).expect("reply"), b"r");
        assert_eq!(a.decrypt(&reply), Err(CryptoError::DuplicateMessage));
        // A replay from an older chain after ratchet steps.
        let old = a.encrypt(b"old");
        assert_eq!(b.decrypt(&old).expect("old"), b"old");
        for _ in 0..3 {
            assert_eq!(a.decrypt(&b.encrypt(b"t")).expect("t"), b"t");
            assert_eq!(b.decrypt(&a.encrypt(b"t")).expect("t"), b"t");
        }
        assert_eq!(b.decrypt(&old), Err(CryptoError::DuplicateMessage));
    }

    #[test]
    fn flipped_bits_in_header_and_body_are_refused() {
        let (mut a, mut b) = pair();
        assert_eq!(a.decrypt(&b.encrypt(b"sync")).expect("sync"), b"sync");
        let env = a.encrypt(b"genuine");
        let before = b.to_bytes();
        // Header: the ratchet key, the previous chain length and the message number.
        for (index, bit) in [(0usize, 0u8), (31, 6), (35, 0), (39, 1)] {
            let bad = tamper(&env, |e| e.header = flip(&e.header, index, bit));
            assert!(b.decrypt(&bad).is_err(), "header byte {index} bit {bit}");
            assert_eq!(b.to_bytes(), before);
        }
        let bad_key = tamper(&env, |e| e.header = flip(&e.header, 3, 2));
        assert_eq!(b.decrypt(&bad_key), Err(CryptoError::DecryptionFailed));
        let bad_number = tamper(&env, |e| e.header = flip(&e.header, 39, 0));
        assert_eq!(b.decrypt(&bad_number), Err(CryptoError::DecryptionFailed));
        // Body: the ciphertext and the tag.
        for index in [0usize, 5, 20] {
            let bad = tamper(&env, |e| e.ciphertext = flip(&e.ciphertext, index, 3));
            assert_eq!(b.decrypt(&bad), Err(CryptoError::DecryptionFailed), "body byte {index}");
        }
        let truncated = tamper(&env, |e| {
            e.ciphertext.pop();
        });
        assert_eq!(b.decrypt(&truncated), Err(CryptoError::DecryptionFailed));
        // Every single-bit flip of the raw envelope bytes is refused.
        for index in 0..env.len() {
            assert!(b.decrypt(&flip(&env, index, (index % 8) as u8)).is_err(), "raw byte {index}");
        }
        assert_eq!(b.to_bytes(), before, "failed attempts left no trace");
        assert_eq!(b.decrypt(&env).expect("genuine message still decrypts"), b"genuine");
    }

    #[test]
    fn a_message_for_another_session_fails() {
        let (mut a, _) = pair();
        let (_, mut other) = pair();
        assert_eq!(other.decrypt(&a.encrypt(b"x")), Err(CryptoError::DecryptionFailed));
        assert!(matches!(other.decrypt(b""), Err(CryptoError::Malformed(_))));
    }

    #[test]
    fn sessions_survive_to_bytes_mid_conversation_on_both_sides() {
        let (mut a, mut b) = pair();
        let in_flight: Vec<_> = (0..3).map(|i| a.encrypt(&[i])).collect();
        assert_eq!(b.decrypt(&in_flight[2]).expect("skips two"), [2]);
        let b_pending = b.encrypt(b"to alice");
        // Both sides are stored and restored with keys skipped, a header pending, messages in flight.
        let a_bytes = a.to_bytes();
        let b_bytes = b.to_bytes();
        let mut a2 = Session::from_bytes(&a_bytes).expect("alice restores");
        let mut b2 = Session::from_bytes(&b_bytes).expect("bob restores");
        assert_eq!(a2.to_bytes(), a_bytes);
        assert_eq!(b2.to_bytes(), b_bytes);
        assert_eq!(b2.skipped.len(), 2);
        assert!(a2.has_pending_prekey());
        assert_eq!(a2.peer_device_key(), a.peer_device_key());
        let header = peek_prekey_header(&a.encrypt(b"h")).expect("decodes").expect("header");
        assert!(b2.was_accepted_from(&header));
        assert_eq!(b2.decrypt(&in_flight[0]).expect("skipped key restored"), [0]);
        assert_eq!(a2.decrypt(&b_pending).expect("restored alice"), b"to alice");
        assert!(!a2.has_pending_prekey());
        for i in 0..5u8 {
            assert_eq!(b2.decrypt(&a2.encrypt(&[i])).expect("a2->b2"), [i]);
            assert_eq!(a2.decrypt(&b2.encrypt(&[i])).expect("b2->a2"), [i]);
        }
        // The originals and the copies are now different sessions: one of them must lose.
        assert_eq!(b2.decrypt(&in_flight[1]).expect("last skipped"), [1]);
        // Corrupt or foreign bytes are refused.
        assert!(Session::from_bytes(&a_bytes[..a_bytes.len() - 3]).is_err());
        assert!(Session::from_bytes(b"not a session").is_err());
        assert!(matches!(Session::from_bytes(&[]), Err(CryptoError::Malformed(_))));
    }

    #[test]
    fn prekey_header_present_until_the_responder_answers() {
        let (mut a, mut b) = pair();
        assert!(a.has_pending_prekey());
        let h1 = peek_prekey_header(&a.encrypt(b"1")).expect("decodes").expect("still carried");
        let h2 = peek_prekey_header(&a.encrypt(b"2")).expect("decodes").expect("still carried");
        assert_eq!(h1, h2);
        assert!(b.was_accepted_from(&h1));
        let mut other = h1.clone();
        other.ephemeral_key[0] ^= 1;
        assert!(!b.was_accepted_from(&other));
        // Bob's messages never carry one.
        let reply = b.encrypt(b"answer");
        assert_eq!(peek_prekey_header(&reply).expect("decodes"), None);
        // A failed decryption does not clear it.
        let bad = tamper(&reply, |e| e.ciphertext = flip(&e.ciphertext, 0, 0));
        assert!(a.decrypt(&bad).is_err());
        assert!(peek_prekey_header(&a.encrypt(b"3")).expect("decodes").is_some());
        assert_eq!(a.decrypt(&reply).expect("answer"), b"answer");
        assert!(!a.has_pending_prekey());
        assert_eq!(peek_prekey_header(&a.encrypt(b"4")).expect("decodes"), None);
    }

    #[test]
    fn debug_output_has_no_secrets() {
        let (a, b) = pair();
        for s in [&a, &b] {
            let text = format!("{s:?}");
            for secret in [&s.root_key, &s.sending_chain, s.own_ratchet.secret_bytes()] {
                assert!(!text.contains(&crate::crypto::hex_encode(secret)));
                assert!(!text.contains(&format!("{:?}", secret)));
            }
            assert!(text.contains(&crate::crypto::hex_encode(&s.peer_device_key)));
        }
    }

    #[test]
    fn a_skipped_key_is_deleted_after_thirty_days_and_kept_before() {
        let (mut a, mut b) = pair();
        let (late, early) = (a.encrypt(b"late"), a.encrypt(b"on time"));
        let (later, next) = (a.encrypt(b"later"), a.encrypt(b"next"));
        let t = 1_800_000_000;
        assert_eq!(b.decrypt_at(&next, t).expect("the fourth first"), b"next");
        assert_eq!(b.skipped.len(), 3);
        // Stored and loaded again, the keys keep their time.
        let mut b = Session::from_bytes(&b.to_bytes()).expect("round trip");
        assert!(!b.expire_skipped(t + SKIPPED_KEY_MAX_AGE_SECS - 1), "younger than 30 days: kept");
        assert_eq!(b.decrypt_at(&early, t + SKIPPED_KEY_MAX_AGE_SECS - 1).expect("in time"), b"on time");
        assert_eq!(b.decrypt_at(&late, t + SKIPPED_KEY_MAX_AGE_SECS), Err(CryptoError::DuplicateMessage), "its key is gone");
        assert!(b.skipped.is_empty(), "every key of that age went at once");
        assert_eq!(b.decrypt_at(&later, t + SKIPPED_KEY_MAX_AGE_SECS), Err(CryptoError::DuplicateMessage));
        // The session goes on.
        assert_eq!(b.decrypt_at(&a.encrypt(b"new"), t + SKIPPED_KEY_MAX_AGE_SECS).expect("new"), b"new");
        // A sweep of a stored session removes old keys without any message.
        let (mut a, mut b) = pair();
        let (_lost, next) = (a.encrypt(b"lost"), a.encrypt(b"next"));
        b.decrypt_at(&next, t).expect("next");
        assert!(b.expire_skipped(t + SKIPPED_KEY_MAX_AGE_SECS));
        assert!(b.skipped.is_empty());
    }
}
