//! The `containerd` step: containerd configured for the cluster and proved
//! to answer before kubelet.env is written.
//!
//! 0. Where containerd comes from ([`super::package`]): the OS's where it
//!    fits the cluster, else the agent's containerd extension, installed
//!    and merged now (systemd reloaded: the unit came with it).
//! 1. The config file (`paths.containerd_config`) is written atomically
//!    when it is absent or the agent's own ([`super::containerd::MARKER`]);
//!    a file the agent did not write is used as it is (`existing_config:
//!    use`, said in the log) or refused (`refuse`, exit 4), never replaced.
//! 2. A drop-in of `containerd.service` makes it read that file
//!    (`CONTAINERD_CONFIG`, Flatcar's unit's variable); systemd reloads
//!    when the drop-in changed.
//! 3. containerd is started over D-Bus, or restarted when its config,
//!    drop-in or extension changed while it ran, and the job's end awaited.
//! 4. Its socket is asked, within `start_timeout_secs`, for its version and
//!    the CRI APIs it serves (one the cluster's kubelet speaks, or refused),
//!    and for the configuration it runs with: what the agent wrote (else
//!    containerd does not read the agent's file: refused, naming both), or
//!    with an operator's file, the cgroup driver the kubelet must use. The
//!    version it answers must be the one step 0 chose (the package's, or
//!    the OS's binary's): else another containerd answers (refused).
//!
//! A runtime that does not answer is retryable, naming the socket.

use super::choice::check_runtime_serves;
use super::config::{ExistingConfig, RuntimeSettings};
use super::containerd::{self, ContainerdConfig};
use super::cri::{self, CriApi, RuntimeAnswer};
use super::package::{self, PackageRecord};
use super::version::{ContainerdVersion, Series};
use crate::error::{Error, ErrorClass, Result};
use crate::kubelet_config::table::Minor;
use crate::settings::Paths;
use crate::systemd::manager::Systemd;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tracing::{info, warn};

pub const STEP: &str = "containerd";
/// The unit the agent starts.
pub const UNIT: &str = "containerd.service";
/// The drop-in that points containerd at the agent's config file.
pub const DROPIN: &str = "containerd.service.d/10-node-bootstrap.conf";

/// What the containerd step reads of the agent's config.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub paths: &'a Paths,
    pub runtime: &'a RuntimeSettings,
    /// Where unit drop-ins go (`addon.systemd_config_dir`).
    pub systemd_config_dir: &'a Path,
    /// Where merged extensions show their release files
    /// (`addon.sysext_release_dir`).
    pub sysext_release_dir: &'a Path,
    /// The artifact search path containerd packages come from.
    pub metadata: crate::metadata::Inputs<'a>,
}

/// Whose containerd config the node runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConfigSource {
    /// The agent wrote it in this step.
    Written,
    /// The agent's, already as it should be.
    Unchanged,
    /// An operator's file, used as it is.
    Operators,
}

/// What the step found (the state journal's record).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerdRecord {
    pub config: PathBuf,
    pub config_source: ConfigSource,
    /// containerd was restarted to read a changed config.
    pub restarted: bool,
    pub socket: PathBuf,
    /// As the Node will report it: `containerd://1.6.20~ds1`.
    pub runtime: String,
    /// The CRI API the kubelet will speak to it.
    pub cri_api: CriApi,
    /// `systemd` or `cgroupfs`: what containerd's runc uses, and so the
    /// kubelet's.
    pub cgroup_driver: String,
    /// The agent's containerd extension, when containerd came from it
    /// (absent: the OS's containerd).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<PackageRecord>,
}

/// The cluster a containerd is for: its `major.minor`, the runtime
/// mappings' containerd series for it, and the version whose kubelet
/// rules apply (the cluster's, or the newest the agent knows).
#[derive(Debug, Clone)]
pub struct ForCluster {
    pub kubernetes: Minor,
    pub listed: Option<Vec<Series>>,
    pub kubelet_rules: Minor,
}

