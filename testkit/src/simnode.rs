//! The simulated node: a real systemd as PID 1 in a PID + mount namespace,
//! on an overlay whose lower dir is the host's `/` and whose upper dir is the
//! node's own disk. Rebooting it keeps the upper dir, so the next boot sees
//! what the last one wrote; `/run` is a fresh tmpfs every boot.
//!
//! The recipe:
//! `unshare --pid --fork --mount --kill-child` runs a script that mounts the
//! overlay at ROOT, makes it the root of the node's mount namespace by
//! pivot_root (`cd ROOT; pivot_root . .; umount -l .`, with the node's
//! `/proc` mounted first, which `umount` reads: the host's `/` is
//! detached, not merely out of sight as under a chroot) and execs
//! `systemd --system`. So a process that joins the node's mount namespace
//! (`nsenter`, and runc's `exec` into a container made there) starts at
//! the node's root, and a container's own root is the root its `exec`
//! sees: under `unshare --root` (a chroot), the namespace's root stayed
//! the host's `/`, and `runc exec` landed there (seen with Kubernetes'
//! conformance suite, issue 33). A reboot inside
//! ends PID 1 with SIGHUP, which `unshare` re-raises on itself, so the harness
//! sees its child killed by signal 1; poweroff is SIGINT. Power loss is a
//! SIGKILL of the node's PID 1.
//!
//! The node boots `multi-user.target` with its `/etc/systemd/system` made
//! opaque, so none of the host's enabled services start inside it; the units
//! under test are installed and enabled into the upper dir before boot.
//! Dropping a [`SimNode`] kills whatever still runs and removes its files.
//!
//! Each node also has a UTS namespace (its own host name, from its
//! `/etc/hostname`: [`SimNode::set_hostname`]; the host's is never touched)
//! and a cgroup namespace rooted at a cgroup of its own
//! (`nb-simnode/<node dir>` in every hierarchy), with the host's hierarchies
//! mounted inside as the host has them. So each node's systemd manages its
//! own subtree (two nodes running `kubelet.service` never share a cgroup,
//! and stopping one never kills the other's processes), and programs that
//! need the v1 `cpu` and `cpuacct` controllers (kubelet, dockerd) find them:
//! systemd alone would try to co-mount them as `cpu,cpuacct`, which fails
//! where the host mounted them apart.

use anyhow::{Context, Result, anyhow, bail};
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod cgroup;

/// How a boot ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootEnd {
    /// A reboot was requested inside (`systemctl reboot`, logind `Reboot`).
    Reboot,
    /// Poweroff or halt (also what a clean shutdown from outside gives).
    Poweroff,
    /// PID 1 was killed (power loss).
    PowerLoss,
    /// Anything else: the raw exit code or signal.
    Other(Option<i32>, Option<i32>),
}

/// The longest a command run in a node by [`SimNode::exec`] may take.
pub const EXEC_TIMEOUT: Duration = Duration::from_secs(300);

/// Host units kept out of the node (they would fight over the console).
const MASKED: &[&str] = &[
    "console-getty.service",
    "getty@.service",
    "serial-getty@.service",
];

/// Runs before every boot, while the node is down (see
/// [`SimNode::before_each_boot`]).
type BootHook = Box<dyn Fn(&SimNode) -> Result<()> + Send + Sync>;

pub struct SimNode {
    name: String,
    boot_hooks: Vec<BootHook>,
    dir: tempfile::TempDir,
    child: Option<Child>,
    pid1: Option<u32>,
    /// PID 1 of the latest boot, kept after it went down.
    last_pid1: Option<u32>,
    boots: u32,
    /// Network links in the host's namespace that belong to this node (a
    /// pod bridge), deleted when it is dropped.
    host_links: std::sync::Mutex<Vec<String>>,
}

