//! containerd's configuration as the agent writes it, laid out as
//! Flatcar's own `/usr/share/containerd/config.toml` (config version 2,
//! the runc v2 shim, the socket at `/run/containerd/containerd.sock`)
//! with what a kubelet of the cluster needs on top: the cgroup driver the
//! kubelet is given, the pod sandbox image, the snapshotter, and the CNI
//! directories the node's network add-on writes to.
//!
//! No `imports`, and the file's first line says so. containerd 1.6 merges
//! an imported file by replacing each plugin's whole section: with a
//! fragment that sets only the CRI plugin's `registry.config_path`,
//! `containerd config dump` of 1.6.20 shows the sandbox image back at its
//! default, `SystemdCgroup` false and the CNI directories at theirs, while
//! 2.1.4 keeps the main file's keys and adds the fragment's
//! (`tests/host/containerd_cri.rs` runs both). A fragment could thus not
//! add to the agent's settings on 1.6/1.7, only silently undo them. An
//! operator who needs more writes the whole file and sets
//! `runtime.containerd.existing_config: use` (see below).
//!
//! Which file containerd reads is chosen by a drop-in of
//! `containerd.service` that sets `CONTAINERD_CONFIG` (Flatcar's unit runs
//! `containerd --config ${CONTAINERD_CONFIG}`; a unit without the variable,
//! such as Debian's, reads `/etc/containerd/config.toml`, the same file).
//!
//! The agent owns the file only when its first line is [`MARKER`]; a file
//! there without it is the operator's, never overwritten.

/// The first line of every file the agent writes.
pub const MARKER: &str = "# Written by node-bootstrap; replaced on the next bootstrap. containerd reads no other file with it (no imports): to change it, replace it with your own (runtime.containerd.existing_config: use).";
/// First lines of files earlier agents wrote (still the agent's own).
pub const OLD_MARKERS: &[&str] = &[
    "# Written by node-bootstrap; replaced on the next bootstrap. Add settings in conf.d/*.toml.",
];

/// What the file says, beyond Flatcar's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerdConfig {
    /// The socket the kubelet is pointed at.
    pub socket: String,
    /// `true`: runc places containers through systemd (`systemd` cgroup
    /// driver, the cgroup v2 default); `false`: cgroupfs.
    pub systemd_cgroup: bool,
    pub sandbox_image: String,
    pub cni_conf_dir: String,
    pub cni_bin_dir: String,
    /// `overlayfs` (containerd's default), or e.g. `native` where the
    /// root file system cannot hold overlay mounts.
    pub snapshotter: String,
}

