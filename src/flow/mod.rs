//! The `run` flow: the steps as data, a pure decision of what comes next
//! ([`plan`]), and the driver that executes it ([`driver`]) through the
//! node's seams ([`seams`]).

pub(crate) mod command;
pub(crate) mod driver;
pub(crate) mod join_watch;
pub(crate) mod node;
pub mod plan;
pub(crate) mod preflight;
pub(crate) mod seams;
