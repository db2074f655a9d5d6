//! OpenPGP verification with rPGP (pure Rust): the keyrings the agent
//! trusts, detached signatures (a torcx package manifest's `.asc`) and
//! inline-signed documents (simplestreams' `.sjson`, `gpg --clearsign`).
//!
//! A keyring is one or more public keys, armored or binary (`gpg --export`
//! or `--export --armor` of the release keys; binary is what gpgv and
//! simplestreams' `--keyring` take). A signature made by the primary key or
//! any of its subkeys counts. The two ways a detached signature fails get
//! distinct messages: the signer is not in the keyring ("wrong key"), or it
//! is and the signature does not match the data ("BAD signature", i.e. the
//! data or the signature was altered).

use crate::error::{Error, Result};
use pgp::composed::{CleartextSignedMessage, Deserializable, DetachedSignature, SignedPublicKey};
use pgp::types::KeyDetails;
use std::path::{Path, PathBuf};

/// The public keys signatures are checked against.
#[derive(Debug, Clone)]
pub struct Keyring {
    pub source: PathBuf,
    keys: Vec<SignedPublicKey>,
}

/// Who made a good signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoodSignature {
    /// Fingerprint (hex) of the primary key.
    pub primary_fingerprint: String,
    /// Fingerprint (hex) of the key that signed (primary or subkey).
    pub signer_fingerprint: String,
}

impl Keyring {
    /// Reads a keyring; a missing, empty or unparsable file is
    /// [`crate::error::ErrorClass::BadInput`] naming it.
    pub fn load(path: &Path) -> Result<Keyring> {
        let bytes = std::fs::read(path).map_err(|e| {
            Error::bad_input(format!(
                "failed to read OpenPGP keyring at {}: {e}",
                path.display()
            ))
        })?;
        Self::parse(&bytes, path)
    }

    /// What is wrong with a file that is not one is said without its
    /// contents: the parser's own messages can quote the bytes it read, and
    /// a file given by mistake may be a secret key ([`not_a_keyring`]).
    pub fn parse(bytes: &[u8], source: &Path) -> Result<Keyring> {
        let bad = |m: String| {
            Error::bad_input(format!("invalid OpenPGP keyring {}: {m}", source.display()))
        };
        if let Some(why) = not_a_keyring(bytes) {
            return Err(bad(why));
        }
        // A keyring file may hold several armored blocks one after another.
        let unreadable = || {
            bad(
                "it is not an OpenPGP public key: no key could be read from it (its content \
                 is not shown); give the public keys as `gpg --export --armor KEYID` writes them"
                    .to_string(),
            )
        };
        let mut parsed = Vec::new();
        for block in armored_blocks(bytes) {
            let (iter, _) = SignedPublicKey::from_reader_many(std::io::Cursor::new(block))
                .map_err(|_| unreadable())?;
            for k in iter {
                parsed.push(k.map_err(|_| unreadable())?);
            }
        }
        let mut keys = Vec::new();
        for k in parsed {
            match k.verify_bindings() {
                Ok(()) => keys.push(k),
                Err(e) => tracing::warn!(
                    step = "docker-addon",
                    path = %source.display(),
                    key = %hex::encode(k.fingerprint().as_bytes()),
                    error = %e,
                    "ignoring a keyring key whose self-signatures do not verify"
                ),
            }
        }
        if keys.is_empty() {
            return Err(bad("it holds no usable public key".to_string()));
        }
        Ok(Keyring {
            source: source.to_path_buf(),
            keys,
        })
    }

    /// Fingerprints (hex) of the primary keys.
    pub fn fingerprints(&self) -> Vec<String> {
        self.keys
            .iter()
            .map(|k| hex::encode(k.fingerprint().as_bytes()))
            .collect()
    }

