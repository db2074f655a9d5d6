//! Fleet behaviour: many `node-bootstrap run` processes on the host (no full
//! nodes; each with its own config, state dir and kubeconfig in a temp dir)
//! retrying against a failing API server stand-in that records when each
//! request arrived and from which process (each process authenticates with
//! its own bearer token `node-<i>`).
//!
//! Used by `tests/host/fleet_retries.rs` (a few dozen processes, asserting the
//! retries spread out) and by `nb-bench fleet` (`benchkit`: hundreds,
//! printing the request-rate histogram).
//!
//! The processes need a system bus for the agent's preflight check: a
//! private `dbus-daemon` with raised connection limits is started for them
//! (`DBUS_SYSTEM_BUS_ADDRESS`).

use crate::apiserver::{KubeAuth, Pki};
use anyhow::{Context as _, Result, bail};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How the stand-in fails every request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FleetFault {
    /// This HTTP status (e.g. 503).
    Status(u16),
    /// This status with `Retry-After: <secs>` (e.g. 429, 1).
    StatusRetryAfter(u16, u64),
}

/// One request the stand-in answered.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Arrival {
    /// When its request head arrived, since the fleet was started (the
    /// first process spawned).
    pub at: Duration,
    /// When it was answered (later than `at` while the barrier holds).
    pub answered: Duration,
    /// Which process (`node-<i>` token), if it sent one.
    pub node: Option<usize>,
}

#[derive(Debug, Clone)]
pub struct FleetOptions {
    /// The agent binary.
    pub agent: PathBuf,
    pub nodes: usize,
    /// `cluster.api_attempts`.
    pub attempts: u32,
    /// `cluster.api_retry_initial_secs`.
    pub initial_secs: u64,
    /// `cluster.api_retry_max_secs`.
    pub max_secs: u64,
    pub fault: FleetFault,
    /// Hold every request until each process's first request has arrived,
    /// then fail them all at once (an outage that hits the whole fleet at
    /// the same instant, the worst case for waves); without it the first
    /// attempts are spread by how fast the host starts the processes.
    pub barrier: bool,
}

/// How one process ended.
#[derive(Debug, Clone)]
pub struct ProcessEnd {
    pub code: Option<i32>,
    pub stderr: String,
}

#[derive(Debug, Clone)]
pub struct FleetResult {
    pub options: FleetOptions,
    pub arrivals: Vec<Arrival>,
    pub ends: Vec<ProcessEnd>,
    /// How long spawning all processes took.
    pub spawn_time: Duration,
    /// From the first spawn to the last exit.
    pub wall: Duration,
}

/// A private system bus with room for hundreds of connections, where
/// anyone may own any name (for the agent's preflight and a fake
/// update_engine).
pub struct FleetBus {
    child: Child,
    address: String,
}

impl FleetBus {
    /// Starts `dbus-daemon` with its socket and config in `dir`.
    pub fn start(dir: &Path) -> Result<FleetBus> {
        use std::io::BufRead;
        let sock = dir.join("system_bus_socket");
        let conf = dir.join("bus.conf");
        std::fs::write(
            &conf,
            format!(
                r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <auth>EXTERNAL</auth>
  <listen>unix:path={}</listen>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
  </policy>
  <limit name="max_completed_connections">100000</limit>
  <limit name="max_incomplete_connections">10000</limit>
  <limit name="max_connections_per_user">100000</limit>
  <limit name="auth_timeout">60000</limit>
</busconfig>
"#,
                sock.display()
            ),
        )?;
        let mut child = Command::new("dbus-daemon")
            .arg(format!("--config-file={}", conf.display()))
            .args(["--nofork", "--nopidfile", "--print-address=1"])
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.join("dbus-daemon.log"))?)
            .spawn()
            .context("starting dbus-daemon (package dbus)")?;
        let mut line = String::new();
        let stdout = child.stdout.take().context("dbus-daemon stdout")?;
        std::io::BufReader::new(stdout).read_line(&mut line)?;
        let address = line.trim().to_string();
        if address.is_empty() {
            let _ = child.kill();
            let st = child.wait()?;
            bail!("dbus-daemon did not start ({st})");
        }
        Ok(FleetBus { child, address })
    }
}

impl FleetBus {
    /// For `DBUS_SYSTEM_BUS_ADDRESS`.
    pub fn address(&self) -> &str {
        &self.address
    }
}

