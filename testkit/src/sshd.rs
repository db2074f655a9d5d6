//! An OpenSSH server inside a simulated node, for push-mode tests: terraform
//! on the host connects to it on a loopback port (the node shares the host's
//! network namespace) as a Flatcar-like `core` user with passwordless sudo.
//!
//! Everything is generated per test: the node's host key (so terraform can
//! verify it through `host_key`), the client key pair, the port. sshd runs
//! as a unit of the node (`node-sshd.service`) and logs to the node's
//! journal; it dies with the node.
//!
//! Set up before boot: [`NodeSsh::new`], [`NodeSsh::install`] (server, user,
//! unit), then enable [`NodeSsh::UNIT`] with the node's other units; after
//! boot, [`NodeSsh::wait_ready`].

use crate::simnode::SimNode;
use anyhow::{Context, Result, bail};
use std::fs;
use std::io::Read;
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const SSHD: &str = "/usr/sbin/sshd";
const CONFIG: &str = "/etc/ssh/node_sshd_config";
const HOST_KEY: &str = "/etc/ssh/node_ssh_host_ed25519_key";

/// Keys and port of one node's sshd.
pub struct NodeSsh {
    port: u16,
    dir: tempfile::TempDir,
    host_pub: String,
    client_pub: String,
}

impl NodeSsh {
    /// The unit that runs sshd in the node.
    pub const UNIT: &'static str = "node-sshd.service";

    /// Generates a host key and a client key pair, and picks a free port on
    /// 127.0.0.1.
    pub fn new() -> Result<NodeSsh> {
        if !Path::new(SSHD).exists() {
            bail!("{SSHD} is not installed (Debian package openssh-server)");
        }
        let dir = tempfile::Builder::new()
            .prefix("node-ssh-")
            .tempdir()
            .context("creating a directory for SSH keys")?;
        keygen(&dir.path().join("host_key"), "node host key")?;
        keygen(&dir.path().join("client_key"), "push test client")?;
        let host_pub = read_pub(&dir.path().join("host_key.pub"))?;
        let client_pub = read_pub(&dir.path().join("client_key.pub"))?;
        let port = crate::kube::free_port();
        Ok(NodeSsh {
            port,
            dir,
            host_pub,
            client_pub,
        })
    }

    /// The loopback port sshd listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The node's host public key line (`ssh-ed25519 AAAA... comment`).
    pub fn host_public_key(&self) -> &str {
        &self.host_pub
    }

    /// The client's public key line, to authorize (e.g. through Ignition).
    pub fn client_public_key(&self) -> &str {
        &self.client_pub
    }

    /// Path of the client's private key on the host.
    pub fn client_private_key(&self) -> PathBuf {
        self.dir.path().join("client_key")
    }

    /// Installs sshd into a node that is not running: its config and host
    /// key, the `node-sshd.service` unit (not enabled: enable
    /// [`NodeSsh::UNIT`] with the node's units) and, unless `user` is root,
    /// a Flatcar-like account for `user` (uid 500, home /home/<user>,
    /// passwordless sudo). The user's `authorized_keys` is left to the test
    /// (Ignition writes it on a real node), see [`NodeSsh::authorize`].
    pub fn install(&self, node: &SimNode, user: &str) -> Result<()> {
        if node.is_running() {
            bail!("install sshd before the node boots");
        }
        let host_key = fs::read(self.dir.path().join("host_key"))?;
        node.write(HOST_KEY, host_key, 0o600)?;
        node.write(
            CONFIG,
            format!(
                "# sshd of a simulated node (push-mode tests); loopback only.\n\
                 ListenAddress 127.0.0.1:{port}\n\
                 HostKey {HOST_KEY}\n\
                 PidFile none\n\
                 UsePAM no\n\
                 PermitRootLogin prohibit-password\n\
                 PasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\n\
                 PubkeyAuthentication yes\n\
                 AuthorizedKeysFile .ssh/authorized_keys\n\
                 StrictModes yes\n\
                 Subsystem sftp /usr/lib/openssh/sftp-server\n",
                port = self.port
            ),
            0o644,
        )?;
        node.write(
            &format!("/etc/systemd/system/{}", Self::UNIT),
            format!(
                "[Unit]\n\
                 Description=OpenSSH server of the simulated node (127.0.0.1:{port})\n\
                 \n\
                 [Service]\n\
                 ExecStartPre={SSHD} -t -f {CONFIG}\n\
                 ExecStart={SSHD} -D -e -f {CONFIG}\n\
                 RuntimeDirectory=sshd\n\
                 RuntimeDirectoryMode=0755\n\
                 Restart=on-failure\n\
                 \n\
                 [Install]\n\
                 WantedBy=multi-user.target\n",
                port = self.port
            ),
            0o644,
        )?;
        if user != "root" {
            add_user(node, user)?;
        }
        Ok(())
    }

    /// Writes the client key into `user`'s `~/.ssh/authorized_keys` in the
    /// node (what Ignition's `passwd.users[].sshAuthorizedKeys` does).
    pub fn authorize(&self, node: &SimNode, user: &str, keys: &[&str]) -> Result<()> {
        authorize(node, user, keys)
    }

