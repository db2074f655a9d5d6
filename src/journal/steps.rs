//! The steps the state journal records, by name, and what each step
//! records as its result: one typed record per step. This is the one home
//! of the step names; the flow, the helpers and `status` match on the
//! records' fields, so a renamed field is a compile error, not a silently
//! skipped reboot.
//!
//! On disk a result is the same JSON object the journal always held (its
//! keys sorted), under the step's name; which type it is follows from the
//! name. A result that does not read as its step's type (written by another
//! version of the agent, or an unknown step's) is kept as it was
//! ([`StepResult::Raw`]), and the flow redoes a step whose result it cannot
//! read. `tests/fixtures/journal` holds journals written before the types
//! existed; the tests below read each and write back the same JSON.

use crate::addon::AddonOutcome;
use crate::agent_upgrade::UpgradeOutcome;
use crate::cluster::ClusterVersion;
use crate::container_runtime::choice::RuntimeRecord;
use crate::container_runtime::ensure::ContainerdRecord;
use crate::kubelet_sysext::KubeletSysextRecord;
use crate::os_update::OsUpdateRecord;
use serde::{Deserialize, Serialize};

/// A step of `run` (the flow) or a helper.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Step {
    AgentUpgrade,
    Assets,
    ClusterVersion,
    Runtime,
    OsUpdate,
    DockerAddon,
    Reboot,
    KubeletSysext,
    Containerd,
    KubeletEnv,
    Bootkube,
    Tectonic,
}

impl Step {
    /// The steps of `run`, in flow order.
    pub const FLOW: [Step; 10] = [
        Step::AgentUpgrade,
        Step::Assets,
        Step::ClusterVersion,
        Step::Runtime,
        Step::OsUpdate,
        Step::DockerAddon,
        Step::Reboot,
        Step::KubeletSysext,
        Step::Containerd,
        Step::KubeletEnv,
    ];
    /// The bootkube master's helpers, in order.
    pub const HELPERS: [Step; 2] = [Step::Bootkube, Step::Tectonic];

    /// The name: the journal's key, the `PHASE`/`STEP` log field.
    pub const fn name(self) -> &'static str {
        match self {
            Step::AgentUpgrade => "agent-upgrade",
            Step::Assets => "assets",
            Step::ClusterVersion => "cluster-version",
            Step::Runtime => "runtime",
            Step::OsUpdate => "os-update",
            Step::DockerAddon => "docker-addon",
            Step::Reboot => "reboot",
            Step::KubeletSysext => crate::kubelet_sysext::STEP,
            Step::Containerd => crate::container_runtime::ensure::STEP,
            Step::KubeletEnv => "kubelet-env",
            Step::Bootkube => "helper/bootkube",
            Step::Tectonic => "helper/tectonic",
        }
    }

    pub fn from_name(name: &str) -> Option<Step> {
        Step::FLOW
            .into_iter()
            .chain(Step::HELPERS)
            .find(|s| s.name() == name)
    }

    pub fn is_helper(self) -> bool {
        Step::HELPERS.contains(&self)
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `assets`: the inputs `run` needs are in place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssetsRecord {
    /// The seed kubelet.env read.
    pub seed: String,
    /// The kubeconfig read, when the node asks an API server.
    pub kubeconfig: Option<String>,
    /// What the assets look like (`complete at /opt/tectonic`, `none pushed
    /// to this role`, or what a push-mode master still waits for).
    pub assets: String,
}

/// `reboot`: what the reboot was for, and (after it) that it happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RebootRecord {
    /// e.g. `os 1520.3.0 -> 1576.4.0; docker 1.12 -> 17.03`.
    #[serde(default)]
    pub reason: Option<String>,
    /// Requested: docker's datadir is wiped during the shutdown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wipe_docker_datadir: Option<bool>,
    /// Confirmed in the boot after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rebooted: Option<bool>,
}

/// `kubelet-env`: the commit point written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubeletEnvRecord {
    pub path: String,
    pub image_tag: String,
    /// `docker` or `containerd` (absent in records of agents before
    /// containerd).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// The kubelet's configuration file written before it (none for
    /// Kubernetes before 1.10, and in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet_config: Option<String>,
}

