//! The command line: clap definitions and dispatch to the subsystems.
//!
//! Each subcommand loads the config (where it needs one), sets up logging,
//! and calls one entry point of a subsystem; the exit code comes from the
//! error's class (see [`crate::error::exit`]). The commands a fleet watches
//! (`run`, `status --wait`, `helper`, `upgrade`, `assets pull`) publish
//! their outcome to the metrics when they end ([`published`]).

mod addon;
mod kubelet_sysext;

use crate::config::{Config, DEFAULT_CONFIG_PATH};
use crate::error::{Error, Result, exit};
use crate::logging::{self, LogFormat};
use clap::{Args, Parser, Subcommand};
use std::path::{Path, PathBuf};

const EXIT_CODES_HELP: &str = "\
Exit codes:
  0   success (status: node complete)
  1   internal error (a bug or unexpected host condition)
  2   usage error
  3   retryable failure (network, API server, update_engine, reboot pending); systemd restarts the unit
  4   configuration error (config file missing or invalid); not retried
  5   bad input (seed file, kubeconfig, mappings, archive missing or malformed); not retried
  6   verification failure (signature or checksum); nothing was installed
  7   refused (version skew, unsupported platform); not retried
  8   locked (another node-bootstrap is running)
  10  status: bootstrap in progress
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
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the bootstrap flow: agent upgrade (if configured), cluster
    /// version, OS update, docker addon, reboot if needed, then kubelet.env.
    /// The ExecStart of k8s-node-bootstrap.service; safe to re-run, resumes
    /// after a crash.
    Run,
    /// Check config, kubeconfig, state dir, system bus, disk space and clock
    /// without changing anything.
    Preflight,
    /// Show where this node's bootstrap stands and why.
    Status(StatusArgs),
    /// Cluster assets: pull them from S3 (pull mode) or check pushed ones.
    #[command(subcommand)]
    Assets(AssetsCommand),
    /// Run a control-plane step once and mark it done (bootkube.service,
    /// tectonic.service).
    Helper {
        #[arg(value_enum)]
        step: HelperStep,
    },
    /// Docker addon maintenance around OS updates.
    #[command(subcommand)]
    Addon(AddonCommand),
    /// The kubelet as a systemd-sysext image (kubelet.backend "sysext").
    #[command(subcommand)]
    Kubelet(KubeletCommand),
    /// Artifact metadata for private mirrors.
    #[command(subcommand)]
    Metadata(MetadataCommand),
    /// Upgrade this agent to the newest version of its major (seed 003):
    /// found through the metadata search path (`sources`), verified,
    /// checked to run here, installed over agent.binary with the previous
    /// one kept for --rollback.
    Upgrade(UpgradeArgs),
    /// Validate the configuration file and print the settings in effect.
    CheckConfig,
    /// Print the version (--json: version, arch, the versions an upgrade
    /// takes without --major).
    Version {
        #[arg(long)]
        json: bool,
    },
}

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

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Machine-readable output (schema: docs/status-json.md, schema_version 1).
    #[arg(long)]
    pub json: bool,
    /// Redraw until the verdict changes.
    #[arg(long, conflicts_with = "wait")]
    pub watch: bool,
    /// Block until the node is complete or failed, printing progress.
    #[arg(long)]
    pub wait: bool,
    /// Give up waiting after this many seconds (with --wait; default 3600).
    #[arg(long, requires = "wait")]
    pub timeout: Option<u64>,
}