impl Drop for FleetBus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The failing API server stand-in: TLS with the [`Pki`]'s server
/// certificate, every request answered with the fault, each arrival logged.
pub struct FailingApiServer {
    addr: std::net::SocketAddr,
    log: Arc<Mutex<Vec<Arrival>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FailingApiServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FailingApiServer {
    /// Starts on 127.0.0.1 (inside a tokio runtime); arrival times count
    /// from `epoch`.
    /// With `barrier: Some(n)`, requests are held until `n` distinct
    /// processes have sent one (or 120 s passed).
    pub async fn start(
        pki: &Pki,
        fault: FleetFault,
        epoch: Instant,
        barrier: Option<usize>,
    ) -> Result<FailingApiServer> {
        let certs = vec![CertificateDer::from_pem_slice(
            pki.server.cert_pem.as_bytes(),
        )?];
        let key = PrivateKeyDer::from_pem_slice(pki.server.key_pem.as_bytes())?;
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(certs, key)?;
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let log = Arc::new(Mutex::new(Vec::new()));
        let log2 = log.clone();
        let gate = Arc::new(Gate {
            want: barrier.unwrap_or(0),
            seen: Mutex::new(std::collections::HashSet::new()),
            open: tokio::sync::Notify::new(),
            opened: std::sync::atomic::AtomicBool::new(barrier.is_none()),
        });
        let g = gate.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(120)).await;
            g.release();
        });
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let (acceptor, log, gate) = (acceptor.clone(), log2.clone(), gate.clone());
                tokio::spawn(async move {
                    let _ = serve(tcp, acceptor, fault, epoch, &log, &gate).await;
                });
            }
        });
        Ok(FailingApiServer { addr, log, task })
    }

    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    pub fn arrivals(&self) -> Vec<Arrival> {
        self.log.lock().unwrap().clone()
    }
}

/// Holds requests until enough processes have arrived.
struct Gate {
    want: usize,
    seen: Mutex<std::collections::HashSet<usize>>,
    open: tokio::sync::Notify,
    opened: std::sync::atomic::AtomicBool,
}

impl Gate {
    fn release(&self) {
        self.opened.store(true, std::sync::atomic::Ordering::SeqCst);
        self.open.notify_waiters();
    }

    async fn pass(&self, node: Option<usize>) {
        if self.opened.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let notified = self.open.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let full = {
            let mut seen = self.seen.lock().unwrap();
            if let Some(n) = node {
                seen.insert(n);
            }
            seen.len() >= self.want
        };
        if full {
            self.release();
            return;
        }
        if !self.opened.load(std::sync::atomic::Ordering::SeqCst) {
            notified.await;
        }
    }
}

async fn serve(
    tcp: tokio::net::TcpStream,
    acceptor: tokio_rustls::TlsAcceptor,
    fault: FleetFault,
    epoch: Instant,
    log: &Mutex<Vec<Arrival>>,
    gate: &Gate,
) -> Result<()> {
    let mut tls = acceptor.accept(tcp).await?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tls.read(&mut chunk).await?;
        if n == 0 || buf.len() > 64 * 1024 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let at = epoch.elapsed();
    let head = String::from_utf8_lossy(&buf);
    let node = head.split("\r\n").find_map(|l| {
        let (k, v) = l.split_once(':')?;
        if !k.trim().eq_ignore_ascii_case("authorization") {
            return None;
        }
        v.trim().strip_prefix("Bearer node-")?.parse().ok()
    });
    gate.pass(node).await;
    let answered = epoch.elapsed();
    log.lock().unwrap().push(Arrival { at, answered, node });
    let (code, extra) = match fault {
        FleetFault::Status(c) => (c, String::new()),
        FleetFault::StatusRetryAfter(c, s) => (c, format!("Retry-After: {s}\r\n")),
    };
    let body = format!(
        r#"{{"kind":"Status","apiVersion":"v1","metadata":{{}},"status":"Failure","message":"scripted failure","code":{code}}}"#
    );
    let resp = format!(
        "HTTP/1.1 {code} Failure\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n{body}",
        body.len()
    );
    tls.write_all(resp.as_bytes()).await?;
    let _ = tls.shutdown().await;
    Ok(())
}

