//! The node's kubeconfig: which API server to ask, which CA to trust, which
//! credentials to present.
//!
//! Parsed the way client-go resolves it: `current-context` names a context,
//! which names a cluster and a user. Tectonic's kubelet kubeconfig has a
//! single unnamed context and no `current-context`; client-go resolves that
//! to the context named "" and so do we (and a lone context is used when
//! `current-context` is absent). Relative file paths are relative to the
//! kubeconfig's directory, as in client-go.
//!
//! Stricter than client-go, on purpose: the API server must be `https`, a CA
//! (`certificate-authority` or `certificate-authority-data`) is required and
//! is the only trust root, and `insecure-skip-tls-verify: true` is refused.
//! Exec plugins and auth providers are not supported. Every error is
//! [`ErrorClass::BadInput`] and names the file and the field
//! (`users[kubelet].user.client-key-data`).

mod pem;
mod raw;
mod user;

pub use user::bootstrap_token_id;

use crate::error::{Error, Result};
use pem::{check_certs, decode_b64};
use raw::{NamedContext, RawCluster, RawKubeconfig};
use std::fmt;
use std::path::{Path, PathBuf};
use user::{unreadable_file, user_credentials};

/// Largest kubeconfig, CA, certificate, key or token file we read.
const MAX_FILE: u64 = 1 << 20;

/// A resolved kubeconfig: the current context's cluster and user.
#[derive(Clone)]
pub struct Kubeconfig {
    /// The file it came from.
    pub path: PathBuf,
    /// Name of the context in use ("" for Tectonic's unnamed one).
    pub context: String,
    pub cluster_name: String,
    pub user_name: String,
    /// The API server, always `https`.
    pub server: url::Url,
    /// PEM bundle of the trusted CA(s): the only roots the client trusts.
    pub ca_pem: Vec<u8>,
    /// Where the CA came from (a path, or `certificate-authority-data`).
    pub ca_source: String,
    /// `proxy-url` of the cluster, if any.
    pub proxy_url: Option<url::Url>,
    pub credentials: Credentials,
}

/// What the client presents to the API server. Never printed.
#[derive(Clone, Default)]
pub struct Credentials {
    /// Client certificate chain and its private key, both PEM.
    pub client_cert: Option<ClientCert>,
    /// Bearer token (`token`, or the contents of `tokenFile`).
    pub token: Option<String>,
    /// HTTP basic auth (`username` / `password`).
    pub basic: Option<(String, String)>,
}

#[derive(Clone)]
pub struct ClientCert {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
}

impl Credentials {
    /// The id of the bearer token when it has a bootstrap token's shape
    /// (what the API server authenticates as `system:bootstrap:<id>`).
    pub fn bootstrap_token_id(&self) -> Option<&str> {
        bootstrap_token_id(self.token.as_deref()?).ok()
    }

    /// A short description for logs: which kinds are present, never values.
    pub fn kinds(&self) -> String {
        let mut k = Vec::new();
        if self.client_cert.is_some() {
            k.push("client-certificate");
        }
        if self.token.is_some() {
            k.push("token");
        }
        if self.basic.is_some() {
            k.push("basic-auth");
        }
        if k.is_empty() {
            "none".into()
        } else {
            k.join("+")
        }
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Credentials({})", self.kinds())
    }
}

impl fmt::Debug for Kubeconfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kubeconfig")
            .field("path", &self.path)
            .field("context", &self.context)
            .field("cluster_name", &self.cluster_name)
            .field("user_name", &self.user_name)
            .field("server", &self.server.as_str())
            .field("ca_source", &self.ca_source)
            .field("proxy_url", &self.proxy_url.as_ref().map(url::Url::as_str))
            .field("credentials", &self.credentials)
            .finish()
    }
}

/// A URL as written, for an error message, with any `user:password@`
/// replaced by `***@` (a URL that does not parse may still carry them).
fn without_userinfo(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}***@{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}

