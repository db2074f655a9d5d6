//! The asset bundle of the asset-pull benchmark (`nb-bench make-bundle`): a
//! tar.gz laid out like a cluster's assets (`bootkube.sh`, manifests, TLS
//! material, container images) whose contents compress like real ones, so
//! the pull pays for inflating as it does on a node.
//!
//! - images (nearly all the bytes): 1 MiB blocks, each either already
//!   compressed (random bytes, gzip leaves them as they are) or
//!   machine-code-like (tokens from a fixed vocabulary, skewed, with random
//!   immediates: gzip -6 gets ~2.8x, as on real ELF binaries, 2.6-3x);
//!   [`COMPRESSED_SHARE`] percent of them the first kind, which makes the whole
//!   bundle unpack to ~1.35x its size, like the bundles of record;
//! - manifests: YAML-like text (~4-5x), TLS: base64 PEM bodies (~1.3x).
//!
//! Deterministic: the same size always gives the same bytes (fixed seed).

use anyhow::Result;
use std::io::{self, Read, Write};

/// Percent of the image blocks that are already-compressed data (evenly
/// spread: block `i` is when `i * share % 100 < share`).
pub const COMPRESSED_SHARE: u64 = 60;
/// Unpacked size over the tar.gz size that the mix gives.
pub const EXPANSION: f64 = 1.35;
const BLOCK: usize = 1 << 20;
const IMAGE_MAX: u64 = 192 << 20;

/// What [`write_targz`] made.
#[derive(Debug, Clone, Default)]
pub struct BundleStats {
    pub files: u64,
    /// Bytes of file contents (what the bundle unpacks to).
    pub unpacked: u64,
}

/// The kinds of content.
#[derive(Clone, Copy)]
enum Kind {
    Image,
    Text,
    Pem,
}

/// Generates `left` bytes of one kind of content.
struct Content {
    rng: fastrand::Rng,
    vocab: std::rc::Rc<Vec<Vec<u8>>>,
    kind: Kind,
    left: u64,
    buf: Vec<u8>,
    pos: usize,
    /// Blocks generated so far.
    blocks: u64,
}

impl Content {
    fn refill(&mut self) {
        self.buf.clear();
        self.pos = 0;
        self.blocks += 1;
        match self.kind {
            Kind::Image if self.blocks * COMPRESSED_SHARE % 100 < COMPRESSED_SHARE => {
                self.buf.resize(BLOCK, 0);
                self.rng.fill(&mut self.buf);
            }
            Kind::Image => {
                while self.buf.len() < BLOCK {
                    let i = (self.vocab.len() as f64 * self.rng.f64().powi(6)) as usize;
                    self.buf.extend_from_slice(&self.vocab[i]);
                    if self.rng.f64() < 0.02 {
                        self.buf.extend_from_slice(&self.rng.u32(..).to_le_bytes());
                    }
                }
            }
            Kind::Text => {
                while self.buf.len() < BLOCK {
                    let depth = self.rng.usize(0..4);
                    self.buf.extend(std::iter::repeat_n(b' ', depth * 2));
                    for w in 0..self.rng.usize(1..5) {
                        if w > 0 {
                            self.buf.push(b' ');
                        }
                        let i = (self.vocab.len() as f64 * self.rng.f64().powi(3)) as usize;
                        let word = &self.vocab[i];
                        self.buf
                            .extend(word.iter().map(|b| b'a' + b % 26).take(word.len().max(2)));
                    }
                    self.buf
                        .extend_from_slice(if self.rng.bool() { b":\n" } else { b"\n" });
                }
            }
            Kind::Pem => {
                const B64: &[u8] =
                    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
                while self.buf.len() < BLOCK {
                    self.buf
                        .extend((0..64).map(|_| B64[self.rng.usize(..B64.len())]));
                    self.buf.push(b'\n');
                }
            }
        }
    }
}

impl Read for Content {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Ok(0);
        }
        if self.pos == self.buf.len() {
            self.refill();
        }
        let n = out
            .len()
            .min(self.buf.len() - self.pos)
            .min(self.left as usize);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        self.left -= n as u64;
        Ok(n)
    }
}

/// The files of a bundle that unpacks to about `unpacked` bytes: name,
/// kind, size.
fn layout(unpacked: u64, rng: &mut fastrand::Rng) -> Vec<(String, Kind, u64)> {
    let mut files = vec![("bootkube.sh".to_string(), Kind::Text, 4 << 10)];
    for i in 0..200 {
        let name = format!("manifests/{i:03}-component.yaml");
        files.push((name, Kind::Text, rng.u64(2 << 10..20 << 10)));
    }
    for name in [
        "ca",
        "apiserver",
        "kubelet",
        "etcd-client",
        "service-account",
    ] {
        files.push((format!("tls/{name}.crt"), Kind::Pem, 1800));
        files.push((format!("tls/{name}.key"), Kind::Pem, 1700));
    }
    let small: u64 = files.iter().map(|f| f.2).sum();
    let mut left = unpacked.saturating_sub(small);
    let mut i = 0;
    while left > 0 {
        let size = left.min(IMAGE_MAX);
        files.push((format!("images/image-{i:02}.tar"), Kind::Image, size));
        left -= size;
        i += 1;
    }
    files
}

/// Writes the bundle (gzip level 6, as `tar czf`) that unpacks to about
/// `unpacked` bytes.
pub fn write_targz(unpacked: u64, out: impl Write) -> Result<BundleStats> {
    let mut rng = fastrand::Rng::with_seed(0x6e62_6275_6e64_6c65);
    let vocab: Vec<Vec<u8>> = (0..512)
        .map(|_| {
            let n = rng.usize(1..=8);
            (0..n).map(|_| rng.u8(..)).collect()
        })
        .collect();
    let vocab = std::rc::Rc::new(vocab);
    let gz = flate2::write::GzEncoder::new(out, flate2::Compression::new(6));
    let mut tar = tar::Builder::new(gz);
    let mut stats = BundleStats::default();
    for (name, kind, size) in layout(unpacked, &mut rng) {
        let mut h = tar::Header::new_ustar();
        h.set_size(size);
        h.set_mode(if name.ends_with(".sh") { 0o755 } else { 0o644 });
        h.set_mtime(1_700_000_000);
        let content = Content {
            rng: fastrand::Rng::with_seed(rng.u64(..)),
            vocab: vocab.clone(),
            kind,
            left: size,
            buf: Vec::new(),
            pos: 0,
            blocks: 0,
        };
        tar.append_data(&mut h, &name, content)?;
        stats.files += 1;
        stats.unpacked += size;
    }
    tar.into_inner()?.finish()?.flush()?;
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundle_is_deterministic_and_expands_like_real_assets() {
        let mut a = Vec::new();
        let stats = write_targz(24 << 20, &mut a).unwrap();
        let mut b = Vec::new();
        write_targz(24 << 20, &mut b).unwrap();
        assert_eq!(a, b);
        let ratio = stats.unpacked as f64 / a.len() as f64;
        assert!((1.2..1.5).contains(&ratio), "expands {ratio:.2}x");
        assert!(stats.files > 200);
    }
}
