//! A real S3-compatible server on loopback for tests (`moto_server` from
//! PyPI, installed by `scripts/setup.sh`), and a fault-injecting HTTP proxy
//! to put in front of it.
//!
//! [`S3Server::start`] runs moto on a free port of 127.0.0.1 in its own
//! process group; dropping the value kills the group, so a failing test
//! leaves no server behind. Moto does not check signatures unless told to:
//! [`S3Server::start_with_auth`] starts it with IAM authentication off for
//! setup, [`S3Server::create_user`] makes IAM users with access keys, and
//! [`S3Server::enable_auth`] turns checking on (unknown keys then get
//! `InvalidAccessKeyId`, users without a policy `AccessDenied`).
//!
//! Setup requests (buckets, objects, IAM) are plain HTTP/1.1 from here, so
//! the tests need no second S3 client.
//!
//! [`FaultProxy`] forwards each request to the server on a fresh upstream
//! connection, except where a queued [`Fault`] matches: it then answers
//! 503 SlowDown / 500 InternalError itself, or forwards the request and cuts
//! the response body off after N bytes.

use anyhow::{Context, Result, anyhow, bail};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Access key used for unauthenticated setup requests (moto ignores it
/// until authentication is enabled).
pub const SETUP_KEY: &str = "AKIASETUPSETUPSETUP0";

/// Whether moto_server can run here; skips (returns true) outside CI with a
/// reason, panics under `CI=true` (CI installs it through scripts/setup.sh).
pub fn skip_unless_s3() -> bool {
    let ok = Command::new("moto_server")
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    !ok && crate::skip_because(
        "moto_server is not installed (scripts/setup.sh: pip install 'moto[server]')",
    )
}

/// A running moto_server.
pub struct S3Server {
    pub port: u16,
    child: Child,
    log: tempfile::NamedTempFile,
}

impl S3Server {
    /// moto without authentication (signatures are not checked).
    pub fn start() -> Result<S3Server> {
        Self::spawn(None)
    }

    /// moto with IAM authentication, off until [`enable_auth`](Self::enable_auth).
    pub fn start_with_auth() -> Result<S3Server> {
        Self::spawn(Some("1000000"))
    }

    fn spawn(no_auth_count: Option<&str>) -> Result<S3Server> {
        let mut last = None;
        for _ in 0..3 {
            let port = crate::kube::free_port();
            let log = tempfile::NamedTempFile::new()?;
            let mut cmd = Command::new("moto_server");
            cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()])
                .stdin(Stdio::null())
                .stdout(log.reopen()?)
                .stderr(log.reopen()?)
                .process_group(0);
            if let Some(n) = no_auth_count {
                cmd.env("INITIAL_NO_AUTH_ACTION_COUNT", n);
            }
            let child = cmd.spawn().context("spawning moto_server")?;
            let mut server = S3Server { port, child, log };
            match server.wait_ready(Duration::from_secs(30)) {
                Ok(()) => return Ok(server),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| anyhow!("moto_server did not start")))
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(st) = self.child.try_wait()? {
                bail!("moto_server exited ({st}): {}", self.log());
            }
            if let Ok(r) = http(self.port, "GET", "/moto-api/", &[], &[])
                && r.status < 500
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("moto_server did not answer in {timeout:?}: {}", self.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What the server printed.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn create_bucket(&self, bucket: &str) -> Result<()> {
        let r = http(self.port, "PUT", &format!("/{bucket}"), &[s3_auth()], &[])?;
        r.ok("create bucket")
    }

    /// Uploads `body` with user metadata (`x-amz-meta-<k>: v`).
    pub fn put_object(
        &self,
        bucket: &str,
        key: &str,
        body: &[u8],
        meta: &[(&str, &str)],
    ) -> Result<()> {
        let mut headers = vec![s3_auth()];
        headers.extend(
            meta.iter()
                .map(|(k, v)| (format!("x-amz-meta-{k}"), v.to_string())),
        );
        let r = http(
            self.port,
            "PUT",
            &format!("/{bucket}/{key}"),
            &headers,
            body,
        )?;
        r.ok("put object")
    }

    /// Uploads a file, streamed from disk.
    pub fn put_file(
        &self,
        bucket: &str,
        key: &str,
        file: &Path,
        meta: &[(&str, &str)],
    ) -> Result<()> {
        let len = std::fs::metadata(file)?.len();
        let mut s = TcpStream::connect(("127.0.0.1", self.port))?;
        let mut head = format!(
            "PUT /{bucket}/{key} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {len}\r\nConnection: close\r\n",
            self.port
        );
        let (k, v) = s3_auth();
        head.push_str(&format!("{k}: {v}\r\n"));
        for (k, v) in meta {
            head.push_str(&format!("x-amz-meta-{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        s.write_all(head.as_bytes())?;
        std::io::copy(&mut std::fs::File::open(file)?, &mut s)?;
        let r = read_response(&mut BufReader::new(s))?;
        r.ok("put file")
    }

    /// Creates an IAM user with an access key; with `allow_s3` it gets an
    /// inline policy allowing every S3 action. Returns (key id, secret).
    pub fn create_user(&self, name: &str, allow_s3: bool) -> Result<(String, String)> {
        self.iam(&[("Action", "CreateUser"), ("UserName", name)])?;
        let body = self.iam(&[("Action", "CreateAccessKey"), ("UserName", name)])?;
        let id = between(&body, "<AccessKeyId>", "</AccessKeyId>")
            .ok_or_else(|| anyhow!("no AccessKeyId in {body}"))?;
        let secret = between(&body, "<SecretAccessKey>", "</SecretAccessKey>")
            .ok_or_else(|| anyhow!("no SecretAccessKey in {body}"))?;
        if allow_s3 {
            let policy = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}"#;
            self.iam(&[
                ("Action", "PutUserPolicy"),
                ("UserName", name),
                ("PolicyName", "s3-all"),
                ("PolicyDocument", policy),
            ])?;
        }
        Ok((id, secret))
    }

    fn iam(&self, params: &[(&str, &str)]) -> Result<String> {
        let mut form: Vec<String> = params
            .iter()
            .map(|(k, v)| format!("{k}={}", urlencode(v)))
            .collect();
        form.push("Version=2010-05-08".into());
        let body = form.join("&");
        let auth = (
            "Authorization".to_string(),
            format!(
                "AWS4-HMAC-SHA256 Credential={SETUP_KEY}/20240101/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=0"
            ),
        );
        let ct = (
            "Content-Type".to_string(),
            "application/x-www-form-urlencoded".to_string(),
        );
        let r = http(self.port, "POST", "/", &[auth, ct], body.as_bytes())?;
        r.ok(params[0].1)?;
        Ok(String::from_utf8_lossy(&r.body).into_owned())
    }

    /// From now on every request must be signed by a known key.
    pub fn enable_auth(&self) -> Result<()> {
        let r = http(self.port, "POST", "/moto-api/reset-auth", &[], b"0")?;
        r.ok("reset-auth")
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let pgid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::SIGKILL);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn s3_auth() -> (String, String) {
    (
        "Authorization".to_string(),
        format!(
            "AWS4-HMAC-SHA256 Credential={SETUP_KEY}/20240101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0"
        ),
    )
}

fn between(s: &str, a: &str, b: &str) -> Option<String> {
    let start = s.find(a)? + a.len();
    let end = s[start..].find(b)? + start;
    Some(s[start..end].to_string())
}

fn urlencode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A parsed HTTP response.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    fn ok(&self, what: &str) -> Result<()> {
        if (200..300).contains(&self.status) {
            Ok(())
        } else {
            bail!(
                "{what}: HTTP {}: {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        }
    }
}

/// One HTTP/1.1 request on a new connection.
pub fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> Result<Response> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(120)))?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes())?;
    s.write_all(body)?;
    read_response(&mut BufReader::new(s))
}

fn read_head<R: BufRead>(r: &mut R) -> Result<Vec<String>> {
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line)? == 0 {
            bail!("connection closed in the middle of a header");
        }
        let line = line.trim_end_matches(['\r', '\n']).to_string();
        if line.is_empty() {
            return Ok(lines);
        }
        lines.push(line);
    }
}

