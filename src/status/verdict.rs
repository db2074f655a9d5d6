//! The verdict: a pure function of the [`Facts`] (rules in the module docs
//! of [`crate::status`]), plus what the node is waiting for, in words.

use super::facts::*;
use crate::error::exit;
use crate::journal::{Step, StepResult};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Complete,
    InProgress,
    Failed,
    Unknown,
}

impl Verdict {
    pub fn exit_code(self) -> u8 {
        match self {
            Verdict::Complete => exit::SUCCESS,
            Verdict::InProgress => exit::STATUS_IN_PROGRESS,
            Verdict::Failed => exit::STATUS_FAILED,
            Verdict::Unknown => exit::STATUS_UNKNOWN,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Complete => "complete",
            Verdict::InProgress => "in-progress",
            Verdict::Failed => "failed",
            Verdict::Unknown => "unknown",
        }
    }
    /// `--wait` stops here.
    pub fn is_final(self) -> bool {
        matches!(self, Verdict::Complete | Verdict::Failed)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Assessment {
    pub verdict: Verdict,
    /// Why this verdict (failures for `failed`, the facts for `complete`, what
    /// could not be read for `unknown`).
    pub reasons: Vec<String>,
    /// What the node is waiting for, in words (empty when complete).
    pub waiting_for: Vec<String>,
}

impl Assessment {
    /// One line: the verdict and its first reason or wait.
    pub fn summary(&self) -> String {
        let first = match self.verdict {
            Verdict::InProgress => self.waiting_for.first().or(self.reasons.first()),
            _ => self.reasons.first().or(self.waiting_for.first()),
        };
        match first {
            Some(r) => format!("{}: {r}", self.verdict.as_str()),
            None => self.verdict.as_str().to_string(),
        }
    }
}

fn describe(u: &crate::systemd::units::UnitState) -> String {
    let mut s = format!("{} ({}", u.active_state, u.sub_state);
    if let Some(r) = u.result.as_deref().filter(|r| *r != "success") {
        s.push_str(&format!(", result {r}"));
    }
    if let Some(code) = u.exec_main_status.filter(|c| *c != 0) {
        s.push_str(&format!(", exit status {code}"));
    }
    s.push(')');
    s
}

fn last_error(p: Option<&StepView>) -> Option<String> {
    let p = p?;
    let mut s = p.error.clone()?;
    if let Some(l) = p.log_tail.iter().rev().find(|l| !l.trim().is_empty())
        && !s.contains(l.as_str())
    {
        s.push_str(&format!(" (last output: {l})"));
    }
    Some(s)
}

/// The flow step that failed most recently, for crash-loop explanations.
fn flow_failure(f: &Facts) -> Option<&StepView> {
    f.flow_steps().find(|p| p.state == StepState::Failed)
}

fn running_or_starting(u: Option<&crate::systemd::units::UnitState>) -> bool {
    u.is_some_and(|u| {
        matches!(
            u.active_state.as_str(),
            "activating" | "active" | "reloading"
        )
    })
}

/// What `complete` asks for beyond the rules of [`crate::status`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Require {
    /// `status --ready`: the node Ready in the cluster too (the join).
    pub node_ready: bool,
}

/// Judges the facts by the default rules (see [`crate::status`]).
#[cfg(test)]
pub fn assess(f: &Facts) -> Assessment {
    assess_with(f, Require::default())
}

/// [`assess`], with the node Ready in the cluster required when `req` says
/// so: complete only then; failed also when the kubelet's certificate
/// request was denied or approved and not signed; the join's state among
/// what the node waits for.
pub fn assess_with(f: &Facts, req: Require) -> Assessment {
    let mut failures = failures(f);
    if req.node_ready {
        failures.extend(join_failure(f));
    }
    if !failures.is_empty() {
        return Assessment {
            verdict: Verdict::Failed,
            reasons: failures,
            waiting_for: Vec::new(),
        };
    }
    if let Some(reasons) = complete(f).and_then(|r| with_join(f, req, r)) {
        return Assessment {
            verdict: Verdict::Complete,
            reasons,
            waiting_for: Vec::new(),
        };
    }
    let mut waiting_for = waits(f);
    if req.node_ready
        && waiting_for.is_empty()
        && let Some(j) = f.join.as_ref().filter(|j| !j.ready)
    {
        waiting_for.push(format!(
            "waiting for the node to be Ready in the cluster: {}",
            j.detail
        ));
    }
    if !f.systemd_reachable() && !f.state_journal.readable() {
        let mut reasons: Vec<String> = f
            .unreachable
            .iter()
            .filter(|u| matches!(u.source, "systemd" | "state-journal"))
            .map(|u| format!("could not read {}: {}", u.source, u.error))
            .collect();
        reasons.push("without systemd or the state journal the bootstrap cannot be judged".into());
        return Assessment {
            verdict: Verdict::Unknown,
            reasons,
            waiting_for,
        };
    }
    let mut reasons = Vec::new();
    if !f.systemd_reachable() {
        reasons.push(
            "systemd could not be reached: completion cannot be confirmed (kubelet state unknown)"
                .into(),
        );
    }
    Assessment {
        verdict: Verdict::InProgress,
        reasons,
        waiting_for,
    }
}

/// F1-F4 (see the rules in [`crate::status`]): what failed for good.
fn failures(f: &Facts) -> Vec<String> {
    let mut failures = Vec::new();
    // F1: the bootstrap unit failed for good (a unit waiting to restart is
    // `activating/auto-restart`, not `failed`).
    if let Some(knb) = f.unit(KNB).filter(|u| u.is_failed()) {
        let mut r = format!("{KNB} failed and is not restarting: {}", describe(knb));
        if let Some(e) = last_error(flow_failure(f)) {
            r.push_str(&format!("; last error: {e}"));
        }
        failures.push(r);
    }
    // F4: without systemd, a journal error where a retry cannot help.
    if !f.systemd_reachable() && !f.kubelet_env.present {
        for p in f.flow_steps() {
            if p.state == StepState::Failed && p.retryable == Some(false) {
                failures.push(format!(
                    "step {} failed and a retry cannot help: {}",
                    p.name,
                    p.error.as_deref().unwrap_or("no error recorded")
                ));
            }
        }
    }
    // F2/F3: a helper failed and nothing is retrying it.
    if f.node.role.is_bootkube_master() {
        let helpers = [
            (
                BOOTKUBE,
                BOOTKUBE_PATH,
                Step::Bootkube,
                f.assets.bootkube_done,
            ),
            (
                TECTONIC,
                TECTONIC_PATH,
                Step::Tectonic,
                f.assets.tectonic_done,
            ),
        ];
        for (svc, path, step, done) in helpers {
            if !done {
                failures.extend(helper_failures(f, svc, path, step));
            }
        }
    }
    failures
}

/// With the node Ready required: the kubelet's certificate request was
/// refused, so it cannot join (the kubelet asks again after a restart,
/// and the same approver decides).
fn join_failure(f: &Facts) -> Option<String> {
    let j = f.join.as_ref().filter(|j| j.certificate_refused())?;
    Some(format!("the node cannot join the cluster: {}", j.detail))
}

/// The reasons for complete, with the node Ready in the cluster when it
/// is required (`None`: not Ready).
fn with_join(f: &Facts, req: Require, mut reasons: Vec<String>) -> Option<Vec<String>> {
    if !req.node_ready {
        return Some(reasons);
    }
    let j = f.join.as_ref().filter(|j| j.ready)?;
    reasons.push(j.detail.clone());
    Some(reasons)
}

/// A helper's service failed, or its last attempt failed with nothing
/// retrying it, or its path unit gave up.
fn helper_failures(f: &Facts, svc: &str, path: &str, step: Step) -> Vec<String> {
    let mut failures = Vec::new();
    let unit = f.unit(svc);
    let step_view = f.step(step);
    let err = last_error(step_view);
    if let Some(u) = unit.filter(|u| u.is_failed()) {
        let mut r = format!("{svc} failed: {}", describe(u));
        if let Some(e) = &err {
            r.push_str(&format!("; {e}"));
        }
        failures.push(r);
    } else if step_view.is_some_and(|p| p.state == StepState::Failed) && !running_or_starting(unit)
    {
        failures.push(format!(
            "{step} failed: {}",
            err.unwrap_or_else(|| "no error recorded".into())
        ));
    }
    if let Some(p) = f.unit(path).filter(|u| u.is_failed()) {
        let mut r = match p.result.as_deref().filter(|r| !r.is_empty()) {
            Some(result) => format!("{path} failed ({result}) and will not trigger {svc} again"),
            None => format!(
                "{path} failed: {} and will not trigger {svc} again",
                p.active_state
            ),
        };
        r.push_str(&format!(
            " until the next boot or `systemctl reset-failed {svc} {path} && systemctl start {path}`"
        ));
        failures.push(r);
    }
    failures
}

/// Why the node is complete, if it is: kubelet.env present, kubelet active
/// per systemd, and on the bootkube master both helpers done.
fn complete(f: &Facts) -> Option<Vec<String>> {
    let master = f.node.role.is_bootkube_master();
    let kubelet_active = f.unit(KUBELET).is_some_and(|u| u.is_active());
    let helpers_done = !master || (f.assets.bootkube_done && f.assets.tectonic_done);
    if !(f.kubelet_env.present && kubelet_active && helpers_done) {
        return None;
    }
    let mut reasons = vec![
        format!("{} present", f.kubelet_env.path),
        format!("{KUBELET} active"),
    ];
    if master {
        reasons.push("bootkube and tectonic done".into());
    }
    Some(reasons)
}

fn assets_wait(f: &Facts, script: &str) -> String {
    let how = if f.unit(INIT_ASSETS).is_some_and(|u| u.exists()) {
        "pulled by init-assets.service".to_string()
    } else if f.assets.mode == "pull" {
        "pulled from S3 by the agent".to_string()
    } else {
        "pushed by terraform".to_string()
    };
    format!("waiting for assets at {script}, {how}")
}

fn update_engine_words(f: &Facts) -> Option<String> {
    let ue = f.update_engine.as_ref()?;
    let op = ue.current_operation.trim_start_matches("UPDATE_STATUS_");
    Some(match op {
        "DOWNLOADING" => format!(
            "update_engine downloading {}% of {}",
            (ue.progress * 100.0).round() as i64,
            if ue.new_version.is_empty() {
                "the update"
            } else {
                ue.new_version.as_str()
            }
        ),
        "UPDATED_NEED_REBOOT" => format!(
            "update_engine: OS {} downloaded, reboot needed",
            ue.new_version
        ),
        "IDLE" => "update_engine idle".to_string(),
        other => format!("update_engine: {}", other.to_lowercase().replace('_', " ")),
    })
}

fn waits(f: &Facts) -> Vec<String> {
    let mut w = Vec::new();
    if !f.kubelet_env.present {
        bootstrap_waits(f, &mut w);
    } else if let Some(k) = f.unit(KUBELET).filter(|u| !u.is_active()) {
        w.push(format!(
            "waiting for {KUBELET} to start: {} with {} restarts",
            describe(k),
            k.n_restarts.unwrap_or(0)
        ));
    } else if !f.systemd_reachable() {
        w.push(format!(
            "{} present; kubelet state unknown",
            f.kubelet_env.path
        ));
    }
    if let Some(ue) = &f.update_engine
        && ue.current_operation.ends_with("UPDATED_NEED_REBOOT")
        && !w.iter().any(|s| s.starts_with("reboot pending"))
    {
        w.extend(update_engine_words(f));
    }
    if f.node.role.is_bootkube_master()
        && let Some(s) = helper_wait(f)
        && !w.contains(&s)
    {
        w.push(s);
    }
    w
}

/// Before kubelet.env: the bootstrap unit's state, then the step it runs.
fn bootstrap_waits(f: &Facts, w: &mut Vec<String>) {
    let knb = f.unit(KNB);
    match knb {
        Some(u) if !u.exists() => w.push(format!("{KNB} is not installed")),
        Some(u) if u.auto_restarting() => {
            let mut s = format!(
                "{KNB} is crash-looping (restart {} pending)",
                u.n_restarts.unwrap_or(0) + 1
            );
            if let Some(e) = last_error(flow_failure(f)) {
                s.push_str(&format!("; last error: {e}"));
            }
            w.push(s);
        }
        Some(u) if u.condition_skipped() => w.push(format!(
            "{KNB} was skipped by its condition although {} is missing",
            f.kubelet_env.path
        )),
        Some(u) if u.active_state == "inactive" && u.exec_main_start_us.unwrap_or(0) == 0 => {
            w.push(format!("{KNB} has not started yet"))
        }
        _ => {}
    }
    match f.flow_steps().find(|p| p.state == StepState::Running) {
        Some(p) if p.step == Some(Step::Assets) => {
            w.push(assets_wait(f, &f.assets.bootkube_script))
        }
        Some(p) if p.step == Some(Step::Reboot) => {
            let reason = p
                .result
                .as_ref()
                .and_then(StepResult::reboot)
                .and_then(|r| r.reason.as_deref())
                .unwrap_or("reason not recorded");
            if p.this_boot == Some(true) {
                w.push(format!("reboot pending: {reason}"));
            } else {
                w.push(format!(
                    "rebooted ({reason}); waiting for the flow to resume"
                ));
            }
        }
        Some(p) if p.step == Some(Step::OsUpdate) => {
            w.push(update_engine_words(f).unwrap_or_else(|| "OS update in progress".to_string()))
        }
        Some(p) => w.push(format!("{KNB} is running step {}", p.name)),
        None if running_or_starting(knb) && !knb.is_some_and(|u| u.auto_restarting()) => {
            w.push(format!("{KNB} is running"))
        }
        None => {}
    }
}

/// On the bootkube master: the first helper not done, and what it waits
/// for (tectonic follows bootkube, so only one is said).
fn helper_wait(f: &Facts) -> Option<String> {
    let a = &f.assets;
    let (svc, path, script, present) = if !a.bootkube_done {
        (
            BOOTKUBE,
            BOOTKUBE_PATH,
            &a.bootkube_script,
            a.bootkube_script_present,
        )
    } else if !a.tectonic_done {
        (
            TECTONIC,
            TECTONIC_PATH,
            &a.tectonic_script,
            a.tectonic_script_present,
        )
    } else {
        return None;
    };
    if !present {
        return Some(assets_wait(f, script));
    }
    if let Some(u) = f.unit(svc).filter(|u| u.active_state == "activating") {
        let since = rfc3339_us(u.inactive_exit_timestamp_us)
            .map(|t| format!(" since {t}"))
            .unwrap_or_default();
        return Some(format!("{svc} is running{since}"));
    }
    f.kubelet_env.present.then(|| {
        let p = f
            .unit(path)
            .map(|p| format!(" ({path} {})", p.active_state))
            .unwrap_or_default();
        format!("{svc} has not been triggered yet{p}")
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    fn kubelet_env_written() -> crate::journal::StepResult {
        crate::journal::StepResult::KubeletEnv(crate::journal::KubeletEnvRecord {
            path: "/etc/kubernetes/kubelet.env".into(),
            image_tag: "v1.9.6_coreos.0".into(),
            runtime: None,
            kubelet_config: None,
        })
    }
    use crate::settings::Role;
    use crate::systemd::units::UnitState;

    fn unit(name: &str, active: &str, sub: &str) -> UnitFacts {
        UnitFacts::new(UnitState {
            name: name.into(),
            load_state: "loaded".into(),
            active_state: active.into(),
            sub_state: sub.into(),
            unit_file_state: "enabled".into(),
            result: name.ends_with(".service").then(|| "success".into()),
            n_restarts: name.ends_with(".service").then_some(0),
            exec_main_status: None,
            exec_main_start_us: Some(if active == "inactive" { 0 } else { 1 }),
            condition_result: true,
            condition_timestamp_us: 1,
            active_enter_timestamp_us: 1,
            inactive_exit_timestamp_us: 1,
            state_change_timestamp_us: 1,
        })
    }

    /// A bootkube master before anything happened, systemd reachable.
    pub(in crate::status) fn facts() -> Facts {
        Facts {
            node: NodeFacts {
                role: Role::BootkubeMaster,
                role_source: "config",
                config: "/etc/node-bootstrap/config.json".into(),
                boot_id: Some("b2".into()),
            },
            units: Some(vec![
                unit(KNB, "activating", "start"),
                unit(KUBELET, "inactive", "dead"),
                unit(BOOTKUBE_PATH, "active", "waiting"),
                unit(BOOTKUBE, "inactive", "dead"),
                unit(TECTONIC_PATH, "active", "waiting"),
                unit(TECTONIC, "inactive", "dead"),
            ]),
            state_journal: JournalFacts::Missing {
                path: "/var/lib/node-bootstrap/state.json".into(),
            },
            steps: None,
            kubelet_env: KubeletEnv {
                path: "/etc/kubernetes/kubelet.env".into(),
                present: false,
                values: vec![],
            },
            assets: Assets {
                dir: "/opt/tectonic".into(),
                mode: "push",
                bootkube_script: "/opt/tectonic/bootkube.sh".into(),
                bootkube_script_present: false,
                tectonic_script: "/opt/tectonic/tectonic-wrapper.sh".into(),
                tectonic_script_present: false,
                bootkube_done: false,
                tectonic_done: false,
            },
            torcx: None,
            backends: super::super::facts::Backends {
                os: None,
                kubelet: Some("wrapper".into()),
                kubelet_why: "kubelet.backend is \"wrapper\"".into(),
                docker: None,
                docker_why: None,
            },
            kubelet_sysext: None,
            docker: None,
            update_engine: None,
            join: None,
            follow: None,
            unreachable: vec![],
        }
    }

    /// What the API server says of a worker whose kubelet runs.
    fn join(state: crate::join::assess::JoinState) -> JoinFacts {
        JoinFacts::from_observation(&crate::join::Observation {
            node_name: "worker-1".into(),
            asked_as: crate::join::AskedAs::Kubelet,
            kubeconfig: "/var/lib/kubelet/kubeconfig".into(),
            bootstrap_token_id: None,
            state: Some(state),
            error: None,
        })
    }

    #[test]
    fn with_ready_required_a_worker_is_complete_only_once_its_node_is_ready() {
        use crate::join::assess::{CsrState, CsrView, JoinState, NodeView};
        let ready_req = Require { node_ready: true };
        let mut f = facts();
        f.node.role = Role::Worker;
        kubelet_running(&mut f);
        let node = |ready: bool| NodeView {
            name: "worker-1".into(),
            ready,
            not_ready_because: (!ready)
                .then(|| "KubeletNotReady: container runtime network not ready".into()),
            kubelet_version: "v1.20.2".into(),
            container_runtime: "containerd://1.6.20".into(),
        };
        // Not Ready: complete by the default rules, in progress with --ready.
        f.join = Some(join(JoinState::Registered(node(false))));
        assert_eq!(assess(&f).verdict, Verdict::Complete);
        let a = assess_with(&f, ready_req);
        assert_eq!(a.verdict, Verdict::InProgress);
        assert_eq!(
            a.waiting_for,
            [
                "waiting for the node to be Ready in the cluster: node worker-1: registered, not Ready: \
              KubeletNotReady: container runtime network not ready (kubelet v1.20.2, containerd://1.6.20)"
            ]
        );
        // No answer from the API server: in progress, never complete.
        f.join = Some(JoinFacts::from_observation(&crate::join::Observation {
            state: None,
            error: Some("GET https://10.0.0.1/api/v1/nodes/worker-1: cannot connect".into()),
            ..crate::join::Observation {
                node_name: "worker-1".into(),
                asked_as: crate::join::AskedAs::Kubelet,
                kubeconfig: String::new(),
                bootstrap_token_id: None,
                state: None,
                error: None,
            }
        }));
        assert_eq!(assess_with(&f, ready_req).verdict, Verdict::InProgress);
        // Ready: complete, saying so.
        f.join = Some(join(JoinState::Registered(node(true))));
        let a = assess_with(&f, ready_req);
        assert_eq!(a.verdict, Verdict::Complete);
        assert!(
            a.reasons.contains(
                &"node worker-1: Ready (kubelet v1.20.2, containerd://1.6.20)".to_string()
            ),
            "{:?}",
            a.reasons
        );
        // A denied certificate request: failed, with --ready only.
        f.join = Some(join(JoinState::AwaitingCertificate {
            csr: Some(CsrView {
                name: "csr-abc".into(),
                state: CsrState::Denied,
                reason: Some("NotOurs: no".into()),
            }),
        }));
        assert_eq!(assess(&f).verdict, Verdict::Complete);
        let a = assess_with(&f, ready_req);
        assert_eq!(a.verdict, Verdict::Failed);
        assert_eq!(
            a.reasons,
            [
                "the node cannot join the cluster: node worker-1: certificate request csr-abc denied: NotOurs: no"
            ]
        );
        // Before kubelet.env there is nothing to ask: the bootstrap's waits.
        let mut f = facts();
        f.node.role = Role::Worker;
        assert_eq!(assess_with(&f, ready_req).verdict, Verdict::InProgress);
    }

    fn set<'a>(f: &'a mut Facts, name: &str, active: &str, sub: &str) -> &'a mut UnitState {
        let u = f
            .units
            .as_mut()
            .unwrap()
            .iter_mut()
            .find(|u| u.state.name == name)
            .unwrap();
        u.state.active_state = active.into();
        u.state.sub_state = sub.into();
        &mut u.state
    }

    fn with_journal(f: &mut Facts, j: &crate::journal::StateJournal) {
        f.state_journal = JournalFacts::Present {
            path: "/var/lib/node-bootstrap/state.json".into(),
        };
        f.steps = Some(steps(j, f.node.boot_id.as_deref(), true, &[]));
    }

    fn kubelet_running(f: &mut Facts) {
        f.kubelet_env.present = true;
        set(f, KNB, "active", "exited");
        set(f, KUBELET, "active", "running");
    }

    #[test]
    fn before_assets_the_master_waits_for_them() {
        let mut f = facts();
        kubelet_running(&mut f);
        let a = assess(&f);
        assert_eq!(a.verdict, Verdict::InProgress);
        assert_eq!(
            a.waiting_for,
            vec!["waiting for assets at /opt/tectonic/bootkube.sh, pushed by terraform"]
        );
        assert_eq!(a.verdict.exit_code(), 10);
        f.assets.mode = "pull";
        assert_eq!(
            assess(&f).waiting_for,
            vec!["waiting for assets at /opt/tectonic/bootkube.sh, pulled from S3 by the agent"]
        );
    }

    #[test]
    fn worker_is_complete_with_kubelet_env_and_kubelet_active() {
        let mut f = facts();
        f.node.role = Role::Worker;
        kubelet_running(&mut f);
        let a = assess(&f);
        assert_eq!(a.verdict, Verdict::Complete);
        assert!(a.waiting_for.is_empty());
        assert_eq!(a.verdict.exit_code(), 0);
        // kubelet crash-looping after kubelet.env: still in progress.
        set(&mut f, KUBELET, "activating", "auto-restart").n_restarts = Some(4);
        let a = assess(&f);
        assert_eq!(a.verdict, Verdict::InProgress);
        assert_eq!(
            a.waiting_for,
            vec!["waiting for kubelet.service to start: activating (auto-restart) with 4 restarts"]
        );
    }

    #[test]
    fn master_is_complete_only_with_both_markers() {
        let mut f = facts();
        kubelet_running(&mut f);
        f.assets.bootkube_script_present = true;
        f.assets.tectonic_script_present = true;
        f.assets.bootkube_done = true;
        set(&mut f, TECTONIC, "activating", "start");
        let a = assess(&f);
        assert_eq!(a.verdict, Verdict::InProgress);
        assert_eq!(a.waiting_for.len(), 1);
        assert!(
            a.waiting_for[0].starts_with("tectonic.service is running since "),
            "{a:?}"
        );
        f.assets.tectonic_done = true;
        assert_eq!(assess(&f).verdict, Verdict::Complete);
    }

    #[test]
    fn crash_loop_is_in_progress_with_the_last_error() {
        let mut f = facts();
        set(&mut f, KNB, "activating", "auto-restart").n_restarts = Some(2);
        let mut j = crate::journal::StateJournal::default();
        j.begin("b2", Step::ClusterVersion);
        j.fail(
            "b2",
            Step::ClusterVersion,
            &crate::error::Error::retryable("GET https://api:443/version: connection refused"),
            vec![],
        );
        with_journal(&mut f, &j);
        let a = assess(&f);
        assert_eq!(a.verdict, Verdict::InProgress);
        assert_eq!(
            a.waiting_for[0],
            "k8s-node-bootstrap.service is crash-looping (restart 3 pending); last error: GET https://api:443/version: connection refused"
        );
    }

    #[test]
    fn bootstrap_unit_failed_for_good_is_failed() {
        let mut f = facts();
        let u = set(&mut f, KNB, "failed", "failed");
        u.result = Some("exit-code".into());
        u.exec_main_status = Some(4);
        let a = assess(&f);
        assert_eq!(a.verdict, Verdict::Failed);
        assert_eq!(
            a.reasons,
            vec![
                "k8s-node-bootstrap.service failed and is not restarting: failed (failed, result exit-code, exit status 4)"
            ]
        );
        assert_eq!(a.verdict.exit_code(), 11);
    }

    #[test]
    fn failed_helper_is_failed_unless_it_is_being_retried() {
        let mut f = facts();
        kubelet_running(&mut f);
        f.assets.bootkube_script_present = true;
        f.assets.tectonic_script_present = true;
        f.assets.bootkube_done = true;
        let mut j = crate::journal::StateJournal::default();
        j.begin("b2", Step::Tectonic);
        j.fail(
            "b2",
            Step::Tectonic,
            &crate::error::Error::retryable(
                "tectonic step (tectonic-wrapper.sh) exited with code 1",
            ),
            vec!["applying manifests".into(), "error: timeout".into()],
        );
        with_journal(&mut f, &j);
        set(&mut f, TECTONIC, "failed", "failed").result = Some("exit-code".into());
        let a = assess(&f);
        assert_eq!(a.verdict, Verdict::Failed);
        assert_eq!(
            a.reasons,
            vec![
                "tectonic.service failed: failed (failed, result exit-code); tectonic step (tectonic-wrapper.sh) exited with code 1 (last output: error: timeout)"
            ]
        );
        // The path unit re-triggered it: retrying, so in progress.
        set(&mut f, TECTONIC, "activating", "start");
        assert_eq!(assess(&f).verdict, Verdict::InProgress);
        // No systemd: the journal alone says it failed.
        f.units = None;
        assert_eq!(assess(&f).verdict, Verdict::Failed);
    }

    #[test]
    fn no_systemd_and_no_journal_is_unknown_but_a_journal_is_enough_for_in_progress() {
        let mut f = facts();
        f.units = None;
        f.unreachable.push(Unreachable {
            source: "systemd",
            error: "cannot connect to the system bus".into(),
        });
        f.unreachable.push(Unreachable {
            source: "state-journal",
            error: "no state journal".into(),
        });
        let a = assess(&f);
        assert_eq!(a.verdict, Verdict::Unknown);
        assert_eq!(a.verdict.exit_code(), 12);
        assert_eq!(
            a.reasons[0],
            "could not read systemd: cannot connect to the system bus"
        );
        // Still says what it knows.
        assert!(
            a.waiting_for[0].starts_with("waiting for assets at"),
            "{a:?}"
        );
        // Corrupt journal: same.
        f.state_journal = JournalFacts::Corrupt {
            path: "/s".into(),
            error: "bad".into(),
        };
        assert_eq!(assess(&f).verdict, Verdict::Unknown);
        // Even a complete-looking node is not complete without systemd.
        f.kubelet_env.present = true;
        f.assets.bootkube_done = true;
        f.assets.tectonic_done = true;
        assert_eq!(assess(&f).verdict, Verdict::Unknown);
        let mut j = crate::journal::StateJournal::default();
        j.begin("b2", Step::KubeletEnv);
        j.finish("b2", Step::KubeletEnv, kubelet_env_written());
        with_journal(&mut f, &j);
        let a = assess(&f);
        assert_eq!(a.verdict, Verdict::InProgress);
        assert!(a.reasons[0].contains("completion cannot be confirmed"));
    }

    #[test]
    fn non_retryable_journal_error_without_systemd_is_failed() {
        let mut f = facts();
        f.units = None;
        let mut j = crate::journal::StateJournal::default();
        j.begin("b2", Step::DockerAddon);
        j.fail(
            "b2",
            Step::DockerAddon,
            &crate::error::Error::bad_input("runtime mappings: no entry for 1.11"),
            vec![],
        );
        with_journal(&mut f, &j);
        let a = assess(&f);
        assert_eq!(a.verdict, Verdict::Failed);
        assert_eq!(
            a.reasons,
            vec![
                "step docker-addon failed and a retry cannot help: runtime mappings: no entry for 1.11"
            ]
        );
        // A retryable one is not a failure.
        j.fail(
            "b2",
            Step::DockerAddon,
            &crate::error::Error::retryable("download timed out"),
            vec![],
        );
        with_journal(&mut f, &j);
        assert_eq!(assess(&f).verdict, Verdict::InProgress);
    }

    #[test]
    fn reboot_pending_and_update_progress_are_said_in_words() {
        let mut f = facts();
        f.node.role = Role::Worker;
        let mut j = crate::journal::StateJournal::default();
        j.begin("b2", Step::Reboot);
        j.note(
            Step::Reboot,
            crate::journal::StepResult::Reboot(crate::journal::RebootRecord {
                reason: Some("docker 1.12 -> 17.03".into()),
                wipe_docker_datadir: Some(true),
                rebooted: None,
            }),
        );
        with_journal(&mut f, &j);
        assert_eq!(
            assess(&f).waiting_for,
            vec!["reboot pending: docker 1.12 -> 17.03"]
        );
        // After the reboot (new boot id) it is no longer pending.
        f.node.boot_id = Some("b3".into());
        with_journal(&mut f, &j);
        assert_eq!(
            assess(&f).waiting_for,
            vec!["rebooted (docker 1.12 -> 17.03); waiting for the flow to resume"]
        );

        let mut j = crate::journal::StateJournal::default();
        j.begin("b3", Step::OsUpdate);
        with_journal(&mut f, &j);
        f.update_engine = Some(UpdateEngine {
            current_operation: "UPDATE_STATUS_DOWNLOADING".into(),
            progress: 0.42,
            new_version: "1576.4.0".into(),
            new_size: 1,
            last_checked_time: 1,
        });
        assert_eq!(
            assess(&f).waiting_for,
            vec!["update_engine downloading 42% of 1576.4.0"]
        );
    }

    #[test]
    fn summary_leads_with_the_verdict() {
        let mut f = facts();
        kubelet_running(&mut f);
        assert_eq!(
            assess(&f).summary(),
            "in-progress: waiting for assets at /opt/tectonic/bootkube.sh, pushed by terraform"
        );
    }
}
