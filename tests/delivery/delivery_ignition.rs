//! The Ignition configs: the checked-in examples (ignition/examples/*.ign)
//! are what scripts/render-ignition.sh renders today from units/, the
//! terraform modules and ignition/render/inputs; every one passes the real
//! `ignition-validate`; each role gets exactly its units, verbatim from
//! units/, and its files where the agent reads them; a unit edited in
//! units/ shows up in every rendered config with no other change.

use crate::support::{
    Terraform, ignition_file, ignition_file_text, ignition_validate, root, skip_without,
};
use base64::Engine as _;
use serde_json::{Value, json};
use sha2::{Digest, Sha512};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const FULL_CONFIGS: &[(&str, &str, &str)] = &[
    // (file, role, assets mode)
    ("worker.ign", "worker", "push"),
    ("master.ign", "master", "push"),
    ("bootkube-master.ign", "bootkube-master", "push"),
    ("bootkube-master-pull.ign", "bootkube-master", "pull"),
];
const POINTER: &str = "bootkube-master-pull-pointer.ign";

fn examples_dir() -> PathBuf {
    root().join("ignition/examples")
}

fn inputs(name: &str) -> String {
    fs::read_to_string(root().join("ignition/render/inputs").join(name)).unwrap()
}

fn read_dir_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

