//! Setup's apt step on a new machine, simulated: `scripts/setup.sh
//! --apt-plan` against the package set the machine image starts with
//! (tests/fixtures/machine-image-packages.txt), then `apt-get -s install`
//! of both of its installs in order, against a dpkg database holding
//! exactly that set. A green run on a machine that already had QEMU hid
//! the new machine's failure once (the image's qemu-utils 10 from
//! bookworm-backports Breaks Debian 12's qemu-system-x86 7.2): this test
//! fails, naming the package apt complains of, when setup's backports rule
//! is gone.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::Command;

use crate::support::{root, skip_without};

/// The image's packages: (name, version).
fn image_packages() -> Vec<(String, String)> {
    let path = root().join("tests/fixtures/machine-image-packages.txt");
    let text = fs::read_to_string(&path).expect("reading the machine image's package list");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            assert_eq!(cols.len(), 3, "bad line in {}: {l}", path.display());
            (
                cols[1].split(':').next().unwrap().to_string(),
                cols[2].to_string(),
            )
        })
        .collect()
}

/// The fields of a deb822 stanza, continuation lines kept with their field.
fn fields(stanza: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in stanza.lines() {
        if line.starts_with([' ', '\t']) {
            if let Some(last) = out.last_mut() {
                last.push('\n');
                last.push_str(line);
            }
        } else if !line.is_empty() {
            out.push(line.to_string());
        }
    }
    out
}

fn field<'a>(fields: &'a [String], name: &str) -> Option<&'a str> {
    fields.iter().find_map(|f| {
        f.strip_prefix(name)
            .and_then(|r| r.strip_prefix(':'))
            .map(str::trim)
    })
}

/// What a dpkg status file needs of a package: the fields apt resolves
/// with, from apt's lists.
const KEPT: &[&str] = &[
    "Package",
    "Version",
    "Architecture",
    "Multi-Arch",
    "Maintainer",
    "Source",
    "Essential",
    "Protected",
    "Depends",
    "Pre-Depends",
    "Breaks",
    "Conflicts",
    "Provides",
    "Replaces",
];

/// apt's stanzas of `names`, by package and version.
fn stanzas(names: &[&str]) -> BTreeMap<(String, String), Vec<String>> {
    let out = Command::new("apt-cache")
        .arg("show")
        .args(names)
        .output()
        .expect("running apt-cache show");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut map = BTreeMap::new();
    for stanza in text.split("\n\n") {
        let fs = fields(stanza);
        let (Some(p), Some(v)) = (field(&fs, "Package"), field(&fs, "Version")) else {
            continue;
        };
        let kept = fs
            .iter()
            .filter(|f| KEPT.iter().any(|k| f.split(':').next() == Some(k)))
            .cloned()
            .collect();
        map.insert((p.to_string(), v.to_string()), kept);
    }
    map
}

/// Writes the dpkg status file of `installed` (name to version). A version
/// that apt's lists no longer carry (Debian 12's point releases replace
/// packages: the image's list was read on 2026-11-01) is taken at the
/// version the lists carry now, from the same origin (a `~bpo` version
/// from backports, another from Debian 12): the image as a new machine of
/// its kind would have it after the same point release. Returns how many.
fn write_status(status: &Path, installed: &BTreeMap<String, String>) -> usize {
    let names: Vec<&str> = installed.keys().map(String::as_str).collect();
    let known = stanzas(&names);
    let mut text = String::new();
    let mut moved = 0;
    for (name, version) in installed {
        let fs = known.get(&(name.clone(), version.clone())).unwrap_or_else(|| {
            moved += 1;
            let bpo = version.contains("~bpo");
            known
                .range((name.clone(), String::new())..)
                .take_while(|((n, _), _)| n == name)
                .filter(|((_, v), _)| v.contains("~bpo") == bpo)
                .max_by(|((_, a), _), ((_, b), _)| debian_version_order(a, b))
                .map(|(_, fs)| fs)
                .unwrap_or_else(|| {
                    panic!("apt's lists know no {name} like {version}: run scripts/setup.sh (apt-get update) first")
                })
        });
        text.push_str(&fs.join("\n"));
        text.push_str("\nDescription: from the machine image\nStatus: install ok installed\n\n");
    }
    fs::write(status, text).unwrap();
    moved
}