    /// Verifies a detached signature (armored or binary) over `data`.
    /// `what` names the signed thing (its URL or path) in errors, which are
    /// [`crate::error::ErrorClass::Verification`].
    pub fn verify_detached(
        &self,
        data: &[u8],
        signature: &[u8],
        what: &str,
    ) -> Result<GoodSignature> {
        let sigs = parse_signatures(signature).map_err(|e| {
            Error::verification(format!(
                "signature of {what} is not an OpenPGP signature: {e}"
            ))
        })?;
        let mut issuers = Vec::new();
        let mut bad_from = None;
        for sig in &sigs {
            let sig = &sig.signature;
            let ids: Vec<String> = sig
                .issuer_key_id()
                .iter()
                .map(|id| hex::encode(id.as_ref()))
                .chain(
                    sig.issuer_fingerprint()
                        .iter()
                        .map(|f| hex::encode(f.as_bytes())),
                )
                .collect();
            issuers.extend(ids);
            for key in &self.keys {
                let primary_fpr = hex::encode(key.fingerprint().as_bytes());
                match try_key(sig, &key.primary_key, data) {
                    Some(Ok(())) => {
                        return Ok(GoodSignature {
                            signer_fingerprint: primary_fpr.clone(),
                            primary_fingerprint: primary_fpr,
                        });
                    }
                    Some(Err(e)) => bad_from = Some((primary_fpr.clone(), e)),
                    None => {}
                }
                for sub in &key.public_subkeys {
                    let fpr = hex::encode(sub.key.fingerprint().as_bytes());
                    match try_key(sig, &sub.key, data) {
                        Some(Ok(())) => {
                            return Ok(GoodSignature {
                                primary_fingerprint: primary_fpr,
                                signer_fingerprint: fpr,
                            });
                        }
                        Some(Err(e)) => bad_from = Some((fpr, e)),
                        None => {}
                    }
                }
            }
        }
        if let Some((fpr, e)) = bad_from {
            return Err(Error::verification(format!(
                "BAD signature on {what}: it does not match the data (key {fpr}: {e}); the file or its signature was altered"
            )));
        }
        issuers.sort();
        issuers.dedup();
        Err(Error::verification(format!(
            "{what} is signed by key {}, which is not in the keyring {} (keys: {})",
            if issuers.is_empty() {
                "<unknown>".to_string()
            } else {
                issuers.join("/")
            },
            self.source.display(),
            self.fingerprints().join(", ")
        )))
    }
}

impl Keyring {
    /// Verifies an inline-signed document (`gpg --clearsign`) and returns
    /// the signed text. Fails (class `Verification`) if it is not one or no
    /// key of the ring (primary or subkey) made a signature on it.
    pub fn verify_cleartext(&self, data: &[u8], what: &str) -> Result<String> {
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
            self.source.display()
        )))
    }
}

/// Splits armored text into its blocks; binary data is one block.
/// Why `bytes` cannot be a public keyring, told from its first bytes only:
/// a GnuPG keybox, a secret key (armored `PRIVATE KEY BLOCK`, or a binary
/// secret-key packet, tag 5 or 7), another armored or PEM block (its label
/// only), or nothing a keyring starts with. Never quotes the content.
fn not_a_keyring(bytes: &[u8]) -> Option<String> {
    const SECRET: &str = "it holds a secret (private) key, not a public key: never give a \
                          secret key here; export the public key with `gpg --export --armor \
                          KEYID` (the content is not shown)";
    if bytes.get(8..12) == Some(b"KBXf") {
        return Some(
            "it is a GnuPG keybox (pubring.kbx), not a keyring: export the keys with \
             `gpg --export KEYID > keyring.gpg` (or with --armor)"
                .to_string(),
        );
    }
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(64 * 1024)]);
    if text.contains("PRIVATE KEY") {
        return Some(SECRET.to_string());
    }
    let trimmed = text.trim_start();
    if let Some(rest) = trimmed.strip_prefix("-----BEGIN ") {
        let label: String = rest
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == ' ')
            .take(40)
            .collect();
        if label.trim_end() != "PGP PUBLIC KEY BLOCK"
            && !trimmed.contains("-----BEGIN PGP PUBLIC KEY BLOCK-----")
        {
            return Some(format!(
                "it is not an OpenPGP public key: it holds a {:?} block, not \
                 \"PGP PUBLIC KEY BLOCK\" (the content is not shown)",
                label.trim_end()
            ));
        }
        return None;
    }
    // Binary: the first packet's tag (RFC 4880 4.2, old and new formats).
    let tag = match bytes.first() {
        Some(b) if b & 0xC0 == 0xC0 => Some(b & 0x3F),
        Some(b) if b & 0x80 == 0x80 => Some((b >> 2) & 0x0F),
        _ => None,
    };
    match tag {
        Some(5 | 7) => Some(SECRET.to_string()),
        Some(6) => None,
        _ => Some(
            "it is not an OpenPGP public key: it is neither armored (-----BEGIN PGP PUBLIC KEY \
             BLOCK-----) nor a binary key (`gpg --export`); its content is not shown"
                .to_string(),
        ),
    }
}

