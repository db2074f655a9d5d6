//! Kubernetes' own node conformance suite, run against a cluster the agent
//! bootstrapped: the [NodeConformance] specs of the `e2e.test` of the
//! cluster's release (1.20.2, built by `scripts/build-e2e.sh` from the same
//! Debian source package as the kubelet), run by its vendored `ginkgo`
//! with parallel nodes, their images pulled from two local registries
//! ([`registry`]) that `KUBE_TEST_REPO_LIST` points the suite at.
//!
//! A run is pinned to one worker: every other worker carries the taint
//! [`PIN_TAINT`] (`NoSchedule`), which the suite is told does not block it
//! (`--non-blocking-taints`), so the scheduler and the suite's own node
//! choices (`GetReadySchedulableNodes` leaves tainted nodes out) put every
//! pod on the worker under test. [`Plan`] says which specs a worker gets
//! (all of them for `scripts/conformance.sh`, a third each in CI) and
//! which the repository's list skips there ([`skips`]); [`run_on_worker`]
//! runs them and reads the JUnit files back ([`report`]).
//!
//! [`cluster`] boots the cluster (a bootkube master and one worker of each
//! kind the agent makes: docker through the addon and torcx, the OS's
//! containerd, the kubelet as a sysext) and starts the registries.

pub mod cluster;
pub mod registry;
pub mod report;
pub mod skips;

use crate::kube::Kubectl;
use anyhow::{Context as _, Result, bail};
use report::{Counts, Outcome, Results};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The kinds of worker the agent makes, as the skip list names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WorkerKind {
    /// docker 20.10 through the addon (the real torcx), dockershim.
    Docker,
    /// The OS's containerd (Debian's 1.6.20), configured by the agent, CRI.
    Containerd,
    /// Today's Flatcar: the kubelet as a system extension, on containerd.
    Sysext,
    /// A QEMU machine: a real kernel, the real runc, containerd.
    Vm,
}

impl WorkerKind {
    pub const ALL: [WorkerKind; 4] = [
        WorkerKind::Docker,
        WorkerKind::Containerd,
        WorkerKind::Sysext,
        WorkerKind::Vm,
    ];

