//! Where a worker's first boot to Ready goes: its journal (every boot,
//! `journalctl -o json`: microsecond timestamps on the host's clock) and
//! what the watch of its Node saw ([`crate::nodewatch::Milestones`]) cut
//! into consecutive segments from the first boot's start to Ready, each
//! owned by one party, so that they add up to the whole:
//!
//! - `node`: the simulated node's systemd booting until it runs the agent,
//!   the reboot (shutdown, the next PID 1), systemd starting the kubelet
//!   after the agent's `READY=1`;
//! - `agent`: each `run` process from systemd's start job (`Starting
//!   k8s-node-bootstrap.service`: fork and exec are in it) to `READY=1`
//!   (systemd's `Started`), or to its reboot request; inside it, one
//!   segment per step (from the agent's `step started`/`step done` log
//!   records and the records in between, which carry `STEP=`);
//! - `kubelet`: its start to the Node registered, registered to the Ready
//!   condition True;
//! - `control plane`: the condition to the `node.kubernetes.io/not-ready`
//!   taint lifted.
//!
//! Some segments wait on others inside; those waits are given as "of
//! which" rows ([`Timeline::waits`]), not part of the sum: in the agent's
//! steps the API server's answer, the package download, containerd's
//! start job, the kubelet extension's download, check and merge; in the
//! kubelet's start to registration its way to its container manager
//! (the client certificate, cAdvisor), and after registration the
//! network add-on's CNI list.

use crate::nodewatch::Milestones;
use anyhow::{Context as _, Result, bail};
use serde_json::Value;

/// Who a segment's time belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Owner {
    Node,
    Agent,
    Kubelet,
    ControlPlane,
}

impl Owner {
    pub fn name(self) -> &'static str {
        match self {
            Owner::Node => "node",
            Owner::Agent => "agent",
            Owner::Kubelet => "kubelet",
            Owner::ControlPlane => "control plane",
        }
    }
}

/// One consecutive piece of the way to Ready.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// The boot it is in (1 = the first; the node's and the kubelet's
    /// segments after the agent are in the last).
    pub boot: usize,
    pub owner: Owner,
    /// What it is, e.g. "docker-addon" or "reboot: shutdown, next boot to the agent".
    pub label: String,
    pub secs: f64,
}

/// A worker's way to Ready, cut into segments (module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    pub segments: Vec<Segment>,
    /// Waits inside the agent's segments ("of which" rows).
    pub waits: Vec<Segment>,
    pub total: f64,
}

const AGENT_UNIT: &str = "k8s-node-bootstrap.service";
const KUBELET_UNIT: &str = "kubelet.service";
/// systemd's catalog ids: a unit's start job begins / ends.
const JOB_STARTING: &str = "7d4958e842da4a758f6c1cdc7b36dcc5";
const JOB_DONE: &str = "39f53479d3a045ac8e11786248231fbf";

/// One journal record, as far as the timeline reads it.
#[derive(Debug, Clone)]
struct Rec {
    at: f64,
    pid: String,
    comm: String,
    /// The unit a PID 1 record is about (`UNIT=`), or the sender's unit.
    unit: String,
    message_id: String,
    step: String,
    message: String,
}

impl Rec {
    fn of(v: &Value) -> Option<Rec> {
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        let at = v["__REALTIME_TIMESTAMP"].as_str()?.parse::<u64>().ok()? as f64 / 1e6;
        let message = match &v["MESSAGE"] {
            Value::String(m) => m.clone(),
            Value::Array(bytes) => String::from_utf8_lossy(
                &bytes
                    .iter()
                    .filter_map(|b| b.as_u64().map(|b| b as u8))
                    .collect::<Vec<_>>(),
            )
            .into_owned(),
            _ => String::new(),
        };
        let pid = s("_PID");
        let unit = if pid == "1" {
            s("UNIT")
        } else {
            s("_SYSTEMD_UNIT")
        };
        Some(Rec {
            at,
            pid,
            comm: s("_COMM"),
            unit,
            message_id: s("MESSAGE_ID"),
            step: s("STEP"),
            message,
        })
    }
    fn job(&self, unit: &str, id: &str) -> bool {
        self.pid == "1" && self.unit == unit && self.message_id == id
    }
    fn agent(&self) -> bool {
        self.unit == AGENT_UNIT && self.comm == "node-bootstrap"
    }
    fn kubelet(&self) -> bool {
        self.unit == KUBELET_UNIT && self.pid != "1"
    }
}

