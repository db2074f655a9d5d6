//! `node-bootstrap assets pull|check`.

use super::{Cli, load, published, runtime};
use crate::config::Config;
use crate::error::{Result, exit};
use clap::Subcommand;

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

pub(super) fn command(cli: &Cli, cmd: &AssetsCommand) -> Result<u8> {
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
