//! `check-config --ignition`: the pure steps a node runs before it changes
//! anything, run on the rendered config's files as the node will run them.
//!
//! - the cluster's version, where the config decides it: forced
//!   (`cluster.forced_version`), or the seed's `KUBELET_IMAGE_TAG` on the
//!   bootkube master (no API server exists yet). A worker asks the API
//!   server at boot: then every minor the runtime mappings cover is tried;
//! - the `runtime` step ([`crate::container_runtime::choice::decide`]):
//!   a version the agent does not know how to configure, or a runtime its
//!   kubelet cannot use, is refused here with the exit code the node would
//!   stop with (7);
//! - the runtime mappings for that minor: docker versions for the addon,
//!   or the containerd series (the same lookups as the node's);
//! - the kubelet's backend: the system extension (`auto` on every release
//!   from 2857.0.0, or `sysext`) needs somewhere to come from
//!   ([`crate::config::checks::warnings`] says so when nothing is set).

use crate::addon::mappings::RuntimeMappings;
use crate::config::Config;
use crate::container_runtime::choice::{Runtime, decide};
use crate::error::Result;
use crate::kubelet_env::EnvFile;

/// Lines for what was checked; the first refusal as the node's error.
pub(super) fn pure_steps(
    config: &Config,
    mappings: Option<&RuntimeMappings>,
    seed: Option<&EnvFile>,
) -> Result<Vec<String>> {
    let mut out = vec![backend_line(config)];
    match known_version(config, seed) {
        Some((version, from)) => {
            out.push(format!("cluster version: {version} ({from})"));
            out.push(runtime_for(config, mappings, &version).map_err(|e| {
                e.context(format!(
                    "the node would stop at its runtime step for Kubernetes {version} ({from})"
                ))
            })?);
        }
        None => {
            out.push(
                "cluster version: asked of the API server at boot (a worker); each minor of the \
                 runtime mappings tried below"
                    .to_string(),
            );
            for (a, b) in mappings.map(RuntimeMappings::minors).unwrap_or_default() {
                let version = format!("v{a}.{b}.0");
                out.push(match runtime_for(config, mappings, &version) {
                    Ok(line) => line,
                    Err(e) => format!("WARN a cluster of Kubernetes {a}.{b} would be refused: {e}"),
                });
            }
        }
    }
    Ok(out)
}

/// What the config says of the kubelet's backend (the release decides
/// `auto` on the node).
fn backend_line(config: &Config) -> String {
    use crate::kubelet_sysext::config::Backend;
    match config.kubelet.backend {
        Backend::Auto => "kubelet backend: auto (the kubelet sysext from the sources on Flatcar \
                          2857.0.0 and newer, every release that reads this config; \
                          kubelet-wrapper only on older releases)"
            .to_string(),
        Backend::Sysext => "kubelet backend: sysext (the kubelet from the sources)".to_string(),
        Backend::Wrapper => "kubelet backend: wrapper (kubelet-wrapper: refused on Flatcar \
                             2857.0.0 and newer, which have none; this config needs an older \
                             release)"
            .to_string(),
    }
}

/// The cluster's version where the config decides it, and from where.
fn known_version(config: &Config, seed: Option<&EnvFile>) -> Option<(String, &'static str)> {
    if let Some(v) = &config.cluster.forced_version {
        return Some((v.clone(), "cluster.forced_version"));
    }
    if config.role.is_bootkube_master() {
        let tag = seed?.get(crate::kubelet_env::IMAGE_TAG)?;
        return Some((
            crate::kubelet_env::version_from_tag(tag),
            "the bootkube master's seed KUBELET_IMAGE_TAG",
        ));
    }
    None
}