    pub fn name(self) -> &'static str {
        match self {
            WorkerKind::Docker => "docker",
            WorkerKind::Containerd => "containerd",
            WorkerKind::Sysext => "sysext",
            WorkerKind::Vm => "vm",
        }
    }

    pub fn parse(s: &str) -> Option<WorkerKind> {
        WorkerKind::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// The focus of the suite: the node's own conformance specs.
pub const FOCUS: &str = r"\[NodeConformance\]";
/// The taint that keeps a run's pods off the workers not under test.
pub const PIN_TAINT: &str = "nb-conformance/elsewhere";
/// The master's taint, which the suite must not wait on either.
pub const MASTER_TAINT: &str = "node-role.kubernetes.io/master";

/// `e2e.test`, `ginkgo` and the test images' programs of the release
/// (`scripts/build-e2e.sh`).
#[derive(Debug, Clone)]
pub struct E2eParts {
    pub dir: PathBuf,
}

impl E2eParts {
    pub fn e2e_test(&self) -> PathBuf {
        self.dir.join("e2e.test")
    }
    pub fn ginkgo(&self) -> PathBuf {
        self.dir.join("ginkgo")
    }
}

/// The suite's binaries, built (or found in the cache) once per process.
pub fn parts() -> Result<E2eParts> {
    static FOUND: std::sync::OnceLock<std::result::Result<E2eParts, String>> =
        std::sync::OnceLock::new();
    crate::once(&FOUND, || {
        Ok(E2eParts {
            dir: crate::run_build_script("build-e2e.sh")?,
        })
    })
}

/// The registries' storage (`scripts/build-e2e-images.sh`), once per process.
pub fn images() -> Result<PathBuf> {
    static FOUND: std::sync::OnceLock<std::result::Result<PathBuf, String>> =
        std::sync::OnceLock::new();
    crate::once(&FOUND, || crate::run_build_script("build-e2e-images.sh"))
}

/// Whether the suite can run here: simulated nodes and the real cluster,
/// the registry and its tools, the suite and its images (built if need be).
pub fn can_run() -> Result<()> {
    crate::simnode::can_run()?;
    crate::kube::parts()?;
    for (path, package) in [
        (registry::DOCKER_REGISTRY, "docker-registry"),
        ("/usr/bin/skopeo", "skopeo"),
        ("/usr/bin/htpasswd", "apache2-utils"),
        ("/usr/bin/curl", "curl"),
    ] {
        if !Path::new(path).exists() {
            bail!("{path} is missing (Debian's {package}; scripts/setup.sh installs it)");
        }
    }
    parts()?;
    images()?;
    Ok(())
}

/// Skips the running test unless [`can_run`] (panics under CI instead).
pub fn skip_unless_available() -> bool {
    crate::skip_unless(can_run(), "the node conformance suite cannot run here")
}

/// The suite's [NodeConformance] specs, by full name, sorted: what a dry
/// run of `e2e.test` reports (no cluster is asked).
pub fn list_specs(parts: &E2eParts) -> Result<Vec<String>> {
    let dir = tempfile::Builder::new()
        .prefix("nb-e2e-list-")
        .tempdir_in("/var/tmp")?;
    let out = Command::new(parts.e2e_test())
        .arg(format!("--ginkgo.focus={FOCUS}"))
        .args(["--ginkgo.dryRun", "--ginkgo.noColor", "--provider=skeleton"])
        .arg(format!("--report-dir={}", dir.path().display()))
        .stdin(Stdio::null())
        .output()
        .context("running e2e.test --ginkgo.dryRun")?;
    let results = Results::read_dir(dir.path()).with_context(|| {
        format!(
            "the dry run wrote no report ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .rev()
                .take(20)
                .collect::<Vec<_>>()
                .join("\n")
        )
    })?;
    let specs: Vec<String> = results
        .specs
        .iter()
        .filter(|(name, (o, _))| *o != Outcome::Skipped && name.contains("[NodeConformance]"))
        .map(|(name, _)| name.clone())
        .collect();
    anyhow::ensure!(
        !specs.is_empty(),
        "the dry run listed no [NodeConformance] spec"
    );
    Ok(specs)
}

/// A regular expression (Go's RE2) matching exactly the specs `names`.
/// Ginkgo 1 matches a focus against the suite's description, the root
/// container's text and the spec's own, joined by spaces ("Kubernetes
/// e2e suite [Top Level] [k8s.io] Pods should ..."; the JUnit names
/// leave the first two out).
pub fn exact_regex(names: &[String]) -> String {
    let alternatives: Vec<String> = names.iter().map(|n| regex_escape(n)).collect();
    format!(r"\[Top Level\] (?:{})$", alternatives.join("|"))
}

fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 2);
    for c in s.chars() {
        if r"\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A spec that takes at least this long (by [`durations`]) is a long one.
pub const LONG_SPEC_SECS: f64 = 60.0;

/// Splits `specs` over `n` workers, every spec to exactly one, each
/// worker an equal share by count (give or take one), and every long
/// spec (at least [`LONG_SPEC_SECS`] in the run of record, `durations`)
/// to the first worker: the runs are one after another, and a run lasts
/// at least as long as its longest spec (the probes' specs wait four
/// minutes whatever the node does), so the long ones run side by side in
/// one run (ginkgo's parallel nodes) and the other runs are short.
/// Otherwise in name order.
pub fn partition(
    specs: &[String],
    n: usize,
    durations: &std::collections::BTreeMap<String, f64>,
) -> Vec<Vec<String>> {
    let mut sorted = specs.to_vec();
    sorted.sort();
    let long = |s: &String| durations.get(s).is_some_and(|d| *d >= LONG_SPEC_SECS);
    let mut parts: Vec<Vec<String>> = vec![Vec::new(); n];
    parts[0] = sorted.iter().filter(|s| long(s)).cloned().collect();
    for s in sorted.into_iter().filter(|s| !long(s)) {
        let fewest = (0..n).min_by_key(|i| parts[*i].len()).expect("n > 0");
        parts[fewest].push(s);
    }
    parts
}

/// The repository's record of how long each spec took
/// (`tests/conformance/durations.txt`, `SECONDS | SPEC` a line: the
/// longest of the workers in the run of record, which
/// `scripts/conformance.sh` writes as `durations.txt` beside its report).
/// A spec it does not name counts as short.
pub fn durations() -> Result<std::collections::BTreeMap<String, f64>> {
    let p = crate::project_root().join("tests/conformance/durations.txt");
    let text = std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
    Ok(parse_durations(&text))
}

/// `SECONDS | SPEC` lines; `#` comments aside.
pub fn parse_durations(text: &str) -> std::collections::BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| {
            let (secs, spec) = l.split_once(" | ")?;
            Some((spec.trim().to_string(), secs.trim().parse().ok()?))
        })
        .collect()
}

