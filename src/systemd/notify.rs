//! The service manager's notification protocol (sd_notify(3)): how `run`
//! tells systemd which step it is in (`STATUS=`, shown by `systemctl
//! status`) and that kubelet.env is in place (`READY=1`).
//!
//! k8s-node-bootstrap.service is `Type=notify`: its start job, which holds
//! kubelet back (`Before=kubelet.service`), ends at `READY=1`, sent once
//! kubelet.env is durable, and not when the agent exits, so the agent's
//! last bookkeeping (the state journal's final record, made durable) runs
//! beside kubelet's start instead of before it.
//!
//! The protocol: newline-separated `KEY=VALUE` lines in one datagram to the
//! `AF_UNIX` socket named by `$NOTIFY_SOCKET` (a path, or an abstract name
//! written with a leading `@`). systemd sets that variable only for units
//! that accept notifications; without it every call here does nothing (the
//! agent run by hand, or under a `Type=oneshot` unit of an older delivery).
//! With `NotifyAccess=main` systemd accepts messages only from the unit's
//! main process, so a helper process cannot speak for the agent; the
//! agent's `exec` of a newer agent (upgrade handover) keeps the PID.
//!
//! Failing to notify never fails the run: the message is logged and the
//! run goes on (systemd then sees the process exit; see the unit's notes).

use std::os::unix::net::{SocketAddr, UnixDatagram};
use tracing::warn;

/// The environment variable systemd sets to the notification socket.
pub const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

/// Where notifications go: nowhere when systemd did not ask for them.
pub struct Notifier {
    target: Option<(UnixDatagram, SocketAddr)>,
}

impl Notifier {
    /// The notifier `$NOTIFY_SOCKET` asks for (none when it is unset or
    /// empty; an unusable value is logged and treated as unset).
    pub fn from_env() -> Notifier {
        let target = std::env::var_os(NOTIFY_SOCKET)
            .filter(|v| !v.is_empty())
            .and_then(|v| match open(&v.to_string_lossy()) {
                Ok(t) => Some(t),
                Err(e) => {
                    warn!(error = %e, "cannot use $NOTIFY_SOCKET; systemd will not hear from the agent");
                    None
                }
            });
        Notifier { target }
    }

    /// `READY=1` with a status line: the unit's start job ends.
    pub fn ready(&self, status: &str) {
        self.send(&format!("READY=1\nSTATUS={}", one_line(status)));
    }

    /// `STATUS=`: the line `systemctl status` shows.
    pub fn status(&self, status: &str) {
        self.send(&format!("STATUS={}", one_line(status)));
    }

    fn send(&self, message: &str) {
        let Some((socket, addr)) = &self.target else {
            return;
        };
        if let Err(e) = socket.send_to_addr(message.as_bytes(), addr) {
            warn!(error = %e, message, "could not notify systemd");
        }
    }
}

fn open(value: &str) -> std::io::Result<(UnixDatagram, SocketAddr)> {
    let addr = match value.strip_prefix('@') {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(name.as_bytes())?
        }
        None if value.starts_with('/') => SocketAddr::from_pathname(value)?,
        None => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "{NOTIFY_SOCKET}={value:?} is neither an absolute path nor an @abstract name"
                ),
            ));
        }
    };
    Ok((UnixDatagram::unbound()?, addr))
}

/// A status is one line: a newline would start a new `KEY=VALUE`.
fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listener(dir: &std::path::Path) -> (UnixDatagram, String) {
        let path = dir.join("notify");
        let sock = UnixDatagram::bind(&path).unwrap();
        (sock, path.display().to_string())
    }

    fn received(sock: &UnixDatagram) -> String {
        let mut buf = [0u8; 512];
        let n = sock.recv(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[test]
    fn ready_and_status_arrive_as_systemd_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let (sock, path) = listener(dir.path());
        let n = Notifier {
            target: Some(open(&path).unwrap()),
        };
        n.status("step os-update");
        assert_eq!(received(&sock), "STATUS=step os-update");
        n.ready("kubelet.env is in place\n(injected)");
        assert_eq!(
            received(&sock),
            "READY=1\nSTATUS=kubelet.env is in place (injected)"
        );
    }

    #[test]
    fn an_abstract_socket_is_written_with_a_leading_at() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("node-bootstrap-notify-test-{}", std::process::id());
        let sock =
            UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap())
                .unwrap();
        let n = Notifier {
            target: Some(open(&format!("@{name}")).unwrap()),
        };
        n.ready("done");
        assert_eq!(received(&sock), "READY=1\nSTATUS=done");
    }

    #[test]
    fn a_relative_socket_path_is_refused_by_name() {
        let e = open("run/notify").unwrap_err();
        assert!(
            e.to_string().contains("NOTIFY_SOCKET=\"run/notify\""),
            "{e}"
        );
    }
}