/// The runtime step for `version`, and the mappings' entry the next steps
/// read.
fn runtime_for(
    config: &Config,
    mappings: Option<&RuntimeMappings>,
    version: &str,
) -> Result<String> {
    let record = decide(
        version,
        config.runtime.requested,
        config.kubelet_config.allow_newer_kubernetes,
    )?;
    let minor = &record.kubernetes;
    let what = match (record.runtime, mappings) {
        (Runtime::Docker, _) if !config.addon.enabled => {
            "docker (the OS's: the addon is off)".to_string()
        }
        (Runtime::Docker, Some(m)) => {
            format!(
                "docker {} (the addon, from the mappings)",
                m.docker_for(version)?.join(", ")
            )
        }
        (Runtime::Containerd, Some(m)) => match m.containerd_for(version)? {
            Some(list) => format!(
                "containerd of series {} (the mappings)",
                list.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => "containerd (any that serves this kubelet: the mappings list none)".to_string(),
        },
        (r, None) => format!("{} (mappings not checked)", r.name()),
    };
    Ok(format!("runtime step ok for Kubernetes {minor}: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorClass;
    use std::path::Path;

    fn config(json: &str) -> Config {
        Config::from_json(json, Path::new("c.json")).unwrap()
    }

    fn seed(tag: &str) -> EnvFile {
        crate::kubelet_env::parse_seed(
            &format!("KUBELET_IMAGE_URL=\"u\"\nKUBELET_IMAGE_TAG=\"{tag}\"\n"),
            Path::new("seed"),
        )
        .unwrap()
    }

    fn mappings(text: &str) -> RuntimeMappings {
        RuntimeMappings::parse(text, Path::new("m.yaml")).unwrap()
    }

    const MAPPINGS: &str = "kind: VersionManifestV1\nversions:\n  k8s:\n    \"1.31\":\n      containerd: [\"2.1\", \"1.7\"]\n";

    #[test]
    fn a_bootkube_master_runs_the_runtime_step_for_its_seed() {
        let master = config(r#"{"role": "bootkube-master"}"#);
        let m = mappings(MAPPINGS);
        let lines = pure_steps(&master, Some(&m), Some(&seed("v1.31.4"))).unwrap();
        assert!(
            lines.contains(
                &"cluster version: v1.31.4 (the bootkube master's seed KUBELET_IMAGE_TAG)"
                    .to_string()
            ),
            "{lines:?}"
        );
        assert!(
            lines.contains(&"runtime step ok for Kubernetes 1.31: containerd of series 2.1, 1.7 (the mappings)".to_string()),
            "{lines:?}"
        );
        // A version the agent does not know: the node's refusal, exit 7.
        let e = pure_steps(&master, Some(&m), Some(&seed("v1.37.0"))).unwrap_err();
        assert_eq!(e.class(), ErrorClass::Refused);
        assert!(
            e.to_string()
                .contains("newer than the newest this agent knows"),
            "{e}"
        );
        // A minor the mappings lack, with the addon's docker: exit 5.
        let docker = config(
            r#"{"role": "bootkube-master", "addon": {"enabled": true, "manifest_url": "https://m.example/{board}/{os_version}/m.json"}}"#,
        );
        let e = pure_steps(&docker, Some(&m), Some(&seed("v1.20.2"))).unwrap_err();
        assert_eq!(e.class(), ErrorClass::BadInput);
        assert!(
            e.to_string().contains("have no entry for Kubernetes 1.20"),
            "{e}"
        );
    }

    #[test]
    fn a_worker_tries_each_mapped_minor() {
        let worker = config(r#"{"role": "worker"}"#);
        let m = mappings(
            "kind: VersionManifestV1\nversions:\n  k8s:\n    \"1.31\":\n      containerd: [\"2.1\"]\n    \"1.37\":\n      containerd: [\"2.1\"]\n",
        );
        let lines = pure_steps(&worker, Some(&m), Some(&seed("v1.31.4"))).unwrap();
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("runtime step ok for Kubernetes 1.31")),
            "{lines:?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("WARN a cluster of Kubernetes 1.37 would be refused")),
            "{lines:?}"
        );
    }
}
