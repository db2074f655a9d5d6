//! What a CRI runtime says of itself: the `Version` call of the Container
//! Runtime Interface's `RuntimeService`, over the runtime's unix socket,
//! as the kubelet asks it when it starts.
//!
//! CRI is gRPC: one HTTP/2 POST to `/runtime.v1.RuntimeService/Version`
//! (or `/runtime.v1alpha2.…`, the API before Kubernetes 1.23 made v1 the
//! kubelet's first choice) with a length-prefixed protobuf body, answered
//! by a length-prefixed protobuf message and a `grpc-status` trailer. Both
//! messages have only string fields, so they are encoded here by hand
//! rather than through a gRPC code generator:
//!
//! ```text
//! message VersionRequest  { string version = 1; }
//! message VersionResponse { string version = 1; string runtime_name = 2;
//!                           string runtime_version = 3; string runtime_api_version = 4; }
//! ```
//!
//! A runtime that does not serve an API version answers grpc-status 12
//! (UNIMPLEMENTED): containerd 1.6 and 1.7 serve both, 2.0 only v1,
//! containerd before 1.6 only v1alpha2. The kubelet speaks only v1 from
//! Kubernetes 1.26, so the flow asks which APIs a runtime serves before it
//! lets such a kubelet start.
//!
//! What the runtime runs with, learnt three ways, each of which holds for
//! containerd 1.6, 1.7 and 2.x alike (read from containerd's source):
//!
//! - the verbose `Status`'s `config` entry, the CRI plugin's configuration
//!   as JSON. In 1.6/1.7 that is the whole CRI plugin config (`sandboxImage`
//!   at its top level, `containerd.runtimes.*.options`, `cni.confDir`;
//!   `pkg/cri/config/config.go` `PluginConfig`). In 2.x it is the runtime
//!   plugin's config only (`internal/cri/server/status.go` marshals
//!   `criconfig.Config`, which embeds `RuntimeConfig`): the runtimes and the
//!   CNI directories are there, the sandbox image is not (it moved to the
//!   images plugin, `io.containerd.cri.v1.images` `pinned_images.sandbox`,
//!   where no CRI call shows it). [`ConfigSeen`] keeps "not reported"
//!   apart from any value.
//! - `RuntimeConfig` (CRI v1 only; containerd 2.0 on, `internal/cri/server/
//!   runtime_config_linux.go`): the cgroup driver the runtime uses, as a
//!   kubelet from 1.31 asks it (KEP-4033). Older runtimes answer
//!   UNIMPLEMENTED.
//! - the process that serves the socket (`SO_PEERCRED`) and the config file
//!   on its command line (`--config`, else containerd's default
//!   `/etc/containerd/config.toml`): which file it read.

use crate::error::{Error, Result};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use std::path::Path;
use std::time::Duration;

/// A CRI API version, as in the gRPC package name.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum CriApi {
    /// `runtime.v1alpha2`: kubelet 1.10 to 1.25 (containerd's RELEASES.md,
    /// "Kubernetes Support": v1alpha2 from Kubernetes 1.10; 1.8 and 1.9
    /// spoke v1alpha1, which no containerd the agent configures serves).
    #[serde(rename = "v1alpha2")]
    V1alpha2,
    /// `runtime.v1`: kubelet 1.23 on; the only one from 1.26.
    #[serde(rename = "v1")]
    V1,
}

impl CriApi {
    pub const ALL: [CriApi; 2] = [CriApi::V1, CriApi::V1alpha2];

    pub fn name(self) -> &'static str {
        match self {
            CriApi::V1 => "v1",
            CriApi::V1alpha2 => "v1alpha2",
        }
    }

    fn version_path(self) -> &'static str {
        match self {
            CriApi::V1 => "/runtime.v1.RuntimeService/Version",
            CriApi::V1alpha2 => "/runtime.v1alpha2.RuntimeService/Version",
        }
    }

    fn status_path(self) -> &'static str {
        match self {
            CriApi::V1 => "/runtime.v1.RuntimeService/Status",
            CriApi::V1alpha2 => "/runtime.v1alpha2.RuntimeService/Status",
        }
    }
}

/// The cgroup driver a runtime says it uses (`RuntimeConfigResponse`'s
/// `linux.cgroup_driver`: `SYSTEMD = 0`, `CGROUPFS = 1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupDriver {
    Systemd,
    Cgroupfs,
}

