//! Kubelet TLS bootstrapping in the test control plane: bootstrap tokens
//! rendered by the project's own `terraform/modules/bootstrap-token` (real
//! terraform, no providers), so every test that uses one also proves the
//! module's output works against the real API server; the control plane's
//! bootstrap-token mode ([`TlsBootstrap`], set by
//! [`ControlPlane::enable_tls_bootstrap`]): kube-apiserver with
//! `--enable-bootstrap-token-auth`, kube-controller-manager signing with the
//! cluster CA (`--cluster-signing-cert-file`/`--cluster-signing-key-file`,
//! `--cluster-signing-duration`, the 1.20 name of the duration flag) and
//! running `bootstrapsigner` and `tokencleaner`, and the module's token
//! Secrets and RBAC as the cluster's first manifests; and what a test does
//! to tokens on a running cluster ([`Kubectl::apply_yaml`],
//! [`Kubectl::expire_bootstrap_token`], [`Kubectl::delete_bootstrap_token`]).
//!
//! [`verify_client_cert`] checks that a certificate the cluster issued
//! chains to the cluster CA as a client certificate (webpki, as a TLS
//! server checks one).

use crate::kube::{ControlPlane, Kubectl};
use anyhow::{Context as _, Result, bail};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A bootstrap token, `<id>.<secret>` (6 and 16 characters of `[a-z0-9]`
/// when well-formed; [`BootstrapToken::new`] takes anything, so tests can
/// make malformed ones).
#[derive(Clone, PartialEq, Eq)]
pub struct BootstrapToken {
    pub id: String,
    secret: String,
}

impl std::fmt::Debug for BootstrapToken {
    // The secret half stays out of test output.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BootstrapToken({}.<secret>)", self.id)
    }
}

impl BootstrapToken {
    /// A new random, well-formed token.
    pub fn generate() -> BootstrapToken {
        use rand::Rng as _;
        const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
        let mut rng = rand::thread_rng();
        let mut pick = |n: usize| -> String {
            (0..n)
                .map(|_| CHARS[rng.gen_range(0..CHARS.len())] as char)
                .collect()
        };
        BootstrapToken {
            id: pick(6),
            secret: pick(16),
        }
    }

    pub fn new(id: &str, secret: &str) -> BootstrapToken {
        BootstrapToken {
            id: id.into(),
            secret: secret.into(),
        }
    }

    /// The secret half (what must never show up in logs or output).
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// `<id>.<secret>`, as a bearer token.
    pub fn token(&self) -> String {
        format!("{}.{}", self.id, self.secret)
    }

    /// The user the API server authenticates it as.
    pub fn user(&self) -> String {
        format!("system:bootstrap:{}", self.id)
    }
}

/// What `terraform/modules/bootstrap-token` renders for one token.
#[derive(Clone)]
pub struct RenderedToken {
    pub token_id: String,
    /// `bootstrap-token-<id>` (in kube-system).
    pub secret_name: String,
    /// The bootstrap kubeconfig a node starts with.
    pub kubeconfig: String,
    /// The token's Secret (YAML).
    pub secret_manifest: String,
    /// The three ClusterRoleBindings (YAML documents).
    pub rbac_manifest: String,
    /// The `manifests` output: file name -> YAML.
    pub manifests: Vec<(String, String)>,
}

impl std::fmt::Debug for RenderedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RenderedToken")
            .field("secret_name", &self.secret_name)
            .finish_non_exhaustive()
    }
}

/// The inputs of the module for one token.
#[derive(Debug, Clone)]
pub struct TokenInputs<'a> {
    pub token: &'a BootstrapToken,
    /// RFC 3339 (see [`rfc3339_in`]).
    pub expiration: &'a str,
    pub api_server_url: &'a str,
    pub cluster_ca: &'a str,
}

