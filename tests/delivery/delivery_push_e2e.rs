//! End to end from terraform, push mode, following docs/operators.md's
//! metal steps literally: its shell blocks ("metal step: copy", "render",
//! "push") run as written with bash in a copy of a checkout's terraform/
//! and units/, against a simulated node (a real systemd as PID 1) that runs
//! sshd on a loopback port.
//!
//! 1. Copy: the example copied beside itself, `terraform.tfvars` from its
//!    example; the test fills in what an operator fills in (the node's
//!    address and host key, the binary's hash, the SSH key, a bootstrap
//!    token: an `.auto.tfvars.json` over the tfvars; the keyring beside it;
//!    the assets in `generated/`). `config.json` and `runtime-mappings.yaml`
//!    are the example's templates as they are.
//! 2. Render: `terraform apply` writes `rendered/<node>.ign` and pushes
//!    nothing (the node is not up: it boots from its config); each file is
//!    what `terraform output -json ignition_configs` says, passes the real
//!    `ignition-validate` and `node-bootstrap check-config --ignition`. The
//!    test does to the node what Ignition would with the master's config
//!    (files, units, enabled units, the core user's SSH key) and boots it.
//! 3. Push: `terraform apply -var push_assets=true` pushes real assets over
//!    SSH as `core` through sudo, with the bootstrap token's Secret and the
//!    RBAC in `manifests/`; the node's path units fire, bootkube.sh and
//!    tectonic-wrapper.sh run once, the .done files appear. The worker's
//!    config holds the bootstrap token only.
//! 4. Apply again: "0 added, 0 changed, 0 destroyed", the helpers do not
//!    run again. Changed assets are pushed again (the push is replaced),
//!    the .done markers survive, the helpers still do not run again; the
//!    next boot skips them too.
//!
//! The agent on the node is testkit/standins/agent-stub (its `run` writes
//! kubelet.env, its `helper bootkube|tectonic` runs the asset script and
//! marks .done), served to "Ignition" from the agent URL with its real
//! SHA-512.

use crate::support::{
    checkout_copy, ignition_validate, operator_shell, operators_md_block, root, skip_without,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha512};
use std::fs;
use std::time::Duration;
use testkit::simnode::{SimNode, skip_unless_possible};
use testkit::sshd::NodeSsh;
use testkit::tls_bootstrap::{
    BootstrapToken, TokenInputs, check_holds_bootstrap_token_only, rfc3339_in,
};

const T: Duration = Duration::from_secs(60);
const AGENT_URL: &str = "https://mirror.test.invalid/node-bootstrap/v0.1.0/node-bootstrap";