/// `STEP=` values of records that belong to whichever step runs them (the
/// metadata search of the kubelet's and the addon's images), not flow
/// steps of their own.
const SUB_STEPS: &[&str] = &["metadata"];

/// Where the agent's records put the time of one process.
#[derive(Debug, Clone, Copy, PartialEq)]
enum State<'a> {
    /// systemd forked and exec'd it; no log line yet.
    ProcessStart,
    /// `run` started: lock, preflight, the system bus, the boot id.
    Preamble,
    Between,
    Inside(&'a str),
}

/// The label of the time before agent record `r`, given the state before
/// it; and the state after it.
fn label<'a>(state: State<'a>, r: &'a Rec) -> (String, State<'a>) {
    let flow_step = !r.step.is_empty() && r.step != "run" && !SUB_STEPS.contains(&r.step.as_str());
    let label = match state {
        State::ProcessStart => "run: process start (exec to its first log line)".to_string(),
        State::Preamble => "run: start (lock, preflight, system bus, boot id)".to_string(),
        State::Inside(s) => s.to_string(),
        // Work logged under a step without its `step started` (the
        // confirmations after a reboot) belongs to that step.
        State::Between if flow_step => r.step.clone(),
        // kubelet.env is in place: the agent tells systemd READY=1, then
        // writes its last record durably beside kubelet's start.
        State::Between if r.message.starts_with("node bootstrapped") => {
            "run: READY=1 to systemd".to_string()
        }
        State::Between => "run: between steps".to_string(),
    };
    let next = if r.message == "node-bootstrap run started" {
        State::Preamble
    } else if r.message == "step done" || r.message == "step failed" {
        State::Between
    } else if flow_step {
        State::Inside(&r.step)
    } else {
        state
    };
    (label, next)
}

/// Adds `secs` to the segment `label` of `owner`, merging with the last
/// one when it has the same label (one row per step and process).
fn push(segments: &mut Vec<Segment>, boot: usize, owner: Owner, label: &str, secs: f64) {
    if let Some(last) = segments.last_mut()
        && last.boot == boot
        && last.owner == owner
        && last.label == label
    {
        last.secs += secs;
        return;
    }
    segments.push(Segment {
        boot,
        owner,
        label: label.to_string(),
        secs,
    });
}