/// Renders one token with `terraform/modules/bootstrap-token` (real
/// terraform, no providers, its data and state in a temp dir).
pub fn render(inputs: &TokenInputs) -> Result<RenderedToken> {
    let work = tempfile::Builder::new()
        .prefix("nb-bootstrap-token-")
        .tempdir()?;
    let module = crate::project_root().join("terraform/modules/bootstrap-token");
    std::fs::write(
        work.path().join("main.tf"),
        format!(
            r#"variable "token_secret" {{
  type      = string
  sensitive = true
}}
variable "in" {{
  type = any
}}
module "token" {{
  source         = "{}"
  token_id       = var.in.token_id
  token_secret   = var.token_secret
  expiration     = var.in.expiration
  api_server_url = var.in.api_server_url
  cluster_ca     = var.in.cluster_ca
}}
output "token" {{
  value     = module.token
  sensitive = true
}}
"#,
            module.display()
        ),
    )?;
    let vars = serde_json::json!({
        "token_secret": inputs.token.secret(),
        "in": {
            "token_id": inputs.token.id,
            "expiration": inputs.expiration,
            "api_server_url": inputs.api_server_url,
            "cluster_ca": inputs.cluster_ca,
        },
    });
    crate::files::write_mode(
        &work.path().join("in.tfvars.json"),
        vars.to_string().as_bytes(),
        0o600,
    )?;
    let var_file = format!("-var-file={}", work.path().join("in.tfvars.json").display());
    let out = crate::terraform::Terraform::new(work.path())
        .render(&[&var_file], "token")
        .with_context(|| format!("rendering a token with {}", module.display()))?;
    let s = |k: &str| -> Result<String> {
        out[k]
            .as_str()
            .map(str::to_string)
            .with_context(|| format!("the module has no string output {k}"))
    };
    let manifests = out["manifests"]
        .as_object()
        .context("the module has no manifests output")?
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect();
    Ok(RenderedToken {
        token_id: s("token_id")?,
        secret_name: s("secret_name")?,
        kubeconfig: s("kubeconfig")?,
        secret_manifest: s("token_secret_manifest")?,
        rbac_manifest: s("rbac_manifest")?,
        manifests,
    })
}

/// The control plane's bootstrap-token mode.
#[derive(Debug, Clone)]
pub struct TlsBootstrap {
    /// kube-controller-manager's `--cluster-signing-duration`: how long
    /// the certificates it signs are valid (short in tests: kubelets renew
    /// at 70-90 % of it).
    pub signing_duration: Duration,
    /// The cluster's first manifests (file name, YAML): the tokens'
    /// Secrets and the RBAC, as the module renders them. Applied once the
    /// API server is ready ([`ControlPlane::start`]), or by the bootkube
    /// master's `tectonic-wrapper.sh` (`manifests/`).
    pub manifests: Vec<(String, String)>,
}

impl TlsBootstrap {
    /// kube-apiserver's extra flag.
    pub fn apiserver_args(&self) -> Vec<String> {
        vec!["--enable-bootstrap-token-auth=true".into()]
    }

    /// kube-controller-manager's extra flags, its files in `dir`.
    pub fn controller_manager_args(&self, dir: &str) -> Vec<String> {
        vec![
            format!("--cluster-signing-cert-file={dir}/tls/ca.crt"),
            format!("--cluster-signing-key-file={dir}/tls/ca.key"),
            format!(
                "--cluster-signing-duration={}s",
                self.signing_duration.as_secs()
            ),
            "--controllers=*,bootstrapsigner,tokencleaner".into(),
        ]
    }
}