/// Runs the step for `cluster`, with `cgroup_driver` the driver the node's
/// cgroup hierarchy calls for (`systemd` on cgroup v2).
pub async fn ensure(
    inputs: &Inputs<'_>,
    systemd: &Systemd,
    cluster: &ForCluster,
    cgroup_driver: &str,
) -> Result<ContainerdRecord> {
    let paths = inputs.paths;
    let choice = package::choose(inputs, cluster.kubernetes, cluster.listed.as_deref()).await?;
    let package = package::provide(inputs, &choice).await?;
    let merged_now = package.as_ref().is_some_and(|p| p.installed.refreshed);
    if merged_now {
        // containerd.service may have come with the extension.
        systemd.reload().await?;
    }
    let wanted = ContainerdConfig {
        socket: paths.containerd_socket.display().to_string(),
        systemd_cgroup: cgroup_driver == "systemd",
        sandbox_image: inputs.runtime.containerd_sandbox_image().to_string(),
        cni_conf_dir: paths.cni_conf_dir.display().to_string(),
        cni_bin_dir: paths.cni_bin_dir.display().to_string(),
        snapshotter: inputs.runtime.containerd.snapshotter.clone(),
    };
    let source = write_config(inputs, &containerd::render(&wanted))?;
    let dropin_changed = write_dropin(inputs)?;
    if dropin_changed {
        systemd.reload().await?;
    }
    let restart = source == ConfigSource::Written || dropin_changed || merged_now;
    let timeout = inputs.runtime.containerd.start_timeout;
    systemd.start_and_wait(UNIT, restart, timeout).await?;
    let answer = ask_until_answered(&paths.containerd_socket, timeout).await?;
    let socket = paths.containerd_socket.display().to_string();
    let cri_api = check_runtime_serves(cluster.kubelet_rules, &answer, &socket)?;
    check_version(&answer, choice.expected_version().as_ref(), &socket)?;
    let cgroup_driver = match source {
        ConfigSource::Operators => {
            let driver = reported_driver(&answer);
            warn!(step = STEP, path = %paths.containerd_config.display(), cgroup_driver = driver,
                "containerd runs an operator's config (runtime.containerd.existing_config: use); the kubelet takes the cgroup driver it reports");
            driver.to_string()
        }
        ConfigSource::Written | ConfigSource::Unchanged => {
            check_runs_ours(&answer, &wanted, &paths.containerd_config, &socket)?;
            cgroup_driver.to_string()
        }
    };
    let record = ContainerdRecord {
        config: paths.containerd_config.clone(),
        config_source: source,
        restarted: restart,
        socket: paths.containerd_socket.clone(),
        runtime: answer.version.as_node_reports(),
        cri_api,
        cgroup_driver,
        package,
    };
    info!(step = STEP, runtime = %record.runtime, cri_api = cri_api.name(), cgroup_driver = %record.cgroup_driver,
        config = %record.config.display(), socket = %socket, "containerd answers");
    Ok(record)
}

/// Writes the agent's config unless an operator's file is there.
fn write_config(inputs: &Inputs<'_>, text: &str) -> Result<ConfigSource> {
    let path = &inputs.paths.containerd_config;
    let existing = crate::fsutil::read_optional(path).map_err(|e| {
        Error::new(
            ErrorClass::BadInput,
            format!(
                "failed to read containerd's config at {}: {e}",
                path.display()
            ),
        )
    })?;
    match existing {
        Some(old) if !containerd::is_ours(&old) => {
            match inputs.runtime.containerd.existing_config {
                ExistingConfig::Use => Ok(ConfigSource::Operators),
                ExistingConfig::Refuse => Err(Error::config(format!(
                    "containerd's config {} was not written by node-bootstrap and \
                 runtime.containerd.existing_config is \"refuse\": remove it, or set \"use\" to run containerd with it",
                    path.display()
                ))),
            }
        }
        Some(old) if old == text => Ok(ConfigSource::Unchanged),
        _ => {
            if let Some(dir) = path.parent() {
                create_dir(dir, "containerd's config directory")?;
            }
            crate::fsutil::write_file(
                "containerd's config",
                path,
                text.as_bytes(),
                crate::fsutil::MODE_PUBLIC,
            )?;
            info!(step = STEP, path = %path.display(), "containerd config written");
            Ok(ConfigSource::Written)
        }
    }
}

/// Writes the drop-in; whether it changed.
fn write_dropin(inputs: &Inputs<'_>) -> Result<bool> {
    let path = inputs.systemd_config_dir.join(DROPIN);
    let text = containerd::service_dropin(&inputs.paths.containerd_config.display().to_string());
    if crate::fsutil::read_optional(&path)
        .ok()
        .flatten()
        .as_deref()
        == Some(text.as_str())
    {
        return Ok(false);
    }
    create_dir(
        path.parent().expect("a drop-in has a directory"),
        "containerd.service.d",
    )?;
    crate::fsutil::write_file(
        "containerd.service's drop-in",
        &path,
        text.as_bytes(),
        crate::fsutil::MODE_PUBLIC,
    )?;
    Ok(true)
}

fn create_dir(dir: &Path, what: &str) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::internal(format!("failed to create {what} {}: {e}", dir.display())))
}

/// Asks until containerd answers or `timeout` passes; a refusal (no CRI
/// API at all) ends it at once.
async fn ask_until_answered(socket: &Path, timeout: Duration) -> Result<RuntimeAnswer> {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(50);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match cri::ask(socket, left.max(Duration::from_millis(100))).await {
            Ok(answer) => return Ok(answer),
            Err(e) if e.class() != ErrorClass::Retryable || Instant::now() >= deadline => {
                return Err(e.context(format!(
                    "containerd did not answer within {}s of its start",
                    timeout.as_secs()
                )));
            }
            Err(_) => {
                tokio::time::sleep(pause.min(left)).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
        }
    }
}

