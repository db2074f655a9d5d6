//! A local HTTP/1.1 server for packages and manifests, with fault
//! injection: status codes (5xx, 404), truncated bodies, stalls, ignored or
//! honoured `Range` requests, and a bandwidth limit so a test can kill a
//! download half-way.
//!
//! It listens on 127.0.0.1 (an ephemeral port), serves files registered
//! with [`PkgServer::put`] from memory, logs every request, and stops when
//! dropped (also when the test panics).

use anyhow::{Context, Result};
use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// A fault for one request to a path (queued; each request takes one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Answer with this status and an empty body (e.g. 503, 500, 404).
    Status(u16),
    /// Send the headers for the whole body, then only this many bytes of
    /// it, then close the connection.
    Truncate(usize),
    /// Send this many bytes of the body, then stop sending (keep the
    /// connection open) for the duration, then close.
    Stall(usize, Duration),
    /// Serve the whole body, but with this byte replaced (flipped).
    Corrupt(usize),
}

/// One request as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// The `Range` header, if any.
    pub range: Option<String>,
    /// The status answered.
    pub status: u16,
}

#[derive(Default)]
struct State {
    files: HashMap<String, Vec<u8>>,
    faults: HashMap<String, VecDeque<Fault>>,
    rates: HashMap<String, u64>,
    no_ranges: bool,
    log: Vec<Request>,
}