impl Timeline {
    /// The timeline of a worker whose first boot began at `t0` (host clock,
    /// seconds since the epoch), from its journal records and what the
    /// watch saw.
    pub fn of(t0: f64, journal: &[Value], seen: &Milestones) -> Result<Timeline> {
        let recs = records(journal);
        let mut segments = Vec::new();
        let mut now = t0;
        let mut boot = 1;
        // Whether the agent started, and whether its process asked for
        // the reboot (the rest of that boot is the node's).
        let mut started = false;
        let mut rebooting = false;
        let mut ready_at = None;
        let mut state = State::ProcessStart;
        for r in &recs {
            if r.job(AGENT_UNIT, JOB_STARTING) {
                // (A simulated node's boots share the host kernel's boot
                // id: a start after the reboot request is the next boot.)
                let (owner, what) = match (started, rebooting) {
                    (false, _) => (Owner::Node, "boot to the agent's start"),
                    (true, true) => {
                        boot += 1;
                        (
                            Owner::Node,
                            "reboot: shutdown, next boot to the agent's start",
                        )
                    }
                    (true, false) => (Owner::Agent, "run: failed, restarted (RestartSec)"),
                };
                push(&mut segments, boot, owner, what, r.at - now);
                now = r.at;
                started = true;
                rebooting = false;
                state = State::ProcessStart;
            } else if r.agent() && started && !rebooting {
                let (l, next) = label(state, r);
                push(&mut segments, boot, Owner::Agent, &l, r.at - now);
                now = r.at;
                state = next;
                rebooting = r.message.starts_with("reboot requested");
            } else if r.job(AGENT_UNIT, JOB_DONE) {
                if !started {
                    bail!("the agent never ran (its unit's start job ended without it)");
                }
                push(
                    &mut segments,
                    boot,
                    Owner::Agent,
                    "run: READY=1 to systemd",
                    r.at - now,
                );
                now = r.at;
                ready_at = Some(r.at);
                break;
            }
        }
        let ready_at = ready_at.context("systemd never saw the agent's READY=1")?;
        let kubelet = recs
            .iter()
            .find(|r| r.at >= ready_at && r.job(KUBELET_UNIT, JOB_STARTING))
            .context("no start of kubelet.service after the agent's READY=1")?;
        push(
            &mut segments,
            boot,
            Owner::Node,
            "READY=1 to kubelet's start",
            kubelet.at - now,
        );
        let mut t = Self::finish(segments, boot, kubelet.at, seen, t0)?;
        t.waits = waits(&recs);
        Ok(t)
    }

    /// The timeline of a worker with nothing to bootstrap: no agent.
    pub fn of_floor(t0: f64, journal: &[Value], seen: &Milestones) -> Result<Timeline> {
        let recs = records(journal);
        let kubelet = recs
            .iter()
            .find(|r| r.job(KUBELET_UNIT, JOB_STARTING))
            .context("no start of kubelet.service")?;
        let mut segments = Vec::new();
        push(
            &mut segments,
            1,
            Owner::Node,
            "boot to kubelet's start",
            kubelet.at - t0,
        );
        let mut t = Self::finish(segments, 1, kubelet.at, seen, t0)?;
        t.waits = waits(&recs);
        Ok(t)
    }

    /// The kubelet's and the control plane's segments, after kubelet's
    /// start at `kubelet`.
    fn finish(
        mut segments: Vec<Segment>,
        boot: usize,
        kubelet: f64,
        seen: &Milestones,
        t0: f64,
    ) -> Result<Timeline> {
        let registered = seen.registered.context("the Node was never seen")?;
        let condition = seen.ready_condition.context("never seen Ready")?;
        let usable = seen.usable.context("never seen Ready and untainted")?;
        let s = &mut segments;
        push(
            s,
            boot,
            Owner::Kubelet,
            "kubelet: start to Node registered",
            registered - kubelet,
        );
        push(
            s,
            boot,
            Owner::Kubelet,
            "kubelet: registered to Ready condition",
            condition - registered,
        );
        push(
            s,
            boot,
            Owner::ControlPlane,
            "Ready condition to the not-ready taint lifted",
            usable - condition,
        );
        Ok(Timeline {
            segments,
            waits: Vec::new(),
            total: usable - t0,
        })
    }

    /// Seconds the agent's segments take.
    pub fn agent_total(&self) -> f64 {
        self.segments
            .iter()
            .filter(|s| s.owner == Owner::Agent)
            .map(|s| s.secs)
            .sum()
    }
}

/// The records, in time order.
fn records(journal: &[Value]) -> Vec<Rec> {
    let mut recs: Vec<Rec> = journal.iter().filter_map(Rec::of).collect();
    recs.sort_by(|a, b| a.at.total_cmp(&b.at));
    recs
}

/// A wait inside the agent's steps: from the first record `begins` to the
/// next `ends`, summed over every such pair.
struct Wait {
    owner: Owner,
    label: &'static str,
    begins: fn(&Rec) -> bool,
    ends: fn(&Rec) -> bool,
}

