//! The [NodeConformance] specs of Kubernetes 1.20.2, each run once,
//! partitioned over the three kinds of worker the agent makes (a third
//! each, round robin in name order: testkit::conformance::partition), on
//! a cluster the agent bootstrapped (testkit::conformance::cluster). Every
//! spec a worker is given passes or is skipped there by the repository's
//! list, and nothing else runs; the list names only specs the suite has.

use testkit::conformance::{self, Plan, Suite, cluster::ConformanceCluster, skips};

#[test]
fn every_node_conformance_spec_passes_on_the_workers_the_agent_bootstraps() {
    if conformance::skip_unless_available() {
        return;
    }
    let t0 = std::time::Instant::now();
    let parts = conformance::parts().unwrap();
    let specs = conformance::list_specs(&parts).unwrap();
    let list = skips::load().unwrap();
    let stale = skips::stale(&list, &specs);
    assert!(
        stale.is_empty(),
        "the skip list names specs the suite does not have: {stale:#?}"
    );
    let cluster = ConformanceCluster::up().unwrap();
    let out = tempfile::Builder::new()
        .prefix("nb-conformance-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let suite = Suite {
        parts: &parts,
        kubectl: &cluster.rig.kubectl,
        registries: &cluster.registries,
        parallel: 6,
        out_dir: out.path().to_path_buf(),
    };
    let workers = conformance::cluster::WORKERS;
    let given = conformance::partition(&specs, workers.len(), &conformance::durations().unwrap());
    let mut runs = Vec::new();
    for ((kind, node), given) in workers.into_iter().zip(given) {
        let run = suite
            .run_on_worker(Plan::new(kind, node, given, &list), &cluster.others(kind))
            .unwrap();
        eprintln!("{}", conformance::table(std::slice::from_ref(&run)));
        runs.push(run);
    }
    // Every spec was given to exactly one worker.
    let given: usize = runs.iter().map(|r| r.counts.given).sum();
    assert_eq!(given, specs.len());
    eprintln!(
        "{} [NodeConformance] specs; cluster Ready after {:.0} s; all done after {:.0} s\n{}",
        specs.len(),
        cluster.boot_time.as_secs_f64(),
        t0.elapsed().as_secs_f64(),
        conformance::table(&runs)
    );
    if !runs.iter().all(|r| r.ok()) {
        // Keep the logs for a look.
        let kept = out.keep();
        panic!(
            "{}\n(ginkgo logs and JUnit files kept in {})",
            conformance::failures(&runs),
            kept.display()
        );
    }
}
