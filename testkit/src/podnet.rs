//! The pods' network on the tests' simulated nodes: what a cluster's
//! network add-on (flannel's daemon, Calico's node agent) does on each
//! node, played by the rig. A TEST PART: the product never writes a CNI
//! network, it only points the kubelet (dockershim's `--cni-conf-dir`,
//! `--cni-bin-dir`) and containerd (`plugins."io.containerd.grpc.v1.cri".cni`)
//! at `paths.cni_conf_dir` and `paths.cni_bin_dir`, and the add-on of the
//! operator's choice fills them.
//!
//! - The control plane's controller manager allocates each Node a pod
//!   CIDR (`--allocate-node-cidrs`, a `/24` of the cluster CIDR:
//!   [`controller_manager_args`]). Every control plane of a test process
//!   gets a `/16` of its own ([`claim_cluster_cidr`]): simulated nodes
//!   share the host's network namespace, where two clusters' subnets must
//!   not overlap.
//! - On each node, `nb-test-pod-network.service` ([`install`]) waits for
//!   its Node's `spec.podCIDR` (asked with the kubelet's own credentials,
//!   as an add-on's daemon asks with its node's) and writes the node's CNI
//!   list ([`conflist`]) where the agent's configuration points:
//!   Debian's `bridge` plugin on a bridge of the node's own
//!   ([`bridge_name`], in the host's namespace, the pods' gateway) with
//!   `host-local` addresses from the pod CIDR, then `portmap` for
//!   `hostPort`s. Both runtimes bring up a pod's `lo` themselves with the
//!   `loopback` plugin of the same directory. Until the list is there the
//!   runtime reports the network not ready and the Node is NotReady, as
//!   on a cluster whose add-on has not started.
//! - Pods of two nodes reach each other by address: each bridge holds its
//!   subnet's gateway, and the host routes between the bridges
//!   ([`install`] turns on the host's IPv4 forwarding, as dockerd does when
//!   it starts). A node's bridge is deleted with the node.

use crate::simnode::SimNode;
use anyhow::{Context as _, Result};
use serde_json::json;
use std::path::Path;

/// Where the add-on writes the node's CNI list: the agent's default
/// `paths.cni_conf_dir`, which the kubelet (docker) or containerd reads.
pub const CONF_DIR: &str = "/etc/kubernetes/cni/net.d";
pub const CONFLIST: &str = "/etc/kubernetes/cni/net.d/10-nb-pod-network.conflist";
/// The add-on's unit on each node.
pub const UNIT: &str = "nb-test-pod-network.service";
/// Its script on the node.
const SCRIPT: &str = "/usr/lib/node-bootstrap-test/pod-network";
/// The CNI list with `@SUBNET@` for the node's pod CIDR.
const TEMPLATE: &str = "/usr/lib/node-bootstrap-test/pod-network.conflist.in";
/// Each node's pod CIDR: a `/24` of the cluster's `/16`.
pub const NODE_CIDR_MASK: u8 = 24;

/// A `/16` for a cluster's pods (`10.N.0.0/16`, N from 100): none that
/// this process gave before, none the host has an address or route in.
pub fn claim_cluster_cidr() -> String {
    static GIVEN: std::sync::Mutex<Vec<u8>> = std::sync::Mutex::new(Vec::new());
    let host = host_ipv4_routes();
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    let n = (100..=250u8)
        .find(|n| !given.contains(n) && !host.contains(&format!("10.{n}.")))
        .expect("a free 10.N.0.0/16 for the pods (100..250 all taken)");
    given.push(n);
    format!("10.{n}.0.0/16")
}

/// The host's IPv4 addresses and routes, as `ip` prints them (empty when
/// `ip` cannot run: then only this process's own claims count).
fn host_ipv4_routes() -> String {
    ["addr", "route"]
        .iter()
        .filter_map(|what| {
            std::process::Command::new("ip")
                .args(["-4", "-o", what, "show"])
                .output()
                .ok()
        })
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .collect()
}

/// The controller manager's flags that give each Node a pod CIDR of
/// `cluster_cidr`.
pub fn controller_manager_args(cluster_cidr: &str) -> Vec<String> {
    vec![
        "--allocate-node-cidrs=true".into(),
        format!("--cluster-cidr={cluster_cidr}"),
        format!("--node-cidr-mask-size={NODE_CIDR_MASK}"),
    ]
}

/// The node's CNI list: Debian's `bridge` on `bridge` with `host-local`
/// addresses of `subnet`, as [`crate::pods::cni_bridge_conflist`] has it
/// (the pods' gateway, hairpin on), then `portmap` (`hostPort`s; it
/// changes nothing without one).
pub fn conflist(bridge: &str, subnet: &str) -> String {
    let mut list: serde_json::Value =
        serde_json::from_str(&crate::pods::cni_bridge_conflist(bridge, subnet))
            .expect("the bridge conflist is JSON");
    list["name"] = json!("nb-pod-network");
    if let Some(plugins) = list["plugins"].as_array_mut() {
        plugins.push(json!({"type": "portmap", "capabilities": {"portMappings": true}}));
    }
    serde_json::to_string_pretty(&list).expect("a JSON value serializes")
}

/// The node's bridge in the host's network namespace: `nb` and 12 hex
/// digits of the node's own directory name (unique while it exists; a
/// link name has at most 15 bytes).
pub fn bridge_name(n: &SimNode) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(n.id().as_bytes());
    format!("nb{}", &hex::encode(digest)[..12])
}

