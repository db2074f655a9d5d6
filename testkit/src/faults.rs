//! A fault-injecting TCP proxy on loopback, for the network-fault campaign
//! (`tests/inprocess/reliability_faults.rs`): put it in front of any server (the S3
//! stand-in, the package server, the API server stand-in over TLS) and
//! queue faults; each new connection takes the next queued fault, and
//! connections after the queue is empty are forwarded untouched.
//!
//! Transport faults work for any protocol (TLS included): reset, stall,
//! truncation and corruption of the server's bytes. HTTP faults
//! ([`NetFault::Status`], [`NetFault::WrongLength`]) need a plain-HTTP
//! upstream: the proxy reads the request head and answers itself, or
//! rewrites the response's `Content-Length`.
//!
//! Everything the proxy did is logged ([`FaultProxy::log`]). It stops when
//! dropped: the listener closes, live connections are shut down.

use anyhow::Result;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What one connection gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetFault {
    /// Reset (RST) the client's connection at once.
    Reset,
    /// Forward this many bytes of the server's answer, then reset.
    ResetAfter(usize),
    /// Forward this many bytes of the server's answer, then send nothing
    /// for the duration (connection open), then close.
    StallAfter(usize, Duration),
    /// Forward this many bytes of the server's answer, then close cleanly.
    Truncate(usize),
    /// Flip every bit of the server's byte at this offset.
    Corrupt(usize),
    /// HTTP: answer the request with this status (and `Retry-After`)
    /// without asking the server.
    Status(u16, Option<u64>),
    /// HTTP: forward the server's answer with its `Content-Length` changed
    /// by this many bytes (the body is unchanged).
    WrongLength(i64),
}

impl NetFault {
    /// A short name for logs and test messages.
    pub fn name(&self) -> String {
        match self {
            NetFault::Reset => "reset".into(),
            NetFault::ResetAfter(n) => format!("reset after {n} bytes"),
            NetFault::StallAfter(n, d) => format!("stall {d:?} after {n} bytes"),
            NetFault::Truncate(n) => format!("truncated after {n} bytes"),
            NetFault::Corrupt(n) => format!("corrupt byte {n}"),
            NetFault::Status(c, Some(s)) => format!("HTTP {c} Retry-After {s}"),
            NetFault::Status(c, None) => format!("HTTP {c}"),
            NetFault::WrongLength(d) => format!("Content-Length {d:+}"),
        }
    }
}

#[derive(Default)]
struct State {
    queue: VecDeque<NetFault>,
    log: Vec<String>,
    connections: usize,
}

pub struct FaultProxy {
    port: u16,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    live: Arc<Mutex<Vec<TcpStream>>>,
}

