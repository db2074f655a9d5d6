//! The example root modules as an operator uses them: copied from a
//! checkout, `terraform.tfvars` from their `terraform.tfvars.example`, the
//! templates beside them as they are, `terraform init` and `terraform
//! apply` (real terraform, offline: they need no provider). Every config
//! they write passes the real `ignition-validate` and `node-bootstrap
//! check-config --ignition`; the kubelet settings reach the nodes; a
//! mistake in the inputs is reported once however many nodes there are;
//! and `check-config` refuses the mappings a node would refuse.
//! (`examples/aws` needs the AWS provider, which cannot be installed
//! offline: delivery_terraform.rs reads it with python-hcl2.)

use crate::support::{
    checkout_copy, ignition_file, ignition_file_text, ignition_validate, operator_shell, root,
    skip_without,
};
use serde_json::{Value, json};
use std::fs;
use std::path::{Path, PathBuf};

fn inputs() -> PathBuf {
    root().join("ignition/render/inputs")
}

/// A copy of `example` in a checkout copy under `work`, with
/// `terraform.tfvars` from its example and `vars` over it.
fn example(work: &Path, example: &str, vars: Value) -> PathBuf {
    let checkout = checkout_copy(&work.join("checkout"));
    let dir = checkout.join("terraform/examples").join(example);
    fs::copy(
        dir.join("terraform.tfvars.example"),
        dir.join("terraform.tfvars"),
    )
    .unwrap();
    // One variable a line, as an operator writes them (terraform quotes
    // the line that sets a variable it refuses).
    fs::write(
        dir.join("test.auto.tfvars.json"),
        serde_json::to_string_pretty(&vars).unwrap(),
    )
    .unwrap();
    dir
}

/// `node-bootstrap check-config --ignition FILE`: exit code and stderr.
fn check_config(file: &Path) -> (i32, String) {
    let out = testkit::cli::agent_command()
        .args(["--log-format", "text", "check-config", "--ignition"])
        .arg(file)
        .output()
        .unwrap();
    (testkit::cli::code(&out), testkit::cli::stderr(&out))
}

/// Every `rendered/*.ign`, validated by ignition-validate and accepted by
/// `check-config --ignition`; by node name.
fn rendered(dir: &Path) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for name in testkit::files::names(&dir.join("rendered")) {
        let file = dir.join("rendered").join(&name);
        ignition_validate(&file).unwrap();
        let (code, stderr) = check_config(&file);
        assert_eq!(code, 0, "check-config --ignition {name}: {stderr}");
        assert!(
            stderr.contains("runtime mappings ok:") && stderr.contains("seed kubelet.env ok:"),
            "{name}: {stderr}"
        );
        let node = name.trim_end_matches(".ign").to_string();
        out.push((
            node,
            serde_json::from_str(&fs::read_to_string(&file).unwrap()).unwrap(),
        ));
    }
    out
}

fn agent_config(cfg: &Value) -> Value {
    serde_json::from_str(&ignition_file_text(cfg, "/etc/node-bootstrap/config.json").unwrap())
        .unwrap()
}

/// The kubelet.service drop-in the ignition module writes for a role.
fn node_dropin(cfg: &Value) -> String {
    let kubelet = cfg["systemd"]["units"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == "kubelet.service")
        .unwrap();
    kubelet["dropins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "10-node.conf")
        .unwrap()["contents"]
        .as_str()
        .unwrap()
        .to_string()
}

fn operator_pub() -> String {
    fs::read_to_string(inputs().join("operator.pub")).unwrap()
}

#[test]
fn the_metal_example_renders_every_node_with_the_kubelet_settings_it_is_given() {
    if skip_without(&["terraform", "ignition-validate"]) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let dir = example(
        work.path(),
        "metal",
        json!({
            "agent_sha512": "ab".repeat(64),
            "keyring_path": inputs().join("keyring.asc"),
            "kubeconfig_path": inputs().join("kubeconfig"),
            "ssh_private_key_path": null,
            "ssh_authorized_keys": [operator_pub()],
            "cluster_dns_ip": "10.96.0.10",
            "cluster_domain": "example.internal",
            "node_labels": {"example.com/rack": "r1"},
            "worker_taints": ["dedicated=db:NoSchedule"],
            "kubelet_extra_args": ["--max-pods=50"],
        }),
    );
    let out = operator_shell(&dir, "terraform init && terraform apply");
    assert!(
        out.contains("Resources: 5 added") && !out.contains("remote-exec"),
        "{out}"
    );
    let nodes = rendered(&dir);
    let names: Vec<&str> = nodes.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["master-0", "master-1", "master-2", "worker-0", "worker-1"]
    );
    for (node, cfg) in &nodes {
        let agent = agent_config(cfg);
        let kc = &agent["kubelet_config"];
        assert_eq!(kc["cluster_dns"], json!(["10.96.0.10"]), "{node}");
        assert_eq!(kc["cluster_domain"], "example.internal", "{node}");
        let taints = if node.starts_with("worker") {
            json!(["dedicated=db:NoSchedule"])
        } else {
            json!(["node-role.kubernetes.io/master=:NoSchedule"])
        };
        assert_eq!(kc["taints"], taints, "{node}");
        let dropin = node_dropin(cfg);
        assert!(
            dropin.contains("example.com/rack=r1")
                && dropin.contains("KUBELET_EXTRA_ARGS=--max-pods=50"),
            "{node}: {dropin}"
        );
    }
}