fn header<'a>(lines: &'a [String], name: &str) -> Option<&'a str> {
    lines.iter().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then_some(v.trim())
    })
}

fn read_response<R: BufRead>(r: &mut R) -> Result<Response> {
    let head = read_head(r)?;
    let status = head[0]
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow!("bad status line {:?}", head[0]))?;
    let mut body = Vec::new();
    if let Some(len) = header(&head, "content-length").and_then(|v| v.parse::<u64>().ok()) {
        r.take(len).read_to_end(&mut body)?;
    } else {
        r.read_to_end(&mut body)?;
    }
    let headers = head[1..]
        .iter()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    Ok(Response {
        status,
        headers,
        body,
    })
}

/// A fault the proxy applies to the next matching request.
#[derive(Debug, Clone)]
pub enum Fault {
    /// Answer with this status and S3 error code (e.g. 503 "SlowDown").
    Status {
        status: u16,
        code: &'static str,
        retry_after: Option<u64>,
    },
    /// Forward, but cut the response body off after this many bytes.
    Truncate { after: u64 },
}

struct Rule {
    method: String,
    path_contains: String,
    fault: Fault,
}

#[derive(Default)]
struct ProxyState {
    rules: VecDeque<Rule>,
    /// "METHOD path [range]" of every request seen.
    seen: Vec<String>,
    applied: Vec<String>,
}

/// A fault-injecting HTTP/1.1 proxy on loopback (see module docs).
pub struct FaultProxy {
    pub port: u16,
    state: Arc<Mutex<ProxyState>>,
    stop: Arc<AtomicBool>,
}

