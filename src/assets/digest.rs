//! SHA-256 (and, when a checksum asks for it, SHA-512) of a bundle, on a
//! thread of its own that reads the download as it arrives
//! ([`super::follow::FollowReader`]), beside the one that unpacks it.

use std::io::{self, Read};

/// SHA-256 and (when asked for) SHA-512 of every byte of a file, hex.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Digests {
    pub sha256: String,
    /// Empty unless asked for.
    pub sha512: String,
}

/// Hashes everything `r` gives until its end. `sha512` is asked once the
/// first bytes are in (a download's metadata, which may name a SHA-512, is
/// known by then).
pub fn digest(mut r: impl Read, sha512: impl FnOnce() -> bool) -> io::Result<Digests> {
    use sha2::Digest as _;
    let mut buf = vec![0u8; 256 << 10];
    let mut n = read_some(&mut r, &mut buf)?;
    let mut h256 = sha2::Sha256::new();
    let mut h512 = sha512().then(sha2::Sha512::new);
    while n > 0 {
        h256.update(&buf[..n]);
        if let Some(h) = &mut h512 {
            h.update(&buf[..n]);
        }
        n = read_some(&mut r, &mut buf)?;
    }
    Ok(Digests {
        sha256: hex::encode(h256.finalize()),
        sha512: h512.map(|h| hex::encode(h.finalize())).unwrap_or_default(),
    })
}

fn read_some(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match r.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_of_every_byte() {
        let data = vec![5u8; 600_000];
        let d = digest(&data[..], || true).unwrap();
        assert_eq!(
            d.sha256,
            hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&data))
        );
        assert_eq!(
            d.sha512,
            hex::encode(<sha2::Sha512 as sha2::Digest>::digest(&data))
        );
        assert_eq!(digest(&data[..], || false).unwrap().sha512, "");
    }
}
