//! `node-bootstrap assets pull` against a real S3-compatible server (moto)
//! on loopback, started by each test, with a fault-injecting proxy in front
//! where faults are tested. The agent runs as the real binary (a child
//! process), with credentials in its environment as on a node with env
//! credentials.

use sha2::Digest;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use testkit::s3::{Fault, FaultProxy, S3Server, skip_unless_s3};

const BUCKET: &str = "cluster-assets";
const SECRET_TOKEN: &str = "SECRET-TOKEN-7f3a9c";

fn sha256(b: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(b))
}

/// A tar.gz with the given (path, contents, mode) regular files and the
/// link `current-manifests -> manifests`.
fn targz(files: &[(&str, &[u8], u32)]) -> Vec<u8> {
    testkit::files::targz_with_links(files, &[("current-manifests", "manifests")])
}

fn multi_file_bundle() -> Vec<u8> {
    let kubeconfig = format!("apiVersion: v1\nusers:\n- user: {{token: {SECRET_TOKEN}}}\n");
    let key =
        format!("-----BEGIN RSA PRIVATE KEY-----\n{SECRET_TOKEN}\n-----END RSA PRIVATE KEY-----\n");
    targz(&[
        ("bootkube.sh", b"#!/bin/bash\necho bootkube\n", 0o755),
        (
            "tectonic-wrapper.sh",
            b"#!/bin/bash\necho tectonic\n",
            0o755,
        ),
        ("manifests/kube-apiserver.yaml", b"kind: DaemonSet\n", 0o644),
        (
            "manifests/kube-scheduler.yaml",
            b"kind: Deployment\n",
            0o664,
        ),
        ("tls/ca.crt", b"-----BEGIN CERTIFICATE-----\n", 0o644),
        ("tls/apiserver.key", key.as_bytes(), 0o644),
        ("auth/kubeconfig", kubeconfig.as_bytes(), 0o644),
        ("setuid-tool", b"x", 0o4755),
    ])
}

struct Env {
    dir: tempfile::TempDir,
    endpoint: String,
    key_id: String,
    secret: String,
}

impl Env {
    fn new(endpoint: String) -> Env {
        Env {
            dir: tempfile::tempdir().unwrap(),
            endpoint,
            key_id: "AKIAEXAMPLEEXAMPLE00".into(),
            secret: "secret".into(),
        }
    }

    fn opt(&self) -> PathBuf {
        self.dir.path().join("opt")
    }

    fn assets(&self) -> PathBuf {
        self.opt().join("tectonic")
    }

    /// Writes a config for `key` with extra `s3` fields, returns its path.
    fn config(&self, key: &str, s3_extra: &str) -> PathBuf {
        let p = self.dir.path().join("config.json");
        let defaults: String = [("wait_for_object_secs", 0), ("access_denied_grace_secs", 0)]
            .iter()
            .filter(|(k, _)| !s3_extra.contains(k))
            .map(|(k, v)| format!(r#","{k}":{v}"#))
            .collect();
        let text = format!(
            r#"{{"paths":{{"assets_dir":"{}","state_dir":"{}","run_dir":"{}"}},
                "assets":{{"mode":"pull","s3":{{"bucket":"{BUCKET}","key":"{key}",
                  "region":"us-east-1","endpoint":"{}",
                  "retry_initial_secs":0,"retry_max_secs":1{defaults}{s3_extra}}}}}}}"#,
            self.assets().display(),
            self.dir.path().join("state").display(),
            self.dir.path().join("run").display(),
            self.endpoint
        );
        fs::write(&p, text).unwrap();
        p
    }

    fn command(&self, config: &Path, args: &[&str]) -> Command {
        let mut c = testkit::cli::agent_command();
        c.arg("--config")
            .arg(config)
            .args(["--log-format", "text"])
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("AWS_ACCESS_KEY_ID", &self.key_id)
            .env("AWS_SECRET_ACCESS_KEY", &self.secret)
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("AWS_CONFIG_FILE", "/nonexistent/aws-config")
            .env(
                "AWS_SHARED_CREDENTIALS_FILE",
                "/nonexistent/aws-credentials",
            );
        c
    }

    fn pull(&self, config: &Path) -> Output {
        self.command(config, &["-v", "assets", "pull", "--json"])
            .output()
            .unwrap()
    }

    /// Names in the assets dir's parent (staging dirs would show here).
    fn opt_entries(&self) -> Vec<String> {
        testkit::files::names(&self.opt())
    }
}

