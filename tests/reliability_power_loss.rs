//! Power loss during a full first boot (cluster version from the API
//! server stand-in, OS update through the fake update_engine, reboot,
//! kubelet.env), on a simulated node running the real agent: at each cut
//! point the node's PID 1 is SIGKILLed, the node is booted again, and it
//! must converge to kubelet running with a complete kubelet.env, the update
//! in effect, a readable state journal with every step done, and no `.done`
//! marker for work that is not there (checks in
//! `testkit::bench_powerloss::check`).
//!
//! A handful of points here; `bench/soak.sh` runs many more.

use testkit::bench_powerloss::{PowerLossRig, Stage, cut_points};
use testkit::simnode::skip_unless_possible;

/// Cut points in this test (bench/soak.sh: `SOAK_POINTS`, at least 30).
/// One per stage of the first boot.
const POINTS: usize = Stage::ALL.len();

#[test]
fn power_cut_at_any_point_of_the_first_boot_converges_to_a_running_kubelet() {
    if skip_unless_possible("power_cut_converges") {
        return;
    }
    let rig = PowerLossRig::new(
        &testkit::built_binary("node-bootstrap"),
        &testkit::built_binary("fake-update-engine"),
    )
    .unwrap();
    let (timeline, reference) = rig.reference("pl-ref").unwrap();
    eprintln!(
        "reference first boot: reboots at {:?}, kubelet active at {:.2}s",
        timeline.reboots,
        timeline.kubelet_active.as_secs_f64()
    );
    assert!(
        reference.ok(),
        "the uncut first boot: {:?}",
        reference.problems
    );
    assert_eq!(
        timeline.reboots.len(),
        1,
        "an OS update needs exactly one reboot"
    );
    let offset = fastrand::f64();
    eprintln!("cut delay offset {offset:.3} (of a stage's span)");
    let mut failed = Vec::new();
    for (i, point) in cut_points(POINTS, offset).into_iter().enumerate() {
        let r = rig.run_point(&format!("pl-{i}"), point).unwrap();
        eprintln!("point {}/{POINTS}: {}", i + 1, r.line());
        if !r.ok() {
            failed.push(r.line());
        }
    }
    assert!(
        failed.is_empty(),
        "points that did not converge cleanly:\n{}",
        failed.join("\n")
    );
}
