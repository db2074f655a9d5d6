//! Runtime mappings: which docker versions and which containerd series
//! (each in preference order) each Kubernetes minor wants. A
//! `VersionManifestV1` document, YAML as Tectonic shipped it (also wrapped
//! in its ConfigMap) or JSON:
//!
//! ```yaml
//! kind: VersionManifestV1
//! versions:
//!   k8s:
//!     "1.9":
//!       docker: ["17.03", "1.12"]
//!     "1.26":
//!       containerd: ["1.7", "1.6"]
//! ```
//!
//! Version keys, docker versions and containerd series are always read as
//! the text written: an unquoted `1.10:` is Kubernetes 1.10, never the
//! number 1.1, and an unquoted `17.03` stays `17.03`. Each entry lists
//! docker, containerd or both. A containerd list holds `major.minor`
//! series, each one that can serve that Kubernetes' kubelet
//! ([`crate::container_runtime::version::serves`]: 1.6 or newer from
//! Kubernetes 1.26, 1.3 to 1.7 from 1.10 up to 1.22, none before 1.10);
//! docker is needed only where docker
//! runs (up to 1.23), containerd's list only where the OS's containerd
//! must be held to one (without it any containerd that serves the kubelet
//! fits).

use super::version::{DockerVersion, kube_major_minor};
use crate::container_runtime::version::{Series, parse_list, serves};
use crate::error::{Error, Result};
use crate::kubelet_config::table::Minor;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const KIND: &str = "VersionManifestV1";
/// The key of the mappings in Tectonic's ConfigMap
/// `tectonic-system/tectonic-torcx-runtime-mappings`.
pub const CONFIGMAP_KEY: &str = "runtime-mappings.yaml";

#[derive(Debug, Deserialize)]
struct RawDoc {
    kind: Option<String>,
    #[serde(default)]
    versions: BTreeMap<String, BTreeMap<String, BTreeMap<String, Vec<String>>>>,
    /// Only in the ConfigMap wrapper.
    #[serde(default)]
    data: BTreeMap<String, String>,
}

/// The parsed mappings of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeMappings {
    pub source: PathBuf,
    /// `(major, minor)` -> what that Kubernetes wants.
    k8s: BTreeMap<(u64, u64), Entry>,
}

/// One Kubernetes minor's entry: docker versions and containerd series,
/// each in preference order, each absent when not listed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Entry {
    docker: Option<Vec<String>>,
    containerd: Option<Vec<Series>>,
}

impl RuntimeMappings {
    /// Reads and parses the mappings file; a missing or malformed file is
    /// [`crate::error::ErrorClass::BadInput`] naming the file.
    pub fn load(path: &Path) -> Result<RuntimeMappings> {
        let text = crate::fsutil::read_input("runtime mappings", path)?;
        Self::parse(&text, path)
    }

    /// Parses YAML or JSON text; `source` names the file in errors.
    pub fn parse(text: &str, source: &Path) -> Result<RuntimeMappings> {
        let bad = |msg: String| {
            Error::bad_input(format!(
                "invalid runtime mappings {}: {msg}",
                source.display()
            ))
        };
        let doc = parse_doc(text).map_err(bad)?;
        let doc = match doc.kind.as_deref() {
            Some("ConfigMap") => {
                let inner = doc
                    .data
                    .get(CONFIGMAP_KEY)
                    .ok_or_else(|| bad(format!("ConfigMap has no data key {CONFIGMAP_KEY:?}")))?;
                parse_doc(inner).map_err(|m| bad(format!("in data.{CONFIGMAP_KEY}: {m}")))?
            }
            _ => doc,
        };
        match doc.kind.as_deref() {
            Some(KIND) => {}
            Some(other) => return Err(bad(format!("kind is {other:?}, expected {KIND:?}"))),
            None => return Err(bad(format!("no kind (expected {KIND:?})"))),
        }
        let Some(k8s_raw) = doc.versions.get("k8s") else {
            return Err(bad("no versions.k8s section".to_string()));
        };
        let mut k8s = BTreeMap::new();
        for (key, deps) in k8s_raw {
            let mm = parse_minor_key(key).ok_or_else(|| {
                bad(format!(
                    "versions.k8s key {key:?} is not a Kubernetes major.minor like \"1.9\""
                ))
            })?;
            let entry = parse_entry(key, Minor(mm.0, mm.1), deps).map_err(bad)?;
            if k8s.insert(mm, entry).is_some() {
                return Err(bad(format!(
                    "versions.k8s has Kubernetes {}.{} twice",
                    mm.0, mm.1
                )));
            }
        }
        Ok(RuntimeMappings {
            source: source.to_path_buf(),
            k8s,
        })
    }