fn report(out: &Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "pull failed: {}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn failure(out: &Output) -> (i32, String) {
    assert!(!out.status.success(), "pull should have failed");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn mode(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn pull_unpacks_a_multi_file_bundle_in_one_step_and_is_idempotent() {
    if skip_unless_s3() {
        return;
    }
    let s3 = S3Server::start().unwrap();
    s3.create_bucket(BUCKET).unwrap();
    let bundle = multi_file_bundle();
    s3.put_object(BUCKET, "assets/bundle.tar.gz", &bundle, &[])
        .unwrap();
    let env = Env::new(s3.endpoint());
    let cfg = env.config(
        "assets/bundle.tar.gz",
        &format!(r#","checksum_sha256":"{}""#, sha256(&bundle)),
    );

    // Before: `assets check` says what it waits for (exit 10).
    let out = env.command(&cfg, &["assets", "check"]).output().unwrap();
    assert_eq!(out.status.code(), Some(10));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!(
            "waiting for assets at {}, pulled from s3://{BUCKET}/assets/bundle.tar.gz by init-assets.service (`node-bootstrap assets pull`)",
            env.assets().display()
        )
    );

    let out = env.pull(&cfg);
    let r = report(&out);
    assert_eq!(r["already_present"], false);
    assert_eq!(r["bytes"], bundle.len());
    assert_eq!(r["sha256"], sha256(&bundle));
    assert_eq!(r["verified"], serde_json::json!(["sha256 (config)"]));
    assert_eq!(r["files"], 8);
    assert_eq!(r["secrets"], 3);

    let a = env.assets();
    assert_eq!(
        fs::read_to_string(a.join("bootkube.sh")).unwrap(),
        "#!/bin/bash\necho bootkube\n"
    );
    assert_eq!(mode(&a.join("bootkube.sh")), 0o755);
    assert_eq!(mode(&a.join("manifests/kube-apiserver.yaml")), 0o644);
    assert_eq!(
        mode(&a.join("manifests/kube-scheduler.yaml")),
        0o644,
        "no group write"
    );
    assert_eq!(mode(&a.join("setuid-tool")), 0o755, "no setuid");
    for secret in ["tls/apiserver.key", "tls/ca.crt", "auth/kubeconfig"] {
        assert_eq!(mode(&a.join(secret)), 0o600, "{secret}");
    }
    assert!(
        fs::read_to_string(a.join("auth/kubeconfig"))
            .unwrap()
            .contains(SECRET_TOKEN)
    );
    assert_eq!(
        fs::read_link(a.join("current-manifests")).unwrap(),
        PathBuf::from("manifests")
    );
    // Only the assets dir is left there (no staging dir, no lock).
    assert_eq!(env.opt_entries(), vec!["tectonic"]);
    // Secrets never reach the log, even at debug level.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains(SECRET_TOKEN),
        "secret in the log:\n{stderr}"
    );
    assert!(stderr.contains("assets in place"), "{stderr}");

    let out = env.command(&cfg, &["assets", "check"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));

    // A second pull changes nothing (bootkube's .done marker survives).
    fs::write(a.join("init_bootkube.done"), "done").unwrap();
    let r = report(&env.pull(&cfg));
    assert_eq!(r["already_present"], true);
    assert!(a.join("init_bootkube.done").exists());
}

#[test]
fn an_incomplete_dir_is_swapped_out_and_the_marker_written_last() {
    if skip_unless_s3() {
        return;
    }
    let s3 = S3Server::start().unwrap();
    s3.create_bucket(BUCKET).unwrap();
    let bundle = targz(&[
        ("manifests/a.yaml", b"a", 0o644),
        ("bootkube.sh", b"b", 0o755),
    ]);
    // The checksum comes from the object's metadata this time.
    s3.put_object(
        BUCKET,
        "bundle.tgz",
        &bundle,
        &[("sha256", &sha256(&bundle))],
    )
    .unwrap();
    let env = Env::new(s3.endpoint());
    let cfg = env.dir.path().join("marker.json");
    let base = fs::read_to_string(env.config("bundle.tgz", "")).unwrap();
    fs::write(
        &cfg,
        base.replace(
            r#""mode":"pull","#,
            r#""mode":"pull","marker":".assets-complete","#,
        ),
    )
    .unwrap();
    // A half-finished earlier push: files but no marker.
    fs::create_dir_all(env.assets()).unwrap();
    fs::write(env.assets().join("partial"), "x").unwrap();

    let r = report(&env.pull(&cfg));
    assert_eq!(r["replaced_incomplete"], true);
    assert_eq!(
        r["verified"],
        serde_json::json!(["sha256 (object metadata)"])
    );
    assert!(env.assets().join(".assets-complete").is_file());
    assert!(env.assets().join("bootkube.sh").is_file());
    assert!(!env.assets().join("partial").exists());
    assert_eq!(env.opt_entries(), vec!["tectonic"]);
}

#[test]
fn throttling_5xx_and_truncated_bodies_are_retried_and_the_result_is_exact() {
    if skip_unless_s3() {
        return;
    }
    let s3 = S3Server::start().unwrap();
    s3.create_bucket(BUCKET).unwrap();
    // 3.5 MiB of incompressible data: 4 ranged parts of 1 MiB.
    let mut blob = vec![0u8; 3 * 1024 * 1024 + 512 * 1024];
    fastrand::Rng::with_seed(7).fill(&mut blob);
    let bundle = {
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::none());
        let mut b = tar::Builder::new(gz);
        let mut h = tar::Header::new_gnu();
        h.set_size(blob.len() as u64);
        h.set_mode(0o644);
        b.append_data(&mut h, "images/blob.bin", &blob[..]).unwrap();
        b.into_inner().unwrap().finish().unwrap()
    };
    s3.put_object(BUCKET, "big.tgz", &bundle, &[]).unwrap();
    let proxy = FaultProxy::start(s3.port).unwrap();
    proxy.inject(
        "GET",
        "/big.tgz",
        Fault::Status {
            status: 503,
            code: "SlowDown",
            retry_after: None,
        },
    );
    proxy.inject(
        "GET",
        "/big.tgz",
        Fault::Status {
            status: 500,
            code: "InternalError",
            retry_after: None,
        },
    );
    proxy.inject("GET", "/big.tgz", Fault::Truncate { after: 100_000 });
    proxy.inject(
        "GET",
        "/big.tgz",
        Fault::Status {
            status: 502,
            code: "BadGateway",
            retry_after: None,
        },
    );
    let env = Env::new(proxy.endpoint());
    let cfg = env.config(
        "big.tgz",
        &format!(
            r#","checksum_sha256":"{}","part_size_mib":1,"concurrency":2,"max_attempts":6"#,
            sha256(&bundle)
        ),
    );
    let out = env.pull(&cfg);
    let r = report(&out);
    assert_eq!(
        proxy.pending(),
        0,
        "every fault was hit: {:?}",
        proxy.seen()
    );
    assert_eq!(proxy.applied().len(), 4);
    assert_eq!(r["retries"], 4, "{r}");
    assert_eq!(r["parts"], bundle.len().div_ceil(1024 * 1024));
    assert_eq!(
        fs::read(env.assets().join("images/blob.bin")).unwrap(),
        blob
    );
    // Ranged GETs: every successful request asked for at most one part.
    assert!(
        proxy.seen().iter().all(|l| l.contains("bytes=")),
        "{:?}",
        proxy.seen()
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("SlowDown") && stderr.contains("truncated"),
        "{stderr}"
    );
}

