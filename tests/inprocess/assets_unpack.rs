//! Malicious asset bundles, pulled end to end from a real S3-compatible
//! server (moto) by the real binary: each kind is rejected with its own
//! message and exit code 5, and nothing is left behind (no assets dir, no
//! staging dir, nothing outside).

use sha2::Digest;
use std::fs;
use testkit::files::names;
use testkit::s3::{S3Server, skip_unless_s3};

const BUCKET: &str = "cluster-assets";

/// Builds a tar with raw headers (no path checks, unlike `tar::Builder`'s
/// own helpers), then gzips it.
struct Evil {
    b: tar::Builder<Vec<u8>>,
}

impl Evil {
    fn new() -> Evil {
        let mut e = Evil {
            b: tar::Builder::new(Vec::new()),
        };
        e.file("bootkube.sh", b"#!/bin/bash\n");
        e
    }

    fn raw(
        &mut self,
        path: &str,
        kind: tar::EntryType,
        link: Option<&str>,
        data: &[u8],
    ) -> &mut Self {
        let mut h = tar::Header::new_gnu();
        {
            let gnu = h.as_gnu_mut().unwrap();
            gnu.name[..path.len()].copy_from_slice(path.as_bytes());
            if let Some(l) = link {
                gnu.linkname[..l.len()].copy_from_slice(l.as_bytes());
            }
        }
        h.set_entry_type(kind);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        self.b.append(&h, data).unwrap();
        self
    }

    fn file(&mut self, path: &str, data: &[u8]) -> &mut Self {
        self.raw(path, tar::EntryType::Regular, None, data)
    }

    fn symlink(&mut self, path: &str, target: &str) -> &mut Self {
        self.raw(path, tar::EntryType::Symlink, Some(target), b"")
    }

    fn targz(&mut self) -> Vec<u8> {
        let b = std::mem::replace(&mut self.b, tar::Builder::new(Vec::new()));
        let tar = b.into_inner().unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &tar).unwrap();
        gz.finish().unwrap()
    }
}

fn zip_bytes() -> Vec<u8> {
    // A minimal (empty-entry) zip local header is enough to be recognised.
    let mut v = b"PK\x03\x04".to_vec();
    v.extend_from_slice(&[0u8; 60]);
    v
}

fn cases() -> Vec<(&'static str, Vec<u8>, &'static str)> {
    let mib = vec![7u8; 1024 * 1024];
    vec![
        (
            "absolute-path",
            Evil::new().file("/etc/evil", b"x").targz(),
            "entry \"/etc/evil\" rejected: absolute path",
        ),
        (
            "dotdot",
            Evil::new().file("manifests/../../evil", b"x").targz(),
            "entry \"manifests/../../evil\" rejected: path contains `..`",
        ),
        (
            "symlink-absolute",
            Evil::new().symlink("tls/ca.key", "/etc/shadow").targz(),
            "entry \"tls/ca.key\" rejected: symlink to the absolute path \"/etc/shadow\"",
        ),
        (
            "symlink-escape",
            Evil::new().symlink("a/up", "../../etc").targz(),
            "entry \"a/up\" rejected: symlink to \"../../etc\" points outside the bundle",
        ),
        (
            "symlink-chain",
            Evil::new().symlink("d", ".").symlink("e", "d/..").targz(),
            "entry \"e\" rejected: symlink resolves outside the bundle",
        ),
        (
            "symlink-dangling",
            Evil::new().symlink("x", "nothing-here").targz(),
            "entry \"x\" rejected: symlink points to nothing in the bundle",
        ),
        (
            "write-through-symlink",
            Evil::new()
                .file("sub/keep", b"x")
                .symlink("link", "sub")
                .file("link/planted", b"x")
                .targz(),
            "entry \"link/planted\" rejected: its path goes through a symlink",
        ),
        (
            "hardlink-outside",
            Evil::new()
                .raw(
                    "passwd",
                    tar::EntryType::Link,
                    Some("../../etc/passwd"),
                    b"",
                )
                .targz(),
            "entry \"passwd\" rejected: hard link to \"../../etc/passwd\" points outside the bundle",
        ),
        (
            "hardlink-absolute",
            Evil::new()
                .raw("shadow", tar::EntryType::Link, Some("/etc/shadow"), b"")
                .targz(),
            "entry \"shadow\" rejected: hard link to \"/etc/shadow\" points outside the bundle",
        ),
        (
            // Found by the property test: the link's own path is cleared
            // before it is linked, so a link to itself has nothing left to
            // link to.
            "hardlink-to-itself",
            Evil::new()
                .file("manifests", b"")
                .raw("manifests", tar::EntryType::Link, Some("manifests"), b"")
                .targz(),
            "entry \"manifests\" rejected: hard link to itself",
        ),
        (
            "char-device",
            Evil::new()
                .raw("dev/mem", tar::EntryType::Char, None, b"")
                .targz(),
            "entry \"dev/mem\" rejected: device files are not allowed",
        ),
        (
            "block-device",
            Evil::new()
                .raw("dev/sda", tar::EntryType::Block, None, b"")
                .targz(),
            "entry \"dev/sda\" rejected: device files are not allowed",
        ),
        (
            "fifo",
            Evil::new()
                .raw("pipe", tar::EntryType::Fifo, None, b"")
                .targz(),
            "entry \"pipe\" rejected: FIFOs are not allowed",
        ),
        (
            "entry-too-large",
            Evil::new()
                .file("images/big", &vec![0u8; 2 * 1024 * 1024])
                .targz(),
            "entry \"images/big\" rejected: 2097152 bytes is more than the 1048576 byte limit (assets.limits.max_entry_mib)",
        ),
        (
            "total-too-large",
            Evil::new()
                .file("a", &mib)
                .file("b", &mib)
                .file("c", &mib)
                .targz(),
            // bootkube.sh + a + b: b is the first past 2 MiB.
            "entry \"b\" rejected: the bundle exceeds the 2097152 byte total limit (assets.limits.max_total_mib)",
        ),
        (
            "zip",
            zip_bytes(),
            "the asset bundle is a zip archive; only tar.gz (or tar) bundles are supported",
        ),
        (
            "not-an-archive",
            b"hello, this is not an archive at all".to_vec(),
            "the asset bundle is neither a tar.gz nor a tar archive",
        ),
    ]
}

