//! The shipped units' sandboxes as the kernel applies them on a simulated
//! node (systemd 252 as PID 1 in a PID and mount namespace, entered with
//! `unshare --root`): does the rig apply every option the units ask for?
//! Each sandboxed service is started with its program replaced by a
//! waiting one (a drop-in's `ExecStart=/bin/sleep`, every sandbox setting
//! kept), and the test reads from outside what its process got: the
//! capability bounding set, no-new-privileges and the seccomp filter
//! (/proc/<pid>/status), its own mount, network and UTS namespaces, what
//! it may write (`test -w` in its mount namespace: EROFS on a read-only
//! mount), a private /tmp, hidden home directories, /proc mounted with
//! `hidepid=invisible` and `subset=pid`, a private /dev, and the device
//! list of its cgroup. tests/vm/checks.rs reads k8s-node-bootstrap's on a
//! real machine (docs/security-review.md, "Sandboxing on the test rig").
//!
//! The other node tests run the real agent (and the agent stub) in these
//! sandboxes: a path or capability the agent needs and its unit denies
//! fails them.

use std::time::Duration;
use testkit::agentnode::{AGENT_PATH, install_units};
use testkit::simnode::{SimNode, skip_unless_possible};

const T: Duration = Duration::from_secs(60);

/// What one unit's sandbox must hold.
struct Expect {
    unit: &'static str,
    /// The capability bounding set (CapBnd in /proc/<pid>/status).
    cap_bnd: u64,
    /// Seccomp filter and no-new-privileges.
    no_new_privs: bool,
    writable: &'static [&'static str],
    read_only: &'static [&'static str],
    private_tmp: bool,
    hidden_home: bool,
    private_network: bool,
    private_devices: bool,
    /// /proc options: hidepid=invisible, subset=pid.
    proc_invisible: bool,
    proc_subset: bool,
    own_uts: bool,
}

/// Every capability this kernel knows (CapBnd of PID 1).
fn all_caps(n: &SimNode) -> u64 {
    cap_bnd(n, "1")
}

fn cap_bnd(n: &SimNode, pid: &str) -> u64 {
    let status = n.read(&format!("/proc/{pid}/status")).unwrap();
    let hex = field(&status, "CapBnd:");
    u64::from_str_radix(&hex, 16).unwrap()
}

fn field(status: &str, name: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .unwrap_or_else(|| panic!("no {name} in {status}"))
        .trim()
        .to_string()
}

/// Runs `argv` in the mount namespace and root of `pid` (from inside the
/// node: its root is a chroot in that namespace, not the namespace's root).
fn in_ns(n: &SimNode, pid: &str, argv: &[&str]) -> std::process::Output {
    let mut full = vec!["nsenter", "-t", pid, "-m", "-r", "--"];
    full.extend_from_slice(argv);
    n.exec(&full).unwrap()
}

const CAP_DAC_OVERRIDE: u32 = 1;
const CAP_DAC_READ_SEARCH: u32 = 2;
const CAP_FOWNER: u32 = 3;
const CAP_LINUX_IMMUTABLE: u32 = 9;
const CAP_IPC_LOCK: u32 = 14;
const CAP_SYS_MODULE: u32 = 16;
const CAP_SYS_RAWIO: u32 = 17;
const CAP_SYS_PACCT: u32 = 20;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_SYS_BOOT: u32 = 22;
const CAP_SYS_TIME: u32 = 25;
const CAP_SYS_TTY_CONFIG: u32 = 26;
const CAP_LEASE: u32 = 28;
const CAP_MAC_OVERRIDE: u32 = 32;
const CAP_MAC_ADMIN: u32 = 33;
const CAP_SYSLOG: u32 = 34;
const CAP_WAKE_ALARM: u32 = 35;
const CAP_BLOCK_SUSPEND: u32 = 36;

fn caps(list: &[u32]) -> u64 {
    list.iter().fold(0, |m, c| m | (1u64 << c))
}

