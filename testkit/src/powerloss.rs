//! Power loss over a full first boot, on a simulated node running the real
//! agent, with every part of the flow in it: init-assets.service pulling
//! the asset bundle from the S3 stand-in (moto), the API server stand-in
//! (both on the host's loopback; the node shares the host network), the
//! fake update_engine offering an OS update, the docker addon (torcx: the
//! OS image ships docker 1.12, the cluster wants 17.03, so a package is
//! downloaded from the package server and the reboot wipes docker's
//! datadir), one reboot for both, kubelet.env, kubelet-wrapper stand-in.
//!
//! A cut point is a stage of the first boot ([`Stage`]: agent starting,
//! cluster version, OS update in progress, reboot requested, second boot,
//! kubelet.env being written) plus a delay after the stage began (stages are
//! recognised from the boot count and the state journal, read through the
//! node's root every few milliseconds, so the points land where they should
//! however loaded the host is). The node is booted, driven through its own
//! reboots, and at the instant its PID 1 is SIGKILLed (everything on the
//! node dies at once); then it is booted again and followed until kubelet
//! runs. Then the checks
//! a paged operator would make: kubelet running with the right image,
//! kubelet.env complete and valid, the OS update in effect, docker 17.03
//! running from a store file identical to the published package, docker's
//! old datadir gone, the assets complete and identical to the bundle, the
//! state journal readable (never moved aside as corrupt) with every step
//! done, no `.done` marker for work that is not there.
//!
//! The cut kills processes, not the disk: files written but not yet fsynced
//! survive (the overlay's upper dir is on the host's filesystem, whose page
//! cache lives on). So this exercises "killed at any instant", the torn
//! multi-step updates, the interrupted renames and restarts; a real power
//! loss can additionally drop unsynced data, which the agent's
//! fsync-before-rename covers by construction (see `fsutil`).
//!
//! Used by `tests/node/reliability_power_loss.rs` (a handful of points) and by
//! `nb-bench soak` (`benchkit`, run by `bench/soak.sh`, many points).

use crate::agentnode::{self as an, AgentNodeSpec, UpdateEngineUnit};
use crate::apiserver::{ApiServerOptions, FakeApiServer, KubeAuth, Pki};
use crate::simnode::{BootEnd, SimNode};
use crate::torcx_fixtures::{AddonRig, docker_archive};
use anyhow::{Result, bail};
use sha2::Digest as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The version the API server stand-in reports.
pub const CLUSTER_VERSION: &str = "v1.9.6+coreos.0";
/// The OS version the node starts on.
pub const OLD_OS_VERSION: &str = "1520.3.0";
/// The OS version the fake update_engine installs.
pub const NEW_OS_VERSION: &str = "1632.3.0";
const BUCKET: &str = "cluster-assets";
const BUNDLE_KEY: &str = "assets/bundle.tar.gz";
/// The docker package's store file for the new OS.
const STORE_FILE: &str = "/var/lib/torcx/store/1632.3.0/docker:17.03.torcx.tgz";
/// A file of docker's old datadir, which the docker change must wipe.
use crate::torcx::DOCKER_DATA_MARKER;

/// How long a node may take to converge after a cut.
const CONVERGE: Duration = Duration::from_secs(180);

pub struct PowerLossRig {
    _rt: tokio::runtime::Runtime,
    _api: FakeApiServer,
    kubeconfig: String,
    agent: PathBuf,
    fake_update_engine: PathBuf,
    addon: AddonRig,
    package: Vec<u8>,
    s3: crate::s3::S3Server,
    bundle: Vec<(String, Vec<u8>)>,
    bundle_sha256: String,
}

