//! A stand-in for the Kubernetes API server's `GET /version`: a local HTTPS
//! server (tokio + rustls, minimal HTTP/1.1) that, like kube-apiserver,
//! asks for a client certificate signed by the cluster CA and also accepts a
//! bearer token, and answers `/version` with the real JSON shape
//! (`{"major":"1","minor":"9","gitVersion":"v1.9.6+coreos.0",...}`).
//! Unauthenticated requests get the real 401 `Status` object.
//!
//! Scriptable per test: the first connections can fail ([`Fault`]: HTTP
//! status with optional `Retry-After`, or a reset before the TLS handshake),
//! the server certificate can come from another CA ([`ServerTls::OtherCa`]),
//! and the body can be replaced. Everything the server saw is logged
//! ([`ServerLog`]): connections, handshake failures, and each request with
//! whether it carried a client certificate or an `Authorization` header, so a
//! test can assert that no credentials reached a server that should not get
//! them.
//!
//! The server listens on 127.0.0.1 on a free port and stops when the
//! [`FakeApiServer`] is dropped (all its tasks are aborted).
//!
//! [`Pki`] makes the CA, a server certificate for 127.0.0.1/localhost and a
//! node client certificate, and renders kubeconfigs that use them.

use anyhow::{Context as _, Result, bail};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::path::Path;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A certificate with its key, DER and PEM.
#[derive(Clone)]
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
    cert_der: CertificateDer<'static>,
    key_der: Vec<u8>,
}

impl std::fmt::Debug for Issued {
    // The key stays out of test output.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued").finish_non_exhaustive()
    }
}

/// A cluster CA with a server and a client certificate; it issues more
/// ([`Pki::issue_client`]) for a real cluster's users.
pub struct Pki {
    pub ca_pem: String,
    ca_der: CertificateDer<'static>,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    /// Server certificate for `127.0.0.1`, `::1`, `localhost` (and the
    /// names given to [`Pki::generate_for`]).
    pub server: Issued,
    /// Node client certificate (`CN=system:node:test`, `O=system:nodes`).
    pub client: Issued,
}

/// How the kubeconfig authenticates.
#[derive(Debug, Clone)]
pub enum KubeAuth {
    /// The [`Pki`]'s client certificate (`client-certificate-data`).
    ClientCert,
    /// Another client certificate of the same CA ([`Pki::issue_client`]).
    Cert(Issued),
    /// A bearer token (`token`).
    Token(String),
    /// No user at all.
    None,
}

impl Pki {
    pub fn generate() -> Pki {
        Pki::generate_for(&[])
    }

    /// Like [`generate`](Self::generate), with the server certificate also
    /// valid for `extra_names` (host names or IP addresses; e.g. the
    /// address at which a VM reaches the host, [`crate::vm::HOST_ALIAS`]).
    pub fn generate_for(extra_names: &[&str]) -> Pki {
        let ca_key = rcgen::KeyPair::generate().expect("CA key");
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "kube-ca (test)");
        ca_params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let ca = ca_params.self_signed(&ca_key).expect("CA cert");
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let mut server_names: Vec<String> =
            vec!["127.0.0.1".into(), "::1".into(), "localhost".into()];
        server_names.extend(extra_names.iter().map(|n| n.to_string()));
        let server = issue(
            &issuer,
            server_names,
            "kube-apiserver",
            None,
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
        );
        let client = issue(
            &issuer,
            vec![],
            "system:node:test",
            Some("system:nodes"),
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        );
        Pki {
            ca_pem: ca.pem(),
            ca_der: ca.der().clone(),
            issuer,
            server,
            client,
        }
    }

    /// A client certificate of this CA for user `cn` in group `org`
    /// (Kubernetes takes the user from CN and the groups from O: a node is
    /// `system:node:<name>` in `system:nodes`, an administrator is in
    /// `system:masters`).
    pub fn issue_client(&self, cn: &str, org: Option<&str>) -> Issued {
        issue(
            &self.issuer,
            vec![],
            cn,
            org,
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        )
    }

    /// The CA's private key (PKCS#8 PEM): what a controller manager signs
    /// cluster certificates with (`--cluster-signing-key-file`).
    pub fn ca_key_pem(&self) -> String {
        self.issuer.key().serialize_pem()
    }

    /// A kubeconfig in Tectonic's shape (one unnamed context, no
    /// current-context) for `server`, with every file inlined as `-data`.
    pub fn kubeconfig(&self, server: &str, auth: &KubeAuth) -> String {
        let cert_user = |c: &Issued| {
            format!(
                "users:\n- name: kubelet\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n",
                b64(&c.cert_pem),
                b64(&c.key_pem)
            )
        };
        let user = match auth {
            KubeAuth::ClientCert => cert_user(&self.client),
            KubeAuth::Cert(c) => cert_user(c),
            KubeAuth::Token(t) => format!("users:\n- name: kubelet\n  user:\n    token: {t}\n"),
            KubeAuth::None => String::new(),
        };
        let ctx_user = if matches!(auth, KubeAuth::None) {
            ""
        } else {
            "    user: kubelet\n"
        };
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: {server}\n    certificate-authority-data: {}\n{user}contexts:\n- context:\n    cluster: local\n{ctx_user}",
            b64(&self.ca_pem)
        )
    }

    /// Writes [`Self::kubeconfig`] to `path`.
    pub fn write_kubeconfig(&self, path: &Path, server: &str, auth: &KubeAuth) -> Result<()> {
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d)?;
        }
        std::fs::write(path, self.kubeconfig(server, auth))
            .with_context(|| format!("writing {}", path.display()))
    }
}