#[test]
fn exhausted_retries_wrong_checksum_and_missing_object_each_fail_distinctly() {
    if skip_unless_s3() {
        return;
    }
    let s3 = S3Server::start().unwrap();
    s3.create_bucket(BUCKET).unwrap();
    let bundle = multi_file_bundle();
    s3.put_object(BUCKET, "bundle.tgz", &bundle, &[]).unwrap();
    let proxy = FaultProxy::start(s3.port).unwrap();
    let env = Env::new(proxy.endpoint());
    let good = format!(
        r#","checksum_sha256":"{}","max_attempts":3"#,
        sha256(&bundle)
    );

    // Throttled on every attempt: retryable (3), after max_attempts.
    for _ in 0..3 {
        proxy.inject(
            "GET",
            "/bundle.tgz",
            Fault::Status {
                status: 503,
                code: "SlowDown",
                retry_after: Some(1),
            },
        );
    }
    let (code, err) = failure(&env.pull(&env.config("bundle.tgz", &good)));
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("failed after 3 attempts") && err.contains("HTTP 503 SlowDown"),
        "{err}"
    );
    assert!(!env.assets().exists());

    // Wrong checksum: verification (6), nothing installed.
    let wrong = format!(r#","checksum_sha256":"{}""#, "0".repeat(64));
    let (code, err) = failure(&env.pull(&env.config("bundle.tgz", &wrong)));
    assert_eq!(code, 6, "{err}");
    assert!(
        err.contains(&format!(
            "checksum mismatch for asset bundle s3://{BUCKET}/bundle.tgz: sha256 from config is {}, the download's is {}",
            "0".repeat(64),
            sha256(&bundle)
        )),
        "{err}"
    );
    assert!(!env.assets().exists());

    // No checksum anywhere: refused.
    let (code, err) = failure(&env.pull(&env.config("bundle.tgz", "")));
    assert_eq!(code, 6, "{err}");
    assert!(err.contains("no checksum for asset bundle"), "{err}");

    // Missing object: bad input (5).
    let (code, err) = failure(&env.pull(&env.config("nope.tgz", &good)));
    assert_eq!(code, 5, "{err}");
    assert!(
        err.contains(&format!(
            "asset bundle s3://{BUCKET}/nope.tgz does not exist (HTTP 404 NoSuchKey"
        )),
        "{err}"
    );
    assert!(!env.assets().exists());
    assert!(
        env.opt_entries().is_empty(),
        "no staging left: {:?}",
        env.opt_entries()
    );
}

