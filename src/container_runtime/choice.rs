//! Which runtime the kubelet of a cluster version runs on: the pure rule.
//!
//! Docker reaches the kubelet through dockershim, which Kubernetes 1.24
//! removed (CHANGELOG-1.24.md, #97252); containerd speaks CRI to every
//! kubelet the agent configures. `auto` takes docker up to 1.23, as
//! Tectonic's and Container Linux's nodes ran, and containerd from 1.24.
//! A kubelet speaks CRI v1alpha1 in 1.8 and 1.9 (containerd's RELEASES.md:
//! "v1.0 (w/ cri-containerd) | 1.7, 1.8, 1.9 | v1alpha1"; the proto's
//! `package runtime;`), so `containerd` is refused there. It speaks CRI
//! v1alpha2 from 1.10 up to 1.22, prefers v1 from 1.23 and
//! speaks only v1 from 1.26 (CHANGELOG-1.23.md #106501, CHANGELOG-1.26.md
//! #110618); containerd 1.6 and 1.7 serve both, 2.0 only v1, so which API
//! a runtime must serve is checked against the runtime itself
//! ([`super::cri`]) rather than a version table.

use super::cri::{CriApi, RuntimeAnswer};
use crate::error::{Error, Result};
use crate::kubelet_config::table::Minor;

/// The last Kubernetes with dockershim.
pub const LAST_DOCKERSHIM: Minor = Minor(1, 23);
/// The first Kubernetes whose kubelet speaks a CRI containerd serves
/// (v1alpha2; 1.8 and 1.9 spoke v1alpha1).
pub const FIRST_CONTAINERD: Minor = Minor(1, 10);

/// What configuration asks for (`runtime.name`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Requested {
    /// docker up to 1.23, containerd from 1.24.
    Auto,
    Docker,
    Containerd,
}

/// The runtime the node runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    Docker,
    Containerd,
}

impl Runtime {
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Docker => "docker",
            Runtime::Containerd => "containerd",
        }
    }
}

/// The runtime for a kubelet of `v`. Docker asked for on 1.24 or newer is
/// refused, before anything is installed or committed.
pub fn choose(requested: Requested, v: Minor) -> Result<Runtime> {
    match requested {
        Requested::Auto if v <= LAST_DOCKERSHIM => Ok(Runtime::Docker),
        Requested::Containerd if v < FIRST_CONTAINERD => Err(Error::refused(format!(
            "runtime.name is \"containerd\" but the cluster runs Kubernetes {v}, whose kubelet \
             speaks CRI v1alpha1 (package runtime), which only cri-containerd 1.0 served; containerd \
             serves CRI v1alpha2 from 1.1, for Kubernetes {FIRST_CONTAINERD} on (containerd's \
             RELEASES.md, \"Kubernetes Support\"): set runtime.name to \"docker\" or \"auto\""
        ))),
        Requested::Auto | Requested::Containerd => Ok(Runtime::Containerd),
        Requested::Docker if v <= LAST_DOCKERSHIM => Ok(Runtime::Docker),
        Requested::Docker => Err(Error::refused(format!(
            "runtime.name is \"docker\" but the cluster runs Kubernetes {v}, whose kubelet has no \
             dockershim (removed in 1.24, CHANGELOG-1.24.md #97252): set runtime.name to \
             \"containerd\" or \"auto\""
        ))),
    }
}

/// The CRI APIs a kubelet of `v` can speak, the one it prefers first
/// (none the agent probes before 1.10: v1alpha1).
pub fn kubelet_apis(v: Minor) -> &'static [CriApi] {
    if v < FIRST_CONTAINERD {
        &[]
    } else if v <= Minor(1, 22) {
        &[CriApi::V1alpha2]
    } else if v <= Minor(1, 25) {
        &[CriApi::V1, CriApi::V1alpha2]
    } else {
        &[CriApi::V1]
    }
}

