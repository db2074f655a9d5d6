//! The docker addon phase with `addon.package_source = "metadata"`: real
//! `.torcx.tgz` archives named for `metadata generate`, signed with an
//! OpenPGP key made for the test, served from local directories and over
//! HTTP (testkit's package server on loopback). Each test checks what a user
//! would look at: the torcx store, the profile, next-profile, the outcome,
//! what was downloaded, and what the agent logged.

use node_bootstrap::addon::{self, AddonRequest};
use node_bootstrap::config::Config;
use node_bootstrap::error::ErrorClass;
use node_bootstrap::metadata::{self, sign};
use pgp::composed::{ArmorOptions, SignedSecretKey};
use serde_json::{Value, json};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use testkit::cli;
use testkit::torcx_fixtures::{AddonRig, docker_archive, secret_key};

const OS: &str = "1632.3.0";
const BOARD: &str = "amd64-usr";
const CLUSTER: &str = "v1.9.6+coreos.0";
const STORE: &str = "/var/lib/torcx/store/1632.3.0";
/// The node's local metadata store (`sources.local_dir` under the rig).
const LOCAL: &str = "/var/lib/node-bootstrap/metadata";

/// A node under a temp dir plus a mirror signing key whose public half is
/// the node's default metadata keyring (`<seed_dir>/keyring.asc`).
struct Rig {
    rig: AddonRig,
    key: SignedSecretKey,
    work: tempfile::TempDir,
}

fn artifact(version: &str, series: &str) -> String {
    format!("docker-torcx_{version}_{series}_{BOARD}.torcx.tgz")
}

impl Rig {
    fn new() -> Rig {
        let rig = AddonRig::new(OS);
        let key = secret_key("Mirror signing <mirror@example.invalid>");
        rig.write(
            "/etc/kubernetes/installer/keyring.asc",
            key.to_public_key()
                .to_armored_string(ArmorOptions::default())
                .unwrap(),
        );
        Rig {
            rig,
            key,
            work: tempfile::tempdir().unwrap(),
        }
    }

    /// Writes `files` (name -> bytes) into `dir` and runs `metadata
    /// generate` on it, signed or not.
    fn generate(&self, dir: &Path, files: &[(String, Vec<u8>)], signed: bool) {
        for (name, data) in files {
            let p = dir.join("docker").join(name);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, data).unwrap();
        }
        let signer = sign::Signer::from_key(self.key.clone());
        let r = metadata::generate(dir, signed.then_some(&signer)).unwrap();
        assert_eq!(r.items, files.len());
    }

    /// A mirror directory outside the node.
    fn mirror_dir(&self, name: &str, files: &[(String, Vec<u8>)], signed: bool) -> PathBuf {
        let d = self.work.path().join(name);
        fs::create_dir_all(&d).unwrap();
        self.generate(&d, files, signed);
        d
    }

    /// Serves a generated mirror under `/<name>/` on the rig's server and
    /// returns its base URL.
    fn serve(&self, name: &str, files: &[(String, Vec<u8>)], signed: bool) -> String {
        let d = self.mirror_dir(name, files, signed);
        self.publish_tree(name, &d);
        self.rig.server.url(&format!("/{name}"))
    }

    fn publish_tree(&self, name: &str, dir: &Path) {
        for e in testkit::files::files_below(dir) {
            let rel = e.strip_prefix(dir).unwrap().display().to_string();
            self.rig
                .server
                .put(&format!("/{name}/{rel}"), fs::read(&e).unwrap());
        }
    }

    /// The agent's config: addon enabled with the metadata source, fast
    /// retries, `sources` as given (local_dir under the rig, no default).
    fn config_value(&self, sources: Value) -> Value {
        let mut v: Value = serde_json::from_str(
            &self
                .rig
                .config_json(json!({"package_source": "metadata", "manifest_url": null})),
        )
        .unwrap();
        let mut s = json!({
            "local_dir": self.rig.path(LOCAL),
            "use_default": false,
            "timeout_secs": 5,
            "attempts": 2,
        });
        for (k, val) in sources.as_object().unwrap() {
            s[k] = val.clone();
        }
        v["sources"] = s;
        v
    }

    fn config(&self, sources: Value) -> Config {
        Config::from_json(
            &self.config_value(sources).to_string(),
            Path::new("/etc/node-bootstrap/config.json"),
        )
        .unwrap()
    }

    fn requests_under(&self, prefix: &str) -> Vec<String> {
        self.rig
            .server
            .requests()
            .into_iter()
            .map(|r| r.path)
            .filter(|p| p.starts_with(prefix))
            .collect()
    }

    fn assert_untouched(&self) {
        assert_eq!(self.rig.files_in(STORE), Vec::<String>::new());
        assert!(!self.rig.exists("/etc/torcx/profiles/tectonic.json"));
        assert!(!self.rig.exists("/etc/torcx/next-profile"));
    }

    /// `node-bootstrap addon ensure` with this config: (exit code, stdout,
    /// stderr with the text log).
    fn cli_ensure(&self, sources: Value) -> (i32, String, String) {
        let cfg = self.rig.path("/etc/node-bootstrap/config.json");
        testkit::torcx_fixtures::write(&cfg, self.config_value(sources).to_string()).unwrap();
        let out = cli::agent_command()
            .arg("--config")
            .arg(&cfg)
            .args(["--log-format", "text"])
            .args(["addon", "ensure", "--cluster-version", CLUSTER])
            .output()
            .unwrap();
        (
            cli::code(&out),
            cli::stdout(&out),
            cli::strip_ansi(&cli::stderr(&out)),
        )
    }
}