fn expectations(all: u64) -> Vec<Expect> {
    let helper_dropped = caps(&[
        CAP_SYS_TIME,
        CAP_SYS_MODULE,
        CAP_SYSLOG,
        CAP_WAKE_ALARM,
        CAP_BLOCK_SUSPEND,
        CAP_SYS_TTY_CONFIG,
        CAP_SYS_PACCT,
        CAP_LINUX_IMMUTABLE,
        CAP_MAC_ADMIN,
        CAP_MAC_OVERRIDE,
        CAP_SYS_BOOT,
        CAP_SYS_RAWIO,
        CAP_LEASE,
    ]);
    let _ = CAP_IPC_LOCK;
    let helper = |unit| Expect {
        unit,
        cap_bnd: all & !helper_dropped,
        no_new_privs: false,
        writable: &[
            "/etc/kubernetes",
            "/etc/systemd/system",
            "/opt/tectonic",
            "/var/lib",
            "/tmp",
        ],
        read_only: &["/usr"],
        private_tmp: false,
        hidden_home: false,
        private_network: false,
        private_devices: false,
        proc_invisible: false,
        proc_subset: false,
        own_uts: false,
    };
    // The day-two services (issue 34): the kubelet's files, a kubelet
    // sysext's link and images, the agent's state and run dirs.
    let follow = |unit, private_network| Expect {
        unit,
        cap_bnd: caps(&[CAP_SYS_ADMIN]),
        no_new_privs: true,
        writable: &[
            "/etc/kubernetes",
            "/etc/extensions",
            "/opt/extensions",
            "/var/lib/node-bootstrap",
            "/var/lib/node_exporter/textfile_collector",
            "/run/node-bootstrap",
            "/tmp",
        ],
        read_only: &[
            "/",
            "/etc",
            "/usr",
            "/var/lib",
            "/opt",
            "/opt/bin",
            "/etc/systemd/system",
            "/etc/node-bootstrap",
            "/run",
            "/run/systemd",
        ],
        private_tmp: true,
        hidden_home: true,
        private_network,
        private_devices: false,
        proc_invisible: true,
        proc_subset: false,
        own_uts: false,
    };
    vec![
        Expect {
            unit: "k8s-node-bootstrap.service",
            cap_bnd: caps(&[
                CAP_SYS_ADMIN,
                CAP_DAC_OVERRIDE,
                CAP_DAC_READ_SEARCH,
                CAP_FOWNER,
            ]),
            no_new_privs: true,
            writable: &[
                "/etc/kubernetes",
                "/etc/torcx",
                "/etc/extensions",
                "/opt/extensions",
                "/etc/containerd",
                "/etc/systemd/system",
                "/run/systemd/system",
                "/opt/bin",
                "/var/lib/node-bootstrap",
                "/var/lib/torcx/store",
                "/var/lib/node_exporter/textfile_collector",
                "/run/node-bootstrap",
                "/tmp",
            ],
            read_only: &[
                "/",
                "/etc",
                "/usr",
                "/var/lib",
                "/opt",
                "/etc/node-bootstrap",
                "/run",
                "/run/systemd",
            ],
            private_tmp: true,
            hidden_home: true,
            private_network: false,
            private_devices: false,
            proc_invisible: true,
            proc_subset: false,
            own_uts: false,
        },
        Expect {
            unit: "init-assets.service",
            cap_bnd: 0,
            no_new_privs: true,
            writable: &[
                "/opt",
                "/var/lib/node-bootstrap",
                "/var/lib/node_exporter/textfile_collector",
                "/run/node-bootstrap",
                "/tmp",
            ],
            read_only: &[
                "/",
                "/etc",
                "/usr",
                "/var/lib",
                "/opt/bin",
                "/etc/kubernetes",
                "/run",
                "/run/systemd",
            ],
            private_tmp: true,
            hidden_home: true,
            private_network: false,
            private_devices: true,
            proc_invisible: true,
            proc_subset: true,
            own_uts: true,
        },
        Expect {
            unit: "node-bootstrap-catalog.service",
            cap_bnd: 0,
            no_new_privs: true,
            writable: &["/var/lib/systemd/catalog", "/tmp"],
            read_only: &[
                "/",
                "/etc",
                "/usr",
                "/var/lib",
                "/var/lib/systemd",
                "/run",
                "/run/systemd",
            ],
            private_tmp: true,
            hidden_home: true,
            private_network: true,
            private_devices: true,
            proc_invisible: true,
            proc_subset: true,
            own_uts: true,
        },
        helper("bootkube.service"),
        helper("tectonic.service"),
        follow("node-bootstrap-follow.service", false),
        follow("node-bootstrap-follow-converge.service", true),
    ]
}