/// Whether a value of the file could be data (a key, a certificate, a
/// token) rather than the name, path or URL its field holds: it has a line
/// break or other space (PEM text, base64 broken over lines, two YAML
/// values run together by a damaged file), is longer than any name (255),
/// holds PEM armour or its base64 (`-----`, `LS0tLS`), or has a run of 16
/// or more characters mixing upper case, lower case and digits (base64, a
/// token; names and paths are words). Such a value is never quoted in an
/// error, which reaches the journal.
fn could_be_data(v: &str) -> bool {
    let v = v.trim();
    let random_run = |run: &str| {
        run.len() >= 16
            && run.bytes().any(|b| b.is_ascii_uppercase())
            && run.bytes().any(|b| b.is_ascii_lowercase())
            && run.bytes().any(|b| b.is_ascii_digit())
    };
    v.chars().any(|c| c.is_whitespace() || c.is_control())
        || v.len() > 255
        || v.contains("-----")
        || v.contains("LS0tLS")
        || v.split(|c: char| !c.is_ascii_alphanumeric() && c != '+')
            .any(random_run)
}

/// A value of the file as an error shows it: quoted, or, when it
/// [`could_be_data`], only its length.
fn quoted(v: &str) -> String {
    if could_be_data(v) {
        format!(
            "the {}-character value (not shown: it looks like data, not a name, path or URL)",
            v.chars().count()
        )
    } else {
        format!("{v:?}")
    }
}

/// A name of the file (a context's, cluster's or user's) inside a field
/// path: as written, or, when it [`could_be_data`], its length.
fn label(name: &str) -> String {
    if could_be_data(name) {
        format!("<{} characters>", name.chars().count())
    } else {
        name.to_string()
    }
}

/// Reads and resolves the kubeconfig at `path`.
pub fn load(path: &Path) -> Result<Kubeconfig> {
    let text = read_limited(path).map_err(|e| {
        Error::bad_input(format!("failed to read kubeconfig {}: {e}", path.display()))
    })?;
    let text = String::from_utf8(text)
        .map_err(|_| Error::bad_input(format!("kubeconfig {}: not UTF-8 text", path.display())))?;
    parse(&text, path)
}

/// Resolves kubeconfig text; `path` names the file in messages and anchors
/// relative paths.
pub fn parse(text: &str, path: &Path) -> Result<Kubeconfig> {
    let bad = |field: &str, msg: &str| {
        Error::bad_input(format!("kubeconfig {}: {field}: {msg}", path.display()))
    };
    let raw = read_raw(text, path)?;
    let base = path.parent().unwrap_or(Path::new("/"));
    let ctx = select_context(&raw, &bad)?;
    let cf = format!("clusters[{}].cluster", label(&ctx.cluster));
    let cluster = raw
        .clusters
        .iter()
        .flatten()
        .find(|c| c.name.as_deref().unwrap_or("") == ctx.cluster)
        .ok_or_else(|| {
            bad(
                &format!("{}.cluster", ctx.field),
                &format!(
                    "names cluster {}, which is not in `clusters`",
                    quoted(&ctx.cluster)
                ),
            )
        })?
        .cluster
        .as_ref()
        .ok_or_else(|| bad(&cf, "missing"))?;
    let server = server_url(cluster, &cf, &bad)?;
    let (ca_pem, ca_source) = cluster_ca(cluster, &cf, base, &bad)?;
    let proxy_url = match cluster.proxy_url.as_deref() {
        None | Some("") => None,
        Some(p) => Some(url::Url::parse(p).map_err(|e| {
            bad(
                &format!("{cf}.proxy-url"),
                &format!("{} is not a URL: {e}", quoted(&without_userinfo(p))),
            )
        })?),
    };
    let credentials = user_credentials(&raw, &ctx, base, &bad)?;
    Ok(Kubeconfig {
        path: path.to_path_buf(),
        context: ctx.name,
        cluster_name: ctx.cluster,
        user_name: ctx.user,
        server,
        ca_pem,
        ca_source,
        proxy_url,
        credentials,
    })
}

