//! Bootstrap tokens, as an operator checks them before a worker boots:
//! `terraform/modules/bootstrap-token` renders exactly the bootstrap
//! kubeconfig, the token Secret and the RBAC the API server needs (the
//! host tier runs them against the real 1.20 control plane:
//! tests/host/bootstrap_tokens.rs), and refuses a malformed token or a
//! stale expiration at plan time without printing the secret; a worker
//! rendered by the ignition module with the bootstrap kubeconfig holds it
//! at /etc/kubernetes/bootstrap-kubeconfig, mode 0600, and no client
//! certificate, key or static token anywhere in its config.

use crate::support::{Terraform, ignition_file, ignition_validate, root, skip_without};
use base64::Engine as _;
use serde_json::{Value, json};
use std::fs;
use std::process::Output;
use testkit::apiserver::{KubeAuth, Pki};

const MODULE: &str = "terraform/modules/bootstrap-token";
const BOOTSTRAP_KUBECONFIG: &str = "/etc/kubernetes/bootstrap-kubeconfig";
const SERVER: &str = "https://api.cluster.example.com:6443";

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// `terraform plan` with `vars` (a tfvars.json in the work dir, one
/// variable a line: terraform quotes the offending line of a var file in a
/// validation error, so a one-line file would show every secret in it).
fn plan(tf: &Terraform, vars: &Value) -> Output {
    let f = tf
        .work()
        .join(format!("vars-{}.tfvars.json", fastrand::u64(..)));
    fs::write(&f, serde_json::to_string_pretty(vars).unwrap()).unwrap();
    tf.run(&[
        "plan",
        "-input=false",
        "-no-color",
        "-lock=false",
        &format!("-var-file={}", f.display()),
    ])
}

/// terraform's error output on one line.
fn flat(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
    .split_whitespace()
    .collect::<Vec<_>>()
    .join(" ")
}

fn token_vars(ca: &str) -> Value {
    json!({
        "token_id": "123456",
        "token_secret": "7890123456789012",
        "expiration": "2099-01-01T00:00:00Z",
        "api_server_url": SERVER,
        "cluster_ca": ca,
    })
}

#[test]
fn the_module_renders_the_bootstrap_kubeconfig_the_token_secret_and_the_rbac_exactly() {
    if skip_without(&["terraform"]) {
        return;
    }
    let ca = Pki::generate().ca_pem;
    let tf = Terraform::new(root().join(MODULE));
    tf.init();
    let vars = tf.work().join("in.tfvars.json");
    // All digits: unquoted, YAML would read the token as a number.
    fs::write(&vars, token_vars(&ca).to_string()).unwrap();
    tf.apply_ok(&[&format!("-var-file={}", vars.display())]);
    let out = |name: &str| tf.output(name);

    assert_eq!(out("token"), "123456.7890123456789012");
    assert_eq!(out("token_id"), "123456");
    assert_eq!(out("secret_name"), "bootstrap-token-123456");

    let kubeconfig: Value = serde_saphyr::from_str(out("kubeconfig").as_str().unwrap()).unwrap();
    assert_eq!(
        kubeconfig,
        json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "cluster", "cluster": {
                "server": SERVER,
                "certificate-authority-data": b64(&ca),
            }}],
            "users": [{"name": "kubelet-bootstrap", "user": {"token": "123456.7890123456789012"}}],
            "contexts": [{"name": "kubelet-bootstrap", "context": {"cluster": "cluster", "user": "kubelet-bootstrap"}}],
            "current-context": "kubelet-bootstrap",
        })
    );

    let secret_text = out("token_secret_manifest");
    let secret: Value = serde_saphyr::from_str(secret_text.as_str().unwrap()).unwrap();
    assert_eq!(
        secret,
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "bootstrap-token-123456", "namespace": "kube-system"},
            "type": "bootstrap.kubernetes.io/token",
            "stringData": {
                "description": "node-bootstrap: lets a new node ask for its kubelet client certificate",
                "token-id": "123456",
                "token-secret": "7890123456789012",
                "expiration": "2099-01-01T00:00:00Z",
                "usage-bootstrap-authentication": "true",
                "auth-extra-groups": "system:bootstrappers:node-bootstrap",
            },
        })
    );

    let rbac_text = out("rbac_manifest");
    let rbac: Vec<Value> = serde_saphyr::from_multiple(rbac_text.as_str().unwrap()).unwrap();
    let binding = |name: &str, role: &str, group: &str| {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}],
        })
    };
    assert_eq!(
        rbac,
        [
            binding(
                "node-bootstrap:approve-node-client-csr",
                "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
                "system:bootstrappers"
            ),
            binding(
                "node-bootstrap:approve-node-client-renewal",
                "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
                "system:nodes"
            ),
            binding(
                "node-bootstrap:node-bootstrapper",
                "system:node-bootstrapper",
                "system:bootstrappers"
            ),
        ]
    );

    // The manifests output: the same two texts under the file names the
    // bootkube master's manifests/ gets.
    assert_eq!(
        out("manifests"),
        json!({"bootstrap-token-123456.yaml": secret_text, "node-bootstrap-rbac.yaml": rbac_text})
    );
}

