//! The table of where first boot to Ready goes, per runtime: the
//! [`Timeline`]s of several runs merged row by row (a row is a segment's
//! boot, owner and label; a run without it counts 0), each row's median and
//! its share of the median first boot to Ready. With a second agent (A/B),
//! its medians stand beside the first's.
//!
//! Printed as `STEPS\t…` lines, which `bench/run.sh` shows after its table.

use crate::report::median;
use crate::timeline::{Owner, Segment, Timeline};

/// The rows, in the order they first appear.
fn keys(runs: &[&[Timeline]]) -> Vec<(usize, Owner, String)> {
    let mut keys: Vec<(usize, Owner, String)> = Vec::new();
    for t in runs.iter().flat_map(|r| r.iter()) {
        for s in t.segments.iter().chain(&t.waits) {
            let k = (s.boot, s.owner, s.label.clone());
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    // The "of which" rows (boot 0) go last.
    keys.sort_by_key(|k| k.0 == 0);
    keys
}

fn row_median(runs: &[Timeline], key: &(usize, Owner, String)) -> f64 {
    let of = |segs: &[Segment]| -> f64 {
        segs.iter()
            .filter(|s| s.boot == key.0 && s.owner == key.1 && s.label == key.2)
            .map(|s| s.secs)
            .sum()
    };
    median(
        &runs
            .iter()
            .map(|t| of(&t.segments) + of(&t.waits))
            .collect::<Vec<_>>(),
    )
}

/// The medians a table needs of one agent's runs.
struct Summary {
    total: f64,
    agent: f64,
}

fn summary(runs: &[Timeline]) -> Summary {
    Summary {
        total: median(&runs.iter().map(|t| t.total).collect::<Vec<_>>()),
        agent: median(&runs.iter().map(Timeline::agent_total).collect::<Vec<_>>()),
    }
}

fn pct(x: f64, of: f64) -> String {
    format!("{:.1}%", 100.0 * x / of)
}

/// The `STEPS` lines of one runtime's table: `a` the runs of the agent
/// measured (with `b`, a second agent's, beside it).
pub fn table(title: &str, a: &[Timeline], b: Option<&[Timeline]>) -> Vec<String> {
    let mut lines = Vec::new();
    let sa = summary(a);
    let mut head = format!(
        "{title}, median of {}: first boot to Ready {:.2} s, the agent {:.2} s ({})",
        a.len(),
        sa.total,
        sa.agent,
        pct(sa.agent, sa.total)
    );
    if let Some(b) = b {
        let sb = summary(b);
        head += &format!(
            "; B: {:.2} s, the agent {:.2} s ({})",
            sb.total,
            sb.agent,
            pct(sb.agent, sb.total)
        );
    }
    lines.push(head);
    let mut cols = "boot\towner\tsegment\ts\tshare".to_string();
    if b.is_some() {
        cols += "\tB s\tB share\tB - A";
    }
    lines.push(cols);
    let all: Vec<&[Timeline]> = std::iter::once(a).chain(b).collect();
    for key in keys(&all) {
        let (boot, owner, label) = &key;
        let ma = row_median(a, &key);
        let (boot, label) = if *boot == 0 {
            ("-".to_string(), format!("  of which: {label}"))
        } else {
            (boot.to_string(), label.clone())
        };
        let mut line = format!(
            "{boot}\t{}\t{label}\t{ma:.3}\t{}",
            owner.name(),
            pct(ma, sa.total)
        );
        if let Some(b) = b {
            let mb = row_median(b, &key);
            line += &format!("\t{mb:.3}\t{}\t{:+.3}", pct(mb, summary(b).total), mb - ma);
        }
        lines.push(line);
    }
    let mut total = format!(
        "-\tagent\tthe agent in all\t{:.3}\t{}",
        sa.agent,
        pct(sa.agent, sa.total)
    );
    if let Some(b) = b {
        let sb = summary(b);
        total += &format!(
            "\t{:.3}\t{}\t{:+.3}",
            sb.agent,
            pct(sb.agent, sb.total),
            sb.agent - sa.agent
        );
    }
    lines.push(total);
    lines.into_iter().map(|l| format!("STEPS\t{l}")).collect()
}
