//! What `status` read from the node: plain data, serialized as the body of
//! `status --json` (docs/status-json.md). Built by [`super::probe`], judged
//! by [`super::verdict`].

use crate::error::ErrorClass;
use crate::journal::{StateJournal, Step, StepResult, StepStatus};
use crate::settings::Role;
use crate::systemd::units::UnitState;
use serde::Serialize;

pub const KNB: &str = "k8s-node-bootstrap.service";
pub const KUBELET: &str = "kubelet.service";
pub const BOOTKUBE_PATH: &str = "bootkube.path";
pub const BOOTKUBE: &str = "bootkube.service";
pub const TECTONIC_PATH: &str = "tectonic.path";
pub const TECTONIC: &str = "tectonic.service";
pub const INIT_ASSETS: &str = "init-assets.service";
pub const DOCKER: &str = "docker.service";

/// The units `status` asks systemd about (init-assets only shown when systemd
/// holds it: pull mode enables it; see `probe`).
pub const FLOW_UNITS: &[&str] = &[
    KNB,
    KUBELET,
    BOOTKUBE_PATH,
    BOOTKUBE,
    TECTONIC_PATH,
    TECTONIC,
    INIT_ASSETS,
];

#[derive(Debug, Clone, Serialize)]
pub struct Facts {
    pub node: NodeFacts,
    /// `None`: systemd could not be reached (see `unreachable`).
    pub units: Option<Vec<UnitFacts>>,
    pub state_journal: JournalFacts,
    /// The flow's steps and helpers; `None` when the journal is missing or
    /// corrupt. (Serialized as `phases`, its schema 1 name.)
    #[serde(rename = "phases")]
    pub steps: Option<Vec<StepView>>,
    pub kubelet_env: KubeletEnv,
    pub assets: Assets,
    pub torcx: Option<Torcx>,
    /// Which kubelet and which docker addon this node's release takes
    /// (`kubelet.backend`, `addon.backend` against os-release).
    pub backends: Backends,
    /// The kubelet system extension (the backend is `sysext`; `None` with
    /// kubelet-wrapper).
    pub kubelet_sysext: Option<KubeletSysext>,
    pub docker: Option<DockerInfo>,
    pub update_engine: Option<UpdateEngine>,
    /// The join, seen from the node: what the API server says of this
    /// node (`None` until kubelet.env exists: nothing to ask before).
    pub join: Option<JoinFacts>,
    /// Day two (`node-bootstrap follow`): where following the cluster's
    /// version stands; `None` when follow is off and never ran.
    pub follow: Option<FollowFacts>,
    /// Sources that could not be read, and why.
    pub unreachable: Vec<Unreachable>,
}

/// Following the cluster's version, as `follow` last recorded it
/// (docs/status-json.md, `follow`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FollowFacts {
    /// `follow.enabled` in the config.
    pub enabled: bool,
    /// up-to-date, settling, awaiting-operator, waiting, refused,
    /// changing, halted, unknown (src/follow/record.rs).
    pub standing: &'static str,
    /// Why it waits, refuses or halted.
    pub why: Option<String>,
    /// The kubelet's version and the one it follows.
    pub current: Option<String>,
    pub target: Option<String>,
    /// When the API server was last asked (RFC 3339).
    pub last_check: Option<String>,
    /// The change under way: its phase (`switched`, ...).
    pub change_phase: Option<&'static str>,
    /// The last change that ended.
    pub last_change: Option<crate::follow::record::Outcome>,
}

/// The join as the API server shows it (docs/status-json.md, `join`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JoinFacts {
    /// The node name asked about (the kubelet's).
    pub node_name: String,
    /// `kubelet` (its own certificate), `kubeconfig` (the shared one) or
    /// `bootstrap-token` (before the kubelet has a certificate).
    pub asked_as: crate::join::AskedAs,
    /// The kubeconfig the question went with.
    pub kubeconfig: String,
    /// The bootstrap token's id when it asked (never its secret).
    pub bootstrap_token_id: Option<String>,
    /// A join state's name (`src/join/assess.rs`), or `unknown`.
    pub state: &'static str,
    /// The Node is Ready in the cluster (its Ready condition True, the
    /// not-ready taint gone).
    pub ready: bool,
    /// The Node, when registered.
    pub node: Option<crate::join::assess::NodeView>,
    /// The kubelet's newest certificate request, while it has no
    /// certificate of its own.
    pub certificate_request: Option<crate::join::assess::CsrView>,
    /// The state in words.
    pub detail: String,
    /// Why the API server could not say (then `state` is `unknown`).
    pub error: Option<String>,
}

