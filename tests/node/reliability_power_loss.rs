//! Power loss during a full first boot (asset pull from S3, cluster
//! version from the API server stand-in, OS update through the fake
//! update_engine, docker addon download, one reboot wiping docker's
//! datadir, kubelet.env), on a simulated node running the real agent: at
//! each cut point (one per stage of the boot, at a random delay into it)
//! the node's PID 1 is SIGKILLed, the node is booted again, and it must
//! converge to kubelet running with a complete kubelet.env, the update and
//! docker 17.03 in effect, store and assets identical to what was
//! published, a readable state journal with every step done, and no
//! `.done` marker for work that is not there (`PowerLossRig::check`).
//!
//! A handful of points here; `bench/soak.sh` runs many more.

use testkit::powerloss::{CutPoint, PointReport, PowerLossRig, Stage, cut_points};
use testkit::simnode::skip_unless_possible;

/// Cut points in this test (bench/soak.sh: `SOAK_POINTS`, at least 30).
/// One per stage of the first boot.
const POINTS: usize = Stage::ALL.len();

#[test]
fn power_cut_at_any_point_of_the_first_boot_converges_to_a_running_kubelet() {
    if skip_unless_possible()
        || testkit::s3::skip_unless_s3()
        || testkit::torcx::skip_unless_available()
    {
        return;
    }
    let rig = PowerLossRig::new(
        &testkit::cli::agent_binary(),
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
        "the OS update and the docker change need exactly one reboot"
    );
    let offset = fastrand::f64();
    eprintln!("cut delay offset {offset:.3} (of a stage's span)");
    let mut failed = Vec::new();
    let mut skipped = 0;
    for (i, point) in cut_points(POINTS, offset).into_iter().enumerate() {
        let r = cut_within_the_stage(&rig, i, point);
        if r.skipped() {
            skipped += 1;
        }
        if !r.ok() {
            failed.push(r.line());
        }
    }
    assert!(
        failed.is_empty(),
        "points that did not converge cleanly:\n{}",
        failed.join("\n")
    );
    assert!(
        skipped <= 1,
        "{skipped} of {POINTS} points came after kubelet started: the stages are not covered"
    );
}

/// Runs `point`; when the node was faster than the stage's span (kubelet
/// started before the delay was up, so nothing was cut: the last stages
/// of a fast second boot last a few hundred milliseconds), runs it again
/// at a quarter of the delay, down to none, so that every stage gets its
/// cut whatever the machine's speed and the random offset.
fn cut_within_the_stage(rig: &PowerLossRig, i: usize, mut point: CutPoint) -> PointReport {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let r = rig.run_point(&format!("pl-{i}-{attempt}"), point).unwrap();
        eprintln!("point {}/{POINTS}: {}", i + 1, r.line());
        if !r.skipped() || point.delay.is_zero() {
            return r;
        }
        point.delay /= 4;
        if point.delay < std::time::Duration::from_millis(5) {
            point.delay = std::time::Duration::ZERO;
        }
        eprintln!(
            "point {}/{POINTS}: again, {} ms into the stage",
            i + 1,
            point.delay.as_millis()
        );
    }
}

/// Power lost after the agent asked for the reboot (the docker datadir
/// cleanup unit is installed, in /run) but before the shutdown ran it: the
/// next boot is the reboot, torcx starts docker 17.03, and docker's datadir
/// must still be wiped before it runs on 1.12's data (the original wiped it
/// for exactly this reason). The cleanup unit is lost with the power, but
/// the wipe it owed is recorded on disk, and the next boot's `run` wipes
/// before it confirms docker 17.03 and writes kubelet.env
/// (docs/security-review.md, finding 7).
#[test]
fn power_cut_between_the_reboot_request_and_the_shutdown_still_wipes_dockers_datadir() {
    if skip_unless_possible()
        || testkit::s3::skip_unless_s3()
        || testkit::torcx::skip_unless_available()
    {
        return;
    }
    let rig = PowerLossRig::new(
        &testkit::cli::agent_binary(),
        &testkit::built_binary("fake-update-engine"),
    )
    .unwrap();
    let r = rig
        .run_point(
            "pl-datadir",
            CutPoint {
                stage: Stage::Reboot,
                delay: std::time::Duration::from_millis(50),
            },
        )
        .unwrap();
    eprintln!("{}", r.line());
    assert_eq!(
        r.cut_in_boot,
        1,
        "the cut must land before the reboot: {}",
        r.line()
    );
    assert!(r.ok(), "{}", r.line());
}
