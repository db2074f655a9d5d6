//! Logging: tracing to journald (structured fields) when running under
//! systemd, plain text on stderr otherwise.
//!
//! Subsystems log with fields, not formatted strings:
//! `info!(step = "os-update", version = %v, "update downloaded")`. The
//! journald layer turns each field into a journal field (`STEP=os-update`),
//! so `journalctl STEP=os-update` finds every line of a step.

use clap::ValueEnum;
use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::prelude::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum LogFormat {
    /// journald when stderr is connected to the journal (under systemd), else text.
    #[default]
    Auto,
    /// Structured fields straight to journald.
    Journald,
    /// Human-readable lines on stderr.
    Text,
    /// One JSON object per line on stderr.
    Json,
}

const JOURNALD_SOCKET: &str = "/run/systemd/journal/socket";

/// Installs the global subscriber. `verbose` raises the default level
/// (0 = info, 1 = debug, 2+ = trace); `RUST_LOG` overrides it. Returns
/// whether log lines go to journald (rather than stderr).
pub fn init(format: LogFormat, verbose: u8) -> bool {
    let default = match verbose {
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        EnvFilter::new(format!(
            "{default},aws_config=warn,aws_smithy_runtime=warn,hyper=warn,h2=warn,rustls=warn"
        ))
    });
    let use_journald = match format {
        LogFormat::Journald => true,
        LogFormat::Auto => {
            std::env::var_os("JOURNAL_STREAM").is_some()
                && std::path::Path::new(JOURNALD_SOCKET).exists()
        }
        LogFormat::Text | LogFormat::Json => false,
    };
    if use_journald {
        match tracing_journald::layer() {
            Ok(layer) => {
                let layer = layer
                    .with_syslog_identifier("node-bootstrap".into())
                    .with_field_prefix(None);
                let _ = tracing_subscriber::registry()
                    .with(filter)
                    .with(layer)
                    .try_init();
                return true;
            }
            Err(e) => eprintln!("node-bootstrap: journald unavailable ({e}); logging to stderr"),
        }
    }
    let registry = tracing_subscriber::registry().with(filter);
    let result = if format == LogFormat::Json {
        registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_writer(std::io::stderr),
            )
            .try_init()
    } else {
        registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_target(false)
                    .with_ansi(colour(
                        std::io::stderr().is_terminal(),
                        std::env::var_os("NO_COLOR").as_deref(),
                    ))
                    .with_writer(std::io::stderr),
            )
            .try_init()
    };
    let _ = result;
    false
}

/// Whether text log lines get ANSI colours: only on a terminal, and not
/// when `NO_COLOR` is set to anything but the empty string (no-color.org);
/// a file or a pipe gets plain text.
pub fn colour(stderr_is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::colour;
    use std::ffi::OsStr;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour(true, None));
        assert!(colour(true, Some(OsStr::new(""))));
        assert!(!colour(true, Some(OsStr::new("1"))));
        assert!(!colour(false, None));
        assert!(!colour(false, Some(OsStr::new(""))));
    }
}