/// A node with the shipped units, each sandboxed service's program
/// replaced by `sleep` (its sandbox kept), and what their conditions need.
fn node() -> SimNode {
    let n = SimNode::new("sandbox").unwrap();
    let mut units: Vec<&str> = testkit::agentnode::UNITS.to_vec();
    units.extend([
        "init-assets.service",
        "node-bootstrap-catalog.service",
        "node-bootstrap-follow.service",
        "node-bootstrap-follow-converge.service",
    ]);
    install_units(&n, &units).unwrap();
    n.install_file(&testkit::standin("agent-stub"), AGENT_PATH, 0o755)
        .unwrap();
    n.write("/usr/lib/systemd/catalog/node-bootstrap.catalog", "", 0o644)
        .unwrap();
    n.write("/etc/node-bootstrap/config.json", "{}", 0o600)
        .unwrap();
    n.write("/opt/tectonic/.keep", "", 0o644).unwrap();
    // The converge service's condition: a kubelet change under way.
    n.write("/var/lib/node-bootstrap/follow/change.json", "{}", 0o600)
        .unwrap();
    n.write("/root/.home-marker", "", 0o600).unwrap();
    for (unit, _) in SERVICES {
        n.drop_in(
            unit,
            "test-waits",
            "[Service]\nType=simple\nRemainAfterExit=no\nExecStart=\nExecStart=/bin/sleep 600\n",
        )
        .unwrap();
    }
    n
}

const SERVICES: &[(&str, ())] = &[
    ("k8s-node-bootstrap.service", ()),
    ("init-assets.service", ()),
    ("node-bootstrap-catalog.service", ()),
    ("bootkube.service", ()),
    ("tectonic.service", ()),
    ("node-bootstrap-follow.service", ()),
    ("node-bootstrap-follow-converge.service", ()),
];

