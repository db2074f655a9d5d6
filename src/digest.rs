//! Size, SHA-256 and SHA-512 of a stream, in one pass: the asset bundle (on
//! a thread of its own that reads the download as it arrives, beside the
//! one that unpacks it), metadata items after their download, and the
//! files `metadata generate` publishes; the SHA-512 a package manifest
//! names ([`Sha512`]) and a whole file's ([`sha512_file`]).

use std::fmt;
use std::io::{self, Read};
use std::path::Path;

/// The size and the asked-for hashes (hex) of every byte of a stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Digests {
    pub size: u64,
    /// Empty unless asked for.
    pub sha256: String,
    /// Empty unless asked for.
    pub sha512: String,
}

/// Hashes everything `r` gives until its end. `sha512` is asked once the
/// first bytes are in (a download's metadata, which may name a SHA-512, is
/// known by then).
pub fn digest(
    mut r: impl Read,
    sha256: bool,
    sha512: impl FnOnce() -> bool,
) -> io::Result<Digests> {
    use sha2::Digest as _;
    let mut buf = vec![0u8; 256 << 10];
    let mut n = read_some(&mut r, &mut buf)?;
    let mut h256 = sha256.then(sha2::Sha256::new);
    let mut h512 = sha512().then(sha2::Sha512::new);
    let mut size = 0u64;
    while n > 0 {
        size += n as u64;
        if let Some(h) = &mut h256 {
            h.update(&buf[..n]);
        }
        if let Some(h) = &mut h512 {
            h.update(&buf[..n]);
        }
        n = read_some(&mut r, &mut buf)?;
    }
    Ok(Digests {
        size,
        sha256: h256.map(|h| hex::encode(h.finalize())).unwrap_or_default(),
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

/// A sha512 digest as the manifest spells it: `sha512-<128 hex digits>`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sha512(pub [u8; 64]);

impl Sha512 {
    pub fn parse_manifest_hash(s: &str) -> Option<Sha512> {
        let hex_part = s.strip_prefix("sha512-")?;
        if hex_part.len() != 128 {
            return None;
        }
        let mut out = [0u8; 64];
        hex::decode_to_slice(hex_part.to_ascii_lowercase(), &mut out).ok()?;
        Some(Sha512(out))
    }
    pub fn to_hex(self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Display for Sha512 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha512-{}", self.to_hex())
    }
}

impl fmt::Debug for Sha512 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha512-{}…", &self.to_hex()[..16])
    }
}

/// sha512 of a whole file.
pub fn sha512_file(path: &Path) -> io::Result<Sha512> {
    let mut f = std::fs::File::open(path)?;
    use sha2::Digest as _;
    let mut h = sha2::Sha512::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(Sha512(h.finalize().into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_of_every_byte() {
        let data = vec![5u8; 600_000];
        let d = digest(&data[..], true, || true).unwrap();
        assert_eq!(d.size, 600_000);
        assert_eq!(
            d.sha256,
            hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&data))
        );
        assert_eq!(
            d.sha512,
            hex::encode(<sha2::Sha512 as sha2::Digest>::digest(&data))
        );
        let only256 = digest(&data[..], true, || false).unwrap();
        assert_eq!((only256.sha256, only256.sha512), (d.sha256, String::new()));
        let only512 = digest(&data[..], false, || true).unwrap();
        assert_eq!((only512.sha256, only512.sha512), (String::new(), d.sha512));
    }
}
