//! What is inside a system extension image, and whether systemd-sysext
//! would merge it on this node, checked before the image gets its final
//! name (the kubelet's and containerd's images alike).
//!
//! [`compatible`] is systemd-sysext's own test (systemd 252,
//! `extension_release_validate`), a pure function of the host's os-release
//! and the image's `usr/lib/extension-release.d/extension-release.<name>`:
//! in the order systemd checks:
//! - `SYSEXT_SCOPE`, when set, must include `system`;
//! - `ARCHITECTURE`, when set and not `_any`, must be this machine's
//!   (systemd's names: `x86-64`, `arm64`), whatever the `ID`;
//! - the image must carry that file, with an `ID`;
//! - `ID=_any` matches every OS (no version is compared); otherwise `ID`
//!   must equal the host's;
//! - when both host and image declare `SYSEXT_LEVEL`, those must be equal;
//! - otherwise, when the host has a `VERSION_ID`, the image's must equal
//!   it; a host without one (a rolling release, or `SYSEXT_LEVEL` alone)
//!   matches on `ID`.
//!
//! `tests/host/kubelet_sysext_checks.rs` holds these rules against the real
//! systemd-sysext, case by case.
//!
//! systemd-sysext itself only logs and skips an image that fails this, and
//! merges the rest: a node would come up without its kubelet or its
//! containerd. So the agent refuses such an image before it is installed.
//!
//! [`inspect`] reads the image as systemd-sysext will: the kernel mounts it
//! (read-only, through a loop device, whatever file system it holds:
//! squashfs as the bakery builds by default, erofs, ext4, btrfs), in a
//! mount namespace of its own that no other process sees and that ends with
//! the check. It reads the release file, checks that the program the image
//! is for (`usr/bin/kubelet`, `usr/bin/containerd`) is an executable file,
//! and runs it with `--version`: the caller compares the answer with the
//! version the metadata names. Needs root, as systemd-sysext does.

use crate::error::{Error, ErrorClass, Result};
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long `<program> --version` may take.
pub const VERSION_TIMEOUT: Duration = Duration::from_secs(20);

/// This machine's architecture as systemd names it (`ARCHITECTURE=` of
/// extension-release files, and the bakery's image names).
pub fn systemd_arch() -> Option<&'static str> {
    match std::env::consts::ARCH {
        "x86_64" => Some("x86-64"),
        "aarch64" => Some("arm64"),
        _ => None,
    }
}

/// The last non-empty value of `key`.
fn get<'a>(env: &'a [(String, String)], key: &str) -> Option<&'a str> {
    env.iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
}

/// Whether systemd-sysext merges an image with release fields `ext` on a
/// host with os-release fields `host` and architecture `arch` (module
/// docs, in systemd's order); the error says why not.
pub fn compatible(
    host: &[(String, String)],
    ext: &[(String, String)],
    arch: &str,
) -> std::result::Result<(), String> {
    if let Some(scope) = get(ext, "SYSEXT_SCOPE")
        && !scope.split_whitespace().any(|s| s == "system")
    {
        return Err(format!(
            "its SYSEXT_SCOPE={scope} does not include \"system\""
        ));
    }
    if let Some(a) = get(ext, "ARCHITECTURE")
        && a != "_any"
        && a != arch
    {
        return Err(format!("it is for ARCHITECTURE={a}, this node is {arch}"));
    }
    let Some(id) = get(ext, "ID") else {
        return Err("its extension-release file has no ID".into());
    };
    if id == "_any" {
        return Ok(());
    }
    let host_id = get(host, "ID").unwrap_or("linux");
    if id != host_id {
        return Err(format!("it is for OS ID={id}, this node runs ID={host_id}"));
    }
    let host_level = get(host, "SYSEXT_LEVEL");
    match (
        host_level,
        get(ext, "SYSEXT_LEVEL"),
        get(host, "VERSION_ID"),
    ) {
        (Some(h), Some(e), _) if h != e => Err(format!(
            "it is for SYSEXT_LEVEL={e}, this node has SYSEXT_LEVEL={h}"
        )),
        (Some(_), Some(_), _) | (_, _, None) => Ok(()),
        (_, _, Some(host_version)) => {
            let host_level = host_level
                .map(|l| format!(", SYSEXT_LEVEL={l}"))
                .unwrap_or_default();
            match get(ext, "VERSION_ID") {
                None => Err(format!(
                    "it declares neither a SYSEXT_LEVEL this node has nor a VERSION_ID (this node: VERSION_ID={host_version}{host_level})"
                )),
                Some(v) if v != host_version => Err(format!(
                    "it is for VERSION_ID={v}, this node runs VERSION_ID={host_version}"
                )),
                Some(_) => Ok(()),
            }
        }
    }
}

