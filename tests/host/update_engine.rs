//! The update_engine client against the stand-in
//! (`testkit::fake_update_engine`) on a private `dbus-daemon` configured like
//! the system bus with the shipped `com.coreos.update1.conf` policy.
//!
//! What an operator would check: "no update" and "update applied, reboot
//! pending" are told apart from a failure; an update_engine error or hang
//! ends in a clear, retryable error within the configured time instead of a
//! wedge; lost signals do not matter; a busy update_engine is followed rather
//! than poked; a pending reboot is found when updates are disabled.

use node_bootstrap::error::{ErrorClass, exit};
use node_bootstrap::os_update::config::OsUpdateSettings;
use node_bootstrap::os_update::{self, UpdateEngine, UpdateOutcome};
use std::time::{Duration, Instant};
use testkit::fake_update_engine::{
    FakeUpdateEngine, PrivateBus, Scenario, Script, skip_unless_bus,
};

fn settings(timeout_s: u64, stall_s: u64) -> OsUpdateSettings {
    OsUpdateSettings {
        enabled: true,
        timeout: Duration::from_secs(timeout_s),
        poll_interval: Duration::from_millis(100),
        stall_timeout: Duration::from_secs(stall_s),
    }
}

struct Rig {
    bus: PrivateBus,
    fake: FakeUpdateEngine,
    client: UpdateEngine,
    dir: tempfile::TempDir,
}

async fn rig_with(f: impl FnOnce(&mut Script)) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let bus = PrivateBus::start().unwrap();
    let mut script = Script::in_dir(dir.path(), &[Scenario::NoUpdate], 20);
    script.new_version = "1745.7.0".into();
    f(&mut script);
    let fake = FakeUpdateEngine::start(Some(bus.address()), script)
        .await
        .unwrap();
    let conn = bus.connect().await.unwrap();
    let client = UpdateEngine::new(&conn).await.unwrap();
    Rig {
        bus,
        fake,
        client,
        dir,
    }
}

async fn rig(attempts: &[Scenario]) -> Rig {
    let attempts = attempts.to_vec();
    rig_with(move |s| s.attempts = attempts).await
}

#[tokio::test]
async fn no_update_is_reported_as_such() {
    if skip_unless_bus() {
        return;
    }
    let r = rig(&[Scenario::NoUpdate]).await;
    let out = os_update::run_update(&r.client, &settings(10, 10))
        .await
        .unwrap();
    assert_eq!(out, UpdateOutcome::NoUpdate);
    assert_eq!(r.fake.calls().attempts_started, 1);
    assert_eq!(r.fake.status().current_operation, "UPDATE_STATUS_IDLE");
    assert_eq!(os_update::pending_reboot(&r.client).await.unwrap(), None);
}

#[tokio::test]
async fn applied_update_means_reboot_pending_with_the_new_version() {
    if skip_unless_bus() {
        return;
    }
    let r = rig(&[Scenario::Update]).await;
    let out = os_update::run_update(&r.client, &settings(10, 10))
        .await
        .unwrap();
    assert_eq!(
        out,
        UpdateOutcome::RebootPending {
            new_version: "1745.7.0".into()
        }
    );
    assert!(r.fake.calls().signals_emitted >= 10, "{:?}", r.fake.calls());
    // With updates disabled, a later run still learns the reboot is pending.
    assert_eq!(
        os_update::pending_reboot(&r.client)
            .await
            .unwrap()
            .as_deref(),
        Some("1745.7.0")
    );
    // A second run does not ask again: AttemptUpdate is pointless then.
    let out = os_update::run_update(&r.client, &settings(10, 10))
        .await
        .unwrap();
    assert!(matches!(out, UpdateOutcome::RebootPending { .. }));
    assert_eq!(r.fake.calls().attempt_update, 1);
}

