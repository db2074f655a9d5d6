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
    /// Reads the public keys in `path`: armored (one or more blocks, what
    /// `gpg --armor --export` writes) or binary (`gpg --export`, the keyring
    /// files gpgv and simplestreams' `--keyring` take).
    pub fn load(path: &Path) -> Result<Keyring> {
        let bytes = std::fs::read(path).ctx(ErrorClass::Config, || {
            format!("failed to read the metadata keyring {}", path.display())
        })?;
        Self::from_bytes(&bytes, &path.display().to_string())
    }

    /// Parses armored or binary public keys (see [`Keyring::load`]).
    pub fn from_bytes(bytes: &[u8], source: &str) -> Result<Keyring> {
        if bytes.get(8..12) == Some(b"KBXf") {
            return Err(Error::config(format!(
                "metadata keyring {source} is a GnuPG keybox (pubring.kbx), not a keyring: \
                 export the keys with `gpg --export KEYID > keyring.gpg` (or --armor)"
            )));
        }
        let armored = bytes
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .is_some_and(|i| bytes[i..].starts_with(b"-----BEGIN PGP"));
        let keys: Vec<_> = if armored {
            let text = std::str::from_utf8(bytes).map_err(|_| {
                Error::config(format!(
                    "metadata keyring {source} is armored but not UTF-8"
                ))
            })?;
            let (iter, _) = SignedPublicKey::from_string_many(text).map_err(|e| {
                Error::config(format!(
                    "metadata keyring {source} is not an armored OpenPGP public key: {e}"
                ))
            })?;
            iter.collect()
        } else {
            <SignedPublicKey as Deserializable>::from_bytes_many(bytes)
                .map_err(|e| {
                    Error::config(format!(
                        "metadata keyring {source} is neither an armored nor a binary OpenPGP keyring: {e}"
                    ))
                })?
                .collect()
        };
        Self::from_keys(keys, source)
    }

    /// Parses armored public keys.
    pub fn parse(text: &str, source: &str) -> Result<Keyring> {
        Self::from_bytes(text.as_bytes(), source)
    }

    fn from_keys(
        parsed: Vec<std::result::Result<SignedPublicKey, pgp::errors::Error>>,
        source: &str,
    ) -> Result<Keyring> {
        let mut keys = Vec::new();
        for k in parsed {
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