/// Installs the add-on on node `n` (registered as Node `node_name`),
/// before boot: the template of its CNI list, the script that fills it
/// with the Node's pod CIDR (asking with `kubectl` at its host path,
/// which the node sees), its unit, enabled. The node's bridge is deleted
/// when the node is dropped. Turns on the host's IPv4 forwarding.
pub fn install(n: &SimNode, node_name: &str, kubectl: &Path) -> Result<()> {
    let bridge = bridge_name(n);
    n.write(TEMPLATE, conflist(&bridge, "@SUBNET@"), 0o644)?;
    n.write(
        SCRIPT,
        format!(
            r#"#!/bin/sh
# TEST PART (simulated nodes): the network add-on's daemon, played by the
# node-bootstrap test rig (testkit/src/podnet.rs). Waits for this node's
# pod CIDR (the controller manager's --allocate-node-cidrs), asked with
# the kubelet's own credentials, then writes the node's CNI list where
# the agent's configuration points the runtime.
set -u
node={node_name}
while :; do
    for kc in /var/lib/kubelet/kubeconfig /etc/kubernetes/kubeconfig; do
        [ -s "$kc" ] || continue
        cidr=$({kubectl} --kubeconfig="$kc" --request-timeout=5s get node "$node" \
            -o 'jsonpath={{.spec.podCIDR}}' 2>/dev/null) || cidr=
        [ -n "$cidr" ] && break 2
    done
    sleep 1
done
mkdir -p {CONF_DIR}
sed "s|@SUBNET@|$cidr|" {TEMPLATE} > {CONFLIST}.tmp
mv {CONFLIST}.tmp {CONFLIST}
echo "pod network: node $node has pod CIDR $cidr on bridge {bridge}"
"#,
            kubectl = kubectl.display(),
        ),
        0o755,
    )?;
    n.write(
        &format!("/etc/systemd/system/{UNIT}"),
        format!(
            "# TEST PART (simulated nodes): the network add-on (testkit/src/podnet.rs).\n\
             [Unit]\nDescription=the pods' network of node {node_name} (test rig)\n\n\
             [Service]\nType=simple\nExecStart={SCRIPT}\nRestart=on-failure\nRestartSec=1\n\n\
             [Install]\nWantedBy=multi-user.target\n"
        ),
        0o644,
    )?;
    let wants = n.path(&format!(
        "/etc/systemd/system/multi-user.target.wants/{UNIT}"
    ));
    std::fs::create_dir_all(wants.parent().unwrap())?;
    let _ = std::fs::remove_file(&wants);
    std::os::unix::fs::symlink(format!("/etc/systemd/system/{UNIT}"), &wants)
        .with_context(|| format!("enabling {UNIT} on node {}", n.name()))?;
    n.remove_host_link_on_drop(&bridge);
    enable_ip_forwarding()
}

/// Turns on IPv4 forwarding in the host's network namespace (the nodes'):
/// the host routes between the nodes' bridges.
pub fn enable_ip_forwarding() -> Result<()> {
    let p = "/proc/sys/net/ipv4/ip_forward";
    if std::fs::read_to_string(p).is_ok_and(|v| v.trim() == "1") {
        return Ok(());
    }
    std::fs::write(p, "1").with_context(|| format!("turning on IPv4 forwarding ({p})"))
}

/// The pod CIDR the controller manager gave Node `node` (`None` before
/// it did).
pub fn pod_cidr(kubectl: &crate::kube::Kubectl, node: &str) -> Option<String> {
    kubectl
        .run(&["get", "node", node, "-o", "jsonpath={.spec.podCIDR}"])
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Whether `ip` (dotted IPv4) lies in `cidr` (`a.b.c.d/n`).
pub fn in_cidr(ip: &str, cidr: &str) -> bool {
    let parse = |s: &str| s.parse::<std::net::Ipv4Addr>().ok().map(u32::from);
    let Some((net, bits)) = cidr.split_once('/') else {
        return false;
    };
    let (Some(ip), Some(net), Ok(bits)) = (parse(ip), parse(net), bits.parse::<u32>()) else {
        return false;
    };
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits.min(32))
    };
    ip & mask == net & mask
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_in_a_cidr_by_its_prefix() {
        assert!(in_cidr("10.100.3.7", "10.100.3.0/24"));
        assert!(!in_cidr("10.100.4.7", "10.100.3.0/24"));
        assert!(in_cidr("10.100.4.7", "10.100.0.0/16"));
        assert!(!in_cidr("not-an-ip", "10.100.0.0/16"));
        assert!(!in_cidr("10.100.4.7", "10.100.0.0"));
    }

    #[test]
    fn clusters_of_one_process_get_pod_networks_apart() {
        let a = claim_cluster_cidr();
        let b = claim_cluster_cidr();
        assert_ne!(a, b);
        assert!(a.starts_with("10.") && a.ends_with(".0.0/16"), "{a}");
    }

    #[test]
    fn the_conflist_is_bridge_then_portmap_on_the_nodes_subnet() {
        let c: serde_json::Value =
            serde_json::from_str(&conflist("nb0123456789ab", "10.100.2.0/24")).unwrap();
        assert_eq!(c["plugins"][0]["type"], "bridge");
        assert_eq!(c["plugins"][0]["bridge"], "nb0123456789ab");
        assert_eq!(
            c["plugins"][0]["ipam"]["ranges"][0][0]["subnet"],
            "10.100.2.0/24"
        );
        assert_eq!(c["plugins"][1]["type"], "portmap");
    }
}