/// The asset bundle: a few scripts and manifests and one bigger file, so
/// the pull takes long enough to be cut in the middle.
fn bundle_files() -> Vec<(String, Vec<u8>)> {
    let big: Vec<u8> = (0..6_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect();
    vec![
        (
            "bootkube.sh".into(),
            b"#!/bin/bash\necho bootkube\n".to_vec(),
        ),
        (
            "manifests/kube-apiserver.yaml".into(),
            b"kind: DaemonSet\n".to_vec(),
        ),
        ("manifests/blob.bin".into(), big),
    ]
}

fn targz(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let files: Vec<(&str, &[u8], u32)> = files
        .iter()
        .map(|(p, d)| (p.as_str(), d.as_slice(), 0o644))
        .collect();
    crate::files::targz(&files)
}

/// Instants of a boot without a cut, from the first boot's start.
#[derive(Debug, Clone)]
pub struct Timeline {
    /// When the node went down for its reboot(s).
    pub reboots: Vec<Duration>,
    /// When kubelet was seen active.
    pub kubelet_active: Duration,
}

/// What happened at one cut point.
#[derive(Debug, Clone)]
pub struct PointReport {
    pub point: CutPoint,
    /// From the first boot's start to the cut.
    pub cut_at: Duration,
    /// Which boot was cut (1 = first), 0 if the node converged before the instant.
    pub cut_in_boot: u32,
    /// The state journal's steps at the instant of the cut.
    pub state_at_cut: String,
    /// Boots from the cut to kubelet active.
    pub boots_after: u32,
    pub converged_in: Duration,
    /// Violated checks (empty = the point passed).
    pub problems: Vec<String>,
    /// Left-overs that break nothing (stale staging, partial downloads).
    pub warnings: Vec<String>,
}

impl PointReport {
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }

    /// The node converged before the cut instant came: nothing was tested.
    pub fn skipped(&self) -> bool {
        self.cut_in_boot == 0
    }

    /// One line for the soak output.
    pub fn line(&self) -> String {
        format!(
            "{:<16} +{:>4} ms, cut at {:>6.2}s (boot {}, {}): {} after {} boot(s), {:.1}s{}",
            self.point.stage.name(),
            self.point.delay.as_millis(),
            self.cut_at.as_secs_f64(),
            self.cut_in_boot,
            if self.state_at_cut.is_empty() {
                "no journal yet"
            } else {
                &self.state_at_cut
            },
            if self.ok() { "converged" } else { "FAILED" },
            self.boots_after,
            self.converged_in.as_secs_f64(),
            if self.ok() {
                String::new()
            } else {
                format!(": {}", self.problems.join("; "))
            },
        ) + &if self.warnings.is_empty() {
            String::new()
        } else {
            format!(" [warning: {}]", self.warnings.join("; "))
        }
    }
}

enum Follow {
    Converged,
    Cut { state: String },
}

impl PowerLossRig {
    /// Starts the API server stand-in. `agent`: the node-bootstrap binary;
    /// `fake_update_engine`: the stand-in's binary.
    pub fn new(agent: &Path, fake_update_engine: &Path) -> Result<PowerLossRig> {
        let rt = crate::server_runtime(1)?;
        let pki = Pki::generate();
        let api = rt.block_on(FakeApiServer::start(
            &pki,
            ApiServerOptions {
                git_version: CLUSTER_VERSION.into(),
                ..Default::default()
            },
        ))?;
        let kubeconfig = pki.kubeconfig(&api.url(), &KubeAuth::ClientCert);
        // Docker packages for both OS versions; the download is slowed so
        // it can be cut half-way.
        let addon = AddonRig::new(NEW_OS_VERSION);
        let package = docker_archive("17.03.2");
        let entries = [
            addon.publish_package("1.12", &docker_archive("1.12.2")),
            addon.publish_package("17.03", &package),
        ];
        addon.publish_manifest(NEW_OS_VERSION, &entries);
        addon.publish_manifest(OLD_OS_VERSION, &entries);
        addon
            .server
            .set_rate(&addon.package_path("17.03", &package), Some(128 * 1024));
        let s3 = crate::s3::S3Server::start()?;
        s3.create_bucket(BUCKET)?;
        let bundle = bundle_files();
        let tgz = targz(&bundle);
        s3.put_object(BUCKET, BUNDLE_KEY, &tgz, &[])?;
        Ok(PowerLossRig {
            _rt: rt,
            _api: api,
            kubeconfig,
            agent: agent.to_path_buf(),
            fake_update_engine: fake_update_engine.to_path_buf(),
            addon,
            package,
            s3,
            bundle,
            bundle_sha256: hex::encode(sha2::Sha256::digest(&tgz)),
        })
    }