#[test]
fn malicious_bundles_are_rejected_and_leave_nothing_behind() {
    if skip_unless_s3() {
        return;
    }
    let s3 = S3Server::start().unwrap();
    s3.create_bucket(BUCKET).unwrap();
    let mut failures = Vec::new();
    for (name, bytes, expected) in cases() {
        let key = format!("{name}.tgz");
        s3.put_object(BUCKET, &key, &bytes, &[]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let opt = dir.path().join("node/opt");
        let assets = opt.join("tectonic");
        let cfg = dir.path().join("config.json");
        fs::write(
            &cfg,
            format!(
                r#"{{"paths":{{"assets_dir":"{}","run_dir":"{}"}},
                    "assets":{{"mode":"pull",
                      "limits":{{"max_entry_mib":1,"max_total_mib":2}},
                      "s3":{{"bucket":"{BUCKET}","key":"{key}","region":"us-east-1",
                        "endpoint":"{}","checksum_sha256":"{}",
                        "wait_for_object_secs":0,"retry_initial_secs":0}}}}}}"#,
                assets.display(),
                dir.path().join("run").display(),
                s3.endpoint(),
                hex::encode(sha2::Sha256::digest(&bytes)),
            ),
        )
        .unwrap();
        let out = testkit::cli::agent_command()
            .args(["--log-format", "text", "--config"])
            .arg(&cfg)
            .args(["assets", "pull"])
            .env("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEEXAMPLE00")
            .env("AWS_SECRET_ACCESS_KEY", "secret")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if out.status.code() != Some(5) || !stderr.contains(expected) {
            failures.push(format!(
                "{name}: exit {:?}, expected message {expected:?}\n{stderr}",
                out.status.code()
            ));
        }
        // Nothing in place: no assets dir, no staging dir, nothing anywhere
        // else under the node's dir (the run dir holds only the lock).
        assert!(names(&opt).is_empty(), "{name}: {:?}", names(&opt));
        assert_eq!(names(&dir.path().join("node")), vec!["opt"], "{name}");
        assert_eq!(
            names(dir.path()),
            vec!["config.json", "node", "run"],
            "{name}"
        );
        assert_eq!(
            names(&dir.path().join("run")),
            vec!["assets-pull.lock"],
            "{name}"
        );
        assert!(!assets.exists(), "{name}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_zero_filled_gzip_bomb_stops_at_the_limit() {
    // In-process: the unpacker's own limit on bytes actually written.
    let dir = tempfile::tempdir().unwrap();
    let mut tar = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    let zeros = vec![0u8; 24 * 1024 * 1024];
    h.set_size(zeros.len() as u64);
    h.set_mode(0o644);
    tar.append_data(&mut h, "zeros", &zeros[..]).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &tar.into_inner().unwrap()).unwrap();
    let bomb = gz.finish().unwrap();
    assert!(bomb.len() < 1024 * 1024, "compresses well: {}", bomb.len());
    let limits = node_bootstrap::assets::config::UnpackLimits {
        max_total_bytes: 8 * 1024 * 1024,
        max_entry_bytes: 1024 * 1024 * 1024,
        max_entries: 10,
    };
    let err = node_bootstrap::assets::unpack::unpack(&bomb[..], dir.path(), &limits).unwrap_err();
    assert_eq!(err.exit_code(), 5);
    assert!(
        err.to_string()
            .contains("entry \"zeros\" rejected: the bundle exceeds the 8388608 byte total limit"),
        "{err}"
    );
}
