//! The real seams: the node's files, the system bus (systemd, logind,
//! update_engine), the API server, and the docker addon. Progress goes to
//! systemd (`STATUS=`, `READY=1`) and to the metrics ([`crate::metrics`]).

use super::seams::{Progress, Seams};
use crate::addon::AddonOutcome;
use crate::agent_upgrade::UpgradeOutcome;
use crate::cluster::ClusterVersion;
use crate::config::Config;
use crate::container_runtime::choice::{Runtime, RuntimeRecord};
use crate::container_runtime::ensure::ContainerdRecord;
use crate::error::{Error, Result, ResultExt as _};
use crate::journal::{AssetsRecord, KubeletEnvRecord};
use crate::kubelet_config::{self, RuntimeFacts, table::Minor};
use crate::os_update::{OsOutcome, OsUpdateRecord};
use crate::systemd::notify::Notifier;
use crate::{fsutil, kubelet_env};
use std::convert::Infallible;
use tracing::{info, warn};

/// The `runtime` step's check of the backends against the release running
/// now, before anything changes: the kubelet's (`kubelet.backend`), and on a
/// docker node with the addon on, the addon's (`addon.backend`); a backend
/// the release does not have is refused (exit 7), naming the release that
/// removed it. What was found goes in the record, the journal and `status`.
fn backends(config: &Config, mut record: RuntimeRecord) -> Result<RuntimeRecord> {
    let kubelet =
        crate::kubelet_sysext::backend::on_node(config.kubelet.backend, &config.paths.os_release)?;
    info!(step = "runtime", kubelet_backend = kubelet.runs.name(), why = %kubelet.why,
        "the kubelet's backend chosen");
    record.kubelet = Some(kubelet.runs.name().to_string());
    record.kubelet_why = Some(kubelet.why);
    if record.runtime == Runtime::Docker && config.addon.enabled {
        let os = crate::osrelease::OsIdentity::read(&config.paths.os_release)?;
        let docker = config.addon.backend.resolve(os.version, &os.describe())?;
        info!(step = "runtime", docker_backend = docker.name(), os_version = %os.version_id,
            "the docker addon's backend for the running release");
        record.docker_backend = Some(docker.name().to_string());
    }
    Ok(record)
}

/// The unit's status line once kubelet may start.
pub const READY_STATUS: &str = "kubelet.env is in place";

pub struct NodeSeams<'a> {
    pub config: &'a Config,
    pub boot_id: String,
    /// The system bus (systemd, logind, update_engine), connected once.
    pub bus: zbus::Connection,
    /// The unit's notification socket (`READY=1`, `STATUS=`).
    pub notifier: &'a Notifier,
}

impl<'a> NodeSeams<'a> {
    pub fn new(
        config: &'a Config,
        boot_id: &str,
        bus: zbus::Connection,
        notifier: &'a Notifier,
    ) -> Self {
        NodeSeams {
            config,
            boot_id: boot_id.to_string(),
            bus,
            notifier,
        }
    }

    fn needs_api_server(&self) -> bool {
        !self.config.role.is_bootkube_master() && self.config.cluster.forced_version.is_none()
    }
}

