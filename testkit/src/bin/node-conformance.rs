//! `node-conformance`: Kubernetes' own [NodeConformance] suite against a
//! cluster the agent bootstrapped on simulated nodes (a bootkube master, a
//! docker worker through the addon and torcx, a worker on the OS's
//! containerd, one with the kubelet as a sysext), pinned to each worker in
//! turn (`testkit::conformance`). `scripts/conformance.sh` runs it.
//!
//!   node-conformance [--partition] [--parallel N] [--out DIR] [--workers docker,containerd,sysext]
//!                    [--focus TEXT]...
//!
//! Without `--partition`, every worker runs the whole suite (the run of
//! record); with it, the specs are split over the workers, a third each
//! (what CI runs). Prints a table per run, one row per worker (specs
//! given, ran, passed, skipped by the repository's list, failed), then
//! every failure; writes `report.md` and each worker's ginkgo log and
//! JUnit files under `--out`. `--focus TEXT` (may repeat) keeps only the
//! specs whose names contain one of the TEXTs: to look at a few specs
//! again, or to watch them fail on a rig broken on purpose; a run of
//! record never has it (the report says when it had). Exit 0 when every spec given passed or was
//! skipped by the list, 1 when any failed, 2 on a bad argument, 3 when
//! the rig could not run it.

use std::time::Instant;
use testkit::conformance::{self, Plan, Suite, WorkerKind, cluster::ConformanceCluster, skips};

struct Args {
    partition: bool,
    parallel: u32,
    out: std::path::PathBuf,
    workers: Vec<WorkerKind>,
    focus: Vec<String>,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        partition: false,
        parallel: 6,
        out: std::path::PathBuf::from("target/conformance"),
        workers: vec![
            WorkerKind::Docker,
            WorkerKind::Containerd,
            WorkerKind::Sysext,
        ],
        focus: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--partition" => a.partition = true,
            "--parallel" => {
                a.parallel = value()?.parse().map_err(|e| format!("--parallel: {e}"))?
            }
            "--out" => a.out = value()?.into(),
            "--focus" => a.focus.push(value()?),
            "--workers" => {
                a.workers = value()?
                    .split(',')
                    .map(|w| {
                        WorkerKind::parse(w)
                            .filter(|k| *k != WorkerKind::Vm)
                            .ok_or(format!(
                                "--workers: no simulated worker {w:?} (docker, containerd, sysext)"
                            ))
                    })
                    .collect::<Result<_, _>>()?
            }
            "-h" | "--help" => {
                println!(
                    "usage: node-conformance [--partition] [--parallel N] [--out DIR] [--workers docker,containerd,sysext] [--focus TEXT]..."
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(a)
}

fn main() {
    let a = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("node-conformance: {e}");
            std::process::exit(2);
        }
    };
    match run(&a) {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("node-conformance: {e:#}");
            std::process::exit(3);
        }
    }
}

fn run(a: &Args) -> anyhow::Result<bool> {
    let t0 = Instant::now();
    conformance::can_run()?;
    let parts = conformance::parts()?;
    let all = conformance::list_specs(&parts)?;
    let list = skips::load()?;
    let stale = skips::stale(&list, &all);
    anyhow::ensure!(
        stale.is_empty(),
        "the skip list names specs the suite does not have: {:?}",
        stale.iter().map(|s| &s.spec).collect::<Vec<_>>()
    );
    let specs: Vec<String> = all
        .iter()
        .filter(|s| a.focus.is_empty() || a.focus.iter().any(|f| s.contains(f.as_str())))
        .cloned()
        .collect();
    anyhow::ensure!(
        !specs.is_empty(),
        "--focus {:?}: no [NodeConformance] spec's name contains it",
        a.focus
    );
    eprintln!(
        "node-conformance: {} [NodeConformance] specs{}; {} entries in {}",
        specs.len(),
        if a.focus.is_empty() {
            String::new()
        } else {
            format!(" (of {}: --focus {:?})", all.len(), a.focus)
        },
        list.len(),
        skips::path().display()
    );
    let cluster = ConformanceCluster::up()?;
    eprintln!(
        "node-conformance: the cluster is Ready after {:.0} s",
        cluster.boot_time.as_secs_f64()
    );
    std::fs::create_dir_all(&a.out)?;
    let suite = Suite {
        parts: &parts,
        kubectl: &cluster.rig.kubectl,
        registries: &cluster.registries,
        parallel: a.parallel,
        out_dir: a.out.clone(),
    };
    let given = if a.partition {
        conformance::partition(&specs, a.workers.len(), &conformance::durations()?)
    } else {
        vec![specs.clone(); a.workers.len()]
    };
    let mut runs = Vec::new();
    for (kind, given) in a.workers.iter().zip(given) {
        let node = conformance::cluster::WORKERS
            .iter()
            .find(|(k, _)| k == kind)
            .map(|(_, n)| *n)
            .expect("a simulated worker");
        let others: Vec<&str> = cluster.others(*kind);
        let plan = Plan::new(*kind, node, given, &list);
        eprintln!(
            "node-conformance: {} specs on {} ({node}), {} skipped by the list ...",
            plan.to_run().len(),
            kind.name(),
            plan.skipped.len()
        );
        let run = suite.run_on_worker(plan, &others)?;
        eprintln!("{}", conformance::table(std::slice::from_ref(&run)));
        runs.push(run);
    }
    let table = conformance::table(&runs);
    let failures = conformance::failures(&runs);
    let report = format!(
        "# Node conformance: Kubernetes {} [NodeConformance], {}\n\n{} specs{}; cluster Ready in {:.0} s; \
         whole run {:.0} s; ginkgo -nodes={}\n\n{table}\n\n{}\n",
        cluster.rig.parts.version,
        if a.partition {
            "partitioned over the workers"
        } else {
            "the whole suite on each worker"
        },
        specs.len(),
        if a.focus.is_empty() {
            String::new()
        } else {
            format!(" of {}, only those --focus {:?} kept", all.len(), a.focus)
        },
        cluster.boot_time.as_secs_f64(),
        t0.elapsed().as_secs_f64(),
        a.parallel,
        if failures.is_empty() {
            "No failures.".to_string()
        } else {
            format!("Failures:\n{failures}")
        }
    );
    std::fs::write(a.out.join("report.md"), &report)?;
    std::fs::write(
        a.out.join("durations.txt"),
        conformance::durations_text(&runs),
    )?;
    println!("{report}");
    Ok(runs.iter().all(|r| r.ok()))
}