impl ControlPlane {
    /// Turns on the bootstrap-token mode: certificates signed for
    /// `signing_duration`, and `tokens` (each with its RFC 3339 expiration)
    /// rendered by the module for `server` (default [`ControlPlane::url`])
    /// and this control plane's CA, their Secrets and the RBAC among the
    /// cluster's first manifests. Returns what the module rendered for each
    /// token (the nodes' bootstrap kubeconfigs).
    pub fn enable_tls_bootstrap(
        &mut self,
        signing_duration: Duration,
        tokens: &[(BootstrapToken, String)],
        server: Option<&str>,
    ) -> Result<Vec<RenderedToken>> {
        let mut rendered = Vec::new();
        let mut manifests = Vec::new();
        for (token, expiration) in tokens {
            let r = self.render_bootstrap_token(token, expiration, server)?;
            for (name, yaml) in &r.manifests {
                if !manifests.iter().any(|(n, _)| n == name) {
                    manifests.push((name.clone(), yaml.clone()));
                }
            }
            rendered.push(r);
        }
        if rendered.is_empty() {
            // The RBAC comes with a token's rendering; a cluster without
            // tokens yet still gets it (from a throwaway token's).
            let r = self.render_bootstrap_token(
                &BootstrapToken::generate(),
                &rfc3339_in(Duration::from_secs(3600)),
                server,
            )?;
            manifests.push(("node-bootstrap-rbac.yaml".into(), r.rbac_manifest));
        }
        manifests.sort();
        self.tls_bootstrap = Some(TlsBootstrap {
            signing_duration,
            manifests,
        });
        Ok(rendered)
    }

    /// Renders `token` with the module for `server` (default
    /// [`ControlPlane::url`]) and this control plane's CA; apply its
    /// `secret_manifest` ([`Kubectl::apply_yaml`]) to make it known.
    pub fn render_bootstrap_token(
        &self,
        token: &BootstrapToken,
        expiration: &str,
        server: Option<&str>,
    ) -> Result<RenderedToken> {
        let url = self.url();
        render(&TokenInputs {
            token,
            expiration,
            api_server_url: server.unwrap_or(&url),
            cluster_ca: &self.pki.ca_pem,
        })
    }
}

impl Kubectl {
    /// `kubectl apply -f` of `yaml` (written to a private temp file).
    pub fn apply_yaml(&self, yaml: &str) -> Result<String> {
        let dir = tempfile::tempdir()?;
        let f = dir.path().join("manifest.yaml");
        crate::files::write_mode(&f, yaml.as_bytes(), 0o600)?;
        self.apply_path(&f)
    }

    /// `kubectl apply -f PATH` (a file or a directory of manifests).
    pub fn apply_path(&self, path: &Path) -> Result<String> {
        self.run(&["apply", "-f", &path.display().to_string()])
    }

    /// Deletes the token's Secret (revokes it at once).
    pub fn delete_bootstrap_token(&self, id: &str) -> Result<()> {
        self.run(&[
            "-n",
            "kube-system",
            "delete",
            "secret",
            &format!("bootstrap-token-{id}"),
        ])
        .map(drop)
    }

    /// Sets the token's expiration a minute into the past (what the
    /// passing of time does to it).
    pub fn expire_bootstrap_token(&self, id: &str) -> Result<()> {
        use base64::Engine as _;
        let past = rfc3339_at(now_secs() - 60);
        let patch = serde_json::json!({"data": {
            "expiration": base64::engine::general_purpose::STANDARD.encode(past)
        }});
        self.run(&[
            "-n",
            "kube-system",
            "patch",
            "secret",
            &format!("bootstrap-token-{id}"),
            "--type=merge",
            "-p",
            &patch.to_string(),
        ])
        .map(drop)
    }

    /// Whether the token's Secret exists.
    pub fn bootstrap_token_exists(&self, id: &str) -> Result<bool> {
        let out = self.run(&[
            "-n",
            "kube-system",
            "get",
            "secrets",
            "--field-selector",
            &format!("metadata.name=bootstrap-token-{id}"),
            "-o",
            "name",
        ])?;
        Ok(!out.trim().is_empty())
    }
}