    /// A fresh node (not booted) for a full first boot with an OS update.
    pub fn node(&self, name: &str) -> Result<SimNode> {
        let full: serde_json::Value =
            serde_json::from_str(&self.addon.config_json_for_root("", serde_json::json!({})))?;
        let config = serde_json::json!({
            "role": "worker",
            "os_update": {"enabled": true, "timeout_secs": 60, "poll_interval_secs": 1},
            "reboot": {"wait_secs": 30},
            "addon": full["addon"],
            "assets": {"mode": "pull", "s3": {
                "bucket": BUCKET, "key": BUNDLE_KEY, "region": "us-east-1",
                "endpoint": self.s3.endpoint(), "checksum_sha256": self.bundle_sha256,
                "retry_initial_secs": 0, "retry_max_secs": 1,
            }},
        })
        .to_string();
        let mut spec = AgentNodeSpec::new(name, &self.agent, config);
        spec.kubeconfig = Some(self.kubeconfig.clone());
        spec.update_engine = Some(UpdateEngineUnit {
            binary: self.fake_update_engine.clone(),
            args: [
                "--scenario",
                "update",
                "--step-ms",
                "100",
                "--new-version",
                NEW_OS_VERSION,
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        });
        // The units' own RestartSec (10 s) only slows the test down.
        for unit in ["k8s-node-bootstrap.service", "init-assets.service"] {
            spec.drop_ins.push((
                unit.into(),
                "10-test-restart".into(),
                "[Service]\nRestartSec=1\n".into(),
            ));
        }
        // Credentials as the standard chain reads them (the instance role on AWS).
        spec.drop_ins.push((
            "init-assets.service".into(),
            "20-test-credentials".into(),
            "[Service]\nEnvironment=AWS_ACCESS_KEY_ID=AKIAEXAMPLEEXAMPLE00 AWS_SECRET_ACCESS_KEY=secret AWS_EC2_METADATA_DISABLED=true\n".into(),
        ));
        spec.extra_units = vec![crate::unit_file("init-assets.service")];
        spec.extra_enable = vec!["init-assets.service".into()];
        let n = an::agent_node(&spec)?;
        // The OS image: os-release, its vendor docker 1.12 (torcx), and
        // docker's datadir from running it.
        crate::torcx::install_os_image(&n, &self.addon, OLD_OS_VERSION, "1.12", "1.12.2")?;
        n.write(DOCKER_DATA_MARKER, "old docker data\n", 0o644)?;
        Ok(n)
    }

    /// The checks of [`check`] plus this rig's addon and assets.
    pub fn check(&self, n: &SimNode) -> Vec<String> {
        let mut p = check(n);
        match std::fs::read(n.path(STORE_FILE)) {
            Ok(b) if b == self.package => {}
            Ok(b) => p.push(format!(
                "{STORE_FILE} is not the published package ({} bytes, want {})",
                b.len(),
                self.package.len()
            )),
            Err(e) => p.push(format!("{STORE_FILE}: {e}")),
        }
        let running = n
            .read("/run/torcx/profile.json")
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| {
                v["value"]["images"].as_array().and_then(|imgs| {
                    imgs.iter()
                        .find(|i| i["name"] == "docker")
                        .and_then(|i| i["reference"].as_str().map(str::to_string))
                })
            });
        if running.as_deref() != Some("17.03") {
            p.push(format!(
                "docker 17.03 is not running: /run/torcx/profile.json says {running:?}"
            ));
        }
        if n.exists(DOCKER_DATA_MARKER) {
            p.push(format!(
                "docker changed 1.12 -> 17.03 but its old datadir survived ({DOCKER_DATA_MARKER})"
            ));
        }
        for (path, data) in &self.bundle {
            let at = format!("/opt/tectonic/{path}");
            match std::fs::read(n.path(&at)) {
                Ok(b) if &b == data => {}
                Ok(_) => p.push(format!("{at} differs from the bundle")),
                Err(e) => p.push(format!("{at}: {e}")),
            }
        }
        p
    }