/// What an image holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspection {
    /// The extension-release file's text.
    pub release_text: String,
    pub release: Vec<(String, String)>,
    /// What the program's `--version` printed (`Kubernetes v1.20.2`,
    /// `containerd github.com/containerd/containerd v1.7.13 …`).
    pub says: String,
}

/// Runs `<program> --version`, bounded by [`VERSION_TIMEOUT`].
pub fn run_version(program: &Path) -> std::result::Result<String, String> {
    let mut child = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {} --version: {e}", program.display()))?;
    let deadline = Instant::now() + VERSION_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{} --version did not answer within {}s",
                    program.display(),
                    VERSION_TIMEOUT.as_secs()
                ));
            }
            Err(e) => return Err(format!("waiting for {} --version: {e}", program.display())),
        }
    };
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    if !status.success() {
        return Err(format!(
            "{} --version failed ({status}): {}",
            program.display(),
            err.trim()
        ));
    }
    Ok(out.trim().to_string())
}

/// What an image must carry: its extension name, the program inside
/// (`usr/bin/kubelet`), what that program is called in messages, and
/// other files it needs (containerd's unit).
#[derive(Debug, Clone)]
pub struct Expect {
    pub name: String,
    pub program: String,
    pub what: String,
    pub requires: Vec<String>,
}

/// Mounts `image` read-only in a private mount namespace (a thread of its
/// own), reads what [`Inspection`] holds, and unmounts. `scratch` is a
/// directory for the mount point (the agent's run dir). Errors: the image
/// cannot be mounted or lacks what `expect` says (bad input); the check
/// cannot run here (internal: it needs root).
pub fn inspect(image: &Path, expect: &Expect, scratch: &Path) -> Result<Inspection> {
    let image = image.to_path_buf();
    let expect = expect.clone();
    let scratch = scratch.to_path_buf();
    std::thread::Builder::new()
        .name("sysext-inspect".into())
        .spawn(move || inspect_in_own_namespace(&image, &expect, &scratch))
        .map_err(|e| Error::internal(format!("cannot start the image check: {e}")))?
        .join()
        .map_err(|_| Error::internal("the image check panicked"))?
}

