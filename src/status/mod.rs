//! `node-bootstrap status`: where this node stands and why, in one screen.
//!
//! It reads, never guesses: systemd over D-Bus (the flow's units: load,
//! active and sub state, result, restarts, since when, skipped by a
//! condition), the state journal (each step done/running/failed/pending/
//! interrupted with timestamps and the last error), kubelet.env (values
//! shown, secret-looking ones redacted), the `.done` markers and asset
//! scripts, the torcx next profile, the running Docker version and
//! update_engine's status. Each probe has a short timeout; one that cannot
//! read its source says "could not reach X: why" and the rest still shows.
//!
//! # Verdict rules ([`verdict::assess`], a pure function of [`facts::Facts`])
//! 1. **failed** if any of:
//!    - `k8s-node-bootstrap.service` is `failed` (a unit about to restart
//!      is `activating/auto-restart`, so `failed` means systemd gave up:
//!      `RestartPreventExitStatus=` or a stopped unit);
//!    - on the bootkube master, for a step whose `.done` is absent:
//!      `bootkube|tectonic.service` is `failed`, or its path unit is
//!      `failed`, or the journal's `helper/<step>` record is `failed` and the
//!      service is not `activating`/`active` (nothing is retrying it);
//!    - systemd unreachable, kubelet.env absent, and a flow step's record is
//!      `failed` with a non-retryable error class (config, bad-input,
//!      refused, internal).
//! 2. **complete** if not failed and: systemd was reached, kubelet.env
//!    exists, `kubelet.service` is `active`, and on the bootkube master both
//!    `init_bootkube.done` and `init_tectonic.done` exist.
//! 3. **unknown** if not failed, and systemd could not be reached *and* the
//!    state journal is missing or corrupt: nothing authoritative was read.
//! 4. **in-progress** otherwise. Without systemd (but with a journal) the
//!    node is never reported complete: kubelet's state cannot be confirmed.
//!
//! Exit codes: complete 0, in-progress 10, failed 11, unknown 12
//! ([`crate::error::exit`]). `--json` prints the [`Report`]
//! (docs/status-json.md, `schema_version` 1). `--watch` redraws until the
//! verdict changes; `--wait [--timeout S]` blocks until complete or failed
//! (default timeout 3600 s), printing a progress line whenever what the
//! node waits for changes. `--ready` (with any of them) also asks for the
//! node Ready in the cluster: complete only then, failed when the
//! kubelet's certificate request was refused ([`verdict::assess_with`]).
//!
//! Once kubelet.env exists, `status` also asks the API server about this
//! node (the join, [`crate::join`]): with the kubelet's own identity, or
//! the bootstrap token while TLS bootstrapping has not earned it one.

pub mod facts;
pub mod probe;
pub mod render;
pub mod verdict;

use crate::error::Result;
use facts::Facts;
use serde::Serialize;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::{Duration, Instant};
use verdict::{Assessment, Verdict};

/// Version of the `--json` schema (docs/status-json.md).
pub const SCHEMA_VERSION: u32 = 1;
/// Default `--wait` timeout.
pub const DEFAULT_WAIT_SECS: u64 = 3600;
/// How often `--watch` and `--wait` look again.
pub const POLL: Duration = Duration::from_secs(2);

/// The whole report (the `--json` document).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema_version: u32,
    pub generated_at: String,
    #[serde(flatten)]
    pub assessment: Assessment,
    pub summary: String,
    pub exit_code: u8,
    /// `--ready`: complete only once the node is Ready in the cluster.
    pub node_ready_required: bool,
    #[serde(flatten)]
    pub facts: Facts,
    /// How long reading the node took.
    pub elapsed_ms: u64,
}

impl Report {
    /// The report on `facts`, with `req` beyond the default rules (`--ready`).
    pub fn with(facts: Facts, elapsed: Duration, req: verdict::Require) -> Report {
        let assessment = verdict::assess_with(&facts, req);
        Report {
            schema_version: SCHEMA_VERSION,
            generated_at: crate::clock::now_rfc3339(),
            summary: assessment.summary(),
            exit_code: assessment.verdict.exit_code(),
            assessment,
            node_ready_required: req.node_ready,
            facts,
            elapsed_ms: elapsed.as_millis() as u64,
        }
    }
    pub fn verdict(&self) -> Verdict {
        self.assessment.verdict
    }
}