#[tokio::test]
async fn update_engine_error_is_retryable_not_no_update() {
    if skip_unless_bus() {
        return;
    }
    for scenario in [Scenario::Error, Scenario::CheckError] {
        let r = rig(&[scenario]).await;
        let e = os_update::run_update(&r.client, &settings(10, 10))
            .await
            .unwrap_err();
        assert_eq!(e.class(), ErrorClass::Retryable, "{scenario:?}: {e}");
        assert_eq!(e.exit_code(), exit::RETRYABLE);
        assert_eq!(
            e.to_string(),
            "OS update failed: update_engine reported an error (UPDATE_STATUS_REPORTING_ERROR_EVENT) and went back to IDLE",
            "{scenario:?}"
        );
    }
}

#[tokio::test]
async fn error_then_success_on_the_next_run() {
    if skip_unless_bus() {
        return;
    }
    let r = rig(&[Scenario::Error, Scenario::Update]).await;
    assert!(
        os_update::run_update(&r.client, &settings(10, 10))
            .await
            .is_err()
    );
    let out = os_update::run_update(&r.client, &settings(10, 10))
        .await
        .unwrap();
    assert!(
        matches!(out, UpdateOutcome::RebootPending { .. }),
        "{out:?}"
    );
    assert_eq!(r.fake.calls().attempts_started, 2);
}

#[tokio::test]
async fn hang_times_out_within_the_configured_timeout() {
    if skip_unless_bus() {
        return;
    }
    let r = rig(&[Scenario::Hang]).await;
    let t0 = Instant::now();
    let e = os_update::run_update(&r.client, &settings(1, 60))
        .await
        .unwrap_err();
    let took = t0.elapsed();
    // Within the timeout plus scheduling slack on a loaded machine.
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(2),
        "{took:?}"
    );
    assert_eq!(e.class(), ErrorClass::Retryable);
    assert_eq!(
        e.to_string(),
        "update_engine did not finish within 1s (os_update.timeout_secs); last status UPDATE_STATUS_DOWNLOADING (10% of 123456789 bytes)"
    );
}

#[tokio::test]
async fn hang_without_progress_hits_the_stall_timeout_first() {
    if skip_unless_bus() {
        return;
    }
    let r = rig(&[Scenario::Hang]).await;
    let t0 = Instant::now();
    let e = os_update::run_update(&r.client, &settings(60, 1))
        .await
        .unwrap_err();
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(2),
        "{took:?}"
    );
    assert_eq!(e.class(), ErrorClass::Retryable);
    assert!(
        e.to_string()
            .starts_with("update_engine made no progress for 1s (os_update.stall_timeout_secs); status UPDATE_STATUS_DOWNLOADING"),
        "{e}"
    );
}

#[tokio::test]
async fn dropped_signals_still_complete_through_the_poll() {
    if skip_unless_bus() {
        return;
    }
    let r = rig(&[Scenario::DropSignals]).await;
    let out = os_update::run_update(&r.client, &settings(10, 10))
        .await
        .unwrap();
    assert_eq!(
        out,
        UpdateOutcome::RebootPending {
            new_version: "1745.7.0".into()
        }
    );
    assert_eq!(r.fake.calls().signals_emitted, 0);
    assert!(r.fake.calls().get_status >= 3, "{:?}", r.fake.calls());
}

#[tokio::test]
async fn without_signals_a_fast_check_is_judged_by_the_check_time() {
    if skip_unless_bus() {
        return;
    }
    // Steps of 1 ms: the 100 ms poll only ever sees IDLE.
    let r = rig_with(|s| {
        s.emit_signals = false;
        s.step_ms = 1;
        s.attempts = vec![Scenario::NoUpdate, Scenario::CheckError];
    })
    .await;
    // A successful check moved last_checked_time: no update.
    let out = os_update::run_update(&r.client, &settings(10, 10))
        .await
        .unwrap();
    assert_eq!(out, UpdateOutcome::NoUpdate);
    // A failed check leaves it: not "no update", but a clear failure.
    let t0 = Instant::now();
    let e = os_update::run_update(&r.client, &settings(10, 10))
        .await
        .unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert_eq!(e.class(), ErrorClass::Retryable);
    assert!(
        e.to_string().contains("stayed IDLE") && e.to_string().contains("after AttemptUpdate"),
        "{e}"
    );
}