fn write_node(dir: &Path, i: usize, pki: &Pki, url: &str, o: &FleetOptions) -> Result<PathBuf> {
    let kubeconfig = pki.kubeconfig(url, &KubeAuth::Token(format!("node-{i}")));
    let cluster = serde_json::json!({
        "api_attempts": o.attempts,
        "api_retry_initial_secs": o.initial_secs,
        "api_retry_max_secs": o.max_secs,
        "api_timeout_secs": 30,
    });
    agent_dir(&dir.join(format!("node-{i}")), &kubeconfig, cluster)
}

/// The files of one agent process of a fleet in `d` (seed kubelet.env,
/// os-release, `kubeconfig`, state and run dirs: a worker's, under `d`)
/// and its config with `cluster` as its `cluster` section; returns the
/// config's path (for `NODE_BOOTSTRAP_CONFIG`). Its kubelet.env lands at
/// `d/kubelet.env`.
pub fn agent_dir(d: &Path, kubeconfig: &str, cluster: serde_json::Value) -> Result<PathBuf> {
    std::fs::create_dir_all(d.join("installer"))?;
    std::fs::write(
        d.join("installer/kubelet.env"),
        crate::agentnode::SEED_KUBELET_ENV,
    )?;
    std::fs::write(d.join("os-release"), crate::agentnode::OS_RELEASE_TEXT)?;
    std::fs::write(d.join("kubeconfig"), kubeconfig)?;
    let p = |s: &str| d.join(s).display().to_string();
    let config = serde_json::json!({
        "role": "worker",
        "paths": {
            "kubelet_env": p("kubelet.env"),
            "kubelet_config": p("kubelet-config.yaml"),
            "seed_dir": p("installer"),
            "kubeconfig": p("kubeconfig"),
            "state_dir": p("state"),
            "run_dir": p("run"),
            "os_release": p("os-release"),
            "assets_dir": p("assets"),
        },
        "cluster": cluster,
    });
    let cfg = d.join("config.json");
    std::fs::write(&cfg, config.to_string())?;
    Ok(cfg)
}

