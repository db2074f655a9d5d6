//! Running the agent binary (`node-bootstrap`, built in this workspace) as
//! a child process, the way systemd or an operator would, and reading what
//! it said.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The built `node-bootstrap` binary (same profile as the running test).
pub fn agent_binary() -> PathBuf {
    crate::built_binary("node-bootstrap")
}

/// The agent as nodes run it: `node-bootstrap-static`, the static-pie
/// build `scripts/build-static.sh` makes beside [`agent_binary`] (the build
/// step of `scripts/test.sh` runs it). `None` when it is missing; panics
/// when a source of the agent (`src/`, `Cargo.toml`, `Cargo.lock`) is
/// newer than it: it would not be what the tests are about.
pub fn static_agent_binary() -> Option<PathBuf> {
    let p = agent_binary().with_file_name("node-bootstrap-static");
    if !p.exists() {
        return None;
    }
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).unwrap();
    let root = crate::project_root();
    let mut sources = crate::files::files_below(&root.join("src"));
    sources.extend([root.join("Cargo.toml"), root.join("Cargo.lock")]);
    let built = mtime(&p);
    if let Some(newer) = sources.iter().find(|s| mtime(s) > built) {
        panic!(
            "{} is older than {}: run scripts/build-static.sh",
            p.display(),
            newer.display()
        );
    }
    Some(p)
}

/// A command that runs the agent with its log on stderr at its default
/// level, whatever the test's own environment says: `RUST_LOG` and
/// `JOURNAL_STREAM` (which would send the log to journald) are removed.
/// Add the arguments (`--config`, `--log-format`, the subcommand) and
/// environment of the case at hand.
pub fn agent_command() -> Command {
    let mut c = Command::new(agent_binary());
    c.env_remove("RUST_LOG").env_remove("JOURNAL_STREAM");
    c
}

/// Publishes a mirror as an operator does: the agent's `metadata generate
/// --sign-key` writes the metadata of the files below `mirror`, signed with
/// the armored secret key (written to `key_file`, outside the mirror), and
/// `server` serves every file of it under `/mirror/`.
pub fn publish_mirror(
    server: &crate::pkgserver::PkgServer,
    mirror: &Path,
    key_file: &Path,
    secret_armored: &str,
) -> anyhow::Result<()> {
    std::fs::write(key_file, secret_armored)?;
    let out = agent_command()
        .args(["metadata", "generate"])
        .arg(mirror)
        .arg("--sign-key")
        .arg(key_file)
        .output()?;
    if !out.status.success() {
        anyhow::bail!("metadata generate failed: {}", stderr(&out));
    }
    for f in crate::files::files_below(mirror) {
        let rel = f.strip_prefix(mirror)?.display().to_string();
        server.put(&format!("/mirror/{rel}"), std::fs::read(&f)?);
    }
    Ok(())
}

/// What a process wrote on stdout, as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What a process wrote on stderr, as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The exit code, or -1 when the process was killed by a signal.
pub fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

/// stdout parsed as one JSON document (`status --json`, `assets pull`'s
/// report); panics with both streams when it is not.
pub fn json_stdout(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON on stdout ({e}): {}{}", stdout(out), stderr(out)))
}

/// The text log without its colour codes (ANSI escape sequences), so a
/// test can look for a message with its fields.
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The lines a helper's script or container printed on `stream`
/// (`stdout` or `stderr`), from the agent's JSON log (`--log-format json`)
/// on stderr: the records whose `step` field is `step` (e.g.
/// `helper/bootkube`) and whose `stream` field is `stream`.
pub fn helper_output(out: &Output, step: &str, stream: &str) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["fields"]["step"] == step && v["fields"]["stream"] == stream)
        .map(|v| v["fields"]["message"].as_str().unwrap_or("").to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn strip_ansi_keeps_the_text_and_drops_the_colours() {
        assert_eq!(
            super::strip_ansi("\x1b[2m2026\x1b[0m \x1b[32m INFO\x1b[0m a \x1b[3mk\x1b[0m=v"),
            "2026  INFO a k=v"
        );
    }
}
