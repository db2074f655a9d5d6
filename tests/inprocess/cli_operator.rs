//! The command line as an operator meets it off a node and in scripts:
//! errors that name the field to set, JSON answers to `--json` whether the
//! command succeeded or not, `preflight` asking the API server itself, no
//! colour codes in a pipe, relative directories where a directory is asked
//! for, `check-config` reading what the node reads beside its config, and
//! one behaviour for a config file that is not there.

use serde_json::{Value, json};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;
use testkit::apiserver::{ApiServerOptions, FakeApiServer, KubeAuth, Pki};
use testkit::cli::{agent_command, code, stderr, stdout};

fn write_config(dir: &Path, config: &Value) -> PathBuf {
    let p = dir.join("config.json");
    fs::write(&p, config.to_string()).unwrap();
    p
}

fn agent(config: &Path, args: &[&str]) -> Output {
    agent_command()
        .arg("--config")
        .arg(config)
        .args(["--log-format", "text"])
        .args(args)
        .output()
        .unwrap()
}

/// Mappings that let Kubernetes 1.31 and 1.37 run on any containerd 2.1.
const MAPPINGS: &str = "kind: VersionManifestV1\nversions:\n  k8s:\n    \"1.31\":\n      containerd: [\"2.1\"]\n    \"1.37\":\n      containerd: [\"2.1\"]\n";

/// A Kubernetes newer than the agent knows: refused naming the field that
/// allows it, which exists (check-config takes it), and with it set the
/// refusal is gone. Under `--json` the refusal is a JSON document on stdout.
#[test]
fn the_newer_kubernetes_refusal_names_a_field_that_exists_and_answers_json() {
    let dir = tempfile::tempdir().unwrap();
    let mappings = dir.path().join("runtime-mappings.yaml");
    fs::write(&mappings, MAPPINGS).unwrap();
    let m = mappings.to_str().unwrap();
    let config = write_config(dir.path(), &json!({}));
    let args = [
        "containerd",
        "choose",
        "--cluster-version",
        "v1.37.0",
        "--mappings",
        m,
    ];
    let out = agent(&config, &[&args[..], &["--json"]].concat());
    assert_eq!(code(&out), 7, "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON on stdout ({e}): {:?}", stdout(&out)));
    assert_eq!(doc["error"]["class"], "refused");
    assert_eq!(doc["error"]["exit_code"], 7);
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("set kubelet_config.allow_newer_kubernetes"),
        "{message}"
    );
    // Doing what it says.
    let config = write_config(
        dir.path(),
        &json!({"kubelet_config": {"allow_newer_kubernetes": true}}),
    );
    let check = agent(&config, &["check-config"]);
    assert_eq!(code(&check), 0, "{}", stderr(&check));
    let out = agent(&config, &args);
    assert!(
        !stderr(&out).contains("is newer than the newest this agent knows"),
        "{}",
        stderr(&out)
    );
    // Without --json: nothing on stdout, the error on stderr.
    let config = write_config(dir.path(), &json!({}));
    let out = agent(&config, &args);
    assert_eq!(code(&out), 7);
    assert_eq!(stdout(&out), "");
    assert!(
        stderr(&out).contains("node-bootstrap: error: Kubernetes 1.37"),
        "{}",
        stderr(&out)
    );
}

/// Text logs into a pipe (this test's) carry no ANSI colour codes.
#[test]
fn log_lines_into_a_pipe_have_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &json!({"paths": {"state_dir": dir.path().join("state"), "run_dir": dir.path().join("run"),
                          "kubelet_env": dir.path().join("kubelet.env"), "seed_dir": dir.path().join("seed")}}),
    );
    let out = agent_command()
        .arg("--config")
        .arg(&config)
        .args(["--log-format", "text", "run"])
        .env_remove("NO_COLOR")
        .env("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/bus")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(err.contains("node-bootstrap run started"), "{err}");
    assert!(!err.contains('\x1b'), "colour codes in a pipe: {err:?}");
}

