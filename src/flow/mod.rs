//! The `run` flow: the steps as data, a pure decision of what comes next
//! ([`plan`]), and the driver that executes it ([`driver`]) through the
//! node's seams ([`seams`]).

pub mod command;
pub mod driver;
pub mod node;
pub mod plan;
pub mod preflight;
pub mod seams;
