//! The command line: clap definitions and dispatch to the subsystems, one
//! file per subcommand (its arguments and its handler) beside this one.
//!
//! Each subcommand loads the config (where it needs one), sets up logging,
//! and calls one entry point of a subsystem; the exit code comes from the
//! error's class (see [`crate::error::exit`]). The commands a fleet watches
//! (`run`, `status --wait`, `helper`, `upgrade`, `assets pull`) publish
//! their outcome to the metrics when they end ([`published`]).

mod addon;
mod assets;
mod check_config;
mod containerd;
mod follow;
#[cfg(test)]
mod help_text;
mod helper;
mod json_error;
mod kubelet_sysext;
mod metadata;
mod preflight;
mod status;
mod upgrade;

use crate::config::{Config, DEFAULT_CONFIG_PATH};
use crate::error::{Result, exit};
use crate::logging::{self, LogFormat};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::path::PathBuf;

const EXIT_CODES_HELP: &str = "\
Exit codes (README \"Exit codes\" lists every case):
  0   success (status: node complete)
  1   internal error (a bug or unexpected host condition); systemd restarts the unit
  2   usage error
  3   retryable failure (network, API server, update_engine, reboot not done in time); systemd restarts the unit
  4   configuration error (config file missing or invalid, S3 access denied); not retried
  5   bad input (seed file, kubeconfig, mappings, archive missing or malformed); not retried
  6   verification failure (signature, checksum, TLS trust); nothing was installed; systemd restarts the unit
  7   refused (version skew, an update that did not take effect, clock before the CA, unsupported platform, upgrade: a newer major); not retried
  8   locked (another node-bootstrap is running); systemd restarts the unit
  10  status: bootstrap in progress (assets check: assets still awaited)
  11  status: failed
  12  status: unknown (could not read enough to tell)";