fn req(next_os: Option<&str>) -> AddonRequest {
    AddonRequest {
        cluster_version: CLUSTER.to_string(),
        next_os_version: next_os.map(str::to_string),
    }
}

/// docker 1.12 and two 17.03 builds for OS, plus a 17.03 for another board.
fn packages() -> Vec<(String, Vec<u8>)> {
    vec![
        (artifact("1.12.6", OS), docker_archive("1.12.6")),
        (artifact("17.03.1", OS), docker_archive("17.03.1-ce")),
        (artifact("17.03.2", OS), docker_archive("17.03.2-ce")),
        (
            format!("docker-torcx_17.03.9_{OS}_arm64-usr.torcx.tgz"),
            docker_archive("17.03.9-ce"),
        ),
    ]
}

#[tokio::test]
async fn fresh_store_gets_the_package_from_the_first_location_that_has_it() {
    let r = Rig::new();
    // The node's local store has signed metadata, but for another product.
    r.generate(
        &r.rig.path(LOCAL),
        &[(
            "node-bootstrap_0.2.0_flatcar_amd64".to_string(),
            b"agent".to_vec(),
        )],
        true,
    );
    let url = r.serve("mirror", &packages(), true);
    r.rig.set_running_docker("1.12.6");
    let c = r.config(json!({"url": url}));

    let out = addon::ensure(&c.addon_inputs(), &req(None)).await.unwrap();

    let want = docker_archive("17.03.2-ce");
    let store_file = r.rig.path(&format!("{STORE}/docker:17.03.2.torcx.tgz"));
    assert_eq!(fs::read(&store_file).unwrap(), want);
    assert_eq!(
        fs::metadata(&store_file).unwrap().permissions().mode() & 0o777,
        0o644
    );
    assert_eq!(
        r.rig.files_in(STORE),
        ["docker:17.03.2.torcx.tgz"],
        "no temp files left"
    );
    assert_eq!(
        r.rig.read("/etc/torcx/profiles/tectonic.json").unwrap(),
        "{\"kind\":\"profile-manifest-v0\",\"value\":{\"images\":[{\"name\":\"docker\",\"reference\":\"17.03.2\"}]}}\n"
    );
    assert_eq!(r.rig.read("/etc/torcx/next-profile").unwrap(), "tectonic\n");
    assert_eq!(out.docker_next, "17.03.2");
    assert!(out.reboot_needed && out.wipe_docker_datadir);
    assert_eq!(out.os_versions, [OS]);
    let pkg = format!("/mirror/docker/{}", artifact("17.03.2", OS));
    assert_eq!(r.rig.server.requests_for(&pkg).len(), 1);
    assert!(
        r.requests_under("/mirror/streams/v1/")
            .iter()
            .all(|p| p.ends_with(".sjson")),
        "signed metadata only: {:?}",
        r.requests_under("/mirror/streams/v1/")
    );

    // Idempotent: the package is reused from the store by hash.
    let again = addon::ensure(&c.addon_inputs(), &req(None)).await.unwrap();
    assert_eq!(again.installed, Vec::<PathBuf>::new());
    assert_eq!(r.rig.server.requests_for(&pkg).len(), 1);
    // After the reboot torcx applied it: nothing to do.
    r.rig.set_running_docker("17.03.2");
    let after = addon::ensure(&c.addon_inputs(), &req(None)).await.unwrap();
    assert!(!after.reboot_needed);
}