#[test]
fn the_module_refuses_malformed_tokens_and_stale_expirations_at_plan_time_without_printing_the_secret()
 {
    if skip_without(&["terraform"]) {
        return;
    }
    let ca = Pki::generate().ca_pem;
    let tf = Terraform::new(root().join(MODULE));
    tf.init();
    let mut good = token_vars(&ca);
    good["token_secret"] = "s3cr3ts3cr3ts3cr".into();
    let ok = plan(&tf, &good);
    assert!(ok.status.success(), "{}", flat(&ok));

    let secret_msg = "token_secret must be exactly 16 characters of [a-z0-9]";
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "token_id",
            json!("ABC123"),
            "token_id must be exactly 6 characters of [a-z0-9]",
        ),
        (
            "token_id",
            json!("abc12"),
            "token_id must be exactly 6 characters of [a-z0-9]",
        ),
        ("token_secret", json!("S3CR3TS3CR3TS3CR"), secret_msg),
        ("token_secret", json!("s3cr3ts3cr3t"), secret_msg),
        ("token_secret", json!("s3cr3ts3cr3ts3cr3t"), secret_msg),
        ("token_secret", json!("s3cr3t.s3cr3ts3c"), secret_msg),
        (
            "expiration",
            json!("2099-01-01 00:00:00"),
            "expiration must be an RFC 3339 timestamp",
        ),
        (
            "expiration",
            json!("2099-02-30T00:00:00Z"),
            "expiration must be an RFC 3339 timestamp",
        ),
        (
            "expiration",
            json!("2001-01-01T00:00:00Z"),
            "expiration is in the past",
        ),
        (
            "api_server_url",
            json!("http://10.0.0.1:6443"),
            "api_server_url must be an https:// URL",
        ),
        (
            "cluster_ca",
            json!("hello"),
            "cluster_ca must be one PEM certificate",
        ),
        (
            "extra_group",
            json!("system:masters"),
            "extra_group must be \"system:bootstrappers:\"",
        ),
    ];
    for (var, value, message) in cases {
        let mut vars = good.clone();
        vars[var] = value.clone();
        let out = plan(&tf, &vars);
        let text = flat(&out);
        assert!(!out.status.success(), "{var} = {value} was accepted");
        // A variable's own validation names it; the id and the secret are
        // checked by the outputs' preconditions, whose messages name them
        // (and never print the value: a whole token pasted into the id is
        // a secret too).
        let named =
            var == "token_secret" || var == "token_id" || text.contains(&format!("var.{var}"));
        if var == "token_id" {
            let v = value.as_str().unwrap();
            assert!(
                !text.contains(&format!("\"{v}\"")),
                "the id was printed:\n{text}"
            );
        }
        assert!(
            text.contains(message) && named,
            "{var} = {value}: the error does not name the variable and say {message:?}:\n{text}"
        );
        assert!(
            !text.contains("s3cr3t"),
            "the token secret reached terraform's output:\n{text}"
        );
    }
}

