//! `nb-bench`: the measuring harness behind `bench/run.sh` and
//! `bench/soak.sh` (not a test: it prints numbers, the script prints the
//! table). Each subcommand prints `ROW\t…` lines (see
//! `testkit::bench_report`) on stdout and progress on stderr.
//!
//! ```text
//! nb-bench critical-path --agent BIN [--runs N]
//! nb-bench fleet --agent BIN [--nodes N]
//! ```

use anyhow::{Context as _, Result, bail};
use std::path::PathBuf;
use std::time::Duration;
use testkit::bench_agentnode::{self as an, AgentNodeSpec, UpdateEngineUnit};
use testkit::bench_report::{Row, median};

struct Args {
    cmd: String,
    agent: Option<PathBuf>,
    runs: usize,
    nodes: usize,
}

fn parse() -> Result<Args> {
    let mut it = std::env::args().skip(1);
    let cmd = it
        .next()
        .context("usage: nb-bench <critical-path> [options]")?;
    let mut a = Args {
        cmd,
        agent: None,
        runs: 5,
        nodes: 300,
    };
    while let Some(flag) = it.next() {
        let mut val = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--agent" => a.agent = Some(val()?.into()),
            "--runs" => a.runs = val()?.parse().context("--runs")?,
            "--nodes" => a.nodes = val()?.parse().context("--nodes")?,
            other => bail!("unknown argument {other:?}"),
        }
    }
    Ok(a)
}

/// Directory of this binary: the other workspace binaries live beside it.
fn sibling(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let p = exe.parent().context("exe dir")?.join(name);
    if !p.exists() {
        bail!("{} is not built (cargo build -p testkit)", p.display());
    }
    Ok(p)
}

fn main() -> Result<()> {
    let args = parse()?;
    testkit::simnode::can_run().context("the benchmarks boot simulated nodes")?;
    match args.cmd.as_str() {
        "critical-path" => critical_path(&args),
        "fleet" => fleet(&args),
        other => bail!("unknown command {other:?}"),
    }
}

const T: Duration = Duration::from_secs(60);

/// Boots a node, waits for kubelet to be active, returns the critical path in µs.
fn measure(mut n: testkit::simnode::SimNode) -> Result<u64> {
    n.boot()?;
    n.wait_active_state("kubelet.service", "active", T)?;
    let us = an::critical_path_us(&n)?;
    if std::env::var_os("NB_BENCH_VERBOSE").is_some() {
        let out = n.exec(&[
            "journalctl",
            "--no-pager",
            "-o",
            "short-monotonic",
            "-u",
            "k8s-node-bootstrap.service",
            "-u",
            "kubelet.service",
            "-u",
            "update-engine.service",
        ])?;
        eprintln!("{}", String::from_utf8_lossy(&out.stdout));
    }
    n.shutdown()?;
    Ok(us)
}

fn critical_path(args: &Args) -> Result<()> {
    let agent = args
        .agent
        .clone()
        .context("critical-path needs --agent <node-bootstrap binary>")?;
    let pki = testkit::apiserver::Pki::generate();
    // Not asked (forced version, skew check off); preflight parses it.
    let kubeconfig = pki.kubeconfig(
        "https://127.0.0.1:1",
        &testkit::apiserver::KubeAuth::ClientCert,
    );
    let config = serde_json::json!({
        "role": "worker",
        "paths": {"os_release": an::OS_RELEASE_PATH},
        "cluster": {"forced_version": "v1.9.6+coreos.0", "check_forced_skew": false},
        "os_update": {"enabled": false},
        "addon": {"enabled": false},
    })
    .to_string();
    let ue = UpdateEngineUnit {
        binary: sibling("fake-update-engine")?,
        args: vec!["--scenario".into(), "no-update".into()],
    };
    let mut ours = Vec::new();
    let mut floor = Vec::new();
    // Alternate, so both see the same host load; one warm-up of each first.
    for i in 0..=args.runs {
        let mut spec = AgentNodeSpec::new(&format!("cp-agent-{i}"), &agent, config.clone());
        spec.kubeconfig = Some(kubeconfig.clone());
        spec.update_engine = Some(ue.clone());
        let a = measure(an::agent_node(&spec)?)?;
        let f = measure(an::floor_node(&format!("cp-floor-{i}"))?)?;
        eprintln!(
            "critical-path run {i}{}: agent {:.1} ms, floor {:.1} ms",
            if i == 0 { " (warm-up)" } else { "" },
            a as f64 / 1000.0,
            f as f64 / 1000.0
        );
        if i > 0 {
            ours.push(a as f64 / 1000.0);
            floor.push(f as f64 / 1000.0);
        }
    }
    let (o, f) = (median(&ours), median(&floor));
    let ratio = o / f;
    println!(
        "{}",
        Row {
            name: format!("critical path to kubelet, ms (median of {})", ours.len()),
            ours: format!("{o:.1}"),
            theirs: format!("{f:.1}"),
            theirs_label: "no-op agent".into(),
            ratio: format!("{ratio:.2}x"),
            target: "< 1.5x".into(),
            met: ratio < 1.5,
        }
        .line()
    );
    println!("DATA\tcritical_path_ms\t{o:.1}");
    Ok(())
}