/// The TOML text. Every value is a TOML basic string written as JSON
/// writes it (the escapes of both agree for what a path or an image
/// reference can hold; the validated settings hold nothing else).
pub fn render(c: &ContainerdConfig) -> String {
    let q = |s: &str| serde_json::to_string(s).expect("a string serializes");
    let cri = "plugins.\"io.containerd.grpc.v1.cri\"";
    format!(
        "{MARKER}
version = 2
root = \"/var/lib/containerd\"
state = \"/run/containerd\"

[grpc]
  address = {socket}

[{cri}]
  sandbox_image = {sandbox}

[{cri}.containerd]
  default_runtime_name = \"runc\"
  snapshotter = {snapshotter}

[{cri}.containerd.runtimes.runc]
  runtime_type = \"io.containerd.runc.v2\"

[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = {systemd}

[{cri}.cni]
  conf_dir = {conf}
  bin_dir = {bin}
",
        snapshotter = q(&c.snapshotter),
        socket = q(&c.socket),
        sandbox = q(&c.sandbox_image),
        systemd = c.systemd_cgroup,
        conf = q(&c.cni_conf_dir),
        bin = q(&c.cni_bin_dir),
    )
}

/// Whether a file found at the config's path is the agent's own.
pub fn is_ours(text: &str) -> bool {
    text.lines()
        .next()
        .is_some_and(|l| l == MARKER || OLD_MARKERS.contains(&l))
}

/// The `containerd.service` drop-in that makes containerd read `path`.
pub fn service_dropin(path: &str) -> String {
    format!(
        "# Written by node-bootstrap: containerd reads the configuration the agent wrote.\n\
         [Service]\n\
         Environment=CONTAINERD_CONFIG={path}\n"
    )
}

/// Whether a drop-in's text is one the agent wrote.
pub fn is_our_dropin(text: &str) -> bool {
    text.starts_with("# Written by node-bootstrap")
}

/// Whether `s` reads as an image reference (`[host[:port]/]path[:tag][@digest]`,
/// lower-case path components), as the sandbox image setting must.
pub fn is_image_reference(s: &str) -> bool {
    let (rest, digest) = match s.split_once('@') {
        Some((r, d)) => (r, Some(d)),
        None => (s, None),
    };
    if let Some(d) = digest {
        let ok = d.split_once(':').is_some_and(|(alg, hex)| {
            !alg.is_empty() && hex.len() >= 32 && hex.bytes().all(|b| b.is_ascii_hexdigit())
        });
        if !ok {
            return false;
        }
    }
    // A tag follows the last ':' after the last '/'.
    let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match rest[last_slash..].rfind(':') {
        Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
        None => (rest, None),
    };
    let tag_ok = tag.is_none_or(|t| {
        !t.is_empty()
            && t.len() <= 128
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
            && !t.starts_with(['.', '-'])
    });
    let mut parts = name.split('/').peekable();
    let first = parts.peek().copied().unwrap_or("");
    // A first component with '.', ':' or "localhost" is a registry host.
    let has_host =
        name.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    if has_host {
        parts.next();
        let host_ok = first
            .split_once(':')
            .map_or(Some(first), |(h, port)| {
                port.bytes().all(|b| b.is_ascii_digit()).then_some(h)
            })
            .is_some_and(|h| {
                !h.is_empty()
                    && h.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-.".contains(&b))
            });
        if !host_ok {
            return false;
        }
    }
    let path_ok = parts.all(|p| {
        !p.is_empty()
            && p.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
            && p.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
    });
    tag_ok && path_ok && !name.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ContainerdConfig {
        ContainerdConfig {
            socket: "/run/containerd/containerd.sock".into(),
            systemd_cgroup: true,
            sandbox_image: "registry.k8s.io/pause:3.10".into(),
            cni_conf_dir: "/etc/kubernetes/cni/net.d".into(),
            cni_bin_dir: "/opt/cni/bin".into(),
            snapshotter: "overlayfs".into(),
        }
    }

    #[test]
    fn the_file_is_flatcars_layout_with_the_kubelets_settings() {
        let text = render(&config());
        assert!(is_ours(&text));
        assert!(text.contains("\nversion = 2\n"), "{text}");
        assert!(!text.contains("imports ="), "{text}");
        assert!(text.contains("snapshotter = \"overlayfs\""), "{text}");
        assert!(
            text.contains("[grpc]\n  address = \"/run/containerd/containerd.sock\""),
            "{text}"
        );
        assert!(
            text.contains("runtime_type = \"io.containerd.runc.v2\""),
            "{text}"
        );
        assert!(text.contains("SystemdCgroup = true"), "{text}");
        assert!(
            text.contains("sandbox_image = \"registry.k8s.io/pause:3.10\""),
            "{text}"
        );
        assert!(
            text.contains("conf_dir = \"/etc/kubernetes/cni/net.d\""),
            "{text}"
        );
        let cgroupfs = render(&ContainerdConfig {
            systemd_cgroup: false,
            ..config()
        });
        assert!(cgroupfs.contains("SystemdCgroup = false"), "{cgroupfs}");
    }

    #[test]
    fn a_file_without_the_marker_is_the_operators() {
        assert!(!is_ours("version = 2\n"));
        assert!(!is_ours(&format!("\n{MARKER}\n")));
        assert!(!is_ours(""));
        // An earlier agent's file is still the agent's (and is rewritten).
        assert!(is_ours(&format!("{}\nversion = 2\n", OLD_MARKERS[0])));
        assert!(!MARKER.contains("conf.d"), "the file promises no imports");
    }

    #[test]
    fn image_references_are_told_from_other_strings() {
        for good in [
            "registry.k8s.io/pause:3.10",
            "k8s.gcr.io/pause:3.2",
            "pause",
            "library/pause:latest",
            "localhost:5000/pause:3.2",
            "my-registry.example:443/team/pause",
            "registry.k8s.io/pause@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a",
        ] {
            assert!(is_image_reference(good), "{good}");
        }
        for bad in [
            "",
            "Registry.k8s.io/Pause:3.10",
            "pause:",
            "pause:3.10 ",
            "http://registry.k8s.io/pause:3.10",
            "registry.k8s.io//pause",
            "pause@sha256:xyz",
            "/pause",
        ] {
            assert!(!is_image_reference(bad), "{bad}");
        }
    }
}
