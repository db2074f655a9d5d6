//! Power cuts at the agent's writes in the first boots: before the reboot,
//! and right after kubelet.env.

use crate::checks::*;
use crate::rig::*;
use crate::*;
use std::time::Instant;
use testkit::vm::BootEnd;

/// Power cuts in the first boots, each in the boot that recovers from the
/// one before: (1) while update_engine installs the OS update, right after
/// the agent's unsynced journal write that starts the os-update step; the
/// journal that cut leaves is made empty if the cut did not make it so (a
/// state the agent is built for, see [`assert_nothing_partial`]), and the
/// next boot moves it aside; (2) in the docker addon step that follows the
/// OS update, once the mirror (slowed down) has started sending the
/// package and the guest holds part of it; (3) right after the durable
/// record before the agent's reboot, before the shutdown could wipe
/// docker's old datadir. Each next boot picks up the work and the last one
/// completes the node.
#[test]
fn power_cuts_before_the_reboot_converge() {
    if skip(&["terraform", "ssh-keygen", "strip"]) {
        return;
    }
    let _one_at_a_time = testkit::vm::exclusive();
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
    // kubelet.env is written.
    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();
    assert_updated_and_complete(&vm, &m, CLUSTER_VERSION);
    assert!(
        !vm.exists("/var/lib/docker/image/marker"),
        "docker's old datadir survived into the new docker: the wipe the cut shutdown owed was not done"
    );
    assert_eq!(lines(&vm, "/var/lib/kubelet-wrapper/starts").len(), 1);
    assert_eq!(vm.boots(), 4);
    vm.shutdown().unwrap();
    report(&vm, t0);
}

/// Power cut in the boot after the agent's reboot, right after kubelet.env
/// and the agent's last journal write after it (the records of the
/// confirmations and of kubelet.env): that record is on disk after the
/// cut (nothing would ever redo it: later boots skip the agent), and the
/// next boot starts kubelet on a complete node.
#[test]
fn power_cut_right_after_kubelet_env_converges() {
    if skip(&["terraform", "ssh-keygen", "strip"]) {
        return;
    }
    let _one_at_a_time = testkit::vm::exclusive();
    let t0 = Instant::now();
    let d = Delivery::new();
    let m = TorcxMirror::new();
    let mut vm = updating_worker(&d, &m);
    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();
    assert_eq!(vm.wait_down(WORK).unwrap(), BootEnd::Reboot);
    assert_rebooted_for_the_update(&vm, &m);

    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();
    let seen = cut_when(&mut vm, "4: kubelet.env written", true, |j| {
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

    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();
    assert_updated_and_complete(&vm, &m, CLUSTER_VERSION);
    assert_eq!(
        vm.prop("k8s-node-bootstrap.service", "ConditionResult")
            .unwrap(),
        "no",
        "kubelet.env is there: the agent is skipped"
    );
    vm.shutdown().unwrap();
    report(&vm, t0);
}