/// Debian's order of two versions (`dpkg --compare-versions`).
fn debian_version_order(a: &str, b: &str) -> std::cmp::Ordering {
    let lt = |x: &str, y: &str| {
        Command::new("dpkg")
            .args(["--compare-versions", x, "lt", y])
            .status()
            .expect("running dpkg --compare-versions")
            .success()
    };
    if lt(a, b) {
        std::cmp::Ordering::Less
    } else if lt(b, a) {
        std::cmp::Ordering::Greater
    } else {
        std::cmp::Ordering::Equal
    }
}

/// `apt-get -s install ARGS` against the dpkg database in `admin`: the
/// packages it would unpack (name, version), or apt's complaint.
fn simulate(admin: &Path, args: &[&str]) -> Result<Vec<(String, String)>, String> {
    let out = Command::new("apt-get")
        .arg("-s")
        .arg(format!(
            "-oDir::State::status={}",
            admin.join("status").display()
        ))
        .arg(format!(
            "-oDir::State::extended_states={}",
            admin.join("extended_states").display()
        ))
        .args(["install", "--no-install-recommends"])
        .args(args)
        .output()
        .expect("running apt-get -s");
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let why: Vec<&str> = stdout
            .lines()
            .chain(stderr.lines())
            .filter(|l| l.contains("Breaks:") || l.contains("Depends:") || l.starts_with("E:"))
            .collect();
        return Err(format!(
            "apt-get -s install {} failed ({}):\n{}",
            args.join(" "),
            out.status,
            why.join("\n")
        ));
    }
    Ok(stdout
        .lines()
        .filter_map(|l| l.strip_prefix("Inst "))
        .filter_map(|l| {
            let name = l.split_whitespace().next()?;
            // `Inst NAME [OLD] (NEW RELEASE [ARCH])`
            let new = l.split_once('(')?.1.split_whitespace().next()?;
            Some((name.to_string(), new.to_string()))
        })
        .collect())
}

/// The two lines of `setup.sh --apt-plan`: the Debian 12 install and the
/// backports install.
fn plan(admin: &Path) -> (Vec<String>, Vec<String>) {
    let out = Command::new("bash")
        .arg(root().join("scripts/setup.sh"))
        .arg("--apt-plan")
        .arg(admin)
        .output()
        .expect("running setup.sh --apt-plan");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "setup.sh --apt-plan failed ({}): {stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let line = |prefix: &str| -> Vec<String> {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` line in the plan:\n{stdout}"))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    (line("install:"), line("install -t bookworm-backports:"))
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn backports_known() -> bool {
    Command::new("apt-cache")
        .args(["policy"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("bookworm-backports"))
}

#[test]
fn setup_apt_step_installs_on_the_machine_images_package_set() {
    if skip_without(&["apt-get", "apt-cache", "dpkg-query"]) {
        return;
    }
    if !backports_known()
        && testkit::skip_because(
            "apt's lists do not know bookworm-backports (scripts/setup.sh adds it)",
        )
    {
        return;
    }
    let admin = tempfile::tempdir().unwrap();
    fs::write(admin.path().join("extended_states"), "").unwrap();
    let status = admin.path().join("status");
    let mut installed: BTreeMap<String, String> = image_packages().into_iter().collect();
    let moved = write_status(&status, &installed);
    eprintln!(
        "apt_plan: {} packages of the image, {moved} of them taken at the version apt's lists carry now (their image version is gone from the mirror)",
        installed.len()
    );

    let (plain, bpo) = plan(admin.path());
    // In order, as setup runs them: the first install's packages are
    // installed when the second one resolves.
    let first = simulate(admin.path(), &strs(&plain)).unwrap_or_else(|e| panic!("{e}"));
    installed.extend(first);
    write_status(&status, &installed);
    let mut second_args = vec!["-t", "bookworm-backports"];
    second_args.extend(strs(&bpo));
    let second = simulate(admin.path(), &second_args).unwrap_or_else(|e| panic!("{e}"));
    // The image's qemu-utils is from backports, so its sibling is too.
    assert!(
        bpo.iter().any(|p| p == "qemu-system-x86"),
        "qemu-system-x86 must come from bookworm-backports beside the image's qemu-utils: {bpo:?}"
    );
    assert!(
        plain.iter().any(|p| p == "etcd-server") && plain.iter().any(|p| p == "docker.io"),
        "the plan must name the Debian 12 packages a new machine lacks: {plain:?}"
    );

    assert!(
        second
            .iter()
            .any(|(n, v)| n == "qemu-system-x86" && v.contains("~bpo12")),
        "the backports install must unpack QEMU from backports: {second:?}"
    );
}