fn load(name: &str) -> Value {
    let p = examples_dir().join(name);
    serde_json::from_slice(&fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", p.display()))
}

/// Runs scripts/render-ignition.sh of the tree at `tree` into `out`.
fn render(tree: &Path, out: &Path) {
    let o = Command::new(tree.join("scripts/render-ignition.sh"))
        .arg(out)
        .env_remove("TF_DATA_DIR")
        .output()
        .expect("running scripts/render-ignition.sh");
    assert!(
        o.status.success(),
        "render-ignition.sh failed ({}):\n{}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn checked_in_examples_are_what_the_sources_render_today() {
    if skip_without(&["terraform", "python3"]) {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    render(&root(), out.path());
    let fresh = read_dir_files(out.path());
    let checked_in = read_dir_files(&examples_dir());
    assert_eq!(
        fresh.keys().collect::<Vec<_>>(),
        checked_in.keys().collect::<Vec<_>>(),
        "ignition/examples/ does not hold exactly the rendered configs; run scripts/render-ignition.sh"
    );
    let stale: Vec<&String> = fresh
        .iter()
        .filter(|(name, bytes)| checked_in[*name] != **bytes)
        .map(|(name, _)| name)
        .collect();
    assert!(
        stale.is_empty(),
        "stale rendered configs in ignition/examples/: {stale:?}; run scripts/render-ignition.sh and commit the result"
    );
    assert_eq!(fresh.len(), FULL_CONFIGS.len() + 1);
}

#[test]
fn every_rendered_config_passes_ignition_validate() {
    if skip_without(&["ignition-validate"]) {
        return;
    }
    let files = read_dir_files(&examples_dir());
    assert!(
        !files.is_empty(),
        "no rendered configs in ignition/examples/"
    );
    let failures: Vec<String> = files
        .keys()
        .filter_map(|name| ignition_validate(&examples_dir().join(name)).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // The validator judges meaning, not just shape: the worker config with a
    // truncated binary hash must fail.
    let mut broken = load("worker.ign");
    broken["storage"]["files"][0]["contents"]["verification"]["hash"] = "sha512-00ff".into();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("broken.ign");
    fs::write(&p, serde_json::to_vec(&broken).unwrap()).unwrap();
    let err = ignition_validate(&p).expect_err("a bad hash must not validate");
    assert!(err.contains("hash"), "{err}");
}

#[test]
fn each_role_gets_its_units_verbatim_from_units_dir_and_enables_the_right_ones() {
    for (file, role, mode) in FULL_CONFIGS {
        let cfg = load(file);
        assert_eq!(cfg["ignition"]["version"], "3.3.0", "{file}");
        let units = cfg["systemd"]["units"].as_array().unwrap();
        let mut expected_units = vec![
            "k8s-node-bootstrap.service",
            "kubelet.service",
            "node-bootstrap-catalog.service",
        ];
        let mut expected_enabled = expected_units.clone();
        if *role == "bootkube-master" {
            expected_units.extend([
                "bootkube.path",
                "bootkube.service",
                "tectonic.path",
                "tectonic.service",
            ]);
            expected_enabled.extend(["bootkube.path", "tectonic.path"]);
        }
        if *mode == "pull" {
            expected_units.push("init-assets.service");
            expected_enabled.push("init-assets.service");
        }
        let names: Vec<&str> = units.iter().map(|u| u["name"].as_str().unwrap()).collect();
        assert_eq!(names, expected_units, "{file}: units");
        let enabled: Vec<&str> = units
            .iter()
            .filter(|u| u["enabled"] == Value::Bool(true))
            .map(|u| u["name"].as_str().unwrap())
            .collect();
        assert_eq!(enabled, expected_enabled, "{file}: enabled units");
        // kubelet's per-role settings: the drop-in kubelet.service reads.
        let kubelet = units
            .iter()
            .find(|u| u["name"] == "kubelet.service")
            .unwrap();
        let node_role = if *role == "worker" {
            "worker"
        } else {
            "master"
        };
        assert_eq!(
            kubelet["dropins"],
            json!([{"name": "10-node.conf", "contents": format!(
                "# Rendered by terraform/modules/ignition for a {role} node.\n[Service]\n\
                 Environment=\"KUBELET_NODE_LABELS=node.kubernetes.io/role={node_role}\"\n\
                 Environment=\"KUBELET_EXTRA_ARGS=\"\n"
            )}]),
            "{file}: kubelet's drop-in"
        );
        for u in units {
            let name = u["name"].as_str().unwrap();
            if name != "kubelet.service" {
                assert!(u.get("dropins").is_none(), "{file}: {name} has drop-ins");
            }
            let source = fs::read_to_string(testkit::unit_file(name)).unwrap();
            assert_eq!(
                u["contents"].as_str().unwrap(),
                source,
                "{file}: {name} differs from units/{name}"
            );
            // Triggered services are installed, never enabled.
            if name == "bootkube.service" || name == "tectonic.service" {
                assert_eq!(u["enabled"], Value::Bool(false), "{file}: {name}");
            }
        }
    }
}

#[test]
fn binary_config_seed_files_and_secrets_land_where_the_agent_reads_them() {
    let mappings = inputs("runtime-mappings-flatcar.yaml");
    let keyring = inputs("keyring.asc");
    let kubeconfig = inputs("kubeconfig");
    let ca = inputs("mirror-ca.pem");
    let ssh_key = inputs("operator.pub");
    let input_config: Value = serde_json::from_str(&inputs("config.json")).unwrap();

    for (file, role, mode) in FULL_CONFIGS {
        let cfg = load(file);
        // Workers start with a bootstrap token only (the bootstrap-token
        // module's kubeconfig; delivery_bootstrap_token.rs checks it holds
        // no other credential); masters with the shared kubeconfig.
        let kubeconfig_path = if *role == "worker" {
            "/etc/kubernetes/bootstrap-kubeconfig"
        } else {
            "/etc/kubernetes/kubeconfig"
        };
        let paths: Vec<&str> = cfg["storage"]["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["path"].as_str().unwrap())
            .collect();
        assert_eq!(
            paths,
            [
                "/opt/bin/node-bootstrap",
                "/etc/node-bootstrap/config.json",
                "/etc/kubernetes/installer/kubelet.env",
                "/etc/kubernetes/installer/runtime-mappings.yaml",
                kubeconfig_path,
                "/etc/kubernetes/ca.crt",
                "/etc/kubernetes/installer/keyring.asc",
                "/etc/ssl/certs/node-bootstrap-ca.pem",
                "/etc/extensions/node-bootstrap/usr/lib/systemd/catalog/node-bootstrap.catalog",
                "/etc/extensions/node-bootstrap/usr/lib/extension-release.d/extension-release.node-bootstrap",
            ],
            "{file}"
        );
        // The journal catalog, verbatim from units/, as a system extension
        // that merges on any OS (tests/node/metrics_node.rs runs it).
        assert_eq!(
            ignition_file_text(
                &cfg,
                "/etc/extensions/node-bootstrap/usr/lib/systemd/catalog/node-bootstrap.catalog"
            )
            .unwrap(),
            fs::read_to_string(root().join("units/node-bootstrap.catalog")).unwrap(),
            "{file}"
        );
        assert_eq!(
            ignition_file_text(
                &cfg,
                "/etc/extensions/node-bootstrap/usr/lib/extension-release.d/extension-release.node-bootstrap"
            )
            .unwrap(),
            "ID=_any\n",
            "{file}"
        );

        // The binary: from the mirror, verified by SHA-512, executable.
        let bin = ignition_file(&cfg, "/opt/bin/node-bootstrap").unwrap();
        assert_eq!(bin["mode"], 0o755, "{file}");
        assert!(
            bin["contents"]["source"]
                .as_str()
                .unwrap()
                .starts_with("https://mirror.example.com/"),
            "{file}"
        );
        let hash = bin["contents"]["verification"]["hash"].as_str().unwrap();
        let hex = hash.strip_prefix("sha512-").expect("sha512- prefix");
        assert!(
            hex.len() == 128 && hex.bytes().all(|b| b.is_ascii_hexdigit()),
            "{file}: {hash}"
        );

        // The agent config: the input object, with role and assets.mode.
        let agent: Value = serde_json::from_str(
            &ignition_file_text(&cfg, "/etc/node-bootstrap/config.json").unwrap(),
        )
        .unwrap();
        assert_eq!(agent["role"], *role, "{file}");
        assert_eq!(agent["assets"]["mode"], *mode, "{file}");
        // The metrics textfile, where node_exporter usually reads (the
        // input config has no metrics section of its own).
        assert_eq!(
            agent["metrics"]["textfile_dir"], "/var/lib/node_exporter/textfile_collector",
            "{file}"
        );
        // With the bootstrap kubeconfig, the agent reads /version with the
        // token (cluster.credential); with the shared one, its default.
        let mut expected_config = input_config.clone();
        if *role == "worker" {
            expected_config["cluster"]["credential"] = "bootstrap-token".into();
        }
        // And `run` watches the join for 30 minutes after kubelet.env.
        expected_config["cluster"]["join_watch_secs"] = 1800.into();
        // The kubelet's cluster DNS, domain and the role's taints: the
        // agent writes them as the cluster's kubelet version takes them.
        let taints = if *role == "worker" {
            json!([])
        } else {
            json!(["node-role.kubernetes.io/master=:NoSchedule"])
        };
        expected_config["kubelet_config"] = json!({
            "cluster_dns": ["10.3.0.10"],
            "cluster_domain": "cluster.local",
            "taints": taints,
        });
        for (k, v) in expected_config.as_object().unwrap() {
            assert_eq!(&agent[k], v, "{file}: config.{k}");
        }

        assert_eq!(
            ignition_file_text(&cfg, "/etc/kubernetes/installer/kubelet.env").unwrap(),
            "KUBELET_IMAGE_URL=\"quay.io/coreos/hyperkube\"\nKUBELET_IMAGE_TAG=\"v1.31.4\"\n",
            "{file}"
        );
        assert_eq!(
            ignition_file_text(&cfg, "/etc/kubernetes/installer/runtime-mappings.yaml").unwrap(),
            mappings
        );
        assert_eq!(
            ignition_file_text(&cfg, "/etc/kubernetes/installer/keyring.asc").unwrap(),
            keyring
        );
        let node_kubeconfig = ignition_file_text(&cfg, kubeconfig_path).unwrap();
        if *role == "worker" {
            // The example kubeconfig's server and CA, the example token.
            let shared: Value = serde_saphyr::from_str(&kubeconfig).unwrap();
            let boot: Value = serde_saphyr::from_str(&node_kubeconfig).unwrap();
            assert_eq!(
                boot["clusters"][0]["cluster"],
                shared["clusters"][0]["cluster"]
            );
            assert_eq!(
                boot["users"][0]["user"],
                json!({"token": "07401b.f395accd246ae52d"})
            );
        } else {
            assert_eq!(node_kubeconfig, kubeconfig);
        }
        assert_eq!(
            ignition_file(&cfg, kubeconfig_path).unwrap()["mode"],
            0o600,
            "{file}: the kubeconfig is a secret"
        );
        for seed in [
            "/etc/node-bootstrap/config.json",
            "/etc/kubernetes/installer/kubelet.env",
            "/etc/kubernetes/installer/runtime-mappings.yaml",
        ] {
            assert_eq!(
                ignition_file(&cfg, seed).unwrap()["mode"],
                0o644,
                "{file}: {seed}"
            );
        }

        // The kubelet's client CA (--client-ca-file): the kubeconfig's CA.
        let kc: Value = serde_saphyr::from_str(&kubeconfig).unwrap();
        let kc_ca = base64::engine::general_purpose::STANDARD
            .decode(
                kc["clusters"][0]["cluster"]["certificate-authority-data"]
                    .as_str()
                    .unwrap(),
            )
            .unwrap();
        assert_eq!(
            ignition_file_text(&cfg, "/etc/kubernetes/ca.crt")
                .unwrap()
                .as_bytes(),
            kc_ca.as_slice(),
            "{file}: /etc/kubernetes/ca.crt is the kubeconfig's CA"
        );
        assert_eq!(
            ignition_file(&cfg, "/etc/kubernetes/ca.crt").unwrap()["mode"],
            0o644
        );

        // The private mirror's CA: trusted by Ignition for the download and
        // by the node afterwards.
        assert_eq!(
            ignition_file_text(&cfg, "/etc/ssl/certs/node-bootstrap-ca.pem").unwrap(),
            ca
        );
        let ign_ca = &cfg["ignition"]["security"]["tls"]["certificateAuthorities"][0]["source"];
        assert_eq!(
            crate::support::decode_data_url(ign_ca.as_str().unwrap()).unwrap(),
            ca.as_bytes()
        );

        assert_eq!(cfg["passwd"]["users"][0]["name"], "core");
        assert_eq!(
            cfg["passwd"]["users"][0]["sshAuthorizedKeys"][0],
            ssh_key.trim()
        );
    }
}

#[test]
fn pointer_config_replaces_itself_with_the_pull_config_verified_by_sha512() {
    let pointer = load(POINTER);
    let replace = &pointer["ignition"]["config"]["replace"];
    assert_eq!(pointer["ignition"]["version"], "3.3.0");
    assert!(replace["source"].as_str().unwrap().starts_with("s3://"));
    let full = fs::read(examples_dir().join("bootkube-master-pull.ign")).unwrap();
    assert_eq!(
        replace["verification"]["hash"].as_str().unwrap(),
        format!("sha512-{}", hex::encode(Sha512::digest(&full))),
        "the pointer must verify exactly the bytes of the full config"
    );
    assert!(pointer.get("storage").is_none() && pointer.get("passwd").is_none());
}

#[test]
fn agent_config_in_every_example_is_accepted_by_the_agent() {
    for (file, role, mode) in FULL_CONFIGS {
        let cfg = load(file);
        let text = ignition_file_text(&cfg, "/etc/node-bootstrap/config.json").unwrap();
        // The whole config as its node reads it: the agent config, the
        // runtime mappings, the keyring it needs, the seed kubelet.env.
        let out = testkit::cli::agent_command()
            .args(["--log-format", "text", "check-config", "--ignition"])
            .arg(examples_dir().join(file))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{file}: node-bootstrap check-config rejects the rendered config ({}):\n{text}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let shown = testkit::cli::json_stdout(&out);
        assert_eq!(
            shown["role"], *role,
            "{file}: check-config does not show role {role}:\n{shown:#}"
        );
        assert_eq!(
            shown["assets"]["mode"], *mode,
            "{file}: check-config does not show assets mode {mode}:\n{shown:#}"
        );
    }
}

/// Copies what rendering reads (units/, terraform/modules, ignition/render,
/// the script) into a scratch tree with the same layout.
fn scratch_tree() -> tempfile::TempDir {
    let tree = tempfile::tempdir().unwrap();
    for rel in ["units", "terraform/modules", "ignition/render", "scripts"] {
        copy_dir(&root().join(rel), &tree.path().join(rel));
    }
    tree
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let ty = e.file_type().unwrap();
        let dest = to.join(e.file_name());
        if ty.is_dir() {
            if e.file_name() != ".terraform" {
                copy_dir(&e.path(), &dest);
            }
        } else if ty.is_file() {
            fs::copy(e.path(), &dest).unwrap();
        }
    }
}

#[test]
fn a_unit_edited_in_units_dir_shows_up_in_every_rendered_config_and_nothing_else_changes() {
    if skip_without(&["terraform", "python3"]) {
        return;
    }
    let tree = scratch_tree();
    let unit = tree.path().join("units/kubelet.service");
    let original = fs::read_to_string(&unit).unwrap();
    let edited = original.replace("RestartSec=10", "RestartSec=7\n# edited by the test");
    assert_ne!(original, edited);
    fs::write(&unit, &edited).unwrap();

    let out = tempfile::tempdir().unwrap();
    render(tree.path(), out.path());
    for (file, _, _) in FULL_CONFIGS {
        let before = load(file);
        let mut after: Value =
            serde_json::from_slice(&fs::read(out.path().join(file)).unwrap()).unwrap();
        let units = after["systemd"]["units"].as_array_mut().unwrap();
        let kubelet = units
            .iter_mut()
            .find(|u| u["name"] == "kubelet.service")
            .unwrap();
        assert_eq!(
            kubelet["contents"],
            edited.as_str(),
            "{file}: the edit did not show up"
        );
        // Put the old text back: then nothing else may differ.
        kubelet["contents"] = original.clone().into();
        assert_eq!(after, before, "{file}: more than the edited unit changed");
    }
    // The pointer follows the new bytes of the pull config.
    let pointer: Value =
        serde_json::from_slice(&fs::read(out.path().join(POINTER)).unwrap()).unwrap();
    let full = fs::read(out.path().join("bootkube-master-pull.ign")).unwrap();
    assert_eq!(
        pointer["ignition"]["config"]["replace"]["verification"]["hash"],
        format!("sha512-{}", hex::encode(Sha512::digest(&full)))
    );
}

#[test]
fn the_ignition_module_renders_without_providers_straight_from_its_own_inputs() {
    // The module alone, as an operator would call it: minimal inputs, a
    // worker with no keyring, CA or SSH keys gets no such sections.
    if skip_without(&["terraform"]) {
        return;
    }
    let tf = Terraform::new(root().join("terraform/modules/ignition"));
    tf.init();
    let rendered = render_worker(
        &tf,
        serde_json::json!({"kubelet_image_tag": "v1.10.2_coreos.0"}),
    );
    assert!(rendered.get("passwd").is_none());
    assert!(rendered["ignition"].get("security").is_none());
    let paths: Vec<&str> = rendered["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert!(!paths.contains(&"/etc/kubernetes/installer/keyring.asc"));
    assert_eq!(
        ignition_file_text(&rendered, "/etc/node-bootstrap/config.json").unwrap(),
        "{\"assets\":{\"mode\":\"push\"},\"cluster\":{\"join_watch_secs\":1800},\"kubelet_config\":{\"cluster_dns\":[\"10.3.0.10\"],\"cluster_domain\":\"cluster.local\",\"taints\":[]},\"metrics\":{\"textfile_dir\":\"/var/lib/node_exporter/textfile_collector\"},\"role\":\"worker\"}\n"
    );
    let p = tf.work().join("worker.ign");
    fs::write(&p, tf.output("rendered").as_str().unwrap()).unwrap();
    if !skip_without(&["ignition-validate"]) {
        ignition_validate(&p).unwrap();
    }
}

#[test]
fn a_sysext_kubelet_config_gets_kubelet_services_sysext_drop_in() {
    // agent_config with kubelet.backend "sysext": kubelet.service carries
    // units/kubelet-sysext.conf as a drop-in beside the node's own; the
    // default carries only the node's.
    if skip_without(&["terraform"]) {
        return;
    }
    let tf = Terraform::new(root().join("terraform/modules/ignition"));
    tf.init();
    let render_with =
        |agent_config: &str| render_worker(&tf, serde_json::json!({"agent_config": agent_config}));
    let kubelet = |cfg: &Value| -> Value {
        cfg["systemd"]["units"]
            .as_array()
            .unwrap()
            .iter()
            .find(|u| u["name"] == "kubelet.service")
            .unwrap()
            .clone()
    };
    let sysext = render_with(r#"{"kubelet": {"backend": "sysext"}}"#);
    let unit = kubelet(&sysext);
    assert_eq!(
        unit["contents"].as_str().unwrap(),
        fs::read_to_string(root().join("units/kubelet.service")).unwrap()
    );
    let dropins = unit["dropins"].as_array().unwrap();
    let names: Vec<&str> = dropins
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["10-node.conf", "10-kubelet-sysext.conf"]);
    assert_eq!(
        dropins[1]["contents"].as_str().unwrap(),
        fs::read_to_string(root().join("units/kubelet-sysext.conf")).unwrap()
    );
    let p = tf.work().join("worker-sysext.ign");
    fs::write(&p, serde_json::to_string(&sysext).unwrap()).unwrap();
    if !skip_without(&["ignition-validate"]) {
        ignition_validate(&p).unwrap();
    }
    let wrapper = render_with("{}");
    let names: Vec<Value> = kubelet(&wrapper)["dropins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].clone())
        .collect();
    assert_eq!(names, ["10-node.conf"]);
}

/// Applies the ignition module alone for a worker with minimal inputs
/// (and `extra` variables) and returns the rendered config.
pub(crate) fn render_worker(tf: &Terraform, extra: Value) -> Value {
    let mut vars_json = serde_json::json!({
        "role": "worker",
        "agent_url": "https://mirror.example.com/node-bootstrap",
        "agent_sha512": "ab".repeat(64),
        "kubelet_image_tag": "v1.20.2",
        "runtime_mappings": inputs("runtime-mappings.yaml"),
        "kubeconfig": inputs("kubeconfig"),
    });
    for (k, v) in extra.as_object().unwrap() {
        vars_json[k] = v.clone();
    }
    let vars = tf.work().join("in.tfvars.json");
    fs::write(&vars, vars_json.to_string()).unwrap();
    tf.apply_ok(&[&format!("-var-file={}", vars.display())]);
    serde_json::from_str(tf.output("rendered").as_str().unwrap()).unwrap()
}
