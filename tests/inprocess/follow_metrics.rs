//! Day two's textfile (`node_bootstrap_follow.prom`, src/follow/metrics.rs)
//! as Prometheus reads it: rendered by the agent's own code for a node
//! whose kubelet change was rolled back, it passes `promtool check
//! metrics` without a lint problem, and the repository's
//! `NodeBootstrapFollowHalted` fires on it (promtool); for an up-to-date
//! node it does not.

use node_bootstrap::follow::metrics::render;
use node_bootstrap::follow::record::{ChangeResult, FollowState, Outcome, Standing};
use node_bootstrap::follow::target::Kind;
use std::io::Write as _;
use std::process::{Command, Stdio};

fn halted() -> FollowState {
    let mut s = FollowState {
        current: Some("v1.20.2".into()),
        target: Some("v1.20.3".into()),
        standing: Standing::Halted,
        last_check: Some(1_795_000_000),
        ..FollowState::default()
    };
    s.ended(Outcome {
        from: "v1.20.2".into(),
        to: "v1.20.3".into(),
        kind: Kind::Patch,
        result: ChangeResult::RolledBack,
        why: Some("not Ready with kubelet v1.20.3 within 300 s".into()),
        started_at: 1_795_000_000,
        ended_at: 1_795_000_400,
        back_after_secs: None,
    });
    s
}

#[test]
fn the_follow_textfile_lints_clean_and_the_halted_alert_fires_on_it() {
    if testkit::skip_without(&["promtool"]) {
        return;
    }
    let text = render(&halted());
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics:\n{said}\n{text}"
    );
    testkit::promtool::follow_halted_alert_fires_on(&text, "n1").unwrap();
    let up_to_date = FollowState {
        standing: Standing::UpToDate,
        ..halted()
    };
    let e =
        testkit::promtool::follow_halted_alert_fires_on(&render(&up_to_date), "n2").unwrap_err();
    assert!(
        e.to_string()
            .contains("NodeBootstrapFollowHalted did not fire as expected"),
        "{e:#}"
    );
}