fn read_raw(text: &str, path: &Path) -> Result<RawKubeconfig> {
    if text.trim().is_empty() {
        return Err(Error::bad_input(format!(
            "kubeconfig {}: the file is empty",
            path.display()
        )));
    }
    // Without the source snippet: the file holds keys and tokens.
    serde_saphyr::from_str(text).map_err(|e: serde_saphyr::Error| {
        Error::bad_input(format!(
            "kubeconfig {}: not a valid kubeconfig: {}",
            path.display(),
            e.without_snippet()
        ))
    })
}

/// The context in use, and the cluster and user it names.
struct SelectedContext {
    name: String,
    cluster: String,
    user: String,
    /// `contexts[<name>].context`, for messages.
    field: String,
}

/// Context resolution, as client-go does it.
fn select_context(
    raw: &RawKubeconfig,
    bad: &dyn Fn(&str, &str) -> Error,
) -> Result<SelectedContext> {
    let contexts = raw.contexts.as_deref().unwrap_or_default();
    let current = raw.current_context.as_deref().unwrap_or_default();
    let ctx_name = |c: &NamedContext| c.name.clone().unwrap_or_default();
    let ctx = match contexts.iter().find(|c| ctx_name(c) == current) {
        Some(c) => c,
        None if current.is_empty() && contexts.len() == 1 => &contexts[0],
        None if current.is_empty() => {
            return Err(bad(
                "current-context",
                &format!(
                    "not set, and there are {} contexts to choose from",
                    contexts.len()
                ),
            ));
        }
        None => {
            return Err(bad(
                "current-context",
                &format!(
                    "names context {}, which is not in `contexts`",
                    quoted(current)
                ),
            ));
        }
    };
    let name = ctx_name(ctx);
    let field = format!("contexts[{}].context", label(&name));
    let rc = ctx.context.as_ref().ok_or_else(|| bad(&field, "missing"))?;
    let cluster = rc
        .cluster
        .clone()
        .ok_or_else(|| bad(&format!("{field}.cluster"), "missing"))?;
    Ok(SelectedContext {
        name,
        cluster,
        user: rc.user.clone().unwrap_or_default(),
        field,
    })
}

/// The API server: an https URL with a host and nothing else, never
/// without TLS verification.
fn server_url(
    cluster: &RawCluster,
    cf: &str,
    bad: &dyn Fn(&str, &str) -> Error,
) -> Result<url::Url> {
    let field = format!("{cf}.server");
    let server_s = cluster
        .server
        .as_deref()
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| bad(&field, "missing"))?;
    let server = url::Url::parse(server_s.trim()).map_err(|e| {
        bad(
            &field,
            &format!("{} is not a URL: {e}", quoted(&without_userinfo(server_s))),
        )
    })?;
    if server.scheme() != "https" {
        return Err(bad(
            &field,
            &format!(
                "{} is not an https URL; node-bootstrap only talks to the API server over TLS",
                quoted(&without_userinfo(server_s))
            ),
        ));
    }
    if server.host_str().is_none_or(str::is_empty) {
        return Err(bad(&field, "has no host"));
    }
    if server.query().is_some() || server.fragment().is_some() || !server.username().is_empty() {
        return Err(bad(&field, "must not carry a query, fragment or user info"));
    }
    if cluster.insecure_skip_tls_verify == Some(true) {
        return Err(bad(
            &format!("{cf}.insecure-skip-tls-verify"),
            "is true; node-bootstrap refuses to send credentials to an API server it cannot verify \
             (set certificate-authority or certificate-authority-data and remove this field)",
        ));
    }
    if let Some(n) = cluster.tls_server_name.as_deref()
        && Some(n) != server.host_str()
    {
        return Err(bad(
            &format!("{cf}.tls-server-name"),
            "is not supported (it must be absent or equal to the server's host)",
        ));
    }
    Ok(server)
}