fn armored_blocks(bytes: &[u8]) -> Vec<&[u8]> {
    const BEGIN: &[u8] = b"-----BEGIN PGP ";
    let starts: Vec<usize> = bytes
        .windows(BEGIN.len())
        .enumerate()
        .filter(|(_, w)| *w == BEGIN)
        .map(|(i, _)| i)
        .collect();
    if starts.len() < 2 {
        return vec![bytes];
    }
    let mut out = Vec::new();
    for (n, &s) in starts.iter().enumerate() {
        let e = starts.get(n + 1).copied().unwrap_or(bytes.len());
        out.push(&bytes[s..e]);
    }
    out
}

fn parse_signatures(bytes: &[u8]) -> std::result::Result<Vec<DetachedSignature>, String> {
    let (iter, _) = DetachedSignature::from_reader_many(std::io::Cursor::new(bytes))
        .map_err(|e| e.to_string())?;
    let sigs: Vec<DetachedSignature> = iter
        .collect::<pgp::errors::Result<_>>()
        .map_err(|e| e.to_string())?;
    if sigs.is_empty() {
        return Err("no signature packet".to_string());
    }
    Ok(sigs)
}

/// `None` when `key` did not issue `sig`; else the verification result.
fn try_key<K: pgp::types::VerifyingKey>(
    sig: &pgp::packet::Signature,
    key: &K,
    data: &[u8],
) -> Option<std::result::Result<(), String>> {
    if !issued_by(sig, key.legacy_key_id(), key.fingerprint()) {
        return None;
    }
    Some(sig.verify(key, data).map_err(|e| e.to_string()))
}