/// A root module that does what an operator does: a token from the
/// bootstrap-token module, and a worker's Ignition config from the ignition
/// module with its kubeconfig (and a private mirror's CA).
fn render_worker_with_token(ca: &str, mirror_ca: &str) -> (Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let modules = root().join("terraform/modules");
    let inputs = root().join("ignition/render/inputs");
    fs::write(
        dir.path().join("main.tf"),
        format!(
            r#"variable "cluster_ca" {{
  type = string
}}
variable "mirror_ca" {{
  type = string
}}
module "token" {{
  source         = "{modules}/bootstrap-token"
  token_id       = "abcdef"
  token_secret   = "0123456789s3cr3t"
  expiration     = "2099-01-01T00:00:00Z"
  api_server_url = "{SERVER}"
  cluster_ca     = var.cluster_ca
}}
module "worker" {{
  source               = "{modules}/ignition"
  units_dir            = "{units}"
  role                 = "worker"
  agent_url            = "https://mirror.example.com/node-bootstrap"
  agent_sha512         = "{sha}"
  kubelet_image_tag    = "v1.20.2"
  runtime_mappings     = file("{mappings}")
  ca_bundle            = var.mirror_ca
  bootstrap_kubeconfig = module.token.kubeconfig
}}
output "rendered" {{
  value     = module.worker.rendered
  sensitive = true
}}
output "kubeconfig" {{
  value     = module.token.kubeconfig
  sensitive = true
}}
"#,
            modules = modules.display(),
            units = root().join("units").display(),
            sha = "ab".repeat(64),
            mappings = inputs.join("runtime-mappings.yaml").display(),
        ),
    )
    .unwrap();
    let tf = Terraform::new(dir.path());
    tf.init();
    let vars = tf.work().join("in.tfvars.json");
    fs::write(
        &vars,
        json!({"cluster_ca": ca, "mirror_ca": mirror_ca}).to_string(),
    )
    .unwrap();
    tf.apply_ok(&[&format!("-var-file={}", vars.display())]);
    let cfg = serde_json::from_str(tf.output("rendered").as_str().unwrap()).unwrap();
    (cfg, tf.output("kubeconfig").as_str().unwrap().to_string())
}

/// The worker config of the ignition module alone with `kubeconfig` (the
/// shared-kubeconfig path), for comparison.
fn render_worker_with_kubeconfig(kubeconfig: &str) -> Value {
    let tf = Terraform::new(root().join("terraform/modules/ignition"));
    tf.init();
    let vars = tf.work().join("in.tfvars.json");
    let mut v = good_ignition_vars();
    v["kubeconfig"] = kubeconfig.into();
    fs::write(&vars, v.to_string()).unwrap();
    tf.apply_ok(&[&format!("-var-file={}", vars.display())]);
    serde_json::from_str(tf.output("rendered").as_str().unwrap()).unwrap()
}

fn good_ignition_vars() -> Value {
    let inputs = root().join("ignition/render/inputs");
    json!({
        "role": "worker",
        "agent_url": "https://mirror.example.com/node-bootstrap",
        "agent_sha512": "0a".repeat(64),
        "kubelet_image_tag": "v1.20.2",
        "runtime_mappings": fs::read_to_string(inputs.join("runtime-mappings.yaml")).unwrap(),
    })
}

/// Every text a node gets from `cfg`, by where it lands: files (data URLs
/// decoded), units and their drop-ins, and the config's own JSON.
fn texts(cfg: &Value) -> Vec<(String, String)> {
    let mut out = vec![("<the config's JSON>".to_string(), cfg.to_string())];
    for f in cfg["storage"]["files"].as_array().into_iter().flatten() {
        let src = f["contents"]["source"].as_str().unwrap_or_default();
        if let Some(bytes) = testkit::ignition::decode_data_url(src) {
            out.push((
                f["path"].as_str().unwrap().to_string(),
                String::from_utf8_lossy(&bytes).into_owned(),
            ));
        }
    }
    for u in cfg["systemd"]["units"].as_array().into_iter().flatten() {
        let name = u["name"].as_str().unwrap();
        out.push((
            name.to_string(),
            u["contents"].as_str().unwrap_or_default().into(),
        ));
        for d in u["dropins"].as_array().into_iter().flatten() {
            out.push((
                format!("{name}.d/{}", d["name"].as_str().unwrap()),
                d["contents"].as_str().unwrap_or_default().into(),
            ));
        }
    }
    out
}

