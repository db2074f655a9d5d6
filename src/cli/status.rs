//! `node-bootstrap status`: where this node's bootstrap stands.

use super::{Cli, load};
use crate::error::Result;
use clap::Args;

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
    /// Complete only once the node is Ready in the cluster, as the API
    /// server says (with --wait: wait for that too).
    #[arg(long)]
    pub ready: bool,
}

/// `status`; with `--wait` a command the metrics follow, published
/// where the config file names the place even when it does not load.
pub(super) fn command(cli: &Cli, args: &StatusArgs) -> Result<u8> {
    let opts = crate::status::Options {
        json: args.json,
        watch: args.watch,
        wait: args.wait,
        timeout: args.timeout,
        ready: args.ready,
    };
    if !args.wait {
        return crate::status::main(&cli.config, &opts);
    }
    // `status` reads a node whose config does not load, and says
    // so; its wait publishes where the file still names the place
    // (as every published command does).
    let target = crate::textfile::Target::for_command(&load(cli), &cli.config);
    crate::metrics::record::begin(crate::metrics::Command::StatusWait, false);
    let outcome = crate::status::main(&cli.config, &opts);
    crate::textfile::finish(&target, &outcome);
    outcome
}