    /// Waits until sshd answers on its port with an SSH banner.
    pub fn wait_ready(&self, node: &SimNode, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) {
                s.set_read_timeout(Some(Duration::from_secs(2)))?;
                let mut buf = [0u8; 8];
                if s.read_exact(&mut buf).is_ok() && &buf == b"SSH-2.0-" {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "sshd of node {} did not answer on 127.0.0.1:{} within {timeout:?}\n{}\n{}",
                    node.name(),
                    self.port,
                    node.journal(Self::UNIT),
                    node.diagnostics()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Runs a command on the node over SSH as `user` (for checks that must
    /// go through the same door terraform uses).
    pub fn ssh(&self, user: &str, command: &str) -> Result<std::process::Output> {
        let known_hosts = self.dir.path().join("known_hosts");
        fs::write(
            &known_hosts,
            format!("[127.0.0.1]:{} {}\n", self.port, self.host_pub),
        )?;
        Command::new("ssh")
            .args(["-F", "/dev/null", "-o", "BatchMode=yes", "-o"])
            .arg(format!("UserKnownHostsFile={}", known_hosts.display()))
            .args(["-o", "StrictHostKeyChecking=yes", "-i"])
            .arg(self.client_private_key())
            .args(["-p", &self.port.to_string()])
            .arg(format!("{user}@127.0.0.1"))
            .arg(command)
            .output()
            .context("running ssh")
    }
}

fn keygen(path: &Path, comment: &str) -> Result<()> {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f"])
        .arg(path)
        .output()
        .context("running ssh-keygen (Debian package openssh-client)")?;
    if !out.status.success() {
        bail!(
            "ssh-keygen failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

fn read_pub(path: &Path) -> Result<String> {
    Ok(fs::read_to_string(path)
        .with_context(|| format!("reading {}", path.display()))?
        .trim()
        .to_string())
}

/// The node's copy of a host account file, `/etc/<name>`: the upper dir's
/// if the node already has its own, else the host's (its lower dir).
fn account_file(node: &SimNode, name: &str) -> Result<String> {
    match node.read(&format!("/etc/{name}")) {
        Some(s) => Ok(s),
        None => fs::read_to_string(format!("/etc/{name}"))
            .with_context(|| format!("reading the host's /etc/{name}")),
    }
}

/// Adds a Flatcar-like login user (uid/gid 500 or the next free id) with a
/// home directory and passwordless sudo, as the OS image would have it.
fn add_user(node: &SimNode, user: &str) -> Result<()> {
    let passwd = account_file(node, "passwd")?;
    if passwd.lines().any(|l| l.split(':').next() == Some(user)) {
        return Ok(());
    }
    let group = account_file(node, "group")?;
    let shadow = account_file(node, "shadow")?;
    let used: Vec<u32> = passwd
        .lines()
        .chain(group.lines())
        .filter_map(|l| l.split(':').nth(2)?.parse().ok())
        .collect();
    let id = (500..60000)
        .find(|i| !used.contains(i))
        .context("no free uid")?;
    let home = format!("/home/{user}");
    node.write(
        "/etc/passwd",
        format!("{passwd}{user}:x:{id}:{id}:{user}:{home}:/bin/bash\n"),
        0o644,
    )?;
    node.write("/etc/group", format!("{group}{user}:x:{id}:\n"), 0o644)?;
    // "*": no password login, but not a locked account (sshd refuses "!").
    node.write(
        "/etc/shadow",
        format!("{shadow}{user}:*:19000:0:99999:7:::\n"),
        0o640,
    )?;
    node.write(
        &format!("/etc/sudoers.d/{user}-nopasswd"),
        format!("{user} ALL=(ALL) NOPASSWD: ALL\n"),
        0o440,
    )?;
    let home_path = node.path(&home);
    fs::create_dir_all(&home_path)?;
    fs::set_permissions(&home_path, fs::Permissions::from_mode(0o755))?;
    std::os::unix::fs::chown(&home_path, Some(id), Some(id))?;
    Ok(())
}

fn user_ids(node: &SimNode, user: &str) -> Result<(u32, u32, String)> {
    let passwd = account_file(node, "passwd")?;
    for l in passwd.lines() {
        let f: Vec<&str> = l.split(':').collect();
        if f.len() >= 6 && f[0] == user {
            return Ok((f[2].parse()?, f[3].parse()?, f[5].to_string()));
        }
    }
    bail!("user {user} does not exist in node {}", node.name())
}

fn authorize(node: &SimNode, user: &str, keys: &[&str]) -> Result<()> {
    let (uid, gid, home) = user_ids(node, user)?;
    let ssh_dir = format!("{home}/.ssh");
    let body: String = keys.iter().map(|k| format!("{}\n", k.trim())).collect();
    node.write(&format!("{ssh_dir}/authorized_keys"), body, 0o600)?;
    let dir = node.path(&ssh_dir);
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))?;
    std::os::unix::fs::chown(&dir, Some(uid), Some(gid))?;
    std::os::unix::fs::chown(dir.join("authorized_keys"), Some(uid), Some(gid))?;
    Ok(())
}
