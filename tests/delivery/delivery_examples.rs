//! The example root modules as an operator uses them: copied from a
//! checkout, `terraform.tfvars` from their `terraform.tfvars.example`, the
//! templates beside them as they are, `terraform init` and `terraform
//! apply` (real terraform, offline: they need no provider). Every config
//! they write passes the real `ignition-validate` and `node-bootstrap
//! check-config --ignition` (the pure steps its node runs); each renders
//! today's Flatcar nodes with the agent's default backends, and the metal
//! example's Tectonic template renders the seed's flow, labelled so; the
//! kubelet settings and the `follow` switch reach the nodes; a mistake in
//! the inputs is reported once however many nodes there are; `plan` and
//! `check-config` refuse the mappings a node would refuse; and no secret
//! given wrong reaches terraform's output.
//! `examples/aws` needs the AWS provider, which cannot be installed
//! offline: its Ignition half (its locals and provider-free modules,
//! verbatim) is rendered and checked like the others, and
//! delivery_terraform.rs reads the rest with python-hcl2.

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
        // The pure steps ran: the backend said, the runtime step for the
        // seed's version (a master) or for each mapped minor (a worker).
        assert!(
            stderr.contains("kubelet backend: ")
                && stderr.contains("runtime step ok for Kubernetes"),
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

/// The metal example's variables a test fills in (the example inputs'
/// keyring, kubeconfig and SSH key; no push), with `extra` over them.
fn metal_vars(extra: Value) -> Value {
    let mut v = json!({
        "agent_sha512": "ab".repeat(64),
        "keyring_path": inputs().join("keyring.asc"),
        "kubeconfig_path": inputs().join("kubeconfig"),
        "ssh_private_key_path": null,
        "ssh_authorized_keys": [operator_pub()],
    });
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
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
        metal_vars(json!({
            "cluster_dns_ip": "10.96.0.10",
            "cluster_domain": "example.internal",
            "node_labels": {"example.com/rack": "r1"},
            "worker_taints": ["dedicated=db:NoSchedule"],
            "kubelet_extra_args": ["--max-pods=50"],
        })),
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
        // Today's Flatcar by default: no backend named (the agent's auto
        // takes the sysext and writes kubelet.service's drop-in on the
        // node), no docker addon, the mirror named; the cluster's 1.31.
        assert!(
            agent.get("kubelet").is_none() && agent.get("addon").is_none(),
            "{node}: {agent}"
        );
        assert_eq!(
            agent["sources"]["url"],
            "https://mirror.example.internal/node-bootstrap"
        );
        assert_eq!(kubelet_dropins(cfg), ["10-node.conf"], "{node}");
        let seed = ignition_file_text(cfg, "/etc/kubernetes/installer/kubelet.env").unwrap();
        assert!(
            seed.contains("KUBELET_IMAGE_TAG=\"v1.31.4\""),
            "{node}: {seed}"
        );
        assert!(
            ignition_file(cfg, "/etc/kubernetes/installer/keyring.asc").is_some(),
            "{node}"
        );
    }
    let (_, stderr) = check_config(&dir.join("rendered/master-0.ign"));
    for line in [
        "kubelet backend: auto (the kubelet sysext from the sources on Flatcar 2857.0.0 and newer",
        "cluster version: v1.31.4 (the bootkube master's seed KUBELET_IMAGE_TAG)",
        "runtime step ok for Kubernetes 1.31: containerd of series 2.1, 2.0, 1.7 (the mappings)",
    ] {
        assert!(stderr.contains(line), "{line:?}:\n{stderr}");
    }
    assert!(!stderr.contains("WARN"), "{stderr}");
    // The follow switch: every node's config gets the follow units, and
    // the cluster's part is an output.
    let (_, rbac) = follow_switch_on(&dir);
    assert!(rbac.contains("name: node-bootstrap-follow-lease"), "{rbac}");
}

