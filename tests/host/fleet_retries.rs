//! Fleet behaviour: dozens of `node-bootstrap run` processes (the real
//! binary, each with its own config, state dir and kubeconfig) retry
//! `GET /version` against an API server stand-in that fails every request.
//! What an operator of a thousand nodes needs: the retries are bounded
//! (exactly `api_attempts` requests per node, then exit 3), and they spread
//! over the jitter window instead of arriving in waves.
//!
//! `nb-bench fleet` (benchkit, run by bench/run.sh) runs the same with hundreds of processes
//! and prints the request-rate histogram.

use std::time::Duration;
use testkit::fleet::{FleetFault, FleetOptions, FleetResult, run_fleet};

const NODES: usize = 60;

fn fleet(fault: FleetFault) -> FleetResult {
    let o = FleetOptions {
        agent: testkit::cli::agent_binary(),
        nodes: NODES,
        attempts: 3,
        initial_secs: 2,
        max_secs: 4,
        fault,
        // The outage hits every node at the same instant: the worst case.
        barrier: true,
    };
    run_fleet(&o).expect("the fleet runs")
}

fn skip() -> bool {
    // The processes need a private dbus-daemon (preflight checks the bus).
    testkit::fake_update_engine::skip_unless_bus()
}

/// Fraction of `xs` in the fullest of `n` equal slices of [0, 1].
fn fullest_slice(xs: &[f64], n: usize) -> f64 {
    let mut counts = vec![0usize; n];
    for &x in xs {
        counts[((x.clamp(0.0, 0.999_999)) * n as f64) as usize] += 1;
    }
    *counts.iter().max().unwrap() as f64 / xs.len() as f64
}

fn assert_bounded_and_clear(r: &FleetResult, what: &str) {
    let per = r.per_node();
    for (i, (t, end)) in per.iter().zip(&r.ends).enumerate() {
        assert_eq!(
            t.len(),
            3,
            "node {i} made {} requests, want exactly api_attempts = 3; stderr:\n{}",
            t.len(),
            end.stderr
        );
        assert_eq!(
            end.code,
            Some(3),
            "node {i} must exit 3 (retryable) after its attempts; stderr:\n{}",
            end.stderr
        );
        assert!(
            end.stderr.contains(what) && end.stderr.contains("failed after 3 attempts"),
            "node {i}'s error must name the fault ({what}) and the attempts; stderr:\n{}",
            end.stderr
        );
    }
}

#[test]
fn a_fleet_retrying_a_failing_api_server_spreads_its_retries_over_the_jitter_window() {
    if skip() {
        return;
    }
    let r = fleet(FleetFault::Status(503));
    eprintln!("{}", r.render_histogram(Duration::from_millis(100)));
    assert_bounded_and_clear(&r, "HTTP 503");

    for k in [1u32, 2] {
        let pos = r.window_positions(k);
        assert_eq!(pos.len(), NODES);
        let (min, max) = pos
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
        // Never earlier than half the step (the backoff's floor) ...
        assert!(
            min >= -0.01,
            "retry {k}: a node came back {:.0} ms before half the backoff step",
            -min * r.step(k).as_secs_f64() / 2.0 * 1000.0
        );
        // ... never much later than the step (slack for a loaded host) ...
        assert!(max <= 1.5, "retry {k}: a node waited {:.2} windows", max);
        // ... and spread over the whole window, not bunched.
        assert!(
            min < 0.2 && max > 0.8,
            "retry {k}: gaps span only [{min:.2}, {max:.2}] of the jitter window"
        );
        let fullest = fullest_slice(&pos, 4);
        assert!(
            fullest <= 0.5,
            "retry {k}: {:.0}% of the nodes came back in the same quarter of the window",
            fullest * 100.0
        );
    }

    // Seen from the server: no 100 ms bucket holds more than a quarter of
    // any retry round (in a wave, one bucket would hold most of it).
    let per = r.per_node();
    for k in [1usize, 2] {
        let mut buckets = std::collections::BTreeMap::<u128, usize>::new();
        for t in &per {
            *buckets.entry(t[k].at.as_millis() / 100).or_default() += 1;
        }
        let peak = *buckets.values().max().unwrap();
        assert!(
            peak * 4 <= NODES,
            "attempt {}: {peak} of {NODES} requests arrived in one 100 ms bucket\n{}",
            k + 1,
            r.render_histogram(Duration::from_millis(100))
        );
    }
}

/// An overloaded API server answers 429 with `Retry-After`. Every node must
/// wait at least that long, but if they all wait exactly that long, the
/// whole fleet comes back in one wave and overloads it again: the jitter
/// must survive `Retry-After`.
#[test]
fn retry_after_is_honoured_without_synchronising_the_fleet() {
    if skip() {
        return;
    }
    let r = fleet(FleetFault::StatusRetryAfter(429, 3));
    eprintln!("{}", r.render_histogram(Duration::from_millis(100)));
    assert_bounded_and_clear(&r, "HTTP 429");
    let gaps: Vec<f64> = r.waits(1).iter().map(Duration::as_secs_f64).collect();
    let (min, max) = gaps
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    assert!(
        min >= 3.0,
        "a node came back after {min:.3} s, before the server's Retry-After: 3"
    );
    assert!(
        max - min >= 0.5,
        "after Retry-After: 3 every node came back within {:.0} ms of the others (gaps {min:.3}..{max:.3} s): a synchronised wave",
        (max - min) * 1000.0
    );
}
