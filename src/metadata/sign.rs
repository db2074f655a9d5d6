//! Signing mirrors: OpenPGP inline signatures (the cleartext signature
//! framework, what simplestreams' `.sjson` files are: `gpg --clearsign`),
//! with rPGP. Verifying them is [`crate::openpgp::Keyring::verify_cleartext`].

use crate::error::{Context as _, Error, ErrorClass, Result};
use pgp::composed::{CleartextSignedMessage, Deserializable, SignedSecretKey};
use pgp::types::Password;
use std::path::Path;

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
        // The parser's message can quote what it read: a secret is not shown.
        let (key, _) = SignedSecretKey::from_string(&text).map_err(|_| {
            Error::bad_input(format!(
                "signing key {} is not an armored OpenPGP secret key (-----BEGIN PGP PRIVATE KEY \
                 BLOCK-----, as `gpg --export-secret-keys --armor` writes it); its content is not \
                 shown",
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