/// The cluster's CA (inline or from a file) and where it came from: the
/// only trust the agent gives the API server.
fn cluster_ca(
    cluster: &RawCluster,
    cf: &str,
    base: &Path,
    bad: &dyn Fn(&str, &str) -> Error,
) -> Result<(Vec<u8>, String)> {
    let (ca_pem, ca_source, field) = match (
        &cluster.certificate_authority_data,
        &cluster.certificate_authority,
    ) {
        (Some(d), _) if !d.trim().is_empty() => {
            let field = format!("{cf}.certificate-authority-data");
            let pem = decode_b64(d).map_err(|m| bad(&field, &m))?;
            (pem, "certificate-authority-data".to_string(), field)
        }
        (_, Some(p)) if !p.trim().is_empty() => {
            let field = format!("{cf}.certificate-authority");
            let raw = p;
            let p = resolve(base, raw);
            let pem = read_limited(&p).map_err(|e| {
                bad(
                    &field,
                    &unreadable_file(raw, &p, &e, "certificate-authority-data", false),
                )
            })?;
            (pem, p.display().to_string(), field)
        }
        _ => {
            return Err(bad(
                cf,
                "has neither certificate-authority nor certificate-authority-data; \
                 node-bootstrap trusts only the kubeconfig's CA for the API server",
            ));
        }
    };
    check_certs(&ca_pem).map_err(|m| bad(&field, &m))?;
    Ok((ca_pem, ca_source))
}

