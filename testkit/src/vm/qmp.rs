//! QEMU's machine protocol (QMP), only as far as the VM tier needs it: why
//! a boot ended. QEMU runs with `-no-reboot`, so both a guest reboot and a
//! poweroff end the process; the `SHUTDOWN` event's `reason` tells them
//! apart (`guest-reset` vs `guest-shutdown`). A power cut (SIGKILL) sends
//! no event at all.

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Watches one QEMU process's events on a thread until QEMU exits.
pub struct QmpWatch {
    shutdown: Arc<Mutex<Option<String>>>,
    closed: Arc<AtomicBool>,
}

impl QmpWatch {
    /// Connects to the QMP socket (waiting up to `timeout` for QEMU to
    /// create it) and starts following events.
    pub fn connect(socket: &Path, timeout: Duration) -> Result<QmpWatch> {
        let deadline = Instant::now() + timeout;
        let stream = loop {
            match UnixStream::connect(socket) {
                Ok(s) => break s,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => {
                    return Err(e).with_context(|| format!("connecting to {}", socket.display()));
                }
            }
        };
        stream.set_read_timeout(Some(timeout))?;
        let mut writer = stream.try_clone()?;
        let mut reader = BufReader::new(stream);
        let greeting = read_json(&mut reader)?;
        if greeting.get("QMP").is_none() {
            bail!("not a QMP greeting: {greeting}");
        }
        writeln!(writer, "{}", json!({"execute": "qmp_capabilities"}))?;
        loop {
            let v = read_json(&mut reader)?;
            if v.get("return").is_some() {
                break;
            }
            if v.get("error").is_some() {
                bail!("qmp_capabilities: {v}");
            }
        }
        reader.get_ref().set_read_timeout(None)?;
        let shutdown = Arc::new(Mutex::new(None));
        let seen = shutdown.clone();
        let closed = Arc::new(AtomicBool::new(false));
        let closed_by_qemu = closed.clone();
        std::thread::spawn(move || {
            // Ends when QEMU closes the socket (it exited).
            while let Ok(v) = read_json(&mut reader) {
                if v.get("event") == Some(&json!("SHUTDOWN")) {
                    let reason = v["data"]["reason"]
                        .as_str()
                        .unwrap_or("unknown")
                        .to_string();
                    *seen.lock().unwrap() = Some(reason);
                }
            }
            drop(writer);
            closed_by_qemu.store(true, Ordering::SeqCst);
        });
        Ok(QmpWatch { shutdown, closed })
    }

    /// The reason of the `SHUTDOWN` event, if QEMU sent one. Call it once
    /// QEMU has exited: it waits (up to 2 s) until every event QEMU sent
    /// before it closed the socket has been read.
    pub fn shutdown_reason(&self) -> Option<String> {
        let deadline = Instant::now() + Duration::from_secs(2);
        while !self.closed.load(Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.shutdown.lock().unwrap().clone()
    }
}

fn read_json(reader: &mut BufReader<UnixStream>) -> Result<Value> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        bail!("QMP socket closed");
    }
    serde_json::from_str(line.trim()).with_context(|| format!("QMP sent {line:?}"))
}