/// Whether the runtime that answered serves an API the kubelet of `v`
/// speaks; refused (naming both) when not: that kubelet would exit at
/// once ("CRI v1 runtime API is not implemented for endpoint").
pub fn check_runtime_serves(v: Minor, answer: &RuntimeAnswer, socket: &str) -> Result<CriApi> {
    let wanted = kubelet_apis(v);
    wanted
        .iter()
        .copied()
        .find(|api| answer.serves(*api))
        .ok_or_else(|| {
            let names = |apis: &[CriApi]| {
                apis.iter()
                    .map(|a| a.name())
                    .collect::<Vec<_>>()
                    .join(" or ")
            };
            Error::refused(format!(
                "{} at {socket} serves CRI {} and the kubelet of Kubernetes {v} speaks only {}",
                answer.version.as_node_reports(),
                if answer.apis.is_empty() {
                    "nothing".to_string()
                } else {
                    names(&answer.apis)
                },
                names(wanted)
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::container_runtime::cri::RuntimeVersion;

    #[test]
    fn auto_takes_docker_until_dockershim_is_gone() {
        assert_eq!(
            choose(Requested::Auto, Minor(1, 9)).unwrap(),
            Runtime::Docker
        );
        assert_eq!(
            choose(Requested::Auto, Minor(1, 23)).unwrap(),
            Runtime::Docker
        );
        assert_eq!(
            choose(Requested::Auto, Minor(1, 24)).unwrap(),
            Runtime::Containerd
        );
        assert_eq!(
            choose(Requested::Containerd, Minor(1, 20)).unwrap(),
            Runtime::Containerd
        );
        assert_eq!(
            choose(Requested::Docker, Minor(1, 23)).unwrap(),
            Runtime::Docker
        );
    }

    #[test]
    fn containerd_for_a_v1alpha1_kubelet_is_refused_by_name() {
        for m in [8, 9] {
            let err = choose(Requested::Containerd, Minor(1, m)).unwrap_err();
            assert_eq!(err.class(), crate::error::ErrorClass::Refused);
            assert!(err.to_string().contains("speaks CRI v1alpha1"), "{err}");
        }
        assert_eq!(
            choose(Requested::Containerd, Minor(1, 10)).unwrap(),
            Runtime::Containerd
        );
        assert!(kubelet_apis(Minor(1, 9)).is_empty());
        assert_eq!(kubelet_apis(Minor(1, 10)), [CriApi::V1alpha2]);
    }

    #[test]
    fn docker_on_1_24_is_refused_by_name() {
        let err = choose(Requested::Docker, Minor(1, 24)).unwrap_err();
        assert_eq!(err.class(), crate::error::ErrorClass::Refused);
        let text = err.to_string();
        assert!(text.contains("runtime.name is \"docker\""), "{text}");
        assert!(text.contains("Kubernetes 1.24"), "{text}");
    }

    fn answer(apis: &[CriApi]) -> RuntimeAnswer {
        RuntimeAnswer {
            version: RuntimeVersion {
                runtime_name: "containerd".into(),
                runtime_version: "1.5.8".into(),
                ..Default::default()
            },
            apis: apis.to_vec(),
            config: None,
            cgroup_driver: None,
            server: None,
        }
    }

    #[test]
    fn the_runtime_must_serve_an_api_the_kubelet_speaks() {
        let old = answer(&[CriApi::V1alpha2]);
        let both = answer(&[CriApi::V1, CriApi::V1alpha2]);
        let new = answer(&[CriApi::V1]);
        let sock = "/run/containerd/containerd.sock";
        assert_eq!(
            check_runtime_serves(Minor(1, 20), &old, sock).unwrap(),
            CriApi::V1alpha2
        );
        assert_eq!(
            check_runtime_serves(Minor(1, 25), &old, sock).unwrap(),
            CriApi::V1alpha2
        );
        assert_eq!(
            check_runtime_serves(Minor(1, 25), &both, sock).unwrap(),
            CriApi::V1
        );
        assert_eq!(
            check_runtime_serves(Minor(1, 26), &both, sock).unwrap(),
            CriApi::V1
        );
        let err = check_runtime_serves(Minor(1, 26), &old, sock).unwrap_err();
        assert_eq!(
            err.to_string(),
            "containerd://1.5.8 at /run/containerd/containerd.sock serves CRI v1alpha2 and the \
             kubelet of Kubernetes 1.26 speaks only v1"
        );
        let err = check_runtime_serves(Minor(1, 22), &new, sock).unwrap_err();
        assert!(err.to_string().contains("speaks only v1alpha2"), "{err}");
    }

    #[test]
    fn the_step_refuses_before_anything_changes_and_records_the_rules() {
        let r = decide("v1.20.2", Requested::Auto, false).unwrap();
        assert_eq!(r.runtime, Runtime::Docker);
        assert_eq!(
            (r.kubernetes.as_str(), r.kubelet_rules.as_str()),
            ("1.20", "1.20")
        );
        let r = decide("v1.24.3+k3s1", Requested::Auto, false).unwrap();
        assert_eq!(r.runtime, Runtime::Containerd);
        let err = decide("v1.24.0", Requested::Docker, false).unwrap_err();
        assert_eq!(err.class(), crate::error::ErrorClass::Refused);
        let err = decide("v1.37.0", Requested::Containerd, false).unwrap_err();
        assert!(err.to_string().contains("newer than the newest"), "{err}");
        let r = decide("v1.37.0", Requested::Containerd, true).unwrap();
        assert_eq!(
            (r.kubernetes.as_str(), r.kubelet_rules.as_str()),
            ("1.37", "1.36")
        );
        assert_eq!(r.rules(), Some(Minor(1, 36)));
    }
}

/// The `runtime` step's record: the runtime chosen for the cluster
/// version, and the Kubernetes version whose rules configure its kubelet.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RuntimeRecord {
    pub runtime: Runtime,
    pub requested: Requested,
    /// The cluster's `major.minor`, e.g. `1.20`.
    pub kubernetes: String,
    /// The version whose kubelet rules apply: the cluster's, or the
    /// newest the agent knows when `kubelet_config.allow_newer_kubernetes`
    /// let a newer cluster through.
    pub kubelet_rules: String,
    /// What runs the kubelet on this node (`sysext` or `wrapper`), and
    /// why (`kubelet.backend`, or what `auto` found of the release): the
    /// flow's check of the backends, before anything changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet_why: Option<String>,
    /// How the docker addon activates docker (`torcx` or `sysext`) for the
    /// release running now, on a docker node with the addon on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker_backend: Option<String>,
}

impl RuntimeRecord {
    /// The [`Minor`] of `kubelet_rules`.
    pub fn rules(&self) -> Option<Minor> {
        parse_minor(&self.kubelet_rules)
    }
}

/// `1.20` -> `Minor(1, 20)`.
pub fn parse_minor(s: &str) -> Option<Minor> {
    let (a, b) = s.split_once('.')?;
    Some(Minor(a.parse().ok()?, b.parse().ok()?))
}

/// The `runtime` step: the cluster version checked against what the agent
/// knows how to configure, and the runtime chosen for it. Nothing is
/// installed or written; a refusal here comes before every change.
pub fn decide(
    cluster_version: &str,
    requested: Requested,
    allow_newer_kubernetes: bool,
) -> Result<RuntimeRecord> {
    let v = crate::cluster::KubeVersion::parse(cluster_version)
        .map_err(|e| Error::refused(format!("cluster version: {e}")))?;
    let minor = Minor(v.major, v.minor);
    let rules = crate::kubelet_config::check_known(minor, allow_newer_kubernetes)?;
    let runtime = choose(requested, minor)?;
    Ok(RuntimeRecord {
        runtime,
        requested,
        kubernetes: minor.to_string(),
        kubelet_rules: rules.to_string(),
        kubelet: None,
        kubelet_why: None,
        docker_backend: None,
    })
}