fn inspect_in_own_namespace(image: &Path, expect: &Expect, scratch: &Path) -> Result<Inspection> {
    use nix::mount::{MntFlags, MsFlags, mount, umount2};
    use nix::sched::{CloneFlags, unshare};
    let shown = image.display();
    // This thread alone gets a new mount namespace (CLONE_FS: threads share
    // their fs context, which a namespace change needs to be unshared).
    unshare(CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_FS).map_err(|e| {
        Error::internal(format!(
            "cannot look inside {shown}: no private mount namespace ({e}; the check needs root, as systemd-sysext does)"
        ))
    })?;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| Error::internal(format!("cannot make the check's mounts private: {e}")))?;
    std::fs::create_dir_all(scratch)
        .map_err(|e| Error::internal(format!("cannot create {}: {e}", scratch.display())))?;
    let dir: PathBuf = scratch.join(format!(
        ".sysext-check-{}-{:08x}",
        std::process::id(),
        fastrand::u32(..)
    ));
    std::fs::create_dir(&dir)
        .map_err(|e| Error::internal(format!("cannot create {}: {e}", dir.display())))?;
    // -n: nothing to record in /run/mount/utab for a mount no other
    // process sees (and /run is read-only in the agent's sandbox).
    let out = Command::new("mount")
        .args(["-n", "-o", "ro,nodev,nosuid,loop"])
        .arg(image)
        .arg(&dir)
        .stdin(Stdio::null())
        .output();
    let result = match out {
        Ok(o) if o.status.success() => {
            let r = read_mounted(&dir, expect, &shown.to_string());
            let _ = umount2(&dir, MntFlags::MNT_DETACH);
            r
        }
        Ok(o) => Err(Error::bad_input(format!(
            "{shown} is not an image systemd-sysext can mount: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ))),
        Err(e) => Err(Error::internal(format!(
            "cannot run mount to look inside {shown}: {e}"
        ))),
    };
    let _ = std::fs::remove_dir(&dir);
    result
}

fn read_mounted(root: &Path, expect: &Expect, shown: &str) -> Result<Inspection> {
    let Expect {
        name,
        program,
        what,
        requires,
    } = expect;
    let rel = format!("usr/lib/extension-release.d/extension-release.{name}");
    let release_text = std::fs::read_to_string(root.join(&rel)).map_err(|e| {
        Error::bad_input(format!(
            "{shown} has no /{rel} ({e}): systemd-sysext would not merge it as {name}.raw"
        ))
    })?;
    let binary = root.join(program);
    let meta = std::fs::symlink_metadata(&binary).map_err(|_| {
        Error::bad_input(format!(
            "{shown} has no /{program}: it is not a {what} image"
        ))
    })?;
    use std::os::unix::fs::PermissionsExt as _;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err(Error::bad_input(format!(
            "{shown}: /{program} is not an executable file"
        )));
    }
    if let Some(missing) = requires.iter().find(|r| !root.join(r).is_file()) {
        return Err(Error::bad_input(format!(
            "{shown} has no /{missing}: a {what} image must carry it"
        )));
    }
    let says = run_version(&binary)
        .map_err(|e| Error::new(ErrorClass::BadInput, format!("{shown}: {e}")))?;
    Ok(Inspection {
        release: crate::osrelease::parse_env(&release_text),
        release_text,
        says,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(s: &str) -> Vec<(String, String)> {
        crate::osrelease::parse_env(s)
    }

    const FLATCAR: &str = "ID=flatcar\nVERSION_ID=3815.2.0\nSYSEXT_LEVEL=1.0\n";

    fn check(host: &str, ext: &str) -> std::result::Result<(), String> {
        compatible(&env(host), &env(ext), "x86-64")
    }

    #[test]
    fn the_bakery_way_matches_by_sysext_level_whatever_the_os_version() {
        check(
            FLATCAR,
            "ID=flatcar\nSYSEXT_LEVEL=1.0\nARCHITECTURE=x86-64\n",
        )
        .unwrap();
        check(FLATCAR, "ID=_any\nARCHITECTURE=x86-64\n").unwrap();
        check(FLATCAR, "ID=_any\nSYSEXT_LEVEL=9\nVERSION_ID=1\n").unwrap();
        check(FLATCAR, "ID=flatcar\nVERSION_ID=3815.2.0\n").unwrap();
        // A host without version information matches on ID alone.
        check("ID=arch\n", "ID=arch\nVERSION_ID=1\n").unwrap();
        // A host with SYSEXT_LEVEL alone: an image without one matches on
        // ID (systemd 252 compares VERSION_ID only when the host has one).
        check(
            "ID=flatcar\nSYSEXT_LEVEL=1.0\n",
            "ID=flatcar\nVERSION_ID=7\n",
        )
        .unwrap();
    }

    #[test]
    fn another_os_release_is_refused_saying_why() {
        for (ext, why) in [
            (
                "ID=debian\nSYSEXT_LEVEL=1.0\n",
                "it is for OS ID=debian, this node runs ID=flatcar",
            ),
            (
                "ID=flatcar\nSYSEXT_LEVEL=2.0\n",
                "it is for SYSEXT_LEVEL=2.0, this node has SYSEXT_LEVEL=1.0",
            ),
            (
                "ID=flatcar\nSYSEXT_LEVEL=1.0\nARCHITECTURE=arm64\n",
                "it is for ARCHITECTURE=arm64, this node is x86-64",
            ),
            (
                "ID=flatcar\n",
                "it declares neither a SYSEXT_LEVEL this node has nor a VERSION_ID (this node: VERSION_ID=3815.2.0, SYSEXT_LEVEL=1.0)",
            ),
            (
                "VERSION_ID=3815.2.0\n",
                "its extension-release file has no ID",
            ),
            (
                "ID=flatcar\nSYSEXT_LEVEL=1.0\nSYSEXT_SCOPE=initrd portable\n",
                "its SYSEXT_SCOPE=initrd portable does not include \"system\"",
            ),
            // `_any` spares the OS comparison only, never the scope or
            // the architecture.
            (
                "ID=_any\nARCHITECTURE=arm64\n",
                "it is for ARCHITECTURE=arm64, this node is x86-64",
            ),
            (
                "ID=_any\nSYSEXT_SCOPE=initrd\n",
                "its SYSEXT_SCOPE=initrd does not include \"system\"",
            ),
        ] {
            assert_eq!(check(FLATCAR, ext), Err(why.to_string()), "{ext:?}");
        }
        // Without SYSEXT_LEVEL on the host, the OS version decides.
        assert_eq!(
            check(
                "ID=flatcar\nVERSION_ID=3815.2.0\n",
                "ID=flatcar\nSYSEXT_LEVEL=1.0\nVERSION_ID=3760.2.0\n"
            ),
            Err("it is for VERSION_ID=3760.2.0, this node runs VERSION_ID=3815.2.0".into())
        );
    }
}