/// The metal example's Tectonic template (`tectonic.tfvars.example`) renders
/// the seed's flow, labelled as what no released OS runs from these
/// configs: kubelet-wrapper and docker through torcx asked for by name, the
/// cluster's 1.9 on docker 17.03; `check-config` says the wrapper is
/// refused on every Flatcar from 2857.0.0.
#[test]
fn the_metal_examples_tectonic_template_renders_the_seeds_flow_labelled_so() {
    if skip_without(&["terraform", "ignition-validate"]) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let dir = example(
        work.path(),
        "metal",
        metal_vars(json!({
            "masters": [],
            "workers": ["worker-0"],
        })),
    );
    let label = fs::read_to_string(dir.join("tectonic.tfvars.example")).unwrap();
    assert!(
        label.contains("no released OS runs this flow from")
            && label.contains("kubelet-wrapper until Flatcar")
            && label.contains("torcx until 3794.0.0"),
        "{label}"
    );
    operator_shell(
        &dir,
        "terraform init && terraform apply -var-file=tectonic.tfvars.example",
    );
    let nodes = rendered(&dir);
    assert_eq!(nodes.len(), 2);
    for (node, cfg) in &nodes {
        let agent = agent_config(cfg);
        assert_eq!(agent["kubelet"]["backend"], "wrapper", "{node}");
        assert_eq!(agent["addon"]["backend"], "torcx", "{node}");
        let seed = ignition_file_text(cfg, "/etc/kubernetes/installer/kubelet.env").unwrap();
        assert!(
            seed.contains("KUBELET_IMAGE_TAG=\"v1.9.6_coreos.0\""),
            "{node}: {seed}"
        );
    }
    let (code, stderr) = check_config(&dir.join("rendered/master-0.ign"));
    assert_eq!(code, 0, "{stderr}");
    for line in [
        "kubelet backend: wrapper (kubelet-wrapper: refused on Flatcar 2857.0.0 and newer",
        "cluster version: v1.9.6+coreos.0",
        "runtime step ok for Kubernetes 1.9: docker 17.03, 1.12 (the addon, from the mappings)",
    ] {
        assert!(stderr.contains(line), "{line:?}:\n{stderr}");
    }
}

/// The names of kubelet.service's drop-ins in a rendered config.
fn kubelet_dropins(cfg: &Value) -> Vec<String> {
    cfg["systemd"]["units"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == "kubelet.service")
        .unwrap()["dropins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap().to_string())
        .collect()
}

/// `follow = true` applied: every rendered node's config gets the follow
/// units (the timer and the converge unit enabled) and `follow.enabled`;
/// the number of nodes and the `follow_rbac` output.
fn follow_switch_on(dir: &Path) -> (usize, String) {
    fs::write(dir.join("follow.auto.tfvars"), "follow = true\n").unwrap();
    operator_shell(dir, "terraform apply");
    follow_on_every_node(dir)
}

/// Every rendered node's config has the follow units (the timer and the
/// converge unit enabled) and `follow.enabled`; the number of nodes and
/// the `follow_rbac` output.
fn follow_on_every_node(dir: &Path) -> (usize, String) {
    let nodes = rendered(dir);
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
    (
        nodes.len(),
        operator_shell(dir, "terraform output -raw follow_rbac"),
    )
}

/// The follow units of a rendered config, and whether each is enabled.
fn follow_units(cfg: &Value) -> Vec<(String, bool)> {
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
}

/// The bootstrap token's secret the examples' tests give, which no
/// output may show.
const TOKEN_SECRET: &str = "0123456789s3cr3t";

/// The variables of an example whose workers start with a bootstrap
/// token (and the operator's SSH key), with `extra` over them.
fn token_vars(extra: Value) -> Value {
    let mut v = json!({
        "agent_sha512": "ab".repeat(64),
        "bootstrap_token": {"id": "abcdef", "secret": TOKEN_SECRET, "expiration": "2099-01-01T00:00:00Z"},
        "ssh_authorized_keys": [operator_pub()],
    });
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

#[test]
fn the_flatcar_workers_example_renders_a_sysext_kubelet_on_containerd_with_a_token_and_a_keyring() {
    if skip_without(&["terraform", "ignition-validate"]) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let secret = TOKEN_SECRET;
    let dir = example(work.path(), "flatcar-workers", token_vars(json!({})));
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
    // The agent's defaults: no backend, no runtime named (auto: containerd
    // for 1.31, the sysext on a node without kubelet-wrapper).
    assert!(
        agent.get("kubelet").is_none() && agent.get("runtime").is_none(),
        "{agent}"
    );
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
    // The node's agent writes the sysext drop-in once auto chose it.
    assert_eq!(kubelet_dropins(cfg), ["10-node.conf"]);
    let (_, stderr) = check_config(&dir.join("rendered/worker-0.ign"));
    assert!(
        stderr.contains("runtime mappings ok:")
            && stderr.contains("(Kubernetes 1.30, 1.31, 1.32, 1.33)")
            && stderr.contains("keyring ok:")
            && stderr.contains("kubelet backend: auto")
            && stderr.contains(
                "runtime step ok for Kubernetes 1.33: containerd of series 2.1, 2.0, 1.7"
            ),
        "{stderr}"
    );
    // Day two is off unless asked for: no follow unit, no follow config,
    // nothing to apply.
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
    let (nodes, rbac) = follow_switch_on(&dir);
    assert_eq!(nodes, 2);
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
    // a 1.31 kubelet speaks) fail the plan, naming the entry, as they fail
    // check-config on a config rendered before (5, naming the entry).
    fs::write(
        dir.join("runtime-mappings.yaml"),
        "kind: VersionManifestV1\nversions:\n  k8s:\n    \"1.31\":\n      containerd: [\"1.5\"]\n",
    )
    .unwrap();
    let out = failing_plan(&dir);
    let text = String::from_utf8_lossy(&out.stderr);
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("runtime_mappings: a containerd series no node would accept: \"1.31\" lists containerd 1.5"),
        "{text}"
    );
    let out = testkit::cli::agent_command()
        .args(["--log-format", "text", "check-config", "--mappings"])
        .arg(dir.join("runtime-mappings.yaml"))
        .output()
        .unwrap();
    let stderr = testkit::cli::stderr(&out);
    assert_eq!(testkit::cli::code(&out), 5, "{stderr}");
    assert!(
        stderr.contains("versions.k8s.\"1.31\".containerd has \"1.5\": the kubelet of Kubernetes 1.31 speaks only CRI v1"),
        "{stderr}"
    );
}

/// The block of HCL `text` that starts with the line `header` (e.g.
/// `module "follow" {`), through its closing brace.
fn hcl_block(text: &str, header: &str) -> String {
    let start = text
        .find(&format!("\n{header}\n"))
        .unwrap_or_else(|| panic!("no `{header}` block"))
        + 1;
    let mut depth = 0;
    for (i, c) in text[start..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return text[start..=start + i].to_string();
                }
            }
            _ => {}
        }
    }
    panic!("`{header}` is not closed")
}

