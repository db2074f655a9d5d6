//! The CNI networks the test rig gives nodes' runtimes
//! (`testkit::pods`), run through Debian's real plugins as a runtime runs
//! them (`CNI_COMMAND=ADD`, the network config on stdin) in a private
//! network and mount namespace (nothing of the host's network, netns or
//! IPAM state is touched): the bridge network gives a pod namespace an
//! address of its own in the subnet with the bridge as its gateway, which
//! it reaches; the loopback network brings the pod's `lo` up.

use serde_json::Value;
use std::process::Command;
use testkit::pods;

/// What a runtime passes a plugin for the first (here: only) plugin of a
/// conflist: the plugin's config with the network's name and CNI version.
fn first_plugin_config(conflist: &str) -> (String, String) {
    let list: Value = serde_json::from_str(conflist).unwrap();
    let plugins = list["plugins"].as_array().unwrap();
    assert_eq!(plugins.len(), 1, "{conflist}");
    let mut conf = plugins[0].clone();
    conf["name"] = list["name"].clone();
    conf["cniVersion"] = list["cniVersion"].clone();
    (conf["type"].as_str().unwrap().to_string(), conf.to_string())
}

/// Runs `script` in a new network and mount namespace, with a fresh
/// `/run/netns` and `/var/lib/cni` (host-local's leases); stdout on success.
fn in_private_namespaces(script: &str) -> String {
    let setup = "set -e\n\
        mkdir -p /run/netns /var/lib/cni\n\
        mount -t tmpfs tmpfs /run/netns\n\
        mount -t tmpfs tmpfs /var/lib/cni\n\
        ip link set lo up\n\
        ip netns add pod\n";
    let out = Command::new("unshare")
        .args(["--net", "--mount", "--propagation", "private", "sh", "-c"])
        .arg(format!("{setup}{script}"))
        .output()
        .expect("running unshare");
    assert!(
        out.status.success(),
        "{script}\nfailed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn add(plugin: &str, conf: &str) -> String {
    format!(
        "echo '{conf}' | CNI_COMMAND=ADD CNI_CONTAINERID=nb-test CNI_NETNS=/run/netns/pod \
         CNI_IFNAME=eth0 CNI_PATH={bin} {bin}/{plugin}\necho\n",
        bin = pods::CNI_BIN_DIR
    )
}

fn skip() -> bool {
    testkit::skip_unless_root("network namespaces")
        || testkit::skip_without(&[
            "unshare",
            "ip",
            "/usr/lib/cni/bridge",
            "/usr/lib/cni/host-local",
            "/usr/lib/cni/loopback",
            testkit::docker::BUSYBOX,
        ])
}

#[test]
fn the_bridge_network_gives_a_pod_an_address_of_its_own_behind_its_gateway() {
    if skip() {
        return;
    }
    let (plugin, conf) = first_plugin_config(&pods::cni_bridge_conflist("nbtest0", "10.88.0.0/24"));
    assert_eq!(plugin, "bridge");
    let out = in_private_namespaces(&format!(
        "{}ip netns exec pod ip -4 -o addr show dev eth0\n\
         ip netns exec pod {busybox} ping -c 1 -W 2 10.88.0.1 >/dev/null\necho gateway-reached\n",
        add(&plugin, &conf),
        busybox = testkit::docker::BUSYBOX,
    ));
    let (result, rest) = out.split_once("\n}\n").expect("the plugin's JSON result");
    let result: Value = serde_json::from_str(&format!("{result}\n}}")).unwrap();
    let ip = &result["ips"][0];
    assert_eq!(ip["gateway"], "10.88.0.1", "{result}");
    let address = ip["address"].as_str().unwrap();
    assert!(
        address.starts_with("10.88.0.") && address.ends_with("/24"),
        "{result}"
    );
    // The pod's own interface has that address, and its gateway answers.
    assert!(
        rest.contains(&format!("inet {address} ")),
        "eth0 in the pod: {rest}"
    );
    assert!(rest.contains("gateway-reached"), "{rest}");
}

#[test]
fn the_loopback_network_brings_the_pods_lo_up() {
    if skip() {
        return;
    }
    let (plugin, conf) = first_plugin_config(&pods::cni_loopback_conflist());
    assert_eq!(plugin, "loopback");
    let out = in_private_namespaces(&format!(
        "ip netns exec pod ip -o link show dev lo\n{}ip netns exec pod ip -o link show dev lo\n",
        add(&plugin, &conf)
    ));
    let lines: Vec<&str> = out.lines().filter(|l| l.contains(": lo:")).collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].contains("state DOWN"), "before: {out}");
    assert!(!lines[1].contains("state DOWN"), "after the plugin: {out}");
}