#[test]
fn a_missing_object_is_waited_for_within_the_bound() {
    if skip_unless_s3() {
        return;
    }
    let s3 = S3Server::start().unwrap();
    s3.create_bucket(BUCKET).unwrap();
    let bundle = multi_file_bundle();
    let env = Env::new(s3.endpoint());
    let cfg = env.config(
        "late.tgz",
        &format!(
            r#","checksum_sha256":"{}","wait_for_object_secs":60"#,
            sha256(&bundle)
        ),
    );
    let child = env
        .command(&cfg, &["assets", "pull", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(2));
    // terraform uploads the bundle while the node waits.
    s3.put_object(BUCKET, "late.tgz", &bundle, &[]).unwrap();
    let out = child.wait_with_output().unwrap();
    let r = report(&out);
    assert_eq!(r["files"], 8);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("asset bundle not there yet; waiting"),
        "{stderr}"
    );

    // One that never comes: waited for 3 s, then the same exit 5 as
    // without a wait, saying how long it waited.
    let env = Env::new(s3.endpoint());
    let cfg = env.config(
        "never.tgz",
        &format!(
            r#","checksum_sha256":"{}","wait_for_object_secs":3"#,
            sha256(&bundle)
        ),
    );
    let t0 = std::time::Instant::now();
    let (code, err) = failure(&env.pull(&cfg));
    let took = t0.elapsed();
    assert_eq!(code, 5, "{err}");
    assert!(
        err.contains("gave up after waiting ")
            && err.contains(&format!(
                "asset bundle s3://{BUCKET}/never.tgz does not exist"
            )),
        "{err}"
    );
    assert!(
        took >= std::time::Duration::from_secs(1) && took < std::time::Duration::from_secs(20),
        "the wait of 3 s took {took:?}"
    );
    assert!(!env.assets().exists());
}

#[test]
fn bad_credentials_and_access_denied_are_config_errors_with_their_own_message() {
    if skip_unless_s3() {
        return;
    }
    let s3 = S3Server::start_with_auth().unwrap();
    s3.create_bucket(BUCKET).unwrap();
    let bundle = multi_file_bundle();
    s3.put_object(BUCKET, "bundle.tgz", &bundle, &[]).unwrap();
    let (reader_id, reader_secret) = s3.create_user("node", true).unwrap();
    let (other_id, other_secret) = s3.create_user("nobody", false).unwrap();
    s3.enable_auth().unwrap();
    let mut env = Env::new(s3.endpoint());
    let cfg = env.config(
        "bundle.tgz",
        &format!(r#","checksum_sha256":"{}""#, sha256(&bundle)),
    );

    env.key_id = "AKIANOTAREALKEY00000".into();
    let (code, err) = failure(&env.pull(&cfg));
    assert_eq!(code, 4, "{err}");
    assert!(
        err.contains("access denied to asset bundle s3://cluster-assets/bundle.tgz (HTTP 403 InvalidAccessKeyId"),
        "{err}"
    );

    env.key_id = reader_id.clone();
    env.secret = "wrong-secret".into();
    let (code, err) = failure(&env.pull(&cfg));
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("HTTP 403 SignatureDoesNotMatch"), "{err}");

    env.key_id = other_id;
    env.secret = other_secret;
    let (code, err) = failure(&env.pull(&cfg));
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("HTTP 403 AccessDenied"), "{err}");
    assert!(!env.assets().exists());

    // The node's real credentials work against the same server.
    env.key_id = reader_id;
    env.secret = reader_secret;
    let r = report(&env.pull(&cfg));
    assert_eq!(r["files"], 8);
}