/// What an operator looks for in a worker's config before it boots: any
/// private key, any certificate that is not one of `cas`, `secret` outside
/// the bootstrap kubeconfig, and any kubeconfig (its `-data` fields decoded
/// and searched too) other than the bootstrap one or with a credential
/// other than a bootstrap token. Empty when the node holds none.
fn credential_findings(cfg: &Value, secret: &str, cas: &[&str]) -> Vec<String> {
    let mut findings = Vec::new();
    let mut queue = texts(cfg);
    while let Some((place, text)) = queue.pop() {
        if text.contains("PRIVATE KEY-----") {
            findings.push(format!("a private key in {place}"));
        }
        for block in text.split("-----BEGIN CERTIFICATE-----").skip(1) {
            let body = block.split("-----END CERTIFICATE-----").next().unwrap();
            if !cas.iter().any(|ca| ca.contains(body)) {
                findings.push(format!("a certificate that is not a CA in {place}"));
            }
        }
        if text.contains(secret) && place != BOOTSTRAP_KUBECONFIG {
            findings.push(format!("the token secret in {place}"));
        }
        let Ok(doc) = serde_saphyr::from_str::<Value>(&text) else {
            continue;
        };
        if doc["kind"] != "Config" {
            continue;
        }
        if place != BOOTSTRAP_KUBECONFIG {
            findings.push(format!("a kubeconfig at {place}"));
        }
        for user in doc["users"].as_array().into_iter().flatten() {
            for (k, v) in user["user"].as_object().into_iter().flatten() {
                let bootstrap_token = k == "token"
                    && v.as_str().is_some_and(|t| {
                        t.len() == 23
                            && t.split_once('.').is_some_and(|(id, s)| {
                                id.len() == 6
                                    && s.len() == 16
                                    && t.bytes().all(|b| {
                                        b == b'.' || b.is_ascii_lowercase() || b.is_ascii_digit()
                                    })
                            })
                    });
                if !bootstrap_token {
                    findings.push(format!(
                        "a user credential {k} in the kubeconfig at {place}"
                    ));
                }
                if let Some(data) = v.as_str().filter(|_| k.ends_with("-data")) {
                    let decoded = base64::engine::general_purpose::STANDARD
                        .decode(data)
                        .unwrap_or_default();
                    queue.push((
                        format!("{place} ({k})"),
                        String::from_utf8_lossy(&decoded).into_owned(),
                    ));
                }
            }
        }
    }
    findings.sort();
    findings
}

