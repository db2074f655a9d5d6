use super::*;

fn holding(nodes: &[&str]) -> LeaseView {
    let mut v = LeaseView::default();
    for n in nodes {
        v = take(&v, n, "v1.20.2", "v1.20.3", 100).unwrap();
    }
    v
}

fn fit() -> NodeLook {
    NodeLook {
        ready: true,
        unschedulable: false,
        kubelet_version: "v1.20.2".into(),
        heartbeat: Some(100),
        detail: None,
    }
}

fn wait(g: Grant) -> String {
    match g {
        Grant::Wait { why } => why,
        other => panic!("{other:?}"),
    }
}

#[test]
fn one_at_a_time_by_default() {
    let p = Policy::default();
    assert_eq!(
        place(&LeaseView::default(), "w1", &p, 100, 300),
        Grant::Take
    );
    let v = holding(&["w1"]);
    assert_eq!(place(&v, "w1", &p, 100, 300), Grant::Held);
    assert_eq!(
        wait(place(&v, "w2", &p, 100, 300)),
        "1 of 1 places taken: w1 (v1.20.2 -> v1.20.3)"
    );
    // Stale: said so, still held.
    assert!(wait(place(&v, "w2", &p, 1000, 300)).contains("did it go down?"));
    // maxChanging 2: a second place; then none.
    let p2 = Policy {
        max_changing: 2,
        ..Policy::default()
    };
    assert_eq!(place(&v, "w2", &p2, 100, 300), Grant::Take);
    let two = take(&v, "w2", "v1.20.2", "v1.20.3", 101).unwrap();
    assert!(wait(place(&two, "w3", &p2, 100, 300)).starts_with("2 of 2 places taken"));
    assert_eq!(two.transitions, 2);
}

#[test]
fn a_halted_holder_stops_everyone_and_its_own_name_until_the_operator_removes_it() {
    let v = holding(&["w1"]);
    let e = v.entry("w1").unwrap().clone();
    let halted = halt(
        &v,
        "w1",
        e.clone(),
        "not Ready with kubelet v1.20.3 within 300 s",
        150,
    );
    let p = Policy {
        max_changing: 5,
        ..Policy::default()
    };
    let why = wait(place(&halted, "w2", &p, 200, 300));
    assert!(
        why.starts_with(
            "the rollout is halted at w1: its change v1.20.2 -> v1.20.3 was rolled back (not Ready"
        ),
        "{why}"
    );
    assert!(why.contains("removes data.node.w1"), "{why}");
    // The halted node itself (or one re-provisioned under its name) does
    // not take its place again: it waits for the operator.
    let Grant::HaltedHere { why } = place(&halted, "w1", &p, 200, 300) else {
        panic!()
    };
    assert!(why.contains("the operator removes data.node.w1"), "{why}");
    // Nor may a change under way elsewhere take a place back past it.
    assert!(
        retake(&halted, "w2", &p)
            .unwrap_err()
            .contains("halted at w1")
    );
    // Removing only that node's key clears it.
    assert_eq!(
        place(&release(&halted, "w1"), "w2", &p, 200, 300),
        Grant::Take
    );
    // A halt is never lost: marked even where the entry was removed.
    let gone = release(&v, "w1");
    assert_eq!(
        halt(&gone, "w1", e, "x", 160).entry("w1").unwrap().state,
        State::Halted
    );
}

#[test]
fn nodes_that_said_they_are_not_ready_pause_takes() {
    let p = Policy::default();
    let down = report_not_ready(&LeaseView::default(), "w3", "KubeletNotReady: PLEG", 50).unwrap();
    assert_eq!(
        wait(place(&down, "w1", &p, 100, 300)),
        "1 other node(s) not Ready (w3); the follow ConfigMap's maxNotReady is 1"
    );
    // Said once: nothing to write again.
    assert_eq!(report_not_ready(&down, "w3", "again", 60), None);
    let two = Policy {
        max_not_ready: 2,
        ..Policy::default()
    };
    assert_eq!(place(&down, "w1", &two, 100, 300), Grant::Take);
    // Ready again: the report goes; nothing to clear for another.
    let back = clear_report(&down, "w3").unwrap();
    assert_eq!(place(&back, "w1", &p, 100, 300), Grant::Take);
    assert_eq!(clear_report(&back, "w3"), None);
    // A report is no place: it is not counted against maxChanging, and the
    // node's own take replaces it.
    let mine = report_not_ready(&LeaseView::default(), "w1", "x", 1).unwrap();
    assert_eq!(place(&mine, "w1", &p, 100, 300), Grant::Take);
    let taken = take(&mine, "w1", "a", "b", 2).unwrap();
    assert_eq!(taken.entry("w1").unwrap().state, State::Changing);
    let paused = Policy {
        paused: true,
        ..Policy::default()
    };
    assert!(wait(place(&LeaseView::default(), "w1", &paused, 0, 300)).contains("paused"));
}

#[test]
fn a_node_changes_only_ready_and_not_cordoned_by_someone_else() {
    assert_eq!(node_fit(&fit()), Ok(()));
    let down = NodeLook {
        ready: false,
        detail: Some("KubeletNotReady: PLEG".into()),
        ..fit()
    };
    assert!(
        node_fit(&down)
            .unwrap_err()
            .contains("not Ready (KubeletNotReady: PLEG)")
    );
    let cordoned = NodeLook {
        unschedulable: true,
        ..fit()
    };
    assert!(node_fit(&cordoned).unwrap_err().contains("cordoned"));
}