#[test]
fn the_flatcar_workers_example_renders_a_sysext_kubelet_on_containerd_with_a_token_and_a_keyring() {
    if skip_without(&["terraform", "ignition-validate"]) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let secret = "0123456789s3cr3t";
    let dir = example(
        work.path(),
        "flatcar-workers",
        json!({
            "agent_sha512": "ab".repeat(64),
            "bootstrap_token": {"id": "abcdef", "secret": secret, "expiration": "2099-01-01T00:00:00Z"},
            "ssh_authorized_keys": [operator_pub()],
        }),
    );
    // The CA and the key, where the tfvars template names them.
    let pki = testkit::apiserver::Pki::generate();
    fs::write(dir.join("ca.crt"), &pki.ca_pem).unwrap();
    fs::copy(inputs().join("keyring.asc"), dir.join("keyring.asc")).unwrap();
    let out = operator_shell(&dir, "terraform init && terraform apply");
    assert!(!out.contains(secret), "terraform printed the token");
    let nodes = rendered(&dir);
    let names: Vec<&str> = nodes.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["worker-0", "worker-1"]);
    assert_eq!(nodes[0].1, nodes[1].1, "the workers' configs differ");
    let cfg = &nodes[0].1;
    let agent = agent_config(cfg);
    assert_eq!(agent["kubelet"]["backend"], "sysext");
    assert_eq!(agent["runtime"]["name"], "containerd");
    assert_eq!(agent["cluster"]["credential"], "bootstrap-token");
    assert_eq!(agent["paths"]["cni_conf_dir"], "/etc/cni/net.d");
    assert_eq!(
        agent["kubelet_config"]["cluster_dns"],
        json!(["10.96.0.10"])
    );
    for path in [
        "/etc/kubernetes/installer/keyring.asc",
        "/etc/kubernetes/bootstrap-kubeconfig",
    ] {
        assert!(ignition_file(cfg, path).is_some(), "no {path}");
    }
    assert!(ignition_file(cfg, "/etc/kubernetes/kubeconfig").is_none());
    let seed = ignition_file_text(cfg, "/etc/kubernetes/installer/kubelet.env").unwrap();
    assert!(seed.contains("KUBELET_IMAGE_TAG=\"v1.31.4\""), "{seed}");
    let kubelet = cfg["systemd"]["units"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == "kubelet.service")
        .unwrap();
    assert!(
        kubelet["dropins"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["name"] == "10-kubelet-sysext.conf"),
        "no sysext drop-in: {kubelet}"
    );
    let (_, stderr) = check_config(&dir.join("rendered/worker-0.ign"));
    assert!(
        stderr.contains("runtime mappings ok:")
            && stderr.contains("(Kubernetes 1.30, 1.31, 1.32, 1.33)")
            && stderr.contains("keyring ok:"),
        "{stderr}"
    );
    // Day two is off unless asked for: no follow unit, no follow config,
    // nothing to apply.
    let follow_units = |cfg: &Value| -> Vec<(String, bool)> {
        cfg["systemd"]["units"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|u| {
                u["name"]
                    .as_str()
                    .unwrap()
                    .starts_with("node-bootstrap-follow")
            })
            .map(|u| {
                (
                    u["name"].as_str().unwrap().to_string(),
                    u["enabled"] == true,
                )
            })
            .collect()
    };
    assert_eq!(follow_units(cfg), []);
    assert!(agent.get("follow").is_none(), "{agent}");
    // (terraform keeps no null output in its state)
    let outputs: Value =
        serde_json::from_str(&operator_shell(&dir, "terraform output -json")).unwrap();
    assert!(
        outputs.get("follow_rbac").is_none() && outputs.get("follow_config").is_none(),
        "{outputs}"
    );
    // `follow = true` in the operator's tfvars: every worker's config has
    // the timer and the converge unit enabled (the service runs from its
    // timer), follow.enabled, and still passes ignition-validate and
    // check-config; the example hands out what the cluster needs.
    fs::write(dir.join("follow.auto.tfvars"), "follow = true\n").unwrap();
    operator_shell(&dir, "terraform apply");
    let nodes = rendered(&dir);
    assert_eq!(nodes.len(), 2);
    for (node, cfg) in &nodes {
        assert_eq!(
            follow_units(cfg),
            [
                ("node-bootstrap-follow.service".to_string(), false),
                ("node-bootstrap-follow.timer".to_string(), true),
                ("node-bootstrap-follow-converge.service".to_string(), true),
            ],
            "{node}"
        );
        assert_eq!(agent_config(cfg)["follow"]["enabled"], true, "{node}");
    }
    let rbac = operator_shell(&dir, "terraform output -raw follow_rbac");
    assert!(
        rbac.contains("name: node-bootstrap-follow-lease")
            && rbac.contains("kind: Role\n")
            && rbac.contains("name: system:nodes"),
        "{rbac}"
    );
    let config_map = operator_shell(&dir, "terraform output -raw follow_config");
    assert!(
        config_map.contains("name: node-bootstrap-follow\n") && !config_map.contains("minor:"),
        "{config_map}"
    );
    fs::remove_file(dir.join("follow.auto.tfvars")).unwrap();

    // Mappings a node would refuse (containerd 1.5 cannot serve the CRI v1
    // a 1.31 kubelet speaks) render, and check-config refuses them as the
    // node would (5, naming the entry).
    fs::write(
        dir.join("runtime-mappings.yaml"),
        "kind: VersionManifestV1\nversions:\n  k8s:\n    \"1.31\":\n      containerd: [\"1.5\"]\n",
    )
    .unwrap();
    operator_shell(&dir, "terraform apply");
    let (code, stderr) = check_config(&dir.join("rendered/worker-0.ign"));
    assert_eq!(code, 5, "{stderr}");
    assert!(
        stderr.contains("versions.k8s.\"1.31\".containerd has \"1.5\": the kubelet of Kubernetes 1.31 speaks only CRI v1"),
        "{stderr}"
    );
}

