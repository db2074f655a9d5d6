//! The terraform modules: the provider-free ones pass `terraform init`,
//! `validate` and `fmt -check` with the real terraform; the AWS ones parse
//! (python-hcl2) and keep the bucket private, encrypted and readable only by
//! the nodes' roles; bad inputs fail at plan time naming the variable; and
//! the push script (install-assets.sh) verifies, swaps atomically and keeps
//! the .done markers of steps that already ran.

use crate::support::{Terraform, python_has, root, skip_without};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use testkit::files::names;

/// Modules and root modules that need no provider.
const PROVIDER_FREE: &[&str] = &[
    "terraform/modules/bootstrap-token",
    "terraform/modules/follow-rbac",
    "terraform/modules/ignition",
    "terraform/modules/ignition-pointer",
    "terraform/modules/push-assets",
    "terraform/examples/metal",
    "ignition/render",
];
/// Need the AWS provider (not downloadable here): parsed only.
const AWS: &[&str] = &["terraform/modules/s3-assets", "terraform/examples/aws"];

#[test]
fn provider_free_modules_pass_init_validate_and_fmt_check() {
    if skip_without(&["terraform"]) {
        return;
    }
    for dir in PROVIDER_FREE {
        let tf = Terraform::new(root().join(dir));
        tf.init();
        let out = tf.ok(&["validate", "-no-color"]);
        assert!(out.contains("The configuration is valid"), "{dir}: {out}");
        // Nothing was written into the repository.
        for junk in [".terraform", ".terraform.lock.hcl", "terraform.tfstate"] {
            assert!(
                !root().join(dir).join(junk).exists(),
                "{dir}/{junk} was created"
            );
        }
    }
    for dir in ["terraform", "ignition/render"] {
        let tf = Terraform::new(root());
        let out = tf.run(&["fmt", "-check", "-recursive", "-diff", "-no-color", dir]);
        assert!(
            out.status.success(),
            "terraform fmt -check {dir}: files need formatting:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A directory's .tf files parsed by python-hcl2, merged into
/// `{"variable": {name: body}, "resource": {type: {name: body}}, ...}` with
/// HCL quoting removed from keys and literal strings.
fn hcl(dir: &str) -> Value {
    const SCRIPT: &str = r#"
import glob, json, sys, hcl2
def unq(s):
    return s[1:-1] if isinstance(s, str) and len(s) >= 2 and s[0] == '"' and s[-1] == '"' else s
def norm(x):
    if isinstance(x, dict):
        return {unq(k): norm(v) for k, v in x.items() if k not in ("__is_block__", "__comments__", "__start_line__", "__end_line__")}
    if isinstance(x, list):
        return [norm(v) for v in x]
    return unq(x)
merged = {}
for path in sorted(glob.glob(sys.argv[1] + "/*.tf")):
    with open(path) as f:
        doc = norm(hcl2.load(f))
    for kind, blocks in doc.items():
        if kind in ("resource", "data"):
            for b in blocks:
                for t, named in b.items():
                    merged.setdefault(kind, {}).setdefault(t, {}).update(named)
        elif kind in ("variable", "output", "module", "provider"):
            for b in blocks:
                merged.setdefault(kind, {}).update(b)
        else:
            merged.setdefault(kind, []).extend(blocks)
print(json.dumps(merged))
"#;
    let out = Command::new("python3")
        .args(["-c", SCRIPT])
        .arg(root().join(dir))
        .output()
        .expect("running python3");
    assert!(
        out.status.success(),
        "python-hcl2 cannot parse {dir}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn skip_without_hcl2() -> bool {
    skip_without(&["python3"])
        || (!python_has("hcl2")
            && testkit::skip_because("needs python-hcl2 (run scripts/setup.sh)"))
}

#[test]
fn every_module_has_the_usual_layout_and_documents_its_interface() {
    if skip_without_hcl2() {
        return;
    }
    for dir in PROVIDER_FREE.iter().chain(AWS) {
        if *dir != "ignition/render" {
            for f in ["main.tf", "variables.tf", "outputs.tf", "versions.tf"] {
                assert!(root().join(dir).join(f).is_file(), "{dir}/{f} is missing");
            }
        }
        let doc = hcl(dir);
        let versions = doc["terraform"][0]["required_version"]
            .as_str()
            .unwrap_or("");
        assert!(
            versions.starts_with(">="),
            "{dir}: required_version {versions:?}"
        );
        if let Some(vars) = doc["variable"].as_object() {
            for (name, v) in vars {
                let desc = v["description"].as_str().unwrap_or("");
                assert!(desc.len() > 10, "{dir}: variable {name} has no description");
                assert!(
                    v.get("type").is_some(),
                    "{dir}: variable {name} has no type"
                );
            }
        }
        if let Some(outs) = doc["output"].as_object() {
            for (name, o) in outs {
                assert!(
                    o["description"].as_str().is_some_and(|d| d.len() > 10),
                    "{dir}: output {name} has no description"
                );
            }
        }
    }
    // The modules validate what an operator gets wrong.
    for (dir, vars) in [
        (
            "terraform/modules/ignition",
            &[
                "role",
                "agent_url",
                "agent_sha512",
                "agent_config",
                "kubelet_image_tag",
                "runtime_mappings",
                "ssh_authorized_keys",
            ][..],
        ),
        (
            "terraform/modules/bootstrap-token",
            &["expiration", "api_server_url", "cluster_ca", "extra_group"][..],
        ),
        (
            "terraform/modules/push-assets",
            &[
                "port",
                "host_key",
                "assets_dir",
                "required_files",
                "target_dir",
            ][..],
        ),
        (
            "terraform/modules/s3-assets",
            &["bucket_name", "bundle_path", "bundle_key", "kms_key_arn"][..],
        ),
    ] {
        let doc = hcl(dir);
        for v in vars {
            assert!(
                doc["variable"][v]["validation"]
                    .as_array()
                    .is_some_and(|a| !a.is_empty()),
                "{dir}: variable {v} has no validation"
            );
        }
    }
    // The kubeconfig is a secret: checked by a precondition on a sensitive
    // copy (a variable validation error would print it).
    let ign = hcl("terraform/modules/ignition");
    let pre = &ign["output"]["rendered"]["precondition"][0]["condition"];
    assert!(
        pre.as_str().is_some_and(|c| c.contains("local.kubeconfig")),
        "{pre}"
    );
    // So are the keyring (a secret key given by mistake) and the token's
    // id (a whole token pasted into it): sensitive, checked by
    // preconditions on derived booleans, never by a validation rule.
    assert!(ign["variable"]["keyring"]["sensitive"] == true);
    assert!(ign["variable"]["keyring"].get("validation").is_none());
    let conditions = ign["output"]["rendered"]["precondition"].to_string();
    assert!(
        conditions.contains("local.keyring_is_secret"),
        "{conditions}"
    );
    let token = hcl("terraform/modules/bootstrap-token");
    assert!(token["variable"]["token_id"]["sensitive"] == true);
    assert!(token["variable"]["token_id"].get("validation").is_none());
    assert!(
        token["output"]["token_id"]["precondition"]
            .to_string()
            .contains("local.token_id_valid")
    );
}

fn resource<'a>(doc: &'a Value, ty: &str, name: &str) -> &'a Value {
    let r = &doc["resource"][ty][name];
    assert!(!r.is_null(), "resource {ty}.{name} is missing");
    r
}

#[test]
fn s3_assets_bucket_is_private_encrypted_and_readable_only_by_the_node_roles() {
    if skip_without_hcl2() {
        return;
    }
    let doc = hcl("terraform/modules/s3-assets");
    let pab = resource(&doc, "aws_s3_bucket_public_access_block", "assets");
    for k in [
        "block_public_acls",
        "block_public_policy",
        "ignore_public_acls",
        "restrict_public_buckets",
    ] {
        assert_eq!(pab[k], true, "public access block: {k}");
    }
    assert_eq!(
        resource(&doc, "aws_s3_bucket_ownership_controls", "assets")["rule"][0]["object_ownership"],
        "BucketOwnerEnforced"
    );
    let sse = &resource(
        &doc,
        "aws_s3_bucket_server_side_encryption_configuration",
        "assets",
    )["rule"][0]["apply_server_side_encryption_by_default"][0];
    let algo = sse["sse_algorithm"].as_str().unwrap();
    assert!(
        algo.contains("aws:kms") && algo.contains("AES256"),
        "{algo}"
    );
    assert!(
        doc["resource"].get("aws_s3_bucket_acl").is_none(),
        "no ACLs"
    );

    // The bucket policy denies anything but TLS.
    let deny = &doc["data"]["aws_iam_policy_document"]["bucket"]["statement"][0];
    assert_eq!(deny["effect"], "Deny");
    assert_eq!(deny["condition"][0]["variable"], "aws:SecureTransport");
    assert_eq!(deny["condition"][0]["values"], json!(["false"]));

    // The nodes' read policy: GetObject on named objects, kms:Decrypt via S3
    // with a KMS key, and nothing else.
    let read = &doc["data"]["aws_iam_policy_document"]["read"];
    let mut actions: Vec<String> = read["statement"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["actions"].as_array().unwrap().iter())
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let dynamic = &read["dynamic"][0]["statement"]["content"][0];
    actions.extend(
        dynamic["actions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string()),
    );
    assert_eq!(actions, ["s3:GetObject", "kms:Decrypt"]);
    let resources = read["statement"][0]["resources"]
        .as_str()
        .unwrap_or_default();
    assert!(
        resources.contains("aws_s3_bucket.assets.arn}/${k}"),
        "GetObject must name objects, not the bucket: {resources}"
    );
    assert_eq!(dynamic["condition"][0]["variable"], "kms:ViaService");
    assert_eq!(
        resource(&doc, "aws_iam_role_policy", "read")["policy"],
        "${data.aws_iam_policy_document.read[each.key].json}"
    );
    assert!(
        resource(&doc, "aws_s3_object", "bundle")["source_hash"]
            .as_str()
            .unwrap()
            .contains("filesha256")
    );
}

#[test]
fn aws_example_renders_ignition_through_the_provider_free_modules() {
    if skip_without_hcl2() {
        return;
    }
    let doc = hcl("terraform/examples/aws");
    let modules = doc["module"].as_object().unwrap();
    assert_eq!(
        modules["ignition_master"]["source"],
        "../../modules/ignition"
    );
    assert_eq!(modules["ignition_master"]["role"], "bootkube-master");
    assert_eq!(modules["ignition_master"]["assets_mode"], "pull");
    assert_eq!(modules["ignition_worker"]["role"], "worker");
    assert_eq!(
        modules["pointer_master"]["source"],
        "../../modules/ignition-pointer"
    );
    assert_eq!(modules["assets"]["source"], "../../modules/s3-assets");
    for inst in ["bootkube_master", "worker"] {
        let i = resource(&doc, "aws_instance", inst);
        assert!(
            i["user_data"].as_str().unwrap().contains("module.pointer_"),
            "{inst}"
        );
        assert_eq!(
            i["metadata_options"][0]["http_tokens"], "required",
            "{inst}: IMDSv2"
        );
        // A new config (agent pin, token) does not replace running nodes.
        assert!(
            i["lifecycle"][0]["ignore_changes"]
                .to_string()
                .contains("user_data"),
            "{inst}: no lifecycle.ignore_changes = [user_data]: {}",
            i["lifecycle"]
        );
    }
    // The same modules, rendered and validated: ignition/render renders a
    // bootkube master in pull mode and its pointer exactly like this example
    // (tests/delivery_ignition.rs runs ignition-validate on them).
    let render = hcl("ignition/render");
    assert_eq!(
        render["module"]["bootkube_master_pull"]["assets_mode"],
        "pull"
    );
    assert_eq!(
        render["module"]["bootkube_master_pull_pointer"]["source"],
        "../../terraform/modules/ignition-pointer"
    );
}

/// `terraform plan` of a module as a root module, with these variables.
fn plan(tf: &Terraform, vars: &Value) -> Output {
    let f = tf
        .work()
        .join(format!("vars-{}.tfvars.json", fastrand::u64(..)));
    fs::write(&f, vars.to_string()).unwrap();
    tf.run(&[
        "plan",
        "-input=false",
        "-no-color",
        "-lock=false",
        &format!("-var-file={}", f.display()),
    ])
}

fn good_ignition_vars() -> Value {
    let inputs = root().join("ignition/render/inputs");
    json!({
        "role": "worker",
        "agent_url": "https://mirror.example.com/node-bootstrap",
        "agent_sha512": "0a".repeat(64),
        "kubelet_image_tag": "v1.9.6_coreos.0",
        "runtime_mappings": fs::read_to_string(inputs.join("runtime-mappings.yaml")).unwrap(),
        "kubeconfig": fs::read_to_string(inputs.join("kubeconfig")).unwrap(),
    })
}

#[test]
fn ignition_module_rejects_bad_inputs_at_plan_time_naming_the_variable() {
    if skip_without(&["terraform"]) {
        return;
    }
    let tf = Terraform::new(root().join("terraform/modules/ignition"));
    tf.init();
    let ok = plan(&tf, &good_ignition_vars());
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );

    let empty_units = tempfile::tempdir().unwrap();
    let cases: Vec<(&str, Value, &str)> = vec![
        ("role", json!("boss"), "role must be"),
        (
            "agent_sha512",
            json!("abc123"),
            "agent_sha512 must be 128 lowercase hex",
        ),
        (
            "agent_url",
            json!("file:///opt/node-bootstrap"),
            "agent_url must be",
        ),
        (
            "agent_config",
            json!("[1, 2]"),
            "agent_config must be a JSON object",
        ),
        (
            "agent_config",
            json!("{\"role\": \"master\"}"),
            "agent_config.role disagrees",
        ),
        (
            "agent_config",
            json!("{\"assets\": {\"mode\": \"pull\"}}"),
            "agent_config.assets.mode disagrees",
        ),
        (
            "agent_config",
            json!("{\"assets\": \"pull\"}"),
            "agent_config.assets must be an object",
        ),
        (
            "kubelet_image_tag",
            json!("v1.9.6+coreos.0"),
            "write \"+\" as \"_\"",
        ),
        (
            "kubelet_image_url",
            json!("quay.io/coreos/hyperkube:v1.9.6"),
            "without a tag",
        ),
        (
            "runtime_mappings",
            json!("versions: {}\n"),
            "VersionManifestV1",
        ),
        (
            "kubeconfig",
            json!("apiVersion: v1\nusers:\n- user: {token: s3cr3t-t0ken}\n"),
            "kubeconfig must be a kubeconfig",
        ),
        (
            "ssh_authorized_keys",
            json!(["not a key"]),
            "OpenSSH public key",
        ),
        ("keyring", json!("hello"), "ASCII-armored OpenPGP"),
        (
            "node_labels",
            json!({"node-role.kubernetes.io/master": ""}),
            "may not set on its own Node",
        ),
        (
            "node_labels",
            json!({"node.kubernetes.io/role": "db"}),
            "the module sets it from role",
        ),
        (
            "node_taints",
            json!(["dedicated=db:Sometimes"]),
            "\"key=value:Effect\"",
        ),
        ("cluster_dns_ip", json!("10.3.0.300"), "one IPv4 or IPv6"),
        ("cluster_domain", json!("Cluster.Local."), "DNS domain"),
        (
            "kubelet_extra_args",
            json!(["--max-pods=50 --v=9"]),
            "one flag",
        ),
        ("kubelet_client_ca", json!("hello"), "PEM certificates"),
        (
            "kubeconfig",
            json!(
                "apiVersion: v1\nclusters:\n- name: c\n  cluster: {server: 'https://10.0.0.1:6443'}\nusers:\n- user: {token: s3cr3t-t0ken}\n"
            ),
            "has no certificate-authority-data to take the kubelet's client CA from",
        ),
        (
            "units_dir",
            json!(empty_units.path()),
            "units_dir: no k8s-node-bootstrap.service, kubelet.service",
        ),
    ];
    for (var, value, message) in cases {
        let mut vars = good_ignition_vars();
        vars[var] = value.clone();
        let out = plan(&tf, &vars);
        let stderr = String::from_utf8_lossy(&out.stderr).replace('\n', " ");
        let stderr = stderr.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(!out.status.success(), "{var} = {value} was accepted");
        // The error names the variable: terraform shows `var.NAME` for a
        // validation rule; the kubeconfig and the keyring (sensitive,
        // checked by output preconditions so their values are never
        // printed) and the unit files are named by the message itself.
        let named = match var {
            "kubeconfig" | "units_dir" | "keyring" => true,
            _ => stderr.contains(&format!("var.{var}")),
        };
        assert!(
            stderr.contains(message) && named,
            "{var} = {value}: the error does not name the variable and say {message:?}:\n{stderr}"
        );
        assert!(
            !stderr.contains("s3cr3t"),
            "a secret reached the error output:\n{stderr}"
        );
    }
}

/// The agent's answer to `agent_config` as the ignition module writes it
/// (`role` and `assets.mode` set from the module's variables):
/// `node-bootstrap check-config`'s exit code and stderr.
fn agent_check_config(agent_config: &Value, role: &str, assets_mode: &str) -> (i32, String) {
    let mut cfg = agent_config.clone();
    cfg["role"] = json!(role);
    if !cfg["assets"].is_object() {
        cfg["assets"] = json!({});
    }
    cfg["assets"]["mode"] = json!(assets_mode);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("config.json");
    fs::write(&p, cfg.to_string()).unwrap();
    let out = testkit::cli::agent_command()
        .arg("--config")
        .arg(&p)
        .args(["--log-format", "text", "check-config"])
        .output()
        .unwrap();
    (testkit::cli::code(&out), testkit::cli::stderr(&out))
}

/// What the agent refuses when it loads its config (exit 4 on the node:
/// pull mode without the bundle's bucket and key, a helper in docker mode
/// without an image) fails `terraform plan` already, naming `agent_config`
/// and the field; each case is checked against the agent itself, so the
/// module's rules stay the agent's, and near misses pass both.
#[test]
fn ignition_module_refuses_at_plan_time_the_agent_configs_the_agent_refuses_on_the_node() {
    if skip_without(&["terraform"]) {
        return;
    }
    let tf = Terraform::new(root().join("terraform/modules/ignition"));
    tf.init();
    let role = "bootkube-master";
    let vars_for = |assets_mode: &str, agent_config: &Value| {
        let mut vars = good_ignition_vars();
        vars["role"] = json!(role);
        vars["assets_mode"] = json!(assets_mode);
        vars["agent_config"] = json!(agent_config.to_string());
        vars
    };
    // (assets_mode, agent_config, what plan says, the field the agent names)
    let refused: Vec<(&str, Value, &str, &str)> = vec![
        (
            "pull",
            json!({}),
            "agent_config has no assets.s3",
            "assets.s3",
        ),
        (
            "pull",
            json!({"cluster": {"api_attempts": 3}}),
            "agent_config has no assets.s3",
            "assets.s3",
        ),
        (
            "pull",
            json!({"assets": {"s3": {"bucket": "my-cluster-assets"}}}),
            "agent_config.assets.s3 needs",
            "assets.s3.key",
        ),
        (
            "pull",
            json!({"assets": {"s3": {"key": "assets/bundle.tar.gz"}}}),
            "agent_config.assets.s3 needs",
            "assets.s3.bucket",
        ),
        (
            "pull",
            json!({"assets": {"s3": {"bucket": "my-cluster-assets/assets", "key": "bundle.tar.gz"}}}),
            "agent_config.assets.s3 needs",
            "assets.s3.bucket",
        ),
        (
            "pull",
            json!({"assets": {"s3": {"bucket": " ", "key": "assets/bundle.tar.gz"}}}),
            "agent_config.assets.s3 needs",
            "assets.s3.bucket",
        ),
        (
            "push",
            json!({"assets": {"s3": {"bucket": "my-cluster-assets", "key": ""}}}),
            "agent_config.assets.s3 needs",
            "assets.s3.key",
        ),
        (
            "push",
            json!({"helpers": {"bootkube": {"mode": "docker"}}}),
            "agent_config.helpers.bootkube.docker.image is required",
            "helpers.bootkube.docker.image",
        ),
        (
            "push",
            json!({"helpers": {"tectonic": {"mode": "docker", "docker": {"args": ["install"]}}}}),
            "agent_config.helpers.tectonic.docker.image is required",
            "helpers.tectonic.docker.image",
        ),
        (
            "push",
            json!({"helpers": {"tectonic": {"docker": {"image": "quay.io/coreos/tectonic installer"}}}}),
            "agent_config.helpers.tectonic.docker.image is required",
            "helpers.tectonic.docker.image",
        ),
        (
            "push",
            json!({"helpers": {"bootkube": {"mode": "container"}}}),
            "mode must be \"script\" or \"docker\"",
            "helpers.bootkube.mode",
        ),
    ];
    for (assets_mode, agent_config, message, field) in &refused {
        let (code, stderr) = agent_check_config(agent_config, role, assets_mode);
        assert!(
            code == 4 && stderr.contains(&format!("field `{field}`")),
            "the agent does not refuse {agent_config} ({assets_mode} mode) naming {field} \
             (exit {code}): {stderr}"
        );
        let out = plan(&tf, &vars_for(assets_mode, agent_config));
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stderr = stderr.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            !out.status.success(),
            "terraform plan accepts agent_config {agent_config} with assets_mode {assets_mode}, \
             which the agent refuses on the node (field {field})"
        );
        assert!(
            stderr.contains("var.agent_config") && stderr.contains(message),
            "{agent_config} ({assets_mode}): the plan error does not name agent_config and say \
             {message:?}:\n{stderr}"
        );
    }
    // (kubelet-wrapper named: the default kubelet, a sysext, would be
    // searched for in the cluster's bucket too, which needs a keyring.)
    let accepted: Vec<(&str, Value)> = vec![
        (
            "pull",
            json!({"kubelet": {"backend": "wrapper"}, "assets": {"s3": {"bucket": "my-cluster-assets", "key": "assets/bundle.tar.gz"}}}),
        ),
        (
            "push",
            json!({"kubelet": {"backend": "wrapper"}, "assets": {"s3": {"bucket": "my-cluster-assets", "key": "assets/bundle.tar.gz"}}}),
        ),
        (
            "push",
            json!({"helpers": {
                "bootkube": {"mode": "docker", "docker": {"image": "quay.io/coreos/bootkube:v0.10.0"}},
                "tectonic": {"mode": "script"}
            }}),
        ),
        (
            "push",
            json!({"helpers": {"tectonic": {"docker": {"image": "quay.io/coreos/tectonic-installer:v1.9.6"}}}}),
        ),
        ("push", json!({"helpers": {"bootkube": {"mode": null}}})),
    ];
    for (assets_mode, agent_config) in &accepted {
        let (code, stderr) = agent_check_config(agent_config, role, assets_mode);
        assert_eq!(code, 0, "the agent refuses {agent_config}: {stderr}");
        let out = plan(&tf, &vars_for(assets_mode, agent_config));
        assert!(
            out.status.success(),
            "terraform plan refuses {agent_config} ({assets_mode}), which the agent accepts:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn assets_dir(files: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for (name, body) in files {
        let p = d.path().join(name);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, body).unwrap();
    }
    d
}

#[test]
fn push_assets_refuses_at_plan_time_assets_the_units_would_wait_for_forever() {
    if skip_without(&["terraform"]) {
        return;
    }
    let tf = Terraform::new(root().join("terraform/modules/push-assets"));
    tf.init();
    let complete = assets_dir(&[("bootkube.sh", "true\n"), ("tectonic-wrapper.sh", "true\n")]);
    let out = plan(
        &tf,
        &json!({"host": "192.0.2.1", "assets_dir": complete.path()}),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("terraform_data.assets will be created"),
        "{stdout}"
    );

    let partial = assets_dir(&[("bootkube.sh", "true\n")]);
    let out = plan(
        &tf,
        &json!({"host": "192.0.2.1", "assets_dir": partial.path()}),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("assets_dir lacks required files: tectonic-wrapper.sh"),
        "{stderr}"
    );

    for (var, value, message) in [
        ("target_dir", json!("/opt"), "at least two levels deep"),
        (
            "target_dir",
            json!("/opt/../etc"),
            "without . or .. components",
        ),
        (
            "host_key",
            json!("AAAA"),
            "host_key must be an OpenSSH public key",
        ),
        ("port", json!(70000), "port must be an integer"),
        (
            "extra_files",
            json!({"bootkube.sh": "echo replaced\n"}),
            "extra_files names a path that assets_dir already has: bootkube.sh",
        ),
        (
            "extra_files",
            json!({"manifests/../../etc/x.yaml": "kind: List\n"}),
            "without . or .. components",
        ),
        (
            "extra_files",
            json!({"/etc/x.yaml": "kind: List\n"}),
            "every extra_files path must be relative to target_dir",
        ),
    ] {
        let mut vars = json!({"host": "192.0.2.1", "assets_dir": complete.path()});
        vars[var] = value.clone();
        let out = plan(&tf, &vars);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{var} = {value} was accepted");
        assert!(stderr.contains(message), "{var} = {value}: {stderr}");
    }
}

// --- install-assets.sh, run directly on this machine ----------------------

fn script() -> PathBuf {
    root().join("terraform/modules/push-assets/files/install-assets.sh")
}

/// A staging dir as the push module uploads it: assets/ + SHA256SUMS.
fn stage(base: &Path, files: &[(&str, &str)]) -> PathBuf {
    let staging = base.join(format!("staging-{}", fastrand::u32(..)));
    let mut sums = String::new();
    let mut names: Vec<&(&str, &str)> = files.iter().collect();
    names.sort();
    for (name, body) in names {
        let p = staging.join("assets").join(name);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, body).unwrap();
        sums.push_str(&format!(
            "{}  {name}\n",
            hex::encode(Sha256::digest(body.as_bytes()))
        ));
    }
    fs::write(staging.join("SHA256SUMS"), sums).unwrap();
    staging
}

