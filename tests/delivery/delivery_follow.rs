//! Day two, as terraform delivers it: the ignition module's `follow`
//! switch installs the follow units (verbatim from units/), enables the
//! timer and the boot-time converge unit and turns `follow.enabled` on in
//! the agent's config, only when it is on; a config that contradicts it is
//! refused at plan time. The follow-rbac module renders the lease and the
//! least RBAC (what the node test then applies to a real API server and
//! the nodes' identities use), and the operator's ConfigMap.

use crate::delivery_ignition::render_worker;
use crate::support::{Terraform, ignition_file_text, ignition_validate, root, skip_without};
use serde_json::{Value, json};
use std::fs;

const FOLLOW_UNITS: [&str; 3] = [
    "node-bootstrap-follow.service",
    "node-bootstrap-follow.timer",
    "node-bootstrap-follow-converge.service",
];

fn units(cfg: &Value) -> Vec<(String, bool, String)> {
    cfg["systemd"]["units"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            (
                u["name"].as_str().unwrap().to_string(),
                u["enabled"] == true,
                u["contents"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn the_follow_switch_installs_the_units_and_turns_follow_on() {
    if skip_without(&["terraform"]) {
        return;
    }
    let tf = Terraform::new(root().join("terraform/modules/ignition"));
    tf.init();
    let on = render_worker(
        &tf,
        json!({"follow": true, "agent_config": r#"{"follow": {"stable_checks": 5}}"#}),
    );
    let got = units(&on);
    for name in FOLLOW_UNITS {
        let (_, enabled, contents) = got
            .iter()
            .find(|(n, _, _)| n == name)
            .unwrap_or_else(|| panic!("{name} is not in the config"));
        assert_eq!(
            *contents,
            fs::read_to_string(root().join("units").join(name)).unwrap(),
            "{name}"
        );
        // The service runs from its timer, never on its own.
        assert_eq!(*enabled, name != "node-bootstrap-follow.service", "{name}");
    }
    let config: Value =
        serde_json::from_str(&ignition_file_text(&on, "/etc/node-bootstrap/config.json").unwrap())
            .unwrap();
    assert_eq!(
        config["follow"],
        json!({"enabled": true, "stable_checks": 5}),
        "{config}"
    );
    let p = tf.work().join("worker-follow.ign");
    fs::write(&p, on.to_string()).unwrap();
    if !skip_without(&["ignition-validate"]) {
        ignition_validate(&p).unwrap();
    }
    // Off (the default): none of it.
    let off = render_worker(&tf, json!({}));
    assert!(
        units(&off)
            .iter()
            .all(|(n, _, _)| !n.starts_with("node-bootstrap-follow"))
    );
    let config: Value =
        serde_json::from_str(&ignition_file_text(&off, "/etc/node-bootstrap/config.json").unwrap())
            .unwrap();
    assert!(config.get("follow").is_none(), "{config}");
    // An agent config that says otherwise: refused at plan time.
    let vars = tf.work().join("contradiction.tfvars.json");
    fs::write(
        &vars,
        json!({
            "role": "worker", "agent_url": "https://m.example.com/nb", "agent_sha512": "ab".repeat(64),
            "kubelet_image_tag": "v1.20.2", "runtime_mappings": "kind: VersionManifestV1\nversions:\n  k8s: {}\n",
            "kubeconfig": "x", "agent_config": r#"{"follow": {"enabled": true}}"#,
        })
        .to_string(),
    )
    .unwrap();
    let out = tf.run(&[
        "plan",
        "-no-color",
        "-input=false",
        &format!("-var-file={}", vars.display()),
    ]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "planned a contradiction");
    assert!(
        said.contains("agent_config.follow.enabled disagrees with the follow variable"),
        "{said}"
    );
}

#[test]
fn follow_rbac_renders_the_lease_and_the_least_rbac_and_the_config_map() {
    if skip_without(&["terraform"]) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    fs::write(
        work.path().join("main.tf"),
        format!(
            "module \"f\" {{\n  source = \"{}\"\n  minor = \"1.21\"\n  max_changing = 2\n  delete_emptydir_data = true\n}}\noutput \"manifest\" {{ value = module.f.manifest }}\noutput \"config_map\" {{ value = module.f.config_map }}\n",
            root().join("terraform/modules/follow-rbac").display()
        ),
    )
    .unwrap();
    let tf = Terraform::new(work.path());
    tf.init();
    tf.apply_ok(&[]);
    let manifest = tf.output("manifest").as_str().unwrap().to_string();
    let docs: Vec<&str> = manifest.split("\n---\n").collect();
    assert_eq!(docs.len(), 5, "{manifest}");
    assert!(
        docs[0].contains("kind: ConfigMap")
            && docs[0].contains("name: node-bootstrap-follow-lease")
            && docs[0].contains("namespace: kube-system")
    );
    // The lease declares no data: applying the manifest again never
    // touches what the nodes wrote (a halt stays).
    assert!(
        !docs[0].lines().any(|l| l.starts_with("data:")),
        "{}",
        docs[0]
    );
    // The nodes' rules, each narrowed to one object: the lease's
    // ConfigMap (get, update, patch), the operator's (get), the API servers'
    // Endpoints (get); no create, no list, no wildcard, nothing on Nodes.
    let rules = |doc: &str| -> Vec<String> {
        let pick = |key: &str| -> Vec<String> {
            doc.lines()
                .filter(|l| l.trim_start().starts_with(key))
                .map(|l| l.trim().to_string())
                .collect()
        };
        pick("verbs:")
            .into_iter()
            .zip(pick("resourceNames:"))
            .zip(pick("resources:"))
            .map(|((v, n), r)| format!("{r} {n} {v}"))
            .collect()
    };
    assert!(docs[1].contains("kind: Role\n"), "{}", docs[1]);
    assert_eq!(
        rules(docs[1]),
        [
            "resources: [\"configmaps\"] resourceNames: [\"node-bootstrap-follow-lease\"] verbs: [\"get\", \"update\", \"patch\"]",
            "resources: [\"configmaps\"] resourceNames: [\"node-bootstrap-follow\"] verbs: [\"get\"]"
        ],
        "{}",
        docs[1]
    );
    assert!(docs[3].contains("kind: Role\n") && docs[3].contains("namespace: default"));
    assert_eq!(
        rules(docs[3]),
        ["resources: [\"endpoints\"] resourceNames: [\"kubernetes\"] verbs: [\"get\"]"],
        "{}",
        docs[3]
    );
    for d in [docs[1], docs[3]] {
        assert!(
            !d.contains('*') && !d.contains("create") && !d.contains("nodes"),
            "{d}"
        );
    }
    for d in [docs[2], docs[4]] {
        assert!(
            d.contains("kind: RoleBinding") && d.contains("kind: Group\n  name: system:nodes"),
            "{d}"
        );
    }
    let cm = tf.output("config_map").as_str().unwrap().to_string();
    assert!(
        cm.contains("kind: ConfigMap")
            && cm.contains(
                "  deleteEmptyDirData: \"true\"\n  maxChanging: \"2\"\n  maxNotReady: \"1\"\n  minor: \"1.21\"\n"
            ),
        "{cm}"
    );
    // A minor that is no minor: refused at plan time, naming the variable.
    fs::write(
        work.path().join("main.tf"),
        format!(
            "module \"f\" {{\n  source = \"{}\"\n  minor = \"1.21.3\"\n}}\n",
            root().join("terraform/modules/follow-rbac").display()
        ),
    )
    .unwrap();
    let out = tf.run(&["plan", "-no-color", "-input=false"]);
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("minor must be a Kubernetes minor version such as \"1.21\""),
        "{said}"
    );
}