/// The durations file of `runs`: for each spec that ran, the longest it
/// took on any worker.
pub fn durations_text(runs: &[WorkerRun]) -> String {
    let mut longest: std::collections::BTreeMap<&str, f64> = Default::default();
    for r in runs {
        for (spec, (outcome, secs)) in &r.results.specs {
            if *outcome != Outcome::Skipped {
                let d = longest.entry(spec).or_insert(0.0);
                *d = d.max(*secs);
            }
        }
    }
    let mut s = String::from(
        "# How long each [NodeConformance] spec took in the run of record (the\n\
         # longest of the workers), in seconds: `SECONDS | SPEC`. Written by\n\
         # scripts/conformance.sh (durations.txt beside its report); CI's\n\
         # partition puts the long ones in one run (testkit::conformance::partition).\n",
    );
    for (spec, secs) in longest {
        s += &format!("{secs:.1} | {spec}\n");
    }
    s
}

/// Taints every node of `others` with [`PIN_TAINT`] and clears it from
/// `to`: the next run's pods go to `to` alone.
pub fn pin(kubectl: &Kubectl, to: &str, others: &[&str]) -> Result<()> {
    for o in others {
        kubectl
            .run(&[
                "taint",
                "nodes",
                o,
                &format!("{PIN_TAINT}=:NoSchedule"),
                "--overwrite",
            ])
            .with_context(|| format!("tainting {o}"))?;
    }
    let _ = kubectl.run(&["taint", "nodes", to, &format!("{PIN_TAINT}-")]);
    Ok(())
}

/// What one worker is given: the specs to run there and those the
/// repository's list skips there (with the reasons).
#[derive(Debug, Clone)]
pub struct Plan {
    pub kind: WorkerKind,
    /// The worker's Node name.
    pub node: String,
    pub given: Vec<String>,
    pub skipped: Vec<skips::Skip>,
}

impl Plan {
    /// `given` for worker `kind` on Node `node`, less what `list` skips
    /// for that kind.
    pub fn new(kind: WorkerKind, node: &str, given: Vec<String>, list: &[skips::Skip]) -> Plan {
        let skipped: Vec<skips::Skip> = skips::for_worker(list, kind)
            .into_iter()
            .filter(|s| given.contains(&s.spec))
            .cloned()
            .collect();
        Plan {
            kind,
            node: node.to_string(),
            given,
            skipped,
        }
    }

    /// The specs that must run and pass.
    pub fn to_run(&self) -> Vec<String> {
        self.given
            .iter()
            .filter(|g| !self.skipped.iter().any(|s| &s.spec == *g))
            .cloned()
            .collect()
    }
}

/// How the suite is run: the binaries, the cluster's administrator, the
/// registries, ginkgo's parallel nodes.
pub struct Suite<'a> {
    pub parts: &'a E2eParts,
    pub kubectl: &'a Kubectl,
    pub registries: &'a registry::Registries,
    /// `ginkgo -nodes` (6: the whole suite on one worker in about 10 minutes).
    pub parallel: u32,
    /// Where each run's reports and log go.
    pub out_dir: PathBuf,
}

/// One worker's run: its plan, what each spec did, the counts, the time.
#[derive(Debug, Clone)]
pub struct WorkerRun {
    pub plan: Plan,
    pub results: Results,
    pub counts: Counts,
    pub seconds: f64,
    /// Specs that were to run and did not pass, with what they said.
    pub failures: Vec<(String, String)>,
    /// Specs that ran although not given (a focus that matched too much).
    pub unexpected: Vec<String>,
    /// The ginkgo output.
    pub log: PathBuf,
}

impl WorkerRun {
    /// Every spec given passed or was skipped by the list, nothing else
    /// ran.
    pub fn ok(&self) -> bool {
        self.failures.is_empty() && self.unexpected.is_empty()
    }
}