fn install(staging: &Path, target: &Path) -> Output {
    Command::new("/bin/sh")
        .arg(script())
        .arg(staging)
        .arg(target)
        .output()
        .unwrap()
}

fn skip_unless_root() -> bool {
    testkit::skip_unless_root("install-assets.sh runs as root (chown)")
}

#[test]
fn install_assets_verifies_the_upload_and_moves_it_into_place_root_owned_and_private() {
    if skip_unless_root() {
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let target = base.path().join("opt/tectonic");
    let staging = stage(
        base.path(),
        &[
            ("bootkube.sh", "echo bootkube\n"),
            ("tls/apiserver.key", "KEY\n"),
            ("manifests/a.yaml", "a: 1\n"),
        ],
    );
    // Uploaded by a non-root user.
    std::os::unix::fs::chown(staging.join("assets/bootkube.sh"), Some(500), Some(500)).unwrap();
    let out = install(&staging, &target);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        fs::read_to_string(target.join("tls/apiserver.key")).unwrap(),
        "KEY\n"
    );
    assert_eq!(
        fs::read_to_string(target.join("bootkube.sh")).unwrap(),
        "echo bootkube\n"
    );
    let meta = fs::metadata(&target).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o700, "assets hold keys");
    assert_eq!(fs::metadata(target.join("bootkube.sh")).unwrap().uid(), 0);
    assert!(!staging.exists(), "the staging dir is removed");
    // Nothing left beside the target but the push lock.
    assert_eq!(
        names(&base.path().join("opt")),
        [".tectonic.push.lock", "tectonic"]
    );
}