fn fleet(args: &Args) -> Result<()> {
    use testkit::bench_fleet::{FleetFault, FleetOptions, run_fleet};
    let agent = args
        .agent
        .clone()
        .context("fleet needs --agent <node-bootstrap binary>")?;
    let o = FleetOptions {
        agent,
        nodes: args.nodes,
        attempts: 3,
        initial_secs: 2,
        max_secs: 4,
        fault: FleetFault::Status(503),
        barrier: true,
    };
    eprintln!(
        "fleet: {} agents, API server holds the first requests until all arrived, then answers every request 503; \
         api_attempts 3, backoff 2 s doubling, cap 4 s",
        o.nodes
    );
    let r = run_fleet(&o)?;
    let bucket = Duration::from_millis(100);
    println!(
        "HIST\t{}",
        r.render_histogram(bucket).replace('\n', "\nHIST\t")
    );
    let per = r.per_node();
    let bounded = per.iter().all(|t| t.len() == 3) && r.ends.iter().all(|e| e.code == Some(3));
    // The same first attempts on the un-jittered schedule (step after each
    // attempt, no randomness): where a fleet without jitter would land.
    let mut fixed: Vec<Duration> = Vec::new();
    for t in &per {
        if let Some(a) = t.first() {
            fixed.push(a.answered + r.step(1));
            fixed.push(a.answered + r.step(1) + r.step(2));
        }
    }
    let peak_of = |ts: &mut dyn Iterator<Item = Duration>| {
        let mut m = std::collections::BTreeMap::<u128, usize>::new();
        for t in ts {
            *m.entry(t.as_millis() / 100).or_default() += 1;
        }
        m.values().copied().max().unwrap_or(0)
    };
    let ours = peak_of(&mut per.iter().flat_map(|t| t.iter().skip(1).map(|a| a.at)));
    let theirs = peak_of(&mut fixed.into_iter());
    let first = peak_of(&mut per.iter().filter_map(|t| t.first().map(|a| a.at)));
    let pos = r.window_positions(1);
    let in_window = pos.iter().filter(|p| (-0.01..=1.2).contains(*p)).count();
    eprintln!(
        "fleet: first-attempt peak {first}/100 ms; retries peak {ours}/100 ms; un-jittered schedule would peak at {theirs}; \
         {in_window}/{} second attempts inside the jitter window; all bounded: {bounded}; wall {:.1} s",
        pos.len(),
        r.wall.as_secs_f64()
    );
    let ratio = ours as f64 / theirs.max(1) as f64;
    println!(
        "{}",
        Row {
            name: format!(
                "fleet: {} agents retrying a failing API, peak retries per 100 ms",
                o.nodes
            ),
            ours: ours.to_string(),
            theirs: theirs.to_string(),
            theirs_label: "same starts, no jitter".into(),
            ratio: format!("{ratio:.2}x"),
            target: "< 0.5x, bounded".into(),
            met: ratio < 0.5 && bounded,
        }
        .line()
    );
    Ok(())
}