impl Suite<'_> {
    /// Runs `plan` on its worker, every other node of `others` tainted.
    pub fn run_on_worker(&self, plan: Plan, others: &[&str]) -> Result<WorkerRun> {
        pin(self.kubectl, &plan.node, others)?;
        let to_run = plan.to_run();
        let dir = self.out_dir.join(plan.kind.name());
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let log = dir.join("ginkgo.log");
        let t0 = Instant::now();
        if !to_run.is_empty() {
            self.ginkgo(&to_run, &dir, &log)?;
        }
        let seconds = t0.elapsed().as_secs_f64();
        let results = if to_run.is_empty() {
            Results::default()
        } else {
            Results::read_dir(&dir).with_context(|| {
                format!(
                    "the suite on {} left no report (log: {})",
                    plan.node,
                    log.display()
                )
            })?
        };
        let mut counts = Counts {
            given: plan.given.len(),
            skipped: plan.skipped.len(),
            ..Counts::default()
        };
        let mut failures = Vec::new();
        for spec in &to_run {
            match results.outcome(spec) {
                Some(Outcome::Passed) => {
                    counts.ran += 1;
                    counts.passed += 1;
                }
                Some(Outcome::Failed(msg)) => {
                    counts.ran += 1;
                    counts.failed += 1;
                    failures.push((spec.clone(), msg.clone()));
                }
                Some(Outcome::Skipped) | None => {
                    counts.failed += 1;
                    failures.push((spec.clone(), "did not run".into()));
                }
            }
        }
        let unexpected = results
            .specs
            .iter()
            .filter(|(name, (o, _))| *o != Outcome::Skipped && !to_run.contains(name))
            .map(|(name, _)| name.clone())
            .collect();
        Ok(WorkerRun {
            plan,
            results,
            counts,
            seconds,
            failures,
            unexpected,
            log,
        })
    }

    fn ginkgo(&self, specs: &[String], dir: &Path, log: &Path) -> Result<()> {
        let repo_list = self.registries.repo_list()?;
        let docker_config = self.registries.docker_config()?;
        let focus = exact_regex(specs);
        let out = std::fs::File::create(log)?;
        let status = Command::new(self.parts.ginkgo())
            .arg(format!("-nodes={}", self.parallel))
            .arg("-noColor")
            .arg(self.parts.e2e_test())
            .arg("--")
            .arg(format!(
                "--kubeconfig={}",
                self.kubectl.kubeconfig().display()
            ))
            .arg(format!("--kubectl-path={}", self.kubectl.bin().display()))
            .arg("--provider=skeleton")
            .arg(format!("--ginkgo.focus={focus}"))
            .arg(format!("--non-blocking-taints={MASTER_TAINT},{PIN_TAINT}"))
            .arg(format!("--docker-config-file={}", docker_config.display()))
            .arg(format!("--report-dir={}", dir.display()))
            .arg("--disable-log-dump")
            .env("KUBE_TEST_REPO_LIST", &repo_list)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .status()
            .context("running ginkgo")?;
        // A failed spec makes ginkgo exit non-zero: the report says which.
        let _ = status;
        Ok(())
    }
}

/// The table of a set of runs, one row per worker.
pub fn table(runs: &[WorkerRun]) -> String {
    let mut s = String::from(Counts::HEADER);
    for r in runs {
        s.push('\n');
        s.push_str(&r.counts.row(
            &format!("{} ({})", r.plan.kind.name(), r.plan.node),
            r.seconds,
        ));
    }
    s
}

/// What a set of runs failed, spec by spec, for a failure message.
pub fn failures(runs: &[WorkerRun]) -> String {
    let mut s = String::new();
    for r in runs {
        for (spec, msg) in &r.failures {
            s += &format!(
                "- {} on {}: {spec}\n    {}\n",
                r.plan.kind.name(),
                r.plan.node,
                msg.replace('\n', "\n    ")
            );
        }
        for spec in &r.unexpected {
            s += &format!(
                "- {} on {}: ran although not given: {spec}\n",
                r.plan.kind.name(),
                r.plan.node
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_gives_each_spec_to_one_worker_a_third_each_the_long_ones_together() {
        let specs: Vec<String> = (0..145).map(|i| format!("spec {i:03}")).collect();
        let durations = parse_durations(
            "# comment\n245.2 | spec 007\n60.1 | spec 100\n59.9 | spec 050\n240 | spec 144\n",
        );
        let parts = partition(&specs, 3, &durations);
        assert_eq!(parts.iter().map(Vec::len).collect::<Vec<_>>(), [49, 48, 48]);
        for long in ["spec 007", "spec 100", "spec 144"] {
            assert!(parts[0].contains(&long.to_string()), "{long}");
        }
        assert!(!parts[0].contains(&"spec 050".to_string()));
        let mut all: Vec<String> = parts.concat();
        all.sort();
        assert_eq!(all, specs);
    }

    #[test]
    fn the_focus_matches_the_names_exactly_their_brackets_escaped() {
        let r = exact_regex(&["[k8s.io] Pods should (x) [NodeConformance]".into()]);
        assert_eq!(
            r,
            r"\[Top Level\] (?:\[k8s\.io\] Pods should \(x\) \[NodeConformance\])$"
        );
    }

    #[test]
    fn a_plan_runs_what_it_was_given_less_the_lists_skips_for_its_kind() {
        let list = skips::parse("docker | b | no CAP_SYS_RESOURCE\nvm | c | why\n").unwrap();
        let p = Plan::new(
            WorkerKind::Docker,
            "w",
            vec!["a".into(), "b".into(), "c".into()],
            &list,
        );
        assert_eq!(p.to_run(), ["a", "c"]);
        assert_eq!(p.skipped.len(), 1);
    }
}