/// The AWS example's Ignition half, runnable offline: its variables and
/// its `locals` and provider-free module blocks taken verbatim from its
/// main.tf, the bucket's name in place of `module.assets.bucket` (the
/// S3 module, the IAM roles and the instances need the AWS provider,
/// which cannot be installed here). Each role's config is written to
/// `rendered/<role>.ign` after an apply by [`aws_apply`].
fn aws_ignition_half(dir: &Path, bucket: &str) {
    let main = fs::read_to_string(dir.join("main.tf")).unwrap();
    let locals = hcl_block(&main, "locals {");
    let principal = "  ec2_principal = \"ec2.${data.aws_partition.current.dns_suffix}\"\n";
    assert!(
        locals.contains(principal) && locals.contains("bucket          = module.assets.bucket"),
        "the example's locals changed: {locals}"
    );
    let mut half = String::from(
        "# The test: the AWS example's locals and provider-free modules, verbatim\n\
         # but for the bucket's name.\n",
    );
    half.push_str(
        &locals
            .replace(principal, "")
            .replace("module.assets.bucket", &format!("\"{bucket}\"")),
    );
    for m in [
        "ignition_master",
        "ignition_worker",
        "follow",
        "bootstrap_token",
    ] {
        half.push_str("\n\n");
        half.push_str(&hcl_block(&main, &format!("module \"{m}\" {{")));
    }
    fs::write(dir.join("main.tf"), half + "\n").unwrap();
    fs::write(
        dir.join("versions.tf"),
        "terraform {\n  required_version = \">= 1.9.0\"\n}\n",
    )
    .unwrap();
    let outputs = fs::read_to_string(dir.join("outputs.tf")).unwrap();
    let mut kept = String::from(
        "output \"rendered\" {\n  value = {\n    bootkube-master = module.ignition_master.rendered\n    \
         worker          = module.ignition_worker.rendered\n  }\n  sensitive = true\n}\n",
    );
    for o in ["follow_rbac", "follow_config"] {
        kept.push('\n');
        kept.push_str(&hcl_block(&outputs, &format!("output \"{o}\" {{")));
        kept.push('\n');
    }
    fs::write(dir.join("outputs.tf"), kept).unwrap();
}