#[test]
fn logs_name_the_serving_location_and_why_earlier_ones_did_not_serve() {
    let r = Rig::new();
    r.generate(
        &r.rig.path(LOCAL),
        &[(
            "node-bootstrap_0.2.0_flatcar_amd64".to_string(),
            b"agent".to_vec(),
        )],
        true,
    );
    let url = r.serve("mirror", &packages(), true);
    let (code, stdout, stderr) = r.cli_ensure(json!({"url": url}));
    assert_eq!(code, 0, "{stderr}");
    let out: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(out["docker_next"], "17.03.2");
    let local = r.rig.path(LOCAL).display().to_string();
    let skipped = stderr
        .lines()
        .find(|l| l.contains("location did not serve the docker package"))
        .unwrap_or_else(|| panic!("no skip line in:\n{stderr}"));
    assert!(skipped.contains(&format!("location={local}")), "{skipped}");
    assert!(skipped.contains("location_kind=\"local\""), "{skipped}");
    assert!(
        skipped.contains("no product com.node-bootstrap:docker-torcx:1632.3.0:amd64-usr"),
        "{skipped}"
    );
    let chosen = stderr
        .lines()
        .find(|l| l.contains("docker version chosen"))
        .unwrap_or_else(|| panic!("no choice line in:\n{stderr}"));
    assert!(chosen.contains("source=\"metadata\""), "{chosen}");
    assert!(chosen.contains(&format!("location={url}")), "{chosen}");
    assert!(chosen.contains("location_kind=\"url\""), "{chosen}");
    assert!(
        chosen.contains(&format!("/mirror/docker/{}", artifact("17.03.2", OS))),
        "{chosen}"
    );
}

#[tokio::test]
async fn a_local_directory_mirror_serves_too() {
    let r = Rig::new();
    let d = r.mirror_dir("dir-mirror", &packages(), true);
    let c = r.config(json!({"url": format!("file://{}", d.display())}));
    let out = addon::ensure(&c.addon_inputs(), &req(None)).await.unwrap();
    assert_eq!(out.docker_next, "17.03.2");
    assert_eq!(
        fs::read(r.rig.path(&format!("{STORE}/docker:17.03.2.torcx.tgz"))).unwrap(),
        docker_archive("17.03.2-ce")
    );
}

#[tokio::test]
async fn tampered_metadata_installs_nothing() {
    let r = Rig::new();
    let d = r.mirror_dir("mirror", &packages(), true);
    // Someone points the signed product file at their own package.
    let p = d.join("streams/v1/com.node-bootstrap-artifacts.sjson");
    let text = fs::read_to_string(&p).unwrap();
    let evil = docker_archive("17.03.2-evil");
    let good = docker_archive("17.03.2-ce");
    use sha2::Digest;
    let tampered = text.replace(
        &hex::encode(sha2::Sha512::digest(&good)),
        &hex::encode(sha2::Sha512::digest(&evil)),
    );
    assert_ne!(tampered, text);
    fs::write(&p, tampered).unwrap();
    fs::write(d.join("docker").join(artifact("17.03.2", OS)), &evil).unwrap();
    r.publish_tree("mirror", &d);
    let c = r.config(json!({"url": r.rig.server.url("/mirror")}));

    let err = addon::ensure(&c.addon_inputs(), &req(None))
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Verification, "{err}");
    let msg = err.to_string();
    assert!(msg.contains("signed metadata rejected"), "{msg}");
    assert!(
        r.requests_under("/mirror/docker/").is_empty(),
        "nothing fetched"
    );
    r.assert_untouched();
    assert!(!r.rig.exists(STORE), "no store directory either");
}

#[tokio::test]
async fn tampered_package_installs_nothing() {
    let r = Rig::new();
    let url = r.serve("mirror", &packages(), true);
    // Same size, other bytes.
    let path = format!("/mirror/docker/{}", artifact("17.03.2", OS));
    let mut bad = docker_archive("17.03.2-ce");
    let n = bad.len();
    bad[n / 2] ^= 0xff;
    r.rig.server.put(&path, bad);
    let c = r.config(json!({"url": url}));

    let err = addon::ensure(&c.addon_inputs(), &req(None))
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Verification, "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("docker 17.03.2 for OS 1632.3.0 was not installed"),
        "{msg}"
    );
    assert!(msg.contains("the metadata says"), "{msg}");
    r.assert_untouched();
    let left: Vec<String> = r.rig.files_in(STORE);
    assert!(left.is_empty(), "no partial left: {left:?}");
}

