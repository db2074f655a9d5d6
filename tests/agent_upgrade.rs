//! `node-bootstrap upgrade` against a signed mirror served on loopback
//! (testkit's package server): agents are real builds of this crate,
//! stamped with other versions by `scripts/stamp-version.sh` as a release
//! would; the installed agent is a copy under a temp dir (`agent.binary`).
//! What a user checks: which version `agent.binary` runs afterwards, that
//! the previous one is kept, the exit code and message, and that nothing
//! else is left behind.

use pgp::composed::{ArmorOptions, KeyType, SecretKeyParamsBuilder, SignedSecretKey};
use serde_json::{Value, json};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use testkit::pkgserver::{Fault, PkgServer};

const ARCH: &str = "amd64";

fn new_key() -> SignedSecretKey {
    SecretKeyParamsBuilder::default()
        .key_type(KeyType::Ed25519Legacy)
        .can_certify(true)
        .can_sign(true)
        .primary_user_id("Agent releases <releases@example.invalid>".into())
        .build()
        .unwrap()
        .generate(rand::thread_rng())
        .unwrap()
}

/// The built agent, stamped `version` (the release tool), at `out`.
fn stamped(version: &str, out: &Path) {
    let tool = testkit::project_root().join("scripts/stamp-version.sh");
    let o = Command::new(tool)
        .arg(env!("CARGO_BIN_EXE_node-bootstrap"))
        .arg(out)
        .arg(version)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A node under a temp dir with the agent installed at `opt/bin`, and a
/// signed mirror on loopback.
struct Rig {
    dir: tempfile::TempDir,
    key: SignedSecretKey,
    server: PkgServer,
}

impl Rig {
    fn new(installed: &str) -> Rig {
        let r = Rig {
            dir: tempfile::tempdir().unwrap(),
            key: new_key(),
            server: PkgServer::start().unwrap(),
        };
        fs::create_dir_all(r.path("opt/bin")).unwrap();
        stamped(installed, &r.binary());
        fs::write(
            r.path("keyring.asc"),
            r.key
                .to_public_key()
                .to_armored_string(ArmorOptions::default())
                .unwrap(),
        )
        .unwrap();
        r.write_config(json!({}));
        r
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn binary(&self) -> PathBuf {
        self.path("opt/bin/node-bootstrap")
    }

    fn previous(&self) -> PathBuf {
        self.path("opt/bin/node-bootstrap.previous")
    }

    fn write_config(&self, sources: Value) {
        let mut s = json!({
            "local_dir": self.path("no-local-store"),
            "url": self.server.url("/mirror"),
            "use_default": false,
            "use_cluster_bucket": false,
            "keyring": self.path("keyring.asc"),
            "timeout_secs": 5,
            "attempts": 1,
        });
        for (k, v) in sources.as_object().unwrap() {
            s[k] = v.clone();
        }
        let config = json!({
            "paths": {"state_dir": self.path("state")},
            "agent": {"binary": self.binary(), "check_timeout_secs": 10},
            "sources": s,
        });
        fs::write(self.path("config.json"), config.to_string()).unwrap();
    }

    /// Publishes signed metadata for these files (name -> contents) under
    /// `/mirror/` on the server.
    fn publish(&self, files: &[(String, Vec<u8>)]) {
        let m = self.path("mirror");
        let _ = fs::remove_dir_all(&m);
        fs::create_dir_all(m.join("agents")).unwrap();
        for (name, data) in files {
            fs::write(m.join("agents").join(name), data).unwrap();
        }
        node_bootstrap::metadata::generate(
            &m,
            Some(&node_bootstrap::metadata::sign::Signer::from_key(
                self.key.clone(),
            )),
        )
        .unwrap();
        for e in walk(&m) {
            let rel = e.strip_prefix(&m).unwrap().display().to_string();
            self.server
                .put(&format!("/mirror/{rel}"), fs::read(&e).unwrap());
        }
    }

    /// Stamped agents of these versions, published.
    fn publish_agents(&self, versions: &[&str]) {
        let files: Vec<(String, Vec<u8>)> = versions
            .iter()
            .map(|v| (artifact(v), agent_bytes(&self.path("build"), v)))
            .collect();
        self.publish(&files);
    }

    fn upgrade(&self, args: &[&str]) -> Output {
        Command::new(self.binary())
            .arg("--config")
            .arg(self.path("config.json"))
            .args(["--log-format", "text", "upgrade"])
            .args(args)
            .output()
            .unwrap()
    }

    /// What `binary` says it is.
    fn version_of(&self, binary: &Path) -> String {
        let o = Command::new(binary)
            .args(["version", "--json"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{} does not run", binary.display());
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["arch"], ARCH);
        v["version"].as_str().unwrap().to_string()
    }

    /// The files in opt/bin besides the agent and its previous copy.
    fn leftovers(&self) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(self.path("opt/bin"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != "node-bootstrap" && n != "node-bootstrap.previous")
            .collect();
        v.sort();
        v
    }
}

fn artifact(version: &str) -> String {
    format!("node-bootstrap_{version}_any_{ARCH}")
}

fn agent_bytes(build: &Path, version: &str) -> Vec<u8> {
    fs::create_dir_all(build).unwrap();
    let p = build.join(version);
    stamped(version, &p);
    fs::read(p).unwrap()
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "upgrade failed ({}):\n{}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn upgrades_to_the_newest_of_its_major_and_keeps_the_previous() {
    let r = Rig::new("0.1.0");
    r.publish_agents(&["0.1.1", "0.3.0", "0.2.9", "1.0.0", "0.4.0-rc.1"]);
    let dry = ok(&r.upgrade(&["--dry-run", "--json"]));
    let dry: Value = serde_json::from_str(&dry).unwrap();
    assert_eq!(
        (dry["action"].clone(), dry["to"].clone()),
        (json!("would-upgrade"), json!("0.3.0"))
    );
    assert_eq!(
        r.version_of(&r.binary()),
        "0.1.0",
        "a dry run installs nothing"
    );

    let out: Value = serde_json::from_str(&ok(&r.upgrade(&["--json"]))).unwrap();
    assert_eq!(out["action"], "upgraded");
    assert_eq!(out["to"], "0.3.0", "same major, not the pre-release: {out}");
    assert_eq!(out["running"], "0.1.0");
    assert_eq!(r.version_of(&r.binary()), "0.3.0");
    assert_eq!(r.version_of(&r.previous()), "0.1.0");
    assert_eq!(r.leftovers(), Vec::<String>::new());

    // The new agent finds nothing newer of its major; 1.0.0 is out of reach.
    let o = r.upgrade(&[]);
    assert_eq!(o.status.code(), Some(7), "{}", err(&o));
    assert!(
        err(&o).contains("node-bootstrap 1.0.0 exists, but this agent (0.3.0) upgrades within its major; `node-bootstrap upgrade --major` installs 1.0.0"),
        "{}",
        err(&o)
    );
    assert_eq!(r.version_of(&r.binary()), "0.3.0");
    ok(&r.upgrade(&["--major"]));
    assert_eq!(r.version_of(&r.binary()), "1.0.0");
    assert_eq!(r.version_of(&r.previous()), "0.3.0");
}

#[test]
fn patch_stays_in_its_minor_and_downgrades_need_to() {
    let r = Rig::new("0.1.0");
    r.publish_agents(&["0.0.9", "0.1.4", "0.2.0"]);
    ok(&r.upgrade(&["--patch"]));
    assert_eq!(r.version_of(&r.binary()), "0.1.4");
    let again = ok(&r.upgrade(&["--patch"]));
    assert!(again.contains("node-bootstrap 0.1.4 is current"), "{again}");
    // Older versions are never taken without --to.
    ok(&r.upgrade(&["--to", "0.0.9"]));
    assert_eq!(r.version_of(&r.binary()), "0.0.9");
    let o = r.upgrade(&["--to", "0.0.1"]);
    assert_eq!(o.status.code(), Some(5));
    assert!(err(&o).contains("version 0.0.1; offered: "), "{}", err(&o));
}

#[test]
fn a_tampered_or_broken_agent_is_never_installed() {
    let r = Rig::new("0.1.0");
    r.publish_agents(&["0.2.0"]);
    // Corrupted on the wire: the hash check refuses it.
    r.server.fail_next(
        &format!("/mirror/agents/{}", artifact("0.2.0")),
        Fault::Corrupt(4096),
    );
    let o = r.upgrade(&[]);
    assert_eq!(o.status.code(), Some(6), "{}", err(&o));
    assert!(
        err(&o).contains("sha256 is") || err(&o).contains("sha512 is"),
        "{}",
        err(&o)
    );
    assert_eq!(r.version_of(&r.binary()), "0.1.0");
    assert!(!r.previous().exists());
    assert_eq!(r.leftovers(), Vec::<String>::new());

    // Published with its hashes, but not a program that runs here.
    r.publish(&[(artifact("0.2.0"), b"#!/bin/false\n".to_vec())]);
    let o = r.upgrade(&[]);
    assert_eq!(o.status.code(), Some(6), "{}", err(&o));
    assert!(err(&o).contains("does not run on this node"), "{}", err(&o));
    assert_eq!(r.version_of(&r.binary()), "0.1.0");
    assert_eq!(r.leftovers(), Vec::<String>::new());

    // A real agent published under the wrong version.
    let build = r.path("build");
    r.publish(&[(artifact("0.2.0"), agent_bytes(&build, "0.2.1"))]);
    let o = r.upgrade(&[]);
    assert_eq!(o.status.code(), Some(6), "{}", err(&o));
    assert!(
        err(&o).contains("says it is node-bootstrap 0.2.1 for amd64, not 0.2.0 for amd64"),
        "{}",
        err(&o)
    );
    assert_eq!(r.version_of(&r.binary()), "0.1.0");
}

#[test]
fn rollback_exchanges_the_agent_and_the_previous() {
    let r = Rig::new("0.1.0");
    let o = r.upgrade(&["--rollback"]);
    assert_eq!(
        o.status.code(),
        Some(7),
        "nothing to roll back to: {}",
        err(&o)
    );
    r.publish_agents(&["0.2.0"]);
    ok(&r.upgrade(&[]));
    let out = ok(&r.upgrade(&["--rollback"]));
    assert!(out.contains("rolled back to node-bootstrap 0.1.0"), "{out}");
    assert_eq!(r.version_of(&r.binary()), "0.1.0");
    assert_eq!(r.version_of(&r.previous()), "0.2.0");
}

#[test]
fn a_mirror_with_only_other_arches_says_so() {
    let r = Rig::new("0.1.0");
    r.publish(&[(
        "node-bootstrap_0.2.0_any_arm64".to_string(),
        b"an arm64 build".to_vec(),
    )]);
    let o = r.upgrade(&[]);
    assert_eq!(o.status.code(), Some(5), "{}", err(&o));
    assert!(
        err(&o).contains(
            "no product com.node-bootstrap:node-bootstrap:any:amd64 (it has com.node-bootstrap:node-bootstrap:any:arm64)"
        ),
        "{}",
        err(&o)
    );
}

#[test]
fn development_mode_installs_the_local_build_whatever_its_version() {
    let r = Rig::new("0.3.0");
    r.publish_agents(&["0.4.0"]);
    let dev = r.path("dev");
    fs::create_dir_all(&dev).unwrap();
    stamped("0.1.0-dev.3", &dev.join(artifact("0.1.0-dev.3")));
    node_bootstrap::metadata::generate(&dev, None).unwrap();
    r.write_config(json!({"dev_dir": dev}));
    let o = r.upgrade(&[]);
    let out = ok(&o);
    assert!(
        out.contains("node-bootstrap 0.3.0 -> 0.1.0-dev.3 installed"),
        "{out}"
    );
    assert!(
        err(&o).contains("DEVELOPMENT MODE: installing the locally built agent"),
        "{}",
        err(&o)
    );
    assert_eq!(r.version_of(&r.binary()), "0.1.0-dev.3");
}

/// kill -9 of `upgrade` at points spread over its whole run (the download
/// slowed down so some land in it): the installed name always holds an
/// agent that runs, the old one or the new one; the next run completes.
#[test]
fn kill_9_at_any_point_of_an_upgrade_leaves_a_working_agent() {
    let r = Rig::new("0.1.0");
    r.publish_agents(&["0.2.0"]);
    let path = format!("/mirror/agents/{}", artifact("0.2.0"));
    r.server.set_rate(&path, Some(40 * 1024 * 1024));
    let fresh = r.path("fresh-0.1.0");
    fs::copy(r.binary(), &fresh).unwrap();
    // How long an uninterrupted upgrade takes here.
    let t0 = Instant::now();
    ok(&r.upgrade(&[]));
    let full = t0.elapsed();
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..24u32 {
        // Start over from 0.1.0 with no previous.
        fs::copy(&fresh, r.path("opt/bin/.reset")).unwrap();
        fs::rename(r.path("opt/bin/.reset"), r.binary()).unwrap();
        let _ = fs::remove_file(r.previous());
        let delay = full.mul_f64(f64::from(i) / 20.0);
        let mut child = Command::new(r.binary())
            .arg("--config")
            .arg(r.path("config.json"))
            .args(["--log-format", "text", "upgrade"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        let _ = child.kill();
        let _ = child.wait();
        let v = r.version_of(&r.binary());
        assert!(v == "0.1.0" || v == "0.2.0", "cut {i}: {v}");
        seen.insert(v);
        for stray in r.leftovers() {
            assert!(stray.starts_with(".node-bootstrap"), "cut {i}: {stray}");
        }
        // The next run completes (and clears nothing it should keep).
        let o = r.upgrade(&[]);
        assert!(o.status.success(), "cut {i}: {}", err(&o));
        assert_eq!(r.version_of(&r.binary()), "0.2.0", "cut {i}");
        if r.previous().exists() {
            assert_eq!(r.version_of(&r.previous()), "0.1.0", "cut {i}");
        }
    }
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        ["0.1.0", "0.2.0"],
        "the cuts landed before and after the replace"
    );
}

/// On a simulated node (real systemd): `run` with `agent.upgrade: minor`
/// finds a newer agent of its major, installs it, hands over to it, and the
/// new agent completes the first boot (kubelet runs); later boots keep it.
#[test]
fn run_upgrades_the_agent_first_and_the_new_agent_completes_the_first_boot() {
    use testkit::agentnode::{AgentNode, state_journal, wait_kubelet_starts};
    if testkit::simnode::skip_unless_possible("run_upgrades_the_agent_first") {
        return;
    }
    let rig = Rig::new("0.1.0");
    rig.publish_agents(&["0.1.5", "0.2.0", "1.0.0"]);
    // The forced version is not checked against an API server; the
    // kubelet still needs a kubeconfig.
    let pki = testkit::apiserver::Pki::generate();
    let kubeconfig = pki.kubeconfig(
        "https://127.0.0.1:1",
        &testkit::apiserver::KubeAuth::ClientCert,
    );
    let mut n = AgentNode::new("agent-upgrade")
        .kubeconfig(kubeconfig)
        .config(json!({
            "agent": {"upgrade": "minor"},
            "cluster": {"forced_version": "v1.9.6+coreos.0", "check_forced_skew": false},
            "sources": {"url": rig.server.url("/mirror"), "use_default": false,
                        "use_cluster_bucket": false, "timeout_secs": 5},
        }))
        .build()
        .unwrap();
    n.write(
        "/etc/kubernetes/installer/keyring.asc",
        fs::read(rig.path("keyring.asc")).unwrap(),
        0o644,
    )
    .unwrap();
    n.boot().unwrap();
    n.wait_active_state("kubelet.service", "active", Duration::from_secs(90))
        .unwrap();
    assert_eq!(wait_kubelet_starts(&n, 1).len(), 1);
    let v = n
        .exec(&["/opt/bin/node-bootstrap", "version", "--json"])
        .unwrap();
    let v: Value = serde_json::from_slice(&v.stdout).unwrap();
    assert_eq!(v["version"], "0.2.0", "the newest 0.x, not 1.0.0");
    let previous = n
        .exec(&["/opt/bin/node-bootstrap.previous", "version"])
        .unwrap();
    assert!(String::from_utf8_lossy(&previous.stdout).contains(env!("CARGO_PKG_VERSION")));
    // Both agents ran `run` in this boot: the first upgraded, the second
    // did the rest.
    let started: Vec<String> = n
        .journal_json(&["STEP=run", "MESSAGE=node-bootstrap run started"])
        .iter()
        .map(|l| l["VERSION"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(started, [env!("CARGO_PKG_VERSION"), "0.2.0"]);
    let j = state_journal(&n).unwrap();
    assert_eq!(j["steps"]["agent-upgrade"]["result"]["to"], "0.2.0");
    assert_eq!(j["steps"]["agent-upgrade"]["result"]["action"], "upgraded");
    assert_eq!(j["steps"]["kubelet-env"]["status"], "done");
    n.shutdown().unwrap();
}