#[tokio::test]
async fn busy_engine_is_followed_not_poked() {
    if skip_unless_bus() {
        return;
    }
    // update_engine's own check is applying an update when we arrive.
    let r = rig_with(|s| {
        s.startup = Some(Scenario::Update);
        s.attempts = vec![Scenario::NoUpdate];
    })
    .await;
    assert_ne!(r.fake.status().current_operation, "UPDATE_STATUS_IDLE");
    let out = os_update::run_update(&r.client, &settings(10, 10))
        .await
        .unwrap();
    assert_eq!(
        out,
        UpdateOutcome::RebootPending {
            new_version: "1745.7.0".into()
        }
    );
    assert_eq!(
        r.fake.calls().attempt_update,
        0,
        "AttemptUpdate would be ignored"
    );

    // Its own check finds nothing: then we ask, and our attempt counts.
    let r = rig_with(|s| {
        s.startup = Some(Scenario::NoUpdate);
        s.step_ms = 300;
        s.attempts = vec![Scenario::Update];
    })
    .await;
    let out = os_update::run_update(&r.client, &settings(10, 10))
        .await
        .unwrap();
    assert!(
        matches!(out, UpdateOutcome::RebootPending { .. }),
        "{out:?}"
    );
    assert_eq!(r.fake.calls().attempts_started, 1);
}

#[tokio::test]
async fn attempt_update_while_busy_is_ignored_by_the_engine() {
    if skip_unless_bus() {
        return;
    }
    // The stand-in follows the real rule: the raw call changes nothing.
    let r = rig(&[Scenario::Hang]).await;
    r.client.attempt_update().await.unwrap();
    let s1 = r.client.get_status().await.unwrap();
    assert_eq!(
        s1.current_operation,
        os_update::UpdateStatus::CheckingForUpdate
    );
    r.client.attempt_update().await.unwrap();
    assert_eq!(r.fake.calls().attempt_update, 2);
    assert_eq!(r.fake.calls().attempts_started, 1);
    // ResetStatus is refused while busy, as in the real engine.
    let e = r.client.reset_status().await.unwrap_err();
    assert!(e.to_string().contains("Reset not allowed"), "{e}");
}

#[tokio::test]
async fn reboot_marker_from_before_a_restart_means_pending() {
    if skip_unless_bus() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("run")).unwrap();
    std::fs::write(dir.path().join("run/need-reboot"), "").unwrap();
    let bus = PrivateBus::start().unwrap();
    let fake = FakeUpdateEngine::start(
        Some(bus.address()),
        Script::in_dir(dir.path(), &[Scenario::Update], 20),
    )
    .await
    .unwrap();
    let client = UpdateEngine::new(&bus.connect().await.unwrap())
        .await
        .unwrap();
    // The real daemon forgets the version across a restart: "0.0.0".
    assert_eq!(
        os_update::pending_reboot(&client).await.unwrap().as_deref(),
        Some("0.0.0")
    );
    let out = os_update::run_update(&client, &settings(10, 10))
        .await
        .unwrap();
    assert_eq!(
        out,
        UpdateOutcome::RebootPending {
            new_version: "0.0.0".into()
        }
    );
    assert_eq!(fake.calls().attempt_update, 0);
}

#[tokio::test]
async fn missing_update_engine_is_a_clear_retryable_error() {
    if skip_unless_bus() {
        return;
    }
    let bus = PrivateBus::start().unwrap();
    let client = UpdateEngine::new(&bus.connect().await.unwrap())
        .await
        .unwrap();
    let e = os_update::pending_reboot(&client).await.unwrap_err();
    assert_eq!(e.class(), ErrorClass::Retryable);
    assert!(
        e.to_string().starts_with(
            "update_engine (com.coreos.update1) is not running on the system bus: GetStatus"
        ),
        "{e}"
    );
    let e = os_update::run_update(&client, &settings(5, 5))
        .await
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::Retryable, "{e}");
}

