//! A worker with an OS update joins a control plane on the host on the
//! OS's containerd, and a pod with an address of its own runs on it.
//!
//! The worker starts with a bootstrap token only, as the metal example
//! renders it with `bootstrap_token` set (the bootstrap-token module's
//! kubeconfig; no client certificate, key or static token in its Ignition
//! config); the control plane runs in bootstrap-token mode with the
//! module's token Secret and RBAC. The agent reads `/version` with the
//! token, and the real kubelet earns a `CN=system:node:<name>`,
//! `O=system:nodes` certificate of the cluster CA under
//! `/var/lib/kubelet/pki`.
//!
//! The worker's agent is told `runtime.name: containerd`: after the OS
//! update's reboot it writes containerd's config, starts containerd and
//! asks it over its socket before kubelet.env; the real kubelet of the
//! cluster's release talks to it through CRI. The VM's kernel lets runc
//! lower a process's `oom_score_adj`, so the real runc runs the pods
//! untouched (the simulated nodes need a test shim for that).
//!
//! The pod is no `hostNetwork` one: the bridge CNI plugin gives it an
//! address of its own, and `kubectl logs` and `exec` reach it through the
//! API server on the host, which dials the VM's kubelet. How the host
//! reaches a kubelet behind QEMU's user networking: [`KubeletReach`].
//!
//! Then Kubernetes' node conformance suite runs on that worker
//! (`conformance_vm`: CI's sample of it, or the whole suite).

use crate::checks::*;
use crate::rig::*;
use crate::*;
use std::fs;
use std::time::{Duration, Instant};
use testkit::kube::ControlPlane;
use testkit::pods;
use testkit::tls_bootstrap::{
    BootstrapToken, KUBELET_CLIENT_CERT, check_holds_bootstrap_token_only, check_node_client_cert,
    rfc3339_in,
};
use testkit::vm::{BootEnd, HOST_ALIAS, VmNode};

