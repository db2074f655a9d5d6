//! The `addon` subcommands: `ensure`, `confirm`, `pre-reboot-hook`, `gc`.

use super::{AddonOutcome, AddonRequest};
use crate::cli::AddonCommand;
use crate::config::Config;
use crate::error::{Error, Result, exit};

fn runtime() -> Result<tokio::runtime::Runtime> {
    crate::runtime::current_thread()
}

fn print_json<T: serde::Serialize>(v: &T) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).expect("outcomes serialize")
    );
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

/// Runs one `addon` subcommand; returns the exit code.
pub fn dispatch(config: &Config, cmd: &AddonCommand) -> Result<u8> {
    match cmd {
        AddonCommand::Ensure(args) => {
            require_enabled(config)?;
            let req = AddonRequest {
                cluster_version: args.cluster_version.clone(),
                next_os_version: args.next_os_version.clone(),
            };
            let out = runtime()?.block_on(super::ensure(config, &req))?;
            print_json(&out);
            Ok(exit::SUCCESS)
        }
        AddonCommand::Confirm { docker_next } => {
            require_enabled(config)?;
            let intended = AddonOutcome {
                docker_running: None,
                docker_next: docker_next.clone(),
                reboot_needed: false,
                wipe_docker_datadir: false,
                installed: Vec::new(),
                backend: config.addon.backend,
                docker_running_source: None,
                os_versions: Vec::new(),
                profile: None,
                note: None,
            };
            if super::confirm_active(config, &intended)? {
                println!("docker {docker_next} is active");
                Ok(exit::SUCCESS)
            } else {
                Err(Error::refused(format!(
                    "docker {docker_next} is not what this boot applied"
                )))
            }
        }
        AddonCommand::PreRebootHook(args) => {
            if !config.addon.enabled {
                println!("docker addon disabled (addon.enabled is false): nothing to prepare");
                return Ok(exit::SUCCESS);
            }
            let rt = runtime()?;
            let cluster_version = match &args.cluster_version {
                Some(v) => v.clone(),
                None => super::cluster_version_from_kubelet_env(config)?,
            };
            let next_os_version = match &args.next_os_version {
                Some(v) => Some(v.clone()),
                None => rt.block_on(super::next_os_from_update_engine())?,
            };
            let req = AddonRequest {
                cluster_version,
                next_os_version,
            };
            let out = rt.block_on(super::pre_reboot_hook(config, &req))?;
            print_json(&out);
            Ok(exit::SUCCESS)
        }
        AddonCommand::Gc => {
            let removed = super::gc(config)?;
            print_json(&serde_json::json!({ "removed": removed }));
            Ok(exit::SUCCESS)
        }
    }
}