#[test]
fn a_place_removed_mid_change_is_taken_back_only_within_max_changing() {
    let p = Policy::default();
    let v = holding(&["w2"]);
    // w1's entry was removed (the operator cleared it), and w2 took the
    // only place: w1 may not put itself back.
    assert!(renew(&v, "w1", 200).is_none());
    assert!(
        retake(&v, "w1", &p)
            .unwrap_err()
            .contains("1 of 1 places are taken by others")
    );
    assert_eq!(retake(&LeaseView::default(), "w1", &p), Ok(()));
    // A not-Ready report is no place: renew does not touch it.
    let r = report_not_ready(&LeaseView::default(), "w1", "x", 1).unwrap();
    assert!(renew(&r, "w1", 2).is_none());
}

#[test]
fn the_lease_round_trips_through_its_object() {
    let v = holding(&["w1", "w2"]);
    let mut obj = render("kube-system", "node-bootstrap-follow-lease", &v, 300);
    assert_eq!(obj["kind"], "ConfigMap");
    assert_eq!(obj["data"]["leaseTransitions"], "2");
    assert_eq!(obj["data"]["leaseDurationSeconds"], "300");
    let e: Value = serde_json::from_str(obj["data"]["node.w1"].as_str().unwrap()).unwrap();
    assert_eq!(
        e,
        json!({"state": "changing", "from": "v1.20.2", "to": "v1.20.3", "since": 100, "renewed": 100})
    );
    assert!(obj["metadata"].get("resourceVersion").is_none());
    obj["metadata"]["resourceVersion"] = json!("42");
    let back = read(Some(&obj)).unwrap();
    assert_eq!(back.entries, v.entries);
    assert_eq!(back.raw["w1"], obj["data"]["node.w1"].as_str().unwrap());
    assert_eq!(back.resource_version.as_deref(), Some("42"));
    assert_eq!(back.transitions, 2);
    let empty = render(
        "kube-system",
        "l",
        &release(&release(&back, "w1"), "w2"),
        300,
    );
    assert!(empty["data"].get("node.w1").is_none(), "{empty}");
    // What others put there stays: labels, annotations, other keys.
    let mut labelled = obj.clone();
    labelled["metadata"]["labels"] = json!({"team": "infra"});
    labelled["metadata"]["annotations"] =
        json!({"kubectl.kubernetes.io/last-applied-configuration": "{}"});
    labelled["data"]["note"] = json!("hands off");
    let again = render("kube-system", "l", &read(Some(&labelled)).unwrap(), 300);
    assert_eq!(again["metadata"]["labels"]["team"], "infra");
    assert_eq!(again["data"]["note"], "hands off");
    assert_eq!(
        again["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
        "{}"
    );
    assert_eq!(again["metadata"]["resourceVersion"], "42");
    // Someone else's data in a node's key is refused, not overwritten
    // blindly; a key too long for a ConfigMap is refused at the take.
    obj["data"]["node.w9"] = json!("w9");
    assert!(
        read(Some(&obj))
            .unwrap_err()
            .contains("data.node.w9 is not the agent's entry")
    );
    assert!(
        take(&v, &"n".repeat(250), "a", "b", 1)
            .unwrap_err()
            .contains("too long")
    );
}

#[test]
fn an_older_agents_list_is_counted_and_moved_to_keys() {
    let old = json!({
        "metadata": {"resourceVersion": "7"},
        "data": {"holders": r#"[{"node":"w1","from":"v1.20.2","to":"v1.20.3","since":5,"renewed":6,"halted":"not Ready"}]"#},
    });
    let v = read(Some(&old)).unwrap();
    assert_eq!(v.entry("w1").unwrap().state, State::Halted);
    assert!(wait(place(&v, "w2", &Policy::default(), 10, 300)).contains("halted at w1"));
    let written = render("kube-system", "l", &v, 300);
    assert_eq!(written["data"]["holders"], "[]");
    assert!(
        written["data"]["node.w1"]
            .as_str()
            .unwrap()
            .contains("\"halted\"")
    );
    assert!(read(Some(&json!({"data": {"holders": "w1"}}))).is_err());
}

#[test]
fn a_nodes_own_writes_are_patches_of_its_key() {
    let obj = render("kube-system", "l", &holding(&["w1"]), 300);
    let v = read(Some(&obj)).unwrap();
    let Some(EntryPatch::Replace { old, new }) = renewal(&v, "w1", 500) else {
        panic!()
    };
    assert_eq!(old, v.raw["w1"]);
    assert_eq!(
        (new.state, new.renewed, new.since),
        (State::Changing, 500, 100)
    );
    assert_eq!(
        removal(&v, "w1"),
        Some(EntryPatch::Remove {
            old: v.raw["w1"].clone()
        })
    );
    // Nothing of another's, nothing when there is none.
    assert_eq!(renewal(&v, "w2", 500), None);
    assert_eq!(removal(&v, "w2"), None);
    // A not-Ready report is no place to renew.
    let r = read(Some(&render(
        "kube-system",
        "l",
        &report_not_ready(&v, "w3", "x", 1).unwrap(),
        300,
    )))
    .unwrap();
    assert_eq!(renewal(&r, "w3", 2), None);
    assert!(removal(&r, "w3").is_some());
}