impl CgroupDriver {
    pub fn name(self) -> &'static str {
        match self {
            CgroupDriver::Systemd => "systemd",
            CgroupDriver::Cgroupfs => "cgroupfs",
        }
    }
}

/// The process serving the socket, and the config file it was started with.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ServerProcess {
    pub pid: i32,
    /// `--config`/`-c` of its command line, else containerd's default
    /// ([`DEFAULT_CONFIG`]); `None` when the command line could not be read.
    pub config_file: Option<std::path::PathBuf>,
}

/// The file containerd reads when started without `--config`.
pub const DEFAULT_CONFIG: &str = "/etc/containerd/config.toml";

/// What the runtime answered to `Version`.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct RuntimeVersion {
    /// The CRI API version of the answer's own message, e.g. `0.1.0`.
    pub version: String,
    /// e.g. `containerd`.
    pub runtime_name: String,
    /// e.g. `1.6.20~ds1`.
    pub runtime_version: String,
    /// e.g. `v1`, or `v1alpha2` from a v1alpha2 endpoint.
    pub runtime_api_version: String,
}

impl RuntimeVersion {
    /// The runtime as the Node object reports it (`containerd://1.6.20~ds1`).
    pub fn as_node_reports(&self) -> String {
        format!("{}://{}", self.runtime_name, self.runtime_version)
    }
}

/// Which CRI APIs the runtime serves, and what it said of itself.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RuntimeAnswer {
    pub version: RuntimeVersion,
    /// Every API version that answered, newest first.
    pub apis: Vec<CriApi>,
    /// The configuration the runtime runs with, as its verbose `Status`
    /// reports it (containerd's CRI plugin does; `None` for a runtime that
    /// does not say).
    pub config: Option<ConfigSeen>,
    /// The cgroup driver its `RuntimeConfig` answers (containerd 2.0 on;
    /// `None`: not served).
    pub cgroup_driver: Option<CgroupDriver>,
    /// Who serves the socket (`None`: the peer's credentials could not be
    /// read).
    pub server: Option<ServerProcess>,
}

/// What containerd's CRI plugin says it runs with (the `config` entry of
/// a verbose `Status`: its CRI configuration as JSON). Each is `None`
/// where the answer did not say (module docs: containerd 2.x has no
/// `sandboxImage` and no default `snapshotter` there).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct ConfigSeen {
    /// The default runtime's name (`containerd.defaultRuntimeName`).
    pub default_runtime: Option<String>,
    /// Whether the default runtime is reported (`containerd.runtimes.<it>`).
    pub default_runtime_reported: bool,
    /// The default runtime's `SystemdCgroup` option: whether runc places
    /// containers through systemd (the kubelet's cgroup driver must agree).
    /// `None` with the runtime reported: the option is not set (runc's
    /// default, cgroupfs).
    pub systemd_cgroup: Option<bool>,
    pub sandbox_image: Option<String>,
    pub snapshotter: Option<String>,
    pub cni_conf_dir: Option<String>,
    pub cni_bin_dir: Option<String>,
}

impl ConfigSeen {
    /// Reads containerd's JSON; `None` when it is not JSON.
    pub fn from_json(text: &str) -> Option<ConfigSeen> {
        let v: serde_json::Value = serde_json::from_str(text).ok()?;
        let str_at = |ptr: &str| v.pointer(ptr).and_then(|x| x.as_str()).map(str::to_string);
        let default_runtime = str_at("/containerd/defaultRuntimeName");
        let name = default_runtime.as_deref().unwrap_or("runc");
        let runtime = v.pointer(&format!("/containerd/runtimes/{name}"));
        Some(ConfigSeen {
            default_runtime_reported: runtime.is_some_and(|r| r.is_object()),
            systemd_cgroup: runtime
                .and_then(|r| r.pointer("/options/SystemdCgroup"))
                .and_then(|x| x.as_bool()),
            default_runtime,
            sandbox_image: str_at("/sandboxImage"),
            snapshotter: str_at("/containerd/snapshotter"),
            cni_conf_dir: str_at("/cni/confDir"),
            // 2.x reports `binDirs` (a list) beside the deprecated `binDir`.
            cni_bin_dir: str_at("/cni/binDir").filter(|d| !d.is_empty()).or_else(|| {
                v.pointer("/cni/binDirs")
                    .and_then(|x| x.as_array())
                    .and_then(|a| a.first())
                    .and_then(|x| x.as_str())
                    .map(str::to_string)
            }),
        })
    }