/// Refused when the containerd that answers is not the version chosen:
/// another one (started from elsewhere, or before the merge) answers.
fn check_version(
    answer: &RuntimeAnswer,
    expected: Option<&ContainerdVersion>,
    socket: &str,
) -> Result<()> {
    let Some(want) = expected else {
        return Ok(());
    };
    let seen = ContainerdVersion::parse(&answer.version.runtime_version);
    if seen.as_ref().is_some_and(|v| v.same_release(want)) {
        return Ok(());
    }
    Err(Error::refused(format!(
        "{} answers at {socket}, not the containerd {want} the agent chose: another containerd \
         runs there (check which program containerd.service runs and `systemd-sysext status`)",
        answer.version.as_node_reports()
    )))
}

/// The cgroup driver a running containerd's runc uses.
fn reported_driver(answer: &RuntimeAnswer) -> &'static str {
    match answer.config.as_ref().and_then(|c| c.systemd_cgroup) {
        Some(true) => "systemd",
        _ => "cgroupfs",
    }
}

/// Refused when containerd reports settings other than those the agent
/// wrote: it does not read the agent's file.
fn check_runs_ours(
    answer: &RuntimeAnswer,
    wanted: &ContainerdConfig,
    path: &Path,
    socket: &str,
) -> Result<()> {
    let Some(seen) = &answer.config else {
        return Err(Error::refused(format!(
            "{} at {socket} does not report the configuration it runs with, so the agent cannot \
             tell that it reads {}",
            answer.version.as_node_reports(),
            path.display()
        )));
    };
    let systemd_seen = seen.systemd_cgroup.unwrap_or(false);
    let image_seen = seen.sandbox_image.as_deref().unwrap_or("");
    if systemd_seen == wanted.systemd_cgroup && image_seen == wanted.sandbox_image {
        return Ok(());
    }
    Err(Error::refused(format!(
        "containerd at {socket} runs with SystemdCgroup={systemd_seen} and sandbox image \
         {image_seen:?}, not the SystemdCgroup={} and {:?} of the config the agent wrote at {}: \
         containerd.service does not read that file (its drop-in {DROPIN} sets CONTAINERD_CONFIG)",
        wanted.systemd_cgroup,
        wanted.sandbox_image,
        path.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::container_runtime::cri::{ConfigSeen, RuntimeVersion};

    fn answer(systemd: Option<bool>, image: &str) -> RuntimeAnswer {
        RuntimeAnswer {
            version: RuntimeVersion {
                runtime_name: "containerd".into(),
                runtime_version: "1.6.20~ds1".into(),
                ..Default::default()
            },
            apis: vec![CriApi::V1, CriApi::V1alpha2],
            config: Some(ConfigSeen {
                systemd_cgroup: systemd,
                sandbox_image: Some(image.into()),
                ..Default::default()
            }),
        }
    }

    fn wanted(systemd: bool) -> ContainerdConfig {
        ContainerdConfig {
            socket: "/run/containerd/containerd.sock".into(),
            systemd_cgroup: systemd,
            sandbox_image: "registry.k8s.io/pause:3.10".into(),
            cni_conf_dir: "/etc/kubernetes/cni/net.d".into(),
            cni_bin_dir: "/opt/cni/bin".into(),
            snapshotter: "overlayfs".into(),
        }
    }

    #[test]
    fn containerd_must_report_what_the_agent_wrote() {
        let path = Path::new("/etc/containerd/config.toml");
        let sock = "/run/containerd/containerd.sock";
        check_runs_ours(
            &answer(Some(true), "registry.k8s.io/pause:3.10"),
            &wanted(true),
            path,
            sock,
        )
        .unwrap();
        // containerd leaves SystemdCgroup out when false.
        check_runs_ours(
            &answer(None, "registry.k8s.io/pause:3.10"),
            &wanted(false),
            path,
            sock,
        )
        .unwrap();
        let err = check_runs_ours(
            &answer(None, "registry.k8s.io/pause:3.6"),
            &wanted(true),
            path,
            sock,
        )
        .unwrap_err();
        assert_eq!(err.class(), ErrorClass::Refused);
        assert!(
            err.to_string().contains(
                "runs with SystemdCgroup=false and sandbox image \"registry.k8s.io/pause:3.6\", \
                 not the SystemdCgroup=true and \"registry.k8s.io/pause:3.10\" of the config the \
                 agent wrote at /etc/containerd/config.toml"
            ),
            "{err}"
        );
        let mut silent = answer(Some(true), "x");
        silent.config = None;
        let err = check_runs_ours(&silent, &wanted(true), path, sock).unwrap_err();
        assert!(
            err.to_string()
                .contains("does not report the configuration"),
            "{err}"
        );
    }

    #[test]
    fn an_operators_containerd_gives_the_kubelet_its_cgroup_driver() {
        assert_eq!(reported_driver(&answer(Some(true), "x")), "systemd");
        assert_eq!(reported_driver(&answer(Some(false), "x")), "cgroupfs");
        assert_eq!(reported_driver(&answer(None, "x")), "cgroupfs");
    }
}
