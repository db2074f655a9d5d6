//! Logging: tracing to journald (structured fields) when running under
//! systemd, plain text on stderr otherwise.
//!
//! Subsystems log with fields, not formatted strings:
//! `info!(step = "os-update", version = %v, "update downloaded")`. The
//! journald layer turns each field into a journal field (`STEP=os-update`),
//! so `journalctl STEP=os-update` finds every line of a step.
//!
//! Each journald line also names the unit the agent runs in
//! (`OBJECT_SYSTEMD_UNIT=`, read from `/proc/self/cgroup` at start).
//! journald attributes a native-protocol line to its unit by reading the
//! sender's cgroup from /proc when the line arrives; a short-lived run
//! (`follow --converge` at boot, a `follow` that finds nothing to do) has
//! often exited by then, and its last lines lose `_SYSTEMD_UNIT=`
//! (systemd issue #2913, open). `journalctl -u UNIT` also matches
//! `OBJECT_SYSTEMD_UNIT=UNIT` from root's processes, so the operator's
//! `journalctl -u node-bootstrap-follow-converge` shows every line.

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
                let unit = std::fs::read_to_string("/proc/self/cgroup")
                    .ok()
                    .and_then(|c| service_of_cgroup(&c));
                let layer = layer
                    .with_syslog_identifier("node-bootstrap".into())
                    .with_field_prefix(None)
                    .with_custom_fields(unit.map(|u| ("OBJECT_SYSTEMD_UNIT", u)));
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

/// The service a process runs in, from its `/proc/PID/cgroup`: the last
/// `*.service` of its path (the innermost: a system run inside a host's
/// service without a cgroup namespace of its own shows both), in the
/// unified hierarchy (cgroup v2, `0::`), else in systemd's named v1
/// hierarchy (`name=systemd`); a controller's hierarchy is not systemd's
/// to name. None outside a service (a login session's scope, a
/// container's root).
pub fn service_of_cgroup(cgroup: &str) -> Option<String> {
    let service_in = |want: fn(&str) -> bool| {
        cgroup.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            if !want(controllers) {
                return None;
            }
            path.split('/')
                .rfind(|c| c.ends_with(".service") && c.len() > ".service".len())
                .map(str::to_string)
        })
    };
    service_in(|c| c.is_empty()).or_else(|| service_in(|c| c == "name=systemd"))
}

#[cfg(test)]
mod tests {
    use super::{colour, service_of_cgroup};
    use std::ffi::OsStr;

    #[test]
    fn the_service_is_read_from_either_cgroup_hierarchy() {
        // cgroup v2 (today's Flatcar), the agent's own unit.
        assert_eq!(
            service_of_cgroup("0::/system.slice/node-bootstrap-follow-converge.service\n")
                .as_deref(),
            Some("node-bootstrap-follow-converge.service")
        );
        // A sub-cgroup of a service (Delegate=): still the service.
        assert_eq!(
            service_of_cgroup("0::/system.slice/k8s-node-bootstrap.service/helper\n").as_deref(),
            Some("k8s-node-bootstrap.service")
        );
        // Nested: a system whose cgroup path shows its host's service too.
        assert_eq!(
            service_of_cgroup(
                "0::/system.slice/ci.service/node/system.slice/k8s-node-bootstrap.service\n"
            )
            .as_deref(),
            Some("k8s-node-bootstrap.service")
        );
        // cgroup v1 (hybrid): systemd's named hierarchy, not a controller's.
        let v1 =
            "12:cpu,cpuacct:/\n1:name=systemd:/system.slice/node-bootstrap-follow.service\n0::/\n";
        assert_eq!(
            service_of_cgroup(v1).as_deref(),
            Some("node-bootstrap-follow.service")
        );
        let legacy = "12:cpu,cpuacct:/system.slice/x.service\n1:name=systemd:/system.slice/node-bootstrap-follow.service\n";
        assert_eq!(
            service_of_cgroup(legacy).as_deref(),
            Some("node-bootstrap-follow.service")
        );
        // A shell in a login session; a container's root.
        assert_eq!(
            service_of_cgroup("0::/user.slice/user-0.slice/session-3.scope\n"),
            None
        );
        assert_eq!(service_of_cgroup("0::/\n"), None);
        assert_eq!(service_of_cgroup(""), None);
    }

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour(true, None));
        assert!(colour(true, Some(OsStr::new(""))));
        assert!(!colour(true, Some(OsStr::new("1"))));
        assert!(!colour(false, None));
        assert!(!colour(false, Some(OsStr::new(""))));
    }
}
