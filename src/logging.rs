//! Logging: tracing to journald (structured fields) when running under
//! systemd, plain text on stderr otherwise.
//!
//! Subsystems log with fields, not formatted strings:
//! `info!(step = "os-update", version = %v, "update downloaded")`. The
//! journald layer turns each field into a journal field (`STEP=os-update`),
//! so `journalctl STEP=os-update` finds every line of a step.

use clap::ValueEnum;
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
                    .with_writer(std::io::stderr),
            )
            .try_init()
    };
    let _ = result;
    false
}
