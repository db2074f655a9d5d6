//! A client for QEMU's guest agent (`qemu-guest-agent` in the image, on a
//! virtio-serial port; the host end is a unix socket): run commands in the
//! guest (`guest-exec`) and read files (`guest-file-*`) without a network
//! or a login. The agent answers one client at a time, so a [`Qga`] keeps
//! one connection and serializes calls.
//!
//! Protocol: line-delimited JSON. A fresh connection may hold stale bytes
//! from an earlier client, so it starts with `guest-sync-delimited`: the
//! agent answers with 0xFF followed by the echoed id, after which replies
//! line up with requests.

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What a command run in the guest did.
#[derive(Debug, Clone)]
pub struct GuestOutput {
    /// Exit code; `None` if it was killed by a signal.
    pub code: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl GuestOutput {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    pub fn stdout_str(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    pub fn stderr_str(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

struct Conn {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

pub struct Qga {
    socket: PathBuf,
    conn: Mutex<Option<Conn>>,
}

impl Qga {
    pub fn new(socket: &Path) -> Qga {
        Qga {
            socket: socket.into(),
            conn: Mutex::new(None),
        }
    }

    /// Forgets the connection (the VM it talked to is gone).
    pub fn reset(&self) {
        *self.conn.lock().unwrap() = None;
    }

    /// One request; `timeout` bounds the wait for its reply.
    pub fn call(&self, command: &str, args: Option<Value>, timeout: Duration) -> Result<Value> {
        let mut guard = self.conn.lock().unwrap();
        if guard.is_none() {
            *guard = Some(self.connect(timeout)?);
        }
        let conn = guard.as_mut().expect("connected");
        let mut req = json!({"execute": command});
        if let Some(a) = args {
            req["arguments"] = a;
        }
        let result = (|| -> Result<Value> {
            conn.writer.set_write_timeout(Some(timeout))?;
            conn.reader.get_ref().set_read_timeout(Some(timeout))?;
            writeln!(conn.writer, "{req}")?;
            let reply = read_reply(&mut conn.reader)?;
            if let Some(e) = reply.get("error") {
                bail!("guest agent: {command} failed: {e}");
            }
            Ok(reply.get("return").cloned().unwrap_or(Value::Null))
        })();
        if result.is_err() {
            // Out of step or dead: start over with a fresh sync next time.
            *guard = None;
        }
        result
    }

    fn connect(&self, timeout: Duration) -> Result<Conn> {
        let stream = UnixStream::connect(&self.socket)
            .with_context(|| format!("connecting to {}", self.socket.display()))?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        let mut writer = stream.try_clone()?;
        let mut reader = BufReader::new(stream);
        let id = u32::from(std::process::id() as u16) << 16 | fastrand_u16();
        writer.write_all(b"\xff")?;
        writeln!(
            writer,
            "{}",
            json!({"execute": "guest-sync-delimited", "arguments": {"id": id}})
        )?;
        let deadline = Instant::now() + timeout;
        loop {
            if Instant::now() > deadline {
                bail!("guest agent did not answer the sync");
            }
            let reply = read_reply(&mut reader)?;
            if reply.get("return") == Some(&json!(id)) {
                return Ok(Conn { reader, writer });
            }
        }
    }

    /// Whether the agent answers (`guest-ping`) within `timeout`.
    pub fn ping(&self, timeout: Duration) -> bool {
        self.call("guest-ping", None, timeout).is_ok()
    }

    /// Runs `argv` in the guest (as root, no shell) and waits up to
    /// `timeout` for it to end.
    pub fn exec(&self, argv: &[&str], timeout: Duration) -> Result<GuestOutput> {
        let (path, args) = argv.split_first().context("empty command")?;
        let started = self.call(
            "guest-exec",
            Some(json!({"path": path, "arg": args, "capture-output": true})),
            Duration::from_secs(30),
        )?;
        let pid = started["pid"]
            .as_i64()
            .context("guest-exec returned no pid")?;
        let deadline = Instant::now() + timeout;
        let mut pause = Duration::from_millis(20);
        loop {
            let st = self.call(
                "guest-exec-status",
                Some(json!({"pid": pid})),
                Duration::from_secs(30),
            )?;
            if st["exited"] == json!(true) {
                let b64 = |k: &str| -> Result<Vec<u8>> {
                    match st.get(k).and_then(Value::as_str) {
                        Some(s) => Ok(base64::engine::general_purpose::STANDARD.decode(s)?),
                        None => Ok(Vec::new()),
                    }
                };
                return Ok(GuestOutput {
                    code: st["exitcode"].as_i64().map(|c| c as i32),
                    stdout: b64("out-data")?,
                    stderr: b64("err-data")?,
                });
            }
            if Instant::now() > deadline {
                bail!("{argv:?} still running in the guest after {timeout:?}");
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(250));
        }
    }

    /// The contents of `path` in the guest, `None` if it does not exist.
    pub fn read_file(&self, path: &str) -> Result<Option<Vec<u8>>> {
        let t = Duration::from_secs(30);
        let handle = match self.call(
            "guest-file-open",
            Some(json!({"path": path, "mode": "r"})),
            t,
        ) {
            Ok(h) => h,
            Err(e) if format!("{e:#}").contains("No such file") => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut data = Vec::new();
        let result = (|| -> Result<()> {
            loop {
                let r = self.call(
                    "guest-file-read",
                    Some(json!({"handle": handle, "count": 1 << 20})),
                    t,
                )?;
                let chunk = r["buf-b64"]
                    .as_str()
                    .context("guest-file-read: no buf-b64")?;
                data.extend(base64::engine::general_purpose::STANDARD.decode(chunk)?);
                if r["eof"] == json!(true) {
                    return Ok(());
                }
            }
        })();
        let _ = self.call("guest-file-close", Some(json!({"handle": handle})), t);
        result.map(|()| Some(data))
    }
}

fn read_reply(reader: &mut BufReader<UnixStream>) -> Result<Value> {
    loop {
        let mut line = Vec::new();
        let n = reader
            .read_until(b'\n', &mut line)
            .context("reading from the guest agent")?;
        if n == 0 {
            bail!("the guest agent closed the connection");
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_start_matches('\u{fffd}').trim();
        if text.is_empty() {
            continue;
        }
        let v: Value =
            serde_json::from_str(text).with_context(|| format!("guest agent sent {text:?}"))?;
        if v.get("event").is_some() {
            continue;
        }
        return Ok(v);
    }
}

fn fastrand_u16() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    nanos & 0xffff
}
