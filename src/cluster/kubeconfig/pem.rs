//! PEM and base64 checks of the kubeconfig's certificates and keys.

use base64::Engine as _;
use rustls_pki_types::pem::{PemObject as _, SectionKind};

/// The PEM sections of `pem` that PEM readers know (others are skipped, as
/// rustls reads them), with their DER bodies.
fn sections(
    pem: &[u8],
) -> impl Iterator<Item = Result<(SectionKind, Vec<u8>), rustls_pki_types::pem::Error>> + '_ {
    <(SectionKind, Vec<u8>)>::pem_slice_iter(pem)
}

pub(super) fn decode_b64(s: &str) -> std::result::Result<Vec<u8>, String> {
    let compact: String = s.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(compact.as_bytes())
        .map_err(|e| format!("not valid base64: {e}"))
}

/// At least one PEM certificate that parses as X.509, and nothing else
/// that is not a certificate.
pub(super) fn check_certs(pem: &[u8]) -> std::result::Result<(), String> {
    let mut n = 0;
    for item in sections(pem) {
        match item.map_err(|e| format!("not valid PEM: {e}"))? {
            (SectionKind::Certificate, der) => {
                x509_parser::parse_x509_certificate(&der)
                    .map_err(|e| format!("certificate {} does not parse: {e}", n + 1))?;
                n += 1;
            }
            _ => return Err("contains a PEM block that is not a CERTIFICATE".into()),
        }
    }
    if n == 0 {
        return Err("contains no PEM CERTIFICATE block".into());
    }
    Ok(())
}

/// Exactly one PEM private key (PKCS#8, PKCS#1 RSA or SEC1 EC).
pub(super) fn check_key(pem: &[u8]) -> std::result::Result<(), String> {
    let mut n = 0;
    for item in sections(pem) {
        match item.map_err(|_| "not valid PEM".to_string())? {
            (
                SectionKind::RsaPrivateKey | SectionKind::PrivateKey | SectionKind::EcPrivateKey,
                _,
            ) => n += 1,
            _ => return Err("contains a PEM block that is not a private key".into()),
        }
    }
    match n {
        0 => Err("contains no PEM private key".into()),
        1 => Ok(()),
        _ => Err("contains more than one private key".into()),
    }
}

/// The PEM blocks of `pem` whose label `keep` accepts, in order.
pub(super) fn pem_blocks(pem: &[u8], keep: impl Fn(&str) -> bool) -> Vec<u8> {
    let text = String::from_utf8_lossy(pem);
    let mut out = String::new();
    let mut inside: Option<bool> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(label) = t
            .strip_prefix("-----BEGIN ")
            .and_then(|l| l.strip_suffix("-----"))
        {
            inside = Some(keep(label));
        }
        if inside == Some(true) {
            out.push_str(t);
            out.push('\n');
        }
        if t.starts_with("-----END ") {
            inside = None;
        }
    }
    out.into_bytes()
}
