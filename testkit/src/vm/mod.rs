//! The VM tier's node: a QEMU virtual machine booting the OS image that
//! `scripts/vm-image.sh` builds from Debian packages (Debian 12, systemd
//! 252, a dracut initramfs with the real Ignition, the real torcx as the
//! torcx-generator). Where the simulated node ([`crate::simnode`]) is a
//! systemd in a namespace, this is a whole machine: its first boot runs
//! Ignition in the initramfs, its reboot is a kernel reboot, its power cut
//! loses the guest's page cache.
//!
//! How a [`VmNode`] boots, like a Flatcar machine:
//!
//! - **Boot loader.** Before each boot the rig does what Flatcar's GRUB
//!   does, on the node's disk image (the VM is down; [`Disk`] replays the
//!   ext4 journal first, as the kernel would): `ignition.firstboot` goes on
//!   the kernel command line only while `/boot/ignition.firstboot` exists
//!   (the image's `ignition-firstboot-complete.service` removes it once the
//!   real root is up). And it boots the updated OS when the update_engine
//!   stand-in left one pending (the A/B partition switch, modelled as
//!   [`PENDING_UPDATE`] -> `VERSION_ID` of `/usr/lib/os-release`), so
//!   torcx's generator sees the new OS version as on a real node.
//! - **Ignition** reads its config from QEMU's firmware config
//!   (`opt/com.coreos/config`, platform `qemu`); what it downloads comes
//!   through [`HOST_ALIAS`].
//! - **Network.** QEMU user-mode networking with `restrict=on`: the guest
//!   reaches nothing but the host ports a test forwards
//!   ([`VmNode::forward_to_host`]: guest `10.0.2.100:P` -> host
//!   `127.0.0.1:P`, relayed by the `vm-guestfwd` helper), and the host
//!   reaches the guest's sshd on a loopback port ([`VmNode::forward_ssh`])
//!   and the guest's port P at one of its own addresses, port P
//!   ([`VmNode::forward_to_guest`]). The guest's own address (`10.0.2.15`)
//!   is QEMU's alone: the host has no route to it.
//! - **Reboot** is the guest's: QEMU runs with `-no-reboot`, so a reset
//!   ends the process (QMP `SHUTDOWN` reason `guest-reset`), and
//!   [`VmNode::boot`] starts the next boot on the same disk.
//! - **Power cut** ([`VmNode::power_cut`]) is a SIGKILL of QEMU: what the
//!   guest had not written to its disk (its page cache) is lost; what it
//!   had written stays in the disk image. The disk runs with
//!   `cache=unsafe`: QEMU's own flushes would only push the image file to
//!   the host's disk, which a SIGKILL of QEMU does not lose anyway, so
//!   what survives a cut is the same and the host's disk is spared. (Not
//!   modelled: a disk that loses writes from its own volatile cache.)
//! - **Control** goes through QEMU's guest agent ([`qga`]): commands and
//!   file reads without a login.
//!
//! Acceleration: KVM when it works here (probed once with a 15 s boot of
//! the kernel; some nested hosts offer a `/dev/kvm` that hangs every
//! guest), TCG otherwise (`NB_VM_ACCEL=kvm|tcg` forces one). Under TCG a
//! boot takes about a minute (measured on 2 loaded cores: multi-threaded
//! TCG with 2 vCPUs booted in 38 s where 1 vCPU took 47 s; `-cpu qemu64`,
//! the baseline CPU, in 47 s where `-cpu max` took 55 s). VM tests hold a
//! [`slot`]: two tests' machines at a time by default ([`at_once`]). A
//! guest kernel that locks up under TCG (an emulator fault, see
//! [`lockup`]) is power-cut and booted again by [`VmNode::wait_ready`],
//! which says so.

pub mod disk;
pub mod lockup;
pub mod qga;
pub mod qmp;
pub mod relay;

pub use crate::simnode::BootEnd;
pub use disk::Disk;
pub use qga::GuestOutput;

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The address at which the guest reaches forwarded host ports.
pub const HOST_ALIAS: &str = "10.0.2.100";

/// Where the update_engine stand-in (`fake-update-engine`, default state
/// dir) records the OS version an update installed; the boot loader boots
/// it (see the module doc).
pub const PENDING_UPDATE: &str = "/var/lib/fake-update-engine/pending";

/// The image's first-boot flag (Flatcar / Fedora CoreOS convention).
pub const FIRSTBOOT_FLAG: &str = "/boot/ignition.firstboot";

