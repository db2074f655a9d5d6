//! A fault in each phase of a change, and the operator's hand in the
//! lease while one is under way.

use super::*;

fn two() -> (Cluster, &'static str, &'static str) {
    (
        Cluster::new("v1.20.3", &["w1", "w2"], "v1.20.2"),
        "w1",
        "w2",
    )
}

#[test]
fn a_node_that_cannot_run_the_target_never_takes_a_place() {
    let (c, a, _) = two();
    let w1 = Node::new(&c, a);
    c.set_fault(a, Fault::Check, true);
    for _ in 0..2 {
        assert_eq!(run(&w1).unwrap(), Ran::Looked(Standing::Refused));
    }
    let why = w1.follow_state().why.unwrap();
    assert!(
        why.contains("wants the container runtime containerd"),
        "{why}"
    );
    assert!(c.lease.borrow().1.transitions == 0 && c.log.borrow().is_empty());
}

#[test]
fn a_failed_preparation_aborts_releases_and_backs_off() {
    let (c, a, b) = two();
    let (w1, w2) = (Node::new(&c, a), Node::new(&c, b));
    c.set_fault(a, Fault::Prepare, true);
    assert_eq!(run(&w1).unwrap(), Ran::Changed(ChangeResult::Aborted));
    assert!(c.holders().is_empty(), "released");
    assert!(w1.change().is_none());
    assert_eq!(c.restarts(a), Vec::<String>::new());
    let f = w1.follow_state();
    assert_eq!((f.aborted, f.abort_streak), (1, 1));
    assert!(
        f.why
            .unwrap()
            .contains("preparing the kubelet's files failed")
    );
    // The others go on meanwhile.
    assert_eq!(run(&w2).unwrap(), Ran::Changed(ChangeResult::Succeeded));
    // It waits ten minutes before it tries again, asking nothing.
    c.set_fault(a, Fault::Prepare, false);
    let asked = asked_in(&c, &w1, || {
        assert_eq!(run(&w1).unwrap(), Ran::Looked(Standing::Waiting));
    });
    assert!(asked.is_empty(), "{asked:?}");
    c.tick(600);
    assert_eq!(run(&w1).unwrap(), Ran::Changed(ChangeResult::Succeeded));
    assert_eq!(w1.follow_state().abort_streak, 0);
}

#[test]
fn a_failed_switch_or_restart_is_rolled_back_and_halts() {
    for fault in [Fault::PutInPlace, Fault::Restart] {
        let (c, a, b) = two();
        let (w1, w2) = (Node::new(&c, a), Node::new(&c, b));
        c.set_fault(a, fault, true);
        assert_eq!(
            run(&w1).unwrap(),
            Ran::Changed(ChangeResult::RolledBack),
            "{fault:?}"
        );
        assert_eq!(w1.state().installed, "v1.20.2", "{fault:?}");
        let e = &c.entries()[a];
        assert_eq!(e.state, State::Halted, "{fault:?}");
        assert!(
            e.why
                .as_deref()
                .unwrap()
                .contains("the switch to kubelet v1.20.3 failed"),
            "{e:?}"
        );
        assert_eq!(
            run(&w2).unwrap(),
            Ran::Looked(Standing::Waiting),
            "{fault:?}"
        );
        assert_eq!(w2.state().installed, "v1.20.2");
    }
}

#[test]
fn an_api_server_away_at_the_deadline_rolls_nothing_back() {
    let (c, a, _) = two();
    let w1 = Node::new(&c, a);
    // The Node cannot be read for the whole verification.
    c.set_fault(a, Fault::NodeReads, true);
    let e = run(&w1).unwrap_err();
    assert!(e.to_string().contains("still cannot be read"), "{e}");
    assert_eq!(w1.change().unwrap().phase, Phase::Switched);
    assert_eq!(c.holders(), [a], "the place is kept");
    assert_eq!(w1.follow_state().standing, Standing::Changing);
    assert_eq!(c.restarts(a), ["restart v1.20.3"], "no rollback");
    // Back: the next run proves the change.
    c.set_fault(a, Fault::NodeReads, false);
    assert_eq!(run(&w1).unwrap(), Ran::Changed(ChangeResult::Succeeded));
}

#[test]
fn a_halt_whose_write_fails_is_written_by_the_next_run_and_holds_the_place_meanwhile() {
    let (c, a, b) = two();
    let (w1, w2) = (Node::new(&c, a), Node::new(&c, b));
    c.broken.borrow_mut().insert("v1.20.3".into());
    c.set_fault(a, Fault::HaltWrite, true);
    let e = run(&w1).unwrap_err();
    assert!(
        e.to_string()
            .contains("cannot mark the follow lease halted"),
        "{e}"
    );
    assert_eq!(w1.change().unwrap().phase, Phase::RolledBack);
    assert_eq!(w1.state().installed, "v1.20.2");
    // Nobody else starts: the place is still w1's.
    assert_eq!(run(&w2).unwrap(), Ran::Looked(Standing::Waiting));
    assert_eq!(c.holders(), [a]);
    assert_eq!(c.entries()[a].state, State::Changing);
    // Not "cleared by the operator": the next run writes the halt.
    c.set_fault(a, Fault::HaltWrite, false);
    assert_eq!(run(&w1).unwrap(), Ran::Changed(ChangeResult::RolledBack));
    assert_eq!(c.entries()[a].state, State::Halted);
    assert_eq!(run(&w1).unwrap(), Ran::Looked(Standing::Halted));
    assert_eq!(c.restarts(a).len(), 2, "one change, one rollback");
}