/// `terraform apply` of [`aws_ignition_half`], then each role's config
/// written to `rendered/<role>.ign`; what the apply printed.
fn aws_apply(dir: &Path) -> String {
    let printed = operator_shell(dir, "terraform apply");
    let out: Value =
        serde_json::from_str(&operator_shell(dir, "terraform output -json rendered")).unwrap();
    fs::create_dir_all(dir.join("rendered")).unwrap();
    for (role, config) in out.as_object().unwrap() {
        let path = dir.join("rendered").join(format!("{role}.ign"));
        fs::write(path, config.as_str().unwrap()).unwrap();
    }
    printed
}

/// The AWS example's configs, as its bucket would hold them: a bootkube
/// master that pulls the asset bundle from the bucket (the bundle's
/// SHA-256 pinned) and workers with the bootstrap token only, both on
/// the agent's defaults for today's Flatcar; the `follow` switch reaches
/// both. Checked by ignition-validate and `check-config --ignition`.
#[test]
fn the_aws_examples_ignition_configs_render_todays_nodes_pulling_from_the_bucket() {
    if skip_without(&["terraform", "ignition-validate"]) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let secret = TOKEN_SECRET;
    let dir = example(
        work.path(),
        "aws",
        token_vars(json!({"kubeconfig_path": inputs().join("kubeconfig")})),
    );
    fs::copy(inputs().join("keyring.asc"), dir.join("keyring.asc")).unwrap();
    let bundle = b"the asset bundle".as_slice();
    fs::write(dir.join("assets.tar.gz"), bundle).unwrap();
    let bucket = "demo-assets-20261202";
    aws_ignition_half(&dir, bucket);
    let out = operator_shell(&dir, "terraform init") + &aws_apply(&dir);
    assert!(!out.contains(secret), "terraform printed the token");
    let nodes = rendered(&dir);
    let names: Vec<&str> = nodes.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["bootkube-master", "worker"]);
    let (master, worker) = (&nodes[0].1, &nodes[1].1);

    let agent = agent_config(master);
    // The agent's defaults (no backend, no runtime named) and the
    // example's own settings.
    assert!(
        agent.get("kubelet").is_none() && agent.get("runtime").is_none(),
        "{agent}"
    );
    assert_eq!(agent["os_update"]["enabled"], true, "{agent}");
    assert_eq!(
        agent["sources"]["url"],
        "https://mirror.example.internal/node-bootstrap"
    );
    let sha256 = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(bundle))
    };
    assert_eq!(
        agent["assets"],
        json!({
            "mode": "pull",
            "s3": {
                "bucket": bucket,
                "key": "assets/assets.tar.gz",
                "region": "eu-west-1",
                "checksum_sha256": sha256,
            }
        })
    );
    let seed = ignition_file_text(master, "/etc/kubernetes/installer/kubelet.env").unwrap();
    assert!(seed.contains("KUBELET_IMAGE_TAG=\"v1.31.4\""), "{seed}");
    assert!(ignition_file(master, "/etc/kubernetes/kubeconfig").is_some());

    let agent = agent_config(worker);
    // (the module writes every role's assets.mode; only the master pulls)
    assert_eq!(agent["assets"], json!({"mode": "push"}), "{agent}");
    assert_eq!(agent["cluster"]["credential"], "bootstrap-token");
    assert!(ignition_file(worker, "/etc/kubernetes/bootstrap-kubeconfig").is_some());
    assert!(ignition_file(worker, "/etc/kubernetes/kubeconfig").is_none());
    for (node, cfg) in &nodes {
        assert!(
            ignition_file(cfg, "/etc/kubernetes/installer/keyring.asc").is_some(),
            "{node}: no keyring"
        );
        let (_, stderr) = check_config(&dir.join(format!("rendered/{node}.ign")));
        assert!(
            stderr.contains("kubelet backend: auto")
                && stderr.contains("(Kubernetes 1.30, 1.31, 1.32, 1.33)"),
            "{node}: {stderr}"
        );
    }
    assert_eq!(follow_units(master), []);

    // `follow = true`: both roles' configs follow.
    fs::write(dir.join("follow.auto.tfvars"), "follow = true\n").unwrap();
    aws_apply(&dir);
    let (nodes, rbac) = follow_on_every_node(&dir);
    assert_eq!(nodes, 2);
    assert!(rbac.contains("name: node-bootstrap-follow-lease"), "{rbac}");
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

