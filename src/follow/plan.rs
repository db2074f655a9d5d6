//! One change of the kubelet, as a state machine: the record kept on disk
//! ([`Change`], `<state_dir>/follow/change.json`, written durably at every
//! phase), what comes next in each phase ([`next`]), and whether the
//! changed kubelet came back ([`verify`]). Pure: [`super::driver`] does
//! what it says and records the new phase before and after.
//!
//! ```text
//! Taken ─(minor)→ cordon, evict → Drained ─┐
//!   └──────────(patch)──────────────────────┴→ Prepared → Switching → Switched
//! Switched ─ Ready with the new version ───────────────→ (uncordon, release) done
//! Switched ─ not within follow.ready_timeout_secs → RollingBack → RolledBack
//! Switching ─ the switch failed ─────────────────→ RollingBack
//! RolledBack → (uncordon) halted: the lease keeps this node, marked halted
//! Taken, Drained ─ the drain, Prepare ─ preparing failed → aborted (uncordon, release)
//! ```
//!
//! A verification whose deadline passes while the API server cannot be
//! read gives no verdict ([`Verdict::Unreachable`]): the run ends, the
//! next one looks again; a kubelet is rolled back only when the Node was
//! read and is not back.
//!
//! Power cuts: every phase is on disk before what it names is done, and
//! each action is idempotent, so the next run does it again. Switching
//! and RollingBack are the phases where the node's files change; at boot,
//! before kubelet starts, `follow --converge` makes them one kubelet's
//! whole set ([`converge`]): the new one when its files are all in place
//! (then Switched, verified by the next run), else the previous one (then
//! Prepared, tried again).

use super::target::Kind;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// How this node runs its kubelet (`kubelet.backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// kubelet-wrapper runs the image kubelet.env's tag names.
    Wrapper,
    /// The kubernetes system extension the link names.
    Sysext,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// This node holds a place in the lease; nothing changed yet.
    Taken,
    /// Minor: cordoned, its pods evicted.
    Drained,
    /// The previous files saved and the new ones rendered beside them.
    Prepared,
    /// The new kubelet's files going in (image, link, config, kubelet.env).
    Switching,
    /// They are in and the kubelet restarted; waiting for Ready.
    Switched,
    /// The previous kubelet's files going back.
    RollingBack,
    /// They are back and the kubelet restarted.
    RolledBack,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Taken => "taken",
            Phase::Drained => "drained",
            Phase::Prepared => "prepared",
            Phase::Switching => "switching",
            Phase::Switched => "switched",
            Phase::RollingBack => "rolling-back",
            Phase::RolledBack => "rolled-back",
        }
    }
}

/// The change under way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub node: String,
    pub from: String,
    pub to: String,
    pub kind: Kind,
    pub backend: Backend,
    pub phase: Phase,
    /// Unix seconds.
    pub started_at: u64,
    /// When the new kubelet (or, rolling back, the previous one) was
    /// restarted.
    #[serde(default)]
    pub restarted_at: Option<u64>,
    /// This change cordoned the node (it uncordons it).
    #[serde(default)]
    pub cordoned: bool,
    /// Sysext: the image the link named before the change.
    #[serde(default)]
    pub previous_image: Option<PathBuf>,
    /// Why it is being rolled back.
    #[serde(default)]
    pub why: Option<String>,
    /// The operator's `deleteEmptyDirData` when the place was taken.
    #[serde(default)]
    pub delete_emptydir_data: bool,
}

/// What the driver does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Mark the Node unschedulable.
    Cordon,
    /// Evict its pods (Eviction API, PodDisruptionBudgets honoured), then
    /// record Drained.
    Drain,
    /// Save the previous files, render the new ones, record Prepared.
    Prepare,
    /// Record Switching, put the new kubelet in place, restart it, record
    /// Switched.
    Switch,
    /// Wait for the Node Ready with the new version.
    Verify,
    /// Record RollingBack, put the previous kubelet back, restart it,
    /// record RolledBack.
    RollBack,
    /// Wait (bounded) for the previous kubelet Ready, then halt: the lease
    /// keeps this node, marked halted.
    Halt,
}

/// The next action for `change` (module docs).
pub fn next(change: &Change) -> Action {
    match change.phase {
        Phase::Taken if change.kind == Kind::Minor && !change.cordoned => Action::Cordon,
        Phase::Taken if change.kind == Kind::Minor => Action::Drain,
        Phase::Taken | Phase::Drained => Action::Prepare,
        Phase::Prepared | Phase::Switching => Action::Switch,
        Phase::Switched => Action::Verify,
        Phase::RollingBack => Action::RollBack,
        Phase::RolledBack => Action::Halt,
    }
}