fn lines(n: &SimNode, path: &str) -> Vec<String> {
    n.read(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn assert_applied(out: &str, summary: &str) {
    assert!(
        out.contains(&format!("Apply complete! Resources: {summary}.")),
        "expected \"{summary}\" from terraform apply:\n{out}"
    );
}

#[test]
fn push_mode_example_delivers_assets_to_a_node_and_reapply_changes_nothing() {
    if skip_unless_possible()
        || skip_without(&[
            "terraform",
            "ssh-keygen",
            "ssh",
            "/usr/sbin/sshd",
            "sudo",
            "ignition-validate",
        ])
    {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let ssh = NodeSsh::new().unwrap();
    let inputs = root().join("ignition/render/inputs");

    // 1. The operator's copy of the example.
    let checkout = checkout_copy(&work.path().join("checkout"));
    operator_shell(&checkout, &operators_md_block("copy"));
    let example = checkout.join("terraform/examples/my-cluster");
    assert!(
        example.join("terraform.tfvars").exists(),
        "the copy step left no {}",
        example.join("terraform.tfvars").display()
    );
    // The cluster's assets, as an installer generates them, where the
    // tfvars template looks (`./generated`, its kubeconfig in `auth/`).
    let assets = example.join("generated");
    let asset = |name: &str, body: &str| {
        let p = assets.join(name);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, body).unwrap();
    };
    asset(
        "bootkube.sh",
        "#!/bin/bash\nset -e\nmkdir -p /var/lib/e2e\necho \"bootkube ran in $PWD as uid $(id -u)\" >> /var/lib/e2e/bootkube-runs\n",
    );
    asset(
        "tectonic-wrapper.sh",
        "#!/bin/bash\nset -e\nmkdir -p /var/lib/e2e\necho \"tectonic ran in $PWD\" >> /var/lib/e2e/tectonic-runs\n",
    );
    asset("manifests/kube-apiserver.yaml", "kind: Pod\n");
    asset(
        "tls/apiserver.key",
        "-----BEGIN PRIVATE KEY-----\nnot really\n",
    );
    asset(
        "auth/kubeconfig",
        &fs::read_to_string(inputs.join("kubeconfig")).unwrap(),
    );
    // The mirror's public key, where the tfvars template names it.
    fs::copy(inputs.join("keyring.asc"), example.join("keyring.asc")).unwrap();

    // The workers' bootstrap token (the example's `bootstrap_token`).
    let token = BootstrapToken::generate();
    let expiration = rfc3339_in(Duration::from_secs(4 * 3600));

    // What the operator fills in: over terraform.tfvars, as a
    // token.auto.tfvars.json of the kind the template suggests.
    let agent = fs::read(testkit::standin("agent-stub")).unwrap();
    fs::write(
        example.join("test.auto.tfvars.json"),
        json!({
            "bootkube_master": {"name": "master-0", "host": "127.0.0.1", "port": ssh.port(), "host_key": ssh.host_public_key()},
            "masters": [],
            "workers": ["worker-0"],
            "ssh_user": "core",
            "ssh_private_key_path": ssh.client_private_key(),
            "ssh_authorized_keys": [ssh.client_public_key()],
            "ssh_timeout": "2m",
            "agent_url": AGENT_URL,
            "agent_sha512": hex::encode(Sha512::digest(&agent)),
            "bootstrap_token": {"id": token.id, "secret": token.secret(), "expiration": expiration},
        })
        .to_string(),
    )
    .unwrap();

    // 2. Render: the configs on disk, nothing pushed (the node is not up).
    let rendered = operator_shell(&example, &operators_md_block("render"));
    assert!(
        rendered.contains("Resources: 2 added")
            && !rendered.contains("Provisioning with 'remote-exec'"),
        "the render step did not just write the configs:\n{rendered}"
    );
    assert!(
        !rendered.contains(token.secret()),
        "terraform printed the token"
    );
    let outputs: Value = serde_json::from_str(&operator_shell(
        &example,
        "terraform output -json ignition_configs",
    ))
    .unwrap();
    let mut configs = std::collections::BTreeMap::new();
    for node in ["master-0", "worker-0"] {
        let file = example.join(format!("rendered/{node}.ign"));
        let text = fs::read_to_string(&file).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600,
            "{}",
            file.display()
        );
        assert_eq!(outputs[node].as_str(), Some(text.as_str()), "{node}");
        ignition_validate(&file).unwrap();
        configs.insert(node, serde_json::from_str::<Value>(&text).unwrap());
    }
    let master = configs["master-0"].clone();
    let worker = configs["worker-0"].clone();
    check_holds_bootstrap_token_only(&worker, &token)
        .unwrap_or_else(|e| panic!("worker-0's config: {e:#}"));

    let mut n = SimNode::new("push").unwrap();
    testkit::agentnode::install_kubelet_wrapper(&n, &[testkit::agentnode::STANDIN_CLUSTER_TAG])
        .unwrap();
    ssh.install(&n, "core").unwrap();
    let mut enabled = testkit::ignition::apply(
        &n,
        &master,
        |url| (url == AGENT_URL).then(|| agent.clone()),
        Some(&ssh),
    );
    assert_eq!(
        enabled,
        [
            "k8s-node-bootstrap.service",
            "kubelet.service",
            "node-bootstrap-catalog.service",
            "bootkube.path",
            "tectonic.path"
        ]
    );
    enabled.push(NodeSsh::UNIT.to_string());
    n.enable(&enabled.iter().map(String::as_str).collect::<Vec<_>>())
        .unwrap();
    n.boot().unwrap();
    ssh.wait_ready(&n, T).unwrap();

    // Before the push: kubelet runs, bootkube waits for its assets.
    n.wait_active_state("kubelet.service", "active", T).unwrap();
    assert_eq!(n.prop("bootkube.path", "ActiveState").unwrap(), "active");
    assert_eq!(
        n.prop("bootkube.service", "ActiveState").unwrap(),
        "inactive"
    );
    assert!(!n.exists("/opt/tectonic"));
    let sudo = ssh.ssh("core", "sudo -n id -u").unwrap();
    assert_eq!(
        String::from_utf8_lossy(&sudo.stdout).trim(),
        "0",
        "core cannot sudo over SSH: {}",
        String::from_utf8_lossy(&sudo.stderr)
    );

    // 3. The push, as the doc says it.
    let out = operator_shell(&example, &operators_md_block("push"));
    assert_applied(&out, "1 added, 0 changed, 0 destroyed");
    assert!(!out.contains(token.secret()), "terraform printed the token");
    n.wait_for("tectonic.service to finish", T, |n| {
        (n.exists("/opt/tectonic/init_tectonic.done")
            && n.prop("tectonic.service", "ActiveState").ok()? == "active")
            .then_some(())
    })
    .unwrap();
    assert!(n.exists("/opt/tectonic/init_bootkube.done"));
    assert_eq!(
        lines(&n, "/var/lib/e2e/bootkube-runs"),
        ["bootkube ran in /opt/tectonic as uid 0"]
    );
    assert_eq!(
        lines(&n, "/var/lib/e2e/tectonic-runs"),
        ["tectonic ran in /opt/tectonic"]
    );
    assert_eq!(
        n.read("/opt/tectonic/tls/apiserver.key").unwrap(),
        "-----BEGIN PRIVATE KEY-----\nnot really\n"
    );
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    // The token's Secret and the RBAC, exactly as the bootstrap-token
    // module renders them for the kubeconfig's server and CA, among the
    // manifests tectonic applies; private.
    let kubeconfig: Value =
        serde_saphyr::from_str(&fs::read_to_string(inputs.join("kubeconfig")).unwrap()).unwrap();
    let cluster = &kubeconfig["clusters"][0]["cluster"];
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD
        .decode(cluster["certificate-authority-data"].as_str().unwrap())
        .unwrap();
    let rendered = testkit::tls_bootstrap::render(&TokenInputs {
        token: &token,
        expiration: &expiration,
        api_server_url: cluster["server"].as_str().unwrap(),
        cluster_ca: &String::from_utf8(ca).unwrap(),
    })
    .unwrap();
    for (file, want) in [
        (
            format!("bootstrap-token-{}.yaml", token.id),
            &rendered.secret_manifest,
        ),
        (
            "node-bootstrap-rbac.yaml".to_string(),
            &rendered.rbac_manifest,
        ),
    ] {
        let path = format!("/opt/tectonic/manifests/{file}");
        assert_eq!(n.read(&path).as_ref(), Some(want), "{path}");
        let mode = fs::metadata(n.path(&path)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{path}");
    }
    let st = fs::metadata(n.path("/opt/tectonic")).unwrap();
    assert_eq!(
        (st.uid(), st.permissions().mode() & 0o777),
        (0, 0o700),
        "assets: root-owned, private"
    );
    assert!(
        !n.exists("/home/core/.node-bootstrap-push"),
        "the staging dir is cleaned up"
    );
    let bootkube_started = n
        .timestamp_us("bootkube.service", "ExecMainStartTimestamp")
        .unwrap();
    let tectonic_started = n
        .timestamp_us("tectonic.service", "ExecMainStartTimestamp")
        .unwrap();
    assert!(bootkube_started > 0 && tectonic_started > bootkube_started);
    // What an operator (or terraform's remote-exec) would ask: the real
    // agent's `status` (read-only; the node's agent is the stub, whose
    // `run` writes no state journal, so systemd alone decides).
    let real = testkit::cli::agent_binary();
    let out = n
        .exec(&[real.to_str().unwrap(), "status", "--json"])
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "status: {report:#}");
    assert_eq!(report["verdict"], "complete");

    // 4. Apply again: nothing to do, nothing happens on the node.
    let push = "terraform apply -var push_assets=true";
    let out = operator_shell(&example, push);
    assert_applied(&out, "0 added, 0 changed, 0 destroyed");
    assert!(
        !out.contains("Provisioning with"),
        "re-apply provisioned again:\n{out}"
    );
    // An empty plan: `-detailed-exitcode` exits 0 (2 would be changes).
    operator_shell(
        &example,
        "terraform plan -detailed-exitcode -var push_assets=true",
    );
    assert_eq!(lines(&n, "/var/lib/e2e/bootkube-runs").len(), 1);
    assert_eq!(lines(&n, "/var/lib/e2e/tectonic-runs").len(), 1);
    assert_eq!(
        n.timestamp_us("bootkube.service", "ExecMainStartTimestamp")
            .unwrap(),
        bootkube_started
    );

    // Changed assets: pushed again, markers kept, helpers not re-run.
    asset("manifests/extra.yaml", "kind: ConfigMap\n");
    let out = operator_shell(&example, push);
    assert_applied(&out, "1 added, 0 changed, 1 destroyed");
    assert_eq!(
        n.read("/opt/tectonic/manifests/extra.yaml").unwrap(),
        "kind: ConfigMap\n"
    );
    assert!(
        n.exists("/opt/tectonic/init_bootkube.done")
            && n.exists("/opt/tectonic/init_tectonic.done")
    );
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        lines(&n, "/var/lib/e2e/bootkube-runs").len(),
        1,
        "bootkube ran again after a re-push"
    );
    assert_eq!(
        lines(&n, "/var/lib/e2e/tectonic-runs").len(),
        1,
        "tectonic ran again after a re-push"
    );
    assert_eq!(
        n.timestamp_us("bootkube.service", "ExecMainStartTimestamp")
            .unwrap(),
        bootkube_started
    );

    // The next boot: kubelet starts, bootkube and tectonic are skipped.
    n.shutdown().unwrap();
    n.boot().unwrap();
    n.wait_active_state("kubelet.service", "active", T).unwrap();
    n.wait_for("bootkube.path to settle", T, |n| {
        (n.prop("bootkube.path", "ConditionResult").ok()? == "no").then_some(())
    })
    .unwrap();
    assert_eq!(lines(&n, "/var/lib/e2e/bootkube-runs").len(), 1);
    assert_eq!(lines(&n, "/var/lib/e2e/tectonic-runs").len(), 1);
    n.shutdown().unwrap();
}
