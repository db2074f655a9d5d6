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
use super::config::ExistingConfig;
use super::containerd::{self, ContainerdConfig};
use super::cri::{self, CgroupDriver, ConfigSeen, CriApi, RuntimeAnswer, ServerProcess};
use super::package::{self, PackageRecord};
use super::version::{ContainerdVersion, Series};
use super::{Inputs, STEP};
use crate::error::{Error, ErrorClass, Result};
use crate::kubelet_config::table::Minor;
use crate::systemd::manager::Systemd;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tracing::{info, warn};

/// The unit the agent starts.
pub const UNIT: &str = "containerd.service";
/// The drop-in that points containerd at the agent's config file. systemd
/// applies a unit's drop-ins in the order of their file names, the last
/// assignment of a variable winning (systemd.unit(5)): this name sorts
/// after Flatcar's own `10-use-cgroupfs.conf`, which nodes upgraded across
/// Flatcar 2969 with cgroup v1 kept carry
/// (`Environment=CONTAINERD_CONFIG=/usr/share/containerd/config-cgroupfs.toml`),
/// so the agent's file is the one read there too (it says cgroupfs on such
/// a node, as Flatcar's does).
pub const DROPIN: &str = "containerd.service.d/50-node-bootstrap.conf";
/// Where agents before 0.2 wrote it (it lost to Flatcar's
/// `10-use-cgroupfs.conf`); removed when found, if it is the agent's.
pub const LEGACY_DROPIN: &str = "containerd.service.d/10-node-bootstrap.conf";

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
    /// What was compared of the running containerd with the agent's file
    /// (absent with an operator's file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<Verified>,
    /// containerd is below what its own support matrix names for the
    /// cluster's Kubernetes ([`super::version::below_recommended`]), or
    /// leaves the pause image unpinned for a kubelet that relies on the pin
    /// ([`super::version::unpinned_pause`]): a warning, not a refusal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advice: Option<String>,
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
    let advice = advice(cluster.kubernetes, &answer, &socket)?;
    if let Some(advice) = &advice {
        warn!(step = STEP, runtime = %answer.version.as_node_reports(), advice = %advice,
            "containerd is older than its own support matrix names for this Kubernetes, or leaves the pause image unpinned; going on (the CRI check passed)");
    }
    let (cgroup_driver, verified) = match source {
        ConfigSource::Operators => {
            let driver = reported_driver(&answer, &socket)?.name();
            warn!(step = STEP, path = %paths.containerd_config.display(), cgroup_driver = driver,
                "containerd runs an operator's config (runtime.containerd.existing_config: use); the kubelet takes the cgroup driver it reports");
            (driver.to_string(), None)
        }
        ConfigSource::Written | ConfigSource::Unchanged => {
            let v = check_runs_ours(&answer, &wanted, &paths.containerd_config, &socket)?;
            info!(step = STEP, checked = %v.checked.join(", "), not_reported = %v.not_reported.join(", "),
                "containerd runs the agent's config");
            (cgroup_driver.to_string(), Some(v))
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
        verified,
        advice,
        package,
    };
    info!(step = STEP, runtime = %record.runtime, cri_api = cri_api.name(), cgroup_driver = %record.cgroup_driver,
        config = %record.config.display(), socket = %socket, "containerd answers");
    Ok(record)
}