#[derive(Debug, Subcommand)]
pub enum AssetsCommand {
    /// Download the asset bundle from S3, verify it and move it into place.
    Pull {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Report whether complete assets are in place (exit 0) or what is
    /// awaited (exit 10).
    Check {
        /// Print the answer as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum HelperStep {
    Bootkube,
    Tectonic,
}

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

#[derive(Debug, Subcommand)]
pub enum KubeletCommand {
    /// Which kubelet image `ensure` would take for the cluster version, and
    /// from where; installs nothing.
    Choose {
        /// Cluster version, e.g. v1.20.2.
        #[arg(long)]
        cluster_version: String,
        /// Print the choice as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The kubelet-sysext step of `run`, alone: choose the kubelet image
    /// for the cluster version from the metadata search path, verify and
    /// check it, install it in /etc/extensions and merge it
    /// (systemd-sysext refresh). Does not restart a running kubelet.
    Ensure {
        /// Cluster version, e.g. v1.20.2.
        #[arg(long)]
        cluster_version: String,
        /// Print what was done as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum MetadataCommand {
    /// Scan a directory of artifacts named <name>_<version>_<series>_<arch>[.<ext>]
    /// and write streams/v1/index.json and the product file (signed twins
    /// with --sign-key).
    Generate {
        dir: PathBuf,
        /// Sign the metadata with this OpenPGP secret key (armored; a
        /// passphrase, if any, in NODE_BOOTSTRAP_SIGN_PASSPHRASE).
        #[arg(long)]
        sign_key: Option<PathBuf>,
    },
    /// Check a mirror end to end: metadata (signed first), then every item's
    /// size and hash. LOCATION: a directory, file://, http(s):// or s3://bucket/prefix.
    Validate(ValidateArgs),
    /// Look an artifact up along the search path and say where it was found
    /// and why earlier locations did not serve it.
    Find(FindArgs),
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    location: String,
    /// Accept a mirror that has only unsigned metadata.
    #[arg(long)]
    allow_unsigned: bool,
    /// Public keys to verify signed metadata with (default: sources.keyring).
    #[arg(long)]
    keyring: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct FindArgs {
    /// Artifact name (e.g. docker-torcx, node-bootstrap); with --series
    /// and --arch it makes the product id by sources.product_id_template.
    #[arg(long, required_unless_present = "product_id", requires_all = ["series", "arch"])]
    name: Option<String>,
    /// OS version or series (e.g. 1520.3.0, flatcar).
    #[arg(long, requires = "name")]
    series: Option<String>,
    /// Architecture (e.g. amd64).
    #[arg(long, requires = "name")]
    arch: Option<String>,
    /// The full product id instead of name, series and arch (e.g.
    /// com.ubuntu.juju:16.04:amd64 of a Juju agent stream).
    #[arg(long, conflicts_with = "name")]
    product_id: Option<String>,
    /// Exactly this version.
    #[arg(long, conflicts_with = "major")]
    version: Option<String>,
    /// The largest version with this major.
    #[arg(long)]
    major: Option<u64>,
    /// Development mode: search this directory of locally built
    /// artifacts first (overrides sources.dev_dir).
    #[arg(long)]
    dev_dir: Option<PathBuf>,
    /// Download the item here (verified) as well.
    #[arg(long)]
    fetch: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

fn upgrade_command(config: &Config, args: &UpgradeArgs) -> Result<u8> {
    use crate::agent_upgrade::{self, UpgradeAction, choice::Reach};
    // Not beside a running `run` (which may be upgrading the agent itself).
    let _lock =
        crate::fsutil::RunLock::acquire(&config.paths.run_lock(), crate::flow::command::LOCK_WAIT)?;
    if let Some(dir) = config.agent.binary.parent() {
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

/// The addon subcommand as the addon subsystem takes it.
fn addon_action(cmd: &AddonCommand) -> addon::AddonAction {
    use addon::AddonAction;
    match cmd {
        AddonCommand::Ensure(a) => AddonAction::Ensure(crate::addon::AddonRequest {
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

/// Parses the process arguments, runs the command, returns the exit code.
pub fn main() -> u8 {
    let cli = match Cli::try_parse() {
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
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
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

fn load(cli: &Cli) -> Result<Config> {
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

fn assets_command(cli: &Cli, cmd: &AssetsCommand) -> Result<u8> {
    match cmd {
        AssetsCommand::Pull { json } => {
            published(cli, crate::metrics::Command::AssetsPull, true, |c| {
                assets_pull(c, *json)
            })
        }
        AssetsCommand::Check { json } => assets_check(&load(cli)?, *json),
    }
}

fn assets_pull(config: &Config, json: bool) -> Result<u8> {
    let report = runtime()?.block_on(crate::assets::pull(&config.assets_inputs()))?;
    if json {
        println!(
            "{}",
            serde_json::to_string(&report).expect("report serializes")
        );
    } else if report.already_present {
        println!("assets already in place at {}", report.path.display());
    } else {
        println!(
            "assets from {} in place at {} ({} bytes, {} files, {} secrets, verified {})",
            report.source,
            report.path.display(),
            report.bytes,
            report.files,
            report.secrets,
            report.verified.join(", ")
        );
    }
    Ok(exit::SUCCESS)
}

fn assets_check(config: &Config, json: bool) -> Result<u8> {
    let r = crate::assets::readiness(&config.assets_inputs());
    if json {
        println!(
            "{}",
            serde_json::to_string(&r).expect("readiness serializes")
        );
    } else {
        match &r {
            crate::assets::AssetsReadiness::Ready { path } => {
                println!("assets complete at {}", path.display())
            }
            crate::assets::AssetsReadiness::Waiting { what } => println!("{what}"),
        }
    }
    Ok(match r {
        crate::assets::AssetsReadiness::Ready { .. } => exit::SUCCESS,
        crate::assets::AssetsReadiness::Waiting { .. } => exit::STATUS_IN_PROGRESS,
    })
}

/// The config if its file exists, else the defaults (mirror tools run on
/// operators' machines, which have no agent config).
fn load_or_defaults(cli: &Cli) -> Result<Config> {
    if cli.config.exists() {
        load(cli)
    } else {
        Ok(Config::defaults())
    }
}

fn metadata_command(cli: &Cli, cmd: &MetadataCommand) -> Result<u8> {
    match cmd {
        MetadataCommand::Generate { dir, sign_key } => metadata_generate(dir, sign_key.as_deref()),
        MetadataCommand::Validate(args) => metadata_validate(cli, args),
        MetadataCommand::Find(args) => metadata_find(cli, args),
    }
}

fn metadata_generate(dir: &Path, sign_key: Option<&Path>) -> Result<u8> {
    use crate::metadata;
    let signer = sign_key.map(metadata::sign::Signer::load).transpose()?;
    let r = metadata::generate(dir, signer.as_ref())?;
    println!(
        "wrote {} ({} products, {} items{}); ignored {} files not named <name>_<version>_<series>_<arch>[.<ext>]",
        r.written
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        r.products,
        r.items,
        if r.signed { ", signed" } else { ", unsigned" },
        r.ignored.len()
    );
    Ok(exit::SUCCESS)
}

fn metadata_validate(cli: &Cli, args: &ValidateArgs) -> Result<u8> {
    use crate::metadata;
    let mut config = load_or_defaults(cli)?;
    if let Some(k) = &args.keyring {
        config.sources.keyring = Some(k.clone());
    }
    let loc = metadata::parse_validate_location(&config.metadata_inputs(), &args.location)?;
    let r = runtime()?.block_on(metadata::validate(
        &config.metadata_inputs(),
        &loc,
        args.allow_unsigned,
    ))?;
    if args.json {
        println!("{}", serde_json::to_string(&r).expect("report serializes"));
    } else {
        println!(
            "{}: {} metadata, {} products, {} items, {} problems",
            r.location,
            if r.signed { "signed" } else { "unsigned" },
            r.products,
            r.items,
            r.problems.len()
        );
        for p in &r.problems {
            println!("  problem: {p}");
        }
    }
    if r.problems.is_empty() {
        Ok(exit::SUCCESS)
    } else {
        Err(Error::verification(format!(
            "mirror {} has {} problems",
            r.location,
            r.problems.len()
        )))
    }
}

fn metadata_find(cli: &Cli, args: &FindArgs) -> Result<u8> {
    use crate::metadata;
    let mut config = load(cli)?;
    if let Some(d) = &args.dev_dir {
        if !d.is_absolute() {
            return Err(Error::bad_input(format!(
                "--dev-dir must be an absolute path, got {}",
                d.display()
            )));
        }
        config.sources.dev_dir = Some(d.clone());
    }
    let wanted = match (&args.version, args.major) {
        (Some(v), _) => metadata::format::VersionMatch::Exact(v.clone()),
        (None, Some(m)) => metadata::format::VersionMatch::Major(m),
        (None, None) => metadata::format::VersionMatch::Latest,
    };
    let query = match (&args.product_id, &args.name, &args.series, &args.arch) {
        (Some(id), _, _, _) => metadata::ArtifactQuery::by_id(id, wanted),
        (None, Some(n), Some(s), Some(a)) => {
            metadata::ArtifactQuery::new(&config.sources, n, s, a, wanted)
        }
        _ => unreachable!("clap requires --product-id or --name, --series and --arch"),
    };
    let rt = runtime()?;
    let found = rt.block_on(metadata::find(&config.metadata_inputs(), &query))?;
    if let Some(dest) = &args.fetch {
        rt.block_on(metadata::fetch_item(
            &config.metadata_inputs(),
            &found,
            dest,
        ))?;
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&found).expect("found serializes")
        );
    } else {
        for s in &found.skipped {
            println!("skipped {} ({}): {}", s.location, s.kind.as_str(), s.reason);
        }
        println!(
            "found {} {} at {} ({} metadata from {}, {})",
            found.product_id,
            found.version,
            found.url,
            if found.signed { "signed" } else { "unsigned" },
            found.location,
            found.kind.as_str()
        );
    }
    Ok(exit::SUCCESS)
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
            upgrade_command(c, args)
        }),
        Command::CheckConfig => {
            let config = load(&cli)?;
            println!("{config:#?}");
            Ok(exit::SUCCESS)
        }
        Command::Run => {
            // systemd's notification socket: `STATUS=` shows why a run
            // failed, bad config included.
            let notifier = crate::systemd::notify::Notifier::from_env();
            published(&cli, crate::metrics::Command::Run, true, |config| {
                let run = runtime()?.block_on(crate::flow::command::run(config, &notifier));
                run.map(|()| exit::SUCCESS)
            })
            .inspect_err(|e| notifier.status(&format!("failed: {e}")))
        }
        Command::Preflight => {
            let config = load(&cli)?;
            runtime()?.block_on(crate::flow::command::preflight(&config))?;
            Ok(exit::SUCCESS)
        }
        Command::Status(args) => {
            let opts = crate::status::Options {
                json: args.json,
                watch: args.watch,
                wait: args.wait,
                timeout: args.timeout,
            };
            if !args.wait {
                return crate::status::main(&cli.config, &opts);
            }
            // `status` reads a node whose config does not load, and says
            // so; its wait publishes where the file still names the place
            // (as every published command does).
            let target = crate::textfile::Target::for_command(&load(&cli), &cli.config);
            crate::metrics::record::begin(crate::metrics::Command::StatusWait, false);
            let outcome = crate::status::main(&cli.config, &opts);
            crate::textfile::finish(&target, &outcome);
            outcome
        }
        Command::Assets(cmd) => assets_command(&cli, cmd),
        Command::Helper { step } => {
            let (step, command) = match step {
                HelperStep::Bootkube => (
                    crate::helper::Helper::Bootkube,
                    crate::metrics::Command::HelperBootkube,
                ),
                HelperStep::Tectonic => (
                    crate::helper::Helper::Tectonic,
                    crate::metrics::Command::HelperTectonic,
                ),
            };
            published(&cli, command, true, |config| {
                crate::helper::main(&config.helper_inputs(), step)
            })
        }
        Command::Addon(cmd) => addon::dispatch(&load(&cli)?, addon_action(cmd)),
        Command::Kubelet(KubeletCommand::Choose {
            cluster_version,
            json,
        }) => kubelet_sysext::choose(&load(&cli)?, cluster_version, *json),
        Command::Kubelet(KubeletCommand::Ensure {
            cluster_version,
            json,
        }) => kubelet_sysext::ensure(&load(&cli)?, cluster_version, *json),
        Command::Metadata(cmd) => metadata_command(&cli, cmd),
    }
}