    /// The cgroup driver the default runtime's options say, when the
    /// runtime is reported (runc's default is cgroupfs).
    pub fn cgroup_driver(&self) -> Option<CgroupDriver> {
        match (self.default_runtime_reported, self.systemd_cgroup) {
            (_, Some(true)) => Some(CgroupDriver::Systemd),
            (true, _) | (_, Some(false)) => Some(CgroupDriver::Cgroupfs),
            (false, None) => None,
        }
    }
}

impl RuntimeAnswer {
    pub fn serves(&self, api: CriApi) -> bool {
        self.apis.contains(&api)
    }
}

/// The kubelet's own protocol version string in `VersionRequest`.
const REQUEST_VERSION: &str = "0.1.0";

/// Asks the runtime at `socket` for its version on every CRI API version,
/// within `timeout` in all. A socket nobody answers on, or an answer that
/// is not CRI, is retryable (the runtime may be starting) and names the
/// socket; a runtime that serves neither API version is refused.
pub async fn ask(socket: &Path, timeout: Duration) -> Result<RuntimeAnswer> {
    let at = || format!("the container runtime at {}", socket.display());
    let asked = tokio::time::timeout(timeout, ask_all(socket))
        .await
        .map_err(|_| {
            Error::retryable(format!(
                "{} did not answer CRI Version within {}s",
                at(),
                timeout.as_secs_f32()
            ))
        })?;
    let answers = asked.map_err(|e| e.context(at()))?;
    let Asked {
        answers,
        config,
        cgroup_driver,
        server,
    } = answers;
    let mut apis = Vec::new();
    let mut version = None;
    for (api, answer) in answers {
        if let Some(v) = answer {
            apis.push(api);
            version.get_or_insert(v);
        }
    }
    match version {
        Some(version) => Ok(RuntimeAnswer {
            version,
            apis,
            config,
            cgroup_driver,
            server,
        }),
        None => Err(Error::refused(format!(
            "{} serves no CRI API the kubelet speaks (neither runtime.v1 nor runtime.v1alpha2 answers Version)",
            at()
        ))),
    }
}

/// Everything one connection learnt.
struct Asked {
    answers: Vec<(CriApi, Option<RuntimeVersion>)>,
    config: Option<ConfigSeen>,
    cgroup_driver: Option<CgroupDriver>,
    server: Option<ServerProcess>,
}

async fn ask_all(socket: &Path) -> Result<Asked> {
    let stream = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(|e| Error::retryable(format!("cannot connect: {e}")))?;
    let server = stream
        .peer_cred()
        .ok()
        .and_then(|c| c.pid())
        .map(server_process);
    let (client, connection) = h2::client::handshake(stream)
        .await
        .map_err(|e| Error::retryable(format!("HTTP/2 handshake failed: {e}")))?;
    let conn = tokio::spawn(async move {
        // Ends with an error when the client side is dropped; nothing to report.
        let _ = connection.await;
    });
    let result = ask_on(client).await;
    conn.abort();
    result.map(|mut asked| {
        asked.server = server;
        asked
    })
}

/// The process `pid` and the config file of its command line.
fn server_process(pid: i32) -> ServerProcess {
    let config_file = std::fs::read(format!("/proc/{pid}/cmdline"))
        .ok()
        .map(|raw| {
            let args: Vec<String> = raw
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            config_of_command_line(&args)
        });
    ServerProcess { pid, config_file }
}

/// The config file containerd's command line names (`--config X`,
/// `--config=X`, `-c X`, `-c=X`; Go's flag syntax also takes one dash for
/// the long name), else [`DEFAULT_CONFIG`].
pub fn config_of_command_line(args: &[String]) -> std::path::PathBuf {
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        let name = a.trim_start_matches('-');
        if a.starts_with('-') && (name == "config" || name == "c") {
            if let Some(v) = it.next() {
                return v.into();
            }
        } else if a.starts_with('-')
            && let Some(v) = name
                .strip_prefix("config=")
                .or_else(|| name.strip_prefix("c="))
        {
            return v.into();
        }
    }
    DEFAULT_CONFIG.into()
}