/// `helper/<name>`: a helper's successful run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelperRecord {
    pub exit_code: i64,
    pub duration_ms: u64,
    /// `script` or `docker`.
    pub mode: String,
    /// The container image (docker mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

/// A change that takes effect at the next boot, and the boot where the flow
/// confirmed it did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confirmable<T> {
    #[serde(flatten)]
    pub found: T,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmed_in_boot: Option<String>,
}

impl<T> Confirmable<T> {
    /// Not confirmed yet.
    pub fn new(found: T) -> Self {
        Confirmable {
            found,
            confirmed_in_boot: None,
        }
    }
}

/// What a step recorded when it finished (see module docs).
#[derive(Debug, Clone, PartialEq)]
pub enum StepResult {
    AgentUpgrade(UpgradeOutcome),
    Assets(AssetsRecord),
    ClusterVersion(ClusterVersion),
    Runtime(RuntimeRecord),
    OsUpdate(Confirmable<OsUpdateRecord>),
    DockerAddon(Confirmable<AddonOutcome>),
    Reboot(RebootRecord),
    KubeletSysext(KubeletSysextRecord),
    Containerd(ContainerdRecord),
    KubeletEnv(KubeletEnvRecord),
    Helper(HelperRecord),
    /// Not readable as its step's type, or an unknown step's: kept as is.
    Raw(serde_json::Value),
}

impl StepResult {
    /// Reads the result recorded under `name` (see module docs).
    pub fn read(name: &str, v: serde_json::Value) -> StepResult {
        fn typed<T: serde::de::DeserializeOwned>(
            v: &serde_json::Value,
            wrap: fn(T) -> StepResult,
        ) -> Option<StepResult> {
            T::deserialize(v).ok().map(wrap)
        }
        let read = match Step::from_name(name) {
            Some(Step::AgentUpgrade) => typed(&v, StepResult::AgentUpgrade),
            Some(Step::Assets) => typed(&v, StepResult::Assets),
            Some(Step::ClusterVersion) => typed(&v, StepResult::ClusterVersion),
            Some(Step::Runtime) => typed(&v, StepResult::Runtime),
            Some(Step::OsUpdate) => typed(&v, StepResult::OsUpdate),
            Some(Step::DockerAddon) => typed(&v, StepResult::DockerAddon),
            Some(Step::Reboot) => typed(&v, StepResult::Reboot),
            Some(Step::KubeletSysext) => typed(&v, StepResult::KubeletSysext),
            Some(Step::Containerd) => typed(&v, StepResult::Containerd),
            Some(Step::KubeletEnv) => typed(&v, StepResult::KubeletEnv),
            Some(Step::Bootkube | Step::Tectonic) => typed(&v, StepResult::Helper),
            None => None,
        };
        read.unwrap_or(StepResult::Raw(v))
    }

    /// The JSON the journal holds for it.
    pub fn to_json(&self) -> serde_json::Value {
        let v = match self {
            StepResult::AgentUpgrade(r) => serde_json::to_value(r),
            StepResult::Assets(r) => serde_json::to_value(r),
            StepResult::ClusterVersion(r) => serde_json::to_value(r),
            StepResult::Runtime(r) => serde_json::to_value(r),
            StepResult::OsUpdate(r) => serde_json::to_value(r),
            StepResult::DockerAddon(r) => serde_json::to_value(r),
            StepResult::Reboot(r) => serde_json::to_value(r),
            StepResult::KubeletSysext(r) => serde_json::to_value(r),
            StepResult::Containerd(r) => serde_json::to_value(r),
            StepResult::KubeletEnv(r) => serde_json::to_value(r),
            StepResult::Helper(r) => serde_json::to_value(r),
            StepResult::Raw(v) => Ok(v.clone()),
        };
        v.expect("step results serialize")
    }

    pub fn agent_upgrade(&self) -> Option<&UpgradeOutcome> {
        match self {
            StepResult::AgentUpgrade(r) => Some(r),
            _ => None,
        }
    }

    pub fn cluster_version(&self) -> Option<&ClusterVersion> {
        match self {
            StepResult::ClusterVersion(r) => Some(r),
            _ => None,
        }
    }

    pub fn runtime(&self) -> Option<&RuntimeRecord> {
        match self {
            StepResult::Runtime(r) => Some(r),
            _ => None,
        }
    }

