//! Artifact metadata against Canonical's real simplestreams tools, both
//! ways (docs/formats.md):
//! - what `metadata generate` writes, unsigned and signed, is read by
//!   `sstream-query` and mirrored by `sstream-mirror` (checksums and
//!   signatures checked by the real client, gpgv with a binary keyring);
//! - what the real writers produce (`json2streams`: condensed trees, Juju's
//!   agent streams; simplestreams' writer uncondensed; signed the way
//!   simplestreams signs with GnuPG) is read by `metadata validate` and
//!   `metadata find`, with armored and binary keyrings.

use pgp::composed::ArmorOptions;
use pgp::ser::Serialize as _;
use serde_json::{Value, json};
use sha2::{Digest, Sha256, Sha512};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use testkit::simplestreams::{self as ss, Gpg};
use testkit::torcx_fixtures::secret_key;

const SERIES: &str = "1632.3.0";
const BOARD: &str = "amd64-usr";

fn skip() -> bool {
    testkit::skip_without(ss::TOOLS)
}

fn agent(args: &[&str]) -> Output {
    testkit::cli::agent_command()
        .args(["--log-format", "text"])
        .args(args)
        .output()
        .unwrap()
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "node-bootstrap failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Artifacts named for `metadata generate`, with contents of their own.
fn artifacts(dir: &Path, names: &[&str]) -> Vec<(String, Vec<u8>)> {
    names
        .iter()
        .map(|n| {
            let data = format!("contents of {n}\n").repeat(100).into_bytes();
            let p = dir.join("pkgs").join(n);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(&p, &data).unwrap();
            (n.to_string(), data)
        })
        .collect()
}

fn url_of(dir: &Path, rel: &str) -> String {
    format!("file://{}/{rel}", dir.display())
}

const OURS: &[&str] = &[
    "docker-torcx_17.03.2_1632.3.0_amd64-usr.torcx.tgz",
    "docker-torcx_1.12.6_1632.3.0_amd64-usr.torcx.tgz",
    "node-bootstrap_0.9.0_any_amd64",
    "node-bootstrap_0.10.0_any_amd64",
];

/// The items `sstream-query` read, by item name.
fn by_name(items: &[Value]) -> std::collections::BTreeMap<String, Value> {
    items
        .iter()
        .map(|i| (i["item_name"].as_str().unwrap().to_string(), i.clone()))
        .collect()
}

fn assert_client_read_our_items(items: &[Value], files: &[(String, Vec<u8>)]) {
    let got = by_name(items);
    assert_eq!(got.len(), files.len(), "{items:#?}");
    for (name, data) in files {
        let i = &got[name];
        assert_eq!(i["sha256"], hex::encode(Sha256::digest(data)), "{name}");
        assert_eq!(i["sha512"], hex::encode(Sha512::digest(data)), "{name}");
        assert_eq!(i["size"], data.len().to_string().as_str(), "{name}");
        assert_eq!(i["path"], format!("pkgs/{name}"));
        let url = i["item_url"].as_str().unwrap();
        assert_eq!(
            fs::read(url.strip_prefix("file://").unwrap()).unwrap(),
            *data
        );
    }
    let agent = &got["node-bootstrap_0.10.0_any_amd64"];
    assert_eq!(
        agent["product_name"],
        "com.node-bootstrap:node-bootstrap:any:amd64"
    );
    assert_eq!(agent["version"], "0.10.0");
    assert_eq!(agent["arch"], "amd64");
}

#[test]
fn generated_metadata_is_read_and_mirrored_by_the_real_client_unsigned_and_signed() {
    if skip() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let mirror = d.path().join("mirror");
    let files = artifacts(&mirror, OURS);

    // Unsigned.
    node_bootstrap::metadata::generate(&mirror, None).unwrap();
    let items = ss::query(&url_of(&mirror, "streams/v1/index.json"), None, &[]).unwrap();
    assert_client_read_our_items(&items, &files);
    // `updated` is what simplestreams writes and parses (RFC 2822).
    let index: Value =
        serde_json::from_slice(&fs::read(mirror.join("streams/v1/index.json")).unwrap()).unwrap();
    let updated = index["updated"].as_str().unwrap();
    let o = Command::new("python3")
        .args([
            "-c",
            "import sys,time; time.strptime(sys.argv[1], '%a, %d %b %Y %H:%M:%S +0000')",
            updated,
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "updated {updated:?} is not RFC 2822");

    // Signed with the agent's signer; the real client checks every file
    // with gpgv against a binary keyring (`gpg --export` form).
    let key = secret_key("Mirror signing <mirror@example.invalid>");
    node_bootstrap::metadata::generate(
        &mirror,
        Some(&node_bootstrap::metadata::sign::Signer::from_key(
            key.clone(),
        )),
    )
    .unwrap();
    let keyring = d.path().join("keyring.gpg");
    fs::write(&keyring, key.to_public_key().to_bytes().unwrap()).unwrap();
    let signed_index = url_of(&mirror, "streams/v1/index.sjson");
    let items = ss::query(&signed_index, Some(&keyring), &[]).unwrap();
    assert_client_read_our_items(&items, &files);

    // Mirrored by the real client: each item read through its checksum.
    let copy = d.path().join("copy");
    let out = ss::mirror(&signed_index, &copy, Some(&keyring)).unwrap();
    assert!(
        out.status.success(),
        "sstream-mirror: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (name, data) in &files {
        assert_eq!(fs::read(copy.join("pkgs").join(name)).unwrap(), *data);
    }
    // ... and the copy is a mirror the agent validates.
    let armored = d.path().join("keyring.asc");
    fs::write(
        &armored,
        key.to_public_key()
            .to_armored_string(ArmorOptions::default())
            .unwrap(),
    )
    .unwrap();
    let report = ok(agent(&[
        "metadata",
        "validate",
        "--json",
        "--keyring",
        armored.to_str().unwrap(),
        copy.to_str().unwrap(),
    ]));
    assert!(report.contains(r#""signed":true"#), "{report}");

    // An artifact corrupted on the mirror (same size, other bytes) stops
    // the real client's mirror at that item's checksum.
    let corrupted = mirror.join("pkgs").join(OURS[0]);
    let mut bytes = fs::read(&corrupted).unwrap();
    bytes[100] ^= 0xff;
    fs::write(&corrupted, &bytes).unwrap();
    let out = ss::mirror(&signed_index, &d.path().join("copy2"), Some(&keyring)).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a corrupted item was mirrored");
    assert!(
        stderr.contains(&format!(
            "InvalidChecksum: Invalid sha512 Checksum at {}",
            url_of(&mirror, &format!("pkgs/{}", OURS[0]))
        )),
        "sstream-mirror failed, but not on the corrupted item's checksum:\n{stderr}"
    );
    // A tampered signed product file (the index it is read through is
    // untouched) is refused by the real client: gpgv finds its signature
    // bad (what the client logs at debug level).
    let products = mirror.join("streams/v1/com.node-bootstrap-artifacts.sjson");
    let text = fs::read_to_string(&products).unwrap();
    fs::write(&products, text.replacen("0.10.0", "0.10.1", 1)).unwrap();
    let out = Command::new("sstream-query")
        .args(["-vv", "--json", "--keyring"])
        .arg(&keyring)
        .arg(&signed_index)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a tampered product file was read");
    assert!(
        stderr.contains("gpgv: BAD signature from \"Mirror signing <mirror@example.invalid>\""),
        "sstream-query failed, but not on the tampered file's signature:\n{stderr}"
    );
}

/// A config whose only location is `dir` (unsigned allowed there unless a
/// keyring is given).
fn config_for(dir: &Path, work: &Path, keyring: Option<&Path>) -> PathBuf {
    let mut sources = json!({
        "local_dir": work.join("no-local"),
        "url": format!("file://{}", dir.display()),
        "use_default": false,
        "use_cluster_bucket": false,
        "keyring": keyring.map(Path::to_path_buf).unwrap_or_else(|| work.join("no-keyring.asc")),
    });
    if keyring.is_none() {
        sources["allow_unsigned"] = json!(["url"]);
    }
    let p = work.join(format!("config-{}.json", fastrand::u32(..)));
    fs::write(&p, json!({"sources": sources}).to_string()).unwrap();
    p
}

/// `json2streams` items for docker torcx packages of our product scheme.
fn docker_items(dir: &Path) -> Vec<Value> {
    ["1.12.6", "17.03.1", "17.03.2"]
        .iter()
        .map(|v| {
            let rel = format!("docker/{v}/docker.torcx.tgz");
            let data = format!("docker {v} torcx image\n").repeat(50).into_bytes();
            fs::create_dir_all(dir.join(&rel).parent().unwrap()).unwrap();
            fs::write(dir.join(&rel), &data).unwrap();
            ss::item(
                "com.example:docker",
                &format!("com.node-bootstrap:docker-torcx:{SERIES}:{BOARD}"),
                v,
                "docker.torcx.tgz",
                json!({"version": v, "ftype": "torcx.tgz", "arch": BOARD, "release": SERIES,
                       "path": rel, "size": data.len(),
                       "sha256": hex::encode(Sha256::digest(&data)),
                       "sha512": hex::encode(Sha512::digest(&data))}),
            )
        })
        .collect()
}

fn validate(location: &Path, config: &Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "--config",
        config.to_str().unwrap(),
        "metadata",
        "validate",
        "--json",
    ];
    args.extend_from_slice(extra);
    args.push(location.to_str().unwrap());
    serde_json::from_str(&ok(agent(&args))).unwrap()
}

#[test]
fn condensed_and_plain_trees_written_by_simplestreams_are_read_by_the_agent() {
    if skip() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    for condensed in [true, false] {
        let dir = work
            .path()
            .join(if condensed { "condensed" } else { "plain" });
        let items = docker_items(&dir);
        if condensed {
            ss::json2streams(&items, &dir, false).unwrap();
            // The writer really moved fields off the items.
            let tree: Value = serde_json::from_slice(
                &fs::read(dir.join("streams/v1/com.example:docker.json")).unwrap(),
            )
            .unwrap();
            let product =
                &tree["products"][format!("com.node-bootstrap:docker-torcx:{SERIES}:{BOARD}")];
            assert_eq!(product["ftype"], "torcx.tgz", "{tree:#}");
            assert!(
                product["versions"]["17.03.2"]["items"]["docker.torcx.tgz"]
                    .get("ftype")
                    .is_none()
            );
        } else {
            ss::write_streams_uncondensed(&items, &dir).unwrap();
        }
        let config = config_for(&dir, work.path(), None);
        let report = validate(&dir, &config, &["--allow-unsigned"]);
        assert_eq!(report["items"], 3, "{report:#}");
        assert_eq!(report["problems"], json!([]), "{report:#}");

        let fetched = work.path().join("fetched.tgz");
        let found: Value = serde_json::from_str(&ok(agent(&[
            "--config",
            config.to_str().unwrap(),
            "metadata",
            "find",
            "--name",
            "docker-torcx",
            "--series",
            SERIES,
            "--arch",
            BOARD,
            "--major",
            "17",
            "--fetch",
            fetched.to_str().unwrap(),
            "--json",
        ])))
        .unwrap();
        assert_eq!(found["version"], "17.03.2", "{found:#}");
        assert_eq!(found["item"]["ftype"], "torcx.tgz", "inherited: {found:#}");
        assert_eq!(
            fs::read(&fetched).unwrap(),
            fs::read(dir.join("docker/17.03.2/docker.torcx.tgz")).unwrap()
        );
    }
}

/// A Juju agent stream as `json2streams --juju-format` writes it: products
/// `com.ubuntu.juju:<series version>:<arch>` without a `name`, version
/// names that are dates, the agent version on the items.
fn juju_items(dir: &Path) -> Vec<Value> {
    [
        ("16.04", "xenial", "20180101", "2.4.9"),
        ("16.04", "xenial", "20190110", "2.5.0"),
        ("16.04", "xenial", "20190301", "3.0.0"),
        ("18.04", "bionic", "20190110", "2.5.0"),
    ]
    .iter()
    .map(|(series, release, date, v)| {
        let rel = format!("agent/{v}/juju-{v}-{release}-amd64.tgz");
        let data = format!("juju agent {v} for {release}\n")
            .repeat(40)
            .into_bytes();
        fs::create_dir_all(dir.join(&rel).parent().unwrap()).unwrap();
        fs::write(dir.join(&rel), &data).unwrap();
        ss::item(
            "com.ubuntu.juju:released:tools",
            &format!("com.ubuntu.juju:{series}:amd64"),
            date,
            &format!("{v}-{release}-amd64"),
            json!({"release": release, "version": v, "arch": "amd64", "ftype": "tar.gz",
                   "path": rel, "size": data.len(),
                   "sha256": hex::encode(Sha256::digest(&data))}),
        )
    })
    .collect()
}

#[test]
fn juju_agent_streams_are_found_by_full_product_id_signed_with_either_keyring() {
    if skip() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("juju");
    let items = juju_items(&dir);
    ss::json2streams(&items, &dir, true).unwrap();
    assert!(dir.join("streams/v1/index2.json").exists(), "juju layout");

    let find = |config: &Path| -> Value {
        let fetched = work.path().join("agent.tgz");
        let v = serde_json::from_str(&ok(agent(&[
            "--config",
            config.to_str().unwrap(),
            "metadata",
            "find",
            "--product-id",
            "com.ubuntu.juju:16.04:amd64",
            "--major",
            "2",
            "--fetch",
            fetched.to_str().unwrap(),
            "--json",
        ])))
        .unwrap();
        assert_eq!(
            fs::read(&fetched).unwrap(),
            fs::read(dir.join("agent/2.5.0/juju-2.5.0-xenial-amd64.tgz")).unwrap()
        );
        v
    };
    let unsigned = config_for(&dir, work.path(), None);
    let found = find(&unsigned);
    assert_eq!(
        found["version"], "2.5.0",
        "largest 2.x, not 3.0.0: {found:#}"
    );
    assert_eq!(found["version_name"], "20190110");
    assert_eq!(found["signed"], false);
    let report = validate(&dir, &unsigned, &["--allow-unsigned"]);
    assert_eq!(
        (report["products"].clone(), report["items"].clone()),
        (json!(2), json!(4))
    );
    assert_eq!(report["problems"], json!([]), "{report:#}");

    // Signed the way simplestreams signs; the agent reads the signed index
    // with the key armored and binary.
    let gpg = Gpg::new("Juju streams <streams@example.invalid>").unwrap();
    ss::sign_tree(&dir, &gpg).unwrap();
    let index: String = fs::read_to_string(dir.join("streams/v1/index.sjson")).unwrap();
    assert!(
        index.contains("com.ubuntu.juju-released-tools.sjson"),
        "{index}"
    );
    for (name, key) in [
        ("keyring.asc", gpg.export_armored().unwrap().into_bytes()),
        ("keyring.gpg", gpg.export_binary().unwrap()),
    ] {
        let k = work.path().join(name);
        fs::write(&k, key).unwrap();
        let signed = config_for(&dir, work.path(), Some(&k));
        let found = find(&signed);
        assert_eq!(found["signed"], true, "{name}: {found:#}");
        assert_eq!(validate(&dir, &signed, &[])["signed"], true, "{name}");
    }
    // The real client agrees the tree verifies.
    let kr = work.path().join("keyring.gpg");
    let read = ss::query(&url_of(&dir, "streams/v1/index.sjson"), Some(&kr), &[]).unwrap();
    assert_eq!(read.len(), 4);
}

#[test]
fn md5_only_items_are_refused_by_name() {
    if skip() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("md5");
    fs::create_dir_all(dir.join("a")).unwrap();
    fs::write(dir.join("a/agent"), b"agent").unwrap();
    let items = vec![ss::item(
        "com.example:old",
        "com.node-bootstrap:node-bootstrap:any:amd64",
        "0.3.0",
        "agent",
        json!({"version": "0.3.0", "path": "a/agent", "size": 5,
               "md5": "a73d5d0b0c15b7ecab6dd4c1fed5fe69"}),
    )];
    ss::json2streams(&items, &dir, false).unwrap();
    let config = config_for(&dir, work.path(), None);
    let out = agent(&[
        "--config",
        config.to_str().unwrap(),
        "metadata",
        "find",
        "--name",
        "node-bootstrap",
        "--series",
        "any",
        "--arch",
        "amd64",
    ]);
    assert_eq!(out.status.code(), Some(5));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("item agent has only an md5 checksum, which is not accepted"),
        "{err}"
    );
}
