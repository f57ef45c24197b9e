//! X3DH key agreement (Signal's published spec) between two devices.
//!
//! A device's X3DH identity key is the X25519 form of its Ed25519 device key. The initiator
//! verifies the signed prekey against the bundle's device key; checking the device certificate
//! against the account identity is the caller's job (see `identity`). Looking up, storing and
//! deleting prekeys is the caller's job too.

use sodiumoxide::utils::memzero;

use super::identity::x25519_public;
use super::kdf::hkdf_sha256;
use super::prekeys::{dh, verify_signed_prekey};
use super::ratchet::decode_envelope;
use super::{CryptoError, IdentityKeyPair, OneTimePrekeyPair, Result, Session, SignedPrekeyPair, X25519KeyPair};
use crate::wire::e2e;

/// HKDF info of the X3DH shared secret.
const X3DH_INFO: &[u8] = b"bot-gateway/x3dh/v1";

/// The public half of a peer device, as served by the platform.
#[derive(Clone, Debug)]
pub struct PrekeyBundle {
    pub device_key: [u8; 32],
    pub signed_prekey_id: u32,
    pub signed_prekey: [u8; 32],
    pub signed_prekey_signature: Vec<u8>,
    pub one_time_prekey: Option<(u32, [u8; 32])>,
}

/// The X3DH header an initiator's messages carry until the responder answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrekeyHeader {
    pub initiator_device_key: [u8; 32],
    pub ephemeral_key: [u8; 32],
    pub signed_prekey_id: u32,
    pub one_time_prekey_id: Option<u32>,
}

impl PrekeyHeader {
    pub(crate) fn to_proto(&self) -> e2e::PrekeyMessageHeader {
        let mut m = e2e::PrekeyMessageHeader::new();
        m.initiator_device_key = self.initiator_device_key.to_vec();
        m.ephemeral_key = self.ephemeral_key.to_vec();
        m.signed_prekey_id = self.signed_prekey_id;
        m.has_one_time_prekey = self.one_time_prekey_id.is_some();
        m.one_time_prekey_id = self.one_time_prekey_id.unwrap_or(0);
        m
    }
    pub(crate) fn from_proto(m: &e2e::PrekeyMessageHeader) -> Result<Self> {
        Ok(PrekeyHeader {
            initiator_device_key: m
                .initiator_device_key
                .as_slice()
                .try_into()
                .map_err(|_| CryptoError::Malformed("prekey header device key"))?,
            ephemeral_key: m
                .ephemeral_key
                .as_slice()
                .try_into()
                .map_err(|_| CryptoError::Malformed("prekey header ephemeral key"))?,
            signed_prekey_id: m.signed_prekey_id,
            one_time_prekey_id: m.has_one_time_prekey.then_some(m.one_time_prekey_id),
        })
    }
}

/// Key material that zeroes itself when dropped, on every way out of a function (an error
/// included): the identity's X25519 secret, the DH outputs and the shared secret.
struct Zeroing<T: AsMut<[u8]>>(T);

impl<T: AsMut<[u8]>> Drop for Zeroing<T> {
    fn drop(&mut self) {
        memzero(self.0.as_mut());
    }
}

/// The HKDF input F || DH1 || DH2 || DH3 [|| DH4], F = 32 bytes of 0xFF; its capacity is
/// reserved up front so that no copy is left behind by a reallocation.
struct KeyInput(Zeroing<Vec<u8>>);

impl KeyInput {
    fn new() -> KeyInput {
        let mut ikm = Vec::with_capacity(32 * 5);
        ikm.extend_from_slice(&[0xFF; 32]);
        KeyInput(Zeroing(ikm))
    }

    fn push(&mut self, dh: Result<[u8; 32]>) -> Result<()> {
        let dh = Zeroing(dh?);
        self.0 .0.extend_from_slice(&dh.0);
        Ok(())
    }

    /// SK = HKDF(F || DH1 || DH2 || DH3 [|| DH4]) with a zero salt.
    fn shared_secret(&self) -> Zeroing<[u8; 32]> {
        let mut sk = Zeroing([0u8; 32]);
        hkdf_sha256(&[0u8; 32], &self.0 .0, X3DH_INFO, &mut sk.0);
        sk
    }
}