/// Kernel command line of every boot. `rw`: the root is mounted
/// read-write by the initramfs, as on Flatcar and Fedora CoreOS, so PID 1's
/// first-boot `preset-all` can write /etc. Console output is kept short:
/// under emulation every line on the serial port costs time; the journal
/// has everything.
const CMDLINE: &str = "root=LABEL=root rw console=ttyS0,115200 panic=-1 \
     ignition.platform.id=qemu loglevel=4 systemd.show_status=error";

/// On the first boot only: Ignition fetches over the network in the initramfs.
const FIRSTBOOT_CMDLINE: &str = "ignition.firstboot rd.neednet=1 ip=dhcp";

/// The longest a command run by [`VmNode::exec`] may take.
pub const EXEC_TIMEOUT: Duration = Duration::from_secs(300);

/// The built OS image.
#[derive(Debug, Clone)]
pub struct Image {
    pub dir: PathBuf,
    pub disk: PathBuf,
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    /// The image's SSH host public key line (`ssh-ed25519 AAAA...`).
    pub ssh_host_key: String,
    /// How long this process spent building it (zero: it was cached).
    pub build_time: Duration,
}

impl Image {
    /// The image for the current inputs, built by `scripts/vm-image.sh` if
    /// it is not cached yet (about 2-10 minutes). Once per process.
    pub fn get() -> Result<Image> {
        static IMAGE: OnceLock<std::result::Result<Image, String>> = OnceLock::new();
        crate::once(&IMAGE, Image::build)
    }

    fn build() -> Result<Image> {
        let script = crate::project_root().join("scripts/vm-image.sh");
        let t0 = Instant::now();
        let out = Command::new(&script)
            .stderr(Stdio::inherit())
            .output()
            .with_context(|| format!("running {}", script.display()))?;
        if !out.status.success() {
            bail!("{} failed ({})", script.display(), out.status);
        }
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let build_time = t0.elapsed();
        let ssh_host_key = std::fs::read_to_string(dir.join("ssh_host_ed25519_key.pub"))
            .context("reading the image's SSH host key")?
            .trim()
            .to_string();
        eprintln!(
            "vm: image {} ready after {:.1}s",
            dir.display(),
            build_time.as_secs_f64()
        );
        Ok(Image {
            disk: dir.join("disk.raw"),
            kernel: dir.join("vmlinuz"),
            initrd: dir.join("initrd.img"),
            dir,
            ssh_host_key,
            build_time,
        })
    }
}

/// How QEMU runs the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    Kvm,
    Tcg,
}

/// KVM if it boots a kernel here, else TCG (decided once per process;
/// `NB_VM_ACCEL=kvm|tcg` decides instead).
pub fn accel(image: &Image) -> Accel {
    static ACCEL: OnceLock<Accel> = OnceLock::new();
    *ACCEL.get_or_init(|| match std::env::var("NB_VM_ACCEL").as_deref() {
        Ok("kvm") => Accel::Kvm,
        Ok("tcg") => Accel::Tcg,
        _ => {
            let (accel, why) = probe_kvm(image);
            eprintln!("vm: using {accel:?}: {why}");
            accel
        }
    })
}

