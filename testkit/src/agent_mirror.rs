//! A signed mirror of agents served on loopback (the package server) and
//! an agent installed under a temp dir (`agent.binary`), for the `upgrade`
//! tests of the `inprocess` tier and the simulated node of the `node` tier. The agents are real
//! builds of this crate, stamped with other versions by
//! `scripts/stamp-version.sh` as a release would.

use crate::pkgserver::PkgServer;
use crate::torcx_fixtures::SigningKey;
use serde_json::{Value, json};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const ARCH: &str = "amd64";

/// The built agent, stamped `version` (the release tool), at `out`.
pub fn stamped(version: &str, out: &Path) {
    let tool = crate::project_root().join("scripts/stamp-version.sh");
    let o = Command::new(tool)
        .arg(crate::cli::agent_binary())
        .arg(out)
        .arg(version)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A node under a temp dir with the agent installed at `opt/bin`, and a
/// signed mirror on loopback.
pub struct Rig {
    pub dir: tempfile::TempDir,
    pub key: SigningKey,
    pub server: PkgServer,
}

impl Rig {
    pub fn new(installed: &str) -> Rig {
        let r = Rig {
            dir: tempfile::tempdir().unwrap(),
            key: SigningKey::generate("Agent releases <releases@example.invalid>"),
            server: PkgServer::start().unwrap(),
        };
        fs::create_dir_all(r.path("opt/bin")).unwrap();
        stamped(installed, &r.binary());
        fs::write(r.path("keyring.asc"), r.key.public_armored()).unwrap();
        r.write_config(json!({}));
        r
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn binary(&self) -> PathBuf {
        self.path("opt/bin/node-bootstrap")
    }

    pub fn previous(&self) -> PathBuf {
        self.path("opt/bin/node-bootstrap.previous")
    }

    pub fn write_config(&self, sources: Value) {
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
    pub fn publish(&self, files: &[(String, Vec<u8>)]) {
        let m = self.path("mirror");
        let _ = fs::remove_dir_all(&m);
        fs::create_dir_all(m.join("agents")).unwrap();
        for (name, data) in files {
            fs::write(m.join("agents").join(name), data).unwrap();
        }
        crate::cli::publish_mirror(
            &self.server,
            &m,
            &self.path("signing-key.asc"),
            &self.key.secret_armored(),
        )
        .unwrap();
    }

    /// Stamped agents of these versions, published.
    pub fn publish_agents(&self, versions: &[&str]) {
        let files: Vec<(String, Vec<u8>)> = versions
            .iter()
            .map(|v| (artifact(v), agent_bytes(&self.path("build"), v)))
            .collect();
        self.publish(&files);
    }

    pub fn upgrade(&self, args: &[&str]) -> Output {
        Command::new(self.binary())
            .arg("--config")
            .arg(self.path("config.json"))
            .args(["--log-format", "text", "upgrade"])
            .args(args)
            .output()
            .unwrap()
    }

    /// What `binary` says it is.
    pub fn version_of(&self, binary: &Path) -> String {
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
    pub fn leftovers(&self) -> Vec<String> {
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

pub fn artifact(version: &str) -> String {
    format!("node-bootstrap_{version}_any_{ARCH}")
}

pub fn agent_bytes(build: &Path, version: &str) -> Vec<u8> {
    fs::create_dir_all(build).unwrap();
    let p = build.join(version);
    stamped(version, &p);
    fs::read(p).unwrap()
}

pub fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "upgrade failed ({}):\n{}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
