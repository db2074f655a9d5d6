//! `GET /version` against the API server named by the kubeconfig, and
//! single `GET`s of API objects ([`ApiClient::get_json`]: the join's view
//! of this node).
//!
//! The client trusts only the kubeconfig's CA (no system roots), presents
//! the kubeconfig's client certificate, token or basic auth, follows no
//! redirects and goes through no proxy except the kubeconfig's `proxy-url`.
//! Credentials never reach a server whose certificate does not chain to that
//! CA: the TLS handshake fails on the server's certificate before the client
//! sends its own certificate or any HTTP request (so no header).
//!
//! Failure classes of one request:
//! - cannot connect, timeout, reset, 5xx, 429, 408, a body that is not
//!   version JSON: try again (after the backoff; `Retry-After` honoured),
//!   finally [`ErrorClass::Retryable`];
//! - the server's certificate does not verify against the kubeconfig's CA:
//!   [`ErrorClass::Verification`] at once (retrying in-process cannot help,
//!   systemd restarts the unit);
//! - 401, or the server rejects the client certificate:
//!   [`ErrorClass::BadInput`] (the kubeconfig's credentials are wrong; a
//!   bootstrap token is named by its id, never its secret: expired or
//!   deleted; [`ApiClient::version_once_the_token_is_known`] first asks
//!   again for a bounded grace, as a new cluster may not know it yet);
//! - 403: the credentials are good but this user may not read `/version`.
//!   Every authenticated user may (the default RBAC binding
//!   `system:public-info-viewer`), except on an API server that has just
//!   started and not yet created its default policy: a real kube-apiserver
//!   answers 403 for its first moments. Tried again like a 5xx, finally
//!   [`ErrorClass::Retryable`], with the server's reason in the message;
//! - other 3xx/4xx: [`ErrorClass::BadInput`] (the server URL does not point at
//!   a Kubernetes API server);
//! - a `gitVersion` that is not a Kubernetes version: [`ErrorClass::Refused`].

use super::kubeconfig::Kubeconfig;
use super::version::KubeVersion;
use crate::error::{Error, ErrorClass, Result};
use crate::metrics::Remote;
use crate::retry::{Attempt, RetryPolicy, retry};
use serde::Deserialize;
use std::cell::Cell;
use std::time::Duration;

/// Largest `/version` body we read.
const MAX_BODY: usize = 64 * 1024;
/// Largest object or list we read (a Node with its image list, the
/// kubelet client certificate requests of a cluster).
const MAX_OBJECT_BODY: usize = 8 << 20;

/// The parts of the API server's `/version` answer that matter here.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ServerVersion {
    #[serde(rename = "gitVersion")]
    pub git_version: String,
    #[serde(default)]
    pub major: String,
    #[serde(default)]
    pub minor: String,
}

/// An HTTPS client for one API server, set up from a kubeconfig.
pub struct ApiClient {
    client: reqwest::Client,
    /// The kubeconfig's server.
    server: url::Url,
    /// `<server>/version`.
    url: url::Url,
    /// The kubeconfig it was made from (named in errors).
    kubeconfig: std::path::PathBuf,
    /// The id of the bearer token when it is a bootstrap token.
    bootstrap_token_id: Option<String>,
    token: Option<String>,
    basic: Option<(String, String)>,
    has_client_cert: bool,
}

/// One `GET`'s answer, whatever its status.
struct Answer {
    status: u16,
    body: Vec<u8>,
    retry_after: Option<Duration>,
}

impl Answer {
    /// The start of the body on one line, for an error message.
    fn snippet(&self) -> String {
        let s = String::from_utf8_lossy(&self.body[..self.body.len().min(200)]).to_string();
        s.replace(['\n', '\r'], " ")
    }
}

impl std::fmt::Debug for ApiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiClient")
            .field("url", &self.url.as_str())
            .finish_non_exhaustive()
    }
}

