//! The agent upgrades itself within its major version (seed 003: C, D, E,
//! F): `node-bootstrap upgrade`, and `run` first of all when
//! `agent.upgrade` says so.
//!
//! Agent binaries are artifacts of the metadata search path (`sources`):
//! product `node-bootstrap`, series `any`, the node's arch (`metadata
//! generate` publishes `node-bootstrap_<version>_any_<arch>` files). Every
//! location is read with the usual trust rules (signed first, unsigned only
//! where allowed); [`choice`] picks the version; the item must carry a
//! sha512 and is verified by size and every hash before anything else;
//! [`install`] checks that it runs on this node and puts it in place,
//! keeping the binary it replaces for `upgrade --rollback`.

pub mod choice;
pub mod config;
pub mod identity;
pub mod install;

use crate::error::{Context as _, Error, ErrorClass, Result};
use crate::metadata::{self, ArtifactQuery, Found, format::VersionMatch};
use choice::{Candidate, Decision, Reach};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use tracing::{info, warn};

const STEP: &str = "agent-upgrade";

/// What an agent upgrade reads of the agent's config: its own section
/// (`agent`) and the artifact sources it finds agents with.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub agent: &'a config::AgentSettings,
    pub metadata: metadata::Inputs<'a>,
}

/// What an upgrade did (the state journal's `agent-upgrade` record, and
/// what `upgrade --json` prints).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpgradeOutcome {
    /// The version that was running.
    pub running: String,
    pub action: UpgradeAction,
    /// The version installed (or, in a dry run, that would be).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Where it came from (location and URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A newer major no upgrade within reach takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newer_major: Option<String>,
    /// The installed binary.
    pub binary: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UpgradeAction {
    /// A new binary is in place.
    Upgraded,
    /// Dry run: this is what an upgrade would install.
    WouldUpgrade,
    /// Nothing newer within reach.
    #[default]
    Current,
    /// The previous binary is back in place.
    RolledBack,
}

/// The product id of agent binaries for this node's arch.
pub fn product_id(config: &Inputs<'_>) -> Result<String> {
    let arch = identity::arch().ok_or_else(|| {
        Error::refused(format!(
            "no agent builds exist for architecture {}",
            std::env::consts::ARCH
        ))
    })?;
    Ok(ArtifactQuery::new(
        config.metadata.sources,
        identity::PRODUCT,
        identity::SERIES,
        arch,
        VersionMatch::Latest,
    )
    .product_id)
}