/// Boots the image's kernel under KVM with no root file system: a working
/// KVM panics ("Unable to mount root fs") within a second or two, and
/// `-no-reboot` ends QEMU. A KVM that hangs the guest shows nothing.
fn probe_kvm(image: &Image) -> (Accel, String) {
    if !Path::new("/dev/kvm").exists() {
        return (Accel::Tcg, "no /dev/kvm".into());
    }
    let Ok(dir) = tempfile::tempdir() else {
        return (Accel::Tcg, "no temp dir for the KVM probe".into());
    };
    let console = dir.path().join("console.log");
    let child = Command::new("qemu-system-x86_64")
        .args([
            "-machine", "q35", "-accel", "kvm", "-cpu", "host", "-m", "256",
        ])
        .args(["-nodefaults", "-display", "none", "-no-reboot", "-kernel"])
        .arg(&image.kernel)
        .args(["-append", "console=ttyS0 panic=-1", "-serial"])
        .arg(format!("file:{}", console.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    let Ok(mut child) = child else {
        return (Accel::Tcg, "qemu-system-x86_64 did not start".into());
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Ok(Some(st)) = child.try_wait() {
            break Some(st);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let text = std::fs::read_to_string(&console).unwrap_or_default();
    match status {
        Some(_) if text.contains("Kernel panic") => (Accel::Kvm, "a KVM guest booted".into()),
        Some(st) => {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            (
                Accel::Tcg,
                format!("KVM failed ({st}): {}", err.lines().next().unwrap_or("")),
            )
        }
        None => (
            Accel::Tcg,
            "a KVM guest showed nothing for 15s (KVM hangs on this host)".into(),
        ),
    }
}

/// A VM test's turn to run machines: [`slot`] gives it, dropping it gives
/// it back.
pub struct VmSlot(());

impl Drop for VmSlot {
    fn drop(&mut self) {
        let (running, freed) = slots();
        *running.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
        freed.notify_one();
    }
}

fn slots() -> &'static (Mutex<usize>, Condvar) {
    static SLOTS: OnceLock<(Mutex<usize>, Condvar)> = OnceLock::new();
    SLOTS.get_or_init(|| (Mutex::new(0), Condvar::new()))
}

/// How many VM tests run their machines at once: `NB_VM_AT_ONCE`, else 2.
/// A guest under TCG leaves a core of this 2-core kind idle most of its
/// time (it waits on its disk, its timers, the host's servers): a second
/// machine beside it fills that time; 1 gives each machine the host alone.
pub fn at_once() -> usize {
    std::env::var("NB_VM_AT_ONCE")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(2)
}

/// VM tests hold this while their machines run: at most [`at_once`] tests
/// at a time; the others wait here for their turn.
pub fn slot() -> VmSlot {
    let (running, freed) = slots();
    let max = at_once();
    let mut n = running.lock().unwrap_or_else(|e| e.into_inner());
    while *n >= max {
        n = freed.wait(n).unwrap_or_else(|e| e.into_inner());
    }
    *n += 1;
    VmSlot(())
}

/// Why VMs cannot run here, if they cannot.
pub fn can_run() -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("VM nodes need root (the image build: mmdebstrap, mkfs)");
    }
    for tool in [
        "qemu-system-x86_64",
        "mmdebstrap",
        "debugfs",
        "e2fsck",
        "mkfs.ext4",
    ] {
        if !on_path(tool) {
            bail!("{tool} is not installed (scripts/setup.sh installs it)");
        }
    }
    Ok(())
}

/// Like [`crate::simnode::skip_unless_possible`]: `true` (after saying
/// `SKIPPED <test>: …`) when VMs cannot run here; under `CI=true` it
/// panics instead, since CI installs everything and must never skip.
pub fn skip_unless_possible() -> bool {
    crate::skip_unless(can_run(), "VM nodes cannot run here")
}

/// The host's own IPv4 address that is not loopback: the source address
/// of its route to the outside (a UDP socket's `connect` chooses it and
/// sends nothing). What a kubelet on the host would report as its Node's
/// InternalIP; a program on the host can dial it ([`VmNode::forward_to_guest`]
/// listens on it).
pub fn host_address() -> Result<std::net::Ipv4Addr> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").context("binding a UDP socket")?;
    // TEST-NET-3 (RFC 5737): routed like the rest of the outside, never
    // answered; nothing is sent.
    s.connect("203.0.113.1:9")
        .context("the host has no route to the outside (no default route)")?;
    match s.local_addr()?.ip() {
        std::net::IpAddr::V4(a) if !a.is_loopback() && !a.is_unspecified() => Ok(a),
        other => bail!(
            "the host's address towards the outside is {other}, not one of its own a program can dial"
        ),
    }
}

fn on_path(tool: &str) -> bool {
    ["/usr/sbin", "/sbin", "/usr/bin", "/bin", "/usr/local/bin"]
        .iter()
        .any(|d| Path::new(d).join(tool).exists())
}

/// One boot as the rig saw it.
#[derive(Debug, Clone)]
pub struct BootRecord {
    pub number: u32,
    pub firstboot: bool,
    /// From QEMU's start to the guest agent answering.
    pub ready_after: Option<Duration>,
    /// From QEMU's start to its end.
    pub lasted: Option<Duration>,
    pub end: Option<BootEnd>,
    /// The guest kernel's soft-lockup line, when the rig cut this boot
    /// short for it ([`lockup`]).
    pub locked_up: Option<String>,
}

pub struct VmNode {
    name: String,
    dir: tempfile::TempDir,
    image: Image,
    accel: Accel,
    disk: Disk,
    ignition: Option<PathBuf>,
    forwards: Vec<u16>,
    ssh_port: Option<u16>,
    to_guest: Vec<relay::Relay>,
    qemu: Option<Child>,
    qmp: Option<qmp::QmpWatch>,
    qga: qga::Qga,
    started: Option<Instant>,
    /// Where this boot's output starts in the console file.
    console_from: u64,
    boots: Vec<BootRecord>,
}

