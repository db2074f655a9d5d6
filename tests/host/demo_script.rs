//! `./scripts/demo.sh` on a machine that cannot run it: it stops at once,
//! before setup installs or builds anything, with one line saying what is
//! missing and exit code 2 (scripts/check-machine.sh). Each case runs a
//! copy of the two scripts alone in a temp dir, so a script that went on
//! would fail on the missing setup.sh instead (another exit code, other
//! lines).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A temp dir holding `scripts/demo.sh` and `scripts/check-machine.sh`
/// only, readable by every user.
fn scripts_alone() -> (tempfile::TempDir, PathBuf) {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::Builder::new()
        .prefix("nb-demo-script-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let scripts = dir.path().join("scripts");
    std::fs::create_dir(&scripts).unwrap();
    for name in ["demo.sh", "check-machine.sh"] {
        let to = scripts.join(name);
        std::fs::copy(testkit::project_root().join("scripts").join(name), &to).unwrap();
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    for d in [dir.path(), scripts.as_path()] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let demo = scripts.join("demo.sh");
    (dir, demo)
}

/// The run stopped with exit 2 and one line on stderr, nothing on stdout.
fn stopped_with_one_line(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(out.stdout.is_empty(), "{out:?}");
    stderr
}

#[test]
fn demo_sh_as_a_user_says_it_needs_root_before_anything_else() {
    if testkit::skip_unless_root("runs the script as another user (setpriv)") {
        return;
    }
    let (_dir, demo) = scripts_alone();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&demo)
        .current_dir("/")
        .output()
        .unwrap();
    let line = stopped_with_one_line(&out);
    assert!(
        line.starts_with("demo: needs root: simulated nodes are namespaces"),
        "{line}"
    );
}

#[test]
fn demo_sh_without_namespaces_for_a_node_says_so_before_anything_else() {
    if testkit::skip_unless_root("the root check comes first") {
        return;
    }
    let (dir, demo) = scripts_alone();
    // A machine where unshare is refused (a container without
    // CAP_SYS_ADMIN says exactly this).
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    stub(
        &bin.join("unshare"),
        "echo 'unshare: unshare failed: Operation not permitted' >&2; exit 1",
    );
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let out = Command::new(&demo).env("PATH", path).output().unwrap();
    let line = stopped_with_one_line(&out);
    assert!(
        line.starts_with("demo: this machine cannot give a simulated node its namespaces")
            && line.contains("unshare failed: Operation not permitted"),
        "{line}"
    );
}

#[test]
fn demo_sh_names_an_unknown_option() {
    let (_dir, demo) = scripts_alone();
    let out = Command::new(&demo).arg("--fast").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    assert!(
        stderr.trim()
            == "demo: unknown option --fast (none: today's Flatcar; --tectonic: the seed's Tectonic flow; --standins: the stand-in walk-through)",
        "{stderr}"
    );
}

fn stub(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}