#[test]
fn install_assets_refuses_a_corrupt_upload_and_leaves_the_target_untouched() {
    if skip_unless_root() {
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let target = base.path().join("opt/tectonic");
    let first = stage(base.path(), &[("bootkube.sh", "v1\n")]);
    assert!(install(&first, &target).status.success());

    let second = stage(
        base.path(),
        &[("bootkube.sh", "v2\n"), ("tectonic-wrapper.sh", "t\n")],
    );
    fs::write(second.join("assets/tectonic-wrapper.sh"), "truncated").unwrap();
    let out = install(&second, &target);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("do not match the manifest"), "{stderr}");
    assert_eq!(names(&target), ["bootkube.sh"]);
    assert_eq!(
        fs::read_to_string(target.join("bootkube.sh")).unwrap(),
        "v1\n"
    );

    // A file missing from the upload is refused too.
    let third = stage(
        base.path(),
        &[("bootkube.sh", "v3\n"), ("tectonic-wrapper.sh", "t\n")],
    );
    fs::remove_file(third.join("assets/tectonic-wrapper.sh")).unwrap();
    assert_eq!(install(&third, &target).status.code(), Some(1));
    assert_eq!(
        fs::read_to_string(target.join("bootkube.sh")).unwrap(),
        "v1\n"
    );
}