impl ApiClient {
    /// Builds the client; `timeout` bounds each request (connect + TLS +
    /// response). Errors are [`ErrorClass::BadInput`] naming the kubeconfig.
    pub fn new(kc: &Kubeconfig, timeout: Duration) -> Result<ApiClient> {
        let bad = |what: &str, e: &dyn std::fmt::Display| {
            Error::bad_input(format!("kubeconfig {}: {what}: {e}", kc.path.display()))
        };
        let roots = reqwest::Certificate::from_pem_bundle(&kc.ca_pem)
            .map_err(|e| bad(&format!("CA from {}", kc.ca_source), &e))?;
        let mut b = crate::http::client_builder(timeout)
            .tls_certs_only(roots)
            .https_only(true)
            .redirect(reqwest::redirect::Policy::none())
            .timeout(timeout)
            .pool_max_idle_per_host(0);
        b = match &kc.proxy_url {
            Some(p) => b.proxy(reqwest::Proxy::all(p.as_str()).map_err(|e| bad("proxy-url", &e))?),
            None => b.no_proxy(),
        };
        if let Some(cc) = &kc.credentials.client_cert {
            let mut pem = cc.cert_pem.clone();
            if !pem.ends_with(b"\n") {
                pem.push(b'\n');
            }
            pem.extend_from_slice(&cc.key_pem);
            let id = reqwest::Identity::from_pem(&pem)
                .map_err(|e| bad("client certificate and key", &e))?;
            b = b.identity(id);
        }
        let client = b
            .build()
            .map_err(|e| bad("cannot set up an HTTPS client", &e))?;
        Ok(ApiClient {
            client,
            server: kc.server.clone(),
            url: kc.version_url(),
            kubeconfig: kc.path.clone(),
            bootstrap_token_id: kc.credentials.bootstrap_token_id().map(str::to_string),
            token: kc.credentials.token.clone(),
            basic: kc.credentials.basic.clone(),
            has_client_cert: kc.credentials.client_cert.is_some(),
        })
    }

    /// The URL asked (`<server>/version`).
    pub fn url(&self) -> &url::Url {
        &self.url
    }

    /// One `GET url` with the kubeconfig's credentials: the answer, or
    /// why there is none (network, TLS, a body over `max_body` bytes)
    /// and whether to try again.
    async fn get(&self, url: &url::Url, max_body: usize) -> std::result::Result<Answer, Attempt> {
        self.send(reqwest::Method::GET, url, None, max_body).await
    }

