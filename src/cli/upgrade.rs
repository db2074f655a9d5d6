//! `node-bootstrap upgrade`: the agent upgrades itself (or rolls back).

use super::runtime;
use crate::config::Config;
use crate::error::{Error, Result, exit};
use clap::Args;

#[derive(Debug, Args)]
pub struct UpgradeArgs {
    /// Only the newest of the running major.minor.
    #[arg(long, conflicts_with_all = ["major", "to", "rollback"])]
    pub patch: bool,
    /// Also a newer major (may change the configuration or the flow: read
    /// its release notes first).
    #[arg(long, conflicts_with_all = ["to", "rollback"])]
    pub major: bool,
    /// Exactly this version, also an older one (the only way to downgrade).
    #[arg(long, value_name = "VERSION", conflicts_with = "rollback")]
    pub to: Option<String>,
    /// Say what would be installed, install nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Put the previous agent back (agent.binary.previous).
    #[arg(long)]
    pub rollback: bool,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
}

pub(super) fn command(config: &Config, args: &UpgradeArgs) -> Result<u8> {
    use crate::agent_upgrade::{self, UpgradeAction, choice::Reach};
    // Not beside a running `run` (which may be upgrading the agent itself).
    // A dry run changes nothing, so it takes no lock and cleans nothing: it
    // writes nothing, also off a node.
    let _lock = if args.dry_run {
        None
    } else {
        Some(crate::fsutil::RunLock::acquire(
            &config.paths.run_lock(),
            crate::flow::command::LOCK_WAIT,
        )?)
    };
    if let (Some(dir), false) = (config.agent.binary.parent(), args.dry_run) {
        // What an interrupted upgrade left: staged binaries, link temps.
        let _ = crate::fsutil::remove_stale_temps(dir);
    }
    let rt = runtime()?;
    let out = if args.rollback {
        rt.block_on(agent_upgrade::rollback(&config.agent_upgrade_inputs()))?
    } else {
        let reach = match (&args.to, args.patch, args.major) {
            (Some(v), _, _) => {
                Reach::To(crate::agent_upgrade::choice::parse(v).ok_or_else(|| {
                    Error::bad_input(format!("--to {v:?} is not a semantic version like 1.4.2"))
                })?)
            }
            (None, true, _) => Reach::Patch,
            (None, _, true) => Reach::Major,
            (None, false, false) => Reach::Minor,
        };
        rt.block_on(agent_upgrade::upgrade(
            &config.agent_upgrade_inputs(),
            &reach,
            args.dry_run,
        ))?
    };
    if args.json {
        println!("{}", serde_json::to_string(&out).expect("serializes"));
    } else {
        match (out.action, &out.to) {
            (UpgradeAction::Upgraded, Some(to)) => println!(
                "node-bootstrap {} -> {to} installed at {} (previous kept for --rollback)",
                out.running,
                out.binary.display()
            ),
            (UpgradeAction::WouldUpgrade, Some(to)) => println!(
                "would install node-bootstrap {to} from {} (running {})",
                out.url.as_deref().unwrap_or("?"),
                out.running
            ),
            (UpgradeAction::RolledBack, Some(to)) => println!(
                "rolled back to node-bootstrap {to} at {}",
                out.binary.display()
            ),
            _ => println!("node-bootstrap {} is current", out.running),
        }
    }
    match &out.newer_major {
        Some(newest) if out.action == UpgradeAction::Current => Err(Error::refused(format!(
            "node-bootstrap {newest} exists, but this agent ({}) upgrades within its major; \
             `node-bootstrap upgrade --major` installs {newest} (a new major may change the \
             configuration or the flow: read its release notes first)",
            out.running
        ))),
        _ => Ok(exit::SUCCESS),
    }
}