/// The Node as a verification (and a take) reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLook {
    pub ready: bool,
    /// `spec.unschedulable`: cordoned.
    pub unschedulable: bool,
    pub kubelet_version: String,
    /// The Ready condition's `lastHeartbeatTime`, unix seconds.
    pub heartbeat: Option<u64>,
    /// Why it is not Ready.
    pub detail: Option<String>,
}

/// How much earlier than the restart (by this node's clock) a heartbeat
/// may be stamped by the API server's and still count as the restarted
/// kubelet's: the two clocks are NTP-close, not equal.
pub const CLOCK_SLACK_SECS: u64 = 2;

/// What one look says of a restarted kubelet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Ready, reporting `expected`, heartbeat since the restart.
    Back,
    /// Past the deadline; why.
    Failed(String),
    /// Not yet; what it waits for.
    Waiting(String),
    /// Past the deadline, and the Node could not be read: no verdict on
    /// the kubelet (an API server away is no reason to roll back); why.
    Unreachable(String),
}

/// Whether the Node's `kubeletVersion` is the release `expected`: the
/// same version by precedence, a `+build` on either side ignored (a
/// `v1.20.5+flatcar.1` image's kubelet may report `v1.20.5`).
pub fn same_release(reported: &str, expected: &str) -> bool {
    use crate::cluster::version::{KubeVersion, precedence};
    match (KubeVersion::parse(reported), KubeVersion::parse(expected)) {
        (Ok(r), Ok(e)) => precedence(&r, &e) == std::cmp::Ordering::Equal,
        _ => reported == expected,
    }
}

/// Whether the kubelet restarted at `restarted_at` is back as `expected`
/// (`look` is `Err(why)` when the Node could not be read), `now` and the
/// `deadline` (seconds after the restart).
pub fn verify(
    expected: &str,
    restarted_at: u64,
    look: Result<&NodeLook, &str>,
    now: u64,
    deadline: u64,
) -> Verdict {
    let waiting = match look {
        Err(why) => format!("the Node cannot be read: {why}"),
        Ok(n) if !same_release(&n.kubelet_version, expected) => format!(
            "the Node reports kubelet {}, not {expected} yet",
            n.kubelet_version
        ),
        Ok(n)
            if n.heartbeat
                .is_none_or(|h| h + CLOCK_SLACK_SECS < restarted_at) =>
        {
            "no status from the restarted kubelet yet".to_string()
        }
        Ok(n) if !n.ready => format!(
            "the Node is not Ready: {}",
            n.detail.as_deref().unwrap_or("not ready")
        ),
        Ok(_) => return Verdict::Back,
    };
    if now >= restarted_at + deadline && look.is_err() {
        Verdict::Unreachable(format!(
            "{deadline} s after its restart the Node still cannot be read ({waiting}): no verdict until it can"
        ))
    } else if now >= restarted_at + deadline {
        Verdict::Failed(format!(
            "not Ready with kubelet {expected} within {deadline} s of its restart ({waiting})"
        ))
    } else {
        Verdict::Waiting(waiting)
    }
}

/// What `follow --converge` does at boot for a change in `phase`, given
/// whether the new kubelet's files (rendered, and for the sysext its
/// image) are all in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Converge {
    /// Nothing of the node's files is in flux.
    Nothing,
    /// Put the new kubelet's whole set in place; the change is Switched.
    Forward,
    /// Put the previous kubelet's whole set back; with `to` the phase it
    /// goes back to.
    Back { to: Phase },
}