/// A certificate signed by `issuer` with its own new key.
fn issue(
    issuer: &rcgen::Issuer<'static, rcgen::KeyPair>,
    sans: Vec<String>,
    cn: &str,
    org: Option<&str>,
    eku: rcgen::ExtendedKeyUsagePurpose,
) -> Issued {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut p = rcgen::CertificateParams::new(sans).expect("params");
    p.distinguished_name.push(rcgen::DnType::CommonName, cn);
    if let Some(o) = org {
        p.distinguished_name
            .push(rcgen::DnType::OrganizationName, o);
    }
    p.extended_key_usages = vec![eku];
    p.key_usages = vec![
        rcgen::KeyUsagePurpose::DigitalSignature,
        rcgen::KeyUsagePurpose::KeyEncipherment,
    ];
    let cert = p.signed_by(&key, issuer).expect("sign");
    Issued {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        cert_der: cert.der().clone(),
        key_der: key.serialize_der(),
    }
}

fn b64(s: &str) -> String {
    // Small standard base64 encoder (testkit has no base64 dependency).
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let b = s.as_bytes();
    let mut out = String::with_capacity(b.len().div_ceil(3) * 4);
    for c in b.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        out.push(T[(n >> 18) as usize & 63] as char);
        out.push(T[(n >> 12) as usize & 63] as char);
        out.push(if c.len() > 1 {
            T[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if c.len() > 2 {
            T[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

/// What a scripted connection does instead of answering normally.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Answer the request (after authentication) with this status.
    Status(u16),
    /// Answer with this status and `Retry-After: <secs>`.
    StatusRetryAfter(u16, u64),
    /// Close the TCP connection before the TLS handshake.
    Reset,
}

/// Which certificate the server presents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ServerTls {
    /// The [`Pki`]'s server certificate (chains to the kubeconfig's CA).
    #[default]
    Trusted,
    /// A certificate for the same names from a different, unrelated CA.
    OtherCa,
}

/// How the stand-in behaves.
#[derive(Debug, Clone)]
pub struct ApiServerOptions {
    /// `gitVersion` served (major/minor are derived from it).
    pub git_version: String,
    /// A bearer token that is accepted besides the client certificate.
    pub token: Option<String>,
    /// Faults for the first connections, in order (one per connection).
    pub faults: Vec<Fault>,
    pub tls: ServerTls,
    /// Replace the `/version` body (e.g. with something that is not JSON).
    pub body: Option<String>,
}

impl Default for ApiServerOptions {
    fn default() -> Self {
        ApiServerOptions {
            git_version: "v1.9.6+coreos.0".into(),
            token: None,
            faults: Vec::new(),
            tls: ServerTls::Trusted,
            body: None,
        }
    }
}

/// One HTTP request the server read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRequest {
    pub method: String,
    pub path: String,
    /// The client presented a certificate that verified against the CA.
    pub client_cert: bool,
    /// The `Authorization` header, verbatim.
    pub authorization: Option<String>,
    /// The status the server answered with.
    pub status: u16,
}

impl SeenRequest {
    pub fn had_credentials(&self) -> bool {
        self.client_cert || self.authorization.is_some()
    }
}

/// Everything the server saw.
#[derive(Debug, Clone, Default)]
pub struct ServerLog {
    /// TCP connections accepted.
    pub connections: usize,
    /// TLS handshakes that failed, with the server-side error.
    pub handshake_failures: Vec<String>,
    /// Connections where the client presented a certificate in the
    /// handshake (whether or not a request followed).
    pub client_certs_presented: usize,
    pub requests: Vec<SeenRequest>,
}

/// The running stand-in; stops when dropped.
pub struct FakeApiServer {
    addr: std::net::SocketAddr,
    log: Arc<Mutex<ServerLog>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeApiServer {
    /// Starts serving on 127.0.0.1 (needs a tokio runtime).
    pub async fn start(pki: &Pki, opts: ApiServerOptions) -> Result<FakeApiServer> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add(pki.ca_der.clone())?;
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .allow_unauthenticated()
        .build()?;
        let other;
        let server = match opts.tls {
            ServerTls::Trusted => &pki.server,
            ServerTls::OtherCa => {
                other = Pki::generate();
                &other.server
            }
        };
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server.key_der.clone()));
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(verifier)
            .with_single_cert(vec![server.cert_der.clone()], key)?;
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let log = Arc::new(Mutex::new(ServerLog::default()));
        let opts = Arc::new(opts);
        let task = tokio::spawn(accept_loop(listener, acceptor, opts, log.clone()));
        Ok(FakeApiServer { addr, log, task })
    }

    /// `https://127.0.0.1:<port>`
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    pub fn log(&self) -> ServerLog {
        self.log.lock().unwrap().clone()
    }
}

/// A loopback URL where nothing listens (the port was just released).
pub fn unreachable_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    drop(l);
    format!("https://127.0.0.1:{port}")
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    opts: Arc<ApiServerOptions>,
    log: Arc<Mutex<ServerLog>>,
) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let n = {
            let mut l = log.lock().unwrap();
            l.connections += 1;
            l.connections - 1
        };
        let fault = opts.faults.get(n).cloned();
        if fault == Some(Fault::Reset) {
            // Linger 0: the client sees a reset, not a clean close.
            let _ = tcp.set_zero_linger();
            drop(tcp);
            continue;
        }
        let (acceptor, opts, log) = (acceptor.clone(), opts.clone(), log.clone());
        conns.spawn(async move {
            if let Err(e) = serve(tcp, acceptor, &opts, fault, &log).await {
                eprintln!("fake apiserver: connection: {e:#}");
            }
        });
        // Reap finished connections.
        while conns.try_join_next().is_some() {}
    }
}