/// Runs the fleet to its end: every process exits once its attempts are
/// used up (or is killed after a generous deadline, and reported so).
pub fn run_fleet(o: &FleetOptions) -> Result<FleetResult> {
    // The arrival times are the result: no private dockerd starting beside
    // the fleet in this process (see `crate::hostload`).
    let _quiet = crate::hostload::exclusive();
    let dir = tempfile::Builder::new().prefix("nb-fleet-").tempdir()?;
    let bus = FleetBus::start(dir.path())?;
    let rt = crate::server_runtime(2)?;
    let pki = Pki::generate();
    let epoch = Instant::now();
    let server = rt.block_on(FailingApiServer::start(
        &pki,
        o.fault,
        epoch,
        o.barrier.then_some(o.nodes),
    ))?;
    let configs = (0..o.nodes)
        .map(|i| write_node(dir.path(), i, &pki, &server.url(), o))
        .collect::<Result<Vec<_>>>()?;
    // The schedule's worst case, plus room for a loaded host.
    let policy_max: u64 = (1..o.attempts)
        .map(|a| (o.initial_secs << (a - 1).min(30)).min(o.max_secs))
        .sum();
    let deadline = Duration::from_secs(policy_max + 60 + o.nodes as u64 / 10);
    let start = Instant::now();
    let offset = start - epoch;
    let mut children = Vec::with_capacity(o.nodes);
    for (i, cfg) in configs.iter().enumerate() {
        let err = std::fs::File::create(dir.path().join(format!("node-{i}/stderr")))?;
        let child = Command::new(&o.agent)
            .arg("run")
            .env("NODE_BOOTSTRAP_CONFIG", cfg)
            .env("NODE_BOOTSTRAP_LOG_FORMAT", "text")
            .env("DBUS_SYSTEM_BUS_ADDRESS", &bus.address)
            .env_remove("JOURNAL_STREAM")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .with_context(|| format!("spawning {}", o.agent.display()))?;
        children.push(Some(child));
    }
    let spawn_time = start.elapsed();
    let mut codes: Vec<Option<Option<i32>>> = vec![None; o.nodes];
    while codes.iter().any(Option::is_none) {
        for (i, c) in children.iter_mut().enumerate() {
            if codes[i].is_some() {
                continue;
            }
            let child = c.as_mut().unwrap();
            if let Some(st) = child.try_wait()? {
                codes[i] = Some(st.code());
                *c = None;
            } else if start.elapsed() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                codes[i] = Some(None);
                *c = None;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let wall = start.elapsed();
    let ends = codes
        .into_iter()
        .enumerate()
        .map(|(i, code)| ProcessEnd {
            code: code.flatten(),
            stderr: std::fs::read_to_string(dir.path().join(format!("node-{i}/stderr")))
                .unwrap_or_default(),
        })
        .collect();
    // Times from the first spawn.
    let mut arrivals: Vec<Arrival> = server
        .arrivals()
        .into_iter()
        .map(|a| Arrival {
            at: a.at.saturating_sub(offset),
            answered: a.answered.saturating_sub(offset),
            node: a.node,
        })
        .collect();
    arrivals.sort_by_key(|a| a.at);
    drop(server);
    drop(rt);
    drop(bus);
    Ok(FleetResult {
        options: o.clone(),
        arrivals,
        ends,
        spawn_time,
        wall,
    })
}

impl FleetResult {
    /// Each process's requests, in order of arrival.
    pub fn per_node(&self) -> Vec<Vec<Arrival>> {
        let mut v = vec![Vec::new(); self.options.nodes];
        for a in &self.arrivals {
            if let Some(n) = a.node.filter(|n| *n < v.len()) {
                v[n].push(*a);
            }
        }
        v
    }

    /// For each process that made attempt `k + 1`: how long it waited
    /// between the answer to attempt `k` and sending attempt `k + 1`.
    pub fn waits(&self, k: u32) -> Vec<Duration> {
        let k = k as usize;
        self.per_node()
            .iter()
            .filter(|t| t.len() > k)
            .map(|t| t[k].at.saturating_sub(t[k - 1].answered))
            .collect()
    }

    /// The un-jittered backoff step after attempt `k` (from 1).
    pub fn step(&self, k: u32) -> Duration {
        let o = &self.options;
        Duration::from_secs((o.initial_secs << (k - 1).min(30)).min(o.max_secs))
    }

    /// For each process that made attempt `k + 1`: where in the jitter
    /// window `[step/2, step]` its wait after attempt `k` fell, as a
    /// fraction (0 = step/2, 1 = step; above 1 = later than the window: a
    /// loaded host, or the next connection's own set-up).
    pub fn window_positions(&self, k: u32) -> Vec<f64> {
        let half = self.step(k).as_secs_f64() / 2.0;
        self.waits(k)
            .iter()
            .map(|w| (w.as_secs_f64() - half) / half)
            .collect()
    }

    /// Requests per bucket from time 0.
    pub fn histogram(&self, bucket: Duration) -> Vec<usize> {
        let n = self
            .arrivals
            .last()
            .map_or(0, |a| (a.at.as_nanos() / bucket.as_nanos()) as usize + 1);
        let mut h = vec![0; n];
        for a in &self.arrivals {
            h[(a.at.as_nanos() / bucket.as_nanos()) as usize] += 1;
        }
        h
    }

    /// Requests per bucket of the retries only (attempt 2 and later).
    pub fn retry_histogram(&self, bucket: Duration) -> Vec<usize> {
        let per = self.per_node();
        let n = self
            .arrivals
            .last()
            .map_or(0, |a| (a.at.as_nanos() / bucket.as_nanos()) as usize + 1);
        let mut h = vec![0; n];
        for a in per.iter().flat_map(|t| t.iter().skip(1)) {
            h[(a.at.as_nanos() / bucket.as_nanos()) as usize] += 1;
        }
        h
    }

    /// The histogram as text: one line per bucket with a bar, the first
    /// attempts (`#`) and the retries (`+`) told apart.
    pub fn render_histogram(&self, bucket: Duration) -> String {
        let all = self.histogram(bucket);
        let retries = self.retry_histogram(bucket);
        let peak = all.iter().copied().max().unwrap_or(0).max(1);
        let width = 60usize;
        let mut out = format!(
            "requests per {} ms ({} processes, {} requests; '#' first attempts, '+' retries)\n",
            bucket.as_millis(),
            self.options.nodes,
            self.arrivals.len()
        );
        for (i, (&a, &r)) in all.iter().zip(&retries).enumerate() {
            let first = a - r;
            let scale = |x: usize| (x * width).div_ceil(peak);
            out.push_str(&format!(
                "{:>7.1}s {:>5} |{}{}\n",
                (i as u128 * bucket.as_millis()) as f64 / 1000.0,
                a,
                "#".repeat(scale(first)),
                "+".repeat(scale(a).saturating_sub(scale(first)))
            ));
        }
        out
    }
}