    /// One request (`body`: its content type and bytes) with the
    /// kubeconfig's credentials; see [`get`](Self::get).
    async fn send(
        &self,
        method: reqwest::Method,
        url: &url::Url,
        body: Option<(&'static str, Vec<u8>)>,
        max_body: usize,
    ) -> std::result::Result<Answer, Attempt> {
        let mut req = self.client.request(method, url.clone());
        if let Some((content_type, bytes)) = body {
            req = req
                .header(reqwest::header::CONTENT_TYPE, content_type)
                .body(bytes);
        }
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        if let Some((u, p)) = &self.basic {
            req = req.basic_auth(u, Some(p));
        }
        let mut resp = match req.send().await {
            Ok(r) => r,
            Err(e) => return Err(classify_send_error(url, &e, self.has_client_cert)),
        };
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let mut body = Vec::new();
        let read = crate::http::read_body(&mut resp, Remote::ApiServer, 0, max_body as u64, |c| {
            body.extend_from_slice(c);
            Ok(())
        });
        match read.await {
            Ok(_) => Ok(Answer {
                status,
                body,
                retry_after,
            }),
            Err((_, crate::http::BodyError::BrokeOff(e))) => Err(Attempt::retry(Error::retryable(
                format!("GET {url}: reading the response failed: {}", chain(&e)),
            ))),
            Err(_) => Err(Attempt::retry(Error::retryable(format!(
                "GET {url}: response larger than {max_body} bytes"
            )))),
        }
    }

    /// A 401: the credentials are wrong. With a bootstrap token, the token
    /// by its id (never its secret), and why a good one stops working.
    fn rejected(&self, url: &url::Url, answer: &Answer) -> Error {
        let code = answer.status;
        match &self.bootstrap_token_id {
            Some(id) => Error::bad_input(format!(
                "GET {url}: the API server rejected bootstrap token {id} of {} (HTTP {code}): \
                 expired or deleted? The API server refuses a token from its expiration on and once \
                 its Secret kube-system/bootstrap-token-{id} is gone; make a new token and give the \
                 node a bootstrap kubeconfig with it (docs/operators.md, \"Rotating bootstrap tokens\")",
                self.kubeconfig.display()
            )),
            None => Error::bad_input(format!(
                "GET {url}: the API server rejected the kubeconfig's credentials (HTTP {code}): {}",
                answer.snippet()
            )),
        }
    }

    /// One `GET /version`; the error says whether to try again, and tells
    /// a 401 apart.
    async fn version_once(&self) -> std::result::Result<ServerVersion, NoVersion> {
        let url = &self.url;
        let answer = self.get(url, MAX_BODY).await?;
        let code = answer.status;
        match code {
            200 => {}
            401 => return Err(NoVersion::Rejected(self.rejected(url, &answer))),
            403 => {
                return Err(NoVersion::Attempt(Attempt::Retry {
                    error: Error::retryable(format!(
                        "GET {url}: the API server accepted the kubeconfig's credentials but does not let this user read /version (HTTP 403; a server that has just started does so until its default RBAC policy exists; if it lasts, bind the user to the system:public-info-viewer cluster role): {}",
                        answer.snippet()
                    )),
                    after: answer.retry_after,
                }));
            }
            408 | 429 | 500..=599 => {
                return Err(NoVersion::Attempt(Attempt::Retry {
                    error: Error::retryable(format!(
                        "GET {url}: HTTP {code}: {}",
                        answer.snippet()
                    )),
                    after: answer.retry_after,
                }));
            }
            _ => {
                return Err(NoVersion::Attempt(Attempt::Fail(Error::bad_input(
                    format!(
                        "GET {url}: HTTP {code}; the kubeconfig's server does not look like a Kubernetes API server: {}",
                        answer.snippet()
                    ),
                ))));
            }
        }
        let v: ServerVersion = serde_json::from_slice(&answer.body).map_err(|e| {
            Attempt::retry(Error::retryable(format!(
                "GET {url}: the answer is not Kubernetes version JSON ({e}): {}",
                answer.snippet()
            )))
        })?;
        if let Err(e) = KubeVersion::parse(&v.git_version) {
            return Err(NoVersion::Attempt(Attempt::Fail(Error::refused(format!(
                "GET {url}: the API server's gitVersion is unusable: {e}"
            )))));
        }
        Ok(v)
    }

    /// One `GET <server><path>` of an API object or list, read as JSON:
    /// `None` for a 404. One attempt (the join's callers ask again on
    /// their own schedule); a 401 is [`ErrorClass::BadInput`] as for
    /// `/version`, a 403 [`ErrorClass::Refused`] naming the path (this
    /// user may not read it), anything else not 200
    /// [`ErrorClass::Retryable`].
    pub async fn get_json(&self, path: &str) -> Result<Option<serde_json::Value>> {
        let url = self.api_url(path);
        let answer = self.get(&url, MAX_OBJECT_BODY).await.map_err(|a| match a {
            Attempt::Retry { error, .. } | Attempt::Fail(error) => error,
        })?;
        match answer.status {
            200 => serde_json::from_slice(&answer.body).map(Some).map_err(|e| {
                Error::retryable(format!(
                    "GET {url}: the answer is not JSON ({e}): {}",
                    answer.snippet()
                ))
            }),
            404 => Ok(None),
            401 => Err(self.rejected(&url, &answer)),
            403 => Err(Error::refused(format!(
                "GET {url}: this user may not read it (HTTP 403): {}",
                answer.snippet()
            ))),
            code => Err(Error::retryable(format!(
                "GET {url}: HTTP {code}: {}",
                answer.snippet()
            ))),
        }
    }

    /// One `method <server><path>` with a JSON body (`content_type`: JSON,
    /// or a merge patch), read as JSON whatever its status (`Null` when
    /// the body is not JSON): the caller tells the statuses apart (409
    /// Conflict, 429 of an eviction a PodDisruptionBudget refuses). One
    /// attempt; a 401 is [`ErrorClass::BadInput`] as for `/version`;
    /// no answer at all is [`ErrorClass::Retryable`].
    pub async fn send_json(
        &self,
        method: reqwest::Method,
        path: &str,
        content_type: &'static str,
        body: &serde_json::Value,
    ) -> Result<(u16, serde_json::Value)> {
        let url = self.api_url(path);
        let bytes = serde_json::to_vec(body).expect("a JSON value serializes");
        let answer = self
            .send(method, &url, Some((content_type, bytes)), MAX_OBJECT_BODY)
            .await
            .map_err(|a| match a {
                Attempt::Retry { error, .. } | Attempt::Fail(error) => error,
            })?;
        if answer.status == 401 {
            return Err(self.rejected(&url, &answer));
        }
        let value = serde_json::from_slice(&answer.body).unwrap_or(serde_json::Value::Null);
        Ok((answer.status, value))
    }

    /// `<server><path>`, keeping a path prefix of the server URL; `path`
    /// may carry a query.
    fn api_url(&self, path: &str) -> url::Url {
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        let mut u = self.server.clone();
        let joined = format!("{}{path}", u.path().trim_end_matches('/'));
        u.set_path(&joined);
        u.set_query(Some(query).filter(|q| !q.is_empty()));
        u
    }

    /// `GET /version` with bounded, jittered retries.
    pub async fn version(&self, policy: RetryPolicy) -> Result<ServerVersion> {
        self.version_noting_401(policy, &Cell::new(false)).await
    }

    /// [`version`](Self::version); `rejected` is set when it ends on a 401.
    async fn version_noting_401(
        &self,
        policy: RetryPolicy,
        rejected: &Cell<bool>,
    ) -> Result<ServerVersion> {
        retry(Remote::ApiServer, policy, "asking the API server for its version", |attempt| async move {
            tracing::debug!(step = "cluster-version", url = %self.url, attempt, "asking the API server for its version");
            self.version_once().await.map_err(|no| {
                rejected.set(matches!(no, NoVersion::Rejected(_)));
                no.into_attempt()
            })
        })
        .await
    }

    /// [`version`](Self::version); with a bootstrap token, a 401 is asked
    /// again (with `policy`'s backoff) for up to `token_grace` before it is
    /// final: a new cluster's workers boot with its master, and until the
    /// master has applied the token's Secret the API server answers 401 to
    /// a good token. Every wait is a warning naming the token by its id.
    pub async fn version_once_the_token_is_known(
        &self,
        policy: RetryPolicy,
        token_grace: Duration,
    ) -> Result<ServerVersion> {
        let mut wait = crate::retry::BoundedWait::new(policy);
        let rejected = Cell::new(false);
        loop {
            let e = match self.version_noting_401(policy, &rejected).await {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            let Some(id) = &self.bootstrap_token_id else {
                return Err(e);
            };
            if !rejected.get() {
                return Err(e);
            }
            let (waits, delay) = wait.next(token_grace, e, |s| {
                format!("still rejected after {s} s (cluster.bootstrap_token_grace_secs)")
            })?;
            tracing::warn!(step = "cluster-version", url = %self.url, token_id = %id, attempt = waits,
                delay_ms = delay.as_millis() as u64, grace_secs = token_grace.as_secs(),
                "the API server does not know bootstrap token {id} (HTTP 401): a new cluster may not have applied its Secret yet; asking again");
            tokio::time::sleep(delay).await;
        }
    }
}

/// Why one `GET /version` gave no version.
enum NoVersion {
    /// A 401: the credentials are wrong, or a bootstrap token not known
    /// yet ([`ApiClient::version_once_the_token_is_known`]). Final.
    Rejected(Error),
    /// Anything else, and whether to try again.
    Attempt(Attempt),
}

impl NoVersion {
    fn into_attempt(self) -> Attempt {
        match self {
            NoVersion::Rejected(e) => Attempt::Fail(e),
            NoVersion::Attempt(a) => a,
        }
    }
}

impl From<Attempt> for NoVersion {
    fn from(a: Attempt) -> Self {
        NoVersion::Attempt(a)
    }
}

/// Whether a request error is the server's certificate failing to verify,
/// or the server refusing our client certificate (a certificate alert; or
/// `decrypt_error`, which is what a server sends when the certificate names
/// its CA but another key signed it, or the key does not match it).
fn classify_send_error(url: &url::Url, e: &reqwest::Error, sent_client_cert: bool) -> Attempt {
    match tls_error(e) {
        Some(rustls::Error::InvalidCertificate(ce)) => Attempt::Fail(Error::new(
            ErrorClass::Verification,
            format!(
                "GET {url}: the API server's certificate does not verify against the kubeconfig's CA ({ce:?}); no credentials were sent"
            ),
        )),
        Some(rustls::Error::AlertReceived(a))
            if sent_client_cert
                && matches!(
                    a,
                    rustls::AlertDescription::BadCertificate
                        | rustls::AlertDescription::UnknownCA
                        | rustls::AlertDescription::CertificateRequired
                        | rustls::AlertDescription::CertificateUnknown
                        | rustls::AlertDescription::CertificateExpired
                        | rustls::AlertDescription::CertificateRevoked
                        | rustls::AlertDescription::AccessDenied
                        | rustls::AlertDescription::DecryptError
                ) =>
        {
            Attempt::Fail(Error::bad_input(format!(
                "GET {url}: the API server rejected the kubeconfig's client certificate (TLS alert {a:?})"
            )))
        }
        _ => {
            let kind = if e.is_timeout() {
                "timed out"
            } else if e.is_connect() {
                "cannot connect"
            } else {
                "request failed"
            };
            Attempt::retry(Error::retryable(format!("GET {url}: {kind}: {}", chain(e))))
        }
    }
}

/// The rustls error somewhere in the chain (io::Error hides its inner error
/// from `source()`, so look inside those too).
fn tls_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(r) = err.downcast_ref::<rustls::Error>() {
            return Some(r);
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
        {
            if let Some(r) = inner.downcast_ref::<rustls::Error>() {
                return Some(r);
            }
            if let Some(r) = tls_error(inner) {
                return Some(r);
            }
        }
        cur = err.source();
    }
    None
}

/// The whole cause chain on one line (reqwest's Display stops at the top).
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(s) = cur {
        let t = s.to_string();
        if !parts.iter().any(|p| p.contains(&t)) {
            parts.push(t);
        }
        cur = s.source();
    }
    parts.join(": ")
}