/// Finds the version `reach` allows and, unless `dry_run`, installs it
/// (see module docs). A newer major out of reach is reported in
/// [`UpgradeOutcome::newer_major`]; the caller decides what it means.
pub async fn upgrade(config: &Inputs<'_>, reach: &Reach, dry_run: bool) -> Result<UpgradeOutcome> {
    let running = identity::version();
    let running_v = choice::parse(running).ok_or_else(|| {
        Error::internal(format!(
            "this agent's version {running:?} is not a semantic version"
        ))
    })?;
    let id = product_id(config)?;
    let offers = metadata::find_all(&config.metadata, &id).await?;
    let candidates: Vec<(Candidate, &Found)> = offers
        .items
        .iter()
        .filter_map(|f| match choice::parse(&f.version) {
            Some(version) => Some((
                Candidate {
                    version,
                    dev: f.kind == metadata::config::LocationKind::Dev,
                },
                f,
            )),
            None => {
                warn!(step = STEP, version = %f.version, url = %f.url, "ignoring an agent whose version is not a semantic version");
                None
            }
        })
        .collect();
    let dev_mode = config.metadata.sources.dev_dir.is_some();
    let list: Vec<Candidate> = candidates.iter().map(|(c, _)| c.clone()).collect();
    let mut outcome = UpgradeOutcome {
        running: running.to_string(),
        action: UpgradeAction::Current,
        to: None,
        url: None,
        newer_major: None,
        binary: config.agent.binary.clone(),
    };
    match choice::choose(&running_v, reach, &list, dev_mode) {
        Decision::Current => {
            info!(step = STEP, version = running, "the agent is current");
            Ok(outcome)
        }
        Decision::NewerMajorOnly { newest } => {
            warn!(step = STEP, version = running, newer_major = %newest,
                "a newer major of the agent exists; it is only installed by `node-bootstrap upgrade --major`");
            outcome.newer_major = Some(newest.to_string());
            Ok(outcome)
        }
        Decision::NotOffered { wanted } => {
            let offered: Vec<String> = list.iter().map(|c| c.version.to_string()).collect();
            Err(Error::bad_input(format!(
                "no location offers {id} version {wanted}; offered: {}",
                offered.join(", ")
            )))
        }
        Decision::Install { index, version } => {
            let found = candidates[index].1;
            if found.kind == metadata::config::LocationKind::Dev {
                warn!(step = STEP, version = %version, url = %found.url,
                    "DEVELOPMENT MODE: installing the locally built agent from sources.dev_dir, whatever its version");
            }
            outcome.to = Some(version.to_string());
            outcome.url = Some(found.url.clone());
            if dry_run {
                outcome.action = UpgradeAction::WouldUpgrade;
                return Ok(outcome);
            }
            install_found(config, found, &version.to_string()).await?;
            info!(message_id = crate::message_ids::AGENT_UPGRADED, step = STEP, from = running,
                to = %version, url = %found.url, path = %config.agent.binary.display(), "agent upgraded");
            outcome.action = UpgradeAction::Upgraded;
            Ok(outcome)
        }
    }
}

/// Downloads and verifies `found` beside the installed binary, checks that
/// it runs as `version` here, then puts it in place.
async fn install_found(config: &Inputs<'_>, found: &Found, version: &str) -> Result<()> {
    if found.item.sha512.is_none() {
        return Err(Error::verification(format!(
            "{} has no sha512 in its metadata; agent binaries need one",
            found.url
        )));
    }
    let binary = &config.agent.binary;
    let mut staged = crate::fsutil::AtomicFile::create(binary, 0o755)
        .ctx(ErrorClass::Internal, || {
            format!("failed to stage a binary beside {}", binary.display())
        })?;
    metadata::fetch_into(&config.metadata, found, &mut staged)
        .await
        .map_err(|e| e.context("the new agent was not installed"))?;
    staged.finish_writing().ctx(ErrorClass::Internal, || {
        format!("failed to write {}", staged.temp_path().display())
    })?;
    let arch = identity::arch().expect("product_id checked the arch");
    install::check_runs(
        staged.temp_path(),
        version,
        arch,
        config.agent.check_timeout,
    )
    .await
    .map_err(|e| e.context("the new agent was not installed"))?;
    install::replace(staged, binary, &config.agent.previous_binary())
}

/// Puts the previous binary back (it must still run), keeping the one it
/// replaces as the previous one.
pub async fn rollback(config: &Inputs<'_>) -> Result<UpgradeOutcome> {
    let binary = &config.agent.binary;
    let previous = config.agent.previous_binary();
    if !previous.exists() {
        return Err(Error::refused(format!(
            "there is no previous agent to roll back to ({} does not exist)",
            previous.display()
        )));
    }
    let answered = install::version_of(&previous, config.agent.check_timeout)
        .await
        .map_err(|e| e.context("not rolling back"))?;
    install::exchange(binary, &previous)?;
    info!(message_id = crate::message_ids::AGENT_ROLLED_BACK, step = STEP, from = identity::version(),
        to = %answered.version, path = %binary.display(), "agent rolled back");
    Ok(UpgradeOutcome {
        running: identity::version().to_string(),
        action: UpgradeAction::RolledBack,
        to: Some(answered.version),
        url: None,
        newer_major: None,
        binary: binary.clone(),
    })
}