/// Whether `cert_pem` (one certificate) is a client certificate that chains
/// to `ca_pem` now, as webpki checks one in a TLS handshake.
pub fn verify_client_cert(ca_pem: &str, cert_pem: &str) -> Result<()> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, UnixTime};
    use std::sync::Arc;
    let ca = CertificateDer::from_pem_slice(ca_pem.as_bytes()).context("parsing the CA")?;
    let cert =
        CertificateDer::from_pem_slice(cert_pem.as_bytes()).context("parsing the certificate")?;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca)?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()?;
    verifier
        .verify_client_cert(&cert, &[], UnixTime::now())
        .map(drop)
        .map_err(|e| anyhow::anyhow!("the certificate does not chain to the CA: {e}"))
}

/// What anyone who reads a node's Ignition config `cfg` (its user data)
/// gets, checked for a node that starts with `token` only: the bootstrap
/// kubeconfig (`/etc/kubernetes/bootstrap-kubeconfig`, 0600) whose one user
/// holds that token and nothing else; no `/etc/kubernetes/kubeconfig`, and
/// no private key, client certificate or token file in any file; the
/// agent told to use the token (`cluster.credential`).
pub fn check_holds_bootstrap_token_only(cfg: &Value, token: &BootstrapToken) -> Result<()> {
    let files = crate::ignition::inline_files(cfg);
    if files.contains_key("/etc/kubernetes/kubeconfig") {
        bail!("a kubeconfig beside the bootstrap one");
    }
    let (mode, kc) = files
        .get("/etc/kubernetes/bootstrap-kubeconfig")
        .context("no /etc/kubernetes/bootstrap-kubeconfig")?;
    if *mode != 0o600 {
        bail!("the bootstrap kubeconfig's mode is {mode:o}, not 600");
    }
    let kc: Value = serde_saphyr::from_slice(kc).context("parsing the bootstrap kubeconfig")?;
    let users = kc["users"].as_array().context("no users")?;
    let user = match users.as_slice() {
        [u] => u["user"]
            .as_object()
            .context("a user without credentials")?,
        _ => bail!("the bootstrap kubeconfig has {} users", users.len()),
    };
    if user.keys().collect::<Vec<_>>() != ["token"] {
        bail!(
            "the bootstrap kubeconfig's user holds {:?}",
            user.keys().collect::<Vec<_>>()
        );
    }
    if user["token"] != token.token().as_str() {
        bail!("the bootstrap kubeconfig holds another token");
    }
    for (path, (_, data)) in &files {
        let text = String::from_utf8_lossy(data);
        for credential in [
            "PRIVATE KEY",
            "client-certificate",
            "client-key",
            "tokenFile",
        ] {
            if text.contains(credential) {
                bail!("{path} carries {credential}");
            }
        }
    }
    let (_, config) = files
        .get("/etc/node-bootstrap/config.json")
        .context("no agent config")?;
    let config: Value = serde_json::from_slice(config)?;
    if config["cluster"]["credential"] != "bootstrap-token" {
        bail!("the agent's cluster.credential: {}", config["cluster"]);
    }
    Ok(())
}

/// Where a kubelet started with `--cert-dir=/var/lib/kubelet/pki` keeps
/// its client certificate: a link to the newest `kubelet-client-<date>.pem`
/// (certificate and key in one PEM file).
pub const KUBELET_CLIENT_CERT: &str = "/var/lib/kubelet/pki/kubelet-client-current.pem";

/// What a user reads off a certificate (`openssl x509 -noout -subject
/// -issuer -serial -dates`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertInfo {
    pub cn: Vec<String>,
    pub org: Vec<String>,
    pub issuer: String,
    /// Hex, as `openssl x509 -serial` prints it (with colons).
    pub serial: String,
    /// Seconds since the epoch.
    pub not_before: i64,
    pub not_after: i64,
}