#[tokio::test]
async fn unsigned_metadata_is_refused_unless_allowed() {
    let r = Rig::new();
    let url = r.serve("mirror", &packages(), false);
    let err = addon::ensure(&r.config(json!({"url": url})).addon_inputs(), &req(None))
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::BadInput, "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("has only unsigned metadata (streams/v1/index.json), and sources.allow_unsigned does not include \"url\""),
        "{msg}"
    );
    assert!(r.requests_under("/mirror/docker/").is_empty());
    r.assert_untouched();

    let c = r.config(json!({"url": url, "allow_unsigned": ["url"]}));
    let out = addon::ensure(&c.addon_inputs(), &req(None)).await.unwrap();
    assert_eq!(out.docker_next, "17.03.2");
    assert_eq!(
        fs::read(r.rig.path(&format!("{STORE}/docker:17.03.2.torcx.tgz"))).unwrap(),
        docker_archive("17.03.2-ce")
    );
}

#[test]
fn dev_mode_wins_and_is_logged_loudly() {
    let r = Rig::new();
    let url = r.serve("mirror", &packages(), true);
    // A locally built 17.03 (unsigned, as development builds are).
    let built = docker_archive("17.03.5-dev");
    let dev = r.mirror_dir(
        "dev-out",
        &[(artifact("17.03.5", OS), built.clone())],
        false,
    );
    let (code, stdout, stderr) = r.cli_ensure(json!({"url": url, "dev_dir": dev}));
    assert_eq!(code, 0, "{stderr}");
    let out: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(out["docker_next"], "17.03.5");
    assert_eq!(
        fs::read(r.rig.path(&format!("{STORE}/docker:17.03.5.torcx.tgz"))).unwrap(),
        built
    );
    let loud: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("DEVELOPMENT MODE"))
        .collect();
    assert!(
        loud.iter().any(|l| l.contains("WARN")
            && l.contains("locally built one from sources.dev_dir")
            && l.contains(&dev.display().to_string())),
        "{stderr}"
    );
    assert!(
        r.requests_under("/mirror/docker/").is_empty(),
        "the mirror's packages are not fetched"
    );
}

#[tokio::test]
async fn pending_os_update_gets_its_own_build_and_the_running_os_keeps_one() {
    const NEXT: &str = "1688.0.0";
    let r = Rig::new();
    let mut files = packages();
    files.push((artifact("17.03.2", NEXT), docker_archive("17.03.2-ce-next")));
    let url = r.serve("mirror", &files, true);
    let c = r.config(json!({"url": url}));
    let out = addon::ensure(&c.addon_inputs(), &req(Some(NEXT)))
        .await
        .unwrap();
    assert_eq!(out.docker_next, "17.03.2");
    assert_eq!(out.os_versions, [NEXT, OS]);
    assert_eq!(
        fs::read(r.rig.path(&format!(
            "/var/lib/torcx/store/{NEXT}/docker:17.03.2.torcx.tgz"
        )))
        .unwrap(),
        docker_archive("17.03.2-ce-next")
    );
    assert_eq!(
        fs::read(r.rig.path(&format!("{STORE}/docker:17.03.2.torcx.tgz"))).unwrap(),
        docker_archive("17.03.2-ce")
    );
}

#[tokio::test]
async fn old_os_versions_get_no_remote_package() {
    let r = Rig::new();
    r.rig.set_os_version("1465.8.0");
    let url = r.serve("mirror", &packages(), true);
    let out = addon::ensure(&r.config(json!({"url": url})).addon_inputs(), &req(None))
        .await
        .unwrap();
    assert!(
        out.note
            .unwrap()
            .contains("predates remote docker packages")
    );
    assert!(!out.reboot_needed);
    assert!(r.rig.server.requests().is_empty(), "nothing asked");
}