#[test]
fn a_worker_started_with_a_bootstrap_token_holds_it_mode_0600_and_no_client_certificate_key_or_static_token()
 {
    if skip_without(&["terraform"]) {
        return;
    }
    let cluster = Pki::generate();
    let mirror_ca = Pki::generate().ca_pem;
    let cas = [cluster.ca_pem.as_str(), mirror_ca.as_str()];
    let secret = "0123456789s3cr3t";
    let (cfg, kubeconfig) = render_worker_with_token(&cluster.ca_pem, &mirror_ca);

    let paths: Vec<&str> = cfg["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert!(paths.contains(&BOOTSTRAP_KUBECONFIG), "{paths:?}");
    assert!(!paths.contains(&"/etc/kubernetes/kubeconfig"), "{paths:?}");
    let file = ignition_file(&cfg, BOOTSTRAP_KUBECONFIG).unwrap();
    assert_eq!(file["mode"], 0o600, "the bootstrap kubeconfig is a secret");
    assert_eq!(
        crate::support::ignition_file_text(&cfg, BOOTSTRAP_KUBECONFIG).unwrap(),
        kubeconfig
    );
    assert_eq!(
        crate::support::ignition_file_text(&cfg, "/etc/kubernetes/ca.crt").unwrap(),
        cluster.ca_pem,
        "the kubelet's client CA is the bootstrap kubeconfig's"
    );
    let agent: Value = serde_json::from_str(
        &crate::support::ignition_file_text(&cfg, "/etc/node-bootstrap/config.json").unwrap(),
    )
    .unwrap();
    assert_eq!(
        agent["cluster"],
        json!({"credential": "bootstrap-token", "join_watch_secs": 1800})
    );

    assert_eq!(
        credential_findings(&cfg, secret, &cas),
        Vec::<String>::new()
    );
    if !skip_without(&["ignition-validate"]) {
        let p = tempfile::tempdir().unwrap();
        let f = p.path().join("worker.ign");
        fs::write(&f, cfg.to_string()).unwrap();
        ignition_validate(&f).unwrap();
    }

    // The search finds what it looks for: the same worker given a client
    // certificate kubeconfig, or a static token, instead ...
    let with_cert =
        render_worker_with_kubeconfig(&cluster.kubeconfig(SERVER, &KubeAuth::ClientCert));
    let found = credential_findings(&with_cert, secret, &cas);
    for f in [
        "a kubeconfig at /etc/kubernetes/kubeconfig",
        "a private key in /etc/kubernetes/kubeconfig (client-key-data)",
        "a certificate that is not a CA in /etc/kubernetes/kubeconfig (client-certificate-data)",
        "a user credential client-certificate-data in the kubeconfig at /etc/kubernetes/kubeconfig",
    ] {
        assert!(found.contains(&f.to_string()), "{f:?} not in {found:?}");
    }
    let with_token = render_worker_with_kubeconfig(
        &cluster.kubeconfig(SERVER, &KubeAuth::Token("static-t0ken".into())),
    );
    assert!(credential_findings(&with_token, secret, &cas).contains(
        &"a user credential token in the kubeconfig at /etc/kubernetes/kubeconfig".to_string()
    ));
    // ... or the token's secret copied where it does not belong.
    let mut leaked = cfg.clone();
    let units = leaked["systemd"]["units"].as_array_mut().unwrap();
    let kubelet = units
        .iter_mut()
        .find(|u| u["name"] == "kubelet.service")
        .unwrap();
    kubelet["dropins"][0]["contents"] = format!("[Service]\nEnvironment=T={secret}\n").into();
    assert!(
        credential_findings(&leaked, secret, &cas)
            .contains(&"the token secret in kubelet.service.d/10-node.conf".to_string())
    );
}

#[test]
fn the_ignition_module_refuses_a_bootstrap_kubeconfig_with_anything_but_a_bootstrap_token() {
    if skip_without(&["terraform"]) {
        return;
    }
    let pki = Pki::generate();
    let tf = Terraform::new(root().join("terraform/modules/ignition"));
    tf.init();
    let token_kc = |t: &str| pki.kubeconfig(SERVER, &KubeAuth::Token(t.into()));
    let good_token = "abcdef.0123456789s3cr3t";
    let mut good = good_ignition_vars();
    good["bootstrap_kubeconfig"] = token_kc(good_token).into();
    let ok = plan(&tf, &good);
    assert!(ok.status.success(), "{}", flat(&ok));

    // A client certificate beside the token.
    let cert_and_token = pki.kubeconfig(SERVER, &KubeAuth::ClientCert).replace(
        "    client-key-data:",
        &format!("    token: {good_token}\n    client-key-data:"),
    );
    let only_token = "bootstrap_kubeconfig must carry a bootstrap token and nothing else";
    let not_bootstrap = "bootstrap_kubeconfig's token is not a bootstrap token";
    let disagrees = "agent_config.cluster.credential disagrees with the kubeconfig given";
    let exactly_one = "give exactly one of kubeconfig";
    let cases: Vec<(Value, &str)> = vec![
        (json!({"bootstrap_kubeconfig": cert_and_token}), only_token),
        (
            json!({"bootstrap_kubeconfig": pki.kubeconfig(SERVER, &KubeAuth::ClientCert)}),
            only_token,
        ),
        (
            json!({"bootstrap_kubeconfig": token_kc("static-s3cr3t-token")}),
            not_bootstrap,
        ),
        (
            json!({"bootstrap_kubeconfig": token_kc("ABCDEF.0123456789S3CR3T")}),
            not_bootstrap,
        ),
        (
            json!({"bootstrap_kubeconfig": token_kc("abcdef.0123456789s3cr3t0")}),
            not_bootstrap,
        ),
        (
            json!({"kubeconfig": token_kc("static-s3cr3t-token")}),
            exactly_one,
        ),
        (json!({"bootstrap_kubeconfig": null}), exactly_one),
        (
            json!({"agent_config": "{\"cluster\": {\"credential\": \"kubeconfig\"}}"}),
            disagrees,
        ),
        (
            json!({"agent_config": "{\"paths\": {\"bootstrap_kubeconfig\": \"/etc/kubernetes/kubeconfig\"}}"}),
            "agent_config.paths.bootstrap_kubeconfig must be /etc/kubernetes/bootstrap-kubeconfig",
        ),
        (
            json!({"bootstrap_kubeconfig": null, "kubeconfig": token_kc("static-s3cr3t-token"),
                   "agent_config": "{\"cluster\": {\"credential\": \"bootstrap-token\"}}"}),
            disagrees,
        ),
    ];
    for (change, message) in cases {
        let mut vars = good.clone();
        for (k, v) in change.as_object().unwrap() {
            vars[k] = v.clone();
        }
        let out = plan(&tf, &vars);
        let text = flat(&out);
        assert!(!out.status.success(), "{change} was accepted");
        assert!(
            text.contains(message),
            "{change}: no {message:?} in:\n{text}"
        );
        assert!(
            !text.contains("s3cr3t"),
            "a secret reached terraform's output:\n{text}"
        );
    }
    // The shared-kubeconfig path stays (operators choose).
    let mut classic = good_ignition_vars();
    classic["kubeconfig"] = token_kc("static-s3cr3t-token").into();
    let out = plan(&tf, &classic);
    assert!(out.status.success(), "{}", flat(&out));
}

#[test]
fn the_metal_example_starts_its_workers_with_the_bootstrap_token_and_its_masters_with_the_kubeconfig()
 {
    if skip_without(&["terraform"]) {
        return;
    }
    let inputs = root().join("ignition/render/inputs");
    let assets = tempfile::tempdir().unwrap();
    for f in ["bootkube.sh", "tectonic-wrapper.sh"] {
        fs::write(assets.path().join(f), "#!/bin/sh\n").unwrap();
    }
    let secret = "0123456789s3cr3t";
    let tf = Terraform::new(root().join("terraform/examples/metal"));
    tf.init();
    let vars = json!({
        "bootkube_master": {"name": "master-0", "host": "192.0.2.10"},
        "workers": ["worker-0"],
        "assets_dir": assets.path(),
        "ssh_authorized_keys": [fs::read_to_string(inputs.join("operator.pub")).unwrap()],
        "agent_url": "https://mirror.example.com/node-bootstrap",
        "agent_sha512": "ab".repeat(64),
        "kubelet_image_tag": "v1.20.2",
        "runtime_mappings_path": inputs.join("runtime-mappings.yaml"),
        "kubeconfig_path": inputs.join("kubeconfig"),
        "bootstrap_token": {"id": "abcdef", "secret": secret, "expiration": "2099-01-01T00:00:00Z"},
    });
    let f = tf.work().join("metal.tfvars.json");
    fs::write(&f, serde_json::to_string_pretty(&vars).unwrap()).unwrap();
    let planfile = tf.work().join("plan");
    let out = tf.run(&[
        "plan",
        "-input=false",
        "-no-color",
        "-lock=false",
        &format!("-var-file={}", f.display()),
        &format!("-out={}", planfile.display()),
    ]);
    let text = flat(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        !text.contains(secret),
        "the token secret reached the plan's output"
    );
    // The planned configs, as `terraform show -json` gives them.
    let shown: Value =
        serde_json::from_str(&tf.ok(&["show", "-json", &planfile.display().to_string()])).unwrap();
    let configs = &shown["planned_values"]["outputs"]["ignition_configs"]["value"];
    let config = |n: &str| -> Value { serde_json::from_str(configs[n].as_str().unwrap()).unwrap() };
    let paths = |cfg: &Value| -> Vec<String> {
        cfg["storage"]["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["path"].as_str().unwrap().to_string())
            .collect()
    };
    let worker = config("worker-0");
    assert!(paths(&worker).contains(&BOOTSTRAP_KUBECONFIG.to_string()));
    assert!(!paths(&worker).contains(&"/etc/kubernetes/kubeconfig".to_string()));
    let ca = fs::read_to_string(inputs.join("mirror-ca.pem")).unwrap();
    assert_eq!(
        credential_findings(&worker, secret, &[&ca]),
        Vec::<String>::new()
    );
    let boot: Value = serde_saphyr::from_str(
        &crate::support::ignition_file_text(&worker, BOOTSTRAP_KUBECONFIG).unwrap(),
    )
    .unwrap();
    let shared: Value =
        serde_saphyr::from_str(&fs::read_to_string(inputs.join("kubeconfig")).unwrap()).unwrap();
    assert_eq!(
        boot["clusters"][0]["cluster"],
        shared["clusters"][0]["cluster"]
    );
    assert_eq!(
        boot["users"][0]["user"]["token"],
        format!("abcdef.{secret}")
    );
    let master = config("master-0");
    assert!(paths(&master).contains(&"/etc/kubernetes/kubeconfig".to_string()));
    assert!(!paths(&master).contains(&BOOTSTRAP_KUBECONFIG.to_string()));
    assert!(!master.to_string().contains(secret));
}