impl FaultProxy {
    /// Starts forwarding 127.0.0.1:<new port> to 127.0.0.1:`upstream`.
    pub fn start(upstream: u16) -> Result<FaultProxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        listener.set_nonblocking(true)?;
        let state = Arc::new(Mutex::new(ProxyState::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (state.clone(), stop.clone());
        std::thread::spawn(move || {
            while !sp.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        let st = st.clone();
                        std::thread::spawn(move || {
                            let _ = conn.set_nonblocking(false);
                            let _ = serve(conn, upstream, &st);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Ok(FaultProxy { port, state, stop })
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Queues `fault` for the next request with `method` whose path
    /// contains `path_contains` (matched against `path range`, so
    /// `"/k bytes=1048576-"` picks one part). Faults apply in the order queued.
    pub fn inject(&self, method: &str, path_contains: &str, fault: Fault) {
        self.state.lock().unwrap().rules.push_back(Rule {
            method: method.to_string(),
            path_contains: path_contains.to_string(),
            fault,
        });
    }

    /// Requests seen so far ("GET /b/k bytes=0-99").
    pub fn seen(&self) -> Vec<String> {
        self.state.lock().unwrap().seen.clone()
    }

    /// Faults applied so far, described.
    pub fn applied(&self) -> Vec<String> {
        self.state.lock().unwrap().applied.clone()
    }

    /// Faults still queued.
    pub fn pending(&self) -> usize {
        self.state.lock().unwrap().rules.len()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Serves requests of one client connection, one upstream connection each.
fn serve(conn: TcpStream, upstream: u16, state: &Mutex<ProxyState>) -> Result<()> {
    let mut client_r = BufReader::new(conn.try_clone()?);
    let mut client_w = conn;
    loop {
        let head = match read_head(&mut client_r) {
            Ok(h) => h,
            Err(_) => return Ok(()),
        };
        let mut parts = head[0].split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let path = parts.next().unwrap_or("").to_string();
        let len: u64 = header(&head, "content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = Vec::new();
        (&mut client_r).take(len).read_to_end(&mut body)?;
        let range = header(&head, "range").unwrap_or("").to_string();
        let fault = {
            let mut st = state.lock().unwrap();
            st.seen
                .push(format!("{method} {path} {range}").trim_end().to_string());
            let idx = st.rules.iter().position(|r| {
                r.method == method && format!("{path} {range}").contains(&r.path_contains)
            });
            let f = idx.and_then(|i| st.rules.remove(i)).map(|r| r.fault);
            if let Some(f) = &f {
                st.applied.push(format!("{f:?} on {method} {path} {range}"));
            }
            f
        };
        match fault {
            Some(Fault::Status {
                status,
                code,
                retry_after,
            }) => {
                let xml = format!(
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>injected by the test proxy</Message><RequestId>fault</RequestId></Error>"
                );
                let mut resp = format!(
                    "HTTP/1.1 {status} Injected\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n",
                    xml.len()
                );
                if let Some(s) = retry_after {
                    resp.push_str(&format!("Retry-After: {s}\r\n"));
                }
                resp.push_str("\r\n");
                resp.push_str(&xml);
                client_w.write_all(resp.as_bytes())?;
                continue; // keep-alive: the client may reuse this connection
            }
            other => {
                let mut up = TcpStream::connect(("127.0.0.1", upstream))?;
                let mut req = format!("{}\r\n", head[0]);
                for l in &head[1..] {
                    if !l.to_ascii_lowercase().starts_with("connection:") {
                        req.push_str(l);
                        req.push_str("\r\n");
                    }
                }
                req.push_str("Connection: close\r\n\r\n");
                up.write_all(req.as_bytes())?;
                up.write_all(&body)?;
                let mut up_r = BufReader::new(up);
                let rhead = read_head(&mut up_r)?;
                let mut resp = String::new();
                for l in &rhead {
                    if !l.to_ascii_lowercase().starts_with("connection:") {
                        resp.push_str(l);
                        resp.push_str("\r\n");
                    }
                }
                resp.push_str("Connection: close\r\n\r\n");
                client_w.write_all(resp.as_bytes())?;
                match other {
                    Some(Fault::Truncate { after }) => {
                        std::io::copy(&mut (&mut up_r).take(after), &mut client_w)?;
                        client_w.flush()?;
                        // Abort: the client sees the body break off.
                        let _ = client_w.shutdown(Shutdown::Both);
                        return Ok(());
                    }
                    _ => {
                        let rlen =
                            header(&rhead, "content-length").and_then(|v| v.parse::<u64>().ok());
                        match rlen {
                            Some(n) => std::io::copy(&mut (&mut up_r).take(n), &mut client_w)?,
                            None => std::io::copy(&mut up_r, &mut client_w)?,
                        };
                        client_w.flush()?;
                        let _ = client_w.shutdown(Shutdown::Both);
                        return Ok(());
                    }
                }
            }
        }
    }
}