    /// The docker versions, in preference order, for a cluster version
    /// (`v1.9.6+coreos.0` looks up `1.9`). No entry, or one without
    /// docker, is [`crate::error::ErrorClass::BadInput`] naming the
    /// version and file.
    pub fn docker_for(&self, cluster_version: &str) -> Result<Vec<String>> {
        let (major, minor) = kube_major_minor(cluster_version)?;
        let Some(entry) = self.k8s.get(&(major, minor)) else {
            let known: Vec<String> = self.k8s.keys().map(|(a, b)| format!("{a}.{b}")).collect();
            return Err(Error::bad_input(format!(
                "runtime mappings {} have no entry for Kubernetes {major}.{minor} (cluster version {cluster_version}); they cover: {}",
                self.source.display(),
                if known.is_empty() {
                    "nothing".to_string()
                } else {
                    known.join(", ")
                }
            )));
        };
        entry.docker.clone().ok_or_else(|| {
            Error::bad_input(format!(
                "runtime mappings {} list no docker versions for Kubernetes {major}.{minor} (cluster version {cluster_version})",
                self.source.display()
            ))
        })
    }

    /// The containerd series, in preference order, for a cluster version;
    /// `None` when the mappings have no entry for its minor or the entry
    /// no containerd list.
    pub fn containerd_for(&self, cluster_version: &str) -> Result<Option<Vec<Series>>> {
        let (major, minor) = kube_major_minor(cluster_version)?;
        Ok(self
            .k8s
            .get(&(major, minor))
            .and_then(|e| e.containerd.clone()))
    }

    /// The Kubernetes minors covered, for diagnostics.
    pub fn minors(&self) -> Vec<(u64, u64)> {
        self.k8s.keys().copied().collect()
    }
}

/// One entry: docker versions, containerd series, or both, each checked.
fn parse_entry(
    key: &str,
    kube: Minor,
    deps: &BTreeMap<String, Vec<String>>,
) -> std::result::Result<Entry, String> {
    let docker = deps.get("docker").filter(|d| !d.is_empty());
    for v in docker.into_iter().flatten() {
        if DockerVersion::parse(v).is_none() {
            return Err(format!(
                "versions.k8s.\"{key}\".docker has {v:?}, which is not a docker version like \"17.03\""
            ));
        }
    }
    let containerd = match deps.get("containerd") {
        None => None,
        Some(list) if list.is_empty() => {
            return Err(format!(
                "versions.k8s.\"{key}\".containerd is empty (leave it out: then any containerd that serves the kubelet fits)"
            ));
        }
        Some(list) => {
            let series =
                parse_list(list).map_err(|e| format!("versions.k8s.\"{key}\".containerd: {e}"))?;
            for s in &series {
                serves(kube, *s).map_err(|why| {
                    format!("versions.k8s.\"{key}\".containerd has \"{s}\": {why}")
                })?;
            }
            Some(series)
        }
    };
    if docker.is_none() && containerd.is_none() {
        return Err(format!(
            "versions.k8s.\"{key}\" lists neither docker versions nor containerd series"
        ));
    }
    Ok(Entry {
        docker: docker.cloned(),
        containerd,
    })
}

fn parse_doc(text: &str) -> std::result::Result<RawDoc, String> {
    if text.trim_start().starts_with('{') {
        let de = &mut serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if path == "." {
                format!("{inner}")
            } else {
                format!("at {path}: {inner}")
            }
        })
    } else {
        serde_saphyr::from_str(text).map_err(|e| e.to_string())
    }
}