#[test]
fn every_sandbox_option_of_the_shipped_units_is_applied_on_a_simulated_node() {
    if skip_unless_possible() {
        return;
    }
    let mut n = node();
    n.boot().unwrap();
    n.exec(&["sh", "-c", "echo node > /tmp/node-bootstrap-sandbox-marker"])
        .unwrap();
    let all = all_caps(&n);
    let mut wrong = Vec::new();
    for e in expectations(all) {
        n.systemctl(&["start", "--no-block", e.unit]).unwrap();
        // Once its process has become `sleep` (systemd's child sets up the
        // sandbox under the name "(sleep)", then execs).
        let pid = n
            .wait_for(&format!("{} to run", e.unit), T, |n| {
                let pid = n.prop(e.unit, "MainPID").ok()?;
                let cmdline = n.read(&format!("/proc/{pid}/cmdline"))?;
                (pid != "0" && cmdline.starts_with("/bin/sleep")).then_some(pid)
            })
            .unwrap_or_else(|err| panic!("{err}\n{}", n.diagnostics()));
        let status = n.read(&format!("/proc/{pid}/status")).unwrap();
        let mut check = |ok: bool, what: String| {
            if !ok {
                wrong.push(format!("{}: {what}", e.unit));
            }
        };
        let got = cap_bnd(&n, &pid);
        check(
            got == e.cap_bnd,
            format!("CapBnd {got:016x}, want {:016x}", e.cap_bnd),
        );
        let nnp = field(&status, "NoNewPrivs:");
        check((nnp == "1") == e.no_new_privs, format!("NoNewPrivs {nnp}"));
        let seccomp = field(&status, "Seccomp:");
        check(seccomp == "2", format!("Seccomp {seccomp} (2: a filter)"));
        let ns = |pid: &str, kind: &str| {
            std::fs::read_link(n.path(&format!("/proc/{pid}/ns/{kind}")))
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        };
        check(
            ns(&pid, "mnt") != ns("1", "mnt"),
            "shares the node's mount namespace".into(),
        );
        check(
            (ns(&pid, "net") != ns("1", "net")) == e.private_network,
            format!(
                "own network namespace: {}",
                ns(&pid, "net") != ns("1", "net")
            ),
        );
        check(
            (ns(&pid, "uts") != ns("1", "uts")) == e.own_uts,
            format!("own UTS namespace: {}", ns(&pid, "uts") != ns("1", "uts")),
        );
        for path in e.writable {
            let ok = in_ns(&n, &pid, &["test", "-w", path]).status.success();
            check(ok, format!("{path} is not writable"));
        }
        for path in e.read_only {
            let ok = in_ns(&n, &pid, &["test", "-w", path]).status.success();
            check(!ok, format!("{path} is writable"));
        }
        let tmp = in_ns(
            &n,
            &pid,
            &["test", "-e", "/tmp/node-bootstrap-sandbox-marker"],
        );
        check(
            tmp.status.success() != e.private_tmp,
            format!("private /tmp: {}", !tmp.status.success()),
        );
        let home = in_ns(&n, &pid, &["test", "-e", "/root/.home-marker"]);
        check(
            home.status.success() != e.hidden_home,
            format!("hidden /root: {}", !home.status.success()),
        );
        let mounts =
            String::from_utf8_lossy(&in_ns(&n, &pid, &["cat", "/proc/self/mountinfo"]).stdout)
                .into_owned();
        let mount_of = |point: &str| {
            mounts
                .lines()
                .rfind(|l| l.split(' ').nth(4) == Some(point))
                .unwrap_or("")
                .to_string()
        };
        let proc_mount = mount_of("/proc");
        check(
            proc_mount.contains("hidepid=invisible") == e.proc_invisible,
            format!("/proc: {proc_mount}"),
        );
        check(
            proc_mount.contains("subset=pid") == e.proc_subset,
            format!("/proc: {proc_mount}"),
        );
        let dev_mount = mount_of("/dev");
        let private_dev = dev_mount.contains(" - tmpfs ")
            && !in_ns(&n, &pid, &["test", "-e", "/dev/loop-control"])
                .status
                .success();
        check(
            private_dev == e.private_devices,
            format!("private /dev: {private_dev} ({dev_mount})"),
        );
    }
    // The device list of the services that mount images (DevicePolicy=closed
    // and the loop devices), as the v1 devices controller holds it.
    for unit in [
        "k8s-node-bootstrap.service",
        "node-bootstrap-follow.service",
        "node-bootstrap-follow-converge.service",
    ] {
        let cgroup = n.prop(unit, "ControlGroup").unwrap();
        let list = n
            .read(&format!("/sys/fs/cgroup/devices{cgroup}/devices.list"))
            .unwrap_or_default();
        for (line, why) in [
            ("c 10:237 rw", "/dev/loop-control"),
            ("b 7:* rw", "block-loop"),
            ("c 1:3 rwm", "/dev/null"),
        ] {
            if !list.lines().any(|l| l == line) {
                wrong.push(format!(
                    "{unit}: devices.list has no {line:?} ({why}): {list:?}"
                ));
            }
        }
        if list.lines().any(|l| l == "a *:* rwm") {
            wrong.push(format!("{unit}: devices.list allows every device"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{}\n{}",
        wrong.join("\n"),
        n.diagnostics()
    );
    n.shutdown().unwrap();
}
