//! Day two's rollout (`nb-bench follow`): the cluster of
//! `tests/node/follow_cluster.rs` (`testkit::follow`: a bootkube master and
//! three following workers, docker through kubelet-wrapper, containerd,
//! today's Flatcar with the kubelet sysext, a pod on each), the release
//! of the stand-in for 1.20.3 published for the workers, then the control
//! plane moved to it. Timed from the outside, from the API server
//! (`testkit::follow::Watch`, a look every half second): from the control
//! plane's change (its restart asked) to the last worker reporting the
//! new kubelet with the lease empty again; each worker's time holding the
//! follow lease, its Not-Ready window as the API server showed it, and the
//! agent's own count from the kubelet's restart to the Node Ready with the
//! new version (`status --json`, `follow.last_change.back_after_secs`).
//!
//! The timer is the tests' (a look every two seconds, two agreeing looks:
//! `testkit::follow::fast_timer`, `follow_config`); with the shipped
//! defaults (every five minutes, a minute of jitter, three agreeing looks)
//! a node starts at the earliest 10 to 16 minutes after the control
//! plane's change, and each node after it waits for its next run: the
//! default rollout of three nodes is dominated by the timer, not by the
//! change, and the table says so beside the measured one.

use crate::report::Row;
use anyhow::{Context as _, Result, bail};
use std::path::Path;
use std::time::{Duration, Instant};
use testkit::follow::{self, Release, WORKERS, Watch};

/// One rollout: the table's rows and a per-node breakdown (`STEPS\t…`).
pub fn bench(agent: &Path) -> Result<Vec<String>> {
    let standin = follow::next_patch_parts()?;
    let rig = follow::rig(agent)?;
    let t_boot = Instant::now();
    let nodes = follow::boot(&rig)?;
    let workers: Vec<&testkit::simnode::SimNode> = nodes[1..].iter().collect();
    follow::pod_on_each(&rig, &workers, "")?;
    eprintln!("follow: cluster up in {:?}", t_boot.elapsed());
    follow::publish_release(&rig, &follow::wrappers(&nodes), &[Release::Real(&standin)])?;
    let watch = Watch::start(&rig.kubectl);
    std::thread::sleep(Duration::from_secs(2));
    let t0 = Instant::now();
    let since_watch = t0 - watch.started;
    follow::move_control_plane(&rig, &nodes[0], &standin)?;
    let deadline = t0 + Duration::from_secs(600);
    loop {
        let h = watch.history();
        if let Some(last) = h.last()
            && WORKERS
                .iter()
                .all(|w| last.nodes.get(*w).is_some_and(|n| n.1 == standin.version))
            && last.holders.is_empty()
        {
            break;
        }
        if Instant::now() > deadline {
            bail!("the workers did not all follow within 10 minutes");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let history = watch.history();
    drop(watch);
    // Times relative to the control plane's change.
    let rel = |d: Duration| d.as_secs_f64() - since_watch.as_secs_f64();
    let done = history
        .iter()
        .find(|s| {
            WORKERS
                .iter()
                .all(|w| s.nodes.get(*w).is_some_and(|n| n.1 == standin.version))
                && s.holders.is_empty()
        })
        .map(|s| rel(s.at))
        .context("the watch never saw the rollout end")?;
    let mut rows = Vec::new();
    let mut floor = 0.0;
    let mut steps = Vec::new();
    for (w, n) in WORKERS.iter().zip(&workers) {
        let win = follow::windows(&history, w, &standin.version);
        let held: f64 = win
            .holding
            .iter()
            .map(|(a, b)| (*b - *a).as_secs_f64())
            .sum();
        // The windows of its own change (those that meet its holding): the
        // API server's restart can mark every node Unknown for a moment
        // before anyone changes (the node test saw it), not this row's.
        let not_ready: f64 = win
            .not_ready
            .iter()
            .filter(|nr| follow::overlap(&[**nr], &win.holding))
            .map(|(a, b)| (*b - *a).as_secs_f64() + 0.5)
            .sum::<f64>()
            + 0.0; // an empty sum of f64 is -0.0
        let out = n.exec(&["/opt/bin/node-bootstrap", "status", "--json"])?;
        let s: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        let back = s["follow"]["last_change"]["back_after_secs"]
            .as_f64()
            .unwrap_or(f64::NAN);
        floor += back;
        let first_held = win.holding.first().map_or(f64::NAN, |(a, _)| rel(*a));
        steps.push(format!(
            "STEPS\t{w}\tlease taken at {first_held:.1} s\theld {held:.1} s\tkubelet restart to Ready {back:.0} s (agent)\tNot Ready {not_ready:.1} s (API server)\tversion seen at {:.1} s",
            win.changed_at.map_or(f64::NAN, rel)
        ));
        rows.push(Row {
            name: format!("follow: {w} Not-Ready window as the API server showed it (s)"),
            ours: format!("{not_ready:.1}"),
            theirs: format!("{back:.0}"),
            theirs_label: "kubelet restart to Ready, agent's count".into(),
            ratio: "-".into(),
            target: "informational".into(),
            met: true,
        });
    }
    rows.insert(
        0,
        Row {
            name:
                "follow: control plane's change to the last of 3 workers following (s, 2 s timer)"
                    .into(),
            ours: format!("{done:.1}"),
            theirs: format!("{floor:.0}"),
            theirs_label: "one after the other, restart to Ready alone".into(),
            ratio: format!("{:.2}x", done / floor),
            target: "informational".into(),
            met: true,
        },
    );
    let mut lines: Vec<String> = rows.iter().map(Row::line).collect();
    lines.extend(steps);
    Ok(lines)
}
