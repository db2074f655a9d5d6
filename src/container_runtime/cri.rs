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

use crate::error::{Error, Result};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use std::path::Path;
use std::time::Duration;

/// A CRI API version, as in the gRPC package name.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum CriApi {
    /// `runtime.v1alpha2`: kubelet 1.20 to 1.25.
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
}

/// What containerd's CRI plugin says it runs with (the `config` entry of
/// a verbose `Status`: its CRI configuration as JSON). Each is `None`
/// where the answer did not say.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct ConfigSeen {
    /// The default runtime's `SystemdCgroup` option: whether runc places
    /// containers through systemd (the kubelet's cgroup driver must agree).
    pub systemd_cgroup: Option<bool>,
    pub sandbox_image: Option<String>,
    pub snapshotter: Option<String>,
    pub cni_conf_dir: Option<String>,
}

impl ConfigSeen {
    /// Reads containerd's JSON; `None` when it is not JSON.
    fn from_json(text: &str) -> Option<ConfigSeen> {
        let v: serde_json::Value = serde_json::from_str(text).ok()?;
        let str_at = |ptr: &str| v.pointer(ptr).and_then(|x| x.as_str()).map(str::to_string);
        let default_runtime =
            str_at("/containerd/defaultRuntimeName").unwrap_or_else(|| "runc".into());
        let options = format!("/containerd/runtimes/{default_runtime}/options/SystemdCgroup");
        Some(ConfigSeen {
            systemd_cgroup: v.pointer(&options).and_then(|x| x.as_bool()),
            sandbox_image: str_at("/sandboxImage"),
            snapshotter: str_at("/containerd/snapshotter"),
            cni_conf_dir: str_at("/cni/confDir"),
        })
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
    let (answers, config) = answers;
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
        }),
        None => Err(Error::refused(format!(
            "{} serves no CRI API the kubelet speaks (neither runtime.v1 nor runtime.v1alpha2 answers Version)",
            at()
        ))),
    }
}

type Answers = (Vec<(CriApi, Option<RuntimeVersion>)>, Option<ConfigSeen>);

async fn ask_all(socket: &Path) -> Result<Answers> {
    let stream = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(|e| Error::retryable(format!("cannot connect: {e}")))?;
    let (client, connection) = h2::client::handshake(stream)
        .await
        .map_err(|e| Error::retryable(format!("HTTP/2 handshake failed: {e}")))?;
    let conn = tokio::spawn(async move {
        // Ends with an error when the client side is dropped; nothing to report.
        let _ = connection.await;
    });
    let result = ask_on(client).await;
    conn.abort();
    result
}

async fn ask_on(client: h2::client::SendRequest<Bytes>) -> Result<Answers> {
    let mut out = Vec::new();
    for api in CriApi::ALL {
        match call(client.clone(), api).await {
            Ok(v) => out.push((api, Some(v))),
            Err(CallError::Unimplemented) => out.push((api, None)),
            Err(CallError::Failed(e)) => {
                return Err(e.context(format!("CRI {} Version", api.name())));
            }
        }
    }
    let Some(api) = out.iter().find(|(_, v)| v.is_some()).map(|(api, _)| *api) else {
        return Ok((out, None));
    };
    let status = match unary(client, api.status_path(), STATUS_VERBOSE).await {
        Ok(message) => message,
        Err(CallError::Unimplemented) => return Ok((out, None)),
        Err(CallError::Failed(e)) => return Err(e.context(format!("CRI {} Status", api.name()))),
    };
    let info = decode_status_info(&status)?;
    let config = info
        .iter()
        .find(|(k, _)| k == "config")
        .and_then(|(_, v)| ConfigSeen::from_json(v));
    Ok((out, config))
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
    fn grpc_messages_are_percent_decoded() {
        assert_eq!(
            percent_decode("unknown service runtime.v1.RuntimeService%3A x%"),
            "unknown service runtime.v1.RuntimeService: x%"
        );
    }
}