/// A plain-tar bundle with one file of `size` random bytes, written to disk.
fn big_bundle(dir: &Path, size: u64) -> (PathBuf, String) {
    let path = dir.join(format!("bundle-{size}.tar"));
    let f = fs::File::create(&path).unwrap();
    let mut b = tar::Builder::new(std::io::BufWriter::new(f));
    let mut h = tar::Header::new_gnu();
    h.set_size(size);
    h.set_mode(0o644);
    struct Rand(fastrand::Rng, u64);
    impl std::io::Read for Rand {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = (buf.len() as u64).min(self.1) as usize;
            self.0.fill(&mut buf[..n]);
            self.1 -= n as u64;
            Ok(n)
        }
    }
    b.append_data(
        &mut h,
        "images/hyperkube.img",
        Rand(fastrand::Rng::with_seed(1), size),
    )
    .unwrap();
    b.into_inner()
        .unwrap()
        .into_inner()
        .unwrap()
        .sync_all()
        .unwrap();
    let out = Command::new("sha256sum").arg(&path).output().unwrap();
    let sum = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    (path, sum)
}

fn measured_pull(s3: &S3Server, size_mib: u64, part_mib: u64) -> (serde_json::Value, u64, f64) {
    let env = Env::new(s3.endpoint());
    let (bundle, sum) = big_bundle(env.dir.path(), size_mib * 1024 * 1024);
    let key = format!("bundle-{size_mib}.tar");
    s3.put_file(BUCKET, &key, &bundle, &[]).unwrap();
    fs::remove_file(&bundle).unwrap();
    let cfg = env.config(
        &key,
        &format!(r#","checksum_sha256":"{sum}","part_size_mib":{part_mib},"concurrency":4"#),
    );
    let t0 = std::time::Instant::now();
    let out = env
        .command(&cfg, &["assets", "pull", "--json"])
        .output()
        .unwrap();
    let secs = t0.elapsed().as_secs_f64();
    let r = report(&out);
    // The kernel's peak RSS of the agent's own memory (VmHWM, read by the
    // agent as it finishes). Not wait4(2)'s ru_maxrss: a child spawned by
    // this test binary starts out sharing its memory, and exec records that
    // high-water mark (the whole test tier's, over 1 GiB) in the child's.
    let rss = r["peak_rss_kib"]
        .as_u64()
        .expect("peak_rss_kib in the report");
    let img = env.assets().join("images/hyperkube.img");
    assert_eq!(fs::metadata(&img).unwrap().len(), size_mib * 1024 * 1024);
    (r, rss, secs)
}

#[test]
fn a_256_mib_bundle_is_pulled_in_parallel_parts_with_flat_memory() {
    if skip_unless_s3() {
        return;
    }
    let s3 = S3Server::start().unwrap();
    s3.create_bucket(BUCKET).unwrap();
    let (small, small_rss, small_secs) = measured_pull(&s3, 8, 32);
    let (big, big_rss, big_secs) = measured_pull(&s3, 256, 32);
    println!(
        "assets pull peak RSS (VmHWM): 8 MiB bundle {small_rss} KiB in {small_secs:.1}s; \
         256 MiB bundle {big_rss} KiB in {big_secs:.1}s ({} parts)",
        big["parts"]
    );
    assert_eq!(big["parts"], 9, "256 MiB + tar header in 32 MiB parts");
    assert_eq!(small["parts"], 1);
    // Flat: the 256 MiB pull needs at most 32 MiB more than the 8 MiB one,
    // far less than the object itself.
    assert!(
        big_rss < small_rss + 32 * 1024,
        "peak RSS grew with the object: {small_rss} KiB -> {big_rss} KiB"
    );
    assert!(big_rss < 128 * 1024, "peak RSS {big_rss} KiB");
}

/// The 1 GiB benchmark: `NODE_BOOTSTRAP_BENCH=1 cargo test --test inprocess
/// assets_s3::bench_1_gib -- --nocapture`. Skipped (also in CI) unless
/// NODE_BOOTSTRAP_BENCH=1 (moto copies the object for every ranged GET, so
/// this measures moto as much as the agent; bench/assets.sh uses Garage).
#[test]
fn bench_1_gib() {
    if std::env::var("NODE_BOOTSTRAP_BENCH").as_deref() != Ok("1") {
        eprintln!(
            "SKIPPED {}: set NODE_BOOTSTRAP_BENCH=1 to run the 1 GiB benchmark",
            testkit::test_name()
        );
        return;
    }
    if skip_unless_s3() {
        return;
    }
    let s3 = S3Server::start().unwrap();
    s3.create_bucket(BUCKET).unwrap();
    let (r, rss, secs) = measured_pull(&s3, 1024, 64);
    println!(
        "bench: 1 GiB bundle pulled in {secs:.1}s, {} parts, peak RSS {rss} KiB",
        r["parts"]
    );
}

/// A bundle of a few small files first, then 3 MiB of random data: parts of
/// 1 MiB, the first of which already unpacks the small files.
fn bundle_with_a_big_tail() -> (Vec<u8>, Vec<u8>) {
    let mut blob = vec![0u8; 3 * 1024 * 1024];
    fastrand::Rng::with_seed(11).fill(&mut blob);
    let bundle = targz(&[
        ("bootkube.sh", b"#!/bin/bash\necho bootkube\n", 0o755),
        ("manifests/kube-apiserver.yaml", b"kind: DaemonSet\n", 0o644),
        ("images/blob.bin", &blob, 0o644),
    ]);
    (bundle, blob)
}

#[test]
fn a_download_that_breaks_off_after_unpacking_began_leaves_nothing() {
    if skip_unless_s3() {
        return;
    }
    let s3 = S3Server::start().unwrap();
    s3.create_bucket(BUCKET).unwrap();
    let (bundle, _) = bundle_with_a_big_tail();
    s3.put_object(BUCKET, "tail.tgz", &bundle, &[]).unwrap();
    let proxy = FaultProxy::start(s3.port).unwrap();
    // The second part breaks off on every attempt; the first one (the small
    // files and the start of the blob) is unpacked meanwhile.
    for _ in 0..2 {
        proxy.inject("GET", "bytes=1048576-", Fault::Truncate { after: 300_000 });
    }
    let env = Env::new(proxy.endpoint());
    let cfg = env.config(
        "tail.tgz",
        &format!(
            r#","checksum_sha256":"{}","part_size_mib":1,"concurrency":1,"max_attempts":2"#,
            sha256(&bundle)
        ),
    );
    let (code, err) = failure(&env.pull(&cfg));
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("part 2 of 4") && err.contains("truncated"),
        "{err}"
    );
    assert_eq!(proxy.pending(), 0, "{:?}", proxy.seen());
    assert!(!env.assets().exists(), "nothing under the final name");
    assert!(
        env.opt_entries().is_empty(),
        "no staging left: {:?}",
        env.opt_entries()
    );
}