impl VmNode {
    /// A new machine with a fresh copy of the image's disk (never booted).
    pub fn new(name: &str) -> Result<VmNode> {
        let image = Image::get()?;
        let accel = accel(&image);
        let dir = tempfile::Builder::new()
            .prefix(&format!("vmnode-{name}-"))
            .tempdir_in("/var/tmp")
            .context("creating the node's directory")?;
        let disk = Disk::copy_of(&image.disk, &dir.path().join("disk.raw"))?;
        let qga = qga::Qga::new(&dir.path().join("qga.sock"));
        Ok(VmNode {
            name: name.into(),
            dir,
            image,
            accel,
            disk,
            ignition: None,
            forwards: Vec::new(),
            ssh_port: None,
            to_guest: Vec::new(),
            qemu: None,
            qmp: None,
            qga,
            started: None,
            console_from: 0,
            boots: Vec::new(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn image(&self) -> &Image {
        &self.image
    }

    pub fn accel(&self) -> Accel {
        self.accel
    }

    /// The node's disk, for reading or changing it while the VM is down.
    pub fn disk(&self) -> &Disk {
        assert!(
            !self.is_running(),
            "{}: the disk is in use by the running VM",
            self.name
        );
        &self.disk
    }

    /// The Ignition config QEMU offers the guest (every boot; Ignition
    /// reads it on the first).
    pub fn set_ignition(&mut self, config: &str) -> Result<()> {
        let p = self.dir.path().join("config.ign");
        std::fs::write(&p, config)?;
        self.ignition = Some(p);
        Ok(())
    }

    /// Lets the guest reach the host's `127.0.0.1:port` at
    /// `HOST_ALIAS:port`. Takes effect at the next boot.
    pub fn forward_to_host(&mut self, port: u16) {
        if !self.forwards.contains(&port) {
            self.forwards.push(port);
        }
    }

    /// Forwards a free loopback port of the host to the guest's sshd (port
    /// 22) from the next boot on, and returns it.
    pub fn forward_ssh(&mut self) -> Result<u16> {
        if let Some(p) = self.ssh_port {
            return Ok(p);
        }
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        let port = l.local_addr()?.port();
        self.ssh_port = Some(port);
        Ok(port)
    }

    /// Lets the host reach the guest's TCP port `port` at `addr:port` (an
    /// address of the host's own, see [`host_address`]; the same port on
    /// both sides), from the next boot on. QEMU's `hostfwd` listens on
    /// `127.0.0.1:port`, and a relay ([`relay::Relay`], bound here) on
    /// `addr:port` passes each connection on to it. Why not `hostfwd` on
    /// `addr` itself: QEMU gives the guest a connection from a loopback peer
    /// as coming from its gateway (`10.0.2.2`), but one from any other peer
    /// with that peer's address (libslirp's `tcp_connect`), and a client on
    /// the host that dials `addr` comes from `addr`: a guest that carries
    /// `addr` itself (a kubelet's `--node-ip`) would answer it locally.
    pub fn forward_to_guest(&mut self, addr: std::net::Ipv4Addr, port: u16) -> Result<()> {
        let listen = std::net::SocketAddr::from((addr, port));
        if self.to_guest.iter().any(|r| r.addr() == listen) {
            return Ok(());
        }
        let r = relay::Relay::start(listen, std::net::SocketAddr::from(([127, 0, 0, 1], port)))?;
        self.to_guest.push(r);
        Ok(())
    }

    /// `url` with the host's loopback address replaced by [`HOST_ALIAS`]:
    /// the same server as the guest reaches it (forward its port first).
    pub fn guest_url(url: &str) -> String {
        url.replacen("127.0.0.1", HOST_ALIAS, 1)
    }

    pub fn is_running(&self) -> bool {
        self.qemu.is_some()
    }

    /// How many times the test started the machine: the boots the rig
    /// started again after a guest kernel lockup ([`lockup`]) are not
    /// counted (they are in [`boot_records`](Self::boot_records)).
    pub fn boots(&self) -> u32 {
        self.boots.len() as u32 - self.lockup_restarts()
    }

    /// How many boots the rig cut short and started again because the
    /// guest kernel locked up ([`lockup`]).
    pub fn lockup_restarts(&self) -> u32 {
        self.boots.iter().filter(|b| b.locked_up.is_some()).count() as u32
    }

    pub fn boot_records(&self) -> &[BootRecord] {
        &self.boots
    }

    /// Starts the next boot: the boot loader's decisions on the disk (see
    /// the module doc), then QEMU.
    pub fn boot(&mut self) -> Result<()> {
        if self.is_running() {
            bail!("{}: already running", self.name);
        }
        self.disk.replay_journal()?;
        let firstboot = self.disk.exists(FIRSTBOOT_FLAG)?;
        self.switch_to_pending_update()?;
        let mut cmdline = CMDLINE.to_string();
        if firstboot {
            cmdline.push(' ');
            cmdline.push_str(FIRSTBOOT_CMDLINE);
        }
        let number = self.boots.len() as u32 + 1;
        let console = self.console_path();
        self.console_from = std::fs::metadata(&console).map_or(0, |m| m.len());
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&console)
            .and_then(|mut f| {
                use std::io::Write;
                writeln!(f, "\n===== vm boot {number}: {cmdline}")
            })?;
        for s in ["qga.sock", "qmp.sock"] {
            let _ = std::fs::remove_file(self.dir.path().join(s));
        }
        let argv = self.qemu_args(&cmdline)?;
        let child = Command::new("qemu-system-x86_64")
            .args(&argv)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.dir.path().join("qemu.err"))?)
            .spawn()
            .context("starting qemu-system-x86_64")?;
        self.started = Some(Instant::now());
        self.qemu = Some(child);
        self.boots.push(BootRecord {
            number,
            firstboot,
            ready_after: None,
            lasted: None,
            end: None,
            locked_up: None,
        });
        match qmp::QmpWatch::connect(&self.dir.path().join("qmp.sock"), Duration::from_secs(30)) {
            Ok(w) => self.qmp = Some(w),
            Err(e) => {
                let _ = self.kill();
                return Err(e.context(format!(
                    "{}: QEMU did not start: {}",
                    self.name,
                    self.qemu_err()
                )));
            }
        }
        eprintln!(
            "vm {}: boot {number} started{}",
            self.name,
            if firstboot {
                " (first boot: Ignition)"
            } else {
                ""
            }
        );
        Ok(())
    }

    fn switch_to_pending_update(&self) -> Result<()> {
        let Some(version) = self.disk.read_string(PENDING_UPDATE)? else {
            return Ok(());
        };
        let version = version.trim();
        let tmp = tempfile::NamedTempFile::new()?;
        let current = self
            .disk
            .read("/usr/lib/os-release")?
            .context("the disk has no /usr/lib/os-release")?;
        std::fs::write(tmp.path(), current)?;
        crate::fake_update_engine::set_os_release_version(tmp.path(), version)?;
        self.disk
            .write("/usr/lib/os-release", std::fs::read(tmp.path())?, 0o644)?;
        self.disk.remove(PENDING_UPDATE)?;
        eprintln!(
            "vm {}: boot loader: booting the updated OS {version}",
            self.name
        );
        Ok(())
    }

    fn qemu_args(&self, cmdline: &str) -> Result<Vec<String>> {
        let d = self.dir.path();
        let mut a: Vec<String> = vec!["-name".into(), self.name.clone()];
        match self.accel {
            Accel::Kvm => {
                a.extend(["-machine", "q35", "-accel", "kvm", "-cpu", "host"].map(String::from))
            }
            Accel::Tcg => a.extend(
                [
                    "-machine",
                    "q35",
                    "-accel",
                    "tcg,thread=multi",
                    "-cpu",
                    "qemu64",
                ]
                .map(String::from),
            ),
        }
        a.extend(["-smp", "2", "-m", "1024", "-nodefaults", "-no-user-config"].map(String::from));
        a.extend(["-display", "none", "-no-reboot"].map(String::from));
        a.extend([
            "-kernel".into(),
            self.image.kernel.display().to_string(),
            "-initrd".into(),
            self.image.initrd.display().to_string(),
            "-append".into(),
            cmdline.into(),
            "-drive".into(),
            format!(
                "file={},format=raw,if=virtio,cache=unsafe",
                self.disk.path().display()
            ),
            "-device".into(),
            "virtio-rng-pci".into(),
            "-chardev".into(),
            format!(
                "file,id=con,path={},append=on",
                self.console_path().display()
            ),
            "-serial".into(),
            "chardev:con".into(),
            "-chardev".into(),
            format!(
                "socket,id=qga,path={},server=on,wait=off",
                d.join("qga.sock").display()
            ),
            "-device".into(),
            "virtio-serial-pci".into(),
            "-device".into(),
            "virtserialport,chardev=qga,name=org.qemu.guest_agent.0".into(),
            "-qmp".into(),
            format!("unix:{},server=on,wait=off", d.join("qmp.sock").display()),
        ]);
        if let Some(ign) = &self.ignition {
            a.push("-fw_cfg".into());
            a.push(format!("name=opt/com.coreos/config,file={}", ign.display()));
        }
        let mut nic = "user,model=virtio-net-pci,restrict=on".to_string();
        if let Some(p) = self.ssh_port {
            nic.push_str(&format!(",hostfwd=tcp:127.0.0.1:{p}-:22"));
        }
        for r in &self.to_guest {
            let p = r.addr().port();
            nic.push_str(&format!(",hostfwd=tcp:127.0.0.1:{p}-:{p}"));
        }
        if !self.forwards.is_empty() {
            let helper = crate::built_binary("vm-guestfwd");
            for p in &self.forwards {
                nic.push_str(&format!(
                    ",guestfwd=tcp:{HOST_ALIAS}:{p}-cmd:{} 127.0.0.1 {p}",
                    helper.display()
                ));
            }
        }
        a.push("-nic".into());
        a.push(nic);
        Ok(a)
    }

    fn console_path(&self) -> PathBuf {
        self.dir.path().join("console.log")
    }

    /// Appends `line` to the serial console's log as if the guest had
    /// printed it: how the rig's own test shows a guest kernel lockup
    /// ([`lockup`]) to [`wait_ready`](Self::wait_ready).
    pub fn append_to_console(&self, line: &str) -> Result<()> {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(self.console_path())?;
        writeln!(f, "{line}")?;
        Ok(())
    }

    fn qemu_err(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("qemu.err")).unwrap_or_default()
    }

