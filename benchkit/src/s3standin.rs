//! A loopback S3 stand-in for `bench/run.sh --quick` (`nb-bench s3`): serves
//! objects from memory over HTTP/1.1 keep-alive, path-style
//! (`/<bucket>/<key>`), `HEAD` and `GET` with a `Range` of one span, with the
//! headers the AWS SDKs and awscli read (`Content-Length`, `Content-Range`,
//! `ETag`, `Last-Modified`, `Accept-Ranges`). No authentication (signatures
//! are ignored), no other operation: just enough to download, at memory
//! speed, so a quick benchmark measures the downloader and not the server.
//! The run of record uses Garage (a real S3 server) instead.

use anyhow::{Context as _, Result};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;

/// One object: its bytes and ETag.
struct Object {
    body: Vec<u8>,
    etag: String,
}

/// Objects by path (`/<bucket>/<key>`).
#[derive(Default, Clone)]
pub struct Objects(Arc<HashMap<String, Object>>);

impl Objects {
    /// The objects to serve: `(bucket, key, bytes)`.
    pub fn new(objects: Vec<(String, String, Vec<u8>)>) -> Objects {
        let map = objects
            .into_iter()
            .map(|(bucket, key, body)| {
                let etag = format!("\"{:016x}-{}\"", fastrand::u64(..), body.len());
                (format!("/{bucket}/{key}"), Object { body, etag })
            })
            .collect();
        Objects(Arc::new(map))
    }
}

/// Listens on `addr` and serves `objects` until the process ends (one
/// thread per connection).
pub fn serve(listener: TcpListener, objects: Objects) -> Result<()> {
    for conn in listener.incoming() {
        let conn = conn.context("accepting a connection")?;
        let objects = objects.clone();
        std::thread::spawn(move || {
            let _ = connection(conn, &objects);
        });
    }
    Ok(())
}

/// Binds 127.0.0.1 on `port` (0: any free one).
pub fn bind(port: u16) -> Result<(TcpListener, SocketAddr)> {
    let l = TcpListener::bind(("127.0.0.1", port)).context("binding 127.0.0.1")?;
    let addr = l.local_addr()?;
    Ok((l, addr))
}

/// A request's method, path (no query) and `Range` header.
struct Request {
    method: String,
    path: String,
    range: Option<String>,
}

fn read_request(r: &mut impl BufRead) -> std::io::Result<Option<Request>> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let target = parts.next().unwrap_or("/");
    let path = target.split('?').next().unwrap_or("/").to_string();
    let mut range = None;
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h)? == 0 || h.trim_end().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            let (k, v) = (k.trim(), v.trim());
            if k.eq_ignore_ascii_case("range") {
                range = Some(v.to_string());
            } else if k.eq_ignore_ascii_case("content-length") {
                length = v.parse().unwrap_or(0);
            }
        }
    }
    std::io::copy(&mut r.by_ref().take(length as u64), &mut std::io::sink())?;
    Ok(Some(Request {
        method,
        path: percent_decode(&path),
        range,
    }))
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Some(v) = std::str::from_utf8(&b[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `bytes=a-b`, `bytes=a-`, `bytes=-n` over `total` -> `[start, end)`;
/// `None` when it cannot be satisfied.
fn parse_range(v: &str, total: usize) -> Option<(usize, usize)> {
    let spec = v.strip_prefix("bytes=")?;
    let (a, b) = spec.split_once('-')?;
    let (start, end) = match (a.trim(), b.trim()) {
        ("", n) => (total.saturating_sub(n.parse().ok()?), total),
        (a, "") => (a.parse().ok()?, total),
        (a, b) => (a.parse().ok()?, (b.parse::<usize>().ok()? + 1).min(total)),
    };
    (start < total && start < end).then_some((start, end))
}

fn connection(conn: TcpStream, objects: &Objects) -> std::io::Result<()> {
    conn.set_nodelay(true)?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut out = conn;
    while let Some(req) = read_request(&mut reader)? {
        respond(&mut out, &req, objects)?;
    }
    Ok(())
}

fn respond(out: &mut TcpStream, req: &Request, objects: &Objects) -> std::io::Result<()> {
    const DATE: &str = "Tue, 14 Nov 2023 22:13:20 GMT";
    let Some(obj) = objects.0.get(&req.path) else {
        let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>NoSuchKey</Code><Message>no such key</Message></Error>";
        let head = format!(
            "HTTP/1.1 404 Not Found\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n\r\n",
            if req.method == "HEAD" { 0 } else { body.len() }
        );
        out.write_all(head.as_bytes())?;
        if req.method != "HEAD" {
            out.write_all(body.as_bytes())?;
        }
        return Ok(());
    };
    let total = obj.body.len();
    let (status, start, end) = match req.range.as_deref().map(|r| parse_range(r, total)) {
        None => ("200 OK", 0, total),
        Some(Some((a, b))) => ("206 Partial Content", a, b),
        Some(None) => {
            let head = format!(
                "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{total}\r\nContent-Length: 0\r\n\r\n"
            );
            return out.write_all(head.as_bytes());
        }
    };
    let mut head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\nETag: {}\r\nLast-Modified: {DATE}\r\nAccept-Ranges: bytes\r\n",
        end - start,
        obj.etag
    );
    if status.starts_with("206") {
        head.push_str(&format!(
            "Content-Range: bytes {start}-{}/{total}\r\n",
            end - 1
        ));
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes())?;
    if req.method == "GET" {
        out.write_all(&obj.body[start..end])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(parse_range("bytes=0-9", 100), Some((0, 10)));
        assert_eq!(parse_range("bytes=90-200", 100), Some((90, 100)));
        assert_eq!(parse_range("bytes=95-", 100), Some((95, 100)));
        assert_eq!(parse_range("bytes=-5", 100), Some((95, 100)));
        assert_eq!(parse_range("bytes=100-", 100), None);
        assert_eq!(percent_decode("/b/a%2Fb.tar.gz"), "/b/a/b.tar.gz");
    }

    #[test]
    fn serves_ranges_over_keep_alive() {
        let (l, addr) = bind(0).unwrap();
        let objects = Objects::new(vec![("b".into(), "k".into(), (0..=255u8).collect())]);
        std::thread::spawn(move || serve(l, objects));
        let mut c = TcpStream::connect(addr).unwrap();
        let mut r = BufReader::new(c.try_clone().unwrap());
        for (range, want) in [
            ("bytes=0-3", vec![0u8, 1, 2, 3]),
            ("bytes=250-", vec![250, 251, 252, 253, 254, 255]),
        ] {
            write!(
                c,
                "GET /b/k?x-id=GetObject HTTP/1.1\r\nHost: x\r\nRange: {range}\r\n\r\n"
            )
            .unwrap();
            let mut len = 0;
            let mut status = String::new();
            r.read_line(&mut status).unwrap();
            assert!(status.starts_with("HTTP/1.1 206"), "{status}");
            loop {
                let mut h = String::new();
                r.read_line(&mut h).unwrap();
                if h.trim().is_empty() {
                    break;
                }
                if let Some(v) = h.strip_prefix("Content-Length: ") {
                    len = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; len];
            std::io::Read::read_exact(&mut r, &mut body).unwrap();
            assert_eq!(body, want);
        }
    }
}