impl Seams for NodeSeams<'_> {
    fn progress(&self, progress: Progress) {
        use crate::metrics::record;
        use crate::textfile;
        match progress {
            Progress::Step(step) => self.notifier.status(&format!("step {step}")),
            Progress::KubeletEnvInPlace => {
                self.notifier.ready(READY_STATUS);
                // A timestamp in memory; published after the run's last
                // record, off kubelet's path.
                record::kubelet_env_written();
            }
            Progress::RebootRequested => {
                // The shutdown ends this process: publish now.
                record::reboot_requested();
                textfile::publish_before_exit(self.config, "reboot");
            }
        }
    }

    fn kubelet_env_present(&self) -> bool {
        self.config.paths.kubelet_env.exists()
    }

    async fn agent_upgrade(&self) -> Result<UpgradeOutcome> {
        use crate::agent_upgrade::{choice::Reach, config::AutoUpgrade};
        let reach = match self.config.agent.upgrade {
            AutoUpgrade::Patch => Reach::Patch,
            AutoUpgrade::Minor => Reach::Minor,
            AutoUpgrade::Off => unreachable!("the plan skips the step when agent.upgrade is off"),
        };
        crate::agent_upgrade::upgrade(&self.config.agent_upgrade_inputs(), &reach, false).await
    }

    async fn check_assets(&self) -> Result<AssetsRecord> {
        let paths = &self.config.paths;
        let seed = paths.seed_kubelet_env();
        kubelet_env::read_seed(&seed)?;
        let kubeconfig = if self.needs_api_server() {
            let credential = self.config.cluster.credential;
            crate::cluster::credential::load(paths, credential)?;
            Some(
                crate::cluster::credential::path(paths, credential)
                    .display()
                    .to_string(),
            )
        } else {
            None
        };
        // Pull mode: init-assets.service runs before this unit; if it has
        // not finished, the assets are not there and nothing may proceed on
        // them. Push mode: terraform pushes whenever it gets to it and the
        // path units wait; `run` does not need the pushed assets.
        let pulled = self.config.assets.mode == crate::assets::config::AssetsMode::Pull;
        let record = |assets: String| AssetsRecord {
            seed: seed.display().to_string(),
            kubeconfig: kubeconfig.clone(),
            assets,
        };
        if !pulled && !self.config.role.is_bootkube_master() {
            return Ok(record("none pushed to this role".into()));
        }
        let assets = match crate::assets::readiness(&self.config.assets_inputs()) {
            crate::assets::AssetsReadiness::Ready { path } => {
                format!("complete at {}", path.display())
            }
            crate::assets::AssetsReadiness::Waiting { what } => {
                if pulled {
                    return Err(Error::retryable(what));
                }
                what
            }
        };
        Ok(record(assets))
    }

    async fn discover_version(&self) -> Result<ClusterVersion> {
        let seed = kubelet_env::read_seed(&self.config.paths.seed_kubelet_env())?;
        crate::cluster::discover(
            &self.config.cluster_inputs(),
            seed.get(kubelet_env::IMAGE_TAG),
        )
        .await
    }

    async fn os_update(&self) -> Result<OsUpdateRecord> {
        let current = self.os_version().await?;
        let engine = crate::os_update::UpdateEngine::new(&self.bus).await?;
        let outcome = crate::os_update::run_update(&engine, &self.config.os_update)
            .await
            .inspect_err(|e| {
                // update_engine is asked again by the unit's restart.
                if e.class().is_retryable() {
                    crate::metrics::record::retried(crate::metrics::Remote::UpdateEngine);
                }
            })?;
        Ok(match outcome {
            crate::os_update::UpdateOutcome::NoUpdate => OsUpdateRecord {
                outcome: OsOutcome::NoUpdate,
                current_version: current,
                new_version: None,
            },
            crate::os_update::UpdateOutcome::RebootPending { new_version } => OsUpdateRecord {
                outcome: OsOutcome::RebootPending,
                current_version: current,
                new_version: Some(new_version),
            },
        })
    }

    async fn os_update_disabled(&self) -> Result<OsUpdateRecord> {
        let current = self.os_version().await?;
        let pending = async {
            let engine = crate::os_update::UpdateEngine::new(&self.bus).await?;
            crate::os_update::pending_reboot(&engine).await
        }
        .await;
        Ok(match pending {
            Ok(Some(v)) => {
                info!(step = "os-update", new_version = %v, "updates are disabled, but an update already waits for a reboot");
                OsUpdateRecord {
                    outcome: OsOutcome::RebootPending,
                    current_version: current,
                    new_version: Some(v),
                }
            }
            Ok(None) => OsUpdateRecord {
                outcome: OsOutcome::Disabled,
                current_version: current,
                new_version: None,
            },
            Err(e) => {
                warn!(step = "os-update", error = %e, "updates are disabled and update_engine cannot be asked whether a reboot is pending; assuming none");
                OsUpdateRecord {
                    outcome: OsOutcome::Disabled,
                    current_version: current,
                    new_version: None,
                }
            }
        })
    }

    fn decide_runtime(&self, cluster_version: &str) -> Result<RuntimeRecord> {
        let record = crate::container_runtime::choice::decide(
            cluster_version,
            self.config.runtime.requested,
            self.config.kubelet_config.allow_newer_kubernetes,
        )?;
        if record.kubelet_rules != record.kubernetes {
            warn!(step = "runtime", kubernetes = %record.kubernetes, rules = %record.kubelet_rules,
                "the cluster is newer than the newest Kubernetes this agent knows; configuring its kubelet by the newest rules (kubelet_config.allow_newer_kubernetes)");
        }
        info!(step = "runtime", runtime = record.runtime.name(), requested = ?record.requested,
            kubernetes = %record.kubernetes, "container runtime chosen");
        backends(self.config, record)
    }

    async fn os_version(&self) -> Result<String> {
        crate::osrelease::version_id(&self.config.paths.os_release)
    }

    async fn addon_ensure(
        &self,
        cluster_version: &str,
        next_os_version: Option<&str>,
    ) -> Result<AddonOutcome> {
        let req = crate::addon::AddonRequest {
            cluster_version: cluster_version.to_string(),
            next_os_version: next_os_version.map(str::to_string),
        };
        crate::addon::ensure(&self.config.addon_inputs(), &req).await
    }

    async fn addon_confirm(&self, intended: &AddonOutcome) -> Result<bool> {
        crate::addon::confirm_active(&self.config.addon_inputs(), intended)
    }

    async fn owe_docker_wipe(&self) -> Result<()> {
        crate::reboot::owe_wipe(&self.config.reboot_inputs(), &self.boot_id)
    }

    async fn reboot(&self, reason: &str, wipe_docker_datadir: bool) -> Result<Infallible> {
        let systemd = crate::systemd::manager::Systemd::new(self.bus.clone());
        crate::reboot::reboot(
            &self.config.reboot_inputs(),
            &systemd,
            reason,
            wipe_docker_datadir,
        )
        .await
    }

    async fn kubelet_sysext(
        &self,
        cluster_version: &str,
    ) -> Result<crate::kubelet_sysext::KubeletSysextRecord> {
        let inputs = self.config.kubelet_sysext_inputs();
        let record = crate::kubelet_sysext::ensure(&inputs, cluster_version).await?;
        // kubelet.service runs the merged /usr/bin/kubelet from now on.
        if crate::kubelet_sysext::unit::ensure_drop_in(inputs.systemd_config_dir)? {
            let path = crate::kubelet_sysext::unit::drop_in_path(inputs.systemd_config_dir);
            info!(step = crate::kubelet_sysext::STEP, path = %path.display(),
                "kubelet.service's drop-in for the sysext kubelet written");
            crate::systemd::manager::Systemd::new(self.bus.clone())
                .reload()
                .await?;
        }
        Ok(record)
    }

    async fn containerd(
        &self,
        cluster_version: &str,
        kubelet_rules: Minor,
    ) -> Result<ContainerdRecord> {
        let seed = kubelet_env::read_seed(&self.config.paths.seed_kubelet_env())?;
        let driver = kubelet_env::cgroup_driver_for(&seed, unified_cgroup_hierarchy());
        let systemd = crate::systemd::manager::Systemd::new(self.bus.clone());
        let cluster = self
            .config
            .containerd_for_cluster(cluster_version, kubelet_rules)?;
        crate::container_runtime::ensure::ensure(
            &self.config.containerd_inputs(),
            &systemd,
            &cluster,
            &driver,
        )
        .await
    }

    async fn write_kubelet_env(
        &self,
        cluster_version: &str,
        runtime: &RuntimeRecord,
        containerd: Option<&ContainerdRecord>,
    ) -> Result<KubeletEnvRecord> {
        let paths = &self.config.paths;
        // An OS update since the runtime step may have crossed the release
        // that removed kubelet-wrapper: the backend is checked again.
        crate::kubelet_sysext::backend::on_node(self.config.kubelet.backend, &paths.os_release)?;
        let files = render_kubelet_files(self.config, cluster_version, runtime, containerd)?;
        if let Some(file) = &files.config {
            fsutil::write_file(
                "the kubelet's configuration",
                &paths.kubelet_config,
                file.as_bytes(),
                fsutil::MODE_PUBLIC,
            )?;
        }
        fsutil::write_file(
            "kubelet.env",
            &paths.kubelet_env,
            files.env.as_bytes(),
            fsutil::MODE_PUBLIC,
        )?;
        let tag = kubelet_env::image_tag(cluster_version);
        let kubelet_config = files
            .config
            .is_some()
            .then(|| paths.kubelet_config.display().to_string());
        info!(step = "kubelet-env", path = %paths.kubelet_env.display(), image_tag = %tag,
            runtime = files.runtime, cgroup_driver = %files.cgroup_driver, kubelet_rules = %files.rules,
            kubelet_config = kubelet_config.as_deref().unwrap_or("none (flags only)"), "kubelet.env written");
        Ok(KubeletEnvRecord {
            path: paths.kubelet_env.display().to_string(),
            image_tag: tag,
            runtime: Some(files.runtime.to_string()),
            kubelet_config,
        })
    }
}

