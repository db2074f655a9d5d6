//! Least privilege, as an operator's security review measures it: the real
//! `systemd-analyze security --offline=true` (systemd's own scoring, 0 =
//! locked down, 10 = no sandbox) on every service the project ships. Each
//! unit stays under its ceiling (issue 35: the catalog and init-assets at
//! most 2.5, the agent's `run` at most 5.0; the helpers, whose scripts
//! deploy a control plane, at most 6.5; the kubelet unsandboxed on
//! purpose), scores exactly what docs/security-review.md says it scores,
//! and names beside its settings, in its "Left off, and why" comment,
//! every option the analyzer still flags: so dropping any option the
//! analyzer weighs fails here (`scripts/mutate-units.sh` removes each one
//! to see that it does), and no option is left off without its reason.
//! That the sandboxes let the programs do their work is the node and VM
//! tiers' part: they run with these units.

use std::collections::BTreeMap;

/// The ceiling of each shipped service's exposure score.
const CEILINGS: &[(&str, f64)] = &[
    ("node-bootstrap-catalog.service", 2.5),
    ("init-assets.service", 2.5),
    ("k8s-node-bootstrap.service", 5.0),
    // Issue 34's day-two services: the agent's own work, the agent's ceiling.
    ("node-bootstrap-follow.service", 5.0),
    ("node-bootstrap-follow-converge.service", 5.0),
    ("bootkube.service", 6.5),
    ("tectonic.service", 6.5),
    // No sandbox, on purpose (units/kubelet.service says why).
    ("kubelet.service", 9.6),
];

/// Services without a sandbox, on purpose (their unit says why): no
/// "Left off" list to hold them to.
const UNSANDBOXED: &[&str] = &["kubelet.service"];

/// `systemd-analyze security --offline=true <unit> [extra]`'s output.
fn analyze(unit: &std::path::Path, extra: &[&str]) -> std::process::Output {
    std::process::Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager"])
        .args(extra)
        .arg(unit)
        .output()
        .expect("running systemd-analyze")
}

/// The options the analyzer flags in a unit (a check not passed that
/// weighs in the score), by name: `PrivateNetwork`, `SystemCallFilter`, ….
fn flagged(unit: &std::path::Path) -> std::collections::BTreeSet<String> {
    let out = analyze(unit, &["--json=short"]);
    let checks: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("systemd-analyze --json of {}: {e}", unit.display()));
    checks
        .iter()
        .filter(|c| c["set"] == false && !c["exposure"].is_null())
        .map(|c| {
            let name = c["name"].as_str().expect("a check's name");
            name.split('=').next().unwrap_or(name).to_string()
        })
        .collect()
}

/// The unit's "Left off, and why" comment block.
fn left_off(text: &str) -> String {
    text.lines()
        .skip_while(|l| !l.starts_with("# Left off"))
        .take_while(|l| l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `systemd-analyze security --offline=true` of a unit file: its overall
/// exposure score.
fn exposure(unit: &std::path::Path) -> f64 {
    let out = analyze(unit, &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "systemd-analyze security {}: {}\n{text}{}",
        unit.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let line = text
        .lines()
        .find(|l| l.contains("Overall exposure level for"))
        .unwrap_or_else(|| panic!("no overall score for {}:\n{text}", unit.display()));
    let (_, score) = line
        .rsplit_once(": ")
        .expect("a score after the unit's name");
    score
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no number in {line:?}"))
}

/// The "after" column of docs/security-review.md's table of units:
/// `| `unit` | before | after | … |`.
fn documented_scores() -> BTreeMap<String, f64> {
    let doc = std::fs::read_to_string(testkit::project_root().join("docs/security-review.md"))
        .expect("docs/security-review.md");
    doc.lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let unit = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            let after = cells.get(3)?.parse().ok()?;
            unit.ends_with(".service")
                .then(|| (unit.to_string(), after))
        })
        .collect()
}

/// Every service in units/.
fn shipped_services() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(testkit::project_root().join("units"))
        .expect("units/")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".service"))
        .collect();
    names.sort();
    names
}

#[test]
fn every_shipped_service_scores_what_the_review_says_and_stays_under_its_ceiling() {
    if testkit::skip_without(&["systemd-analyze"]) {
        return;
    }
    let ceilings: BTreeMap<&str, f64> = CEILINGS.iter().copied().collect();
    let documented = documented_scores();
    let mut report = Vec::new();
    let mut wrong = Vec::new();
    for unit in shipped_services() {
        let Some(&ceiling) = ceilings.get(unit.as_str()) else {
            wrong.push(format!("{unit}: no ceiling here (a new unit gets one, and a row in docs/security-review.md)"));
            continue;
        };
        let file = testkit::unit_file(&unit);
        let score = exposure(&file);
        if !UNSANDBOXED.contains(&unit.as_str()) {
            let reasons = left_off(&std::fs::read_to_string(&file).unwrap());
            for option in flagged(&file) {
                if !reasons.contains(&format!("{option}=")) {
                    wrong.push(format!(
                        "{unit}: the analyzer flags {option}= and the unit's \"Left off, and why\" does not name it"
                    ));
                }
            }
        }
        report.push(format!("{unit}: {score:.1} (ceiling {ceiling:.1})"));
        if score > ceiling + 1e-9 {
            wrong.push(format!(
                "{unit} scores {score:.1}, above its ceiling {ceiling:.1}"
            ));
        }
        match documented.get(&unit) {
            None => wrong.push(format!("{unit}: no row in docs/security-review.md")),
            Some(d) if (d - score).abs() > 1e-9 => wrong.push(format!(
                "{unit} scores {score:.1}, docs/security-review.md says {d:.1}"
            )),
            Some(_) => {}
        }
    }
    println!("{}", report.join("\n"));
    assert!(
        wrong.is_empty(),
        "{}\n\n{}",
        wrong.join("\n"),
        report.join("\n")
    );
}