/// The API server's answer to `/version`, the package download (with its
/// hashing), containerd's start job (systemd starting it, containerd until
/// it is ready), and the kubelet extension's parts: its download and
/// hashes, the image check (a loop mount and the image's kubelet
/// `--version`), `systemd-sysext refresh`, the merged kubelet's
/// `--version` (both transient units).
const WAITS: [Wait; 9] = [
    Wait {
        owner: Owner::Agent,
        label: "cluster-version: GET /version (TLS included)",
        begins: |r| r.agent() && r.message == "asking the API server for the cluster version",
        ends: |r| r.agent() && r.message == "cluster version from the API server",
    },
    Wait {
        owner: Owner::Agent,
        label: "docker-addon: package download and its SHA-512",
        begins: |r| r.agent() && r.message == "downloading package",
        ends: |r| r.agent() && r.message == "package fetched and verified",
    },
    Wait {
        owner: Owner::Agent,
        label: "containerd: containerd.service's start job",
        begins: |r| r.job("containerd.service", JOB_STARTING),
        ends: |r| r.job("containerd.service", JOB_DONE),
    },
    Wait {
        owner: Owner::Agent,
        label: "kubelet-sysext: the image's download, SHA-256 and SHA-512",
        begins: |r| r.agent() && r.message == "kubelet image chosen",
        ends: |r| {
            r.agent() && r.step == "kubelet-sysext" && r.message == "package fetched and verified"
        },
    },
    Wait {
        owner: Owner::Agent,
        label: "kubelet-sysext: the image checked (loop mount, its kubelet --version)",
        begins: |r| {
            r.agent() && r.step == "kubelet-sysext" && r.message == "package fetched and verified"
        },
        ends: |r| r.agent() && r.message == "the image is one systemd-sysext merges here",
    },
    Wait {
        owner: Owner::Agent,
        label: "kubelet-sysext: systemd-sysext refresh (a transient unit)",
        begins: |r| {
            r.pid == "1"
                && r.message_id == JOB_STARTING
                && r.unit.starts_with("node-bootstrap-sysext-refresh-")
        },
        ends: |r| r.agent() && r.message == "systemd-sysext refresh merged the extensions",
    },
    Wait {
        owner: Owner::Agent,
        label: "kubelet-sysext: the merged kubelet's --version (a transient unit)",
        begins: |r| r.agent() && r.message == "systemd-sysext refresh merged the extensions",
        ends: |r| r.agent() && r.step == "kubelet-sysext" && r.message == "image merged",
    },
    Wait {
        owner: Owner::Kubelet,
        label: "kubelet: its lock file to its container manager (client certificate, cAdvisor)",
        begins: |r| r.kubelet() && r.message.contains("acquiring file lock"),
        ends: |r| r.kubelet() && r.message.contains("Creating Container Manager object"),
    },
    Wait {
        owner: Owner::Kubelet,
        label: "kubelet: registered to the network add-on's CNI list (the rig's add-on)",
        begins: |r| r.kubelet() && r.message.contains("Successfully registered node"),
        ends: |r| {
            r.unit == "nb-test-pod-network.service" && r.message.starts_with("pod network: node")
        },
    },
];

