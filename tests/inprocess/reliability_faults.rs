//! Network faults, through one fault-injecting proxy (`testkit::faults`)
//! put in front of each server the agent talks to: the API server
//! stand-in (TLS), the package server (docker addon packages) and the S3
//! stand-in (asset bundle). Fault classes: resets (at once and mid-answer),
//! 5xx and 429/503 with Retry-After, stalls longer than the agent's
//! timeouts, truncated bodies, wrong Content-Length, corrupted bytes.
//!
//! What a user checks: a transient fault costs a retry and the result is
//! exactly right; a persistent one ends within the configured attempts with
//! an error that names the fault and the server, of a class that tells
//! systemd to retry (exit 3), and bad bytes are never installed (a
//! corrupted download is refused as a verification failure, exit 6, and
//! nothing is left in place).

use node_bootstrap::config::Config;
use node_bootstrap::error::ErrorClass;
use sha2::Digest;
use std::path::Path;
use std::time::{Duration, Instant};
use testkit::faults::{FaultProxy, NetFault};

// ---------------------------------------------------------------- API server

struct Api {
    _cluster: testkit::agentnode::Cluster,
    proxy: FaultProxy,
    dir: tempfile::TempDir,
}

impl Api {
    fn start() -> Api {
        let cluster = testkit::agentnode::Cluster::start(Default::default()).unwrap();
        let port: u16 = cluster
            .api
            .url()
            .rsplit(':')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let proxy = FaultProxy::start(port).unwrap();
        let dir = tempfile::tempdir().unwrap();
        cluster
            .pki
            .write_kubeconfig(
                &dir.path().join("kubeconfig"),
                &proxy.https_url(),
                &testkit::apiserver::KubeAuth::ClientCert,
            )
            .unwrap();
        Api {
            _cluster: cluster,
            proxy,
            dir,
        }
    }

    fn config(&self) -> Config {
        let text = serde_json::json!({
            "paths": {"kubeconfig": self.dir.path().join("kubeconfig")},
            "cluster": {"api_attempts": 4, "api_retry_initial_secs": 0, "api_retry_max_secs": 1, "api_timeout_secs": 2},
        })
        .to_string();
        Config::from_json(&text, Path::new("/etc/node-bootstrap/config.json")).unwrap()
    }

    /// Runs discovery on a runtime of its own (the stand-in's runtime
    /// must not be dropped inside another one).
    fn discover(&self) -> node_bootstrap::error::Result<node_bootstrap::cluster::ClusterVersion> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(node_bootstrap::cluster::discover(
            &self.config().cluster_inputs(),
            Some("v1.8.4_coreos.0"),
        ))
    }
}

/// Transport faults a TLS connection can meet, and what the error says.
fn api_faults() -> Vec<(NetFault, &'static str)> {
    vec![
        (NetFault::Reset, "tls handshake eof"),
        // During the handshake.
        (NetFault::ResetAfter(300), "tls handshake eof"),
        (NetFault::Corrupt(1000), "cannot decrypt peer's message"),
        // After the handshake, in the answer.
        (NetFault::ResetAfter(2000), "peer closed connection"),
        (NetFault::Truncate(2000), "peer closed connection"),
        (NetFault::Corrupt(2000), "cannot decrypt peer's message"),
        (NetFault::StallAfter(0, Duration::from_secs(4)), "timed out"),
        (
            NetFault::StallAfter(2000, Duration::from_secs(4)),
            "timed out",
        ),
    ]
}

#[test]
fn api_server_transient_faults_cost_a_retry_and_the_version_is_right() {
    for (fault, _) in api_faults() {
        let api = Api::start();
        api.proxy.queue([fault.clone(), fault.clone()]);
        let v = api
            .discover()
            .unwrap_or_else(|e| panic!("{}: {e}", fault.name()));
        assert_eq!(v.version, "v1.9.6+coreos.0", "{}", fault.name());
        assert_eq!(
            api.proxy.pending(),
            0,
            "{}: both faults were met",
            fault.name()
        );
        assert_eq!(
            api.proxy.connections(),
            3,
            "{}: two failed attempts, one good",
            fault.name()
        );
    }
}

