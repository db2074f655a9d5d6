//! Sanity checks before the first step (seed 000's "sanity checks before
//! doing anything"): the seed kubelet.env parses, the kubeconfig and its CA
//! exist and parse, the clock is not before the CA's validity, the state dir
//! is writable, the system bus answers, and there is room on disk for the
//! downloads. `run` runs them first and stops at the first failure.
//! `node-bootstrap preflight` runs them alone, then asks the API server
//! once ([`api_server`]: reachable, its certificate trusted by the
//! kubeconfig's CA, the credential accepted), and prints each.

use crate::config::Config;
use crate::error::{Error, ErrorClass, Result};
use crate::fsutil::AtomicFile;
use std::path::Path;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_before_the_ca_is_refused() {
        let ca = time::macros::datetime!(2026-01-01 0:00 UTC);
        let err = check_clock(time::macros::datetime!(2025-06-01 0:00 UTC), ca).unwrap_err();
        assert_eq!(err.class(), ErrorClass::Refused);
        assert!(
            err.to_string()
                .contains("before the kubeconfig CA's validity"),
            "{err}"
        );
        check_clock(time::macros::datetime!(2026-06-01 0:00 UTC), ca).unwrap();
    }

    #[test]
    fn ca_without_certificates_is_an_error() {
        assert_eq!(
            ca_not_before(b"junk").unwrap_err(),
            "no certificate in the CA bundle"
        );
    }

    #[test]
    fn state_dir_probe_leaves_nothing_and_creates_no_dir() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("state");
        let said = writable(&dir).unwrap();
        assert!(said.ends_with("is writable: `run` creates it)"), "{said}");
        assert!(!dir.exists(), "preflight created {}", dir.display());
        std::fs::create_dir(&dir).unwrap();
        writable(&dir).unwrap();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    }
}

/// Free space the docker addon needs in the torcx store (a docker package
/// is 50-100 MiB; twice that for the temp file and the final one).
pub const MIN_FREE_STORE_BYTES: u64 = 512 * 1024 * 1024;
/// Free space the state dir needs.
pub const MIN_FREE_STATE_BYTES: u64 = 4 * 1024 * 1024;

/// One check's outcome.
#[derive(Debug)]
pub struct Check {
    pub name: &'static str,
    pub outcome: Result<String>,
}

/// Runs every check (they do not stop at the first failure).
pub async fn run_checks(config: &Config) -> Vec<Check> {
    run_checks_on(config, &crate::systemd::agent_bus().await).await
}

/// [`run_checks`] on a system bus connection the caller made (and keeps
/// using: `run` shares one connection between preflight and its steps).
pub async fn run_checks_on(config: &Config, bus: &Result<zbus::Connection>) -> Vec<Check> {
    let mut checks = vec![
        Check {
            name: "seed kubelet.env",
            outcome: seed(config),
        },
        Check {
            name: "kubeconfig",
            outcome: kubeconfig(config),
        },
        Check {
            name: "state dir",
            outcome: writable(&config.paths.state_dir),
        },
        Check {
            name: "disk space",
            outcome: disk_space(config),
        },
    ];
    checks.push(Check {
        name: "system bus",
        outcome: system_bus(bus),
    });
    checks
}

/// The first failing check as an error naming it.
pub fn first_failure(checks: Vec<Check>) -> Result<()> {
    match checks.into_iter().find(|c| c.outcome.is_err()) {
        Some(Check {
            name,
            outcome: Err(e),
        }) => Err(e.context(format!("preflight check `{name}` failed"))),
        _ => Ok(()),
    }
}

fn seed(config: &Config) -> Result<String> {
    let path = config.paths.seed_kubelet_env();
    let env = crate::kubelet_env::read_seed(&path)?;
    Ok(format!(
        "{} ({} entries)",
        path.display(),
        env.entries().len()
    ))
}

/// The kubeconfig `cluster.credential` names (the bootstrap kubeconfig's
/// token checked: a malformed one fails here, before any request).
fn kubeconfig(config: &Config) -> Result<String> {
    let credential = config.cluster.credential;
    let path = crate::cluster::credential::path(&config.paths, credential);
    if !path.exists() && config.role.is_bootkube_master() {
        return Ok(format!(
            "{} absent; not needed on the bootkube master",
            path.display()
        ));
    }
    let kc = crate::cluster::credential::load(&config.paths, credential)?;
    let not_before = ca_not_before(&kc.ca_pem).map_err(|e| {
        Error::bad_input(format!(
            "kubeconfig {}: CA from {}: {e}",
            path.display(),
            kc.ca_source
        ))
    })?;
    check_clock(time::OffsetDateTime::now_utc(), not_before)?;
    let who = match kc.credentials.bootstrap_token_id() {
        Some(id) if credential == crate::cluster::config::Credential::BootstrapToken => {
            format!(", bootstrap token {id}")
        }
        _ => String::new(),
    };
    Ok(format!(
        "{} (server {}, CA from {}{who})",
        path.display(),
        kc.server,
        kc.ca_source
    ))
}

