//! `node-bootstrap upgrade` against a signed mirror of stamped real agents
//! on loopback. What a user checks: which version `agent.binary` runs
//! afterwards, that the previous one is kept, the exit code and message,
//! and that nothing else is left behind.

use serde_json::{Value, json};
use std::fs;
use std::process::Command;
use std::time::Instant;
use testkit::agent_mirror::{Rig, agent_bytes, artifact, err, ok, stamped};
use testkit::pkgserver::Fault;

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
/// agent that runs, the old one or the new one; the next run completes,
/// removes what the killed one left (its staged download, link temps) and
/// keeps the replaced agent as the previous one.
#[test]
fn kill_9_at_any_point_of_an_upgrade_leaves_a_working_agent() {
    let r = Rig::new("0.1.0");
    r.publish_agents(&["0.2.0"]);
    let path = format!("/mirror/agents/{}", artifact("0.2.0"));
    let new_size = fs::metadata(r.path("build/0.2.0")).unwrap().len();
    r.server.set_rate(&path, Some(40 * 1024 * 1024));
    let fresh = r.path("fresh-0.1.0");
    fs::copy(r.binary(), &fresh).unwrap();
    // How long an uninterrupted upgrade takes here.
    let t0 = Instant::now();
    ok(&r.upgrade(&[]));
    let full = t0.elapsed();
    let mut seen = std::collections::BTreeSet::new();
    // Cuts that left part of the new agent staged: they landed in the download.
    let mut in_download = 0;
    // Twelve cuts from the start to just past an uninterrupted upgrade's
    // length: before the download, in it, between it and the replace, after.
    const CUTS: u32 = 12;
    for i in 0..CUTS {
        // Start over from 0.1.0 with no previous.
        fs::copy(&fresh, r.path("opt/bin/.reset")).unwrap();
        fs::rename(r.path("opt/bin/.reset"), r.binary()).unwrap();
        let _ = fs::remove_file(r.previous());
        let delay = full.mul_f64(f64::from(i) / f64::from(CUTS - 2));
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
        let strays = r.leftovers();
        for stray in &strays {
            assert!(stray.starts_with(".node-bootstrap"), "cut {i}: {stray}");
        }
        if strays.iter().any(|s| {
            let staged = fs::metadata(r.path("opt/bin").join(s)).map_or(0, |m| m.len());
            s.starts_with(".node-bootstrap.tmp-") && staged > 0 && staged < new_size
        }) {
            in_download += 1;
        }
        // The next run completes and clears what the cut left.
        let o = r.upgrade(&[]);
        assert!(o.status.success(), "cut {i}: {}", err(&o));
        assert_eq!(r.version_of(&r.binary()), "0.2.0", "cut {i}");
        assert_eq!(
            r.leftovers(),
            Vec::<String>::new(),
            "cut {i}: the completing run leaves nothing behind (the cut left {strays:?})"
        );
        // 0.1.0 was replaced, by the cut run or the completing one.
        assert!(
            r.previous().exists(),
            "cut {i}: no {} after 0.1.0 was replaced",
            r.previous().display()
        );
        assert_eq!(r.version_of(&r.previous()), "0.1.0", "cut {i}");
    }
    eprintln!(
        "{in_download} of {CUTS} cuts landed in the download ({new_size} bytes; an upgrade took {full:?})"
    );
    assert!(
        in_download >= CUTS / 4,
        "only {in_download} of {CUTS} cuts left part of the new agent staged: the sweep hardly tests a cut in the download"
    );
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        ["0.1.0", "0.2.0"],
        "the cuts landed before and after the replace"
    );
}
