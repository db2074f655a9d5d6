//! `nb-bench`: the measuring harness behind `bench/run.sh` and
//! `bench/soak.sh` (not a test: it prints numbers, the script prints the
//! table). Each subcommand prints `ROW\t…` lines (see
//! `benchkit::report`) on stdout and progress on stderr.
//!
//! ```text
//! nb-bench critical-path --agent BIN [--runs N]
//! nb-bench fleet --agent BIN [--nodes N]
//! nb-bench run-rss --agent BIN
//! nb-bench docker-run --agent BIN [--ours-ms MS] [--runs N]
//! nb-bench soak --agent BIN [--points N]
//! nb-bench node-ready --agent BIN [--agent-b BIN] [--runs N] [--kinds docker,containerd,sysext]
//!                    [--write-window-secs S]   (real cluster: first boot to Node Ready; steady-state writes)
//! nb-bench follow --agent BIN     (real cluster: 3 workers follow the control plane to v1.20.3)
//! nb-bench follow-fleet [--nodes N] [--threads T] [--change-ms MS] [--timer-ms MS]
//!     (N simulated nodes' follow against the real API server: maxChanging 10, 1, a failing node)
//! nb-bench make-bundle --mib N --out FILE     (the asset-pull bundle)
//! nb-bench s3 [--port P] --object BUCKET/KEY=FILE...   (S3 stand-in)
//! ```

use anyhow::{Context as _, Result, bail};
use benchkit::critical::{agent_runtime_us, critical_path_us, durable_floor_node, floor_node};
use benchkit::report::{Row, median};
use benchkit::sibling;
use std::path::PathBuf;
use std::time::Duration;
use testkit::agentnode::{self as an, AgentNodeSpec, UpdateEngineUnit, agent_node};

struct Args {
    cmd: String,
    agent: Option<PathBuf>,
    agent_b: Option<PathBuf>,
    runs: usize,
    nodes: usize,
    ours_ms: Option<f64>,
    points: usize,
    mib: u64,
    out: Option<PathBuf>,
    port: u16,
    objects: Vec<String>,
    kinds: Vec<benchkit::ready::Kind>,
    write_window_secs: u64,
    threads: usize,
    change_ms: u64,
    timer_ms: u64,
}

fn parse() -> Result<Args> {
    let mut it = std::env::args().skip(1);
    let cmd = it
        .next()
        .context("usage: nb-bench <critical-path> [options]")?;
    let mut a = Args {
        cmd,
        agent: None,
        agent_b: None,
        runs: 5,
        nodes: 300,
        ours_ms: None,
        points: 32,
        mib: 64,
        out: None,
        port: 0,
        objects: Vec::new(),
        kinds: benchkit::ready::Kind::ALL.to_vec(),
        write_window_secs: 0,
        threads: 2,
        change_ms: 1000,
        timer_ms: 5000,
    };
    while let Some(flag) = it.next() {
        let mut val = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--agent" => a.agent = Some(val()?.into()),
            "--agent-b" => a.agent_b = Some(val()?.into()),
            "--runs" => a.runs = val()?.parse().context("--runs")?,
            "--nodes" => a.nodes = val()?.parse().context("--nodes")?,
            "--ours-ms" => a.ours_ms = Some(val()?.parse().context("--ours-ms")?),
            "--points" => a.points = val()?.parse().context("--points")?,
            "--mib" => a.mib = val()?.parse().context("--mib")?,
            "--out" => a.out = Some(val()?.into()),
            "--port" => a.port = val()?.parse().context("--port")?,
            "--object" => a.objects.push(val()?),
            "--kinds" => {
                a.kinds = val()?
                    .split(',')
                    .map(benchkit::ready::Kind::parse)
                    .collect::<Result<_>>()?
            }
            "--write-window-secs" => {
                a.write_window_secs = val()?.parse().context("--write-window-secs")?
            }
            "--threads" => a.threads = val()?.parse().context("--threads")?,
            "--change-ms" => a.change_ms = val()?.parse().context("--change-ms")?,
            "--timer-ms" => a.timer_ms = val()?.parse().context("--timer-ms")?,
            other => bail!("unknown argument {other:?}"),
        }
    }
    Ok(a)
}