pub struct PkgServer {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl PkgServer {
    /// Starts a server on 127.0.0.1 with an ephemeral port.
    pub fn start() -> Result<PkgServer> {
        let listener = TcpListener::bind("127.0.0.1:0").context("binding 127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let state = state.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let state = state.clone();
                    let stop = stop.clone();
                    std::thread::spawn(move || {
                        let _ = serve(conn, &state, &stop);
                    });
                }
            })
        };
        Ok(PkgServer {
            addr,
            state,
            stop,
            thread: Some(thread),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port><path>` (`path` starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Serves `data` at `path`.
    pub fn put(&self, path: &str, data: impl Into<Vec<u8>>) {
        self.state
            .lock()
            .unwrap()
            .files
            .insert(path.to_string(), data.into());
    }

    /// What is served at `path`.
    pub fn get(&self, path: &str) -> Option<Vec<u8>> {
        self.state.lock().unwrap().files.get(path).cloned()
    }

    /// Stops serving `path` (404 from now on).
    pub fn remove(&self, path: &str) {
        self.state.lock().unwrap().files.remove(path);
    }

    /// Queues a fault for the next request to `path`.
    pub fn fail_next(&self, path: &str, fault: Fault) {
        self.state
            .lock()
            .unwrap()
            .faults
            .entry(path.to_string())
            .or_default()
            .push_back(fault);
    }

    /// Limits the body of `path` to about `bytes_per_sec` (None: no limit).
    pub fn set_rate(&self, path: &str, bytes_per_sec: Option<u64>) {
        let mut s = self.state.lock().unwrap();
        match bytes_per_sec {
            Some(r) => {
                s.rates.insert(path.to_string(), r.max(1));
            }
            None => {
                s.rates.remove(path);
            }
        }
    }

    /// Whether `Range` requests are honoured (default true).
    pub fn set_ranges(&self, enabled: bool) {
        self.state.lock().unwrap().no_ranges = !enabled;
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Request> {
        self.state.lock().unwrap().log.clone()
    }

    /// Requests for `path` so far.
    pub fn requests_for(&self, path: &str) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(|r| r.path == path)
            .collect()
    }
}

impl Drop for PkgServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(mut conn: TcpStream, state: &Mutex<State>, stop: &AtomicBool) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let target = parts.next().unwrap_or("/").to_string();
    let path = target.split('?').next().unwrap_or("/").to_string();
    let mut range = None;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 {
            break;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':')
            && k.trim().eq_ignore_ascii_case("range")
        {
            range = Some(v.trim().to_string());
        }
    }
    // Drain nothing else: requests have no body.
    let (file, fault, rate, no_ranges) = {
        let mut s = state.lock().unwrap();
        let fault = s.faults.get_mut(&path).and_then(|q| q.pop_front());
        (
            s.files.get(&path).cloned(),
            fault,
            s.rates.get(&path).copied(),
            s.no_ranges,
        )
    };
    let log = |status: u16| {
        state.lock().unwrap().log.push(Request {
            method: method.clone(),
            path: path.clone(),
            range: range.clone(),
            status,
        })
    };
    if method != "GET" && method != "HEAD" {
        log(405);
        return respond_empty(&mut conn, 405, "Method Not Allowed");
    }
    if let Some(Fault::Status(code)) = fault {
        log(code);
        return respond_empty(&mut conn, code, reason(code));
    }
    let Some(mut body) = file else {
        log(404);
        return respond_empty(&mut conn, 404, "Not Found");
    };
    if let Some(Fault::Corrupt(i)) = fault
        && i < body.len()
    {
        body[i] ^= 0xff;
    }
    let total = body.len();
    let mut start = 0usize;
    let mut end = total; // exclusive
    let mut status = 200u16;
    if let (Some(r), false) = (&range, no_ranges) {
        match parse_range(r, total) {
            Some(Ok((a, b))) => {
                start = a;
                end = b;
                status = 206;
            }
            Some(Err(())) => {
                log(416);
                let head = format!(
                    "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{total}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
                return conn.write_all(head.as_bytes());
            }
            None => {}
        }
    }
    log(status);
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        reason(status),
        end - start
    );
    if !no_ranges {
        head.push_str("Accept-Ranges: bytes\r\n");
    }
    if status == 206 {
        head.push_str(&format!(
            "Content-Range: bytes {start}-{}/{total}\r\n",
            end - 1
        ));
    }
    head.push_str("\r\n");
    conn.write_all(head.as_bytes())?;
    if method == "HEAD" {
        return Ok(());
    }
    let slice = &body[start..end];
    let (send, stall) = match fault {
        Some(Fault::Truncate(n)) => (&slice[..n.min(slice.len())], None),
        Some(Fault::Stall(n, d)) => (&slice[..n.min(slice.len())], Some(d)),
        _ => (slice, None),
    };
    match rate {
        None => conn.write_all(send)?,
        Some(r) => {
            let chunk = (r as usize / 20).max(1);
            for c in send.chunks(chunk) {
                if stop.load(Ordering::SeqCst) {
                    return Ok(());
                }
                conn.write_all(c)?;
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    conn.flush()?;
    if let Some(d) = stall {
        let until = std::time::Instant::now() + d;
        while std::time::Instant::now() < until && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let _ = conn.shutdown(std::net::Shutdown::Both);
    // Read whatever the client still sends so it sees a clean close.
    let mut sink = [0u8; 512];
    let _ = conn.set_read_timeout(Some(Duration::from_millis(100)));
    let _ = conn.read(&mut sink);
    Ok(())
}

/// `bytes=A-`, `bytes=A-B`, `bytes=-N`. `None` when not a single byte range
/// (served whole), `Err` when unsatisfiable.
fn parse_range(r: &str, total: usize) -> Option<std::result::Result<(usize, usize), ()>> {
    let spec = r.strip_prefix("bytes=")?;
    if spec.contains(',') {
        return None;
    }
    let (a, b) = spec.split_once('-')?;
    let (a, b) = (a.trim(), b.trim());
    if a.is_empty() {
        let n: usize = b.parse().ok()?;
        if n == 0 || total == 0 {
            return Some(Err(()));
        }
        return Some(Ok((total.saturating_sub(n), total)));
    }
    let start: usize = a.parse().ok()?;
    if start >= total {
        return Some(Err(()));
    }
    let end = if b.is_empty() {
        total
    } else {
        let e: usize = b.parse().ok()?;
        if e < start {
            return None;
        }
        (e + 1).min(total)
    };
    Some(Ok((start, end)))
}

fn respond_empty(conn: &mut TcpStream, code: u16, reason: &str) -> std::io::Result<()> {
    let head =
        format!("HTTP/1.1 {code} {reason}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    conn.write_all(head.as_bytes())
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        206 => "Partial Content",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(url: &str, range: Option<&str>) -> (u16, String, Vec<u8>) {
        let u = url.strip_prefix("http://").unwrap();
        let (host, path) = u.split_at(u.find('/').unwrap());
        let mut c = TcpStream::connect(host).unwrap();
        let mut req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n");
        if let Some(r) = range {
            req.push_str(&format!("Range: {r}\r\n"));
        }
        req.push_str("\r\n");
        c.write_all(req.as_bytes()).unwrap();
        let mut buf = Vec::new();
        let _ = c.read_to_end(&mut buf);
        let split = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let head = String::from_utf8_lossy(&buf[..split]).into_owned();
        let status = head[9..12].parse().unwrap();
        (status, head, buf[split + 4..].to_vec())
    }

    #[test]
    fn serves_ranges_faults_and_logs() {
        let s = PkgServer::start().unwrap();
        s.put("/a", b"0123456789".to_vec());
        assert_eq!(get(&s.url("/a"), None).2, b"0123456789");
        let (st, head, body) = get(&s.url("/a"), Some("bytes=4-"));
        assert_eq!((st, body.as_slice()), (206, &b"456789"[..]));
        assert!(head.contains("Content-Range: bytes 4-9/10"), "{head}");
        assert_eq!(get(&s.url("/a"), Some("bytes=10-")).0, 416);
        s.fail_next("/a", Fault::Status(503));
        assert_eq!(get(&s.url("/a"), None).0, 503);
        s.fail_next("/a", Fault::Truncate(3));
        let (st, head, body) = get(&s.url("/a"), None);
        assert_eq!((st, body.as_slice()), (200, &b"012"[..]));
        assert!(head.contains("Content-Length: 10"));
        s.fail_next("/a", Fault::Corrupt(0));
        assert_eq!(get(&s.url("/a"), None).2[1..], b"123456789"[..]);
        s.set_ranges(false);
        assert_eq!(get(&s.url("/a"), Some("bytes=4-")).0, 200);
        assert_eq!(get(&s.url("/nope"), None).0, 404);
        let log = s.requests_for("/a");
        assert_eq!(log.len(), 7);
        assert_eq!(log[2].status, 416);
        assert_eq!(log[1].range.as_deref(), Some("bytes=4-"));
        assert_eq!(log[3].status, 503);
    }
}