fn resolve(base: &Path, p: &str) -> PathBuf {
    let p = Path::new(p.trim());
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

fn read_limited(p: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let f = std::fs::File::open(p)?;
    let mut buf = Vec::new();
    f.take(MAX_FILE + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > MAX_FILE {
        return Err(std::io::Error::other(format!(
            "larger than {MAX_FILE} bytes"
        )));
    }
    Ok(buf)
}

impl Kubeconfig {
    /// `<server>/version`, keeping a path prefix of the server URL.
    pub fn version_url(&self) -> url::Url {
        let mut u = self.server.clone();
        let path = format!("{}/version", u.path().trim_end_matches('/'));
        u.set_path(&path);
        u
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorClass;
    use base64::Engine as _;
    use std::fs;

    #[test]
    fn urls_in_errors_never_carry_credentials() {
        assert_eq!(
            without_userinfo("https://admin:s3cret@10.0.0.1:443/x"),
            "https://***@10.0.0.1:443/x"
        );
        assert_eq!(without_userinfo("admin:s3cret@host"), "***@host");
        assert_eq!(
            without_userinfo("https://10.0.0.1/a@b"),
            "https://10.0.0.1/a@b"
        );
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("kubeconfig");
        for server in ["http://admin:s3cret@10.0.0.1", "https://admin:s3cret@[::1"] {
            fs::write(
                &p,
                format!(
                    "apiVersion: v1\nclusters:\n- name: c\n  cluster:\n    server: {server}\n\
                     contexts:\n- name: x\n  context:\n    cluster: c\ncurrent-context: x\n"
                ),
            )
            .unwrap();
            let err = load(&p).expect_err("refused").to_string();
            assert!(!err.contains("s3cret"), "{err}");
            assert!(err.contains("***@"), "{err}");
        }
    }

    struct Pki {
        ca: String,
        cert: String,
        key: String,
    }

    fn pki() -> Pki {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(vec![]).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec!["kubelet".to_string()]).unwrap();
        let cert = params.signed_by(&key, &issuer).unwrap();
        Pki {
            ca: ca.pem(),
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    fn tectonic(p: &Pki, server: &str) -> String {
        // The shape tectonic-installer rendered: unnamed context, no
        // current-context.
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: {server}\n    certificate-authority-data: {}\nusers:\n- name: kubelet\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\ncontexts:\n- context:\n    cluster: local\n    user: kubelet\n",
            b64(&p.ca),
            b64(&p.cert),
            b64(&p.key)
        )
    }

    fn parse_at(text: &str) -> Result<Kubeconfig> {
        parse(text, Path::new("/etc/kubernetes/kubeconfig"))
    }

    fn err(text: &str) -> String {
        let e = parse_at(text).unwrap_err();
        assert_eq!(e.class(), ErrorClass::BadInput, "{e}");
        assert_eq!(e.exit_code(), crate::error::exit::BAD_INPUT);
        let m = e.to_string();
        assert!(
            m.starts_with("kubeconfig /etc/kubernetes/kubeconfig: "),
            "{m}"
        );
        m
    }

    #[test]
    fn tectonic_kubelet_kubeconfig_resolves() {
        let p = pki();
        let k = parse_at(&tectonic(&p, "https://api.example.com:443")).unwrap();
        assert_eq!(k.context, "");
        assert_eq!(k.cluster_name, "local");
        assert_eq!(k.user_name, "kubelet");
        assert_eq!(k.server.as_str(), "https://api.example.com/");
        assert_eq!(k.version_url().as_str(), "https://api.example.com/version");
        assert_eq!(k.ca_pem, p.ca.as_bytes());
        let c = k.credentials.client_cert.as_ref().unwrap();
        assert_eq!(c.cert_pem, p.cert.as_bytes());
        assert_eq!(c.key_pem, p.key.as_bytes());
        assert!(k.credentials.token.is_none());
        // Debug output never shows key material.
        let dbg = format!("{k:?}");
        assert!(
            !dbg.contains("PRIVATE KEY") && !dbg.contains(&b64(&p.key)[..20]),
            "{dbg}"
        );
        assert!(dbg.contains("client-certificate"), "{dbg}");
    }

    #[test]
    fn current_context_picks_among_several_and_paths_are_relative_to_the_file() {
        let p = pki();
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("pki")).unwrap();
        fs::write(dir.path().join("pki/ca.pem"), &p.ca).unwrap();
        fs::write(dir.path().join("token"), "abc.def\n").unwrap();
        let text = "apiVersion: v1\nkind: Config\ncurrent-context: b\nclusters:\n- name: c1\n  cluster:\n    server: https://10.0.0.1:6443/prefix/\n    certificate-authority: pki/ca.pem\ncontexts:\n- name: a\n  context: {cluster: nope, user: nope}\n- name: b\n  context: {cluster: c1, user: u1}\nusers:\n- name: u1\n  user:\n    tokenFile: token\n";
        let kpath = dir.path().join("kubeconfig");
        fs::write(&kpath, text).unwrap();
        let k = load(&kpath).unwrap();
        assert_eq!((k.context.as_str(), k.cluster_name.as_str()), ("b", "c1"));
        assert_eq!(k.credentials.token.as_deref(), Some("abc.def"));
        assert_eq!(
            k.ca_source,
            dir.path().join("pki/ca.pem").display().to_string()
        );
        assert_eq!(
            k.version_url().as_str(),
            "https://10.0.0.1:6443/prefix/version"
        );
        assert_eq!(k.credentials.kinds(), "token");
    }

    #[test]
    fn insecure_skip_tls_verify_is_refused() {
        let p = pki();
        let text = tectonic(&p, "https://a").replace(
            "    certificate-authority-data",
            "    insecure-skip-tls-verify: true\n    certificate-authority-data",
        );
        let m = err(&text);
        assert!(
            m.contains("clusters[local].cluster.insecure-skip-tls-verify: is true"),
            "{m}"
        );
    }

    #[test]
    fn http_server_and_missing_ca_are_refused() {
        let p = pki();
        let m = err(&tectonic(&p, "http://api:8080"));
        assert!(m.contains("clusters[local].cluster.server"), "{m}");
        assert!(m.contains("not an https URL"), "{m}");
        let no_ca = "clusters:\n- name: c\n  cluster:\n    server: https://a\ncontexts:\n- context: {cluster: c}\n";
        let m = err(no_ca);
        assert!(
            m.contains("has neither certificate-authority nor certificate-authority-data"),
            "{m}"
        );
    }

    #[test]
    fn bad_data_fields_are_named() {
        let p = pki();
        let good = tectonic(&p, "https://a");
        let m = err(&good.replace(&b64(&p.key), "'!!!notbase64'"));
        assert!(
            m.contains("users[kubelet].user.client-key-data: not valid base64"),
            "{m}"
        );
        let m = err(&good.replace(&b64(&p.key), &b64(&p.cert)));
        assert!(
            m.contains("users[kubelet].user.client-key-data: contains a PEM block that is not a private key"),
            "{m}"
        );
        let m = err(&good.replace(&b64(&p.ca), &b64("hello")));
        assert!(
            m.contains("clusters[local].cluster.certificate-authority-data: contains no PEM CERTIFICATE block"),
            "{m}"
        );
        let m = err(&good.replace(&format!("    client-key-data: {}\n", b64(&p.key)), ""));
        assert!(
            m.contains("users[kubelet].user: has a client certificate but no client-key"),
            "{m}"
        );
    }

    #[test]
    fn secret_data_in_a_file_field_is_not_quoted() {
        let p = pki();
        let good = tectonic(&p, "https://a");
        let key = b64(&p.key);
        // The key pasted into client-key (the file field).
        let m = err(&good.replace("client-key-data:", "client-key:"));
        assert!(
            m.contains("users[kubelet].user.client-key: cannot read the file it names: its ")
                && m.contains("-character value looks like data, not a file path (not shown: it may be secret data, which goes in client-key-data)"),
            "{m}"
        );
        assert!(!m.contains(&key[..40]), "the key is quoted: {m}");
        // A token in tokenFile.
        let token = "abcdef.0123456789abcdef";
        let with_token_file = good.replace(
            &format!(
                "    client-certificate-data: {}\n    client-key-data: {key}\n",
                b64(&p.cert)
            ),
            &format!("    tokenFile: {token}\n"),
        );
        assert_ne!(with_token_file, good);
        let m = err(&with_token_file);
        assert!(
            m.contains("users[kubelet].user.tokenFile: cannot read the file it names, relative to the kubeconfig's directory: No such file or directory (os error 2) (the name is not shown: it may be the secret itself, which goes in token)"),
            "{m}"
        );
        assert!(!m.contains("0123456789abcdef"), "the token is quoted: {m}");
        // A path is shown.
        let m = err(&good.replace(
            &format!("client-key-data: {key}"),
            "client-key: /etc/kubernetes/missing.key",
        ));
        assert!(
            m.contains("users[kubelet].user.client-key: cannot read /etc/kubernetes/missing.key: No such file or directory"),
            "{m}"
        );
    }

    /// 2026-11-26, found by the kubeconfig property test: a damaged file
    /// ran the server line into the CA data (`server: https://10.3.0.1:4
    /// certificate-author LS0t…`), and "is not a URL" quoted it all. No
    /// field's value that looks like data is quoted, whichever field holds
    /// it (a URL, a name, a file path with slashes in its base64).
    #[test]
    fn data_in_any_field_is_not_quoted() {
        let p = pki();
        let good = tectonic(&p, "https://10.3.0.1:443");
        let (ca, key) = (b64(&p.ca), b64(&p.key));
        let hidden = |m: &str, data: &str| {
            for w in data.as_bytes().windows(12).step_by(6) {
                let w = std::str::from_utf8(w).unwrap();
                assert!(!m.contains(w), "{w:?} of the data is quoted: {m}");
            }
        };
        let run_together = good.replace(
            ":443\n    certificate-authority-data: ",
            ":4  certificate-author ",
        );
        assert_ne!(run_together, good);
        let m = err(&run_together);
        assert!(
            m.contains("clusters[local].cluster.server: the ")
                && m.contains("-character value (not shown: it looks like data, not a name, path or URL) is not a URL"),
            "{m}"
        );
        hidden(&m, &ca);
        let m = err(&good.replace(
            "    server: https://10.3.0.1:443\n",
            &format!(
                "    server: https://10.3.0.1:443\n    proxy-url: {}\n",
                &key[..60]
            ),
        ));
        assert!(
            m.contains("cluster.proxy-url: the 60-character value"),
            "{m}"
        );
        hidden(&m, &key[..60]);
        // Base64 with slashes, each piece shorter than a file name may be.
        let pieces = format!("{}/{}/{}", &key[..40], &key[40..80], &key[80..120]);
        let m = err(&good.replace(
            &format!("client-key-data: {key}"),
            &format!("client-key: {pieces}"),
        ));
        assert!(
            m.contains("users[kubelet].user.client-key: cannot read the file it names: its 122-character value looks like data"),
            "{m}"
        );
        hidden(&m, &pieces);
        // A name: the user a context names.
        let m = err(&good.replace("user: kubelet\n", &format!("user: {}\n", &key[..40])));
        assert!(
            m.contains("contexts[].context.user: names user the 40-character value"),
            "{m}"
        );
        hidden(&m, &key[..40]);
        // Names, paths and URLs are still shown.
        let m = err(&good.replace(":443", ":99999"));
        assert!(m.contains("\"https://10.3.0.1:99999\" is not a URL"), "{m}");
    }

    #[test]
    fn context_resolution_errors_are_named() {
        let p = pki();
        let good = tectonic(&p, "https://a");
        let m = err(&format!("{good}current-context: other\n"));
        assert!(
            m.contains("current-context: names context \"other\", which is not in `contexts`"),
            "{m}"
        );
        let m = err(&good.replace("cluster: local\n    user", "cluster: remote\n    user"));
        assert!(
            m.contains("contexts[].context.cluster: names cluster \"remote\""),
            "{m}"
        );
        let m = err(&good.replace("user: kubelet\n", "user: admin\n"));
        assert!(
            m.contains("contexts[].context.user: names user \"admin\""),
            "{m}"
        );
        let two = format!("{good}- name: x\n  context: {{cluster: local}}\n");
        // Now there is an unnamed context "" and "x"; current-context "" still
        // resolves to the unnamed one.
        assert_eq!(parse_at(&two).unwrap().user_name, "kubelet");
        let m = err(
            "contexts:\n- name: a\n  context: {cluster: c}\n- name: b\n  context: {cluster: c}\n",
        );
        assert!(
            m.contains("current-context: not set, and there are 2 contexts"),
            "{m}"
        );
    }

    #[test]
    fn unsupported_auth_and_syntax_errors() {
        let p = pki();
        let good = tectonic(&p, "https://a");
        let m = err(&good.replace(
            "  user:\n    client-certificate-data",
            "  user:\n    exec:\n      command: aws\n    client-certificate-data",
        ));
        assert!(
            m.contains("users[kubelet].user.exec: exec credential plugins are not supported"),
            "{m}"
        );
        let m = err("clusters: [unclosed\n");
        assert!(m.contains("not a valid kubeconfig"), "{m}");
        // Syntax errors never quote the file (it holds keys).
        let m = err(&good.replace("contexts:", "contexts: : :"));
        assert!(m.contains("not a valid kubeconfig"), "{m}");
        assert!(!m.contains(&b64(&p.key)[..16]), "{m}");
        let m = err("   \n");
        assert!(m.contains("the file is empty"), "{m}");
        let m = err("clusters: 5\n");
        assert!(m.contains("not a valid kubeconfig"), "{m}");
    }

    #[test]
    fn missing_file_is_bad_input_naming_it() {
        let e = load(Path::new("/nonexistent/kubeconfig")).unwrap_err();
        assert_eq!(e.class(), ErrorClass::BadInput);
        assert!(
            e.to_string()
                .starts_with("failed to read kubeconfig /nonexistent/kubeconfig:"),
            "{e}"
        );
    }
}