    /// Left-overs that waste space but break nothing.
    pub fn warnings(&self, n: &SimNode) -> Vec<String> {
        let mut w = Vec::new();
        if let Ok(rd) = std::fs::read_dir(n.path("/opt")) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with(".tectonic.pull-") {
                    w.push(format!("stale staging dir /opt/{name}"));
                }
            }
        }
        if let Ok(rd) = std::fs::read_dir(n.path("/var/lib/torcx/store/1632.3.0")) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.contains(".part-") {
                    w.push(format!("partial download left: {name}"));
                }
            }
        }
        w
    }

    /// A full first boot without a cut; checks it like any point.
    pub fn reference(&self, name: &str) -> Result<(Timeline, PointReport)> {
        let mut n = self.node(name)?;
        let t0 = Instant::now();
        n.boot()?;
        let mut reboots = Vec::new();
        match follow(&mut n, t0, None, CONVERGE, &mut reboots)? {
            Follow::Converged => {}
            Follow::Cut { .. } => unreachable!("no cut instant"),
        }
        let kubelet_active = t0.elapsed();
        if std::env::var("NB_POWERLOSS_VERBOSE").is_ok_and(|v| !v.is_empty()) {
            let out = n.exec(&[
                "journalctl",
                "--no-pager",
                "-o",
                "short-monotonic",
                "-u",
                "init-assets.service",
                "-u",
                "k8s-node-bootstrap.service",
                "-u",
                "update-engine.service",
                "-u",
                "kubelet.service",
            ])?;
            eprintln!("{}", String::from_utf8_lossy(&out.stdout));
        }
        let report = PointReport {
            point: CutPoint {
                stage: Stage::Boot1,
                delay: Duration::ZERO,
            },
            cut_at: kubelet_active,
            cut_in_boot: 0,
            state_at_cut: String::new(),
            boots_after: n.boots(),
            converged_in: kubelet_active,
            problems: self.check(&n),
            warnings: self.warnings(&n),
        };
        let _ = n.shutdown();
        Ok((
            Timeline {
                reboots,
                kubelet_active,
            },
            report,
        ))
    }

    /// Boots a fresh node, cuts its power at `point`, boots it again and
    /// follows it to kubelet active. A stage the node never reached is a
    /// problem of the point (the flow did not do what it should).
    pub fn run_point(&self, name: &str, point: CutPoint) -> Result<PointReport> {
        let mut n = self.node(name)?;
        let t0 = Instant::now();
        n.boot()?;
        let mut reboots = Vec::new();
        let (cut_in_boot, state_at_cut) =
            match follow(&mut n, t0, Some(point), CONVERGE, &mut reboots)? {
                Follow::Cut { state } => (n.boots(), state),
                Follow::Converged => (0, String::new()),
            };
        let cut_at = t0.elapsed();
        let boots_before = n.boots();
        let t1 = Instant::now();
        let mut problems = Vec::new();
        if cut_in_boot > 0 {
            n.boot()?;
            if let Err(e) = follow(&mut n, t1, None, CONVERGE, &mut reboots) {
                problems.push(format!("did not converge: {e:#}"));
            }
        }
        if problems.is_empty() {
            problems = self.check(&n);
        }
        let mut warnings = self.warnings(&n);
        if cut_in_boot == 0 {
            warnings.push(format!(
                "no cut: kubelet started before stage {} had lasted {} ms",
                point.stage.name(),
                point.delay.as_millis()
            ));
        }
        let report = PointReport {
            point,
            cut_at,
            cut_in_boot,
            state_at_cut,
            boots_after: n.boots() - boots_before,
            converged_in: t1.elapsed(),
            problems,
            warnings,
        };
        if n.is_running() {
            let _ = n.shutdown();
        }
        Ok(report)
    }
}