#[test]
fn api_server_persistent_faults_end_within_the_attempts_naming_the_fault() {
    for (fault, says) in api_faults() {
        let api = Api::start();
        api.proxy.queue(std::iter::repeat_n(fault.clone(), 10));
        let t0 = Instant::now();
        let e = api.discover().unwrap_err();
        let msg = e.to_string();
        assert_eq!(e.class(), ErrorClass::Retryable, "{}: {msg}", fault.name());
        assert!(
            msg.contains("failed after 4 attempts"),
            "{}: {msg}",
            fault.name()
        );
        assert!(
            msg.contains(says),
            "{}: the error must say {says:?}: {msg}",
            fault.name()
        );
        assert!(
            msg.contains(&api.proxy.https_url()),
            "{}: the error must name the server: {msg}",
            fault.name()
        );
        assert_eq!(api.proxy.connections(), 4, "{}", fault.name());
        // 4 attempts, each bounded by api_timeout (2 s), backoff <= 1 s.
        assert!(
            t0.elapsed() < Duration::from_secs(4 * 2 + 3 + 2),
            "{}: took {:?}",
            fault.name(),
            t0.elapsed()
        );
    }
}

// ----------------------------------------------------------- package server

mod pkg {
    use super::*;
    use node_bootstrap::addon::{self, AddonRequest};
    use testkit::torcx_fixtures::{AddonRig, PkgEntry, docker_archive};

    const OS: &str = "1632.3.0";
    pub const STORE: &str = "/var/lib/torcx/store/1632.3.0";

    pub struct Pkg {
        pub rig: AddonRig,
        pub proxy: FaultProxy,
        pub data: Vec<u8>,
    }

    impl Pkg {
        /// The manifest comes straight from the package server; the package
        /// itself through the proxy.
        pub fn start() -> Pkg {
            let rig = AddonRig::new(OS);
            rig.set_running_docker("1.12");
            let proxy = FaultProxy::start(rig.server.addr().port()).unwrap();
            let data = docker_archive("17.03.2-ce");
            let path = rig.package_path("17.03", &data);
            rig.server.put(&path, data.clone());
            let e = PkgEntry::new("17.03", &data, &format!("{}{path}", proxy.http_url()));
            rig.publish_manifest(OS, &[e]);
            Pkg { rig, proxy, data }
        }

        pub async fn ensure(&self) -> node_bootstrap::error::Result<addon::AddonOutcome> {
            let c = Config::from_json(
                &self.rig.config_json(serde_json::json!({
                    "download_attempts": 4, "read_timeout_secs": 2, "connect_timeout_secs": 2,
                })),
                Path::new("/etc/node-bootstrap/config.json"),
            )
            .unwrap();
            addon::ensure(
                &c.addon_inputs(),
                &AddonRequest {
                    cluster_version: "v1.9.6+coreos.0".into(),
                    next_os_version: None,
                },
            )
            .await
        }

        pub fn installed(&self) -> Option<Vec<u8>> {
            std::fs::read(self.rig.path(&format!("{STORE}/docker:17.03.torcx.tgz"))).ok()
        }
    }
}

/// Faults a package download can meet, and what the final error says.
fn pkg_faults() -> Vec<(NetFault, &'static str)> {
    vec![
        (
            NetFault::Reset,
            "connection closed before message completed",
        ),
        (NetFault::Status(503, Some(1)), "answered HTTP 503"),
        (NetFault::Status(429, Some(1)), "answered HTTP 429"),
        (NetFault::Status(500, None), "answered HTTP 500"),
        (NetFault::ResetAfter(2000), "broke off at byte"),
        (NetFault::Truncate(2000), "broke off at byte"),
        (
            NetFault::StallAfter(2000, Duration::from_secs(4)),
            "timed out",
        ),
        (NetFault::WrongLength(1000), "cannot resume at byte"),
        (NetFault::WrongLength(-1000), "does not match the manifest"),
    ]
}

/// Faults that damage the bytes without the transport noticing (a short
/// `Content-Length`): the package fails its sha512 (Verification, exit 6:
/// systemd restarts the unit), nothing is installed, and the next run gets
/// the real package.
fn damages_bytes(f: &NetFault) -> bool {
    matches!(f, NetFault::WrongLength(d) if *d < 0) || matches!(f, NetFault::Corrupt(_))
}

#[tokio::test]
async fn package_server_transient_faults_are_retried_and_the_package_is_exact() {
    for (fault, _) in pkg_faults() {
        let p = pkg::Pkg::start();
        p.proxy.queue([fault.clone()]);
        match p.ensure().await {
            Ok(_) => {}
            Err(e) if damages_bytes(&fault) => {
                assert_eq!(e.class(), ErrorClass::Verification, "{}: {e}", fault.name());
                assert!(
                    e.to_string().contains("nothing was installed"),
                    "{}: {e}",
                    fault.name()
                );
                assert_eq!(p.installed(), None, "{}", fault.name());
                p.ensure()
                    .await
                    .unwrap_or_else(|e| panic!("{}: the next run: {e}", fault.name()));
            }
            Err(e) => panic!("{}: {e}", fault.name()),
        }
        assert_eq!(
            p.installed().as_deref(),
            Some(p.data.as_slice()),
            "{}: the installed package must be the published one",
            fault.name()
        );
        assert_eq!(
            p.rig.files_in(pkg::STORE),
            ["docker:17.03.torcx.tgz"],
            "{}: no temp files",
            fault.name()
        );
    }
}