/// Initiator device key then responder device key.
fn associated_data(initiator: &[u8; 32], responder: &[u8; 32]) -> [u8; 64] {
    let mut ad = [0u8; 64];
    ad[..32].copy_from_slice(initiator);
    ad[32..].copy_from_slice(responder);
    ad
}

/// Starts a session as the initiator. Fails if the signed prekey signature does not verify.
pub fn initiate_session(own_device: &IdentityKeyPair, bundle: &PrekeyBundle) -> Result<Session> {
    verify_signed_prekey(&bundle.device_key, &bundle.signed_prekey, &bundle.signed_prekey_signature)?;
    let their_identity = x25519_public(&bundle.device_key)?;
    let own_identity = Zeroing(own_device.x25519_secret()?);
    let ephemeral = X25519KeyPair::generate();

    let mut ikm = KeyInput::new();
    ikm.push(dh(&own_identity.0, &bundle.signed_prekey))?;
    ikm.push(ephemeral.dh(&their_identity))?;
    ikm.push(ephemeral.dh(&bundle.signed_prekey))?;
    if let Some((_, one_time)) = &bundle.one_time_prekey {
        ikm.push(ephemeral.dh(one_time))?;
    }
    let sk = ikm.shared_secret();

    let header = PrekeyHeader {
        initiator_device_key: own_device.public_key(),
        ephemeral_key: ephemeral.public,
        signed_prekey_id: bundle.signed_prekey_id,
        one_time_prekey_id: bundle.one_time_prekey.map(|(id, _)| id),
    };
    let ad = associated_data(&own_device.public_key(), &bundle.device_key);
    Session::new_initiator(&sk.0, ad, bundle.device_key, bundle.signed_prekey, header)
}

/// Reads the X3DH header of an envelope, if it carries one, without decrypting anything.
pub fn peek_prekey_header(envelope: &[u8]) -> Result<Option<PrekeyHeader>> {
    let env = decode_envelope(envelope)?;
    match env.prekey.as_ref() {
        Some(h) => Ok(Some(PrekeyHeader::from_proto(h)?)),
        None => Ok(None),
    }
}