fn main() -> Result<()> {
    let args = parse()?;
    match args.cmd.as_str() {
        "make-bundle" => return make_bundle(&args),
        "s3" => return s3_standin(&args),
        "follow-fleet" => {
            testkit::kube::parts().context("follow-fleet runs the real kube-apiserver")?;
            let lines = benchkit::follow_fleet::bench(
                args.nodes,
                args.threads,
                Duration::from_millis(args.change_ms),
                Duration::from_millis(args.timer_ms),
            )?;
            for line in lines {
                println!("{line}");
            }
            return Ok(());
        }
        _ => {}
    }
    testkit::simnode::can_run().context("the benchmarks boot simulated nodes")?;
    match args.cmd.as_str() {
        "critical-path" => critical_path(&args),
        "fleet" => fleet(&args),
        "run-rss" => run_rss(&args),
        "docker-run" => docker_run(&args),
        "soak" => soak(&args),
        "node-ready" => node_ready(&args),
        "follow" => {
            let agent = args
                .agent
                .clone()
                .context("follow needs --agent <node-bootstrap binary>")?;
            for line in benchkit::follow::bench(&agent)? {
                println!("{line}");
            }
            Ok(())
        }
        other => bail!("unknown command {other:?}"),
    }
}

const T: Duration = Duration::from_secs(60);

/// Writes the asset-pull bundle: a tar.gz of about `--mib` MiB.
fn make_bundle(args: &Args) -> Result<()> {
    let out = args.out.clone().context("make-bundle needs --out FILE")?;
    let unpacked = (args.mib as f64 * benchkit::bundle::EXPANSION * 1048576.0) as u64;
    let file =
        std::fs::File::create(&out).with_context(|| format!("creating {}", out.display()))?;
    let stats = benchkit::bundle::write_targz(unpacked, std::io::BufWriter::new(file))?;
    let size = std::fs::metadata(&out)?.len();
    eprintln!(
        "bundle {}: {size} bytes, {} files, unpacks to {} bytes ({:.2}x)",
        out.display(),
        stats.files,
        stats.unpacked,
        stats.unpacked as f64 / size as f64
    );
    Ok(())
}

/// Serves files as S3 objects on loopback until killed; prints
/// `endpoint http://127.0.0.1:PORT` once listening.
fn s3_standin(args: &Args) -> Result<()> {
    let mut objects = Vec::new();
    for o in &args.objects {
        let (path, file) = o.split_once('=').context("--object BUCKET/KEY=FILE")?;
        let (bucket, key) = path.split_once('/').context("--object BUCKET/KEY=FILE")?;
        let body = std::fs::read(file).with_context(|| format!("reading {file}"))?;
        objects.push((bucket.to_string(), key.to_string(), body));
    }
    let (listener, addr) = benchkit::s3standin::bind(args.port)?;
    println!("endpoint http://{addr}");
    use std::io::Write as _;
    std::io::stdout().flush()?;
    benchkit::s3standin::serve(listener, benchkit::s3standin::Objects::new(objects))
}