    /// Waits until the guest agent answers in this boot; returns how long
    /// after QEMU's start that was. A boot whose kernel locks up
    /// ([`lockup`]) is power-cut and started again, up to
    /// [`lockup::MAX_RESTARTS`] times per machine, each with a new
    /// `timeout`.
    pub fn wait_ready(&mut self, timeout: Duration) -> Result<Duration> {
        let mut deadline = Instant::now() + timeout;
        loop {
            let started = self.started.context("not booted")?;
            self.check_alive()?;
            if self.qga.ping(Duration::from_secs(2)) {
                let t = started.elapsed();
                if let Some(b) = self.boots.last_mut() {
                    b.ready_after.get_or_insert(t);
                }
                return Ok(t);
            }
            if let Some(line) = self.soft_lockup()
                && self.lockup_restarts() < lockup::MAX_RESTARTS
            {
                self.restart_after_lockup(line)?;
                deadline = Instant::now() + timeout;
                continue;
            }
            if Instant::now() > deadline {
                bail!(
                    "{}: the guest agent did not answer within {timeout:?}\n{}",
                    self.name,
                    self.diagnostics()
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The running boot's first soft-lockup line on the console, if any.
    fn soft_lockup(&self) -> Option<String> {
        use std::io::{Read, Seek};
        let mut f = std::fs::File::open(self.console_path()).ok()?;
        f.seek(std::io::SeekFrom::Start(self.console_from)).ok()?;
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes).ok()?;
        lockup::soft_lockup_line(&String::from_utf8_lossy(&bytes)).map(str::to_string)
    }

    /// The hardware watchdog's part ([`lockup`]): cut the power of a boot
    /// whose kernel locked up, say so, and boot again.
    fn restart_after_lockup(&mut self, line: String) -> Result<()> {
        if let Some(b) = self.boots.last_mut() {
            b.locked_up = Some(line.clone());
        }
        eprintln!(
            "vm {}: the guest kernel locked up ({}), an emulator fault no program in the guest causes or ends: \
             power cut and boot again ({} of at most {})",
            self.name,
            line.trim(),
            self.lockup_restarts(),
            lockup::MAX_RESTARTS
        );
        self.power_cut()?;
        self.boot()
    }

    /// Fails if QEMU has exited (the boot ended under the caller's feet).
    fn check_alive(&mut self) -> Result<()> {
        let child = self.qemu.as_mut().context("the VM is not running")?;
        if let Some(st) = child.try_wait()? {
            let end = self.finish(Some(st));
            bail!(
                "{}: the VM went down ({end:?}, {st})\n{}",
                self.name,
                self.diagnostics()
            );
        }
        Ok(())
    }

    /// Records the end of the running boot.
    fn finish(&mut self, status: Option<std::process::ExitStatus>) -> BootEnd {
        let killed = status.is_some_and(|s| {
            use std::os::unix::process::ExitStatusExt;
            s.signal() == Some(9)
        });
        let reason = self.qmp.take().and_then(|q| q.shutdown_reason());
        let end = match (killed, reason.as_deref()) {
            (true, _) => BootEnd::PowerLoss,
            (false, Some("guest-reset")) => BootEnd::Reboot,
            (false, Some("guest-shutdown")) => BootEnd::Poweroff,
            _ => BootEnd::Other(status.and_then(|s| s.code()), None),
        };
        let lasted = self.started.take().map(|s| s.elapsed());
        if let Some(b) = self.boots.last_mut() {
            b.end = Some(end);
            b.lasted = lasted;
            eprintln!(
                "vm {}: boot {} ended after {:.1}s: {end:?} (guest agent up after {})",
                self.name,
                b.number,
                lasted.unwrap_or_default().as_secs_f64(),
                b.ready_after
                    .map(|d| format!("{:.1}s", d.as_secs_f64()))
                    .unwrap_or_else(|| "-".into())
            );
        }
        self.qemu = None;
        self.qga.reset();
        end
    }

    /// Waits for the running boot to end (reboot, poweroff, crash).
    pub fn wait_down(&mut self, timeout: Duration) -> Result<BootEnd> {
        let deadline = Instant::now() + timeout;
        loop {
            let child = self.qemu.as_mut().context("the VM is not running")?;
            if let Some(st) = child.try_wait()? {
                return Ok(self.finish(Some(st)));
            }
            if Instant::now() > deadline {
                bail!(
                    "{}: the VM did not go down within {timeout:?}\n{}",
                    self.name,
                    self.diagnostics()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Power loss: SIGKILL of QEMU. The guest's page cache is gone.
    pub fn power_cut(&mut self) -> Result<()> {
        self.kill()?;
        eprintln!("vm {}: power cut", self.name);
        Ok(())
    }

    fn kill(&mut self) -> Result<BootEnd> {
        let child = self.qemu.as_mut().context("the VM is not running")?;
        child.kill()?;
        let st = child.wait()?;
        Ok(self.finish(Some(st)))
    }

    /// A clean poweroff from inside (`systemctl poweroff`).
    pub fn shutdown(&mut self) -> Result<()> {
        if !self.is_running() {
            return Ok(());
        }
        let _ = self
            .qga
            .exec(&["systemctl", "poweroff"], Duration::from_secs(30));
        match self.wait_down(Duration::from_secs(180))? {
            BootEnd::Poweroff => Ok(()),
            other => bail!("{}: poweroff ended as {other:?}", self.name),
        }
    }

    /// Runs `argv` in the guest as root.
    pub fn exec(&self, argv: &[&str]) -> Result<GuestOutput> {
        self.exec_timeout(argv, EXEC_TIMEOUT)
    }

    pub fn exec_timeout(&self, argv: &[&str], timeout: Duration) -> Result<GuestOutput> {
        self.qga
            .exec(argv, timeout)
            .with_context(|| format!("{}: running {argv:?}", self.name))
    }

    /// Runs a shell script in the guest (`sh -c`).
    pub fn sh(&self, script: &str) -> Result<GuestOutput> {
        self.exec(&["/bin/sh", "-c", script])
    }

    /// A file's contents: from the running guest, or from the disk while
    /// the VM is down (after replaying its journal, as the next boot
    /// would). `None` if it does not exist.
    pub fn read_bytes(&self, path: &str) -> Option<Vec<u8>> {
        self.try_read_bytes(path)
            .unwrap_or_else(|e| panic!("{}: reading {path}: {e:#}", self.name))
    }

    /// [`read_bytes`](Self::read_bytes), with an error instead of a panic
    /// when the guest cannot be asked (e.g. while it shuts down).
    pub fn try_read_bytes(&self, path: &str) -> Result<Option<Vec<u8>>> {
        if self.is_running() {
            self.qga.read_file(path)
        } else {
            self.disk.replay_journal()?;
            self.disk.read(path)
        }
    }

    /// [`read_bytes`](Self::read_bytes) as text.
    pub fn read(&self, path: &str) -> Option<String> {
        self.read_bytes(path)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    }

    /// Whether `path` exists: in the running guest (`test -e` through the
    /// guest agent), or on the disk while the VM is down (after replaying
    /// its journal). Panics when it cannot tell (the guest agent or the
    /// disk tools failing): a question not answered is never "no".
    pub fn exists(&self, path: &str) -> bool {
        self.try_exists(path)
            .unwrap_or_else(|e| panic!("{}: does {path} exist? {e:#}", self.name))
    }

    /// [`exists`](Self::exists), with an error instead of a panic.
    pub fn try_exists(&self, path: &str) -> Result<bool> {
        if self.is_running() {
            let out = self.exec(&["test", "-e", path])?;
            match out.code {
                Some(0) => Ok(true),
                Some(1) => Ok(false),
                other => bail!(
                    "`test -e {path}` in the guest ended with {other:?}: {}",
                    out.stderr_str()
                ),
            }
        } else {
            self.disk.replay_journal()?;
            self.disk.exists(path)
        }
    }

    /// `systemctl show -p PROP --value UNIT`.
    pub fn prop(&self, unit: &str, prop: &str) -> Result<String> {
        let out = self.exec(&["systemctl", "show", "-p", prop, "--value", unit])?;
        if !out.success() {
            bail!("systemctl show {unit}: {}", out.stderr_str());
        }
        Ok(out.stdout_str().trim().to_string())
    }

    /// Polls `check` until it returns `Some`, failing with diagnostics
    /// after `timeout` or when the VM goes down.
    pub fn wait_for<T>(
        &mut self,
        what: &str,
        timeout: Duration,
        mut check: impl FnMut(&VmNode) -> Option<T>,
    ) -> Result<T> {
        let deadline = Instant::now() + timeout;
        loop {
            self.check_alive()?;
            if let Some(v) = check(self) {
                return Ok(v);
            }
            if Instant::now() > deadline {
                bail!(
                    "{}: timed out after {timeout:?} waiting for {what}\n{}",
                    self.name,
                    self.diagnostics()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    pub fn wait_active_state(&mut self, unit: &str, state: &str, timeout: Duration) -> Result<()> {
        self.wait_for(&format!("{unit} to be {state}"), timeout, |n| {
            (n.prop(unit, "ActiveState").ok()? == state).then_some(())
        })
    }

    /// A unit's journal in this boot (`journalctl -b -u UNIT`).
    pub fn journal(&self, unit: &str) -> String {
        self.exec(&[
            "journalctl",
            "-b",
            "--no-pager",
            "-o",
            "short-monotonic",
            "-u",
            unit,
        ])
        .map(|o| o.stdout_str())
        .unwrap_or_else(|e| format!("(journal of {unit} unavailable: {e:#})"))
    }

    /// The last `lines` lines of the serial console (all boots).
    pub fn console_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.console_path()).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// What a failing test prints: the console's end and, if the guest
    /// answers, failed units and the journal's end.
    pub fn diagnostics(&self) -> String {
        let mut s = format!(
            "--- {} ({:?}, boots {:?})\n--- console (last 40 lines):\n{}\n",
            self.name,
            self.accel,
            self.boots,
            self.console_tail(40)
        );
        if self.is_running()
            && self.qga.ping(Duration::from_secs(2))
            && let Ok(o) = self.qga.exec(
                &[
                    "/bin/sh",
                    "-c",
                    "systemctl --failed --no-pager; journalctl -b --no-pager -n 60 -o short-monotonic",
                ],
                Duration::from_secs(60),
            )
        {
            s.push_str("--- failed units and journal (last 60 lines):\n");
            s.push_str(&o.stdout_str());
        }
        s
    }
}

impl Drop for VmNode {
    fn drop(&mut self) {
        if let Some(mut c) = self.qemu.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::env::var_os("VMNODE_KEEP").is_some() {
            let kept = self.dir.path().to_path_buf();
            eprintln!("vm {}: kept {}", self.name, kept.display());
            std::mem::forget(std::mem::replace(
                &mut self.dir,
                tempfile::tempdir().expect("temp dir"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Four tests asking for a turn at once: never more than `at_once()`
    /// hold one, and every one gets its turn.
    #[test]
    fn no_more_tests_than_at_once_run_machines_and_each_gets_a_turn() {
        let holding = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let done = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    let _turn = slot();
                    let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(100));
                    holding.fetch_sub(1, Ordering::SeqCst);
                    done.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        assert_eq!(done.load(Ordering::SeqCst), 4);
        assert_eq!(most.load(Ordering::SeqCst), at_once().min(4));
    }
}