impl SimNode {
    /// A new node with an empty disk (the host's `/` as its read-only image).
    pub fn new(name: &str) -> Result<SimNode> {
        require_root()?;
        let dir = tempfile::Builder::new()
            .prefix(&format!("simnode-{name}-"))
            .tempdir_in("/var/tmp")
            .context("creating the node's directory")?;
        for d in ["upper", "work", "root"] {
            fs::create_dir_all(dir.path().join(d))?;
        }
        let node = SimNode {
            name: name.to_string(),
            boot_hooks: Vec::new(),
            dir,
            child: None,
            pid1: None,
            last_pid1: None,
            boots: 0,
            host_links: Default::default(),
        };
        let sysdir = node.upper().join("etc/systemd/system");
        fs::create_dir_all(&sysdir)?;
        set_opaque(&sysdir)?;
        for unit in MASKED {
            std::os::unix::fs::symlink("/dev/null", sysdir.join(unit))?;
        }
        // A persistent journal, so a test reads the logs of earlier boots.
        fs::create_dir_all(node.upper().join("var/log/journal"))?;
        // Debian's tmpfiles.d/tmp.conf empties /tmp at boot (`D /tmp`). The
        // node's /tmp is the host's seen through the overlay, so that would
        // hide every host file under /tmp inside the node (a checkout under
        // /tmp, test fixtures): keep /tmp as it is instead.
        let tmpfiles = node.upper().join("etc/tmpfiles.d");
        fs::create_dir_all(&tmpfiles)?;
        fs::write(
            tmpfiles.join("tmp.conf"),
            "# simulated node: do not empty the host's /tmp\nd /tmp 1777 root root -\n",
        )?;
        Ok(node)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// What tells this node apart from every other on the host while it
    /// exists (its directory's name, `simnode-<name>-<random>`): for names
    /// of things of its own in the host's namespaces.
    pub fn id(&self) -> String {
        self.dir
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }

    /// Deletes the host's network link `name` (made by the node's own
    /// processes in the host's network namespace, which simulated nodes
    /// share: a pod bridge) when the node is dropped.
    pub fn remove_host_link_on_drop(&self, name: &str) {
        let mut links = self.host_links.lock().unwrap_or_else(|e| e.into_inner());
        if !links.iter().any(|l| l == name) {
            links.push(name.to_string());
        }
    }

    /// Gives the node a host name of its own (its `/etc/hostname`, which its
    /// systemd sets in the node's UTS namespace at boot). Without one the
    /// node carries the host's name. Before boot.
    pub fn set_hostname(&self, hostname: &str) -> Result<()> {
        if self.is_running() {
            bail!(
                "set the host name before boot (node {} is running)",
                self.name
            );
        }
        self.write("/etc/hostname", format!("{hostname}\n"), 0o644)
    }

    /// The node's own cgroup (below each hierarchy's root): the root of its
    /// cgroup namespace.
    fn cgroup_name(&self) -> String {
        format!("nb-simnode/{}", self.id())
    }

    /// The node's disk (overlay upper dir). Write here only while it is down.
    pub fn upper(&self) -> PathBuf {
        self.dir.path().join("upper")
    }

    /// How many times the node has booted.
    pub fn boots(&self) -> u32 {
        self.boots
    }

    /// Host PID of the node's systemd, while it runs.
    pub fn pid1(&self) -> Option<u32> {
        self.pid1
    }

    pub fn is_running(&self) -> bool {
        self.pid1.is_some()
    }

    /// A path inside the node as the host sees it: through the running
    /// node's root while it is up, in the upper dir while it is down (files
    /// only in the lower dir, the host's `/`, are not visible there).
    pub fn path(&self, inside: &str) -> PathBuf {
        let rel = inside.trim_start_matches('/');
        match self.pid1 {
            Some(pid) => PathBuf::from(format!("/proc/{pid}/root")).join(rel),
            None => self.upper().join(rel),
        }
    }

    /// Writes a file into the node (through the overlay when running).
    pub fn write(&self, inside: &str, contents: impl AsRef<[u8]>, mode: u32) -> Result<()> {
        let p = self.path(inside);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        // Write beside, then rename: a unit watching the path never sees half.
        let tmp = p.with_file_name(format!(
            ".{}.simnode-tmp",
            p.file_name().unwrap().to_string_lossy()
        ));
        fs::write(&tmp, contents).with_context(|| format!("writing {}", tmp.display()))?;
        fs::set_permissions(&tmp, fs::Permissions::from_mode(mode))?;
        fs::rename(&tmp, &p).with_context(|| format!("renaming into {}", p.display()))?;
        Ok(())
    }

    /// Reads a file of the node, `None` if it does not exist.
    pub fn read(&self, inside: &str) -> Option<String> {
        fs::read_to_string(self.path(inside)).ok()
    }

    pub fn exists(&self, inside: &str) -> bool {
        self.path(inside).exists()
    }

    /// Removes a file of the node if present.
    pub fn remove(&self, inside: &str) -> Result<()> {
        match fs::remove_file(self.path(inside)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }

    /// Hides a file of the host's `/` (the node's lower dir) from the node,
    /// before boot: an overlayfs whiteout (a 0/0 character device) in the
    /// upper dir, as if the node's OS had no such file.
    pub fn hide(&self, inside: &str) -> Result<()> {
        anyhow::ensure!(self.pid1.is_none(), "hide {inside}: the node is running");
        let p = self.path(inside);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        let _ = fs::remove_file(&p);
        nix::sys::stat::mknod(
            &p,
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::empty(),
            nix::sys::stat::makedev(0, 0),
        )
        .with_context(|| format!("making a whiteout at {}", p.display()))
    }

    /// Copies a host file (e.g. a built binary) into the node.
    pub fn install_file(&self, host: &Path, inside: &str, mode: u32) -> Result<()> {
        let data = fs::read(host).with_context(|| format!("reading {}", host.display()))?;
        self.write(inside, data, mode)
    }

    /// Installs unit files into the node's `/etc/systemd/system`.
    pub fn install_units(&self, units: &[PathBuf]) -> Result<()> {
        for u in units {
            let name = u.file_name().unwrap().to_string_lossy().into_owned();
            self.install_file(u, &format!("/etc/systemd/system/{name}"), 0o644)?;
        }
        Ok(())
    }

    /// Enables units offline (`systemctl --root`), before boot.
    pub fn enable(&self, units: &[&str]) -> Result<()> {
        if self.is_running() {
            bail!("enable units before boot (node {} is running)", self.name);
        }
        let out = Command::new("systemctl")
            .arg(format!("--root={}", self.upper().display()))
            .arg("enable")
            .args(units)
            .output()?;
        if !out.status.success() {
            bail!(
                "systemctl --root enable {:?} failed: {}",
                units,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }

    /// Adds a drop-in to a unit (e.g. to shorten RestartSec in a test).
    pub fn drop_in(&self, unit: &str, name: &str, contents: &str) -> Result<()> {
        self.write(
            &format!("/etc/systemd/system/{unit}.d/{name}.conf"),
            contents,
            0o644,
        )
    }

    /// Runs `hook` before every boot, while the node is down: what a
    /// machine does before its PID 1 starts (a bootloader switching to the
    /// OS partition an update staged, say).
    pub fn before_each_boot(
        &mut self,
        hook: impl Fn(&SimNode) -> Result<()> + Send + Sync + 'static,
    ) {
        self.boot_hooks.push(Box::new(hook));
    }

    /// Boots the node and waits until its systemd answers on its bus.
    pub fn boot(&mut self) -> Result<()> {
        if self.is_running() {
            bail!("node {} is already running", self.name);
        }
        for hook in &self.boot_hooks {
            hook(self).with_context(|| format!("before booting node {}", self.name))?;
        }
        let d = self.dir.path();
        let root = d.join("root");
        let cgroups = cgroup::Layout::of_host()?;
        let script = format!(
            "set -e\n\
             mount --make-rprivate /\n\
             mount -t overlay overlay -o lowerdir=/,upperdir={upper},workdir={work} {root}\n\
             {cgroup_mounts}\
             export container=node-bootstrap-simnode\n\
             mount -t proc -o nosuid,nodev,noexec proc {root}/proc\n\
             cd {root}\n\
             pivot_root . .\n\
             umount -l .\n\
             cd /\n\
             exec /lib/systemd/systemd --system --unit=multi-user.target\n",
            upper = d.join("upper").display(),
            work = d.join("work").display(),
            root = root.display(),
            cgroup_mounts = cgroups.mount_script(&root),
        );
        // Join the node's own cgroup, then make it the root of a new cgroup
        // namespace (with the PID, mount and UTS namespaces).
        let node_cgroup = self.cgroup_name();
        cgroups.create(&node_cgroup)?;
        let outer = format!(
            "{join}exec unshare --cgroup --uts --pid --fork --mount --kill-child sh -c \"$0\"\n",
            join = cgroups.join_script(&node_cgroup),
        );
        let console = fs::File::create(d.join(format!("console-{}.log", self.boots + 1)))?;
        let child = Command::new("sh")
            .args(["-c", &outer, &script])
            .stdin(Stdio::null())
            .stdout(console.try_clone()?)
            .stderr(console)
            .spawn()
            .context("spawning unshare for the simulated node")?;
        let unshare_pid = child.id();
        self.child = Some(child);
        self.boots += 1;
        let deadline = Instant::now() + Duration::from_secs(60);
        // Find PID 1 of the new namespace: unshare's child, once it has
        // exec'd systemd.
        let pid1 = loop {
            if let Some(pid) = child_pid(unshare_pid)
                && fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|e| e.ends_with("systemd"))
            {
                break pid;
            }
            if let Some(st) = self.child.as_mut().unwrap().try_wait()? {
                self.child = None;
                bail!(
                    "node {} died while booting ({st}); console: {}",
                    self.name,
                    self.console()
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "node {} did not start systemd in time; console: {}",
                    self.name,
                    self.console()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        self.pid1 = Some(pid1);
        self.last_pid1 = Some(pid1);
        loop {
            let out = self.exec(&["systemctl", "show", "-p", "Version", "--value"])?;
            if out.status.success() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "systemd of node {} does not answer: {}",
                    self.name,
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What the node's console printed in its latest boot.
    pub fn console(&self) -> String {
        fs::read_to_string(self.dir.path().join(format!("console-{}.log", self.boots)))
            .unwrap_or_default()
    }

    fn nsenter(&self) -> Result<Command> {
        let pid = self
            .pid1
            .ok_or_else(|| anyhow!("node {} is not running", self.name))?;
        let mut c = Command::new("nsenter");
        c.args(["-t", &pid.to_string(), "-p", "-m", "-u", "-r", "-w", "--"]);
        Ok(c)
    }

    /// Runs a command inside the node (its PID and mount namespaces, its
    /// root), for at most [`EXEC_TIMEOUT`]: a command caught in a node that
    /// is going down (e.g. `systemctl` waiting on a dying systemd) is killed
    /// and reported instead of hanging the test.
    pub fn exec(&self, argv: &[&str]) -> Result<Output> {
        let mut c = self.nsenter()?;
        c.args(argv);
        self.run_bounded(c, argv)
    }

    fn run_bounded(&self, mut c: Command, argv: &[&str]) -> Result<Output> {
        let what = || format!("running {argv:?} in node {}", self.name);
        let mut child = c
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(what)?;
        let drain = |r: Option<Box<dyn std::io::Read + Send>>| {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                if let Some(mut r) = r {
                    let _ = r.read_to_end(&mut buf);
                }
                buf
            })
        };
        let out = drain(child.stdout.take().map(|r| Box::new(r) as _));
        let err = drain(child.stderr.take().map(|r| Box::new(r) as _));
        let deadline = Instant::now() + EXEC_TIMEOUT;
        let status = loop {
            if let Some(st) = child.try_wait().with_context(what)? {
                break st;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "{} did not finish within {EXEC_TIMEOUT:?}; killed (is the node going down?)",
                    what()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        Ok(Output {
            status,
            stdout: out.join().unwrap_or_default(),
            stderr: err.join().unwrap_or_default(),
        })
    }

    /// Like [`exec`](Self::exec) with extra environment variables.
    pub fn exec_env(&self, argv: &[&str], env: &[(&str, &str)]) -> Result<Output> {
        let mut c = self.nsenter()?;
        c.arg("env")
            .args(env.iter().map(|(k, v)| format!("{k}={v}")))
            .args(argv);
        self.run_bounded(c, argv)
    }

    /// Starts a command inside the node without waiting for it.
    pub fn spawn(&self, argv: &[&str]) -> Result<Child> {
        let mut c = self.nsenter()?;
        c.args(argv)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        Ok(c.spawn()?)
    }

    /// `systemctl ARGS` inside the node; stdout on success.
    pub fn systemctl(&self, args: &[&str]) -> Result<String> {
        let mut argv = vec!["systemctl", "--no-pager"];
        argv.extend_from_slice(args);
        let out = self.exec(&argv)?;
        if !out.status.success() {
            bail!(
                "systemctl {args:?} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Properties of a unit (`systemctl show -p …`).
    pub fn show(&self, unit: &str, props: &[&str]) -> Result<BTreeMap<String, String>> {
        let mut argv = vec!["show", unit];
        let joined = props.join(",");
        if !props.is_empty() {
            argv.extend(["-p", &joined]);
        }
        let text = self.systemctl(&argv)?;
        Ok(text
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect())
    }

    /// One property of a unit.
    pub fn prop(&self, unit: &str, prop: &str) -> Result<String> {
        Ok(self.show(unit, &[prop])?.remove(prop).unwrap_or_default())
    }

    /// A timestamp property in µs since the epoch (0 when unset).
    pub fn timestamp_us(&self, unit: &str, prop: &str) -> Result<u64> {
        let p = if prop.ends_with("Monotonic") {
            prop.to_string()
        } else {
            format!("{prop}Monotonic")
        };
        let v = self.prop(unit, &p)?;
        v.parse()
            .with_context(|| format!("{unit} {p}={v:?} is not a number"))
    }

    /// The unit's log lines in this node's journal (message text only).
    pub fn journal(&self, unit: &str) -> String {
        self.exec(&["journalctl", "--no-pager", "-o", "cat", "-u", unit])
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    /// The node's journal as JSON lines, optionally filtered (`FIELD=value`).
    pub fn journal_json(&self, matches: &[&str]) -> Vec<serde_json::Value> {
        let mut argv = vec!["journalctl", "--no-pager", "-o", "json"];
        argv.extend_from_slice(matches);
        self.exec(&argv)
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .filter_map(|l| serde_json::from_str(l).ok())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Polls `check` until it returns `Some`, failing after `timeout` with
    /// `what` and a dump of the flow's units.
    pub fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut check: impl FnMut(&SimNode) -> Option<T>,
    ) -> Result<T> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(v) = check(self) {
                return Ok(v);
            }
            if !self.is_running() {
                bail!("node {} is down while waiting for {what}", self.name);
            }
            if Instant::now() > deadline {
                bail!(
                    "timed out after {timeout:?} waiting for {what}\n{}",
                    self.diagnostics()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until a unit's ActiveState (and optionally SubState) matches.
    pub fn wait_active_state(&self, unit: &str, state: &str, timeout: Duration) -> Result<()> {
        self.wait_for(&format!("{unit} to be {state}"), timeout, |n| {
            (n.prop(unit, "ActiveState").ok()? == state).then_some(())
        })
    }

    /// Units' states and recent journal, for failure messages.
    pub fn diagnostics(&self) -> String {
        if !self.is_running() {
            return format!("node {} is down; console:\n{}", self.name, self.console());
        }
        let units = self
            .exec(&[
                "systemctl",
                "--no-pager",
                "list-units",
                "--all",
                "--plain",
                "--no-legend",
                "*bootstrap*",
                "kubelet*",
                "bootkube*",
                "tectonic*",
                "init-assets*",
                "update-engine*",
            ])
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let journal = self
            .exec(&[
                "journalctl",
                "--no-pager",
                "-n",
                "60",
                "-o",
                "short-monotonic",
            ])
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        format!("units:\n{units}\njournal tail:\n{journal}")
    }

    /// Waits for the node to go down by itself (reboot or poweroff).
    pub fn wait_down(&mut self, timeout: Duration) -> Result<BootEnd> {
        let deadline = Instant::now() + timeout;
        loop {
            let child = self
                .child
                .as_mut()
                .ok_or_else(|| anyhow!("node {} is not running", self.name))?;
            if let Some(st) = child.try_wait()? {
                self.child = None;
                self.pid1 = None;
                return Ok(match (st.code(), st.signal()) {
                    (_, Some(1)) | (Some(129), _) => BootEnd::Reboot,
                    (_, Some(2)) | (Some(130), _) => BootEnd::Poweroff,
                    (_, Some(9)) | (Some(137), _) => BootEnd::PowerLoss,
                    (c, s) => BootEnd::Other(c, s),
                });
            }
            if Instant::now() > deadline {
                bail!(
                    "node {} did not go down within {timeout:?}\n{}",
                    self.name,
                    self.diagnostics()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Power loss: everything in the node dies at once. SIGKILL goes to the
    /// node's PID 1 and to the `unshare` holding the namespace (whose
    /// `--kill-child` would kill PID 1 anyway), so the boot ends as
    /// [`BootEnd::PowerLoss`].
    pub fn power_cut(&mut self) -> Result<()> {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
        }
        if let Some(pid) = self.pid1 {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::SIGKILL,
            );
        }
        let end = self.wait_down(Duration::from_secs(30))?;
        // util-linux 2.38's `unshare --fork` cannot re-raise SIGKILL on
        // itself (its sigprocmask "unblock" fails with EINVAL, console:
        // "unshare: sigprocmask unblock failed") and exits 1 instead.
        if end != BootEnd::PowerLoss && end != BootEnd::Other(Some(1), None) {
            bail!("power cut of node {} ended as {end:?}", self.name);
        }
        // PID 1 may outlive its parent by a moment; the next boot needs the
        // overlay free.
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.pid1_alive() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    fn pid1_alive(&self) -> bool {
        self.last_pid1
            .is_some_and(|p| Path::new(&format!("/proc/{p}")).exists())
    }

    /// Clean shutdown from outside (SIGRTMIN+4 to systemd, its poweroff).
    pub fn shutdown(&mut self) -> Result<BootEnd> {
        let Some(pid) = self.pid1 else {
            return Ok(BootEnd::Poweroff);
        };
        let rtmin4 = nix::libc::SIGRTMIN() + 4;
        unsafe { nix::libc::kill(pid as i32, rtmin4) };
        match self.wait_down(Duration::from_secs(60)) {
            Ok(end) => Ok(end),
            Err(e) => {
                self.kill_all();
                Err(e)
            }
        }
    }

    fn kill_all(&mut self) {
        if let Some(pid) = self.pid1.take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::SIGKILL,
            );
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for SimNode {
    fn drop(&mut self) {
        self.kill_all();
        if self.boots > 0 {
            // Let PID 1 and its children go before removing their cgroups.
            let deadline = Instant::now() + Duration::from_secs(10);
            while self.pid1_alive() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if let Ok(layout) = cgroup::Layout::of_host() {
                layout.remove(&self.cgroup_name());
            }
        }
        for link in self
            .host_links
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            let _ = Command::new("ip")
                .args(["link", "delete", link])
                .stderr(Stdio::null())
                .status();
        }
        if std::env::var_os("SIMNODE_KEEP").is_some() {
            let kept = self.dir.path().to_path_buf();
            eprintln!(
                "SIMNODE_KEEP: node {} kept at {}",
                self.name,
                kept.display()
            );
            std::mem::forget(std::mem::replace(
                &mut self.dir,
                tempfile::tempdir().unwrap(),
            ));
        }
    }
}

fn child_pid(parent: u32) -> Option<u32> {
    let children = fs::read_to_string(format!("/proc/{parent}/task/{parent}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}

fn set_opaque(dir: &Path) -> Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let path = CString::new(dir.as_os_str().as_bytes())?;
    let name = CString::new("trusted.overlay.opaque")?;
    let rc =
        unsafe { nix::libc::setxattr(path.as_ptr(), name.as_ptr(), b"y".as_ptr().cast(), 1, 0) };
    if rc != 0 {
        bail!(
            "setxattr trusted.overlay.opaque on {}: {}",
            dir.display(),
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// Whether this process can run simulated nodes (root, namespaces).
pub fn can_run() -> Result<()> {
    require_root()?;
    for tool in ["unshare", "nsenter", "systemctl"] {
        if which(tool).is_none() {
            bail!("{tool} is not installed");
        }
    }
    if !Path::new("/lib/systemd/systemd").exists() {
        bail!("/lib/systemd/systemd is not installed");
    }
    Ok(())
}

fn require_root() -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("simulated nodes need root (namespaces, overlay mounts)");
    }
    Ok(())
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(tool))
            .find(|p| p.exists())
    })
}

/// Skips the running test (returns `true`) when simulated nodes cannot run
/// here, saying why on stderr; under CI (`CI=true`) it panics instead, so
/// CI never skips (see [`crate::skip_because`]).
pub fn skip_unless_possible() -> bool {
    crate::skip_unless(can_run(), "simulated nodes cannot run here")
}