/// `terraform plan` in `dir` as an operator runs it, which must fail.
fn failing_plan(dir: &Path) -> std::process::Output {
    let out = std::process::Command::new("terraform")
        .args(["plan", "-input=false", "-no-color"])
        .current_dir(dir)
        .env("TF_CLI_CONFIG_FILE", "/dev/null")
        .env("TF_IN_AUTOMATION", "1")
        .env("CHECKPOINT_DISABLE", "1")
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "terraform plan in {} passed",
        dir.display()
    );
    out
}

/// Four mistakes, five nodes: four errors, each once (each role used to
/// repeat every module error once per node).
#[test]
fn each_mistake_in_the_metal_example_is_reported_once_whatever_the_number_of_nodes() {
    if skip_without(&["terraform"]) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let dir = example(
        work.path(),
        "metal",
        json!({
            "agent_sha512": "abc123",
            "runtime_mappings_path": "./no-such-mappings.yaml",
            "keyring_path": inputs().join("keyring.asc"),
            "kubeconfig_path": inputs().join("kubeconfig"),
            "ssh_private_key_path": null,
            "ssh_authorized_keys": [operator_pub()],
        }),
    );
    // The token in a file of its own, as the tfvars template suggests.
    fs::write(
        dir.join("token.auto.tfvars.json"),
        json!({"bootstrap_token": {"id": "abcdef", "secret": "s3cr3t", "expiration": "2099-12-01"}})
            .to_string(),
    )
    .unwrap();
    operator_shell(&dir, "terraform init");
    let out = failing_plan(&dir);
    let text = String::from_utf8_lossy(&out.stderr);
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let errors = text.matches("Error: ").count();
    for message in [
        "agent_sha512 must be 128 lowercase hex digits",
        "runtime_mappings_path names no file",
        "token_secret must be exactly 16 characters",
        "expiration must be an RFC 3339 timestamp",
    ] {
        assert_eq!(
            flat.matches(message).count(),
            1,
            "{message:?} not once in:\n{text}"
        );
    }
    assert_eq!(errors, 4, "four mistakes, {errors} errors:\n{text}");
    assert!(!flat.contains("s3cr3t"), "the secret was printed:\n{text}");

    // A kubeconfig whose CA is a path (which the nodes would not have):
    // one error naming the variable, not an index error from where it is
    // read.
    let kubeconfig = fs::read_to_string(inputs().join("kubeconfig")).unwrap();
    let ca_path: String = kubeconfig
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("certificate-authority-data:") {
                "    certificate-authority: /etc/kubernetes/ca.crt".to_string()
            } else {
                l.to_string()
            }
        })
        .map(|l| l + "\n")
        .collect();
    let kc = dir.join("kubeconfig-ca-path");
    fs::write(&kc, ca_path).unwrap();
    fs::remove_file(dir.join("token.auto.tfvars.json")).unwrap();
    fs::write(
        dir.join("test.auto.tfvars.json"),
        serde_json::to_string_pretty(&json!({
            "agent_sha512": "ab".repeat(64),
            "keyring_path": inputs().join("keyring.asc"),
            "kubeconfig_path": kc,
            "ssh_private_key_path": null,
            "ssh_authorized_keys": [operator_pub()],
        }))
        .unwrap(),
    )
    .unwrap();
    let out = failing_plan(&dir);
    let text = String::from_utf8_lossy(&out.stderr);
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(text.matches("Error: ").count(), 1, "{text}");
    assert!(
        flat.contains("kubeconfig_path: its first cluster has no certificate-authority-data"),
        "{text}"
    );
}
