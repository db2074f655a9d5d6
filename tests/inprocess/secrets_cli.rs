//! No secret in any output of the CLI: each input that can carry a secret
//! is given wrong (a secret key where a public keyring goes, a private key,
//! a broken signing key, a kubeconfig whose token or key sits beside a
//! mistake), and the command's stdout and stderr are searched for the
//! secret's bytes, whole and in pieces (a 16-byte window of the base64 the
//! secret is written in, and the decimal byte dump rPGP's errors used to
//! print). Each command still says what is wrong and exits with the class
//! the node would.

use std::fs;
use std::path::Path;
use testkit::cli::{agent_command, code, stderr, stdout};
use testkit::torcx_fixtures::SigningKey;

/// Fails naming the piece when any 16-character window of `secret` (or
/// its bytes as a decimal list) appears in `out`.
fn assert_not_leaked(what: &str, out: &std::process::Output, secret: &str) {
    let text = format!("{}\n{}", stdout(out), stderr(out));
    let chars: Vec<char> = secret
        .lines()
        .filter(|l| !l.starts_with("-----") && !l.contains(':'))
        .flat_map(str::chars)
        .filter(|c| !c.is_whitespace())
        .collect();
    assert!(chars.len() >= 16, "{what}: a secret too short to search");
    for w in chars.windows(16) {
        let piece: String = w.iter().collect();
        assert!(
            !text.contains(&piece),
            "{what}: the secret's {piece:?} is in the output:\n{text}"
        );
    }
    let dump: Vec<String> = secret.bytes().take(12).map(|b| b.to_string()).collect();
    assert!(
        !text.contains(&dump.join(", ")),
        "{what}: a byte dump of the secret is in the output:\n{text}"
    );
}

fn agent(args: &[&str], dir: &Path) -> std::process::Output {
    agent_command()
        .args(["--log-format", "text"])
        .args(args)
        .current_dir(dir)
        .env("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/bus")
        .output()
        .unwrap()
}

/// A PEM private key, as `ca.key` of a cluster's assets.
fn pem_private_key() -> String {
    testkit::apiserver::Pki::generate().client.key_pem
}

#[test]
fn a_secret_key_given_as_a_keyring_is_named_never_printed() {
    let d = tempfile::tempdir().unwrap();
    let key = SigningKey::generate("release@example.invalid");
    let secret = key.secret_armored();
    fs::write(d.path().join("secret.asc"), &secret).unwrap();
    let pem = pem_private_key();
    fs::write(d.path().join("ca.key"), &pem).unwrap();
    // A config whose mirror is signed: check-config needs its keyring.
    fs::write(
        d.path().join("config.json"),
        r#"{"sources": {"url": "https://mirror.example.invalid/nb"}}"#,
    )
    .unwrap();
    for (file, text, says) in [
        ("secret.asc", &secret, "it holds a secret (private) key"),
        ("ca.key", &pem, "it holds a secret (private) key"),
    ] {
        let out = agent(
            &["--config", "config.json", "check-config", "--keyring", file],
            d.path(),
        );
        assert_eq!(code(&out), 5, "{}", stderr(&out));
        assert!(stderr(&out).contains(says), "{}", stderr(&out));
        assert_not_leaked(&format!("check-config --keyring {file}"), &out, text);
        let out = agent(
            &[
                "metadata",
                "validate",
                "--keyring",
                file,
                d.path().to_str().unwrap(),
            ],
            d.path(),
        );
        assert_ne!(code(&out), 0, "{}", stderr(&out));
        assert_not_leaked(&format!("metadata validate --keyring {file}"), &out, text);
    }
}

#[test]
fn a_broken_signing_key_is_named_never_printed() {
    let d = tempfile::tempdir().unwrap();
    let secret = SigningKey::generate("release@example.invalid").secret_armored();
    // Cut in the middle: no longer a key, every line still the secret's.
    let lines: Vec<&str> = secret.lines().collect();
    let broken = lines[..lines.len() / 2].join("\n");
    fs::write(d.path().join("sign.asc"), &broken).unwrap();
    fs::create_dir(d.path().join("mirror")).unwrap();
    let out = agent(
        &["metadata", "generate", "mirror", "--sign-key", "sign.asc"],
        d.path(),
    );
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("is not an armored OpenPGP secret key"),
        "{}",
        stderr(&out)
    );
    assert_not_leaked("metadata generate --sign-key", &out, &broken);
}

#[test]
fn a_rendered_config_whose_keyring_is_a_secret_key_is_refused_without_printing_it() {
    let d = tempfile::tempdir().unwrap();
    let secret = SigningKey::generate("release@example.invalid").secret_armored();
    let data = |text: &str| {
        use base64::Engine as _;
        format!(
            "data:;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(text)
        )
    };
    let file = |path: &str, text: &str| serde_json::json!({"path": path, "contents": {"source": data(text)}});
    let ign = serde_json::json!({
        "ignition": {"version": "3.3.0"},
        "storage": {"files": [
            file("/etc/node-bootstrap/config.json", r#"{"role": "worker", "sources": {"url": "https://m.example.invalid"}}"#),
            file("/etc/kubernetes/installer/runtime-mappings.yaml",
                 "kind: VersionManifestV1\nversions:\n  k8s:\n    \"1.31\":\n      containerd: [\"2.1\"]\n"),
            file("/etc/kubernetes/installer/keyring.asc", &secret),
            file("/etc/kubernetes/installer/kubelet.env", "KUBELET_IMAGE_URL=\"u\"\nKUBELET_IMAGE_TAG=\"v1.31.4\"\n"),
        ]},
    });
    fs::write(d.path().join("node.ign"), ign.to_string()).unwrap();
    let out = agent(&["check-config", "--ignition", "node.ign"], d.path());
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("it holds a secret (private) key"),
        "{}",
        stderr(&out)
    );
    assert_not_leaked("check-config --ignition", &out, &secret);
}

#[test]
fn a_kubeconfigs_token_and_key_never_reach_the_output_of_a_refused_kubeconfig() {
    let d = tempfile::tempdir().unwrap();
    let pki = testkit::apiserver::Pki::generate();
    let token = "tok3n5ecr3tVALUEthatmustnotleak0123456789";
    let key = pki.client.key_pem.clone();
    let b64 = |b: &[u8]| {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(b)
    };
    // A mistake beside the credentials: a user with both a token and a
    // client key (and no certificate for the key).
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n    certificate-authority-data: {}\n\
         users:\n- name: u\n  user:\n    token: {token}\n    client-key-data: {}\n\
         contexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n",
        b64(pki.ca_pem.as_bytes()),
        b64(key.as_bytes())
    );
    fs::write(d.path().join("kubeconfig"), &kubeconfig).unwrap();
    fs::write(
        d.path().join("config.json"),
        serde_json::json!({"paths": {"kubeconfig": d.path().join("kubeconfig")}}).to_string(),
    )
    .unwrap();
    let out = agent(&["--config", "config.json", "preflight"], d.path());
    assert_ne!(code(&out), 0, "{}", stdout(&out));
    assert!(
        stdout(&out).contains("FAIL  kubeconfig"),
        "{}",
        stdout(&out)
    );
    for secret in [token, &key, &b64(key.as_bytes())] {
        let text = format!("{}{}", stdout(&out), stderr(&out));
        assert!(!text.contains(token), "the token leaked:\n{text}");
        assert_not_leaked("preflight kubeconfig", &out, secret);
    }
}