async fn ask_on(client: h2::client::SendRequest<Bytes>) -> Result<Asked> {
    let mut asked = Asked {
        answers: Vec::new(),
        config: None,
        cgroup_driver: None,
        server: None,
    };
    for api in CriApi::ALL {
        match call(client.clone(), api).await {
            Ok(v) => asked.answers.push((api, Some(v))),
            Err(CallError::Unimplemented) => asked.answers.push((api, None)),
            Err(CallError::Failed(e)) => {
                return Err(e.context(format!("CRI {} Version", api.name())));
            }
        }
    }
    let served = |a: CriApi| {
        asked
            .answers
            .iter()
            .any(|(api, v)| *api == a && v.is_some())
    };
    let Some(api) = CriApi::ALL.into_iter().find(|a| served(*a)) else {
        return Ok(asked);
    };
    if served(CriApi::V1) {
        asked.cgroup_driver = match unary(client.clone(), RUNTIME_CONFIG_PATH, &[]).await {
            Ok(message) => Some(decode_runtime_config(&message)?),
            Err(CallError::Unimplemented) => None,
            Err(CallError::Failed(e)) => return Err(e.context("CRI v1 RuntimeConfig")),
        };
    }
    let status = match unary(client, api.status_path(), STATUS_VERBOSE).await {
        Ok(message) => message,
        Err(CallError::Unimplemented) => return Ok(asked),
        Err(CallError::Failed(e)) => return Err(e.context(format!("CRI {} Status", api.name()))),
    };
    let info = decode_status_info(&status)?;
    asked.config = info
        .iter()
        .find(|(k, _)| k == "config")
        .and_then(|(_, v)| ConfigSeen::from_json(v));
    Ok(asked)
}

/// CRI v1's `RuntimeConfig` (Kubernetes 1.28 on; no v1alpha2 twin).
const RUNTIME_CONFIG_PATH: &str = "/runtime.v1.RuntimeService/RuntimeConfig";

/// `RuntimeConfigResponse { LinuxRuntimeConfiguration linux = 1; }`,
/// `LinuxRuntimeConfiguration { CgroupDriver cgroup_driver = 1; }`, with
/// `enum CgroupDriver { SYSTEMD = 0; CGROUPFS = 1; }`: an absent field is
/// its zero value, systemd.
fn decode_runtime_config(buf: &[u8]) -> Result<CgroupDriver> {
    const WHAT: &str = "RuntimeConfigResponse";
    let bad = |why: &str| Error::retryable(format!("malformed CRI {WHAT}: {why}"));
    let mut driver = 0;
    for (field, linux) in delimited_fields(buf, WHAT)? {
        if field != 1 {
            continue;
        }
        let mut rest = linux;
        while !rest.is_empty() {
            let key = get_varint(&mut rest).ok_or_else(|| bad("truncated field key"))?;
            match (key >> 3, key & 7) {
                (1, 0) => driver = get_varint(&mut rest).ok_or_else(|| bad("truncated varint"))?,
                // Anything else a newer runtime adds: skipped as protobuf does.
                (_, 0) => {
                    get_varint(&mut rest).ok_or_else(|| bad("truncated varint"))?;
                }
                (_, 2) => {
                    let len = get_varint(&mut rest).ok_or_else(|| bad("truncated length"))?;
                    rest = rest
                        .get(len as usize..)
                        .ok_or_else(|| bad("truncated field"))?;
                }
                (_, wire) => return Err(bad(&format!("wire type {wire}"))),
            }
        }
    }
    match driver {
        0 => Ok(CgroupDriver::Systemd),
        1 => Ok(CgroupDriver::Cgroupfs),
        n => Err(bad(&format!("unknown cgroup driver {n}"))),
    }
}

enum CallError {
    /// grpc-status 12: this API version is not served.
    Unimplemented,
    Failed(Error),
}

impl From<h2::Error> for CallError {
    fn from(e: h2::Error) -> Self {
        CallError::Failed(Error::retryable(format!("HTTP/2: {e}")))
    }
}

async fn call(
    client: h2::client::SendRequest<Bytes>,
    api: CriApi,
) -> Result<RuntimeVersion, CallError> {
    let message = unary(client, api.version_path(), &encode_request(REQUEST_VERSION)).await?;
    decode_response(&message).map_err(CallError::Failed)
}