fn down(n: &SimNode) -> bool {
    n.pid1()
        .is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists())
}

fn kubelet_active(n: &SimNode) -> bool {
    n.prop("kubelet.service", "ActiveState")
        .is_ok_and(|s| s == "active")
}

/// Whether kubelet-wrapper has started, read through the node's root
/// without entering it. While the node may still reboot, `follow` must not
/// run commands inside it: systemd's final `kill(-1, SIGSTOP)` stops such
/// a command, `nsenter` then stops itself too and never reaps it, and the
/// namespace's PID 1 waits for that zombie forever.
fn kubelet_started(n: &SimNode) -> bool {
    n.read("/var/lib/kubelet-wrapper/starts")
        .is_some_and(|s| s.lines().count() > 0)
}

/// The state journal's steps as `step=status` pairs.
fn journal_summary(n: &SimNode) -> String {
    let Some(text) = n.read("/var/lib/node-bootstrap/state.json") else {
        return String::new();
    };
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(v) => {
            let steps = &v["steps"];
            an::STEPS
                .iter()
                .filter_map(|s| steps[*s]["status"].as_str().map(|st| format!("{s}={st}")))
                .collect::<Vec<_>>()
                .join(" ")
        }
        Err(_) => "journal being written".into(),
    }
}

/// Follows the node through its own reboots until kubelet is active, or
/// until `cut`'s stage has lasted its delay, when it cuts the power.
fn follow(
    n: &mut SimNode,
    t0: Instant,
    cut: Option<CutPoint>,
    timeout: Duration,
    reboots: &mut Vec<Duration>,
) -> Result<Follow> {
    let deadline = Instant::now() + timeout;
    let mut stage_began: Option<Instant> = None;
    loop {
        if let Some(c) = cut {
            if stage_began.is_none() && c.stage.reached(n, &journal_steps(n)) {
                stage_began = Some(Instant::now());
            }
            if let Some(b) = stage_began
                && b.elapsed() >= c.delay
            {
                let mut state = journal_summary(n);
                match n.power_cut_racing_own_end()? {
                    BootEnd::PowerLoss => {}
                    // The node's own reboot won the race: the cut landed
                    // at the reboot, which the next boot must survive too.
                    BootEnd::Reboot => {
                        reboots.push(t0.elapsed());
                        state.push_str(" (the node rebooted by itself as the power was cut)");
                    }
                    other => bail!("the node went down by itself as the power was cut: {other:?}"),
                }
                return Ok(Follow::Cut { state });
            }
        }
        if down(n) {
            match n.wait_down(Duration::from_secs(30))? {
                BootEnd::Reboot => {
                    reboots.push(t0.elapsed());
                    if reboots.len() > 6 {
                        bail!("the node rebooted {} times", reboots.len());
                    }
                    n.boot()?;
                    continue;
                }
                other => bail!("the node went down by itself: {other:?}"),
            }
        }
        // kubelet starts only once kubelet.env is there, after every reboot.
        if kubelet_started(n) {
            n.wait_active_state("kubelet.service", "active", Duration::from_secs(30))?;
            return Ok(Follow::Converged);
        }
        if Instant::now() > deadline {
            bail!(
                "kubelet not started {timeout:?} after boot {}; journal: {}; console:\n{}",
                n.boots(),
                journal_summary(n),
                n.console()
            );
        }
        std::thread::sleep(Duration::from_millis(if cut.is_some() { 5 } else { 50 }));
    }
}

/// Whether an asset pull's staging dir exists (the pull is under way).
fn pulling(n: &SimNode) -> bool {
    std::fs::read_dir(n.path("/opt")).is_ok_and(|rd| {
        rd.flatten().any(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".tectonic.pull-")
        })
    })
}

