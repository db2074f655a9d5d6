//! The real simplestreams tools (Canonical's `python-simplestreams` from
//! PyPI: `sstream-query`, `sstream-mirror`, `json2streams` and the
//! `simplestreams` library) and GnuPG, so the metadata the agent writes is
//! read by the real reader and the metadata the real writers produce is read
//! by the agent. Installed by `scripts/setup.sh`.
//!
//! - [`Gpg`]: a throwaway GnuPG home with one Ed25519 signing key;
//! - [`json2streams`]: the real writer (condensed trees; `--juju-format`
//!   for Juju's agent streams), [`write_streams_uncondensed`] the same
//!   library without condensing;
//! - [`sign_tree`]: signs a tree as simplestreams' `js2signed` tool does
//!   (`util.make_signed_content_paths`, `gpg --clearsign`);
//! - [`query`] / [`mirror`]: `sstream-query --json` and `sstream-mirror`.

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// What a test of the real tools needs on `PATH`.
pub const TOOLS: &[&str] = &[
    "sstream-query",
    "sstream-mirror",
    "json2streams",
    "gpg",
    "gpgv",
    "python3",
];

fn run(mut c: Command, what: &str) -> Result<Output> {
    let out = c.output().with_context(|| format!("running {what}"))?;
    if !out.status.success() {
        bail!(
            "{what} failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(out)
}

/// A GnuPG home of its own with one signing key.
pub struct Gpg {
    home: tempfile::TempDir,
}

impl Gpg {
    /// A new home and an Ed25519 key for `uid` that signs, no passphrase.
    pub fn new(uid: &str) -> Result<Gpg> {
        let home = tempfile::Builder::new().prefix("gnupg-").tempdir()?;
        std::fs::set_permissions(
            home.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )?;
        let g = Gpg { home };
        let mut c = g.cmd();
        c.args([
            "--passphrase",
            "",
            "--quick-gen-key",
            uid,
            "ed25519",
            "sign",
            "never",
        ]);
        run(c, "gpg --quick-gen-key")?;
        Ok(g)
    }

    /// `gpg` in batch mode on this home.
    pub fn cmd(&self) -> Command {
        let mut c = Command::new("gpg");
        c.env("GNUPGHOME", self.home.path())
            .args(["--batch", "--pinentry-mode", "loopback"]);
        c
    }

    pub fn home(&self) -> &Path {
        self.home.path()
    }

    /// The public key, binary (`gpg --export`: a keyring gpgv reads).
    pub fn export_binary(&self) -> Result<Vec<u8>> {
        let mut c = self.cmd();
        c.arg("--export");
        Ok(run(c, "gpg --export")?.stdout)
    }

    /// The public key, armored (`gpg --armor --export`).
    pub fn export_armored(&self) -> Result<String> {
        let mut c = self.cmd();
        c.args(["--armor", "--export"]);
        Ok(String::from_utf8(run(c, "gpg --armor --export")?.stdout)?)
    }

    /// Imports a key (e.g. a public key made by the agent's tests, so that
    /// a keyring built here trusts it).
    pub fn import(&self, key: &[u8]) -> Result<()> {
        let tmp = self.home.path().join("import.key");
        std::fs::write(&tmp, key)?;
        let mut c = self.cmd();
        c.arg("--import").arg(&tmp);
        run(c, "gpg --import")?;
        Ok(())
    }
}

/// One entry of a `json2streams` items file: where the item goes in the
/// tree and its fields (`path`, `size`, hashes, ...).
pub fn item(content_id: &str, product: &str, version: &str, name: &str, fields: Value) -> Value {
    let mut v = json!({
        "content_id": content_id,
        "product_name": product,
        "version_name": version,
        "item_name": name,
    });
    if let (Some(o), Value::Object(f)) = (v.as_object_mut(), fields) {
        o.extend(f);
    }
    v
}

fn items_file(items: &[Value], out: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(out)?;
    let p = out.join(".items.json");
    std::fs::write(&p, serde_json::to_vec(items)?)?;
    Ok(p)
}

/// The real `json2streams` (it condenses every tree; `juju` writes Juju's
/// layout: `index2.json` with every content id, `index.json` with only
/// `com.ubuntu.juju:released:tools`, product files named after the content
/// id with `:` turned into `-`).
pub fn json2streams(items: &[Value], out: &Path, juju: bool) -> Result<()> {
    let f = items_file(items, out)?;
    let mut c = Command::new("json2streams");
    c.arg(&f).arg(out);
    if juju {
        c.arg("--juju-format");
    }
    run(c, "json2streams")?;
    std::fs::remove_file(f)?;
    Ok(())
}

/// The same writer (simplestreams' `generate_simplestreams.write_streams`)
/// with condensing off: every field on its item.
pub fn write_streams_uncondensed(items: &[Value], out: &Path) -> Result<()> {
    let f = items_file(items, out)?;
    let script = r#"
import sys
from simplestreams import util
from simplestreams.json2streams import read_items_file
from simplestreams.generate_simplestreams import items2content_trees, write_streams
items = list(read_items_file(sys.argv[1]))
trees = items2content_trees(items, {'updated': util.timestamp(), 'datatype': 'content-download'})
write_streams(sys.argv[2], trees, util.timestamp(), condense=False)
"#;
    let mut c = Command::new("python3");
    c.args(["-c", script]).arg(&f).arg(out);
    run(c, "simplestreams write_streams")?;
    std::fs::remove_file(f)?;
    Ok(())
}

/// Signs every `streams/v1/*.json` below `out` the way simplestreams'
/// `js2signed` does: an index is signed with its paths turned into the
/// `.sjson` names (`util.make_signed_content_paths`), a product file as
/// it is; each goes to `<name>.sjson` (`gpg --clearsign`).
pub fn sign_tree(out: &Path, gpg: &Gpg) -> Result<()> {
    let script = r#"
import os, sys
from simplestreams import util
top = os.path.join(sys.argv[1], 'streams', 'v1')
for name in sorted(os.listdir(top)):
    if not name.endswith('.json'):
        continue
    path = os.path.join(top, name)
    with open(path) as f:
        content = f.read()
    changed, signed_content = util.make_signed_content_paths(content)
    util.sign_content((signed_content if changed else content).encode('utf-8'),
                      outfile=util.signed_fname(path, inline=True), inline=True)
"#;
    let mut c = Command::new("python3");
    c.args(["-c", script])
        .arg(out)
        .env("GNUPGHOME", gpg.home())
        .env("SS_GPG_BATCH", "1");
    run(c, "simplestreams signing")?;
    Ok(())
}

/// `sstream-query --json URL [filters]`: the items the real client reads,
/// each with every field it inherits (`products_exdata`) and `item_url`.
/// With `keyring`, signed (`.sjson`) files are checked with gpgv.
pub fn query(url: &str, keyring: Option<&Path>, filters: &[&str]) -> Result<Vec<Value>> {
    let mut c = Command::new("sstream-query");
    c.arg("--json");
    match keyring {
        Some(k) => c.arg("--keyring").arg(k),
        None => c.arg("--no-verify"),
    };
    c.arg(url).args(filters);
    let out = run(c, &format!("sstream-query {url}"))?;
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// `sstream-mirror URL DEST`: copies the metadata and every item, checking
/// each item's checksum as it reads it. The output, whatever the result.
pub fn mirror(url: &str, dest: &Path, keyring: Option<&Path>) -> Result<Output> {
    let mut c = Command::new("sstream-mirror");
    match keyring {
        Some(k) => c.arg("--keyring").arg(k),
        None => c.arg("--no-verify"),
    };
    c.arg(url).arg(dest);
    c.output().context("running sstream-mirror")
}