/// `"1.9"` -> `(1, 9)`; exactly two numeric components.
fn parse_minor_key(key: &str) -> Option<(u64, u64)> {
    let (a, b) = key.trim().split_once('.')?;
    let num = |s: &str| -> Option<u64> {
        if s.is_empty() || s.len() > 6 || !s.bytes().all(|c| c.is_ascii_digit()) {
            None
        } else {
            s.parse().ok()
        }
    };
    Some((num(a)?, num(b)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorClass;

    const P: &str = "/etc/kubernetes/installer/runtime-mappings.yaml";

    fn parse(text: &str) -> Result<RuntimeMappings> {
        RuntimeMappings::parse(text, Path::new(P))
    }

    #[test]
    fn tectonic_yaml_with_unquoted_keys_and_values() {
        // As tectonic-torcx's deploy/runtime-mappings.yaml wrote it:
        // unquoted keys, and 1.10 next to 1.1.
        let m = parse(
            "kind: VersionManifestV1\n\
             versions:\n\
             \x20 k8s:\n\
             \x20   1.1:\n\
             \x20       docker: [ \"1.9\" ]\n\
             \x20   1.8:\n\
             \x20       # comment as in the original\n\
             \x20       docker: [ \"17.03\", \"1.12\"]\n\
             \x20   1.10:\n\
             \x20       docker: [17.03, 1.12]\n",
        )
        .unwrap();
        assert_eq!(m.docker_for("v1.10.2+coreos.0").unwrap(), ["17.03", "1.12"]);
        assert_eq!(m.docker_for("v1.1.0").unwrap(), ["1.9"]);
        assert_eq!(m.docker_for("v1.8.4+coreos.0").unwrap(), ["17.03", "1.12"]);
        assert_eq!(m.minors(), [(1, 1), (1, 8), (1, 10)]);
    }

    #[test]
    fn quoted_yaml_and_json_give_the_same_mappings() {
        let yaml = parse(
            "kind: VersionManifestV1\nversions:\n  k8s:\n    \"1.9\":\n      docker: [\"17.03\", \"1.12\"]\n    \"1.10\":\n      docker: [\"17.03\"]\n",
        )
        .unwrap();
        let json = parse(
            r#"{"kind":"VersionManifestV1","versions":{"k8s":{"1.9":{"docker":["17.03","1.12"]},"1.10":{"docker":["17.03"]}}}}"#,
        )
        .unwrap();
        assert_eq!(yaml.k8s, json.k8s);
        assert_eq!(json.containerd_for("v1.10.0").unwrap(), None);
        assert_eq!(json.docker_for("v1.10.0").unwrap(), ["17.03"]);
    }

    #[test]
    fn containerd_series_per_kubernetes_minor_held_to_what_its_kubelet_speaks() {
        let m = parse(
            "kind: VersionManifestV1\nversions:\n  k8s:\n    1.20:\n      docker: [\"20.10\"]\n      containerd: [1.6, \"1.5\"]\n    \"1.26\":\n      containerd: [\"1.7\", \"1.6\"]\n",
        )
        .unwrap();
        let series = |v: &str| {
            m.containerd_for(v)
                .unwrap()
                .map(|l| l.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        };
        assert_eq!(series("v1.26.3"), Some(vec!["1.7".into(), "1.6".into()]));
        assert_eq!(series("v1.20.2"), Some(vec!["1.6".into(), "1.5".into()]));
        assert_eq!(series("v1.27.0"), None, "no entry: no list");
        assert_eq!(m.docker_for("v1.20.2").unwrap(), ["20.10"]);
        let err = m.docker_for("v1.26.3").unwrap_err();
        assert_eq!(err.class(), ErrorClass::BadInput);
        assert_eq!(
            err.to_string(),
            format!(
                "runtime mappings {P} list no docker versions for Kubernetes 1.26 (cluster version v1.26.3)"
            )
        );
    }

    #[test]
    fn configmap_wrapper_is_unwrapped() {
        let m = parse(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tectonic-torcx-runtime-mappings\n  namespace: tectonic-system\ndata:\n  runtime-mappings.yaml: |\n    kind: VersionManifestV1\n    versions:\n      k8s:\n        1.9:\n            docker: [ \"17.03\", \"1.12\"]\n",
        )
        .unwrap();
        assert_eq!(m.docker_for("v1.9.6+coreos.0").unwrap(), ["17.03", "1.12"]);
    }

    #[test]
    fn missing_minor_names_version_and_file() {
        let m = parse("kind: VersionManifestV1\nversions:\n  k8s:\n    \"1.8\":\n      docker: [\"1.12\"]\n    \"1.9\":\n      docker: [\"17.03\"]\n").unwrap();
        let err = m.docker_for("v1.11.0+coreos.0").unwrap_err();
        assert_eq!(err.class(), ErrorClass::BadInput);
        assert_eq!(
            err.to_string(),
            format!(
                "runtime mappings {P} have no entry for Kubernetes 1.11 (cluster version v1.11.0+coreos.0); they cover: 1.8, 1.9"
            )
        );
    }

    #[test]
    fn malformed_documents_name_the_file_and_the_problem() {
        for (text, want) in [
            ("kind: Something\nversions: {}\n", "kind is \"Something\""),
            ("versions: {}\n", "no kind"),
            ("kind: VersionManifestV1\n", "no versions.k8s section"),
            (
                "kind: VersionManifestV1\nversions:\n  k8s:\n    latest:\n      docker: [\"1.12\"]\n",
                "key \"latest\" is not a Kubernetes major.minor",
            ),
            (
                "kind: VersionManifestV1\nversions:\n  k8s:\n    \"1.9\":\n      rkt: [\"1.0\"]\n",
                "versions.k8s.\"1.9\" lists neither docker versions nor containerd series",
            ),
            (
                "kind: VersionManifestV1\nversions:\n  k8s:\n    \"1.9\":\n      docker: [\"latest\"]\n",
                "has \"latest\", which is not a docker version",
            ),
            (
                "kind: VersionManifestV1\nversions:\n  k8s:\n    \"1.9\":\n      docker: [\"1.12\"]\n    \"1.09\":\n      docker: [\"1.12\"]\n",
                "Kubernetes 1.9 twice",
            ),
            (
                r#"{"kind":"VersionManifestV1","versions":{"k8s":{"1.9":{"docker":[17.03]}}}}"#,
                "at versions.k8s.1.9.docker[0]: invalid type: floating point",
            ),
            (
                "kind: VersionManifestV1\nversions:\n  k8s:\n    \"1.26\":\n      containerd: [\"1.7\", \"1.5\"]\n",
                "versions.k8s.\"1.26\".containerd has \"1.5\": the kubelet of Kubernetes 1.26 speaks only CRI v1, which containerd serves from 1.6, not 1.5",
            ),
            (
                "kind: VersionManifestV1\nversions:\n  k8s:\n    \"1.22\":\n      containerd: [\"2.0\"]\n",
                "versions.k8s.\"1.22\".containerd has \"2.0\": the kubelet of Kubernetes 1.22 speaks only CRI v1alpha2",
            ),
            (
                "kind: VersionManifestV1\nversions:\n  k8s:\n    \"1.26\":\n      containerd: [\"1.7.13\"]\n",
                "versions.k8s.\"1.26\".containerd: \"1.7.13\" is not a containerd major.minor",
            ),
            (
                "kind: VersionManifestV1\nversions:\n  k8s:\n    \"1.26\":\n      containerd: []\n",
                "versions.k8s.\"1.26\".containerd is empty",
            ),
            ("kind: [unclosed\n", ""),
        ] {
            let err = parse(text).unwrap_err();
            assert_eq!(err.class(), ErrorClass::BadInput, "{text}");
            let msg = err.to_string();
            assert!(
                msg.starts_with(&format!("invalid runtime mappings {P}: ")),
                "{msg}"
            );
            assert!(msg.contains(want), "{text}\n=> {msg}");
        }
    }

    #[test]
    fn missing_file_is_bad_input_naming_it() {
        let err =
            RuntimeMappings::load(Path::new("/nonexistent/runtime-mappings.yaml")).unwrap_err();
        assert_eq!(err.class(), ErrorClass::BadInput);
        assert!(
            err.to_string().starts_with(
                "failed to read runtime mappings at /nonexistent/runtime-mappings.yaml"
            )
        );
    }
}