fn waits(recs: &[Rec]) -> Vec<Segment> {
    let mut out = Vec::new();
    for w in &WAITS {
        let mut secs = 0.0;
        let mut open: Option<f64> = None;
        for r in recs {
            if open.is_none() && (w.begins)(r) {
                open = Some(r.at);
            } else if let Some(b) = open
                && (w.ends)(r)
            {
                secs += r.at - b;
                open = None;
            }
        }
        if secs > 0.0 {
            out.push(Segment {
                boot: 0,
                owner: w.owner,
                label: w.label.into(),
                secs,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The records the timeline reads of a real run's journal (`nb-bench
    /// node-ready` with `NB_BENCH_DUMP`, trimmed to the agent's records
    /// and systemd's start jobs of its unit, kubelet's and containerd's).
    fn fixture(name: &str) -> Vec<Value> {
        let text = match name {
            "docker" => include_str!("fixtures/ready-docker-0.jsonl"),
            "containerd" => include_str!("fixtures/ready-containerd-0.jsonl"),
            "sysext" => include_str!("fixtures/ready-sysext-0.jsonl"),
            "floor-kubelet" => include_str!("fixtures/floor-containerd-kubelet-0.jsonl"),
            _ => include_str!("fixtures/floor-containerd-0.jsonl"),
        };
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn first(journal: &[Value]) -> f64 {
        records(journal)[0].at
    }

    fn kubelet_start(journal: &[Value]) -> f64 {
        records(journal)
            .iter()
            .rev()
            .find(|r| r.job(KUBELET_UNIT, JOB_STARTING))
            .unwrap()
            .at
    }

    fn seen(kubelet: f64) -> Milestones {
        Milestones {
            registered: Some(kubelet + 2.0),
            ready_condition: Some(kubelet + 11.0),
            usable: Some(kubelet + 11.5),
            ready_since: None,
            not_ready_reasons: Vec::new(),
        }
    }

    fn labels(t: &Timeline) -> Vec<String> {
        t.segments
            .iter()
            .map(|s| format!("{} {} {}", s.boot, s.owner.name(), s.label))
            .collect()
    }

    #[test]
    fn a_docker_worker_splits_into_its_boots_and_steps_and_adds_up() {
        let j = fixture("docker");
        let t0 = first(&j) - 0.3;
        let t = Timeline::of(t0, &j, &seen(kubelet_start(&j))).unwrap();
        assert_eq!(
            labels(&t),
            [
                "1 node boot to the agent's start",
                "1 agent run: process start (exec to its first log line)",
                "1 agent run: start (lock, preflight, system bus, boot id)",
                "1 agent assets",
                "1 agent cluster-version",
                "1 agent runtime",
                "1 agent os-update",
                "1 agent docker-addon",
                "1 agent reboot",
                "2 node reboot: shutdown, next boot to the agent's start",
                "2 agent run: process start (exec to its first log line)",
                "2 agent run: start (lock, preflight, system bus, boot id)",
                "2 agent assets",
                "2 agent docker-addon",
                "2 agent reboot",
                "2 agent kubelet-env",
                "2 agent run: READY=1 to systemd",
                "2 node READY=1 to kubelet's start",
                "2 kubelet kubelet: start to Node registered",
                "2 kubelet kubelet: registered to Ready condition",
                "2 control plane Ready condition to the not-ready taint lifted",
            ]
        );
        let sum: f64 = t.segments.iter().map(|s| s.secs).sum();
        assert!((sum - t.total).abs() < 1e-6, "{sum} != {}", t.total);
        assert!(t.segments.iter().all(|s| s.secs >= 0.0), "{t:?}");
        // This run: the agent from its first start (0.33 s into the
        // journal) to its reboot request (2.19 s), and again from 5.86 s
        // to READY=1 at 6.00 s.
        assert!((t.agent_total() - 2.0).abs() < 0.01, "{}", t.agent_total());
        let wait = |l: &str| {
            t.waits
                .iter()
                .find(|w| w.label.starts_with(l))
                .unwrap()
                .secs
        };
        assert!((wait("cluster-version") - 0.144).abs() < 0.01, "{t:?}");
        assert!((wait("docker-addon") - 0.448).abs() < 0.01, "{t:?}");
    }

    #[test]
    fn a_containerd_worker_boots_once_and_waits_for_containerd_inside_its_step() {
        let j = fixture("containerd");
        let t = Timeline::of(first(&j), &j, &seen(kubelet_start(&j))).unwrap();
        let l = labels(&t);
        assert!(l.contains(&"1 agent containerd".to_string()), "{l:?}");
        assert!(!l.iter().any(|l| l.contains("reboot")), "{l:?}");
        assert!((t.agent_total() - 0.65).abs() < 0.01, "{}", t.agent_total());
        let start_job = t
            .waits
            .iter()
            .find(|w| w.label.starts_with("containerd"))
            .unwrap();
        assert!((start_job.secs - 0.135).abs() < 0.01, "{start_job:?}");
        let sum: f64 = t.segments.iter().map(|s| s.secs).sum();
        assert!((sum - t.total).abs() < 1e-6);
    }

    #[test]
    fn a_sysext_worker_has_its_kubelet_step_whole_and_its_parts_as_waits() {
        let j = fixture("sysext");
        let t = Timeline::of(first(&j), &j, &seen(kubelet_start(&j))).unwrap();
        let l = labels(&t);
        // The metadata search is part of the step, not a step of its own.
        assert!(l.contains(&"1 agent kubelet-sysext".to_string()), "{l:?}");
        assert!(!l.iter().any(|l| l.contains("metadata")), "{l:?}");
        let step = t
            .segments
            .iter()
            .find(|s| s.label == "kubelet-sysext")
            .unwrap()
            .secs;
        // This run: 0.455 s to 2.097 s into the journal.
        assert!((step - 1.642).abs() < 0.01, "{step}");
        let wait = |l: &str| {
            t.waits
                .iter()
                .find(|w| w.label.starts_with(l))
                .unwrap_or_else(|| panic!("no wait {l}: {:?}", t.waits))
                .secs
        };
        let parts = [
            ("kubelet-sysext: the image's download", 0.975),
            ("kubelet-sysext: the image checked", 0.214),
            ("kubelet-sysext: systemd-sysext refresh", 0.095),
            ("kubelet-sysext: the merged kubelet", 0.298),
        ];
        for (label, secs) in parts {
            assert!(
                (wait(label) - secs).abs() < 0.01,
                "{label}: {}",
                wait(label)
            );
        }
        let sum: f64 = parts.iter().map(|(l, _)| wait(l)).sum();
        assert!(sum < step, "{sum} of {step}");
        let sum: f64 = t.segments.iter().map(|s| s.secs).sum();
        assert!((sum - t.total).abs() < 1e-6);
    }

    #[test]
    fn the_kubelets_start_and_the_network_add_on_are_of_which_rows() {
        // A containerd worker's kubelet 1.20 (its records at default
        // verbosity, and the rig's network add-on's).
        let j = fixture("floor-kubelet");
        let t = Timeline::of_floor(first(&j), &j, &seen(kubelet_start(&j))).unwrap();
        let wait = |l: &str| {
            t.waits
                .iter()
                .find(|w| w.label.starts_with(l) && w.owner == Owner::Kubelet)
                .unwrap_or_else(|| panic!("no wait {l}: {:?}", t.waits))
                .secs
        };
        // 5.0 s of cAdvisor waiting for a docker that is not there.
        assert!(
            (wait("kubelet: its lock file") - 5.015).abs() < 0.01,
            "{t:?}"
        );
        assert!(
            (wait("kubelet: registered to the network") - 0.358).abs() < 0.01,
            "{t:?}"
        );
        assert_eq!(t.agent_total(), 0.0);
    }

    #[test]
    fn a_worker_with_nothing_to_bootstrap_has_no_agent_time() {
        let j = fixture("floor");
        let t = Timeline::of_floor(first(&j), &j, &seen(kubelet_start(&j))).unwrap();
        assert_eq!(t.agent_total(), 0.0);
        assert_eq!(t.segments[0].label, "boot to kubelet's start");
        assert!((t.total - (kubelet_start(&j) + 11.5 - first(&j))).abs() < 1e-6);
        // An agent that never said READY=1 is no timeline of a bootstrap.
        assert!(Timeline::of(first(&j), &j, &seen(kubelet_start(&j))).is_err());
    }
}
