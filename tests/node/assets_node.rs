//! Pull mode end to end on a simulated node (a real systemd as PID 1):
//! init-assets.service runs the real agent, which pulls the bundle from a
//! real S3-compatible server (moto on the host's loopback; the node shares
//! the host's network namespace), and the assets appearing at /opt/tectonic
//! in one rename fire bootkube.path exactly once.
//!
//! `helper bootkube` is another part of the agent; here bootkube.service's
//! ExecStart is overridden by a drop-in with a script that records each run
//! and marks the unit done as the helper would.

use sha2::Digest;
use std::time::Duration;
use testkit::s3::{S3Server, skip_unless_s3};
use testkit::simnode::{SimNode, skip_unless_possible};

const T: Duration = Duration::from_secs(90);
const BUCKET: &str = "cluster-assets";
const SECRET: &str = "NODE-SECRET-55e1";

fn bundle() -> Vec<u8> {
    let kubeconfig = format!("users:\n- user: {{token: {SECRET}}}\n");
    testkit::files::targz(&[
        ("bootkube.sh", b"#!/bin/bash\necho bootkube\n", 0o755),
        ("manifests/kube-apiserver.yaml", b"kind: DaemonSet\n", 0o644),
        ("tls/apiserver.key", b"-----BEGIN KEY-----\n", 0o644),
        ("auth/kubeconfig", kubeconfig.as_bytes(), 0o644),
    ])
}

const UNITS: &[&str] = &[
    "init-assets.service",
    "bootkube.path",
    "bootkube.service",
    "kubelet.service",
];

#[test]
fn pull_mode_bundle_lands_at_opt_tectonic_and_fires_bootkube_once() {
    if skip_unless_possible() || skip_unless_s3() {
        return;
    }
    let s3 = S3Server::start().unwrap();
    s3.create_bucket(BUCKET).unwrap();
    let bundle = bundle();
    s3.put_object(BUCKET, "assets/bundle.tar.gz", &bundle, &[])
        .unwrap();

    let mut n = SimNode::new("assets-pull").unwrap();
    testkit::agentnode::install_units(&n, UNITS).unwrap();
    n.install_file(
        &testkit::cli::agent_binary(),
        testkit::agentnode::AGENT_PATH,
        0o755,
    )
    .unwrap();
    testkit::agentnode::install_kubelet_wrapper(&n, &[testkit::agentnode::STANDIN_CLUSTER_TAG])
        .unwrap();
    n.write(
        "/etc/kubernetes/kubelet.env",
        "KUBELET_IMAGE_URL=quay.io/coreos/hyperkube\nKUBELET_IMAGE_TAG=v1.9.6_coreos.0\n",
        0o644,
    )
    .unwrap();
    n.write(
        "/etc/node-bootstrap/config.json",
        format!(
            r#"{{"role":"bootkube-master",
                "assets":{{"mode":"pull","s3":{{"bucket":"{BUCKET}","key":"assets/bundle.tar.gz",
                  "region":"us-east-1","endpoint":"{}",
                  "checksum_sha256":"{}"}}}}}}"#,
            s3.endpoint(),
            hex::encode(sha2::Sha256::digest(&bundle))
        ),
        0o600,
    )
    .unwrap();
    // Credentials as the standard chain reads them (env here; instance role on AWS).
    n.drop_in(
        "init-assets.service",
        "test-credentials",
        "[Service]\nEnvironment=AWS_ACCESS_KEY_ID=AKIAEXAMPLEEXAMPLE00 AWS_SECRET_ACCESS_KEY=secret AWS_EC2_METADATA_DISABLED=true\n",
    )
    .unwrap();
    n.drop_in(
        "bootkube.service",
        "test-helper-stub",
        "[Service]\nExecStart=\nExecStart=/bin/sh -c 'ls /opt/tectonic >> /var/lib/test/bootkube-runs; echo --- >> /var/lib/test/bootkube-runs; touch /opt/tectonic/init_bootkube.done'\n",
    )
    .unwrap();
    n.write("/var/lib/test/.keep", "", 0o644).unwrap();
    n.enable(&["init-assets.service", "bootkube.path", "kubelet.service"])
        .unwrap();
    n.boot().unwrap();

    // The unit passes systemd-analyze verify (as tests/node_units.rs checks the others).
    let out = n
        .exec(&[
            "systemd-analyze",
            "verify",
            "/etc/systemd/system/init-assets.service",
        ])
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !stderr.contains("init-assets.service"),
        "systemd-analyze verify: {}\n{stderr}",
        out.status
    );

    n.wait_active_state("bootkube.service", "active", T)
        .unwrap();
    assert_eq!(
        n.prop("init-assets.service", "ActiveState").unwrap(),
        "active"
    );
    assert_eq!(n.prop("init-assets.service", "NRestarts").unwrap(), "0");
    // init-assets finished before bootkube started.
    let assets_done = n
        .timestamp_us("init-assets.service", "ActiveEnterTimestamp")
        .unwrap();
    let bootkube_start = n
        .timestamp_us("bootkube.service", "ExecMainStartTimestamp")
        .unwrap();
    assert!(
        assets_done > 0 && assets_done <= bootkube_start,
        "{}",
        n.diagnostics()
    );
    // bootkube saw the complete bundle.
    let runs = n.read("/var/lib/test/bootkube-runs").unwrap();
    assert_eq!(runs, "auth\nbootkube.sh\nmanifests\ntls\n---\n", "{runs}");
    // Secrets are 0600 on the node.
    let out = n
        .exec(&[
            "stat",
            "-c",
            "%a %n",
            "/opt/tectonic/auth/kubeconfig",
            "/opt/tectonic/tls/apiserver.key",
            "/opt/tectonic/bootkube.sh",
        ])
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "600 /opt/tectonic/auth/kubeconfig\n600 /opt/tectonic/tls/apiserver.key\n755 /opt/tectonic/bootkube.sh\n"
    );
    let log = n.journal("init-assets.service");
    assert!(log.contains("assets in place"), "{log}");
    assert!(!log.contains(SECRET), "secret in the journal:\n{log}");
    // Structured fields reach journald.
    let entries = n.journal_json(&["STEP=assets"]);
    assert!(
        entries.iter().any(|e| e["MESSAGE"] == "assets in place"),
        "no STEP=assets entry"
    );

    // Running the pull again changes nothing and bootkube does not fire again.
    n.systemctl(&["restart", "init-assets.service"]).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        n.journal("init-assets.service")
            .contains("assets already in place")
    );
    assert_eq!(n.read("/var/lib/test/bootkube-runs").unwrap(), runs);
    let opt = n
        .exec(&["ls", "-A", "/opt"])
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap();
    assert!(
        opt.lines().any(|l| l == "tectonic") && !opt.contains(".tectonic.pull-"),
        "no staging dir left: {opt}"
    );
    n.shutdown().unwrap();
}
