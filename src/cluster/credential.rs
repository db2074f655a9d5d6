//! The node's credential until the kubelet has its own (`cluster.credential`):
//! the shared kubeconfig (`paths.kubeconfig`, a client certificate or a
//! static token, used as it is), or the bootstrap kubeconfig
//! (`paths.bootstrap_kubeconfig`), whose user must hold a well-formed
//! bootstrap token and nothing else. The agent reads `/version` with it
//! (cluster version discovery, the forced version's skew check), the
//! `assets` step and preflight check that it loads, and the join's view
//! asks with it while TLS bootstrapping has not yet earned the kubelet a
//! certificate.
//!
//! A bootstrap kubeconfig whose user holds anything else (no token, a
//! token of another shape, a client certificate or a password beside it)
//! is a [`crate::error::ErrorClass::Config`] error, found when it is
//! loaded and so before any request; the message describes the token's
//! shape and never quotes it. A file that is missing or does not parse as
//! a kubeconfig is [`crate::error::ErrorClass::BadInput`], as for the
//! shared kubeconfig.

use super::config::Credential;
use super::kubeconfig::{self, Kubeconfig};
use crate::error::{Error, Result};
use crate::settings::Paths;
use std::path::Path;

/// The file the agent reads for `credential`.
pub fn path(paths: &Paths, credential: Credential) -> &Path {
    match credential {
        Credential::Kubeconfig => &paths.kubeconfig,
        Credential::BootstrapToken => &paths.bootstrap_kubeconfig,
    }
}

/// Loads the node's kubeconfig for `credential`, its bootstrap token
/// checked (module docs).
pub fn load(paths: &Paths, credential: Credential) -> Result<Kubeconfig> {
    let kc = kubeconfig::load(path(paths, credential))?;
    if credential == Credential::BootstrapToken {
        check_bootstrap_user(&kc)?;
    }
    Ok(kc)
}

/// The bootstrap kubeconfig's user holds a well-formed bootstrap token and
/// nothing else.
fn check_bootstrap_user(kc: &Kubeconfig) -> Result<()> {
    let field = format!("users[{}].user", kc.user_name);
    let bad = |field: &str, what: &str| {
        Error::config(format!(
            "bootstrap kubeconfig {}: {field}: {what} (cluster.credential is \"bootstrap-token\")",
            kc.path.display()
        ))
    };
    let c = &kc.credentials;
    if c.client_cert.is_some() || c.basic.is_some() {
        return Err(bad(
            &field,
            &format!(
                "holds {} beside the bootstrap token; a bootstrap kubeconfig carries the token alone",
                c.kinds()
            ),
        ));
    }
    let token = c.token.as_deref().ok_or_else(|| {
        bad(
            &field,
            "holds no token; a bootstrap kubeconfig's user carries a bootstrap token (`token: <id>.<secret>`)",
        )
    })?;
    kubeconfig::bootstrap_token_id(token).map_err(|why| bad(&format!("{field}.token"), &why))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorClass;

    fn ca() -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.self_signed(&key).unwrap().pem()
    }

    fn bootstrap_kubeconfig(dir: &Path, user: &str) -> Paths {
        use base64::Engine as _;
        let ca = base64::engine::general_purpose::STANDARD.encode(ca());
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: cluster\n  cluster:\n    server: https://10.0.0.1:6443\n    certificate-authority-data: {ca}\n\
             users:\n- name: kubelet-bootstrap\n  user:\n{user}contexts:\n- name: bootstrap\n  context:\n    cluster: cluster\n    user: kubelet-bootstrap\ncurrent-context: bootstrap\n"
        );
        std::fs::write(dir.join("bootstrap-kubeconfig"), text).unwrap();
        let mut paths = Paths::defaults();
        paths.bootstrap_kubeconfig = dir.join("bootstrap-kubeconfig");
        paths.kubeconfig = dir.join("missing-kubeconfig");
        paths
    }

    #[test]
    fn a_well_formed_token_loads_from_the_bootstrap_kubeconfig() {
        let d = tempfile::tempdir().unwrap();
        let paths = bootstrap_kubeconfig(d.path(), "    token: abcdef.0123456789abcdef\n");
        let kc = load(&paths, Credential::BootstrapToken).unwrap();
        assert_eq!(kc.credentials.bootstrap_token_id(), Some("abcdef"));
        assert_eq!(kc.path, paths.bootstrap_kubeconfig);
        // The shared kubeconfig is another file, absent here: bad input.
        let e = load(&paths, Credential::Kubeconfig).unwrap_err();
        assert_eq!(e.class(), ErrorClass::BadInput);
    }

    #[test]
    fn a_malformed_token_is_a_config_error_that_never_quotes_it() {
        let d = tempfile::tempdir().unwrap();
        for (token, says) in [
            (
                "ABCDEF.0123456789abcdef",
                "its id (before the '.') has characters outside [a-z0-9]",
            ),
            (
                "abcdef.0123456789abcdefXYZ",
                "the secret of token abcdef (after the '.') has 19 characters",
            ),
            ("abcdef0123456789abcdefgh", "it has no '.' (24 characters;"),
            (
                "abc.def",
                "its id has 3 characters and its secret 3 characters",
            ),
        ] {
            let paths = bootstrap_kubeconfig(d.path(), &format!("    token: {token}\n"));
            let e = load(&paths, Credential::BootstrapToken).unwrap_err();
            assert_eq!(e.class(), ErrorClass::Config, "{token}: {e}");
            let m = e.to_string();
            assert!(
                m.contains("users[kubelet-bootstrap].user.token: is not a bootstrap token")
                    && m.contains(says)
                    && m.contains(&paths.bootstrap_kubeconfig.display().to_string()),
                "{token}: {m}"
            );
            let secret = token.split_once('.').map_or(token, |(_, s)| s);
            assert!(!m.contains(secret), "{token}: the secret is quoted: {m}");
        }
    }

    #[test]
    fn anything_but_a_token_alone_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let paths = bootstrap_kubeconfig(d.path(), "    username: admin\n    password: hunter2\n");
        let m = load(&paths, Credential::BootstrapToken)
            .unwrap_err()
            .to_string();
        assert!(
            m.contains("holds basic-auth beside the bootstrap token"),
            "{m}"
        );
        assert!(!m.contains("hunter2"), "{m}");
        let paths = bootstrap_kubeconfig(d.path(), "    {}\n");
        let e = load(&paths, Credential::BootstrapToken).unwrap_err();
        assert_eq!(e.class(), ErrorClass::Config);
        assert!(e.to_string().contains("holds no token"), "{e}");
    }
}