impl FaultProxy {
    /// Forwards 127.0.0.1:<new port> to 127.0.0.1:`upstream`.
    pub fn start(upstream: u16) -> Result<FaultProxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        listener.set_nonblocking(true)?;
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let live = Arc::new(Mutex::new(Vec::new()));
        let (st, sp, lv) = (state.clone(), stop.clone(), live.clone());
        std::thread::spawn(move || {
            while !sp.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        let _ = conn.set_nonblocking(false);
                        if let Ok(c) = conn.try_clone() {
                            lv.lock().unwrap().push(c);
                        }
                        let fault = {
                            let mut s = st.lock().unwrap();
                            s.connections += 1;
                            s.queue.pop_front()
                        };
                        let st = st.clone();
                        std::thread::spawn(move || {
                            let what = fault.as_ref().map_or("clean".into(), NetFault::name);
                            let r = handle(conn, upstream, fault);
                            st.lock().unwrap().log.push(match r {
                                Ok(()) => what,
                                Err(e) => format!("{what}: {e}"),
                            });
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        Ok(FaultProxy {
            port,
            state,
            stop,
            live,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:<port>`
    pub fn http_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `https://127.0.0.1:<port>`
    pub fn https_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// Queues faults for the next connections, in order.
    pub fn queue(&self, faults: impl IntoIterator<Item = NetFault>) {
        self.state.lock().unwrap().queue.extend(faults);
    }

    /// Faults still queued.
    pub fn pending(&self) -> usize {
        self.state.lock().unwrap().queue.len()
    }

    /// Drops the queued faults.
    pub fn clear(&self) {
        self.state.lock().unwrap().queue.clear();
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.state.lock().unwrap().connections
    }

    /// What each finished connection got.
    pub fn log(&self) -> Vec<String> {
        self.state.lock().unwrap().log.clone()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for c in self.live.lock().unwrap().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
}

fn reset(conn: &TcpStream) {
    // Linger 0: close sends RST, not FIN.
    let _ = socket_linger0(conn);
    let _ = conn.shutdown(Shutdown::Both);
}

fn socket_linger0(conn: &TcpStream) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let l = nix::libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    let rc = unsafe {
        nix::libc::setsockopt(
            conn.as_raw_fd(),
            nix::libc::SOL_SOCKET,
            nix::libc::SO_LINGER,
            (&l as *const nix::libc::linger).cast(),
            std::mem::size_of::<nix::libc::linger>() as nix::libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Reads an HTTP request head (through the blank line).
fn read_head<R: BufRead>(r: &mut R) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::new();
    loop {
        let n = r.read_until(b'\n', &mut head)?;
        if n == 0 || head.ends_with(b"\r\n\r\n") || head.len() > 64 * 1024 {
            return Ok(head);
        }
    }
}

fn handle(conn: TcpStream, upstream: u16, fault: Option<NetFault>) -> Result<()> {
    match fault {
        Some(NetFault::Reset) => {
            reset(&conn);
            return Ok(());
        }
        Some(NetFault::Status(code, retry_after)) => {
            let mut r = BufReader::new(conn.try_clone()?);
            read_head(&mut r)?;
            let body = format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{}</Code><Message>injected</Message></Error>",
                match code {
                    503 => "SlowDown",
                    429 => "TooManyRequests",
                    _ => "InternalError",
                }
            );
            let mut w = conn;
            write!(
                w,
                "HTTP/1.1 {code} Injected\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n{}Connection: close\r\n\r\n{body}",
                body.len(),
                retry_after.map_or(String::new(), |s| format!("Retry-After: {s}\r\n"))
            )?;
            let _ = w.shutdown(Shutdown::Both);
            return Ok(());
        }
        _ => {}
    }
    let server = TcpStream::connect(("127.0.0.1", upstream))?;
    let (c2, s2) = (conn.try_clone()?, server.try_clone()?);
    // Client -> server: untouched.
    let up = std::thread::spawn(move || {
        let (mut c, mut s) = (c2, s2);
        let _ = std::io::copy(&mut c, &mut s);
        let _ = s.shutdown(Shutdown::Write);
    });
    // Server -> client: the fault applies here.
    let res = downstream(server, conn, fault);
    let _ = up.join();
    res
}

fn downstream(server: TcpStream, client: TcpStream, fault: Option<NetFault>) -> Result<()> {
    let mut s = server;
    let mut c = client;
    let mut sent = 0usize;
    let mut buf = vec![0u8; 64 * 1024];
    if let Some(NetFault::WrongLength(delta)) = fault {
        // Rewrite the first response's Content-Length, then pass through.
        let mut r = BufReader::new(s.try_clone()?);
        let head = read_head(&mut r)?;
        let text = String::from_utf8_lossy(&head).into_owned();
        let fixed: Vec<String> = text
            .split("\r\n")
            .map(|l| match l.split_once(':') {
                Some((k, v)) if k.trim().eq_ignore_ascii_case("content-length") => {
                    let n: i64 = v.trim().parse().unwrap_or(0);
                    format!("Content-Length: {}", (n + delta).max(0))
                }
                _ => l.to_string(),
            })
            .collect();
        c.write_all(fixed.join("\r\n").as_bytes())?;
        let _ = std::io::copy(&mut r, &mut c);
        let _ = c.shutdown(Shutdown::Both);
        return Ok(());
    }
    loop {
        let n = match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &mut buf[..n];
        match &fault {
            Some(NetFault::Corrupt(at)) if *at >= sent && *at < sent + n => {
                chunk[*at - sent] ^= 0xff;
            }
            Some(NetFault::ResetAfter(lim))
            | Some(NetFault::Truncate(lim))
            | Some(NetFault::StallAfter(lim, _))
                if sent + n >= *lim =>
            {
                let keep = lim - sent.min(*lim);
                c.write_all(&chunk[..keep])?;
                c.flush()?;
                match &fault {
                    Some(NetFault::ResetAfter(_)) => reset(&c),
                    Some(NetFault::StallAfter(_, d)) => {
                        std::thread::sleep(*d);
                        let _ = c.shutdown(Shutdown::Both);
                    }
                    _ => {
                        let _ = c.shutdown(Shutdown::Both);
                    }
                }
                let _ = s.shutdown(Shutdown::Both);
                return Ok(());
            }
            _ => {}
        }
        if c.write_all(chunk).is_err() {
            break;
        }
        sent += n;
    }
    let _ = c.shutdown(Shutdown::Write);
    Ok(())
}