async fn serve(
    tcp: tokio::net::TcpStream,
    acceptor: tokio_rustls::TlsAcceptor,
    opts: &ApiServerOptions,
    fault: Option<Fault>,
    log: &Mutex<ServerLog>,
) -> Result<()> {
    let mut tls = match acceptor.accept(tcp).await {
        Ok(s) => s,
        Err(e) => {
            log.lock().unwrap().handshake_failures.push(e.to_string());
            return Ok(());
        }
    };
    let client_cert = tls
        .get_ref()
        .1
        .peer_certificates()
        .is_some_and(|c| !c.is_empty());
    if client_cert {
        log.lock().unwrap().client_certs_presented += 1;
    }
    // Read the request head.
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = tls.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
        if buf.len() > 64 * 1024 {
            bail!("request head too large");
        }
    }
    let head = String::from_utf8_lossy(&buf).to_string();
    let mut lines = head.split("\r\n");
    let mut req_line = lines.next().unwrap_or("").split(' ');
    let method = req_line.next().unwrap_or("").to_string();
    let path = req_line.next().unwrap_or("").to_string();
    let mut authorization = None;
    for l in lines {
        if let Some((k, v)) = l.split_once(':')
            && k.trim().eq_ignore_ascii_case("authorization")
        {
            authorization = Some(v.trim().to_string());
        }
    }
    let token_ok = match (&opts.token, &authorization) {
        (Some(t), Some(a)) => a == &format!("Bearer {t}"),
        _ => false,
    };
    let (status, extra, body) = if !(client_cert || token_ok) {
        (
            401,
            String::new(),
            status_json(401, "Unauthorized", "Unauthorized"),
        )
    } else if let Some(Fault::Status(code)) = fault {
        (
            code,
            String::new(),
            status_json(code, "InternalError", "scripted failure"),
        )
    } else if let Some(Fault::StatusRetryAfter(code, secs)) = fault {
        (
            code,
            format!("Retry-After: {secs}\r\n"),
            status_json(code, "ServiceUnavailable", "scripted failure"),
        )
    } else if method != "GET" || path != "/version" {
        (
            404,
            String::new(),
            status_json(
                404,
                "NotFound",
                "the server could not find the requested resource",
            ),
        )
    } else {
        (
            200,
            String::new(),
            opts.body
                .clone()
                .unwrap_or_else(|| version_json(&opts.git_version)),
        )
    };
    log.lock().unwrap().requests.push(SeenRequest {
        method,
        path,
        client_cert,
        authorization,
        status,
    });
    let reason = match status {
        200 => "OK",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    };
    let resp = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n{body}",
        body.len()
    );
    tls.write_all(resp.as_bytes()).await?;
    tls.shutdown().await.ok();
    Ok(())
}

/// `/version` as kube-apiserver renders it.
pub fn version_json(git_version: &str) -> String {
    let v = git_version.trim_start_matches('v');
    let mut parts = v.split(['.', '-', '+']);
    let major = parts.next().unwrap_or("");
    let minor = parts.next().unwrap_or("");
    serde_json::json!({
        "major": major,
        "minor": minor,
        "gitVersion": git_version,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2018-03-21T15:21:50Z",
        "goVersion": "go1.9.3",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
    .to_string()
}

fn status_json(code: u16, reason: &str, message: &str) -> String {
    serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_known_vectors() {
        assert_eq!(b64(""), "");
        assert_eq!(b64("f"), "Zg==");
        assert_eq!(b64("fo"), "Zm8=");
        assert_eq!(b64("foo"), "Zm9v");
        assert_eq!(b64("foobar"), "Zm9vYmFy");
    }

    #[test]
    fn version_json_has_the_real_fields() {
        let v: serde_json::Value = serde_json::from_str(&version_json("v1.10.2+coreos.0")).unwrap();
        assert_eq!(v["major"], "1");
        assert_eq!(v["minor"], "10");
        assert_eq!(v["gitVersion"], "v1.10.2+coreos.0");
    }
}