#[test]
fn an_object_replaced_mid_download_is_fetched_and_unpacked_again_from_scratch() {
    if skip_unless_s3() {
        return;
    }
    let s3 = S3Server::start().unwrap();
    s3.create_bucket(BUCKET).unwrap();
    let (bundle, blob) = bundle_with_a_big_tail();
    s3.put_object(BUCKET, "tail.tgz", &bundle, &[]).unwrap();
    let proxy = FaultProxy::start(s3.port).unwrap();
    // S3's answer to a part whose If-Match no longer holds: the object
    // changed after the first part was unpacked.
    proxy.inject(
        "GET",
        "bytes=2097152-",
        Fault::Status {
            status: 412,
            code: "PreconditionFailed",
            retry_after: None,
        },
    );
    let env = Env::new(proxy.endpoint());
    let cfg = env.config(
        "tail.tgz",
        &format!(
            r#","checksum_sha256":"{}","part_size_mib":1,"concurrency":1"#,
            sha256(&bundle)
        ),
    );
    let out = env.pull(&cfg);
    let r = report(&out);
    assert_eq!(proxy.pending(), 0, "{:?}", proxy.seen());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("restarting the download"), "{stderr}");
    // Everything unpacked once, from the second download: the first
    // attempt's files were cleared, not stumbled over.
    assert_eq!(r["files"], 3, "{r}");
    assert_eq!(
        fs::read(env.assets().join("images/blob.bin")).unwrap(),
        blob
    );
    assert_eq!(
        fs::read_to_string(env.assets().join("bootkube.sh")).unwrap(),
        "#!/bin/bash\necho bootkube\n"
    );
    assert_eq!(env.opt_entries(), vec!["tectonic".to_string()]);
}
