//! `node-bootstrap metadata generate|validate|find`: artifact metadata for
//! private mirrors.

use super::{Cli, load, runtime};
use crate::error::{Error, Result, exit};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};

#[derive(Debug, Subcommand)]
pub enum MetadataCommand {
    /// Scan a directory of artifacts named <name>_<version>_<series>_<arch>[.<ext>]
    /// and write streams/v1/index.json and the product file (signed twins
    /// with --sign-key).
    Generate {
        /// The mirror's directory: artifacts below it, the metadata
        /// written into its streams/v1/.
        dir: PathBuf,
        /// Sign the metadata with this OpenPGP secret key (armored; a
        /// passphrase, if any, in NODE_BOOTSTRAP_SIGN_PASSPHRASE).
        #[arg(long)]
        sign_key: Option<PathBuf>,
    },
    /// Check a mirror end to end: metadata (signed first), then every item's
    /// size and hash.
    Validate(ValidateArgs),
    /// Look an artifact up along the search path and say where it was found
    /// and why earlier locations did not serve it.
    Find(FindArgs),
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The mirror: a directory (relative to here, or absolute), file://,
    /// http(s):// or s3://bucket/prefix.
    location: String,
    /// Accept a mirror that has only unsigned metadata.
    #[arg(long)]
    allow_unsigned: bool,
    /// Public keys to verify signed metadata with (default: sources.keyring,
    /// a node's path: needed on any other machine).
    #[arg(long)]
    keyring: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub(super) json: bool,
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
    /// artifacts first (overrides sources.dev_dir; relative to here, or
    /// absolute).
    #[arg(long)]
    dev_dir: Option<PathBuf>,
    /// Download the item here (verified) as well.
    #[arg(long)]
    fetch: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    pub(super) json: bool,
}

pub(super) fn command(cli: &Cli, cmd: &MetadataCommand) -> Result<u8> {
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
    let mut config = load(cli)?;
    if let Some(k) = &args.keyring {
        config.sources.keyring = Some(absolute(k)?);
    }
    let loc =
        metadata::parse_validate_location(&config.metadata_inputs(), &location(&args.location)?)?;
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
    // Off the node too: without a config file, the default search path
    // (with --dev-dir, a directory of local builds first).
    let mut config = load(cli)?;
    if let Some(d) = &args.dev_dir {
        config.sources.dev_dir = Some(absolute(d)?);
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

/// A path given on the command line, relative to the working directory
/// (as a shell user means it) unless absolute.
fn absolute(p: &Path) -> Result<PathBuf> {
    std::path::absolute(p)
        .map_err(|e| Error::bad_input(format!("{}: cannot make it absolute: {e}", p.display())))
}

/// `metadata validate`'s LOCATION: a URL or `s3://` as given; anything
/// else is a directory, relative to the working directory unless absolute.
fn location(s: &str) -> Result<String> {
    if s.contains("://") || s.is_empty() {
        return Ok(s.to_string());
    }
    Ok(absolute(Path::new(s))?.display().to_string())
}