/// The first `CERTIFICATE` block of `pem` (which may hold a key too, as a
/// kubelet's `kubelet-client-current.pem` does), as PEM.
pub fn first_certificate_pem(pem: &str) -> Result<String> {
    let begin = pem
        .find("-----BEGIN CERTIFICATE-----")
        .context("no certificate in the PEM file")?;
    let end_marker = "-----END CERTIFICATE-----";
    let end = pem[begin..]
        .find(end_marker)
        .context("an unterminated certificate in the PEM file")?;
    Ok(format!("{}\n", &pem[begin..begin + end + end_marker.len()]))
}

/// Reads the first certificate of `pem`.
pub fn cert_info(pem: &str) -> Result<CertInfo> {
    let cert_pem = first_certificate_pem(pem)?;
    let (_, pem) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes())
        .map_err(|e| anyhow::anyhow!("parsing the certificate's PEM: {e}"))?;
    let cert = pem
        .parse_x509()
        .map_err(|e| anyhow::anyhow!("parsing the certificate: {e}"))?;
    let strs = |it: Vec<&x509_parser::x509::AttributeTypeAndValue>| -> Vec<String> {
        it.iter()
            .map(|a| a.as_str().unwrap_or_default().to_string())
            .collect()
    };
    Ok(CertInfo {
        cn: strs(cert.subject().iter_common_name().collect()),
        org: strs(cert.subject().iter_organization().collect()),
        issuer: cert.issuer().to_string(),
        serial: cert.raw_serial_as_string(),
        not_before: cert.validity().not_before.timestamp(),
        not_after: cert.validity().not_after.timestamp(),
    })
}

/// What a user checks of node `node`'s kubelet client certificate `pem`
/// (as the kubelet writes it, key included): subject
/// `CN=system:node:<node>`, `O=system:nodes`, issued by the cluster CA
/// `ca_pem` and valid as a client certificate under it now. Returns what
/// it read.
pub fn check_node_client_cert(ca_pem: &str, pem: &str, node: &str) -> Result<CertInfo> {
    let info = cert_info(pem)?;
    let want_cn = [format!("system:node:{node}")];
    if info.cn != want_cn || info.org != ["system:nodes"] {
        bail!(
            "{node}'s kubelet client certificate is for CN={:?} O={:?}, not CN={want_cn:?} O=[\"system:nodes\"]",
            info.cn,
            info.org
        );
    }
    let (_, ca) = x509_parser::pem::parse_x509_pem(ca_pem.as_bytes())
        .map_err(|e| anyhow::anyhow!("parsing the CA's PEM: {e}"))?;
    let ca_subject = ca
        .parse_x509()
        .map_err(|e| anyhow::anyhow!("parsing the CA: {e}"))?
        .subject()
        .to_string();
    if info.issuer != ca_subject {
        bail!(
            "{node}'s kubelet client certificate is issued by {}, not the cluster CA {ca_subject}",
            info.issuer
        );
    }
    verify_client_cert(ca_pem, &first_certificate_pem(pem)?)
        .with_context(|| format!("{node}'s kubelet client certificate"))?;
    Ok(info)
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs() as i64
}

/// RFC 3339 (UTC, seconds) of `d` from now: a token's expiration.
pub fn rfc3339_in(d: Duration) -> String {
    rfc3339_at(now_secs() + d.as_secs() as i64)
}