/// The latest `notBefore` of the certificates in a PEM bundle.
pub fn ca_not_before(pem: &[u8]) -> std::result::Result<time::OffsetDateTime, String> {
    let mut latest = None;
    for block in x509_parser::pem::Pem::iter_from_buffer(pem) {
        let block = block.map_err(|e| format!("unreadable PEM: {e}"))?;
        let cert = block
            .parse_x509()
            .map_err(|e| format!("unreadable certificate: {e}"))?;
        let nb = cert.validity().not_before.to_datetime();
        latest = Some(latest.map_or(nb, |l: time::OffsetDateTime| l.max(nb)));
    }
    latest.ok_or_else(|| "no certificate in the CA bundle".to_string())
}

/// A clock before the CA's validity makes every TLS handshake fail in a way
/// that looks like a bad certificate: say what it really is.
pub fn check_clock(now: time::OffsetDateTime, ca_not_before: time::OffsetDateTime) -> Result<()> {
    if now < ca_not_before {
        return Err(Error::refused(format!(
            "the clock ({now}) is before the kubeconfig CA's validity ({ca_not_before}); fix the time (NTP) first"
        )));
    }
    Ok(())
}

/// `GET <server>/version` once, as the `cluster-version` step asks it (the
/// credential `cluster.credential` names, TLS trusted only by its CA,
/// `cluster.api_timeout_secs`): a server that does not resolve or answer
/// is [`ErrorClass::Retryable`], one whose certificate the CA does not
/// vouch for [`ErrorClass::Verification`], a credential it rejects
/// [`ErrorClass::BadInput`]. The bootkube master is not asked: its API
/// server starts after bootkube runs, and `run` takes its version from
/// the seed.
pub async fn api_server(config: &Config) -> Result<String> {
    if config.role.is_bootkube_master() {
        return Ok(
            "not asked on the bootkube master (its API server starts after bootkube)".to_string(),
        );
    }
    let kc = crate::cluster::credential::load(&config.paths, config.cluster.credential)?;
    let client = crate::cluster::apiclient::ApiClient::new(&kc, config.cluster.api_timeout)?;
    let once =
        crate::retry::RetryPolicy::new(std::time::Duration::ZERO, std::time::Duration::ZERO, 1);
    let v = client.version(once).await?;
    Ok(format!(
        "{} answers (Kubernetes {}) over TLS trusted by the CA from {}",
        client.url(),
        v.git_version,
        kc.ca_source
    ))
}

/// Creates and removes a temp file in `dir`. A `dir` that does not exist is
/// not created (`preflight` off a node must leave nothing behind; `run`
/// creates it with its lock, and the unit's `StateDirectory=` before that):
/// its nearest existing parent must be writable instead.
pub fn writable(dir: &Path) -> Result<String> {
    if !dir.exists() {
        let parent = dir
            .ancestors()
            .find(|a| a.is_dir())
            .unwrap_or(Path::new("/"));
        return nix::unistd::access(parent, nix::unistd::AccessFlags::W_OK)
            .map(|()| {
                format!(
                    "{} absent ({} is writable: `run` creates it)",
                    dir.display(),
                    parent.display()
                )
            })
            .map_err(|e| {
                Error::new(
                    ErrorClass::Internal,
                    format!(
                        "state dir {} is absent and {} is not writable: {e}",
                        dir.display(),
                        parent.display()
                    ),
                )
            });
    }
    let probe = dir.join("preflight-probe");
    AtomicFile::create(&probe, 0o600).map(drop).map_err(|e| {
        Error::new(
            ErrorClass::Internal,
            format!("state dir {} is not writable: {e}", dir.display()),
        )
    })?;
    Ok(format!("{} writable", dir.display()))
}

/// Free bytes on the filesystem holding `path` (or its nearest existing parent).
pub fn free_bytes(path: &Path) -> Result<u64> {
    let mut p = path;
    while !p.exists() {
        p = p.parent().unwrap_or(Path::new("/"));
    }
    let st = nix::sys::statvfs::statvfs(p)
        .map_err(|e| Error::internal(format!("statvfs {} failed: {e}", p.display())))?;
    Ok(st.blocks_available() as u64 * st.fragment_size() as u64)
}

fn disk_space(config: &Config) -> Result<String> {
    let mut needs = vec![(config.paths.state_dir.as_path(), MIN_FREE_STATE_BYTES)];
    if config.addon.enabled {
        needs.push((config.paths.torcx_store.as_path(), MIN_FREE_STORE_BYTES));
    }
    let mut report = Vec::new();
    for (path, need) in needs {
        let free = free_bytes(path)?;
        if free < need {
            return Err(Error::retryable(format!(
                "only {} MiB free for {} (needs {} MiB)",
                free >> 20,
                path.display(),
                need >> 20
            )));
        }
        report.push(format!("{}: {} MiB free", path.display(), free >> 20));
    }
    Ok(report.join(", "))
}

/// The connection is the proof: zbus connects only once the bus answered
/// `Hello` with this connection's unique name, so no further round trip
/// is spent on the path to kubelet.
fn system_bus(bus: &Result<zbus::Connection>) -> Result<String> {
    let conn = match bus {
        Ok(conn) => conn,
        Err(e) => return Err(Error::new(e.class(), e)),
    };
    Ok(match conn.unique_name() {
        Some(name) => format!("answers (this connection is {name})"),
        None => "answers".to_string(),
    })
}