/// The steps present in the state journal (any status).
fn journal_steps(n: &SimNode) -> Vec<String> {
    let Some(text) = n.read("/var/lib/node-bootstrap/state.json") else {
        return Vec::new();
    };
    serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v["steps"].as_object().map(|m| m.keys().cloned().collect()))
        .unwrap_or_default()
}

/// A stage of the first boot, as seen from outside the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The first boot is up (init-assets.service starts pulling).
    Boot1,
    /// The asset pull is under way (its staging dir exists).
    AssetsPull,
    /// The cluster-version step began (asking the API server).
    ClusterVersion,
    /// The os-update step began (update_engine downloading, ~1 s).
    OsUpdate,
    /// The docker-addon step began (the package download, ~2 s).
    DockerAddon,
    /// The reboot was requested (journal written, logind asked).
    Reboot,
    /// The second boot is up (update_engine switches the OS, the agent
    /// confirms the update).
    Boot2,
    /// The kubelet-env step began (the commit point being written).
    KubeletEnv,
}

impl Stage {
    pub const ALL: [Stage; 8] = [
        Stage::Boot1,
        Stage::AssetsPull,
        Stage::ClusterVersion,
        Stage::OsUpdate,
        Stage::DockerAddon,
        Stage::Reboot,
        Stage::Boot2,
        Stage::KubeletEnv,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Stage::Boot1 => "boot-1",
            Stage::AssetsPull => "assets-pull",
            Stage::ClusterVersion => "cluster-version",
            Stage::OsUpdate => "os-update",
            Stage::DockerAddon => "docker-addon",
            Stage::Reboot => "reboot",
            Stage::Boot2 => "boot-2",
            Stage::KubeletEnv => "kubelet-env",
        }
    }

    /// How long the stage typically lasts here: cut delays are drawn from
    /// `0..span`.
    pub fn span(self) -> Duration {
        Duration::from_millis(match self {
            Stage::Boot1 => 1000,
            Stage::AssetsPull => 2000,
            Stage::ClusterVersion => 300,
            Stage::OsUpdate => 1500,
            Stage::DockerAddon => 2500,
            Stage::Reboot => 300,
            Stage::Boot2 => 250,
            Stage::KubeletEnv => 30,
        })
    }

    fn reached(self, n: &SimNode, steps: &[String]) -> bool {
        let boots = n.boots();
        let has = |s: &str| steps.iter().any(|x| x == s);
        match self {
            Stage::Boot1 => boots >= 1,
            Stage::AssetsPull => boots == 1 && pulling(n),
            Stage::ClusterVersion => boots == 1 && has("cluster-version"),
            Stage::OsUpdate => boots == 1 && has("os-update"),
            Stage::DockerAddon => boots == 1 && has("docker-addon"),
            Stage::Reboot => boots == 1 && has("reboot"),
            Stage::Boot2 => boots >= 2,
            Stage::KubeletEnv => has("kubelet-env"),
        }
    }
}

/// Where to cut: `delay` after `stage` began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CutPoint {
    pub stage: Stage,
    pub delay: Duration,
}

/// `n` cut points cycling through the stages, with delays spread over each
/// stage's span (`offset` in `[0, 1)` shifts them, so repeated runs probe
/// different instants).
pub fn cut_points(n: usize, offset: f64) -> Vec<CutPoint> {
    let stages = Stage::ALL.len();
    let rounds = n.div_ceil(stages).max(1);
    (0..n)
        .map(|i| {
            let stage = Stage::ALL[i % stages];
            let round = i / stages;
            let frac = (round as f64 + offset.clamp(0.0, 0.999)) / rounds as f64;
            CutPoint {
                stage,
                delay: stage.span().mul_f64(frac),
            }
        })
        .collect()
}