/// RFC 3339 (UTC, seconds) of `secs` since the epoch.
pub fn rfc3339_at(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    // Civil date from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip_through_the_api_servers_format() {
        assert_eq!(rfc3339_at(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_at(951_868_801), "2000-03-01T00:00:01Z");
        for secs in [0, 86_399, 951_868_801, 1_795_591_800, 4_102_444_800] {
            assert_eq!(
                crate::kube::rfc3339_epoch_secs(&rfc3339_at(secs)),
                Some(secs as f64)
            );
        }
    }

    #[test]
    fn the_bootkube_masters_assets_carry_the_signing_key_the_flags_and_the_manifests() {
        let mut cp = ControlPlane::new(&[]);
        let plain = cp.bootkube_assets("/opt/tectonic", "/img", "kind: VersionManifestV1\n");
        cp.tls_bootstrap = Some(TlsBootstrap {
            signing_duration: Duration::from_secs(600),
            manifests: vec![("node-bootstrap-rbac.yaml".into(), "kind: List\n".into())],
        });
        let assets = cp.bootkube_assets("/opt/tectonic", "/img", "kind: VersionManifestV1\n");
        let file = |files: &[(String, Vec<u8>, u32)], name: &str| {
            files
                .iter()
                .find(|f| f.0 == name)
                .map(|f| (String::from_utf8_lossy(&f.1).into_owned(), f.2))
        };
        assert_eq!(file(&plain, "tls/ca.key"), None);
        assert_eq!(
            file(&assets, "tls/ca.key"),
            Some((cp.pki.ca_key_pem(), 0o600))
        );
        assert_eq!(
            file(&assets, "manifests/20-node-bootstrap-rbac.yaml"),
            Some(("kind: List\n".into(), 0o600))
        );
        let unit = |name: &str| file(&assets, &format!("units/{name}")).unwrap().0;
        assert!(unit("kube-apiserver.service").contains("--enable-bootstrap-token-auth=true"));
        let cm = unit("kube-controller-manager.service");
        for flag in [
            "--cluster-signing-cert-file=/opt/tectonic/tls/ca.crt",
            "--cluster-signing-key-file=/opt/tectonic/tls/ca.key",
            "--cluster-signing-duration=600s",
            "--controllers=*,bootstrapsigner,tokencleaner",
        ] {
            assert!(cm.contains(flag), "{flag} not in {cm}");
        }
        assert!(
            !file(&plain, "units/kube-controller-manager.service")
                .unwrap()
                .0
                .contains("--cluster-signing")
        );
    }

    #[test]
    fn a_node_client_certificate_is_checked_for_its_name_group_and_ca() {
        let pki = crate::apiserver::Pki::generate();
        let other = crate::apiserver::Pki::generate();
        // As the kubelet writes it: the certificate, then its key.
        let kubelet_file = |i: &crate::apiserver::Issued| format!("{}{}", i.cert_pem, i.key_pem);
        let good = pki.issue_client("system:node:w1", Some("system:nodes"));
        let info = check_node_client_cert(&pki.ca_pem, &kubelet_file(&good), "w1").unwrap();
        assert_eq!(
            (info.cn, info.org),
            (
                vec!["system:node:w1".to_string()],
                vec!["system:nodes".to_string()]
            )
        );
        let err = |pem: String, node: &str, ca: &str| {
            format!("{:#}", check_node_client_cert(ca, &pem, node).unwrap_err())
        };
        assert!(err(kubelet_file(&good), "w2", &pki.ca_pem).contains("not CN="));
        let admin = pki.issue_client("system:node:w1", Some("system:masters"));
        assert!(err(kubelet_file(&admin), "w1", &pki.ca_pem).contains("not CN="));
        let foreign = other.issue_client("system:node:w1", Some("system:nodes"));
        // Another CA of the same name: its signature does not verify.
        let e = err(kubelet_file(&foreign), "w1", &pki.ca_pem);
        assert!(e.contains("does not chain to the CA"), "{e}");
        assert!(err(good.key_pem.clone(), "w1", &pki.ca_pem).contains("no certificate"));
    }

    #[test]
    fn generated_tokens_are_well_formed_and_keep_their_secret_out_of_debug() {
        let t = BootstrapToken::generate();
        let ok = |s: &str, n: usize| {
            s.len() == n
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        };
        assert!(ok(&t.id, 6) && ok(t.secret(), 16), "{}", t.token());
        assert_ne!(t, BootstrapToken::generate());
        assert!(!format!("{t:?}").contains(t.secret()));
        assert_eq!(t.user(), format!("system:bootstrap:{}", t.id));
    }
}