impl JoinFacts {
    pub fn from_observation(o: &crate::join::Observation) -> JoinFacts {
        use crate::join::assess::JoinState;
        JoinFacts {
            node_name: o.node_name.clone(),
            asked_as: o.asked_as,
            kubeconfig: o.kubeconfig.clone(),
            bootstrap_token_id: o.bootstrap_token_id.clone(),
            state: o.state_name(),
            ready: o.is_ready(),
            node: match &o.state {
                Some(JoinState::Registered(n)) => Some(n.clone()),
                _ => None,
            },
            certificate_request: match &o.state {
                Some(JoinState::AwaitingCertificate { csr }) => csr.clone(),
                _ => None,
            },
            detail: o.describe(),
            error: o.error.clone(),
        }
    }

    /// The kubelet's certificate request was denied, or approved and not
    /// signed: it will not join this way.
    pub fn certificate_refused(&self) -> bool {
        matches!(self.state, "certificate-denied" | "certificate-failed")
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct NodeFacts {
    pub role: Role,
    /// `config`, `inferred` (config unreadable; bootkube.path enabled) or `default`.
    pub role_source: &'static str,
    pub config: String,
    /// This boot's id as the agent recorded it (`None`: no agent ran this boot).
    pub boot_id: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct UnitFacts {
    #[serde(flatten)]
    pub state: UnitState,
    /// Conditions were checked and failed: the unit was skipped.
    pub condition_skipped: bool,
    /// RFC 3339 of the last ActiveState change (`None`: never).
    pub since: Option<String>,
}

impl UnitFacts {
    pub fn new(state: UnitState) -> Self {
        UnitFacts {
            condition_skipped: state.condition_skipped(),
            since: rfc3339_us(state.state_change_timestamp_us),
            state,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum JournalFacts {
    Present { path: String },
    Missing { path: String },
    Corrupt { path: String, error: String },
}

impl JournalFacts {
    pub fn readable(&self) -> bool {
        matches!(self, JournalFacts::Present { .. })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepState {
    Done,
    Running,
    Failed,
    Pending,
    /// Never ran and will not: disabled in config (`docker-addon` with
    /// `addon.enabled` off), or not needed (`reboot` when kubelet.env was
    /// written without one).
    Skipped,
    /// Running in an earlier boot that ended (crash, power loss) before it finished.
    Interrupted,
}

#[derive(Debug, Clone, Serialize)]
pub struct StepView {
    pub name: String,
    /// The step, when this agent knows it (`None`: a step recorded by
    /// another version).
    #[serde(skip)]
    pub step: Option<Step>,
    pub state: StepState,
    /// Whether the latest attempt ran in this boot (`None`: never ran).
    pub this_boot: Option<bool>,
    pub attempts: u32,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    pub result: Option<StepResult>,
    pub error: Option<String>,
    pub error_class: Option<ErrorClass>,
    /// Whether running again can help (from the error class).
    pub retryable: Option<bool>,
    pub log_tail: Vec<String>,
}

impl StepView {
    fn never_ran(name: &str, state: StepState) -> StepView {
        StepView {
            name: name.to_string(),
            step: Step::from_name(name),
            state,
            this_boot: None,
            attempts: 0,
            started_at: None,
            ended_at: None,
            result: None,
            error: None,
            error_class: None,
            retryable: None,
            log_tail: Vec::new(),
        }
    }
}

/// The journal's steps as `status` shows them: the flow's steps in order, the helpers
/// (on the bootkube master, or whenever recorded), then any other step.
/// `disabled` names flow steps turned off in config.
pub fn steps(
    j: &StateJournal,
    boot_id: Option<&str>,
    master: bool,
    disabled: &[&str],
) -> Vec<StepView> {
    let committed = j
        .step(Step::KubeletEnv)
        .is_some_and(|r| r.status == StepStatus::Done);
    let flow: Vec<&str> = Step::FLOW.iter().map(|s| s.name()).collect();
    let mut names = flow.clone();
    for h in Step::HELPERS {
        if master || j.step(h).is_some() {
            names.push(h.name());
        }
    }
    for k in j.steps.keys() {
        if !names.contains(&k.as_str()) {
            names.push(k);
        }
    }
    names
        .into_iter()
        .map(|name| match j.steps.get(name) {
            None if disabled.contains(&name) => StepView::never_ran(name, StepState::Skipped),
            None if committed && flow.contains(&name) => {
                StepView::never_ran(name, StepState::Skipped)
            }
            None => StepView::never_ran(name, StepState::Pending),
            Some(r) => {
                let this_boot = boot_id == Some(r.boot_id.as_str());
                let state = match r.status {
                    StepStatus::Done => StepState::Done,
                    StepStatus::Failed => StepState::Failed,
                    // The reboot step stays Running across the reboot it asked for.
                    StepStatus::Running if this_boot || name == Step::Reboot.name() => {
                        StepState::Running
                    }
                    StepStatus::Running => StepState::Interrupted,
                };
                StepView {
                    name: name.to_string(),
                    step: Step::from_name(name),
                    state,
                    this_boot: Some(this_boot),
                    attempts: r.attempts,
                    started_at: Some(r.started_at.clone()),
                    ended_at: r.ended_at.clone(),
                    result: r.result.clone(),
                    error: r.error.clone(),
                    error_class: r.error_class,
                    retryable: r.error_class.map(|c| c.is_retryable()),
                    log_tail: r.log_tail.clone(),
                }
            }
        })
        .collect()
}

#[derive(Debug, Clone, Serialize)]
pub struct KubeletEnv {
    pub path: String,
    pub present: bool,
    /// `KEY=value` pairs in file order; secret-looking values are `<redacted>`.
    pub values: Vec<(String, String)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Assets {
    pub dir: String,
    /// `push` (terraform over SSH) or `pull` (from S3).
    pub mode: &'static str,
    pub bootkube_script: String,
    pub bootkube_script_present: bool,
    pub tectonic_script: String,
    pub tectonic_script_present: bool,
    pub bootkube_done: bool,
    pub tectonic_done: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Torcx {
    /// Content of `/etc/torcx/next-profile` (`None`: no such file).
    pub next_profile: Option<String>,
    /// `name:reference` of the next profile's images (`None`: profile not found).
    pub next_images: Option<Vec<String>>,
}

/// The backends of this node, as the flow decides them
/// ([`crate::kubelet_sysext::backend`], [`crate::addon::config::BackendSetting`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Backends {
    /// The release os-release names (`Flatcar Container Linux by Kinvolk
    /// 4459.2.0`), `None` when it could not be read.
    pub os: Option<String>,
    /// `sysext` or `wrapper`; `None` when refused or unknown (`kubelet_why`
    /// says why).
    pub kubelet: Option<String>,
    pub kubelet_why: String,
    /// `torcx` or `sysext` with the docker addon on; `None` when it is off,
    /// refused (`docker_why`) or unknown.
    pub docker: Option<String>,
    pub docker_why: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KubeletSysext {
    /// The link systemd-sysext reads, e.g. `/etc/extensions/kubernetes.raw`.
    pub link: String,
    /// The image it names (`None`: no link).
    pub image: Option<String>,
    /// The extension is merged now: its extension-release file shows in
    /// `/usr/lib/extension-release.d`.
    pub merged: bool,
    /// The kubelet version the agent merged from that image (its
    /// `kubelet-sysext` record), when the record names that image.
    pub version: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DockerInfo {
    pub version: String,
    pub api_version: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct UpdateEngine {
    pub current_operation: String,
    pub progress: f64,
    pub new_version: String,
    pub new_size: i64,
    pub last_checked_time: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Unreachable {
    /// `config`, `systemd`, `state-journal`, `kubelet-env`, `torcx`, `docker`, `update-engine`, `api-server` (the names of status JSON, kept).
    pub source: &'static str,
    pub error: String,
}

impl Facts {
    pub fn unit(&self, name: &str) -> Option<&UnitState> {
        self.units
            .as_ref()?
            .iter()
            .map(|u| &u.state)
            .find(|u| u.name == name)
    }

    pub fn step(&self, step: Step) -> Option<&StepView> {
        self.steps.as_ref()?.iter().find(|p| p.step == Some(step))
    }

    /// The flow's steps (not the helpers).
    pub fn flow_steps(&self) -> impl Iterator<Item = &StepView> {
        self.steps
            .iter()
            .flatten()
            .filter(|p| p.step.is_some_and(|s| !s.is_helper()))
    }

    pub fn systemd_reachable(&self) -> bool {
        self.units.is_some()
    }
}

/// systemd µs timestamp -> RFC 3339 UTC (second precision), `None` for 0.
pub fn rfc3339_us(us: u64) -> Option<String> {
    if us == 0 {
        return None;
    }
    let t = time::OffsetDateTime::from_unix_timestamp((us / 1_000_000) as i64).ok()?;
    t.format(&time::format_description::well_known::Rfc3339)
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn steps_follow_the_flow_order_and_tell_interrupted_from_running() {
        let mut j = StateJournal::default();
        j.begin("old", Step::Assets);
        j.finish(
            "old",
            Step::Assets,
            StepResult::Raw(serde_json::json!({"assets": "pushed"})),
        );
        j.begin("old", Step::ClusterVersion);
        j.begin("old", Step::Reboot);
        j.begin("now", Step::OsUpdate);
        j.fail("now", Step::OsUpdate, &Error::config("bad"), vec![]);
        // A step another agent version recorded.
        let mut custom = j.step(Step::OsUpdate).unwrap().clone();
        custom.status = StepStatus::Running;
        j.steps.insert("custom".into(), custom);
        let p = steps(&j, Some("now"), false, &[]);
        let names: Vec<&str> = p.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "agent-upgrade",
                "assets",
                "cluster-version",
                "runtime",
                "os-update",
                "docker-addon",
                "reboot",
                "kubelet-sysext",
                "containerd",
                "kubelet-env",
                "custom"
            ]
        );
        let st: Vec<StepState> = p.iter().map(|p| p.state).collect();
        assert_eq!(
            st,
            vec![
                StepState::Pending,
                StepState::Done,
                StepState::Interrupted,
                StepState::Pending,
                StepState::Failed,
                StepState::Pending,
                StepState::Running,
                StepState::Pending,
                StepState::Pending,
                StepState::Pending,
                StepState::Running
            ]
        );
        assert_eq!(p[4].retryable, Some(false));
        assert_eq!(p[6].this_boot, Some(false));
        // The helpers show on the master even before they ran.
        let p = steps(&j, Some("now"), true, &[]);
        assert!(p.iter().any(|p| p.name == "helper/tectonic"));
    }

    #[test]
    fn disabled_and_unneeded_steps_are_skipped_not_pending() {
        let mut j = StateJournal::default();
        let state = |p: &[StepView], n: &str| p.iter().find(|p| p.name == n).unwrap().state;
        j.begin("now", Step::Assets);
        let p = steps(&j, Some("now"), false, &["docker-addon"]);
        assert_eq!(state(&p, "docker-addon"), StepState::Skipped);
        assert_eq!(
            state(&p, "reboot"),
            StepState::Pending,
            "a reboot may still come"
        );
        j.begin("now", Step::KubeletEnv);
        j.finish(
            "now",
            Step::KubeletEnv,
            StepResult::Raw(serde_json::json!({})),
        );
        let p = steps(&j, Some("now"), false, &[]);
        assert_eq!(
            state(&p, "reboot"),
            StepState::Skipped,
            "kubelet.env written without a reboot"
        );
    }

    #[test]
    fn timestamps_render_as_utc() {
        assert_eq!(rfc3339_us(0), None);
        assert_eq!(
            rfc3339_us(1_700_000_000_123_456).as_deref(),
            Some("2023-11-14T22:13:20Z")
        );
    }
}