/// One gRPC call: the request message in, the answer's message out.
async fn unary(
    client: h2::client::SendRequest<Bytes>,
    path: &str,
    message: &[u8],
) -> Result<Bytes, CallError> {
    let mut client = client.ready().await?;
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("http://localhost{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .map_err(|e| CallError::Failed(Error::internal(format!("building a gRPC request: {e}"))))?;
    let (response, mut body) = client.send_request(request, false)?;
    body.send_data(grpc_frame(message), true)?;
    let response = response.await?;
    let (head, mut recv) = response.into_parts();
    if head.status != http::StatusCode::OK {
        return Err(CallError::Failed(Error::retryable(format!(
            "not a gRPC server: HTTP status {}",
            head.status
        ))));
    }
    // A "trailers-only" answer carries grpc-status in the headers.
    if let Some(status) = grpc_status(&head.headers) {
        return Err(status_error(status, &head.headers));
    }
    let mut data = BytesMut::new();
    while let Some(chunk) = recv.data().await {
        let chunk = chunk?;
        let _ = recv.flow_control().release_capacity(chunk.len());
        data.extend_from_slice(&chunk);
        if data.len() > MAX_MESSAGE {
            return Err(CallError::Failed(Error::retryable(format!(
                "answer to {path} longer than {MAX_MESSAGE} bytes"
            ))));
        }
    }
    let trailers = recv.trailers().await?.unwrap_or_default();
    match grpc_status(&trailers) {
        Some(0) => {}
        Some(status) => return Err(status_error(status, &trailers)),
        None => {
            return Err(CallError::Failed(Error::retryable(
                "gRPC answer without grpc-status".to_string(),
            )));
        }
    }
    unframe(data.freeze()).map_err(CallError::Failed)
}

/// No Version or Status answer is anywhere near this (containerd's
/// verbose Status is about 10 KiB); a longer one is not CRI.
const MAX_MESSAGE: usize = 1024 * 1024;

fn grpc_status(headers: &http::HeaderMap) -> Option<u32> {
    headers
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

fn status_error(status: u32, headers: &http::HeaderMap) -> CallError {
    const UNIMPLEMENTED: u32 = 12;
    if status == UNIMPLEMENTED {
        return CallError::Unimplemented;
    }
    let message = headers
        .get("grpc-message")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    CallError::Failed(Error::retryable(format!(
        "gRPC status {status}: {}",
        percent_decode(message)
    )))
}

/// grpc-message is percent-encoded (gRPC over HTTP/2, "Responses").
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A gRPC message on the wire: not compressed (0), big-endian length, bytes.
fn grpc_frame(message: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(5 + message.len());
    out.put_u8(0);
    out.put_u32(message.len() as u32);
    out.put_slice(message);
    out.freeze()
}

fn unframe(mut data: Bytes) -> Result<Bytes> {
    if data.len() < 5 {
        return Err(Error::retryable(format!(
            "gRPC answer of {} bytes has no message",
            data.len()
        )));
    }
    let compressed = data.get_u8();
    let len = data.get_u32() as usize;
    if compressed != 0 {
        return Err(Error::retryable(
            "gRPC answer is compressed, which was not asked for".to_string(),
        ));
    }
    if data.len() != len {
        return Err(Error::retryable(format!(
            "gRPC answer says {len} bytes and holds {}",
            data.len()
        )));
    }
    Ok(data)
}

/// `VersionRequest { version = 1 }`.
fn encode_request(version: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + version.len());
    out.push(1 << 3 | 2);
    put_varint(&mut out, version.len() as u64);
    out.extend_from_slice(version.as_bytes());
    out
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(buf: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = buf.split_first()?;
        *buf = rest;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The length-delimited fields (strings, messages) of a protobuf message,
/// in order; fields of other wire types are skipped, as protobuf readers
/// skip what they do not know. `what` names the message in errors.
fn delimited_fields<'a>(mut buf: &'a [u8], what: &str) -> Result<Vec<(u64, &'a [u8])>> {
    let bad = |why: &str| Error::retryable(format!("malformed CRI {what}: {why}"));
    let mut out = Vec::new();
    while !buf.is_empty() {
        let key = get_varint(&mut buf).ok_or_else(|| bad("truncated field key"))?;
        let (field, wire) = (key >> 3, key & 7);
        match wire {
            0 => {
                get_varint(&mut buf).ok_or_else(|| bad("truncated varint"))?;
            }
            1 | 5 => {
                let n = if wire == 1 { 8 } else { 4 };
                buf = buf.get(n..).ok_or_else(|| bad("truncated fixed field"))?;
            }
            2 => {
                let len = get_varint(&mut buf).ok_or_else(|| bad("truncated length"))? as usize;
                let bytes = buf.get(..len).ok_or_else(|| bad("truncated string"))?;
                buf = &buf[len..];
                out.push((field, bytes));
            }
            other => return Err(bad(&format!("wire type {other}"))),
        }
    }
    Ok(out)
}

fn utf8(bytes: &[u8], what: &str) -> Result<String> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| Error::retryable(format!("malformed CRI {what}: a string is not UTF-8")))
}

