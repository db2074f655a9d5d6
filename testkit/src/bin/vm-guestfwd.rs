//! `vm-guestfwd 127.0.0.1 PORT`: QEMU's `guestfwd=...-cmd:` helper for the
//! VM tier (testkit::vm). QEMU starts it once per connection the guest
//! opens to a forwarded address, with that connection as stdin/stdout; it
//! relays the bytes to and from a TCP server on the host's loopback (the
//! test's package server, API server stand-in...) until both sides close.
//! Only loopback destinations are accepted: the guest reaches nothing else.

use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, TcpStream};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [host, port] = args.as_slice() else {
        eprintln!("usage: vm-guestfwd 127.0.0.1 PORT");
        return ExitCode::from(2);
    };
    let ip: IpAddr = match host.parse() {
        Ok(ip) if IpAddr::is_loopback(&ip) => ip,
        _ => {
            eprintln!("vm-guestfwd: {host} is not a loopback address");
            return ExitCode::from(2);
        }
    };
    let Ok(port) = port.parse::<u16>() else {
        eprintln!("vm-guestfwd: bad port {port}");
        return ExitCode::from(2);
    };
    let upstream = match TcpStream::connect((ip, port)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("vm-guestfwd: connecting to {ip}:{port}: {e}");
            return ExitCode::from(1);
        }
    };
    // Guest -> server on a thread; server -> guest here. A side that ends
    // its stream is half-closed on the other, so HTTP/1.0-style bodies end.
    let mut to_server = upstream.try_clone().expect("cloning a TCP stream");
    let guest_to_server = std::thread::spawn(move || {
        let _ = copy(&mut std::io::stdin().lock(), &mut to_server);
        let _ = to_server.shutdown(Shutdown::Write);
    });
    let mut from_server = upstream;
    let _ = copy(&mut from_server, &mut std::io::stdout().lock());
    // The server is done: whatever the guest still sends has no reader.
    drop(guest_to_server);
    ExitCode::SUCCESS
}

/// Copies until end of stream, flushing after every read (stdout is
/// buffered; the guest must see each reply at once).
fn copy(from: &mut impl Read, to: &mut impl Write) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
        to.flush()?;
    }
}
