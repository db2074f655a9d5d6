//! What a round must show (the same checks in CI and in the benchmark)
//! and the benchmark's rows.

use super::Round;
use crate::report::Row;
use anyhow::{Result, bail};
use std::collections::BTreeSet;

/// The rules a round keeps, from the audit log and the simulated
/// kubelets; `Err` says which one broke. (The lease's history itself is
/// checked as the round is read: never more holders than `maxChanging`,
/// no take after a halt.)
pub fn verify(r: &Round) -> Result<()> {
    if r.node_lists > 0 {
        bail!(
            "nodes listed Nodes, or pods beyond their own, {} times",
            r.node_lists
        );
    }
    let w = r.waiting;
    if w.runs == 0 && (r.spec.max_changing == 1 || r.spec.fail_nth.is_some()) {
        bail!("no node ever waited: the round shows nothing of the waiting cost");
    }
    if w.max > 2 {
        bail!(
            "a waiting node asked {} things in one run (at most 2)",
            w.max
        );
    }
    let (lost, errors): (Vec<&str>, Vec<&str>) = r
        .runs
        .iter()
        .filter(|x| x.outcome.starts_with("error"))
        .map(|x| x.outcome.as_str())
        .partition(|o| connection_lost(o));
    // A run whose request got no answer at all (a connection the loaded
    // API server dropped) ends as a real node's would: retried at the
    // next run. A few are the shared machine's; more is a fault.
    if lost.len() > r.runs.len() / 100 + 1 {
        bail!(
            "{} of {} runs lost their connection: {:?}",
            lost.len(),
            r.runs.len(),
            &lost[..lost.len().min(3)]
        );
    }
    let errors = &errors[..errors.len().min(3)];
    let took: BTreeSet<&String> = r.history.takes.keys().collect();
    let restarted: BTreeSet<&String> = r.restarts.iter().map(|(n, _, _)| n).collect();
    if let Some(n) = restarted.iter().find(|n| !took.contains(**n)) {
        bail!("{n} restarted its kubelet without a place in the lease");
    }
    match &r.spec.fail_nth {
        None => {
            if r.at_target != r.nodes {
                bail!("{} of {} nodes at the target", r.at_target, r.nodes);
            }
            if let Some((n, k)) = r.history.takes.iter().find(|(_, k)| **k != 1) {
                bail!("{n} took a place {k} times");
            }
            if !errors.is_empty() {
                bail!("runs failed: {errors:?}");
            }
        }
        Some(_) => {
            let Some(failing) = &r.failing else {
                bail!("no node got the failing kubelet");
            };
            match &r.history.halted {
                Some((h, _)) if h == failing => {}
                other => bail!("the rollout did not halt at {failing}: {other:?}"),
            }
            if r.at_target >= r.nodes - 1 {
                bail!("the rollout went on past the failing node");
            }
        }
    }
    if r.history.max_holders > r.spec.max_changing as usize {
        bail!(
            "{} holders at once, maxChanging {}",
            r.history.max_holders,
            r.spec.max_changing
        );
    }
    Ok(())
}

/// A run that ended because a request got no answer
/// (`apiclient`'s transport errors), not for anything the API server said.
pub fn connection_lost(outcome: &str) -> bool {
    [": request failed: ", ": timed out: ", ": cannot connect: "]
        .iter()
        .any(|k| outcome.contains(k))
}

/// Runs that ended so ([`connection_lost`]).
pub fn lost_runs(r: &Round) -> usize {
    r.runs
        .iter()
        .filter(|x| connection_lost(&x.outcome))
        .count()
}

/// Mean seconds a node held its place (take to release, from the lease's
/// writes).
pub fn mean_hold(r: &Round) -> f64 {
    let spans: Vec<f64> = r
        .history
        .held
        .values()
        .filter_map(|(a, b)| b.map(|b| b - a))
        .collect();
    if spans.is_empty() {
        f64::NAN
    } else {
        spans.iter().sum::<f64>() / spans.len() as f64
    }
}

/// The benchmark's rows for round `r`.
pub fn rows(r: &Round) -> Vec<Row> {
    let s = &r.spec;
    let what = format!(
        "follow fleet {} nodes, maxChanging {}{}",
        r.nodes,
        s.max_changing,
        s.fail_nth
            .map(|n| format!(", restart #{n} fails"))
            .unwrap_or_default()
    );
    let took = r.took.as_secs_f64();
    let watched = r.watched.as_secs_f64();
    let hold = mean_hold(r);
    let changed = r.history.takes.len();
    let floor = (changed as f64 / f64::from(s.max_changing)).ceil() * hold;
    let w = r.waiting;
    let row =
        |name: String, ours: String, theirs: String, label: &str, target: &str, met: bool| Row {
            name,
            ours,
            theirs,
            theirs_label: label.into(),
            ratio: "-".into(),
            target: target.into(),
            met,
        };
    vec![
        Row {
            ratio: format!("{:.2}x", took / floor),
            ..row(
                format!("{what}: rollout (s)"),
                format!("{took:.1}"),
                format!("{floor:.1}"),
                &format!(
                    "{changed} changes / maxChanging x {hold:.2} s mean hold; the kubelet's restart to Ready {:.1} s",
                    s.change.as_secs_f64()
                ),
                "informational",
                true,
            )
        },
        row(
            format!("{what}: requests per waiting node per run"),
            format!(
                "{:.2} (max {}, {} runs); a try at a free place lost to another node: {:.1} ({} tries)",
                w.mean, w.max, w.runs, w.tries_mean, w.tries
            ),
            "2".into(),
            "target",
            "<= 2",
            w.max <= 2,
        ),
        row(
            format!("{what}: API server requests/s of the nodes; CPU (cores)"),
            format!(
                "{:.0}/s over {watched:.0} s; {:.2} kube-apiserver, {:.2} etcd; {} of {} runs lost a connection",
                r.node_requests as f64 / watched,
                r.apiserver_cpu / watched,
                r.etcd_cpu / watched,
                lost_runs(r),
                r.runs.len()
            ),
            format!(
                "{} nodes every {:.1}-{:.1} s",
                r.nodes,
                s.timer.as_secs_f64(),
                (s.timer + s.jitter).as_secs_f64()
            ),
            "timer",
            "informational",
            true,
        ),
        row(
            format!("{what}: most holders after any lease write (audit log)"),
            format!("{} of {} writes", r.history.max_holders, r.history.writes),
            s.max_changing.to_string(),
            "maxChanging",
            "<= maxChanging",
            r.history.max_holders <= s.max_changing as usize,
        ),
    ]
}