/// Reads the four string fields of `VersionResponse`.
fn decode_response(buf: &[u8]) -> Result<RuntimeVersion> {
    const WHAT: &str = "VersionResponse";
    let mut out = RuntimeVersion::default();
    for (field, bytes) in delimited_fields(buf, WHAT)? {
        let slot = match field {
            1 => &mut out.version,
            2 => &mut out.runtime_name,
            3 => &mut out.runtime_version,
            4 => &mut out.runtime_api_version,
            _ => continue,
        };
        *slot = utf8(bytes, WHAT)?;
    }
    if out.runtime_name.is_empty() {
        return Err(Error::retryable(format!(
            "malformed CRI {WHAT}: no runtime_name"
        )));
    }
    Ok(out)
}

/// `StatusRequest { verbose = true }`.
const STATUS_VERBOSE: &[u8] = &[1 << 3, 1];

/// The `info` map of `StatusResponse { RuntimeStatus status = 1;
/// map<string, string> info = 2; }` (a map is repeated entries
/// `{ key = 1; value = 2; }`).
fn decode_status_info(buf: &[u8]) -> Result<Vec<(String, String)>> {
    const WHAT: &str = "StatusResponse";
    let mut info = Vec::new();
    for (field, entry) in delimited_fields(buf, WHAT)? {
        if field != 2 {
            continue;
        }
        let (mut key, mut value) = (String::new(), String::new());
        for (f, bytes) in delimited_fields(entry, WHAT)? {
            match f {
                1 => key = utf8(bytes, WHAT)?,
                2 => value = utf8(bytes, WHAT)?,
                _ => {}
            }
        }
        info.push((key, value));
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(out: &mut Vec<u8>, n: u8, s: &str) {
        out.push(n << 3 | 2);
        put_varint(out, s.len() as u64);
        out.extend_from_slice(s.as_bytes());
    }

    #[test]
    fn the_request_is_what_protoc_encodes() {
        // protoc --encode=VersionRequest <<< 'version: "0.1.0"'
        assert_eq!(encode_request("0.1.0"), b"\x0a\x050.1.0");
        assert_eq!(&grpc_frame(b"ab")[..], b"\0\0\0\0\x02ab");
    }

    #[test]
    fn a_response_reads_its_four_strings_and_skips_unknown_fields() {
        let mut msg = Vec::new();
        field(&mut msg, 1, "0.1.0");
        field(&mut msg, 2, "containerd");
        msg.extend_from_slice(&[5 << 3, 0x96, 0x01]); // an unknown varint field
        field(&mut msg, 3, "1.6.20~ds1");
        field(&mut msg, 9, "from a newer runtime");
        field(&mut msg, 4, "v1");
        let v = decode_response(&msg).unwrap();
        assert_eq!(v.runtime_name, "containerd");
        assert_eq!(v.runtime_version, "1.6.20~ds1");
        assert_eq!(v.runtime_api_version, "v1");
        assert_eq!(v.as_node_reports(), "containerd://1.6.20~ds1");
    }

    #[test]
    fn malformed_answers_are_named() {
        let err = decode_response(b"\x12\x10short").unwrap_err();
        assert!(err.to_string().contains("truncated string"), "{err}");
        let err = decode_response(b"\x0a\x01x").unwrap_err();
        assert!(err.to_string().contains("no runtime_name"), "{err}");
        let err = unframe(Bytes::from_static(b"\0\0\0\0\x09ab")).unwrap_err();
        assert!(
            err.to_string().contains("says 9 bytes and holds 2"),
            "{err}"
        );
    }

    #[test]
    fn the_config_of_1_6_and_of_2_x_read_apart() {
        // containerd 1.6's shape (pkg/cri/config PluginConfig at the top).
        let v16 = r#"{"containerd":{"snapshotter":"native","defaultRuntimeName":"runc",
            "runtimes":{"runc":{"runtimeType":"io.containerd.runc.v2","options":{"SystemdCgroup":true}}}},
            "cni":{"binDir":"/opt/cni/bin","confDir":"/etc/kubernetes/cni/net.d"},
            "sandboxImage":"registry.k8s.io/pause:3.10"}"#;
        let c = ConfigSeen::from_json(v16).unwrap();
        assert_eq!(
            c.sandbox_image.as_deref(),
            Some("registry.k8s.io/pause:3.10")
        );
        assert_eq!(c.snapshotter.as_deref(), Some("native"));
        assert_eq!(c.cgroup_driver(), Some(CgroupDriver::Systemd));
        assert_eq!(c.cni_bin_dir.as_deref(), Some("/opt/cni/bin"));
        // 2.x: the runtime plugin's config, no sandbox image, binDirs.
        let v2 = r#"{"containerd":{"defaultRuntimeName":"runc",
            "runtimes":{"runc":{"runtimeType":"io.containerd.runc.v2","options":{}}}},
            "cni":{"binDir":"","binDirs":["/opt/cni/bin"],"confDir":"/etc/cni/net.d"},
            "containerdEndpoint":"/run/containerd/containerd.sock"}"#;
        let c = ConfigSeen::from_json(v2).unwrap();
        assert_eq!(c.sandbox_image, None);
        assert_eq!(c.snapshotter, None);
        assert_eq!(c.cgroup_driver(), Some(CgroupDriver::Cgroupfs));
        assert_eq!(c.cni_bin_dir.as_deref(), Some("/opt/cni/bin"));
        // A default runtime that is not reported says nothing of the driver.
        let c = ConfigSeen::from_json(r#"{"containerd":{"defaultRuntimeName":"crun"}}"#).unwrap();
        assert_eq!(c.cgroup_driver(), None);
        assert!(ConfigSeen::from_json("not json").is_none());
    }

    #[test]
    fn runtime_config_reads_the_cgroup_driver_with_systemd_as_zero() {
        // protoc --encode=RuntimeConfigResponse <<< 'linux { cgroup_driver: CGROUPFS }'
        assert_eq!(
            decode_runtime_config(b"\x0a\x02\x08\x01").unwrap(),
            CgroupDriver::Cgroupfs
        );
        // SYSTEMD is the zero value: protobuf leaves it out.
        assert_eq!(
            decode_runtime_config(b"\x0a\x00").unwrap(),
            CgroupDriver::Systemd
        );
        assert_eq!(decode_runtime_config(b"").unwrap(), CgroupDriver::Systemd);
        let err = decode_runtime_config(b"\x0a\x02\x08\x07").unwrap_err();
        assert!(err.to_string().contains("unknown cgroup driver 7"), "{err}");
    }

    #[test]
    fn the_config_file_of_containerds_command_line() {
        let f = |args: &[&str]| {
            config_of_command_line(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
                .display()
                .to_string()
        };
        assert_eq!(f(&["/usr/bin/containerd"]), DEFAULT_CONFIG);
        assert_eq!(
            f(&[
                "/usr/bin/containerd",
                "--config",
                "/usr/share/containerd/config.toml"
            ]),
            "/usr/share/containerd/config.toml"
        );
        assert_eq!(
            f(&["containerd", "--log-level", "debug", "-c", "/a.toml"]),
            "/a.toml"
        );
        assert_eq!(f(&["containerd", "--config=/b.toml"]), "/b.toml");
        assert_eq!(f(&["containerd", "-config", "/c.toml"]), "/c.toml");
        // A value that looks like the flag is not the flag.
        assert_eq!(f(&["containerd", "--root", "config"]), DEFAULT_CONFIG);
    }

    #[test]
    fn grpc_messages_are_percent_decoded() {
        assert_eq!(
            percent_decode("unknown service runtime.v1.RuntimeService%3A x%"),
            "unknown service runtime.v1.RuntimeService: x%"
        );
    }
}