/// Boots a node, waits for kubelet to be active, returns the critical path
/// and the agent process's run time, in µs.
fn measure(mut n: testkit::simnode::SimNode) -> Result<(u64, u64)> {
    n.boot()?;
    n.wait_active_state("kubelet.service", "active", T)?;
    // The agent goes on after READY=1 (its last journal record, its
    // metrics): wait for its exit before reading when it was.
    n.wait_for("the agent to exit", T, |n| {
        let exit = n
            .timestamp_us(
                "k8s-node-bootstrap.service",
                "ExecMainExitTimestampMonotonic",
            )
            .ok()?;
        (exit != 0).then_some(())
    })?;
    let us = (critical_path_us(&n)?, agent_runtime_us(&n)?);
    if std::env::var("NB_BENCH_VERBOSE").is_ok_and(|v| !v.is_empty()) {
        eprintln!("{}", benchkit::critical::phases(&n)?);
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
    let mut config_json = serde_json::json!({
        "role": "worker",
        "cluster": {"forced_version": "v1.9.6+coreos.0", "check_forced_skew": false},
        "os_update": {"enabled": false},
        "addon": {"enabled": false},
    });
    // The same agent without its metrics textfile: what publishing costs.
    let no_metrics = config_json.to_string();
    // The textfile on, as the Ignition module configures it.
    config_json["metrics"] =
        serde_json::json!({"textfile_dir": "/var/lib/node_exporter/textfile_collector"});
    let config = config_json.to_string();
    let ue = UpdateEngineUnit {
        binary: sibling("fake-update-engine")?,
        args: vec!["--scenario".into(), "no-update".into()],
    };
    let mut ours = Vec::new();
    let mut floor = Vec::new();
    let mut ours_proc = Vec::new();
    let mut floor_proc = Vec::new();
    let mut durable = Vec::new();
    let mut off = Vec::new();
    let mut off_proc = Vec::new();
    // Alternate, so both see the same host load; one warm-up of each first.
    for i in 0..=args.runs {
        let mut spec = AgentNodeSpec::new(&format!("cp-agent-{i}"), &agent, config.clone());
        spec.kubeconfig = Some(kubeconfig.clone());
        spec.update_engine = Some(ue.clone());
        let (a, ap) = measure(agent_node(&spec)?)?;
        spec.name = format!("cp-floor-{i}");
        let (f, fp) = measure(floor_node(&spec)?)?;
        spec.name = format!("cp-durable-{i}");
        let (d, dp) = measure(durable_floor_node(&spec)?)?;
        spec.name = format!("cp-nometrics-{i}");
        spec.config = no_metrics.clone();
        let (m, mp) = measure(agent_node(&spec)?)?;
        let ms = |us: u64| us as f64 / 1000.0;
        eprintln!(
            "critical-path run {i}{}: agent node {:.1} ms (agent process {:.1} ms), floor node {:.1} ms (no-op process {:.1} ms), durable floor node {:.1} ms (its process {:.1} ms)",
            if i == 0 { " (warm-up)" } else { "" },
            ms(a),
            ms(ap),
            ms(f),
            ms(fp),
            ms(d),
            ms(dp)
        );
        eprintln!(
            "critical-path run {i}: agent node without metrics {:.1} ms (agent process {:.1} ms)",
            ms(m),
            ms(mp)
        );
        if i > 0 {
            ours.push(ms(a));
            floor.push(ms(f));
            ours_proc.push(ms(ap));
            floor_proc.push(ms(fp));
            durable.push(ms(d));
            off.push(ms(m));
            off_proc.push(ms(mp));
        }
    }
    let (o, f) = (median(&ours), median(&floor));
    eprintln!(
        "critical-path medians: agent node {o:.1} ms, of which the agent process {:.1} ms; floor node {f:.1} ms, of which the no-op {:.1} ms",
        median(&ours_proc),
        median(&floor_proc)
    );
    // The ratio of each round (its two nodes ran back to back), then their
    // median: the host's load moves both sides of a round together.
    let ratios: Vec<f64> = ours.iter().zip(&floor).map(|(o, f)| o / f).collect();
    let ratio = median(&ratios);
    eprintln!(
        "critical-path ratios per round: {}",
        ratios
            .iter()
            .map(|r| format!("{r:.2}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "{}",
        Row {
            name: format!("critical path to kubelet, ms (median of {})", ours.len()),
            ours: format!("{o:.1}"),
            theirs: format!("{f:.1}"),
            theirs_label: "no-op agent".into(),
            ratio: format!("{ratio:.2}x"),
            target: "<= 1.1x".into(),
            met: ratio <= 1.1,
        }
        .line()
    );
    let dratios: Vec<f64> = ours.iter().zip(&durable).map(|(o, d)| o / d).collect();
    let dratio = median(&dratios);
    println!(
        "{}",
        Row {
            name: "critical path: vs a durable no-op (kubelet.env fsynced as ours is), ms".into(),
            ours: format!("{o:.1}"),
            theirs: format!("{:.1}", median(&durable)),
            theirs_label: "dd conv=fsync + mv + sync dir".into(),
            ratio: format!("{dratio:.2}x"),
            target: "(context)".into(),
            met: true,
        }
        .line()
    );
    // Metrics on (the default) against off: the textfile is written after
    // READY=1, so the path to kubelet should not move; the agent process
    // (which ends after that write) does.
    let mratios: Vec<f64> = ours.iter().zip(&off).map(|(o, m)| o / m).collect();
    println!(
        "{}",
        Row {
            name: "critical path: metrics textfile on vs off, ms".into(),
            ours: format!("{o:.1}"),
            theirs: format!("{:.1}", median(&off)),
            theirs_label: "no metrics.textfile_dir".into(),
            ratio: format!("{:.2}x", median(&mratios)),
            target: "<= 1.02x".into(),
            met: median(&mratios) <= 1.02,
        }
        .line()
    );
    let pratios: Vec<f64> = ours_proc
        .iter()
        .zip(&off_proc)
        .map(|(o, m)| o / m)
        .collect();
    println!(
        "{}",
        Row {
            name: "agent process (ends after the textfile): metrics on vs off, ms".into(),
            ours: format!("{:.1}", median(&ours_proc)),
            theirs: format!("{:.1}", median(&off_proc)),
            theirs_label: "no metrics.textfile_dir".into(),
            ratio: format!("{:.2}x", median(&pratios)),
            target: "(context)".into(),
            met: true,
        }
        .line()
    );
    println!("DATA\tcritical_path_ms\t{o:.1}");
    Ok(())
}

fn fleet(args: &Args) -> Result<()> {
    use testkit::fleet::{FleetFault, FleetOptions, run_fleet};
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

/// `node-bootstrap run` on the host, in a temp dir of its own: a private
/// system bus with the fake update_engine (no update) on it, the API server
/// stand-in on loopback, seed, os-release and kubeconfig.
struct HostRun {
    dir: tempfile::TempDir,
    bus: testkit::fleet::FleetBus,
    update_engine: std::process::Child,
    _api: testkit::apiserver::FakeApiServer,
    _rt: tokio::runtime::Runtime,
}

impl HostRun {
    /// `cluster`: the config's `cluster` section (e.g. a forced version).
    fn start(cluster: serde_json::Value, os_update: bool) -> Result<HostRun> {
        use testkit::apiserver::{ApiServerOptions, FakeApiServer, KubeAuth, Pki};
        let dir = tempfile::Builder::new().prefix("nb-hostrun-").tempdir()?;
        let d = dir.path();
        let bus = testkit::fleet::FleetBus::start(d)?;
        let rt = testkit::server_runtime(1)?;
        let pki = Pki::generate();
        let api = rt.block_on(FakeApiServer::start(&pki, ApiServerOptions::default()))?;
        std::fs::create_dir_all(d.join("installer"))?;
        std::fs::write(d.join("installer/kubelet.env"), an::SEED_KUBELET_ENV)?;
        std::fs::write(d.join("os-release"), an::OS_RELEASE_TEXT)?;
        pki.write_kubeconfig(&d.join("kubeconfig"), &api.url(), &KubeAuth::ClientCert)?;
        let p = |s: &str| d.join(s).display().to_string();
        let config = serde_json::json!({
            "role": "worker",
            "paths": {
                "kubelet_env": p("kubelet.env"), "kubelet_config": p("kubelet-config.yaml"), "seed_dir": p("installer"), "kubeconfig": p("kubeconfig"),
                "state_dir": p("state"), "run_dir": p("run"), "os_release": p("os-release"),
            },
            "cluster": cluster,
            "os_update": {"enabled": os_update, "timeout_secs": 60, "poll_interval_secs": 1},
        });
        std::fs::write(d.join("config.json"), config.to_string())?;
        let update_engine = std::process::Command::new(sibling("fake-update-engine")?)
            .args([
                "--address",
                bus.address(),
                "--scenario",
                "no-update",
                "--step-ms",
                "20",
            ])
            .arg("--state-dir")
            .arg(d.join("ue-state"))
            .arg("--run-dir")
            .arg(d.join("ue-run"))
            .stderr(std::process::Stdio::null())
            .spawn()?;
        std::thread::sleep(Duration::from_millis(300));
        Ok(HostRun {
            dir,
            bus,
            update_engine,
            _api: api,
            _rt: rt,
        })
    }

    /// `node-bootstrap run` (optionally under a wrapper such as
    /// /usr/bin/time), from a fresh state: no kubelet.env, no journal.
    fn command(&self, wrapper: &[&str], agent: &std::path::Path) -> Result<std::process::Command> {
        let d = self.dir.path();
        for f in ["kubelet.env", "state", "run"] {
            let p = d.join(f);
            let _ = std::fs::remove_file(&p);
            let _ = std::fs::remove_dir_all(&p);
        }
        let mut c = match wrapper.split_first() {
            Some((w, rest)) => {
                let mut c = std::process::Command::new(w);
                c.args(rest).arg(agent);
                c
            }
            None => std::process::Command::new(agent),
        };
        c.arg("run")
            .env("NODE_BOOTSTRAP_CONFIG", d.join("config.json"))
            .env("NODE_BOOTSTRAP_LOG_FORMAT", "text")
            .env("DBUS_SYSTEM_BUS_ADDRESS", self.bus.address())
            .env_remove("JOURNAL_STREAM")
            .env_remove("RUST_LOG");
        Ok(c)
    }

    fn wrote_kubelet_env(&self) -> bool {
        self.dir.path().join("kubelet.env").exists()
    }
}

impl Drop for HostRun {
    fn drop(&mut self) {
        let _ = self.update_engine.kill();
        let _ = self.update_engine.wait();
    }
}

/// Peak RSS (KiB) of a full `node-bootstrap run` on the host: cluster
/// version from the API server stand-in over TLS, update_engine asked
/// (no update) on a private bus, kubelet.env written.
fn run_rss(args: &Args) -> Result<()> {
    let agent = args
        .agent
        .clone()
        .context("run-rss needs --agent <node-bootstrap binary>")?;
    let h = HostRun::start(serde_json::json!({}), true)?;
    let out = h
        .command(&["/usr/bin/time", "-f", "RSS_KIB=%M WALL_S=%e"], &agent)?
        .output()
        .context("running /usr/bin/time (package time)")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .rev()
        .find(|l| l.starts_with("RSS_KIB="))
        .with_context(|| format!("no /usr/bin/time output: {stderr}"))?;
    if !h.wrote_kubelet_env() {
        bail!("the run did not write kubelet.env: {stderr}");
    }
    let kib: u64 = line
        .split_whitespace()
        .next()
        .and_then(|f| f.strip_prefix("RSS_KIB="))
        .and_then(|v| v.parse().ok())
        .context("RSS")?;
    eprintln!("run-rss: {line}");
    let mib = kib as f64 / 1024.0;
    println!(
        "{}",
        Row {
            name: "peak RSS of a full `run`, MiB".into(),
            ours: format!("{mib:.1}"),
            theirs: "32".into(),
            theirs_label: "limit".into(),
            ratio: format!("{:.2}x", mib / 32.0),
            target: "< 32 MiB".into(),
            met: mib < 32.0,
        }
        .line()
    );
    Ok(())
}

/// `docker run --rm` of an imported do-nothing image against a private
/// dockerd: the least the original containerized bootstrapper paid per
/// boot, before any image pull. Compared with `--ours-ms` (the critical
/// path measured by `critical-path`).
fn docker_run(args: &Args) -> Result<()> {
    let agent = args
        .agent
        .clone()
        .context("docker-run needs --agent <node-bootstrap binary>")?;
    // Ours: a whole `run` (forced version, update_engine asked, journal,
    // kubelet.env) from a fresh state, on the same host as the container.
    let h = HostRun::start(
        serde_json::json!({"forced_version": "v1.9.6+coreos.0", "check_forced_skew": false}),
        false,
    )?;
    let mut ours_t = Vec::new();
    for i in 0..=args.runs {
        let mut c = h.command(&[], &agent)?;
        let t = std::time::Instant::now();
        let out = c.output()?;
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        if !out.status.success() || !h.wrote_kubelet_env() {
            bail!(
                "node-bootstrap run failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        if i > 0 {
            ours_t.push(ms);
        }
    }
    drop(h);
    let d = testkit::docker::PrivateDockerd::start()?;
    d.import_busybox_image("nb-bench/noop", &[])?;
    let mut times = Vec::new();
    for i in 0..=args.runs {
        let t = std::time::Instant::now();
        d.docker(&["run", "--rm", "nb-bench/noop", "/bin/true"])?;
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        if i > 0 {
            times.push(ms);
        }
    }
    let ours = median(&ours_t);
    let theirs = median(&times);
    eprintln!(
        "docker-run: `node-bootstrap run` {ours:.1} ms, `docker run --rm` {theirs:.1} ms (medians of {}); critical path on the node {}",
        times.len(),
        args.ours_ms
            .map_or("not given".into(), |m| format!("{m:.1} ms"))
    );
    let ratio = theirs / ours;
    println!(
        "{}",
        Row {
            name: format!(
                "whole `run` vs `docker run --rm` of a no-op image, same host, ms (median of {})",
                times.len()
            ),
            ours: format!("{ours:.1}"),
            theirs: format!("{theirs:.1}"),
            theirs_label: "docker run --rm".into(),
            ratio: format!("{ratio:.1}x faster"),
            target: ">= 5x faster".into(),
            met: ratio >= 5.0,
        }
        .line()
    );
    if let Some(cp) = args.ours_ms {
        let r = theirs / cp;
        println!(
            "{}",
            Row {
                name: "critical path on the node (incl. systemd) vs `docker run --rm`, ms".into(),
                ours: format!("{cp:.1}"),
                theirs: format!("{theirs:.1}"),
                theirs_label: "docker run --rm".into(),
                ratio: format!("{r:.1}x faster"),
                target: "(context)".into(),
                met: true,
            }
            .line()
        );
    }
    Ok(())
}

/// The soak: power cuts at many points of a full first boot (see
/// `testkit::powerloss`); one line per point and a summary. Exits
/// non-zero if any point failed.
fn soak(args: &Args) -> Result<()> {
    use testkit::powerloss::{PowerLossRig, Stage, cut_points};
    let agent = args
        .agent
        .clone()
        .context("soak needs --agent <node-bootstrap binary>")?;
    let rig = PowerLossRig::new(&agent, &sibling("fake-update-engine")?)?;
    let t0 = std::time::Instant::now();
    let (timeline, reference) = rig.reference("soak-ref")?;
    println!(
        "reference (no cut): reboot at {}, kubelet active at {:.2}s: {}",
        timeline
            .reboots
            .iter()
            .map(|d| format!("{:.2}s", d.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", "),
        timeline.kubelet_active.as_secs_f64(),
        if reference.ok() {
            "ok".to_string()
        } else {
            reference.problems.join("; ")
        }
    );
    let offset = fastrand_f64();
    let points = cut_points(args.points, offset);
    println!(
        "{} cut points over {} stages ({}), delay offset {offset:.3}",
        points.len(),
        Stage::ALL.len(),
        Stage::ALL.map(|s| s.name()).join(", ")
    );
    let mut failed = 0;
    let mut by_problem = std::collections::BTreeMap::<String, usize>::new();
    let mut warnings = 0;
    let mut skipped = 0;
    for (i, p) in points.into_iter().enumerate() {
        let r = rig.run_point(&format!("soak-{i}"), p)?;
        println!("point {:>2}/{}: {}", i + 1, args.points, r.line());
        if r.skipped() {
            skipped += 1;
        }
        if !r.ok() {
            failed += 1;
            for pr in &r.problems {
                *by_problem.entry(pr.clone()).or_default() += 1;
            }
        }
        if !r.warnings.is_empty() {
            warnings += 1;
        }
    }
    println!(
        "soak: {} points cut, {} converged cleanly, {failed} failed, {skipped} not cut (the node was faster), {warnings} with warnings; {:.0} s",
        args.points - skipped,
        args.points - skipped - failed,
        t0.elapsed().as_secs_f64()
    );
    for (p, n) in &by_problem {
        println!("soak: {n} x {p}");
    }
    if failed > 0 || !reference.ok() {
        bail!("{failed} of {} power-cut points failed", args.points);
    }
    Ok(())
}

/// A random number in [0, 1) without another dependency.
fn fastrand_f64() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    (nanos % 1_000_000) as f64 / 1_000_000.0
}

/// First boot to Node Ready of `--runs` workers of each kind (docker
/// through the addon, the OS's containerd, containerd with the kubelet
/// sysext) against one control plane on the host, beside floor workers
/// with nothing to bootstrap (`benchkit::ready::bench`); with `--agent-b`,
/// a second agent's workers too, taking turns; with
/// `--write-window-secs`, the steady-state writes of one more worker of
/// each kind and agent. `NB_BENCH_DUMP=DIR` keeps each node's journal there.
fn node_ready(args: &Args) -> Result<()> {
    let agent = args
        .agent
        .clone()
        .context("node-ready needs --agent <node-bootstrap binary>")?;
    let dump = std::env::var_os("NB_BENCH_DUMP").map(PathBuf::from);
    let plan = benchkit::ready::Plan {
        agent: &agent,
        agent_b: args.agent_b.as_deref(),
        runs: args.runs,
        kinds: args.kinds.clone(),
        write_window: Duration::from_secs(args.write_window_secs),
        dump: dump.as_deref(),
    };
    for line in benchkit::ready::bench(&plan)? {
        println!("{line}");
    }
    Ok(())
}
