//! A TCP relay on the host: connections to one address are relayed, byte
//! for byte, to another. [`super::VmNode::forward_to_guest`] puts one in
//! front of QEMU's `hostfwd` listener on loopback, so that every connection
//! QEMU hands the guest comes from a loopback peer (see there why).

use anyhow::{Context, Result};
use std::io::ErrorKind;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// Relays connections to `listen` to `upstream` until dropped (live
/// connections then end with either side).
pub struct Relay {
    listen: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Relay {
    /// Binds `listen` now (the port is held from here on) and relays each
    /// connection to a new one to `upstream`; a connection `upstream`
    /// refuses (the VM is down) is closed at once.
    pub fn start(listen: SocketAddr, upstream: SocketAddr) -> Result<Relay> {
        let listener =
            TcpListener::bind(listen).with_context(|| format!("binding the relay at {listen}"))?;
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let _ = relay(client, upstream);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(50))
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        });
        Ok(Relay {
            listen,
            stop,
            thread: Some(thread),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.listen
    }
}

/// Connects to `upstream` and pumps both ways on two threads; each side's
/// end of stream is passed on as a half-close.
fn relay(client: TcpStream, upstream: SocketAddr) -> std::io::Result<()> {
    client.set_nonblocking(false)?;
    let server = TcpStream::connect_timeout(&upstream, Duration::from_secs(10))?;
    for (mut from, mut to) in [(client.try_clone()?, server.try_clone()?), (server, client)] {
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut from, &mut to);
            let _ = to.shutdown(Shutdown::Write);
        });
    }
    Ok(())
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn relays_both_ways_and_passes_the_end_of_stream_on() {
        // An upstream that answers with what it read, once the client ends.
        let up = TcpListener::bind("127.0.0.1:0").unwrap();
        let up_addr = up.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, peer) = up.accept().unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got).unwrap();
            s.write_all(&[b"echo: ".as_slice(), &got].concat()).unwrap();
            peer
        });
        let port = crate::kube::free_port();
        let relay = Relay::start(SocketAddr::from(([127, 0, 0, 1], port)), up_addr).unwrap();
        let mut c = TcpStream::connect(relay.addr()).unwrap();
        c.write_all(b"hello").unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        let mut answer = String::new();
        c.read_to_string(&mut answer).unwrap();
        assert_eq!(answer, "echo: hello");
        // The upstream saw the relay's own connection, from loopback.
        assert!(server.join().unwrap().ip().is_loopback());
    }

    #[test]
    fn a_refused_upstream_closes_the_client() {
        let closed = crate::kube::free_port();
        let port = crate::kube::free_port();
        let relay = Relay::start(
            SocketAddr::from(([127, 0, 0, 1], port)),
            SocketAddr::from(([127, 0, 0, 1], closed)),
        )
        .unwrap();
        let mut c = TcpStream::connect(relay.addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = Vec::new();
        assert!(matches!(c.read_to_end(&mut buf), Ok(0) | Err(_)), "{buf:?}");
    }
}