#[tokio::test]
async fn package_server_persistent_faults_install_nothing_and_say_why() {
    for (fault, says) in pkg_faults() {
        let p = pkg::Pkg::start();
        p.proxy.queue(std::iter::repeat_n(fault.clone(), 20));
        let e = p.ensure().await.unwrap_err();
        let msg = e.to_string();
        assert!(
            matches!(e.class(), ErrorClass::Retryable | ErrorClass::Verification),
            "{}: a network fault must leave systemd something to retry: {e:?}",
            fault.name()
        );
        assert!(
            msg.contains(says),
            "{}: the error must say {says:?}: {msg}",
            fault.name()
        );
        assert!(
            msg.contains("docker:17.03.torcx.tgz") || msg.contains(&p.proxy.http_url()),
            "{}: name the package: {msg}",
            fault.name()
        );
        assert_eq!(p.installed(), None, "{}: nothing installed", fault.name());
        // At most the hidden partial the next run resumes from.
        let left = p.rig.files_in(pkg::STORE);
        assert!(
            left.iter()
                .all(|f| f.starts_with(".docker:17.03.torcx.tgz.part-")),
            "{}: {left:?}",
            fault.name()
        );
        assert!(
            p.proxy.connections() <= 4 * 2,
            "{}: {} connections for 4 attempts",
            fault.name(),
            p.proxy.connections()
        );
    }
}

#[tokio::test]
async fn a_corrupted_package_is_refused_and_never_installed() {
    let p = pkg::Pkg::start();
    p.proxy
        .queue(std::iter::repeat_n(NetFault::Corrupt(5000), 20));
    let e = p.ensure().await.unwrap_err();
    assert_eq!(e.class(), ErrorClass::Verification, "{e}");
    assert_eq!(p.installed(), None);
    assert!(p.rig.files_in(pkg::STORE).is_empty());
    // Once the network is clean again the next run installs the real bytes.
    p.proxy.clear();
    p.ensure().await.unwrap();
    assert_eq!(p.installed().as_deref(), Some(p.data.as_slice()));
}

// ------------------------------------------------------------------------ S3

mod s3 {
    use super::*;
    use std::process::Output;

    pub const BUCKET: &str = "cluster-assets";

    pub struct S3 {
        pub _server: testkit::s3::S3Server,
        pub proxy: FaultProxy,
        pub dir: tempfile::TempDir,
        pub bundle: Vec<u8>,
    }