#[tokio::test]
async fn sysext_backend_takes_the_docker_sysext_product() {
    const FLATCAR: &str = "3815.2.0";
    let r = Rig::new();
    r.rig.set_os_version(FLATCAR);
    r.rig.write(
        "/etc/kubernetes/installer/runtime-mappings.yaml",
        testkit::torcx_fixtures::runtime_mappings_yaml("1.9", &["24.0", "20.10"]),
    );
    let image = testkit::torcx_fixtures::filler("docker-24.0.9.raw", 64 * 1024);
    let url = r.serve(
        "mirror",
        &[
            (
                format!("docker-sysext_24.0.9_{FLATCAR}_{BOARD}.raw"),
                image.clone(),
            ),
            (
                format!("docker-sysext_24.0.5_{FLATCAR}_{BOARD}.raw"),
                b"older".to_vec(),
            ),
            // A torcx archive of a newer docker is not for this backend.
            (artifact("24.0.10", FLATCAR), docker_archive("24.0.10")),
        ],
        true,
    );
    let mut v = r.config_value(json!({"url": url}));
    v["addon"]["backend"] = json!("sysext");
    let c = Config::from_json(&v.to_string(), Path::new("/c.json")).unwrap();
    let out = addon::ensure(&c.addon_inputs(), &req(None)).await.unwrap();
    assert_eq!(out.docker_next, "24.0.9");
    let raw = r.rig.path("/etc/extensions/docker.raw");
    assert_eq!(fs::read(&raw).unwrap(), image);
    assert_eq!(
        fs::metadata(&raw).unwrap().permissions().mode() & 0o777,
        0o644
    );
    assert!(r.requests_under("/mirror/docker/docker-torcx").is_empty());
    // In place: nothing fetched again.
    let again = addon::ensure(&c.addon_inputs(), &req(None)).await.unwrap();
    assert!(again.installed.is_empty(), "{:?}", again.installed);
    assert_eq!(r.requests_under("/mirror/docker/").len(), 1);
}

/// A docker package mirror written by the real simplestreams tools
/// (`json2streams`: a condensed tree, so the items inherit `ftype` from
/// the product above them) and signed the way simplestreams signs (GnuPG
/// `--clearsign`, the signed index naming `.sjson` product files); the
/// node's keyring is the GnuPG key's armored export.
#[tokio::test]
async fn a_mirror_written_and_signed_by_simplestreams_serves_the_package() {
    use testkit::simplestreams as ss;
    if testkit::skip_without(ss::TOOLS) {
        return;
    }
    let r = Rig::new();
    let dir = r.work.path().join("ss-mirror");
    let mut items = Vec::new();
    for (v, data) in [
        ("1.12.6", docker_archive("1.12.6")),
        ("17.03.2", docker_archive("17.03.2-ce")),
    ] {
        let rel = format!("pool/docker-{v}.torcx.tgz");
        fs::create_dir_all(dir.join("pool")).unwrap();
        fs::write(dir.join(&rel), &data).unwrap();
        items.push(ss::item(
            "com.example:flatcar-addons",
            &format!("com.node-bootstrap:docker-torcx:{OS}:{BOARD}"),
            v,
            "docker.torcx.tgz",
            json!({"version": v, "ftype": "torcx.tgz", "path": rel, "size": data.len(),
                   "sha512": hex::encode(<sha2::Sha512 as sha2::Digest>::digest(&data))}),
        ));
    }
    ss::json2streams(&items, &dir, false).unwrap();
    let gpg = ss::Gpg::new("Addon mirror <addons@example.invalid>").unwrap();
    ss::sign_tree(&dir, &gpg).unwrap();
    r.rig.write(
        "/etc/kubernetes/installer/keyring.asc",
        gpg.export_armored().unwrap(),
    );
    r.publish_tree("ss", &dir);
    r.rig.set_running_docker("1.12.6");
    let c = r.config(json!({"url": r.rig.server.url("/ss")}));

    let out = addon::ensure(&c.addon_inputs(), &req(None)).await.unwrap();

    assert_eq!(out.docker_next, "17.03.2");
    assert!(out.reboot_needed);
    assert_eq!(
        fs::read(r.rig.path(&format!("{STORE}/docker:17.03.2.torcx.tgz"))).unwrap(),
        docker_archive("17.03.2-ce")
    );
    let fetched = r.requests_under("/ss/");
    assert!(
        fetched.contains(&"/ss/streams/v1/index.sjson".to_string())
            && fetched.contains(&"/ss/streams/v1/com.example:flatcar-addons.sjson".to_string())
            && !fetched.iter().any(|p| p.ends_with(".json")),
        "signed files only: {fetched:?}"
    );
}