/// Reads the node once.
pub async fn report(config_path: &Path, timeout: Duration, req: verdict::Require) -> Report {
    let t0 = Instant::now();
    let loaded = probe::LoadedConfig::load(config_path);
    let facts = probe::collect(&loaded, timeout).await;
    Report::with(facts, t0.elapsed(), req)
}

/// Options of the `status` command.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub json: bool,
    pub watch: bool,
    pub wait: bool,
    pub timeout: Option<u64>,
    /// Complete only once the node is Ready in the cluster (`--ready`).
    pub ready: bool,
}

impl Options {
    fn require(&self) -> verdict::Require {
        verdict::Require {
            node_ready: self.ready,
        }
    }
}

fn print_json(r: &Report) {
    let mut out = std::io::stdout().lock();
    let _ = serde_json::to_writer_pretty(&mut out, r);
    let _ = writeln!(out);
    let _ = out.flush();
}

/// Runs `status` and returns its exit code (by verdict).
pub fn main(config_path: &Path, opts: &Options) -> Result<u8> {
    let rt = crate::async_runtime::current_thread()?;
    rt.block_on(async {
        if opts.wait {
            return Ok(wait(config_path, opts).await);
        }
        let r = report(config_path, probe::PROBE_TIMEOUT, opts.require()).await;
        if !opts.watch {
            if opts.json {
                print_json(&r);
            } else {
                print!("{}", render::text(&r));
            }
            return Ok(r.exit_code);
        }
        Ok(watch(config_path, opts, r).await)
    })
}

async fn watch(config_path: &Path, opts: &Options, first: Report) -> u8 {
    let tty = std::io::stdout().is_terminal();
    let start = first.verdict();
    let mut r = first;
    loop {
        if opts.json {
            // One document per line, so a consumer reads them as they come.
            println!("{}", serde_json::to_string(&r).unwrap_or_default());
        } else {
            if tty {
                print!("\x1b[H\x1b[2J");
            }
            print!("{}", render::text(&r));
            if r.verdict() == start {
                println!(
                    "\n(watching; redraws every {}s until the verdict changes)",
                    POLL.as_secs()
                );
            }
        }
        let _ = std::io::stdout().flush();
        if r.verdict() != start {
            return r.exit_code;
        }
        tokio::time::sleep(POLL).await;
        r = report(config_path, probe::PROBE_TIMEOUT, opts.require()).await;
    }
}

async fn wait(config_path: &Path, opts: &Options) -> u8 {
    let limit = Duration::from_secs(opts.timeout.unwrap_or(DEFAULT_WAIT_SECS));
    let t0 = Instant::now();
    let mut last = String::new();
    loop {
        let r = report(config_path, probe::PROBE_TIMEOUT, opts.require()).await;
        let line = r.summary.clone();
        if line != last {
            eprintln!("[{:>5}s] {line}", t0.elapsed().as_secs());
            last = line;
        }
        let timed_out = t0.elapsed() >= limit;
        if r.verdict().is_final() || timed_out {
            if timed_out && !r.verdict().is_final() {
                eprintln!(
                    "node-bootstrap status: gave up waiting after {}s; the node is still {}",
                    limit.as_secs(),
                    r.verdict().as_str()
                );
            }
            if opts.json {
                print_json(&r);
            } else {
                print!("{}", render::text(&r));
            }
            // What the join showed goes to the metrics this wait publishes
            // (a node that joined after `run` stopped watching clears its
            // alert here).
            if let Some(j) = &r.facts.join {
                crate::metrics::record::join_observed(j.state, j.ready);
            }
            return r.exit_code;
        }
        let left = limit.saturating_sub(t0.elapsed());
        tokio::time::sleep(POLL.min(left)).await;
    }
}