#[tokio::test]
async fn engine_disappearing_mid_update_is_retryable() {
    if skip_unless_bus() {
        return;
    }
    let r = rig_with(|s| {
        s.attempts = vec![Scenario::Update];
        s.step_ms = 200;
    })
    .await;
    let Rig {
        bus,
        fake,
        client,
        dir,
    } = r;
    let stopper = async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        fake.stop().await;
    };
    let s = settings(10, 10);
    let (res, ()) = tokio::join!(os_update::run_update(&client, &s), stopper);
    let e = res.unwrap_err();
    assert_eq!(e.class(), ErrorClass::Retryable);
    assert!(
        e.to_string().contains("not running on the system bus"),
        "{e}"
    );
    drop((bus, dir));
}

#[tokio::test]
async fn binary_simulates_the_ab_switch_on_the_next_boot() {
    if skip_unless_bus() {
        return;
    }
    let bin = testkit::built_binary("fake-update-engine");
    let dir = tempfile::tempdir().unwrap();
    let osr = dir.path().join("os-release");
    std::fs::write(&osr, "ID=flatcar\nVERSION=1632.3.0\nVERSION_ID=1632.3.0\n").unwrap();
    let bus = PrivateBus::start().unwrap();
    let spawn = || {
        std::process::Command::new(&bin)
            .args([
                "--address",
                bus.address(),
                "--scenario",
                "update",
                "--step-ms",
                "20",
            ])
            .args(["--new-version", "1745.7.0"])
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .arg("--run-dir")
            .arg(dir.path().join("run"))
            .arg("--apply-pending-os-release")
            .arg(&osr)
            .spawn()
            .unwrap()
    };
    let conn = bus.connect().await.unwrap();
    let client = UpdateEngine::new(&conn).await.unwrap();
    let ready = async |client: &UpdateEngine| {
        let t0 = Instant::now();
        loop {
            match client.get_status().await {
                Ok(s) => return s,
                Err(e) if t0.elapsed() > Duration::from_secs(10) => panic!("not ready: {e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    };

    // First boot: the update is applied; os-release is unchanged until reboot.
    let mut child = Child(spawn());
    ready(&client).await;
    let out = os_update::run_update(&client, &settings(10, 10))
        .await
        .unwrap();
    assert_eq!(
        out,
        UpdateOutcome::RebootPending {
            new_version: "1745.7.0".into()
        }
    );
    assert!(
        std::fs::read_to_string(&osr)
            .unwrap()
            .contains("VERSION_ID=1632.3.0")
    );
    // Restarted within the same boot: still pending, nothing applied.
    child.stop();
    child = Child(spawn());
    assert_eq!(
        ready(&client).await.current_operation,
        os_update::UpdateStatus::UpdatedNeedReboot
    );
    assert!(
        std::fs::read_to_string(&osr)
            .unwrap()
            .contains("VERSION_ID=1632.3.0")
    );
    child.stop();

    // "Reboot": /run is fresh. The stand-in switches the OS version.
    std::fs::remove_dir_all(dir.path().join("run")).unwrap();
    child = Child(spawn());
    let s = ready(&client).await;
    assert_eq!(s.current_operation, os_update::UpdateStatus::Idle);
    assert_eq!(
        std::fs::read_to_string(&osr).unwrap(),
        "ID=flatcar\nVERSION=1745.7.0\nVERSION_ID=1745.7.0\n"
    );
    assert!(!dir.path().join("state/pending").exists());
    assert_eq!(os_update::pending_reboot(&client).await.unwrap(), None);
    child.stop();
}

/// Kills the child on drop (also when an assertion fails).
struct Child(std::process::Child);

impl Child {
    fn stop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.0.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.0.wait();
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