    pub fn containerd(&self) -> Option<&ContainerdRecord> {
        match self {
            StepResult::Containerd(r) => Some(r),
            _ => None,
        }
    }

    pub fn os_update(&self) -> Option<&Confirmable<OsUpdateRecord>> {
        match self {
            StepResult::OsUpdate(r) => Some(r),
            _ => None,
        }
    }

    pub fn docker_addon(&self) -> Option<&Confirmable<AddonOutcome>> {
        match self {
            StepResult::DockerAddon(r) => Some(r),
            _ => None,
        }
    }

    pub fn kubelet_sysext(&self) -> Option<&KubeletSysextRecord> {
        match self {
            StepResult::KubeletSysext(r) => Some(r),
            _ => None,
        }
    }

    pub fn reboot(&self) -> Option<&RebootRecord> {
        match self {
            StepResult::Reboot(r) => Some(r),
            _ => None,
        }
    }
}

impl Serialize for StepResult {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Through a JSON value: its keys come out sorted, as they always were.
        self.to_json().serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::StateJournal;
    use std::path::Path;

    const FIXTURES: [(&str, &str); 3] = [
        (
            "worker-os-update-and-docker.json",
            include_str!("../../tests/fixtures/journal/worker-os-update-and-docker.json"),
        ),
        (
            "worker-reboot-requested.json",
            include_str!("../../tests/fixtures/journal/worker-reboot-requested.json"),
        ),
        (
            "bootkube-master-helpers.json",
            include_str!("../../tests/fixtures/journal/bootkube-master-helpers.json"),
        ),
    ];

    #[test]
    fn journals_written_before_the_types_read_typed_and_write_back_the_same() {
        for (name, text) in FIXTURES {
            let j = StateJournal::parse(text, Path::new(name)).unwrap();
            for (step, rec) in &j.steps {
                assert!(
                    !matches!(rec.result, Some(StepResult::Raw(_))),
                    "{name}: the result of {step} did not read as its type: {:?}",
                    rec.result
                );
            }
            let back = serde_json::to_value(&j).unwrap();
            let orig: serde_json::Value = serde_json::from_str(text).unwrap();
            assert_eq!(back, orig, "{name}");
        }
    }

    #[test]
    fn the_flow_reads_what_it_decides_on() {
        let j = StateJournal::parse(FIXTURES[0].1, Path::new("w.json")).unwrap();
        let result = |s: Step| j.step(s).unwrap().result.as_ref().unwrap();
        let os = result(Step::OsUpdate).os_update().unwrap();
        assert_eq!(os.found.outcome, crate::os_update::OsOutcome::RebootPending);
        assert_eq!(os.found.new_version.as_deref(), Some("1688.5.3"));
        assert!(os.confirmed_in_boot.is_some());
        let addon = result(Step::DockerAddon).docker_addon().unwrap();
        assert!(addon.found.reboot_needed && addon.found.wipe_docker_datadir);
        assert_eq!(addon.found.docker_next, "17.03");
        assert_eq!(
            result(Step::ClusterVersion)
                .cluster_version()
                .unwrap()
                .version,
            "v1.9.6+coreos.0"
        );
        assert_eq!(result(Step::Reboot).reboot().unwrap().rebooted, Some(true));
        let j = StateJournal::parse(FIXTURES[1].1, Path::new("r.json")).unwrap();
        let reboot = j.step(Step::Reboot).unwrap().result.as_ref().unwrap();
        assert_eq!(
            reboot.reboot().unwrap().reason.as_deref(),
            Some("os 1520.3.0 -> 9999.0.0")
        );
    }

    #[test]
    fn an_unreadable_result_is_kept_as_it_was() {
        let v = serde_json::json!({"reboot_needed": "yes, a string"});
        let r = StepResult::read("docker-addon", v.clone());
        assert_eq!(r, StepResult::Raw(v.clone()));
        assert_eq!(r.to_json(), v);
        assert_eq!(
            StepResult::read("from-a-newer-agent", v.clone()),
            StepResult::Raw(v)
        );
    }

    #[test]
    fn names_are_one_way_and_back() {
        for s in Step::FLOW.into_iter().chain(Step::HELPERS) {
            assert_eq!(Step::from_name(s.name()), Some(s));
        }
        assert_eq!(Step::from_name("helper/other"), None);
    }
}