#[test]
fn a_rollback_that_fails_halts_the_fleet_at_once_and_is_tried_again() {
    let (c, a, b) = two();
    let (w1, w2) = (Node::new(&c, a), Node::new(&c, b));
    c.broken.borrow_mut().insert("v1.20.3".into());
    c.set_fault(a, Fault::RollBack, true);
    assert!(run(&w1).is_err());
    assert_eq!(w1.change().unwrap().phase, Phase::RollingBack);
    assert_eq!(c.entries()[a].state, State::Halted);
    assert_eq!(run(&w2).unwrap(), Ran::Looked(Standing::Waiting));
    c.set_fault(a, Fault::RollBack, false);
    assert_eq!(run(&w1).unwrap(), Ran::Changed(ChangeResult::RolledBack));
    assert_eq!(w1.state().installed, "v1.20.2");
}

/// w1's change recorded at `phase`, its place in the lease removed by the
/// operator, w2 holding the only place.
fn removed_at(phase: Phase) -> (Cluster, Vec<String>) {
    let (c, a, b) = two();
    let w1 = Node::new(&c, a);
    let mut change = Change {
        node: a.into(),
        from: "v1.20.2".into(),
        to: "v1.20.3".into(),
        kind: target::Kind::Patch,
        backend: Backend::Wrapper,
        phase,
        started_at: 1000,
        restarted_at: Some(1000),
        cordoned: false,
        previous_image: None,
        why: None,
        delete_emptydir_data: false,
    };
    rt().block_on(w1.prepare(&mut change)).unwrap();
    w1.driver().files.save_change(&change).unwrap();
    c.lease.borrow_mut().1 =
        stored(&lease::take(&LeaseView::default(), b, "v1.20.2", "v1.20.3", 1000).unwrap());
    let r = run(&w1);
    let mut out = vec![format!("{r:?}")];
    out.extend(c.holders());
    (c, out)
}

#[test]
fn a_place_removed_mid_change_is_never_taken_back_past_max_changing() {
    // After the switch: it waits for a free place, its record kept.
    let (c, out) = removed_at(Phase::Switched);
    assert_eq!(out, ["Ok(Looked(Waiting))", "w2"], "never two holders");
    let w1 = Node::new(&c, "w1");
    drop(w1);
    // Before the switch: nothing changed on the node, the change aborts.
    let (c, out) = removed_at(Phase::Prepared);
    assert_eq!(out, ["Ok(Changed(Aborted))", "w2"]);
    assert_eq!(c.restarts("w1"), Vec::<String>::new());
}

#[test]
fn a_change_waiting_for_its_place_back_finishes_once_one_is_free() {
    let (c, a, b) = two();
    let (w1, w2) = (Node::new(&c, a), Node::new(&c, b));
    let mut change = Change {
        node: a.into(),
        from: "v1.20.2".into(),
        to: "v1.20.3".into(),
        kind: target::Kind::Patch,
        backend: Backend::Wrapper,
        phase: Phase::Switched,
        started_at: 1000,
        restarted_at: Some(c.clock.get()),
        cordoned: false,
        previous_image: None,
        why: None,
        delete_emptydir_data: false,
    };
    rt().block_on(w1.prepare(&mut change)).unwrap();
    w1.set(|s| {
        s.installed = "v1.20.3".into();
        s.restarted = Some(1000);
    });
    w1.driver().files.save_change(&change).unwrap();
    c.lease.borrow_mut().1 =
        stored(&lease::take(&LeaseView::default(), b, "v1.20.2", "v1.20.3", 1000).unwrap());
    assert_eq!(run(&w1).unwrap(), Ran::Looked(Standing::Waiting));
    // w2 holds; its own change finishes (it resumes as a Held take).
    assert_eq!(run(&w2).unwrap(), Ran::Changed(ChangeResult::Succeeded));
    assert_eq!(run(&w1).unwrap(), Ran::Changed(ChangeResult::Succeeded));
    assert!(c.holders().is_empty());
}

#[test]
fn a_budget_that_never_allows_the_eviction_aborts_and_backs_off_longer_each_time() {
    let c = Cluster::new("v1.21.1", &["w1"], "v1.20.3");
    c.policy.borrow_mut().minor = MinorVersion::parse("1.21");
    c.pods
        .borrow_mut()
        .insert("w1".into(), vec![("db-0".into(), false, false)]);
    let w1 = Node::new(&c, "w1");
    assert_eq!(run(&w1).unwrap(), Ran::Changed(ChangeResult::Aborted));
    let f = w1.follow_state();
    assert!(
        f.why
            .as_deref()
            .unwrap()
            .contains("did not finish within 30 s"),
        "{f:?}"
    );
    assert!(!w1.state().unschedulable, "uncordoned");
    let first = f.retry_at.unwrap() - c.clock.get();
    c.tick(first);
    assert_eq!(run(&w1).unwrap(), Ran::Changed(ChangeResult::Aborted));
    let second = w1.follow_state().retry_at.unwrap() - c.clock.get();
    assert_eq!((first, second), (600, 1200));
    assert_eq!(super::super::abort_backoff(20), 6 * 3600);
}