/// Starts a session as the responder from an initiator's header. The caller looks up the
/// prekeys the header names and deletes the one-time prekey once the result is stored.
///
/// Fails with `UnknownPrekey` when the given prekeys are not the ones the header names.
pub fn accept_session(
    own_device: &IdentityKeyPair,
    signed_prekey: &SignedPrekeyPair,
    one_time_prekey: Option<&OneTimePrekeyPair>,
    header: &PrekeyHeader,
) -> Result<Session> {
    if header.signed_prekey_id != signed_prekey.id {
        return Err(CryptoError::UnknownPrekey(header.signed_prekey_id));
    }
    let one_time = match (header.one_time_prekey_id, one_time_prekey) {
        (Some(id), Some(k)) if k.id == id => Some(k),
        (Some(id), _) => return Err(CryptoError::UnknownPrekey(id)),
        // A prekey the initiator did not use must not enter the derivation.
        (None, _) => None,
    };
    let their_identity = x25519_public(&header.initiator_device_key)?;
    let own_identity = Zeroing(own_device.x25519_secret()?);

    let mut ikm = KeyInput::new();
    ikm.push(signed_prekey.key.dh(&their_identity))?;
    ikm.push(dh(&own_identity.0, &header.ephemeral_key))?;
    ikm.push(signed_prekey.key.dh(&header.ephemeral_key))?;
    if let Some(k) = one_time {
        ikm.push(k.key.dh(&header.ephemeral_key))?;
    }
    let sk = ikm.shared_secret();

    let ad = associated_data(&header.initiator_device_key, &own_device.public_key());
    Session::new_responder(&sk.0, ad, header.initiator_device_key, signed_prekey.key.clone(), header.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Responder {
        device: IdentityKeyPair,
        spk: SignedPrekeyPair,
        opks: Vec<OneTimePrekeyPair>,
    }

    fn responder() -> Responder {
        crate::crypto::init();
        let device = IdentityKeyPair::generate();
        let spk = SignedPrekeyPair::generate(3, &device);
        Responder { opks: OneTimePrekeyPair::generate_batch(100, 2), device, spk }
    }

    fn bundle(r: &Responder, with_opk: bool) -> PrekeyBundle {
        PrekeyBundle {
            device_key: r.device.public_key(),
            signed_prekey_id: r.spk.id,
            signed_prekey: r.spk.key.public,
            signed_prekey_signature: r.spk.signature.to_vec(),
            one_time_prekey: with_opk.then(|| (r.opks[1].id, r.opks[1].key.public)),
        }
    }

    fn handshake(with_opk: bool) {
        let r = responder();
        let alice = IdentityKeyPair::generate();
        let mut a = initiate_session(&alice, &bundle(&r, with_opk)).expect("bundle verifies");
        let env = a.encrypt(b"first");
        let header = peek_prekey_header(&env).expect("decodes").expect("first message carries X3DH header");
        assert_eq!(header.initiator_device_key, alice.public_key());
        assert_eq!(header.signed_prekey_id, 3);
        assert_eq!(header.one_time_prekey_id, with_opk.then_some(101));
        let opk = header.one_time_prekey_id.map(|_| &r.opks[1]);
        let mut b = accept_session(&r.device, &r.spk, opk, &header).expect("accepts");
        assert_eq!(b.decrypt(&env).expect("decrypts"), b"first");
        assert_eq!(b.peer_device_key(), alice.public_key());
        assert_eq!(a.peer_device_key(), r.device.public_key());
        assert!(b.was_accepted_from(&header));
        assert!(!a.was_accepted_from(&header));
        let reply = b.encrypt(b"reply");
        assert_eq!(peek_prekey_header(&reply).expect("decodes"), None);
        assert_eq!(a.decrypt(&reply).expect("decrypts"), b"reply");
    }

    #[test]
    fn x3dh_with_one_time_prekey() {
        handshake(true);
    }

    #[test]
    fn x3dh_without_one_time_prekey() {
        handshake(false);
    }

    #[test]
    fn bad_signed_prekey_signature_is_refused() {
        let r = responder();
        let alice = IdentityKeyPair::generate();
        let mut b = bundle(&r, true);
        b.signed_prekey_signature[5] ^= 1;
        assert_eq!(initiate_session(&alice, &b).err(), Some(CryptoError::BadSignature("signed prekey")));
        // A genuine signature over a different prekey is refused too.
        let mut b = bundle(&r, true);
        b.signed_prekey = X25519KeyPair::generate().public;
        assert_eq!(initiate_session(&alice, &b).err(), Some(CryptoError::BadSignature("signed prekey")));
        // So is a bundle whose signature is by another device.
        let mut b = bundle(&r, false);
        b.device_key = IdentityKeyPair::generate().public_key();
        assert!(initiate_session(&alice, &b).is_err());
    }

    #[test]
    fn wrong_or_missing_prekeys_are_refused_or_fail() {
        let r = responder();
        let alice = IdentityKeyPair::generate();
        let mut a = initiate_session(&alice, &bundle(&r, true)).expect("bundle verifies");
        let env = a.encrypt(b"x");
        let header = peek_prekey_header(&env).expect("decodes").expect("header");
        assert_eq!(accept_session(&r.device, &r.spk, None, &header).err(), Some(CryptoError::UnknownPrekey(101)));
        assert_eq!(
            accept_session(&r.device, &r.spk, Some(&r.opks[0]), &header).err(),
            Some(CryptoError::UnknownPrekey(101))
        );
        let other_spk = SignedPrekeyPair::generate(4, &r.device);
        assert_eq!(
            accept_session(&r.device, &other_spk, Some(&r.opks[1]), &header).err(),
            Some(CryptoError::UnknownPrekey(3))
        );
        // The right ids but another responder's keys: the secrets differ, so nothing decrypts.
        let wrong_device = IdentityKeyPair::generate();
        let mut b = accept_session(&wrong_device, &r.spk, Some(&r.opks[1]), &header).expect("derives");
        assert_eq!(b.decrypt(&env), Err(CryptoError::DecryptionFailed));
    }

    #[test]
    fn peek_refuses_garbage() {
        assert!(peek_prekey_header(&[0xff, 0xff, 0xff]).is_err());
    }
}