/// Takes a fresh Container Linux / Flatcar node to a running kubelet.
#[derive(Debug, Parser)]
#[command(name = "node-bootstrap", version = crate::agent_upgrade::identity::version(), after_long_help = EXIT_CODES_HELP)]
pub struct Cli {
    /// Configuration file.
    #[arg(long, global = true, env = "NODE_BOOTSTRAP_CONFIG", default_value = DEFAULT_CONFIG_PATH)]
    pub config: PathBuf,
    /// Where log lines go.
    #[arg(long, global = true, env = "NODE_BOOTSTRAP_LOG_FORMAT", value_enum, default_value_t = LogFormat::Auto)]
    pub log_format: LogFormat,
    /// More log output (-v debug, -vv trace). RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
    /// Whether `--config` or `NODE_BOOTSTRAP_CONFIG` named the file (else
    /// it is the default path, whose absence means the defaults: [`load`]).
    #[arg(skip)]
    pub config_named: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the bootstrap flow: agent upgrade (if configured), cluster
    /// version, runtime, OS update, docker addon, reboot if needed, kubelet
    /// extension, containerd, then the kubelet's configuration and
    /// kubelet.env (then, with cluster.join_watch_secs, the join). The ExecStart of k8s-node-bootstrap.service; safe to re-run, resumes
    /// after a crash.
    Run,
    /// Run the checks `run` starts with (seed kubelet.env, kubeconfig,
    /// clock, state dir, disk space, system bus), then ask the API server
    /// for its version over TLS trusted by the kubeconfig's CA, and print
    /// one line each; writes nothing (a missing state dir is not created:
    /// its parent must be writable).
    Preflight(preflight::PreflightArgs),
    /// Show where this node's bootstrap stands and why.
    Status(status::StatusArgs),
    /// Cluster assets: pull them from S3 (pull mode) or check pushed ones.
    #[command(subcommand)]
    Assets(assets::AssetsCommand),
    /// Run a control-plane step once and mark it done (bootkube.service,
    /// tectonic.service).
    Helper {
        /// The step: bootkube (bootkube.sh) or tectonic
        /// (tectonic-wrapper.sh).
        #[arg(value_enum)]
        step: helper::HelperStep,
    },
    /// Docker addon maintenance around OS updates.
    #[command(subcommand)]
    Addon(addon::AddonCommand),
    /// The kubelet as a systemd-sysext image (kubelet.backend "sysext").
    #[command(subcommand)]
    Kubelet(kubelet_sysext::KubeletCommand),
    /// Where containerd comes from: the OS's, or a package where it does
    /// not fit the cluster.
    #[command(subcommand)]
    Containerd(containerd::ContainerdCommand),
    /// Artifact metadata for private mirrors.
    #[command(subcommand)]
    Metadata(metadata::MetadataCommand),
    /// Follow the cluster's Kubernetes version (day two): when the API
    /// server moved to a newer patch release (or the operator named a
    /// minor), change this node's kubelet, one node at a time
    /// cluster-wide, rolled back when the node does not come back Ready.
    /// The ExecStart of node-bootstrap-follow.service (its timer).
    Follow(follow::FollowArgs),
    /// Upgrade this agent to the newest version of its major: found
    /// through the metadata search path (`sources`), verified,
    /// checked to run here, installed over agent.binary with the previous
    /// one kept for --rollback.
    Upgrade(upgrade::UpgradeArgs),
    /// Validate the configuration file and what the node reads beside it
    /// (the runtime mappings, the keyring a signed source needs), and
    /// print the settings in effect as a config file (every field,
    /// defaults filled in; helpers' docker env values redacted).
    CheckConfig(check_config::CheckConfigArgs),
    /// Print the version.
    Version {
        /// Print version, arch and the versions an upgrade takes without
        /// --major as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Parses the process arguments, runs the command, returns the exit code.
pub fn main() -> u8 {
    crate::panic_hook::install();
    let cli = match parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                exit::USAGE
            } else {
                exit::SUCCESS
            };
        }
    };
    let to_journald = logging::init(cli.log_format, cli.verbose);
    let json = json_error::wanted(&cli.command);
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            if json {
                json_error::print(&e);
            }
            if to_journald {
                tracing::error!(
                    message_id = crate::message_ids::COMMAND_FAILED,
                    error_class = e.class().name(),
                    exit_code = e.exit_code(),
                    "{e}"
                );
            }
            eprintln!("node-bootstrap: error: {e}");
            e.exit_code()
        }
    }
}

/// The command line's definition, every subcommand's `--help` ending
/// with the exit codes as the top level's does.
fn command() -> clap::Command {
    fn with_exit_codes(cmd: clap::Command) -> clap::Command {
        cmd.mut_subcommands(|sub| with_exit_codes(sub.after_long_help(EXIT_CODES_HELP)))
    }
    with_exit_codes(Cli::command())
}

/// The command line, noting whether the config file was named.
fn parse() -> std::result::Result<Cli, clap::Error> {
    let matches = command().try_get_matches()?;
    let mut cli = Cli::from_arg_matches(&matches)?;
    cli.config_named =
        matches.value_source("config") != Some(clap::parser::ValueSource::DefaultValue);
    Ok(cli)
}

/// The config every command but `status` runs with: the file; when no
/// file is at the default path (and none was named), the defaults, said
/// once on stderr; a named file that is missing, or any file that does
/// not read, is exit 4. (`status` shows what it can read whatever the
/// file says.)
fn load(cli: &Cli) -> Result<Config> {
    if !cli.config_named && !cli.config.exists() {
        tracing::warn!(
            path = %cli.config.display(),
            "no config file at {}: using the defaults (name one with --config or NODE_BOOTSTRAP_CONFIG)",
            cli.config.display()
        );
        return Ok(Config::defaults());
    }
    Config::load(&cli.config)
}