/// The kubelet's files for `cluster_version` on this node, rendered, not
/// written: `run` writes them once (kubelet.env last, the commit point),
/// `follow` when the cluster's version moves.
pub(crate) struct KubeletFiles {
    /// The KubeletConfiguration (`paths.kubelet_config`), for the
    /// versions that take one.
    pub config: Option<String>,
    /// kubelet.env.
    pub env: String,
    pub runtime: &'static str,
    pub cgroup_driver: String,
    pub rules: Minor,
}

/// Renders [`KubeletFiles`] from the seed kubelet.env, the runtime's
/// record (containerd's when it is containerd) and the config.
pub(crate) fn render_kubelet_files(
    config: &Config,
    cluster_version: &str,
    runtime: &RuntimeRecord,
    containerd: Option<&ContainerdRecord>,
) -> Result<KubeletFiles> {
    let paths = &config.paths;
    let seed = kubelet_env::read_seed(&paths.seed_kubelet_env())?;
    let unified = unified_cgroup_hierarchy();
    let facts = match (runtime.runtime, containerd) {
        (Runtime::Docker, _) => RuntimeFacts::Docker {
            cgroup_driver: kubelet_env::cgroup_driver_for(&seed, unified),
        },
        (Runtime::Containerd, Some(c)) => RuntimeFacts::Containerd {
            socket: c.socket.display().to_string(),
            cgroup_driver: c.cgroup_driver.clone(),
        },
        (Runtime::Containerd, None) => {
            return Err(Error::internal(
                "kubelet.env for containerd without the containerd step done in this boot",
            ));
        }
    };
    let rules = runtime.rules().ok_or_else(|| {
        Error::internal(format!(
            "the runtime step recorded no usable kubelet rules ({:?})",
            runtime.kubelet_rules
        ))
    })?;
    let inputs = config.kubelet_config_inputs();
    let rendered = kubelet_config::render(rules, &inputs.kubelet_inputs(&facts, !unified))?;
    let env = kubelet_env::render_for(
        &seed,
        cluster_version,
        facts.cgroup_driver(),
        Some((facts.name(), &rendered.flags)),
    )
    .context(|| {
        format!(
            "cannot render kubelet.env from seed {}",
            paths.seed_kubelet_env().display()
        )
    })?;
    Ok(KubeletFiles {
        config: rendered.file,
        env,
        runtime: facts.name(),
        cgroup_driver: facts.cgroup_driver().to_string(),
        rules,
    })
}

/// Whether `/sys/fs/cgroup` is the unified cgroup v2 hierarchy (what
/// docker's default cgroup driver follows).
fn unified_cgroup_hierarchy() -> bool {
    nix::sys::statfs::statfs("/sys/fs/cgroup")
        .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::CGROUP2_SUPER_MAGIC)
}
