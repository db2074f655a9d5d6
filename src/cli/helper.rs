//! `node-bootstrap helper`: a control-plane step (bootkube, tectonic) once.

use super::{Cli, published};
use crate::error::Result;

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum HelperStep {
    Bootkube,
    Tectonic,
}

/// `helper bootkube|tectonic`: a command the metrics follow.
pub(super) fn command(cli: &Cli, step: HelperStep) -> Result<u8> {
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
    published(cli, command, true, |config| {
        crate::helper::main(&config.helper_inputs(), step)
    })
}