/// Runs a command the metrics follow: records its start, publishes while
/// it runs if it is long (`periodic`) and when it ends, whatever the
/// outcome, a config that does not load included (then to the places the
/// file still names: [`crate::textfile::Target::from_unloadable_config`]).
fn published(
    cli: &Cli,
    command: crate::metrics::Command,
    periodic: bool,
    f: impl FnOnce(&Config) -> Result<u8>,
) -> Result<u8> {
    use crate::metrics::record;
    use crate::textfile::{Periodic, Target};
    let config = load(cli);
    let kubelet_env_present = config.as_ref().is_ok_and(|c| c.paths.kubelet_env.exists());
    record::begin(command, kubelet_env_present);
    let target = Target::for_command(&config, &cli.config);
    let outcome = config.and_then(|c| {
        let _periodic = periodic.then(|| Periodic::start(target.clone()));
        f(&c)
    });
    crate::textfile::finish(&target, &outcome);
    outcome
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    crate::async_runtime::multi_thread()
}

/// Prints `value` as pretty JSON (what `--json` asks for).
fn print_json(value: &impl serde::Serialize) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).expect("the agent's records serialize")
    );
}

/// With `--json`, `value` as pretty JSON; else the one line `line` makes.
fn print_json_or(json: bool, value: &impl serde::Serialize, line: impl FnOnce() -> String) {
    if json {
        print_json(value);
    } else {
        println!("{}", line());
    }
}

fn dispatch(cli: Cli) -> Result<u8> {
    match &cli.command {
        Command::Version { json } => {
            let info = crate::agent_upgrade::identity::info();
            if *json {
                println!("{}", serde_json::to_string(&info).expect("serializes"));
            } else {
                println!("node-bootstrap {}", info.version);
            }
            Ok(exit::SUCCESS)
        }
        Command::Upgrade(args) => published(&cli, crate::metrics::Command::Upgrade, true, |c| {
            upgrade::command(c, args)
        }),
        Command::CheckConfig(args) => check_config::check_config(&cli, args),
        Command::Run => {
            // systemd's notification socket: `STATUS=` shows why a run
            // failed, bad config included.
            let notifier = crate::systemd::notify::Notifier::from_env();
            let mut bootstrapped = None;
            let code = published(&cli, crate::metrics::Command::Run, true, |config| {
                use crate::flow::command::Ran;
                let run = runtime()?.block_on(crate::flow::command::run(config, &notifier))?;
                if let Ran::Bootstrapped(at) = run {
                    bootstrapped = Some((config.clone(), at));
                }
                Ok(exit::SUCCESS)
            })
            .inspect_err(|e| notifier.status(&format!("failed: {e}")))?;
            // The run's outcome is published; the join is watched after it
            // (src/flow/join_watch.rs), never changing the exit code.
            if let Some((config, at)) = bootstrapped {
                let watch = crate::flow::command::watch_join(&config, &notifier, at);
                runtime()?.block_on(watch);
            }
            Ok(code)
        }
        Command::Preflight(args) => preflight::command(&load(&cli)?, args),
        Command::Status(args) => status::command(&cli, args),
        Command::Assets(cmd) => assets::command(&cli, cmd),
        Command::Helper { step } => helper::command(&cli, *step),
        Command::Addon(cmd) => addon::dispatch(&load(&cli)?, addon::action(cmd)),
        Command::Kubelet(kubelet_sysext::KubeletCommand::Choose {
            cluster_version,
            json,
        }) => kubelet_sysext::choose(&load(&cli)?, cluster_version, *json),
        Command::Kubelet(kubelet_sysext::KubeletCommand::Ensure {
            cluster_version,
            json,
        }) => kubelet_sysext::ensure(&load(&cli)?, cluster_version, *json),
        Command::Containerd(containerd::ContainerdCommand::Choose {
            cluster_version,
            json,
            mappings,
        }) => containerd::choose(&load(&cli)?, cluster_version, *json, mappings.as_deref()),
        Command::Metadata(cmd) => metadata::command(&cli, cmd),
        Command::Follow(args) if args.enable => follow::enable(&cli.config),
        Command::Follow(args) if args.converge => follow::command(&load(&cli)?, args),
        Command::Follow(args) => published(&cli, crate::metrics::Command::Follow, true, |c| {
            follow::command(c, args)
        }),
    }
}
