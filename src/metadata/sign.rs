//! OpenPGP inline signatures (cleartext signature framework, what
//! simplestreams' `.sjson` files are: `gpg --clearsign`), with rPGP.

use crate::error::{Context as _, Error, ErrorClass, Result};
use pgp::composed::{CleartextSignedMessage, Deserializable, SignedPublicKey, SignedSecretKey};
use pgp::types::Password;
use std::path::Path;

/// Public keys trusted to sign metadata.
#[derive(Debug, Clone)]
pub struct Keyring {
    keys: Vec<SignedPublicKey>,
    pub source: String,
}

impl Keyring {
    /// Reads armored public keys (one or more blocks) from `path`.
    pub fn load(path: &Path) -> Result<Keyring> {
        let text = std::fs::read_to_string(path).ctx(ErrorClass::Config, || {
            format!("failed to read the metadata keyring {}", path.display())
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    pub fn parse(text: &str, source: &str) -> Result<Keyring> {
        let (iter, _) = SignedPublicKey::from_string_many(text).map_err(|e| {
            Error::config(format!(
                "metadata keyring {source} is not an armored OpenPGP public key: {e}"
            ))
        })?;
        let mut keys = Vec::new();
        for k in iter {
            let k = k.map_err(|e| {
                Error::config(format!(
                    "metadata keyring {source} has an unreadable key: {e}"
                ))
            })?;
            if k.verify_bindings().is_ok() {
                keys.push(k);
            } else {
                tracing::warn!(phase = "metadata", path = %source, "ignoring a key whose self-signatures do not verify");
            }
        }
        if keys.is_empty() {
            return Err(Error::config(format!(
                "metadata keyring {source} holds no usable key"
            )));
        }
        Ok(Keyring {
            keys,
            source: source.to_string(),
        })
    }

    /// Verifies an inline-signed document and returns the signed text.
    /// Fails (class `Verification`) if it is not a cleartext-signed message
    /// or no key of the ring (primary or subkey) made a signature on it.
    pub fn verify(&self, data: &[u8], what: &str) -> Result<String> {
        let text = std::str::from_utf8(data).map_err(|_| {
            Error::verification(format!(
                "{what} is not UTF-8 text, so not an inline-signed document"
            ))
        })?;
        let (msg, _) = CleartextSignedMessage::from_string(text).map_err(|e| {
            Error::verification(format!(
                "{what} is not an OpenPGP inline-signed document: {e}"
            ))
        })?;
        for k in &self.keys {
            if msg.verify(k).is_ok() || k.public_subkeys.iter().any(|s| msg.verify(s).is_ok()) {
                return Ok(msg.signed_text());
            }
        }
        Err(Error::verification(format!(
            "{what}: no valid signature by a key in {}",
            self.source
        )))
    }
}

/// A secret key for signing mirrors.
pub struct Signer {
    key: SignedSecretKey,
    password: Password,
}

impl Signer {
    /// Reads an armored, unprotected secret key (or one protected by the
    /// passphrase in `NODE_BOOTSTRAP_SIGN_PASSPHRASE`).
    pub fn load(path: &Path) -> Result<Signer> {
        let text = std::fs::read_to_string(path).ctx(ErrorClass::BadInput, || {
            format!("failed to read the signing key {}", path.display())
        })?;
        let (key, _) = SignedSecretKey::from_string(&text).map_err(|e| {
            Error::bad_input(format!(
                "signing key {} is not an armored OpenPGP secret key: {e}",
                path.display()
            ))
        })?;
        let password = match std::env::var("NODE_BOOTSTRAP_SIGN_PASSPHRASE") {
            Ok(p) => Password::from(p.as_str()),
            Err(_) => Password::empty(),
        };
        Ok(Signer { key, password })
    }

    pub fn from_key(key: SignedSecretKey) -> Signer {
        Signer {
            key,
            password: Password::empty(),
        }
    }

    /// `text` inline-signed, armored.
    pub fn sign(&self, text: &str) -> Result<String> {
        let msg =
            CleartextSignedMessage::sign(rand::thread_rng(), text, &*self.key, &self.password)
                .map_err(|e| Error::bad_input(format!("signing failed: {e}")))?;
        msg.to_armored_string(Default::default())
            .map_err(|e| Error::internal(format!("armoring the signature failed: {e}")))
    }
}