pub fn converge(phase: Phase, next_complete: bool) -> Converge {
    match phase {
        Phase::Switching if next_complete => Converge::Forward,
        Phase::Switching => Converge::Back {
            to: Phase::Prepared,
        },
        Phase::RollingBack => Converge::Back {
            to: Phase::RolledBack,
        },
        _ => Converge::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(kind: Kind, phase: Phase) -> Change {
        Change {
            node: "w1".into(),
            from: "v1.20.2".into(),
            to: "v1.20.3".into(),
            kind,
            backend: Backend::Sysext,
            phase,
            started_at: 100,
            restarted_at: None,
            cordoned: false,
            previous_image: None,
            why: None,
            delete_emptydir_data: false,
        }
    }

    #[test]
    fn a_patch_change_goes_straight_to_the_switch_and_a_minor_one_drains_first() {
        let patch = change(Kind::Patch, Phase::Taken);
        assert_eq!(next(&patch), Action::Prepare);
        let mut minor = change(Kind::Minor, Phase::Taken);
        assert_eq!(next(&minor), Action::Cordon);
        minor.cordoned = true;
        assert_eq!(next(&minor), Action::Drain);
        for (phase, action) in [
            (Phase::Drained, Action::Prepare),
            (Phase::Prepared, Action::Switch),
            // Interrupted in the middle: done again (idempotent).
            (Phase::Switching, Action::Switch),
            (Phase::Switched, Action::Verify),
            (Phase::RollingBack, Action::RollBack),
            (Phase::RolledBack, Action::Halt),
        ] {
            assert_eq!(next(&change(Kind::Minor, phase)), action, "{phase:?}");
        }
    }

    fn look(ready: bool, version: &str, heartbeat: u64) -> NodeLook {
        NodeLook {
            ready,
            unschedulable: false,
            kubelet_version: version.into(),
            heartbeat: Some(heartbeat),
            detail: (!ready).then(|| "KubeletNotReady: PLEG is not healthy".into()),
        }
    }

    #[test]
    fn back_only_ready_with_the_new_version_and_a_heartbeat_since_the_restart() {
        let v = |l: Result<&NodeLook, &str>, now| verify("v1.20.3", 200, l, now, 60);
        assert_eq!(v(Ok(&look(true, "v1.20.3", 205)), 206), Verdict::Back);
        // Within the clock slack.
        assert_eq!(v(Ok(&look(true, "v1.20.3", 198)), 206), Verdict::Back);
        // The old kubelet's last word, the new one not yet Ready, no
        // heartbeat since: waiting.
        for (l, says) in [
            (
                look(true, "v1.20.2", 199),
                "reports kubelet v1.20.2, not v1.20.3",
            ),
            (look(false, "v1.20.3", 204), "not Ready: KubeletNotReady"),
            (
                look(true, "v1.20.3", 150),
                "no status from the restarted kubelet",
            ),
        ] {
            let Verdict::Waiting(w) = v(Ok(&l), 230) else {
                panic!("{l:?}")
            };
            assert!(w.contains(says), "{w}");
        }
        assert!(matches!(v(Err("HTTP 503"), 230), Verdict::Waiting(w) if w.contains("HTTP 503")));
        // The deadline: failed, saying what it last saw.
        let Verdict::Failed(why) = v(Ok(&look(true, "v1.20.2", 199)), 260) else {
            panic!()
        };
        assert_eq!(
            why,
            "not Ready with kubelet v1.20.3 within 60 s of its restart (the Node reports kubelet v1.20.2, not v1.20.3 yet)"
        );
        // The API server away at the deadline: no verdict.
        assert!(
            matches!(v(Err("HTTP 503"), 260), Verdict::Unreachable(w) if w.contains("HTTP 503")),
        );
    }

    #[test]
    fn a_build_suffix_on_either_side_is_the_same_release() {
        let v = |reported, expected| verify(expected, 200, Ok(&look(true, reported, 205)), 206, 60);
        assert_eq!(v("v1.20.5", "v1.20.5+flatcar.1"), Verdict::Back);
        assert_eq!(v("v1.20.5+flatcar.1", "v1.20.5"), Verdict::Back);
        assert!(matches!(
            v("v1.20.4", "v1.20.5+flatcar.1"),
            Verdict::Waiting(_)
        ));
        assert!(matches!(v("v1.20.5-rc.1", "v1.20.5"), Verdict::Waiting(_)));
        assert!(same_release("v1.20.5", "v1.20.5"));
        assert!(!same_release("garbage", "v1.20.5"));
    }

    #[test]
    fn a_cut_while_files_change_converges_to_one_kubelet() {
        assert_eq!(converge(Phase::Switching, true), Converge::Forward);
        assert_eq!(
            converge(Phase::Switching, false),
            Converge::Back {
                to: Phase::Prepared
            }
        );
        assert_eq!(
            converge(Phase::RollingBack, true),
            Converge::Back {
                to: Phase::RolledBack
            }
        );
        for p in [
            Phase::Taken,
            Phase::Drained,
            Phase::Prepared,
            Phase::Switched,
            Phase::RolledBack,
        ] {
            assert_eq!(converge(p, true), Converge::Nothing, "{p:?}");
        }
    }

    #[test]
    fn the_record_reads_back() {
        let mut c = change(Kind::Minor, Phase::Switched);
        c.restarted_at = Some(5);
        c.previous_image = Some("/opt/extensions/kubernetes/kubernetes-v1.20.2-x86-64.raw".into());
        let j = serde_json::to_value(&c).unwrap();
        assert_eq!(j["phase"], "switched");
        assert_eq!(j["kind"], "minor");
        assert_eq!(j["backend"], "sysext");
        assert_eq!(serde_json::from_value::<Change>(j).unwrap(), c);
    }
}