/// Whether a signature names `key` as its issuer (by key id or fingerprint).
/// A signature without issuer information is tried against every key.
fn issued_by(
    sig: &pgp::packet::Signature,
    kid: pgp::types::KeyId,
    kfp: pgp::types::Fingerprint,
) -> bool {
    let ids = sig.issuer_key_id();
    let fprs = sig.issuer_fingerprint();
    if ids.is_empty() && fprs.is_empty() {
        return true;
    }
    ids.iter().any(|id| **id == kid) || fprs.iter().any(|f| **f == kfp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorClass;
    use testkit::torcx_fixtures::SigningKey;

    const WHAT: &str = "package manifest https://m.example/torcx_manifest.json";

    fn keyring(keys: &[&SigningKey]) -> Keyring {
        let text: String = keys.iter().map(|k| k.public_armored()).collect();
        Keyring::parse(
            text.as_bytes(),
            Path::new("/etc/kubernetes/installer/keyring.asc"),
        )
        .unwrap()
    }

    #[test]
    fn good_signature_from_primary_or_subkey() {
        let a = SigningKey::generate("release-a@example.invalid");
        let b = SigningKey::generate_with_signing_subkey("release-b@example.invalid");
        let ring = keyring(&[&a, &b]);
        assert_eq!(ring.fingerprints(), [a.fingerprint(), b.fingerprint()]);
        let data = b"{\"kind\":\"torcx-package-list-v0\"}";
        let good = ring
            .verify_detached(data, a.sign(data).as_bytes(), WHAT)
            .unwrap();
        assert_eq!(good.primary_fingerprint, a.fingerprint());
        let good = ring
            .verify_detached(data, b.sign(data).as_bytes(), WHAT)
            .unwrap();
        assert_eq!(good.primary_fingerprint, b.fingerprint());
        assert_ne!(
            good.signer_fingerprint,
            b.fingerprint(),
            "signed by the subkey"
        );
        // A binary keyring (gpg --export) works the same.
        let bin = Keyring::parse(&b.public_binary(), Path::new("/k.gpg")).unwrap();
        assert!(
            bin.verify_detached(data, b.sign(data).as_bytes(), WHAT)
                .is_ok()
        );
    }

    #[test]
    fn bad_signature_is_a_verification_error_naming_the_file() {
        let a = SigningKey::generate("release@example.invalid");
        let ring = keyring(&[&a]);
        let data = b"original manifest";
        let sig = a.sign(data);
        let err = ring
            .verify_detached(b"tampered manifest", sig.as_bytes(), WHAT)
            .unwrap_err();
        assert_eq!(err.class(), ErrorClass::Verification);
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!(
                "BAD signature on {WHAT}: it does not match the data (key {}",
                a.fingerprint()
            )),
            "{msg}"
        );
        assert!(
            msg.ends_with("the file or its signature was altered"),
            "{msg}"
        );
    }

    #[test]
    fn signature_by_another_key_names_signer_and_keyring() {
        let trusted = SigningKey::generate("release@example.invalid");
        let other = SigningKey::generate("attacker@example.invalid");
        let ring = keyring(&[&trusted]);
        let data = b"manifest";
        let err = ring
            .verify_detached(data, other.sign(data).as_bytes(), WHAT)
            .unwrap_err();
        assert_eq!(err.class(), ErrorClass::Verification);
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!("{WHAT} is signed by key ")),
            "{msg}"
        );
        assert!(
            msg.contains(&other.fingerprint()),
            "names the signer: {msg}"
        );
        assert!(
            msg.contains(&format!(
                "which is not in the keyring /etc/kubernetes/installer/keyring.asc (keys: {})",
                trusted.fingerprint()
            )),
            "{msg}"
        );
    }

    #[test]
    fn garbage_signature_and_keyring_are_named() {
        let a = SigningKey::generate("release@example.invalid");
        let ring = keyring(&[&a]);
        let err = ring
            .verify_detached(b"x", b"not a signature", WHAT)
            .unwrap_err();
        assert_eq!(err.class(), ErrorClass::Verification);
        assert!(
            err.to_string()
                .starts_with(&format!("signature of {WHAT} is not an OpenPGP signature")),
            "{err}"
        );
        let err = Keyring::parse(b"hello", Path::new("/k.asc")).unwrap_err();
        assert_eq!(err.class(), ErrorClass::BadInput);
        assert_eq!(
            err.to_string(),
            "invalid OpenPGP keyring /k.asc: it is not an OpenPGP public key: it is neither \
             armored (-----BEGIN PGP PUBLIC KEY BLOCK-----) nor a binary key (`gpg --export`); \
             its content is not shown"
        );
        let err = Keyring::load(Path::new("/nonexistent/k.asc")).unwrap_err();
        assert_eq!(err.class(), ErrorClass::BadInput);
        assert!(
            err.to_string()
                .starts_with("failed to read OpenPGP keyring at /nonexistent/k.asc"),
            "{err}"
        );
    }

    /// A secret key, a certificate or garbage given as the keyring is named
    /// for what it is, and not one byte of it is shown.
    #[test]
    fn what_is_not_a_keyring_is_never_quoted() {
        let secret_armored = "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQdGBGZSECRETSECRETSECRET\n=abcd\n-----END PGP PRIVATE KEY BLOCK-----\n";
        // A binary secret-key packet (new format, tag 5), then its bytes.
        let mut secret_binary = vec![0xC5, 0x20];
        secret_binary.extend(b"SECRETSECRETSECRETSECRETSECRET01");
        let pem =
            "-----BEGIN RSA PRIVATE KEY-----\nMIIESECRETSECRET\n-----END RSA PRIVATE KEY-----\n";
        let cert = "-----BEGIN CERTIFICATE-----\nMIIBSECRETSECRET\n-----END CERTIFICATE-----\n";
        // Armored, but what is inside is not a key.
        let broken = "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nSECRETSECRETSECRET\n-----END PGP PUBLIC KEY BLOCK-----\n";
        for (bytes, says) in [
            (secret_armored.as_bytes(), "it holds a secret (private) key"),
            (&secret_binary[..], "it holds a secret (private) key"),
            (pem.as_bytes(), "it holds a secret (private) key"),
            (cert.as_bytes(), "it holds a \"CERTIFICATE\" block"),
            (broken.as_bytes(), "no key could be read from it"),
        ] {
            let err = Keyring::parse(bytes, Path::new("/k.asc")).unwrap_err();
            let m = err.to_string();
            assert_eq!(err.class(), ErrorClass::BadInput, "{m}");
            assert!(m.contains(says), "{m}");
            assert!(!m.contains("SECRET"), "the content leaked: {m}");
            assert!(!m.contains("[1"), "a byte dump: {m}");
        }
    }
}