    /// A tar.gz with a few files, one of them big enough to span reads.
    pub fn bundle() -> Vec<u8> {
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let mut b = tar::Builder::new(gz);
        let big: Vec<u8> = (0..300_000u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        for (path, data) in [
            ("bootkube.sh", &b"#!/bin/bash\necho bootkube\n"[..]),
            ("manifests/big.bin", &big[..]),
        ] {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_entry_type(tar::EntryType::Regular);
            b.append_data(&mut h, path, data).unwrap();
        }
        b.into_inner().unwrap().finish().unwrap()
    }

    impl S3 {
        pub fn start() -> S3 {
            let server = testkit::s3::S3Server::start().unwrap();
            server.create_bucket(BUCKET).unwrap();
            let bundle = bundle();
            server
                .put_object(BUCKET, "assets.tar.gz", &bundle, &[])
                .unwrap();
            let port: u16 = server
                .endpoint()
                .rsplit(':')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            let proxy = FaultProxy::start(port).unwrap();
            S3 {
                _server: server,
                proxy,
                dir: tempfile::tempdir().unwrap(),
                bundle,
            }
        }

        pub fn assets(&self) -> std::path::PathBuf {
            self.dir.path().join("opt/tectonic")
        }

        pub fn pull(&self) -> Output {
            let cfg = self.dir.path().join("config.json");
            let sha = hex::encode(sha2::Sha256::digest(&self.bundle));
            std::fs::write(
                &cfg,
                serde_json::json!({
                    "paths": {"assets_dir": self.assets(), "state_dir": self.dir.path().join("state"), "run_dir": self.dir.path().join("run")},
                    "assets": {"mode": "pull", "s3": {
                        "bucket": BUCKET, "key": "assets.tar.gz", "region": "us-east-1",
                        "endpoint": self.proxy.http_url(), "checksum_sha256": sha,
                        "max_attempts": 4, "retry_initial_secs": 0, "retry_max_secs": 1,
                        "request_timeout_secs": 2, "wait_for_object_secs": 0, "access_denied_grace_secs": 0,
                    }},
                })
                .to_string(),
            )
            .unwrap();
            testkit::cli::agent_command()
                .arg("--config")
                .arg(&cfg)
                .args(["--log-format", "text", "assets", "pull"])
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .env("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEEXAMPLE00")
                .env("AWS_SECRET_ACCESS_KEY", "secret")
                .env("AWS_EC2_METADATA_DISABLED", "true")
                .env("AWS_CONFIG_FILE", "/nonexistent/aws-config")
                .env(
                    "AWS_SHARED_CREDENTIALS_FILE",
                    "/nonexistent/aws-credentials",
                )
                .output()
                .unwrap()
        }

        /// Names next to the assets dir (a staging dir left behind shows here).
        pub fn opt_entries(&self) -> Vec<String> {
            testkit::files::names(&self.dir.path().join("opt"))
        }
    }
}

/// Faults a ranged S3 download can meet, and what the final error says.
fn s3_faults() -> Vec<(NetFault, &'static str)> {
    vec![
        (
            NetFault::Reset,
            "connection closed before message completed",
        ),
        (NetFault::Status(503, Some(1)), "HTTP 503 SlowDown"),
        (NetFault::Status(500, None), "HTTP 500 InternalError"),
        (NetFault::ResetAfter(5000), "truncated: body broke off"),
        (NetFault::Truncate(5000), "truncated: body broke off"),
        (
            NetFault::StallAfter(5000, Duration::from_secs(4)),
            "truncated: no data for 2s",
        ),
        (NetFault::WrongLength(1000), "truncated: body broke off"),
        (NetFault::WrongLength(-1000), "truncated: body ended after"),
    ]
}

#[test]
fn s3_transient_faults_are_retried_and_the_assets_are_exact() {
    if testkit::s3::skip_unless_s3() {
        return;
    }
    for (fault, _) in s3_faults() {
        let s = s3::S3::start();
        s.proxy.queue([fault.clone()]);
        let out = s.pull();
        assert!(
            out.status.success(),
            "{}: {}\n{}",
            fault.name(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            std::fs::read_to_string(s.assets().join("bootkube.sh")).unwrap(),
            "#!/bin/bash\necho bootkube\n",
            "{}",
            fault.name()
        );
        assert_eq!(
            std::fs::metadata(s.assets().join("manifests/big.bin"))
                .unwrap()
                .len(),
            300_000
        );
        assert_eq!(
            s.opt_entries(),
            ["tectonic"],
            "{}: no staging left",
            fault.name()
        );
    }
}

#[test]
fn s3_persistent_faults_install_nothing_and_say_why() {
    if testkit::s3::skip_unless_s3() {
        return;
    }
    for (fault, says) in s3_faults() {
        let s = s3::S3::start();
        s.proxy.queue(std::iter::repeat_n(fault.clone(), 40));
        let out = s.pull();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let code = out.status.code();
        assert_eq!(
            code,
            Some(3),
            "{}: exit {code:?} must be retryable: {stderr}",
            fault.name()
        );
        assert!(
            stderr.contains("failed after 4 attempts"),
            "{}: bounded: {stderr}",
            fault.name()
        );
        assert!(
            stderr.contains(says),
            "{}: must say {says:?}: {stderr}",
            fault.name()
        );
        assert!(
            stderr.contains("s3://cluster-assets/assets.tar.gz"),
            "{}: name the object: {stderr}",
            fault.name()
        );
        assert!(
            s.opt_entries().is_empty(),
            "{}: nothing in place: {:?}",
            fault.name(),
            s.opt_entries()
        );
    }
}

#[test]
fn a_corrupted_bundle_is_refused_and_never_installed() {
    if testkit::s3::skip_unless_s3() {
        return;
    }
    let s = s3::S3::start();
    s.proxy
        .queue(std::iter::repeat_n(NetFault::Corrupt(4000), 40));
    let out = s.pull();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "verification failure: {stderr}");
    assert!(stderr.contains("checksum mismatch"), "{stderr}");
    assert!(s.opt_entries().is_empty(), "{:?}", s.opt_entries());
    s.proxy.clear();
    let out = s.pull();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::metadata(s.assets().join("manifests/big.bin"))
            .unwrap()
            .len(),
        300_000
    );
}
