//! The artifact metadata search path: `metadata generate` output consumed
//! by `find`, search order, signed before unsigned, unsigned refused by
//! default, tampered or foreign-signed metadata rejected, development mode,
//! and the HTTP and bucket locations against real servers (python's
//! http.server and moto on loopback).

use node_bootstrap::config::Config;
use node_bootstrap::error::ErrorClass;
use node_bootstrap::metadata::config::LocationKind;
use node_bootstrap::metadata::format::VersionMatch;
use node_bootstrap::metadata::{self, ArtifactQuery, sign};
use pgp::composed::{ArmorOptions, SignedSecretKey};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use testkit::torcx_fixtures::secret_key;

struct Fixture {
    dir: tempfile::TempDir,
    key: SignedSecretKey,
}

const DOCKER_1703: &[u8] = b"docker 17.03 torcx image";
const DOCKER_1712: &[u8] = b"docker 17.12 torcx image";

impl Fixture {
    fn new() -> Fixture {
        let f = Fixture {
            dir: tempfile::tempdir().unwrap(),
            key: secret_key("Mirror signing <mirror@example.invalid>"),
        };
        let public = f
            .key
            .to_public_key()
            .to_armored_string(ArmorOptions::default())
            .unwrap();
        fs::write(f.keyring(), public).unwrap();
        let secret = f.key.to_armored_string(ArmorOptions::default()).unwrap();
        fs::write(f.path("signing-key.asc"), secret).unwrap();
        f
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn keyring(&self) -> PathBuf {
        self.path("keyring.asc")
    }

    /// A mirror dir with docker packages for OS 1520.3.0; `versions` picks
    /// which ones.
    fn mirror(&self, name: &str, versions: &[(&str, &[u8])], signed: bool) -> PathBuf {
        let d = self.path(name);
        for (v, data) in versions {
            let p = d.join(format!("docker/docker_{v}_1520.3.0_amd64.torcx.tgz"));
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, data).unwrap();
        }
        fs::write(d.join("README"), "not an artifact").unwrap();
        let signer = sign::Signer::from_key(self.key.clone());
        let r = metadata::generate(&d, signed.then_some(&signer)).unwrap();
        assert_eq!(r.items, versions.len());
        assert_eq!(r.ignored.len(), 1, "README is ignored");
        d
    }

    fn config(&self, sources: &str) -> Config {
        let text = format!(
            r#"{{"sources":{{"local_dir":"{}","keyring":"{}","use_default":false{sources}}}}}"#,
            self.path("local").display(),
            self.keyring().display()
        );
        Config::from_json(&text, Path::new("/test/config.json")).unwrap()
    }

    fn config_file(&self, sources: &str) -> PathBuf {
        let p = self.path("config.json");
        fs::write(
            &p,
            format!(
                r#"{{"sources":{{"local_dir":"{}","keyring":"{}","use_default":false{sources}}}}}"#,
                self.path("local").display(),
                self.keyring().display()
            ),
        )
        .unwrap();
        p
    }
}

fn docker(version: VersionMatch) -> ArtifactQuery {
    ArtifactQuery::by_id("com.node-bootstrap:docker:1520.3.0:amd64", version)
}