#[test]
fn install_assets_replaces_old_assets_but_keeps_the_done_markers() {
    if skip_unless_root() {
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let target = base.path().join("opt/tectonic");
    let first = stage(
        base.path(),
        &[("bootkube.sh", "v1\n"), ("old.yaml", "old\n")],
    );
    assert!(install(&first, &target).status.success());
    fs::write(target.join("init_bootkube.done"), "").unwrap();
    fs::write(target.join("init_tectonic.done"), "").unwrap();

    let second = stage(
        base.path(),
        &[("bootkube.sh", "v2\n"), ("new.yaml", "new\n")],
    );
    let out = install(&second, &target);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        names(&target),
        [
            "bootkube.sh",
            "init_bootkube.done",
            "init_tectonic.done",
            "new.yaml"
        ],
        "old assets go, markers stay"
    );
    assert_eq!(
        fs::read_to_string(target.join("bootkube.sh")).unwrap(),
        "v2\n"
    );
    assert_eq!(
        names(&base.path().join("opt")),
        [".tectonic.push.lock", "tectonic"]
    );
}

#[test]
fn install_assets_recovers_a_push_cut_off_between_its_two_renames() {
    if skip_unless_root() {
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let opt = base.path().join("opt");
    let target = opt.join("tectonic");
    // What a power loss after `mv tectonic .tectonic.old` leaves: no
    // target, the previous assets aside (with their markers), a half copy.
    fs::create_dir_all(opt.join(".tectonic.old")).unwrap();
    fs::write(opt.join(".tectonic.old/bootkube.sh"), "v1\n").unwrap();
    fs::write(opt.join(".tectonic.old/init_bootkube.done"), "").unwrap();
    fs::create_dir_all(opt.join(".tectonic.new")).unwrap();
    fs::write(opt.join(".tectonic.new/half"), "").unwrap();

    let staging = stage(base.path(), &[("bootkube.sh", "v2\n")]);
    let out = install(&staging, &target);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(names(&target), ["bootkube.sh", "init_bootkube.done"]);
    assert_eq!(names(&opt), [".tectonic.push.lock", "tectonic"]);
}

#[test]
fn install_assets_refuses_unsafe_targets() {
    if skip_unless_root() {
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let staging = stage(base.path(), &[("bootkube.sh", "x\n")]);
    for target in ["/", "/opt", "/etc", "relative/dir", "/opt/../etc"] {
        let out = install(&staging, Path::new(target));
        assert_eq!(out.status.code(), Some(1), "{target} was accepted");
        assert!(String::from_utf8_lossy(&out.stderr).starts_with("install-assets: "));
    }
    assert!(staging.exists(), "nothing was touched");
}

/// `node-bootstrap check-config` of `agent_config` on a machine whose node
/// paths hold no keyring (the seed dir a temp dir), with the keyring
/// `--keyring` names, if any: its exit code and stderr.
fn agent_check_keyring(agent_config: &Value, keyring: Option<&Path>) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = agent_config.clone();
    cfg["paths"] = json!({"seed_dir": dir.path().join("installer")});
    let p = dir.path().join("config.json");
    fs::write(&p, cfg.to_string()).unwrap();
    let mut cmd = testkit::cli::agent_command();
    cmd.arg("--config")
        .arg(&p)
        .args(["--log-format", "text", "check-config"]);
    if let Some(k) = keyring {
        cmd.arg("--keyring").arg(k);
    }
    let out = cmd.output().unwrap();
    (testkit::cli::code(&out), testkit::cli::stderr(&out))
}

/// A signed source the agent config uses (the kubelet sysext, docker
/// packages from metadata or agent upgrades from a mirror; a torcx
/// manifest) with no keyring for it fails `terraform plan`, naming
/// `keyring`, exactly where the agent's `check-config` refuses it; the
/// same config with the keyring, or with unsigned metadata allowed, passes
/// both.
#[test]
fn ignition_module_refuses_a_signed_source_without_keyring_as_the_agent_does() {
    if skip_without(&["terraform"]) {
        return;
    }
    let tf = Terraform::new(root().join("terraform/modules/ignition"));
    tf.init();
    let keyring = root().join("ignition/render/inputs/keyring.asc");
    let url = "https://mirror.example.com/node-bootstrap";
    let cases: Vec<(Value, Option<&str>)> = vec![
        (
            json!({"kubelet": {"backend": "sysext"}, "sources": {"url": url}}),
            Some("agent_config searches sources.url for metadata it accepts only signed"),
        ),
        (
            json!({"agent": {"upgrade": "minor"}, "sources": {"url": url}}),
            Some("agent_config searches sources.url"),
        ),
        (
            json!({"addon": {"enabled": true, "package_source": "metadata"}, "sources": {"url": url}}),
            Some("agent_config searches sources.url"),
        ),
        (
            json!({"addon": {"enabled": true, "manifest_url": "https://mirror.example.com/torcx.json"}}),
            Some("takes docker from a torcx manifest"),
        ),
        (
            json!({"kubelet": {"backend": "sysext"}, "sources": {"url": url, "allow_unsigned": ["url"]}}),
            None,
        ),
        (json!({"kubelet": {"backend": "sysext"}}), None),
        (
            json!({"addon": {"enabled": true, "manifest_url": "https://mirror.example.com/torcx.json", "allow_unsigned": true}}),
            None,
        ),
        // The default kubelet backend (auto) takes the sysext on today's
        // Flatcar: the mirror is searched for it.
        (
            json!({"sources": {"url": url}}),
            Some(
                "agent_config searches sources.url for metadata it accepts only signed (kubelet.backend \"auto\" or \"sysext\"",
            ),
        ),
        (
            json!({"kubelet": {"backend": "wrapper"}, "sources": {"url": url}}),
            None,
        ),
    ];
    for (agent_config, refusal) in &cases {
        let mut vars = good_ignition_vars();
        vars["agent_config"] = json!(agent_config.to_string());
        let out = plan(&tf, &vars);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stderr = stderr.split_whitespace().collect::<Vec<_>>().join(" ");
        let (code, agent) = agent_check_keyring(agent_config, None);
        match refusal {
            Some(message) => {
                assert!(
                    !out.status.success()
                        && stderr.contains("keyring is null")
                        && stderr.contains(message),
                    "{agent_config}: plan does not refuse it naming keyring and saying {message:?}:\n{stderr}"
                );
                assert!(
                    code == 5 && agent.contains("the node could verify nothing signed there"),
                    "{agent_config}: the agent does not refuse it (exit {code}): {agent}"
                );
                // With the keyring, both accept it.
                vars["keyring"] = json!(fs::read_to_string(&keyring).unwrap());
                let out = plan(&tf, &vars);
                assert!(
                    out.status.success(),
                    "{agent_config} with a keyring: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let (code, agent) = agent_check_keyring(agent_config, Some(&keyring));
                assert!(
                    code == 0 && agent.contains("keyring ok:"),
                    "{agent_config} with --keyring (exit {code}): {agent}"
                );
            }
            None => {
                assert!(
                    out.status.success(),
                    "{agent_config}: plan refuses it, the agent does not need a keyring:\n{stderr}"
                );
                assert_eq!(code, 0, "{agent_config}: {agent}");
            }
        }
    }
}
