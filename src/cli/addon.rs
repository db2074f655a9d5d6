//! The `addon` subcommands: `ensure`, `confirm`, `pre-reboot-hook`, `gc`.

use crate::addon::{self, AddonOutcome, AddonRequest};
use crate::config::Config;
use crate::error::{Error, Result, exit};
use clap::{Args, Subcommand};

#[derive(Debug, Subcommand)]
pub enum AddonCommand {
    /// Before an OS-update reboot: make sure the addon for the next OS
    /// version is in the store, then remove stores of older OS versions.
    PreRebootHook(AddonHookArgs),
    /// Remove store directories of OS versions older than the running one.
    Gc,
    /// Put the docker the cluster needs in place for the next boot (the
    /// docker-addon step of `run`) and print the outcome as JSON.
    Ensure(AddonEnsureArgs),
    /// Check that this boot applied the given docker version (exit 0), or
    /// not (exit 7).
    Confirm {
        /// The docker version expected, e.g. 17.03.
        #[arg(long)]
        docker_next: String,
    },
}

#[derive(Debug, Args)]
pub struct AddonHookArgs {
    /// Cluster version (default: KUBELET_IMAGE_TAG of kubelet.env).
    #[arg(long)]
    pub cluster_version: Option<String>,
    /// OS version the node reboots into (default: asked of update_engine).
    #[arg(long)]
    pub next_os_version: Option<String>,
}

#[derive(Debug, Args)]
pub struct AddonEnsureArgs {
    /// Cluster version, e.g. v1.9.6+coreos.0.
    #[arg(long)]
    pub cluster_version: String,
    /// OS version a pending update boots next.
    #[arg(long)]
    pub next_os_version: Option<String>,
}

/// The addon subcommand as the addon subsystem takes it.
pub(super) fn action(cmd: &AddonCommand) -> AddonAction {
    match cmd {
        AddonCommand::Ensure(a) => AddonAction::Ensure(AddonRequest {
            cluster_version: a.cluster_version.clone(),
            next_os_version: a.next_os_version.clone(),
        }),
        AddonCommand::Confirm { docker_next } => AddonAction::Confirm {
            docker_next: docker_next.clone(),
        },
        AddonCommand::PreRebootHook(a) => AddonAction::PreRebootHook {
            cluster_version: a.cluster_version.clone(),
            next_os_version: a.next_os_version.clone(),
        },
        AddonCommand::Gc => AddonAction::Gc,
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    crate::async_runtime::current_thread()
}

fn require_enabled(config: &Config) -> Result<()> {
    if config.addon.enabled {
        Ok(())
    } else {
        Err(Error::config(format!(
            "the docker addon is disabled in {} (addon.enabled is false)",
            config.source.display()
        )))
    }
}

/// What an `addon` subcommand asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddonAction {
    /// The docker-addon step of `run`, alone; prints the outcome.
    Ensure(AddonRequest),
    /// Whether this boot applied `docker_next` (exit 0) or not (exit 7).
    Confirm { docker_next: String },
    /// Before an OS-update reboot; what is not given is read from
    /// kubelet.env and update_engine.
    PreRebootHook {
        cluster_version: Option<String>,
        next_os_version: Option<String>,
    },
    /// Remove the stores of older OS versions.
    Gc,
}

/// Runs one `addon` subcommand; returns the exit code.
pub fn dispatch(config: &Config, action: AddonAction) -> Result<u8> {
    match action {
        AddonAction::Ensure(req) => {
            require_enabled(config)?;
            let out = runtime()?.block_on(addon::ensure(&config.addon_inputs(), &req))?;
            super::print_json(&out);
            Ok(exit::SUCCESS)
        }
        AddonAction::Confirm { docker_next } => {
            require_enabled(config)?;
            let os = crate::osrelease::OsIdentity::read(&config.paths.os_release)?;
            let backend = config.addon.backend.resolve(os.version, &os.describe())?;
            let intended = AddonOutcome {
                docker_running: None,
                docker_next: docker_next.clone(),
                reboot_needed: false,
                wipe_docker_datadir: false,
                installed: Vec::new(),
                backend,
                docker_running_source: None,
                os_versions: Vec::new(),
                profile: None,
                note: None,
            };
            if addon::confirm_active(&config.addon_inputs(), &intended)? {
                println!("docker {docker_next} is active");
                Ok(exit::SUCCESS)
            } else {
                Err(Error::refused(format!(
                    "docker {docker_next} is not what this boot applied"
                )))
            }
        }
        AddonAction::PreRebootHook {
            cluster_version,
            next_os_version,
        } => {
            if !config.addon.enabled {
                println!("docker addon disabled (addon.enabled is false): nothing to prepare");
                return Ok(exit::SUCCESS);
            }
            let rt = runtime()?;
            let cluster_version = match cluster_version {
                Some(v) => v,
                None => addon::cluster_version_from_kubelet_env(&config.addon_inputs())?,
            };
            let next_os_version = match next_os_version {
                Some(v) => Some(v),
                None => rt.block_on(addon::next_os_from_update_engine())?,
            };
            let req = AddonRequest {
                cluster_version,
                next_os_version,
            };
            let out = rt.block_on(addon::pre_reboot_hook(&config.addon_inputs(), &req))?;
            super::print_json(&out);
            Ok(exit::SUCCESS)
        }
        AddonAction::Gc => {
            let removed = addon::gc(&config.addon_inputs())?;
            super::print_json(&serde_json::json!({ "removed": removed }));
            Ok(exit::SUCCESS)
        }
    }
}