/// What an operator would check on a node that says it is bootstrapped.
pub fn check(n: &SimNode) -> Vec<String> {
    let mut p = Vec::new();
    if !kubelet_active(n) {
        p.push("kubelet.service is not active".into());
    }
    match n.read("/etc/kubernetes/kubelet.env") {
        None => p.push("/etc/kubernetes/kubelet.env is missing".into()),
        Some(t) => {
            if let Err(e) = an::check_kubelet_env(&t, CLUSTER_VERSION, an::host_cgroup_driver()) {
                p.push(format!("kubelet.env: {e}"));
            }
        }
    }
    let want_start = an::kubelet_start_record(
        &CLUSTER_VERSION.replace('+', "_"),
        &an::flags_only_kubelet_args(an::host_cgroup_driver()),
    );
    let starts = n
        .read("/var/lib/kubelet-wrapper/starts")
        .unwrap_or_default();
    if starts.lines().count() == 0 {
        p.push("kubelet-wrapper never started".into());
    }
    for l in starts.lines() {
        if l != want_start {
            p.push(format!("kubelet started with {l:?}"));
        }
    }
    match n.read(an::OS_RELEASE) {
        Some(t)
            if t.lines()
                .any(|l| l == format!("VERSION_ID={NEW_OS_VERSION}")) => {}
        other => p.push(format!(
            "the OS update is not in effect: os-release {other:?}"
        )),
    }
    if n.exists("/var/lib/node-bootstrap/state.json.corrupt") {
        p.push("the state journal was found corrupt and moved aside".into());
    }
    match n.read("/var/lib/node-bootstrap/state.json") {
        None => p.push("no state journal".into()),
        Some(t) => match serde_json::from_str::<serde_json::Value>(&t) {
            Err(e) => p.push(format!("state journal unreadable: {e}")),
            Ok(v) => {
                for step in ["assets", "cluster-version", "os-update", "kubelet-env"] {
                    let st = v["steps"][step]["status"].as_str().unwrap_or("absent");
                    if st != "done" {
                        p.push(format!("journal step {step} is {st}"));
                    }
                }
                if v["steps"]["os-update"]["result"]["confirmed_in_boot"].is_null() {
                    p.push("the OS update was never confirmed after a reboot".into());
                }
            }
        },
    }
    p.extend(done_markers_without_work(n));
    p
}

/// Every `*.done` marker on the node's disk must stand for work that is
/// there: a complete marker file (written atomically, newline-terminated)
/// and, for the known markers, the thing it marks.
fn done_markers_without_work(n: &SimNode) -> Vec<String> {
    let mut p = Vec::new();
    let upper = n.upper();
    for path in crate::files::files_below(&upper) {
        if path.extension().is_some_and(|x| x == "done") {
            let inside = Path::new("/").join(path.strip_prefix(&upper).unwrap());
            let body = std::fs::read_to_string(&path).unwrap_or_default();
            if !body.is_empty() && !body.ends_with('\n') {
                p.push(format!("{} is torn: {body:?}", inside.display()));
            }
            let marks = match inside.to_str() {
                Some("/opt/init_assets.done") => Some("/opt/tectonic"),
                Some("/opt/tectonic/init_bootkube.done") => Some("/opt/tectonic/bootkube.sh"),
                Some("/opt/tectonic/init_tectonic.done") => {
                    Some("/opt/tectonic/tectonic-wrapper.sh")
                }
                _ => None,
            };
            if let Some(m) = marks
                && !upper.join(m.trim_start_matches('/')).exists()
            {
                p.push(format!("{} exists but {m} does not", inside.display()));
            }
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_points_visit_every_stage_and_spread_the_delays() {
        let v = cut_points(2 * Stage::ALL.len(), 0.5);
        for st in Stage::ALL {
            let d: Vec<Duration> = v
                .iter()
                .filter(|p| p.stage == st)
                .map(|p| p.delay)
                .collect();
            assert_eq!(
                d,
                vec![st.span().mul_f64(0.25), st.span().mul_f64(0.75)],
                "{st:?}"
            );
        }
        assert_eq!(cut_points(3, 0.0).len(), 3);
    }
}