/// A mirror named by a relative directory is read from here; one with only
/// unsigned metadata is refused naming the flag that accepts it.
#[test]
fn metadata_validate_takes_a_relative_directory_and_names_its_flag() {
    let dir = tempfile::tempdir().unwrap();
    let mirror = dir.path().join("mirror");
    fs::create_dir_all(mirror.join("docker")).unwrap();
    fs::write(
        mirror.join("docker/docker-torcx_17.03.2_1632.3.0_amd64-usr.torcx.tgz"),
        b"a package",
    )
    .unwrap();
    let config = write_config(dir.path(), &json!({}));
    let run = |args: &[&str]| {
        agent_command()
            .arg("--config")
            .arg(&config)
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let out = run(&["metadata", "generate", "mirror"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = run(&["metadata", "validate", "mirror"]);
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("has only unsigned metadata")
            && stderr(&out).contains("pass --allow-unsigned to accept it"),
        "{}",
        stderr(&out)
    );
    let out = run(&["metadata", "validate", "--allow-unsigned", "mirror"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!(
            "{}: unsigned metadata, 1 products, 1 items, 0 problems",
            mirror.display()
        )),
        "{}",
        stdout(&out)
    );
    // `find --dev-dir` (development mode: unsigned allowed) the same way.
    let out = run(&[
        "metadata",
        "find",
        "--product-id",
        "com.node-bootstrap:docker-torcx:1632.3.0:amd64-usr",
        "--dev-dir",
        "mirror",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("found com.node-bootstrap:docker-torcx:1632.3.0:amd64-usr 17.03.2"),
        "{}",
        stdout(&out)
    );
}

/// `preflight` asks the API server the kubeconfig names, over TLS trusted
/// by its CA: one that answers passes, one whose name resolves nowhere
/// fails retryably, one whose certificate another CA signed fails
/// verification; `--json` gives each check.
#[test]
fn preflight_asks_the_api_server_and_answers_json() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let pki = Pki::generate();
    let server = rt
        .block_on(FakeApiServer::start(
            &pki,
            ApiServerOptions {
                git_version: "v1.31.4".into(),
                ..Default::default()
            },
        ))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let seed = dir.path().join("installer");
    fs::create_dir_all(&seed).unwrap();
    fs::write(
        seed.join("kubelet.env"),
        "KUBELET_IMAGE_URL=\"quay.io/coreos/hyperkube\"\nKUBELET_IMAGE_TAG=\"v1.31.4\"\n",
    )
    .unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let config = write_config(
        dir.path(),
        &json!({"paths": {"kubeconfig": kubeconfig, "seed_dir": seed, "state_dir": dir.path().join("state")},
                "cluster": {"api_timeout_secs": 5}}),
    );
    let api_check = |server_url: &str, ca: &Pki| -> Value {
        ca.write_kubeconfig(&kubeconfig, server_url, &KubeAuth::ClientCert)
            .unwrap();
        let out = agent_command()
            .arg("--config")
            .arg(&config)
            .args(["preflight", "--json"])
            .env("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/bus")
            .output()
            .unwrap();
        let doc: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("no JSON ({e}): {}{}", stdout(&out), stderr(&out)));
        // The system bus is not there (a failure) and the exit code is the
        // first failure's; the document holds every check.
        assert_eq!(doc["passed"], false);
        assert_eq!(
            doc["error"]["exit_code"].as_u64(),
            Some(u64::from(code(&out) as u8))
        );
        doc["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "api server")
            .cloned()
            .unwrap_or_else(|| panic!("no api server check: {doc}"))
    };
    let ok = api_check(&server.url(), &pki);
    assert_eq!(ok["ok"], true, "{ok}");
    assert!(
        ok["detail"]
            .as_str()
            .unwrap()
            .contains("answers (Kubernetes v1.31.4) over TLS"),
        "{ok}"
    );
    let port = server.url().rsplit(':').next().unwrap().to_string();
    let gone = api_check(
        &format!("https://api.does-not-resolve.invalid:{port}"),
        &pki,
    );
    assert_eq!(gone["ok"], false);
    assert_eq!(gone["exit_code"], 3, "{gone}");
    assert!(
        gone["error"]
            .as_str()
            .unwrap()
            .contains("api.does-not-resolve.invalid"),
        "{gone}"
    );
    let other_ca = Pki::generate();
    let untrusted = api_check(&server.url(), &other_ca);
    assert_eq!(untrusted["ok"], false);
    assert_eq!(untrusted["exit_code"], 6, "{untrusted}");
}

/// `check-config` reads the runtime mappings and refuses what the node
/// would (a containerd that cannot serve the kubelet), with the class the
/// node fails with; it takes them from the command line off the node.
#[test]
fn check_config_refuses_the_mappings_and_the_missing_keyring_the_node_would() {
    let dir = tempfile::tempdir().unwrap();
    let seed = dir.path().join("installer");
    fs::create_dir_all(&seed).unwrap();
    let config = write_config(dir.path(), &json!({"paths": {"seed_dir": seed}}));
    let out = agent(&config, &["check-config"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("runtime mappings: not checked (no file at")
            && stderr(&out).contains("pass --mappings FILE"),
        "{}",
        stderr(&out)
    );
    let bad = dir.path().join("bad.yaml");
    fs::write(
        &bad,
        "kind: VersionManifestV1\nversions:\n  k8s:\n    \"1.31\":\n      containerd: [\"1.5\"]\n",
    )
    .unwrap();
    let out = agent(
        &config,
        &["check-config", "--mappings", bad.to_str().unwrap()],
    );
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("versions.k8s.\"1.31\".containerd has \"1.5\""),
        "{}",
        stderr(&out)
    );
    assert_eq!(stdout(&out), "", "settings printed for a refused config");
    // The node's own file, where the config says it is.
    fs::copy(&bad, seed.join("runtime-mappings.yaml")).unwrap();
    let out = agent(&config, &["check-config"]);
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    fs::write(seed.join("runtime-mappings.yaml"), MAPPINGS).unwrap();
    let out = agent(&config, &["check-config"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("runtime mappings ok:")
            && stderr(&out).contains("(Kubernetes 1.31, 1.37)"),
        "{}",
        stderr(&out)
    );

    // A kubelet sysext from a mirror that serves only signed metadata, and
    // no keyring where the node looks: refused, naming the fields, the
    // path and the ways out; an armored key with --keyring: accepted.
    let config = write_config(
        dir.path(),
        &json!({"paths": {"seed_dir": seed}, "kubelet": {"backend": "sysext"},
                "sources": {"url": "https://mirror.example.com/nb"}}),
    );
    let out = agent(&config, &["check-config"]);
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    for part in [
        "kubelet.backend is \"sysext\", sources.url is set",
        &format!("no file at {}", seed.join("keyring.asc").display()),
        "off the node, name it with --keyring FILE",
        "add \"url\" to sources.allow_unsigned",
    ] {
        assert!(
            stderr(&out).contains(part),
            "{part:?} not in {}",
            stderr(&out)
        );
    }
    let keyring = testkit::project_root().join("ignition/render/inputs/keyring.asc");
    let out = agent(
        &config,
        &["check-config", "--keyring", keyring.to_str().unwrap()],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stderr(&out).contains("keyring ok:"), "{}", stderr(&out));
    let junk = dir.path().join("junk.asc");
    fs::write(&junk, "not a key\n").unwrap();
    let out = agent(
        &config,
        &["check-config", "--keyring", junk.to_str().unwrap()],
    );
    assert_eq!(code(&out), 5, "{}", stderr(&out));
}

/// Without a config file: every command runs with the defaults and says so
/// when none is at the default path, and stops (exit 4) when the file it
/// was told to read is not there.
#[test]
fn a_missing_config_file_is_the_defaults_at_the_default_path_and_an_error_when_named() {
    let default = Path::new(node_bootstrap::config::DEFAULT_CONFIG_PATH);
    if default.exists() {
        testkit::skip_because(format!(
            "this machine has {} (it plays an operator's machine, which has none)",
            default.display()
        ));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mappings = dir.path().join("m.yaml");
    fs::write(&mappings, MAPPINGS).unwrap();
    let m = mappings.to_str().unwrap();
    let commands: Vec<Vec<&str>> = vec![
        vec!["check-config"],
        vec![
            "containerd",
            "choose",
            "--cluster-version",
            "v1.31.0",
            "--mappings",
            m,
        ],
        vec![
            "metadata",
            "validate",
            "--allow-unsigned",
            "/nonexistent/mirror",
        ],
        vec!["assets", "check"],
    ];
    for args in &commands {
        let unnamed = agent_command()
            .args(["--log-format", "text"])
            .args(args)
            .env_remove("NODE_BOOTSTRAP_CONFIG")
            .output()
            .unwrap();
        assert!(
            stderr(&unnamed).contains(&format!(
                "no config file at {}: using the defaults",
                default.display()
            )),
            "{args:?}: {}",
            stderr(&unnamed)
        );
        assert_ne!(code(&unnamed), 4, "{args:?}: {}", stderr(&unnamed));
        let named = agent(&dir.path().join("typo.json"), args);
        assert_eq!(code(&named), 4, "{args:?}: {}", stderr(&named));
        assert!(
            stderr(&named).contains("failed to read config file"),
            "{args:?}: {}",
            stderr(&named)
        );
    }
}