/// Fails when any 16-character window of `secret`'s body (armor lines
/// left out) is in `text`.
fn assert_not_in(text: &str, secret: &str, what: &str) {
    let body: Vec<char> = secret
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .flat_map(str::chars)
        .filter(|c| !c.is_whitespace())
        .collect();
    assert!(body.len() >= 16, "{what}: too short to search");
    for w in body.windows(16) {
        let piece: String = w.iter().collect();
        assert!(!text.contains(&piece), "{what}: {piece:?} printed:\n{text}");
    }
}

/// Each secret-bearing input of the examples given wrong: the plan fails
/// naming the variable and what is wrong, and the secret's bytes are in
/// none of terraform's output. A whole bootstrap token pasted into the id
/// (the examples used to pass the id through `nonsensitive(...)`, which
/// printed it); an OpenPGP secret key given as the keyring; a kubeconfig
/// with a client key whose CA is a path.
#[test]
fn no_secret_given_wrong_reaches_terraforms_output() {
    if skip_without(&["terraform"]) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let secret = "0123456789s3cr3t";
    let dir = example(
        work.path(),
        "flatcar-workers",
        json!({
            "agent_sha512": "ab".repeat(64),
            "ssh_authorized_keys": [operator_pub()],
        }),
    );
    let pki = testkit::apiserver::Pki::generate();
    fs::write(dir.join("ca.crt"), &pki.ca_pem).unwrap();
    fs::copy(inputs().join("keyring.asc"), dir.join("keyring.asc")).unwrap();
    // The whole `kubeadm token create` output pasted into the id.
    fs::write(
        dir.join("token.auto.tfvars.json"),
        json!({"bootstrap_token": {"id": format!("abcdef.{secret}"), "secret": secret, "expiration": "2099-01-01T00:00:00Z"}})
            .to_string(),
    )
    .unwrap();
    operator_shell(&dir, "terraform init");
    let out = failing_plan(&dir);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("token_id must be exactly 6 characters of [a-z0-9]"),
        "{text}"
    );
    assert!(!text.contains(secret), "the token was printed:\n{text}");

    // A good token, and the signing key's secret half as the keyring.
    fs::write(
        dir.join("token.auto.tfvars.json"),
        json!({"bootstrap_token": {"id": "abcdef", "secret": secret, "expiration": "2099-01-01T00:00:00Z"}})
            .to_string(),
    )
    .unwrap();
    let key =
        testkit::torcx_fixtures::SigningKey::generate("mirror@example.invalid").secret_armored();
    fs::write(dir.join("keyring.asc"), &key).unwrap();
    let out = failing_plan(&dir);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_not_in(&text, &key, "the secret key given as keyring");
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("keyring holds a secret (private) key: give the public key only"),
        "{text}"
    );
    assert!(!text.contains(secret), "the token was printed:\n{text}");

    // metal: a kubeconfig with a client key, whose CA is a path.
    let dir = example(
        &work.path().join("metal"),
        "metal",
        json!({
            "agent_sha512": "ab".repeat(64),
            "keyring_path": inputs().join("keyring.asc"),
            "ssh_private_key_path": null,
            "ssh_authorized_keys": [operator_pub()],
        }),
    );
    let client_key = pki.client.key_pem.clone();
    let b64 = |b: &[u8]| {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(b)
    };
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://api.example.invalid:6443\n    certificate-authority: /etc/kubernetes/ca.crt\n\
         users:\n- name: u\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n\
         contexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n",
        b64(pki.client.cert_pem.as_bytes()),
        b64(client_key.as_bytes())
    );
    fs::write(dir.join("kubeconfig"), &kubeconfig).unwrap();
    fs::write(
        dir.join("kc.auto.tfvars.json"),
        json!({"kubeconfig_path": "./kubeconfig"}).to_string(),
    )
    .unwrap();
    operator_shell(&dir, "terraform init");
    let out = failing_plan(&dir);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("certificate-authority-data"), "{text}");
    assert_not_in(
        &text,
        &b64(client_key.as_bytes()),
        "the kubeconfig's client key",
    );
    assert_not_in(&text, &client_key, "the kubeconfig's client key");
}