#[test]
fn worker_first_boot_with_an_os_update_joins_a_control_plane_on_containerd_and_runs_a_pod() {
    if skip(&["terraform", "ssh-keygen", "strip"])
        || testkit::kube::skip_unless_available()
        || testkit::conformance::skip_unless_available()
    {
        return;
    }
    let _turn = testkit::vm::slot();
    let t0 = Instant::now();
    // The control plane on the host, its certificate valid for the address
    // the VM reaches the host at; it dials kubelets at their InternalIP. In
    // bootstrap-token mode: the token's Secret and the RBAC (rendered by
    // the module) applied, node certificates signed by the cluster CA for
    // a day. The metal example renders the worker's bootstrap kubeconfig
    // from the token and the server and CA of the masters' kubeconfig (a
    // client certificate; no master boots here).
    let parts = testkit::kube::parts().unwrap();
    let mut cp = ControlPlane::new(&[HOST_ALIAS]);
    cp.extra_apiserver_args
        .push("--kubelet-preferred-address-types=InternalIP".into());
    let token = BootstrapToken::generate();
    let expiration = rfc3339_in(Duration::from_secs(4 * 3600));
    let signing = Duration::from_secs(24 * 3600);
    let guest_url = VmNode::guest_url(&cp.url());
    cp.enable_tls_bootstrap(
        signing,
        &[(token.clone(), expiration.clone())],
        Some(&guest_url),
    )
    .unwrap();
    let running = cp.start(&parts).unwrap();
    let mut d = Delivery::new();
    d.kubeconfig = cp.node_kubeconfig("master-0", Some(&guest_url));
    d.bootstrap_token = Some(serde_json::json!({
        "id": token.id, "secret": token.secret(), "expiration": expiration,
    }));
    d.runtime_mappings = d.path().join("runtime-mappings.yaml");
    fs::write(&d.runtime_mappings, testkit::cluster::runtime_mappings()).unwrap();
    let reach = KubeletReach::new();
    let (mut vm, ignition) = containerd_worker(&d, &parts, reach);
    check_holds_bootstrap_token_only(&serde_json::from_str(&ignition).unwrap(), &token)
        .unwrap_or_else(|e| panic!("the worker's Ignition config: {e:#}"));
    vm.forward_to_host(cp.apiserver_port);
    let registries = crate::conformance_vm::registries_for(&mut vm);
    let booted_at = std::time::SystemTime::now();
    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();

    // Boot 1 ends in the agent's own reboot (logind) for the OS update
    // alone: containerd is the OS's, nothing to install.
    assert_eq!(vm.wait_down(WORK).unwrap(), BootEnd::Reboot);
    assert!(
        vm.read("/etc/kubernetes/kubelet.env").is_none(),
        "kubelet.env must wait for the boot that runs the new OS"
    );
    assert_eq!(
        vm.read(testkit::vm::PENDING_UPDATE).unwrap().trim(),
        NEXT_OS,
        "update_engine staged the new OS"
    );
    let j = state_journal(&vm).unwrap();
    assert_eq!(
        j["steps"]["reboot"]["result"]["reason"],
        format!("os {OS_VERSION} -> {NEXT_OS}"),
        "{j:#}"
    );

    // Boot 2: the new OS; the agent confirms it, writes containerd's
    // config, starts containerd and proves it, then writes kubelet.env;
    // the real kubelet registers on containerd.
    vm.boot().unwrap();
    vm.wait_ready(BOOT).unwrap();
    let containerd = assert_updated_and_complete_on_containerd(&vm, &parts.version);
    let ready = running
        .kubectl
        .wait_ready(&[VM_HOSTNAME], WORK)
        .unwrap_or_else(|e| panic!("{e:#}\n{}", vm.diagnostics()));
    let untainted = bench_untainted(&running.kubectl, VM_HOSTNAME);
    let node = ready.iter().find(|n| n.name == VM_HOSTNAME).unwrap();
    assert_eq!(node.kubelet_version, parts.version);
    assert_eq!(
        node.container_runtime_version,
        format!(
            "containerd://{}",
            pods::kubelet_shown_version(&containerd.version)
        )
    );
    assert_eq!(node.labels["node.kubernetes.io/role"], "worker");
    // The kubelet's own certificate, earned with the token.
    let env = vm.read("/etc/kubernetes/kubelet.env").unwrap();
    assert!(
        env.contains("--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubeconfig"),
        "{env}"
    );
    let pem = vm
        .read(KUBELET_CLIENT_CERT)
        .unwrap_or_else(|| panic!("no {KUBELET_CLIENT_CERT}\n{}", vm.diagnostics()));
    let cert = check_node_client_cert(&cp.pki.ca_pem, &pem, VM_HOSTNAME)
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(
        cert.not_after - cert.not_before,
        signing.as_secs() as i64,
        "signed by the controller manager"
    );
    assert_eq!(
        node_internal_ip(&running.kubectl, VM_HOSTNAME),
        reach.node_ip.to_string(),
        "the Node's address is the one the API server can dial"
    );
    bench_rows(
        &vm,
        booted_at,
        node.ready_since.expect("a Ready condition"),
        untainted,
    );
    assert_eq!(
        lines(&vm, "/var/lib/kubelet-wrapper/starts").len(),
        1,
        "kubelet started once, in the second boot"
    );
    assert_eq!(
        vm.prop("k8s-node-bootstrap.service", "NRestarts").unwrap(),
        "0"
    );

    // A pod of its own network on the node; the API server reaches it.
    import_pod_images(&vm);
    let pod_started = Instant::now();
    a_pod_with_its_own_address_runs_and_kubectl_reaches_it(&running.kubectl, &vm, reach);
    eprintln!(
        "vm {}: the pod ran and kubectl reached it in {:.1}s",
        vm.name(),
        pod_started.elapsed().as_secs_f64()
    );
    let suite_started = Instant::now();
    crate::conformance_vm::the_node_conformance_suite_passes_on_the_vm(
        &running.kubectl,
        &vm,
        &registries,
    );
    eprintln!(
        "vm {}: node conformance took {:.0}s",
        vm.name(),
        suite_started.elapsed().as_secs_f64()
    );
    vm.shutdown().unwrap();
    report(&vm, t0);
}