#[test]
fn generated_signed_metadata_is_found_fetched_and_verified() {
    let f = Fixture::new();
    let m = f.mirror(
        "mirror",
        &[
            ("17.03", DOCKER_1703),
            ("17.12", DOCKER_1712),
            ("1.12", b"old"),
        ],
        true,
    );
    assert!(m.join("streams/v1/index.sjson").is_file());
    assert!(
        m.join("streams/v1/com.node-bootstrap-artifacts.sjson")
            .is_file()
    );
    let c = f.config(&format!(r#","url":"file://{}""#, m.display()));
    let rt = testkit::runtime();
    let found = rt
        .block_on(metadata::find(
            &c.metadata_inputs(),
            &docker(VersionMatch::Major(17)),
        ))
        .unwrap();
    assert_eq!(found.kind, LocationKind::Url);
    assert!(found.signed);
    assert_eq!(found.product_id, "com.node-bootstrap:docker:1520.3.0:amd64");
    assert_eq!(found.version, "17.12");
    assert_eq!(found.item.size, DOCKER_1712.len() as u64);
    assert_eq!(
        found.url,
        m.join("docker/docker_17.12_1520.3.0_amd64.torcx.tgz")
            .display()
            .to_string()
    );
    // The local store came first and said why it did not serve it.
    assert_eq!(found.skipped.len(), 1);
    assert_eq!(found.skipped[0].kind, LocationKind::Local);
    assert!(
        found.skipped[0].reason.starts_with("no metadata"),
        "{:?}",
        found.skipped
    );

    let dest = f.path("store/docker:17.12.torcx.tgz");
    fs::create_dir_all(dest.parent().unwrap()).unwrap();
    rt.block_on(metadata::fetch_item(&c.metadata_inputs(), &found, &dest))
        .unwrap();
    assert_eq!(fs::read(&dest).unwrap(), DOCKER_1712);

    // A changed artifact is refused and nothing lands.
    fs::write(
        m.join("docker/docker_17.12_1520.3.0_amd64.torcx.tgz"),
        b"docker 17.12 torcx imagE",
    )
    .unwrap();
    let dest2 = f.path("store/other.tgz");
    let e = rt
        .block_on(metadata::fetch_item(&c.metadata_inputs(), &found, &dest2))
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::Verification);
    assert!(e.to_string().contains("sha256 is"), "{e}");
    assert_eq!(fs::read_dir(dest2.parent().unwrap()).unwrap().count(), 1);
}

#[test]
fn the_first_location_with_a_matching_product_wins() {
    let f = Fixture::new();
    // Local store: the product, but only 1.12. URL: 17.03.
    let local = f.mirror("local", &[("1.12", b"old")], true);
    let url = f.mirror("url", &[("17.03", DOCKER_1703)], true);
    let c = f.config(&format!(r#","url":"{}""#, url.display()));
    let rt = testkit::runtime();
    let found = rt
        .block_on(metadata::find(
            &c.metadata_inputs(),
            &docker(VersionMatch::Exact("17.03".into())),
        ))
        .unwrap();
    assert_eq!(
        (found.kind, found.version.as_str()),
        (LocationKind::Url, "17.03")
    );
    assert_eq!(
        found.skipped[0].reason,
        "product com.node-bootstrap:docker:1520.3.0:amd64 has no version 17.03 (has: 1.12)"
    );
    // Asking for 1.12 stops at the local store.
    let found = rt
        .block_on(metadata::find(
            &c.metadata_inputs(),
            &docker(VersionMatch::Exact("1.12".into())),
        ))
        .unwrap();
    assert_eq!(found.kind, LocationKind::Local);
    assert_eq!(found.location, local.display().to_string());
    assert!(found.skipped.is_empty());
    // Another product is in neither.
    let q = ArtifactQuery::by_id(
        "com.node-bootstrap:docker:1520.3.0:arm64",
        VersionMatch::Latest,
    );
    let e = rt
        .block_on(metadata::find(&c.metadata_inputs(), &q))
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::BadInput);
    assert!(
        e.to_string().contains(&format!(
            "{} (local): no product com.node-bootstrap:docker:1520.3.0:arm64",
            local.display()
        )),
        "{e}"
    );
}

#[test]
fn signed_is_tried_before_unsigned_and_unsigned_is_refused_by_default() {
    let f = Fixture::new();
    let m = f.mirror("mirror", &[("17.03", DOCKER_1703)], true);
    // Someone edits the unsigned twin to offer 17.99: never read, since a
    // signed index exists.
    let p = m.join("streams/v1/com.node-bootstrap-artifacts.json");
    let text = fs::read_to_string(&p)
        .unwrap()
        .replace("\"17.03\": {", "\"17.99\": {");
    fs::write(&p, text).unwrap();
    let c = f.config(&format!(
        r#","url":"{}","allow_unsigned":["url"]"#,
        m.display()
    ));
    let rt = testkit::runtime();
    let found = rt
        .block_on(metadata::find(
            &c.metadata_inputs(),
            &docker(VersionMatch::Latest),
        ))
        .unwrap();
    assert!(found.signed);
    assert_eq!(found.version, "17.03");

    // An unsigned-only mirror: refused by default ...
    let u = f.mirror("unsigned", &[("17.03", DOCKER_1703)], false);
    assert!(!u.join("streams/v1/index.sjson").exists());
    let c = f.config(&format!(r#","url":"{}""#, u.display()));
    let e = rt
        .block_on(metadata::find(
            &c.metadata_inputs(),
            &docker(VersionMatch::Latest),
        ))
        .unwrap_err();
    assert!(
        e.to_string().contains(
            "has only unsigned metadata (streams/v1/index.json), and sources.allow_unsigned does not include \"url\""
        ),
        "{e}"
    );
    // ... accepted where the config allows it.
    let c = f.config(&format!(
        r#","url":"{}","allow_unsigned":["url"]"#,
        u.display()
    ));
    let found = rt
        .block_on(metadata::find(
            &c.metadata_inputs(),
            &docker(VersionMatch::Latest),
        ))
        .unwrap();
    assert!(!found.signed);

    // Regenerating unsigned removes stale signed files (which would win).
    metadata::generate(&m, None).unwrap();
    assert!(!m.join("streams/v1/index.sjson").exists());
    assert!(
        !m.join("streams/v1/com.node-bootstrap-artifacts.sjson")
            .exists()
    );
}

#[test]
fn tampered_or_foreign_signed_metadata_disqualifies_the_location() {
    let f = Fixture::new();
    let local = f.mirror("local", &[("17.03", DOCKER_1703)], true);
    let good = f.mirror("url", &[("17.03", DOCKER_1703)], true);
    // Tamper with the signed product file: point 17.03 at another hash.
    let p = local.join("streams/v1/com.node-bootstrap-artifacts.sjson");
    let text = fs::read_to_string(&p).unwrap();
    let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(DOCKER_1703));
    assert!(text.contains(&sha));
    fs::write(&p, text.replace(&sha, &"e".repeat(64))).unwrap();

    let c = f.config(&format!(
        r#","url":"{}","allow_unsigned":["local","url"]"#,
        good.display()
    ));
    let rt = testkit::runtime();
    let found = rt
        .block_on(metadata::find(
            &c.metadata_inputs(),
            &docker(VersionMatch::Latest),
        ))
        .unwrap();
    // Not the local store's unsigned files either: the next location.
    assert_eq!(found.kind, LocationKind::Url);
    assert!(found.signed);
    assert!(
        found.skipped[0]
            .reason
            .starts_with("signed metadata rejected: ")
            && found.skipped[0]
                .reason
                .contains("no valid signature by a key in"),
        "{:?}",
        found.skipped
    );
    // Alone, it is a verification failure.
    let c = f.config(r#","allow_unsigned":["local"]"#);
    let e = rt
        .block_on(metadata::find(
            &c.metadata_inputs(),
            &docker(VersionMatch::Latest),
        ))
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::Verification, "{e}");

    // Metadata signed by a key that is not in the keyring is rejected too.
    let other = Fixture::new();
    let foreign = other.mirror("foreign", &[("17.03", DOCKER_1703)], true);
    let c = f.config(&format!(r#","url":"{}""#, foreign.display()));
    let e = rt
        .block_on(metadata::find(
            &c.metadata_inputs(),
            &docker(VersionMatch::Latest),
        ))
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::Verification, "{e}");
    assert!(
        e.to_string().contains("index.sjson: no valid signature"),
        "{e}"
    );
}

/// [`bin`] without a config file: none named, none at the default path
/// (an operator's machine).
fn unconfigured(args: &[&str]) -> std::process::Output {
    testkit::cli::agent_command()
        .args(["--log-format", "text"])
        .args(args)
        .env_remove("NODE_BOOTSTRAP_CONFIG")
        .env("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEEXAMPLE00")
        .env("AWS_SECRET_ACCESS_KEY", "secret")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .unwrap()
}

fn bin(config: &Path, args: &[&str]) -> std::process::Output {
    testkit::cli::agent_command()
        .arg("--config")
        .arg(config)
        .args(["--log-format", "text"])
        .args(args)
        .env("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEEXAMPLE00")
        .env("AWS_SECRET_ACCESS_KEY", "secret")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .unwrap()
}

#[test]
fn cli_generate_validate_and_development_mode() {
    let f = Fixture::new();
    // An operator builds a signed mirror with the CLI.
    let m = f.path("mirror");
    fs::create_dir_all(m.join("agent")).unwrap();
    fs::write(
        m.join("agent/node-bootstrap_0.2.0_flatcar_amd64"),
        b"agent 0.2.0",
    )
    .unwrap();
    fs::write(
        m.join("agent/node-bootstrap_0.3.1_flatcar_amd64"),
        b"agent 0.3.1",
    )
    .unwrap();
    let cfg = f.config_file(&format!(r#","url":"{}""#, m.display()));
    let key = f.path("signing-key.asc");
    let out = bin(
        &cfg,
        &[
            "metadata",
            "generate",
            m.to_str().unwrap(),
            "--sign-key",
            key.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("(1 products, 2 items, signed)"));

    let out = bin(&cfg, &["metadata", "validate", m.to_str().unwrap()]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!(
            "{}: signed metadata, 1 products, 2 items, 0 problems",
            m.display()
        )
    );
    assert!(out.status.success());

    // Development mode: locally built artifacts (unsigned) come first.
    let dev = f.path("dev");
    fs::create_dir_all(&dev).unwrap();
    fs::write(
        dev.join("node-bootstrap_0.4.0-dev_flatcar_amd64"),
        b"local build",
    )
    .unwrap();
    let out = bin(&cfg, &["metadata", "generate", dev.to_str().unwrap()]);
    assert!(out.status.success());
    let args = [
        "metadata",
        "find",
        "--name",
        "node-bootstrap",
        "--series",
        "flatcar",
        "--arch",
        "amd64",
        "--major",
        "0",
    ];
    let out = bin(&cfg, &args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("found com.node-bootstrap:node-bootstrap:flatcar:amd64 0.3.1")
            && stdout.contains("signed metadata"),
        "{stdout}"
    );
    let fetched = f.path("fetched-agent");
    let mut dev_args = args.to_vec();
    dev_args.extend([
        "--dev-dir",
        dev.to_str().unwrap(),
        "--fetch",
        fetched.to_str().unwrap(),
    ]);
    let out = bin(&cfg, &dev_args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("0.4.0-dev")
            && stdout.contains("unsigned metadata")
            && stdout.contains("dev)"),
        "{stdout}"
    );
    assert!(stderr.contains("DEVELOPMENT MODE"), "{stderr}");
    assert_eq!(fs::read(&fetched).unwrap(), b"local build");

    // A broken mirror: validate names the item and fails with 6.
    fs::write(
        m.join("agent/node-bootstrap_0.2.0_flatcar_amd64"),
        b"agent 0.2.X",
    )
    .unwrap();
    let out = bin(&cfg, &["metadata", "validate", m.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(6));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("problem: com.node-bootstrap:node-bootstrap:flatcar:amd64 0.2.0 node-bootstrap_0.2.0_flatcar_amd64:")
            && stdout.contains("sha256 is"),
        "{stdout}"
    );
    // An unsigned mirror needs --allow-unsigned.
    let out = bin(&cfg, &["metadata", "validate", dev.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = bin(
        &cfg,
        &[
            "metadata",
            "validate",
            "--allow-unsigned",
            dev.to_str().unwrap(),
        ],
    );
    assert!(out.status.success());
}

/// On an operator's machine (no agent config, so the node's default
/// keyring path, which is not there): `metadata validate` of a signed
/// mirror asks for `--keyring` with a config error (4), not a retryable 3;
/// a mirror it cannot reach stays 3; `metadata find` searches with the
/// defaults instead of failing for want of a config file.
#[test]
fn off_the_node_validate_asks_for_the_keyring_and_find_needs_no_config() {
    let f = Fixture::new();
    let default_config = std::path::Path::new(node_bootstrap::config::DEFAULT_CONFIG_PATH);
    if default_config.exists() {
        testkit::skip_because(format!(
            "this machine has {} (the test plays an operator's machine)",
            default_config.display()
        ));
        return;
    }
    let node_keyring = Config::defaults()
        .sources
        .keyring_path(&Config::defaults().paths);
    assert!(
        !node_keyring.exists(),
        "this test plays an operator's machine, which has no {}",
        node_keyring.display()
    );
    let m = f.mirror("mirror", &[("17.03", DOCKER_1703)], true);
    let mirror = m.to_str().unwrap();

    let out = unconfigured(&["metadata", "validate", mirror]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("has signed metadata, and the keyring to verify it cannot be read")
            && stderr.contains(&node_keyring.display().to_string())
            && stderr.contains("pass --keyring <public key>"),
        "{stderr}"
    );

    let keyring = f.keyring();
    let args = [
        "metadata",
        "validate",
        "--keyring",
        keyring.to_str().unwrap(),
    ];
    let out = unconfigured(&[&args[..], &[mirror]].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("signed metadata, 1 products, 1 items, 0 problems"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // Nothing listens there: retrying may help, so 3, keyring or not.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let gone = format!("http://127.0.0.1:{port}/mirror");
    let out = unconfigured(&["metadata", "validate", &gone]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // find: the defaults' search path, local builds first with --dev-dir.
    let dev = f.mirror("dev", &[("17.12", DOCKER_1712)], false);
    let out = unconfigured(&[
        "metadata",
        "find",
        "--product-id",
        "com.node-bootstrap:docker:1520.3.0:amd64",
        "--dev-dir",
        dev.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("found com.node-bootstrap:docker:1520.3.0:amd64 17.12")
            && stdout.contains("dev)"),
        "{stdout}"
    );
}

/// `python3 -m http.server` on loopback, killed on drop.
struct HttpServer {
    child: std::process::Child,
    port: u16,
}

impl HttpServer {
    fn start(dir: &Path) -> HttpServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("python3")
            .args([
                "-m",
                "http.server",
                "--bind",
                "127.0.0.1",
                &port.to_string(),
                "--directory",
            ])
            .arg(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let s = HttpServer { child, port };
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return s;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        panic!("http.server did not start");
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn http_and_bucket_locations_serve_a_generated_mirror() {
    if testkit::s3::skip_unless_s3() {
        return;
    }
    let f = Fixture::new();
    let m = f.mirror("mirror", &[("17.03", DOCKER_1703)], true);
    let http = HttpServer::start(&f.path("."));

    // HTTP: the mirror served by a web server, below a path.
    let c = f.config(&format!(
        r#","url":"http://127.0.0.1:{}/mirror""#,
        http.port
    ));
    let rt = testkit::runtime();
    let found = rt
        .block_on(metadata::find(
            &c.metadata_inputs(),
            &docker(VersionMatch::Latest),
        ))
        .unwrap();
    assert_eq!(found.kind, LocationKind::Url);
    assert_eq!(
        found.url,
        format!(
            "http://127.0.0.1:{}/mirror/docker/docker_17.03_1520.3.0_amd64.torcx.tgz",
            http.port
        )
    );
    let dest = f.path("got.tgz");
    rt.block_on(metadata::fetch_item(&c.metadata_inputs(), &found, &dest))
        .unwrap();
    assert_eq!(fs::read(&dest).unwrap(), DOCKER_1703);

    // The cluster's bucket, under its metadata prefix; an unreachable URL
    // before it is skipped with its reason.
    let s3 = testkit::s3::S3Server::start().unwrap();
    s3.create_bucket("cluster-assets").unwrap();
    for rel in [
        "streams/v1/index.sjson",
        "streams/v1/index.json",
        "streams/v1/com.node-bootstrap-artifacts.sjson",
        "streams/v1/com.node-bootstrap-artifacts.json",
        "docker/docker_17.03_1520.3.0_amd64.torcx.tgz",
    ] {
        s3.put_object(
            "cluster-assets",
            &format!("metadata/{rel}"),
            &fs::read(m.join(rel)).unwrap(),
            &[],
        )
        .unwrap();
    }
    drop(http);
    let cfg = f.path("bucket.json");
    fs::write(
        &cfg,
        format!(
            r#"{{"assets":{{"s3":{{"bucket":"cluster-assets","key":"bundle.tgz","region":"us-east-1","endpoint":"{}"}}}},
                "sources":{{"local_dir":"{}","keyring":"{}","use_default":false,
                  "url":"http://127.0.0.1:{}/mirror","attempts":1,"timeout_secs":2}}}}"#,
            s3.endpoint(),
            f.path("local").display(),
            f.keyring().display(),
            http_port_closed()
        ),
    )
    .unwrap();
    let got = f.path("from-bucket.tgz");
    let out = bin(
        &cfg,
        &[
            "metadata",
            "find",
            "--name",
            "docker",
            "--series",
            "1520.3.0",
            "--arch",
            "amd64",
            "--json",
            "--fetch",
            got.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["kind"], "bucket");
    assert_eq!(v["location"], "s3://cluster-assets/metadata");
    assert_eq!(v["signed"], true);
    assert_eq!(
        v["url"],
        "s3://cluster-assets/metadata/docker/docker_17.03_1520.3.0_amd64.torcx.tgz"
    );
    assert_eq!(v["skipped"][0]["kind"], "local");
    assert_eq!(v["skipped"][1]["kind"], "url");
    assert!(
        v["skipped"][1]["reason"]
            .as_str()
            .unwrap()
            .starts_with("unreachable: "),
        "{v}"
    );
    assert_eq!(fs::read(&got).unwrap(), DOCKER_1703);
}

/// A loopback port nothing listens on.
fn http_port_closed() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
