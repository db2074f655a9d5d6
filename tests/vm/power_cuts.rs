//! Power cuts at the agent's writes in the first boots: before the reboot,
//! and right after kubelet.env, in one chain of boots (each cut in the
//! boot that recovers from the one before: one worker's five boots rather
//! than two workers' seven).

use crate::checks::*;
use crate::rig::*;
use crate::*;
use std::time::Instant;

/// Power cuts in the first boots, each in the boot that recovers from the
/// one before: (1) while update_engine installs the OS update, right after
/// the agent's unsynced journal write that starts the os-update step; the
/// journal that cut leaves is made empty if the cut did not make it so (a
/// state the agent is built for, see [`assert_nothing_partial`]), and the
/// next boot moves it aside; (2) in the docker addon step that follows the
/// OS update, once the mirror (slowed down) has started sending the
/// package and the guest holds part of it; (3) right after the durable
/// record before the agent's reboot, before the shutdown could wipe
/// docker's old datadir; (4) in the boot after it, right after
/// kubelet.env and the agent's last journal write. Each next boot picks
/// up the work and the last one starts kubelet on a complete node, the
/// agent skipped.
#[test]
fn power_cuts_in_the_first_boots_converge() {
    if skip(&["terraform", "ssh-keygen", "strip"]) {
        return;
    }
    let _turn = testkit::vm::slot();
    let t0 = Instant::now();
    let d = Delivery::new();
    let m = TorcxMirror::new();
    let mut vm = updating_worker(&d, &m);

    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();
    cut_when(&mut vm, "1: the OS update running", true, |j| {
        step_status(j, "os-update") == "running"
    });
    if !assert_nothing_partial(&vm, &m) {
        vm.disk().write(JOURNAL, "", 0o640).unwrap();
        eprintln!("vm {}: the state journal made empty", vm.name());
    }
    assert!(
        vm.read(testkit::vm::PENDING_UPDATE).is_none(),
        "the cut came before update_engine finished"
    );

    // The next boot moves the empty journal aside and runs the update
    // again; the docker download crawls.
    m.rig.server.set_rate(&m.next_path, Some(16 * 1024));
    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();
    assert_empty_journal_moved_aside(&mut vm);
    wait_download_under_way(&mut vm, &m);
    cut_when(&mut vm, "2: the docker addon downloading", true, |j| {
        step_status(j, "docker-addon") == "running"
    });
    let empty = assert_nothing_partial(&vm, &m);
    if empty {
        // What boot 2 moved aside must not stand in for what boot 3 does.
        vm.disk().remove(JOURNAL_ASIDE).unwrap();
    }
    assert!(
        !vm.exists(&m.stored()),
        "the cut came mid-download: no package under its final name"
    );
    assert_eq!(
        vm.read(testkit::vm::PENDING_UPDATE).unwrap().trim(),
        NEXT_OS,
        "update_engine's staged update survives"
    );

    // The next boot runs the new OS (the boot loader took the staged
    // update); the agent installs docker 17.03 for it and asks for the
    // reboot: cut right after that durable record.
    m.rig.server.set_rate(&m.next_path, None);
    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();
    if empty {
        assert_empty_journal_moved_aside(&mut vm);
    }
    let seen = cut_when(&mut vm, "3: the reboot requested", false, |j| {
        step_status(j, "reboot") == "running"
    });
    assert!(
        !assert_nothing_partial(&vm, &m),
        "the record before a reboot is durable, never empty"
    );
    let kept = state_journal(&vm).expect("the record before a reboot is durable");
    assert_eq!(kept["steps"]["reboot"], seen["steps"]["reboot"]);
    assert!(
        vm.exists("/var/lib/docker/image/marker"),
        "the cut came before the shutdown wiped docker's datadir"
    );
    assert!(
        vm.exists("/var/lib/node-bootstrap/docker-datadir-wipe-pending"),
        "the journal records a reboot that wipes docker's datadir: the owed wipe must be on disk with it"
    );

    // The next boot: the owed wipe happens, the changes are confirmed,
    // kubelet.env is written: cut right after it and the agent's last
    // journal write after it (the records of the confirmations and of
    // kubelet.env). That record is on disk after the cut (nothing would
    // ever redo it: later boots skip the agent).
    // No canary here (cuts 1 and 2 show that a cut loses the page cache):
    // the kubelet's start runs beside this cut, and a sync of the whole
    // filesystem by any of its processes writes the canary too (a
    // fresh-clone run, 2026-12-02, saw it survive this cut).
    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();
    let seen = cut_when(&mut vm, "4: kubelet.env written", false, |j| {
        step_status(j, "kubelet-env") == "done"
    });
    assert!(
        !assert_nothing_partial(&vm, &m),
        "the agent's last record is durable, never empty"
    );
    assert!(
        vm.exists("/etc/kubernetes/kubelet.env"),
        "kubelet.env is durable"
    );
    let kept = state_journal(&vm).expect("a state journal");
    assert_eq!(
        journal_summary(Some(&kept)),
        journal_summary(Some(&seen)),
        "the agent's last record, after kubelet.env, survives the cut"
    );

    // The last boot starts kubelet on a complete node, the agent skipped.
    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();
    assert_updated_and_complete(&vm, &m, CLUSTER_VERSION);
    assert!(
        !vm.exists("/var/lib/docker/image/marker"),
        "docker's old datadir survived into the new docker: the wipe the cut shutdown owed was not done"
    );
    assert_eq!(
        vm.prop("k8s-node-bootstrap.service", "ConditionResult")
            .unwrap(),
        "no",
        "kubelet.env is there: the agent is skipped"
    );
    // kubelet started in this boot, and at most once before the cut.
    let starts = lines(&vm, "/var/lib/kubelet-wrapper/starts").len();
    assert!((1..=2).contains(&starts), "kubelet started {starts} times");
    assert_eq!(vm.boots(), 5);
    vm.shutdown().unwrap();
    report(&vm, t0);
}