/// What the running containerd lacks for the cluster's Kubernetes without
/// being refused ([`super::version::below_recommended`],
/// [`super::version::unpinned_pause`]); one below the agent's minimum
/// (1.5: the runtime options it must read back) is refused.
fn advice(kube: Minor, answer: &RuntimeAnswer, socket: &str) -> Result<Option<String>> {
    let Some(v) = ContainerdVersion::parse(&answer.version.runtime_version) else {
        return Ok(None);
    };
    if v.series() < super::version::MINIMUM {
        return Err(Error::refused(format!(
            "{} at {socket} is older than containerd {}, the oldest that reports its runtime options (SystemdCgroup): the agent could not tell the kubelet its cgroup driver",
            answer.version.as_node_reports(),
            super::version::MINIMUM
        )));
    }
    let notes: Vec<String> = [
        super::version::below_recommended(kube, &v),
        super::version::unpinned_pause(kube, &v),
    ]
    .into_iter()
    .flatten()
    .collect();
    Ok((!notes.is_empty()).then(|| notes.join("; ")))
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

/// Writes the drop-in (and removes the agent's drop-in of the old name);
/// whether anything changed.
fn write_dropin(inputs: &Inputs<'_>) -> Result<bool> {
    let legacy = inputs.systemd_config_dir.join(LEGACY_DROPIN);
    let legacy_removed = match crate::fsutil::read_optional(&legacy).ok().flatten() {
        Some(old) if containerd::is_our_dropin(&old) => {
            std::fs::remove_file(&legacy).map_err(|e| {
                Error::internal(format!("failed to remove {}: {e}", legacy.display()))
            })?;
            info!(step = STEP, path = %legacy.display(), "the agent's drop-in of the old name removed");
            true
        }
        _ => false,
    };
    let path = inputs.systemd_config_dir.join(DROPIN);
    let text = containerd::service_dropin(&inputs.paths.containerd_config.display().to_string());
    if crate::fsutil::read_optional(&path)
        .ok()
        .flatten()
        .as_deref()
        == Some(text.as_str())
    {
        return Ok(legacy_removed);
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

/// The cgroup driver a running containerd's runc uses, as it reports it:
/// its `RuntimeConfig` answer (containerd 2.0 on, what a kubelet from 1.31
/// asks), else the default runtime's `SystemdCgroup` in its verbose
/// `Status` (runc's default, cgroupfs, when the option is not set). An
/// error says what it did not report.
pub fn reported_driver(answer: &RuntimeAnswer, socket: &str) -> Result<CgroupDriver> {
    if let Some(d) = answer.cgroup_driver {
        return Ok(d);
    }
    answer
        .config
        .as_ref()
        .and_then(ConfigSeen::cgroup_driver)
        .ok_or_else(|| {
            Error::refused(format!(
                "{} at {socket} does not report its cgroup driver: it answers no CRI RuntimeConfig \
                 and its verbose Status has {}, so the kubelet's cgroup driver cannot be taken from it",
                answer.version.as_node_reports(),
                match &answer.config {
                    None => "no config".to_string(),
                    Some(c) => format!(
                        "no runtime {:?} under containerd.runtimes",
                        c.default_runtime.as_deref().unwrap_or("runc")
                    ),
                }
            ))
        })
}

/// What the step compared of a running containerd with the agent's file
/// (`checked`), and what containerd did not report (`not_reported`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Verified {
    pub checked: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_reported: Vec<String>,
}

/// Refused when containerd does not run with the agent's file (`path`):
/// its command line names another file (both named, and the drop-in
/// that should have chosen it), or it reports a setting other than the
/// file's (each named). What containerd does not report is said, never
/// taken as a difference: containerd 2.x reports no sandbox image over
/// CRI ([`super::cri`]). Refused as well when nothing at all could be
/// compared.
pub fn check_runs_ours(
    answer: &RuntimeAnswer,
    wanted: &ContainerdConfig,
    path: &Path,
    socket: &str,
) -> Result<Verified> {
    let who = answer.version.as_node_reports();
    let mut v = Verified::default();
    match answer.server.as_ref() {
        Some(ServerProcess {
            pid,
            config_file: Some(file),
        }) if file != path => {
            return Err(Error::refused(format!(
                "{who} at {socket} (pid {pid}) was started with the config file {}, not the agent's \
                 {}: something sets CONTAINERD_CONFIG after the agent's drop-in {DROPIN} (such as \
                 Flatcar's containerd.service.d/10-use-cgroupfs.conf; `systemctl cat \
                 containerd.service` shows which), or containerd.service does not use the variable",
                file.display(),
                path.display()
            )));
        }
        Some(ServerProcess {
            config_file: Some(_),
            ..
        }) => v.checked.push("config file (its command line)".into()),
        _ => v
            .not_reported
            .push("config file (the serving process's command line)".into()),
    }
    let mut differs = Vec::new();
    let mut compare = |what: &str, seen: Option<String>, want: String| match seen {
        Some(seen) if seen == want => v.checked.push(what.to_string()),
        Some(seen) => differs.push(format!("{what} {seen:?}, not {want:?}")),
        None => v.not_reported.push(what.to_string()),
    };
    let want_driver = if wanted.systemd_cgroup {
        CgroupDriver::Systemd
    } else {
        CgroupDriver::Cgroupfs
    };
    let driver = reported_driver(answer, socket).ok();
    compare(
        "cgroup driver",
        driver.map(|d| d.name().to_string()),
        want_driver.name().to_string(),
    );
    let seen = answer.config.clone().unwrap_or_default();
    compare(
        "sandbox image",
        seen.sandbox_image,
        wanted.sandbox_image.clone(),
    );
    compare(
        "CNI conf_dir",
        seen.cni_conf_dir,
        wanted.cni_conf_dir.clone(),
    );
    if !differs.is_empty() {
        return Err(Error::refused(format!(
            "{who} at {socket} runs with {}: not what the agent's file {} says{}",
            differs.join(", "),
            path.display(),
            if v.checked.iter().any(|c| c.starts_with("config file")) {
                " (its command line names that file: it was not restarted since the file changed)"
                    .to_string()
            } else {
                format!(
                    " (containerd.service may not read that file: its drop-in {DROPIN} sets CONTAINERD_CONFIG)"
                )
            }
        )));
    }
    if v.checked.is_empty() {
        return Err(Error::refused(format!(
            "{who} at {socket} reports nothing the agent can compare with its file {}: no {} \
             (no verbose CRI Status config, no RuntimeConfig, no readable command line)",
            path.display(),
            v.not_reported.join(", no ")
        )));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::container_runtime::cri::RuntimeVersion;

    const PATH: &str = "/etc/containerd/config.toml";
    const SOCK: &str = "/run/containerd/containerd.sock";

    /// What containerd 1.6 (`sandboxImage` reported) or 2.x (not) says.
    fn answer(version: &str, systemd: Option<bool>, image: Option<&str>) -> RuntimeAnswer {
        RuntimeAnswer {
            version: RuntimeVersion {
                runtime_name: "containerd".into(),
                runtime_version: version.into(),
                ..Default::default()
            },
            apis: vec![CriApi::V1, CriApi::V1alpha2],
            config: Some(ConfigSeen {
                default_runtime: Some("runc".into()),
                default_runtime_reported: true,
                systemd_cgroup: systemd,
                sandbox_image: image.map(str::to_string),
                cni_conf_dir: Some("/etc/kubernetes/cni/net.d".into()),
                ..Default::default()
            }),
            cgroup_driver: None,
            server: Some(ServerProcess {
                pid: 42,
                config_file: Some(PATH.into()),
            }),
        }
    }

    fn wanted(systemd: bool) -> ContainerdConfig {
        ContainerdConfig {
            socket: SOCK.into(),
            systemd_cgroup: systemd,
            sandbox_image: "registry.k8s.io/pause:3.10".into(),
            cni_conf_dir: "/etc/kubernetes/cni/net.d".into(),
            cni_bin_dir: "/opt/cni/bin".into(),
            snapshotter: "overlayfs".into(),
        }
    }

    fn check(a: &RuntimeAnswer, systemd: bool) -> Result<Verified> {
        check_runs_ours(a, &wanted(systemd), Path::new(PATH), SOCK)
    }

    #[test]
    fn containerd_1_6_must_report_what_the_agent_wrote() {
        let pause = Some("registry.k8s.io/pause:3.10");
        let v = check(&answer("1.6.20~ds1", Some(true), pause), true).unwrap();
        assert_eq!(
            v.checked,
            [
                "config file (its command line)",
                "cgroup driver",
                "sandbox image",
                "CNI conf_dir"
            ]
        );
        assert!(v.not_reported.is_empty(), "{v:?}");
        // containerd leaves SystemdCgroup out when it is not set: runc's cgroupfs.
        check(&answer("1.6.20~ds1", None, pause), false).unwrap();
        let err = check(
            &answer("1.6.20~ds1", None, Some("registry.k8s.io/pause:3.6")),
            true,
        )
        .unwrap_err();
        assert_eq!(err.class(), ErrorClass::Refused);
        assert_eq!(
            err.to_string(),
            "containerd://1.6.20~ds1 at /run/containerd/containerd.sock runs with cgroup driver \
             \"cgroupfs\", not \"systemd\", sandbox image \"registry.k8s.io/pause:3.6\", not \
             \"registry.k8s.io/pause:3.10\": not what the agent's file /etc/containerd/config.toml \
             says (its command line names that file: it was not restarted since the file changed)"
        );
    }

    #[test]
    fn containerd_2_is_not_refused_for_the_sandbox_image_it_does_not_report() {
        let mut a = answer("2.1.4", Some(true), None);
        a.apis = vec![CriApi::V1];
        a.cgroup_driver = Some(CgroupDriver::Systemd);
        let v = check(&a, true).unwrap();
        assert_eq!(v.not_reported, ["sandbox image"]);
        assert!(v.checked.contains(&"cgroup driver".to_string()), "{v:?}");
        // RuntimeConfig's answer is the cgroup driver, whatever the options say.
        a.cgroup_driver = Some(CgroupDriver::Cgroupfs);
        let err = check(&a, true).unwrap_err();
        assert!(
            err.to_string()
                .contains("cgroup driver \"cgroupfs\", not \"systemd\""),
            "{err}"
        );
    }

    #[test]
    fn another_config_file_is_refused_naming_both_files() {
        let mut a = answer("2.1.4", Some(false), None);
        a.server = Some(ServerProcess {
            pid: 7,
            config_file: Some("/usr/share/containerd/config-cgroupfs.toml".into()),
        });
        let err = check(&a, false).unwrap_err();
        assert_eq!(err.class(), ErrorClass::Refused);
        let text = err.to_string();
        assert!(
            text.contains(
                "(pid 7) was started with the config file /usr/share/containerd/config-cgroupfs.toml, \
                 not the agent's /etc/containerd/config.toml"
            ),
            "{text}"
        );
        assert!(text.contains("10-use-cgroupfs.conf"), "{text}");
    }

    #[test]
    fn what_containerd_does_not_report_is_said_never_blamed_on_the_drop_in() {
        let mut silent = answer("2.1.4", None, None);
        silent.config = None;
        silent.server = None;
        let err = check(&silent, true).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("reports nothing the agent can compare"),
            "{text}"
        );
        assert!(!text.contains("drop-in"), "{text}");
        // Without a command line, values still prove it; a difference then
        // points at the drop-in.
        let mut a = answer("1.6.20~ds1", Some(true), Some("registry.k8s.io/pause:3.10"));
        a.server = None;
        assert_eq!(
            check(&a, true).unwrap().not_reported,
            ["config file (the serving process's command line)"]
        );
        let err = check(&a, false).unwrap_err();
        assert!(err.to_string().contains("its drop-in"), "{err}");
    }

    #[test]
    fn an_operators_containerd_gives_the_kubelet_its_cgroup_driver() {
        let d = |a: &RuntimeAnswer| reported_driver(a, SOCK).map(CgroupDriver::name);
        assert_eq!(d(&answer("1.6.20", Some(true), None)).unwrap(), "systemd");
        assert_eq!(d(&answer("1.6.20", Some(false), None)).unwrap(), "cgroupfs");
        assert_eq!(d(&answer("1.6.20", None, None)).unwrap(), "cgroupfs");
        let mut a = answer("2.1.4", None, None);
        a.cgroup_driver = Some(CgroupDriver::Systemd);
        assert_eq!(d(&a).unwrap(), "systemd");
        a.cgroup_driver = None;
        a.config = None;
        let err = d(&a).unwrap_err();
        assert!(
            err.to_string()
                .contains("does not report its cgroup driver"),
            "{err}"
        );
    }
}
