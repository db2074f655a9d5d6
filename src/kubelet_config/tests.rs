use super::table::{NEWEST, OLDEST, ROWS};
use super::*;
use serde_json::Value as Json;

fn inputs(runtime: RuntimeEndpoint) -> KubeletInputs {
    KubeletInputs {
        kubeconfig: "/var/lib/kubelet/kubeconfig".into(),
        bootstrap: Some(Bootstrap {
            bootstrap_kubeconfig: "/etc/kubernetes/bootstrap-kubeconfig".into(),
            cert_dir: "/var/lib/kubelet/pki".into(),
        }),
        client_ca_file: "/etc/kubernetes/ca.crt".into(),
        static_pod_path: "/etc/kubernetes/manifests".into(),
        cluster_dns: vec!["10.3.0.10".into(), "fd00::a".into()],
        cluster_domain: "cluster.local".into(),
        cgroup_driver: "systemd".into(),
        taints: vec![
            Taint::parse("node-role.kubernetes.io/master=:NoSchedule").unwrap(),
            Taint::parse("dedicated=gpu:NoExecute").unwrap(),
        ],
        server_tls_bootstrap: true,
        runtime,
        cgroup_v1_host: true,
    }
}

fn docker() -> RuntimeEndpoint {
    RuntimeEndpoint::Dockershim {
        sandbox_image: Some("k8s.gcr.io/pause:3.2".into()),
        cni_conf_dir: "/etc/kubernetes/cni/net.d".into(),
        cni_bin_dir: "/opt/cni/bin".into(),
    }
}

fn containerd() -> RuntimeEndpoint {
    RuntimeEndpoint::Cri {
        endpoint: "unix:///run/containerd/containerd.sock".into(),
        sandbox_image: "registry.k8s.io/pause:3.10".into(),
    }
}

fn every_version() -> impl Iterator<Item = Minor> {
    (OLDEST.1..=NEWEST.1).map(|m| Minor(1, m))
}

/// The file as the kubelet's YAML reader sees it.
fn parse(file: &str) -> Json {
    serde_saphyr::from_str(file).unwrap_or_else(|e| panic!("not YAML ({e}):\n{file}"))
}

fn field<'a>(doc: &'a Json, path: &str) -> Option<&'a Json> {
    path.split('.').try_fold(doc, |node, part| node.get(part))
}

fn flag_value<'a>(r: &'a Rendered, flag: &str) -> Option<&'a str> {
    let prefix = format!("{flag}=");
    let mut found = r
        .flags
        .iter()
        .filter_map(|f| f.strip_prefix(prefix.as_str()));
    let first = found.next();
    assert!(found.next().is_none(), "{flag} passed twice: {:?}", r.flags);
    first
}

/// Which rows a render with these inputs sets, for this runtime.
fn rows_set(runtime: &RuntimeEndpoint, v: Minor) -> Vec<Key> {
    ROWS.iter()
        .map(|r| r.key)
        .filter(|k| match k {
            Key::NetworkPlugin | Key::CniConfDir | Key::CniBinDir => {
                matches!(runtime, RuntimeEndpoint::Dockershim { .. })
            }
            // With containerd too, so the kubelet's image GC keeps it (I1).
            Key::PodInfraContainerImage => row_of(*k).flag_at(v),
            Key::ContainerRuntime => {
                matches!(runtime, RuntimeEndpoint::Cri { .. }) && row_of(*k).flag_at(v)
            }
            Key::ContainerRuntimeEndpoint => matches!(runtime, RuntimeEndpoint::Cri { .. }),
            Key::FailCgroupV1 => row_of(*k).field_at(v),
            Key::ServerTlsBootstrap => v >= Minor(1, 12),
            Key::NodeStatusUpdateFrequency | Key::NodeStatusReportFrequency => {
                v >= NODE_STATUS_SINCE
            }
            _ => true,
        })
        .collect()
}

#[test]
fn every_row_is_rendered_in_the_one_form_each_version_takes() {
    for v in every_version() {
        for runtime in [docker(), containerd()] {
            let docker_gone = !row_of(Key::NetworkPlugin).flag_at(v);
            let mut i = inputs(runtime.clone());
            i.server_tls_bootstrap = v >= Minor(1, 12);
            let rendered = render(v, &i);
            if docker_gone && matches!(runtime, RuntimeEndpoint::Dockershim { .. }) {
                let err = rendered.unwrap_err();
                assert_eq!(err.class(), crate::error::ErrorClass::Refused, "{v}");
                assert!(err.to_string().contains("no dockershim"), "{v}: {err}");
                continue;
            }
            let r = rendered.unwrap_or_else(|e| panic!("{v}: {e}"));
            let doc = r.file.as_deref().map(parse);
            assert_eq!(
                doc.is_some(),
                v >= Minor(1, 10),
                "{v}: a file only from 1.10"
            );
            assert_eq!(
                flag_value(&r, "--config"),
                doc.is_some().then_some(CONFIG_FILE),
                "{v}"
            );
            for key in rows_set(&runtime, v) {
                let row = row_of(key);
                let in_file = doc.as_ref().and_then(|d| field(d, row.field?)).is_some();
                let as_flag = row.flag.and_then(|f| flag_value(&r, f)).is_some();
                let want_file = row.field_at(v) && v >= Minor(1, 10);
                assert_eq!(in_file, want_file, "{v} {key:?}: in the file");
                assert_eq!(as_flag, !want_file, "{v} {key:?}: as a flag {:?}", r.flags);
            }
            for row in ROWS {
                if let Some(flag) = row.flag
                    && !row.flag_at(v)
                {
                    assert!(
                        flag_value(&r, flag).is_none(),
                        "{v}: {flag} was removed in {:?} and is passed",
                        row.flag_removed_in
                    );
                }
            }
        }
    }
}

#[test]
fn the_1_20_file_holds_what_the_kubelet_was_given_as_flags() {
    let r = render(Minor(1, 20), &inputs(containerd())).unwrap();
    let doc = parse(r.file.as_deref().unwrap());
    assert_eq!(doc["apiVersion"], "kubelet.config.k8s.io/v1beta1");
    assert_eq!(doc["kind"], "KubeletConfiguration");
    assert_eq!(doc["authentication"]["anonymous"]["enabled"], false);
    assert_eq!(doc["authentication"]["webhook"]["enabled"], true);
    assert_eq!(
        doc["authentication"]["x509"]["clientCAFile"],
        "/etc/kubernetes/ca.crt"
    );
    assert_eq!(doc["authorization"]["mode"], "Webhook");
    assert_eq!(doc["readOnlyPort"], 0);
    assert_eq!(doc["staticPodPath"], "/etc/kubernetes/manifests");
    assert_eq!(
        doc["clusterDNS"],
        serde_json::json!(["10.3.0.10", "fd00::a"])
    );
    assert_eq!(doc["clusterDomain"], "cluster.local");
    assert_eq!(doc["cgroupDriver"], "systemd");
    assert_eq!(doc["rotateCertificates"], true);
    assert_eq!(doc["serverTLSBootstrap"], true);
    assert_eq!(doc["nodeStatusUpdateFrequency"], "2s");
    assert_eq!(doc["nodeStatusReportFrequency"], "5m");
    assert!(
        doc.get("registerWithTaints").is_none(),
        "1.20 has no such field"
    );
    assert_eq!(
        r.flags,
        [
            "--config=/etc/kubernetes/kubelet-config.yaml",
            "--kubeconfig=/var/lib/kubelet/kubeconfig",
            "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubeconfig",
            "--cert-dir=/var/lib/kubelet/pki",
            "--register-with-taints=node-role.kubernetes.io/master=:NoSchedule,dedicated=gpu:NoExecute",
            "--container-runtime=remote",
            "--container-runtime-endpoint=unix:///run/containerd/containerd.sock",
            // So the kubelet's image GC keeps the sandbox image (I1).
            "--pod-infra-container-image=registry.k8s.io/pause:3.10",
        ]
    );
}

#[test]
fn taints_move_into_the_file_in_1_23_and_the_endpoint_in_1_27() {
    let r = render(Minor(1, 23), &inputs(containerd())).unwrap();
    let doc = parse(r.file.as_deref().unwrap());
    assert_eq!(
        doc["registerWithTaints"],
        serde_json::json!([
            {"key": "node-role.kubernetes.io/master", "value": "", "effect": "NoSchedule"},
            {"key": "dedicated", "value": "gpu", "effect": "NoExecute"},
        ])
    );
    assert!(flag_value(&r, "--register-with-taints").is_none());
    assert_eq!(flag_value(&r, "--container-runtime"), Some("remote"));

    let r = render(Minor(1, 27), &inputs(containerd())).unwrap();
    let doc = parse(r.file.as_deref().unwrap());
    assert_eq!(
        doc["containerRuntimeEndpoint"],
        "unix:///run/containerd/containerd.sock"
    );
    assert!(flag_value(&r, "--container-runtime").is_none());
    assert!(flag_value(&r, "--container-runtime-endpoint").is_none());
}

/// Seconds of a Go duration as the kubelet's file takes them (`1s`, `5m`,
/// `1m30s`).
fn go_duration_secs(d: &str) -> f64 {
    let (mut total, mut num) = (0.0, String::new());
    for c in d.chars() {
        match c {
            '0'..='9' | '.' => num.push(c),
            'h' | 'm' | 's' => {
                let n: f64 = num
                    .parse()
                    .unwrap_or_else(|_| panic!("{d:?} is not a duration"));
                total += n * match c {
                    'h' => 3600.0,
                    'm' => 60.0,
                    _ => 1.0,
                };
                num.clear();
            }
            _ => panic!("{d:?} is not a duration"),
        }
    }
    assert!(num.is_empty(), "{d:?} is not a duration");
    total
}

/// The status frequencies, version by version, against what each
/// kubelet's KubeletConfiguration has (upstream, not this module's table):
/// `nodeStatusUpdateFrequency` from 1.10 (the file's first release,
/// v1beta1/types.go), `nodeStatusReportFrequency` from 1.13 (#69753); the
/// node lease GA, the only heartbeat, from 1.17 (#84351).
#[test]
fn status_frequencies_only_where_the_kubelet_has_them_and_never_apart() {
    const UPSTREAM: [(&str, Minor); 2] = [
        ("nodeStatusUpdateFrequency", Minor(1, 10)),
        ("nodeStatusReportFrequency", Minor(1, 13)),
    ];
    for v in every_version() {
        for runtime in [docker(), containerd()] {
            let mut i = inputs(runtime);
            i.server_tls_bootstrap = v >= Minor(1, 12);
            let Ok(r) = render(v, &i) else { continue };
            assert_eq!(
                flag_value(&r, "--node-status-update-frequency"),
                None,
                "{v}"
            );
            let doc = r.file.as_deref().map(parse);
            let value = |field: &str| {
                doc.as_ref().and_then(|d| d.get(field)).map(|x| {
                    x.as_str()
                        .unwrap_or_else(|| panic!("{v} {field}: {x}"))
                        .to_string()
                })
            };
            for (field, since) in UPSTREAM {
                assert!(
                    value(field).is_none() || v >= since,
                    "{v}: {field} rendered, which a kubelet has only from {since}"
                );
            }
            let update = value("nodeStatusUpdateFrequency");
            let report = value("nodeStatusReportFrequency");
            assert_eq!(update.is_some(), v >= Minor(1, 17), "{v}: {update:?}");
            // Set alone, the update frequency becomes the report frequency
            // too (v1beta1/defaults.go): the kubelet would write its Node
            // every time.
            assert_eq!(report.is_some(), update.is_some(), "{v}: {report:?}");
            if let (Some(u), Some(p)) = (update, report) {
                assert!(
                    go_duration_secs(&u) < 10.0,
                    "{v}: {u} is not below the default 10s"
                );
                // It is also the timeout of the lease renewals and status
                // patches (cmd/kubelet/app/server.go, heartbeatClientConfig).
                assert!(
                    go_duration_secs(&u) >= 2.0,
                    "{v}: {u} would time out the kubelet's heartbeats on a slow API server"
                );
                assert!(
                    go_duration_secs(&p) >= 300.0,
                    "{v}: {p} writes an unchanged status more often than the default 5m"
                );
            }
        }
    }
}

#[test]
fn a_cgroup_v1_host_is_allowed_where_kubelets_would_refuse_it() {
    let r = render(Minor(1, 35), &inputs(containerd())).unwrap();
    assert_eq!(parse(r.file.as_deref().unwrap())["failCgroupV1"], false);
    let mut on_v2 = inputs(containerd());
    on_v2.cgroup_v1_host = false;
    let r = render(Minor(1, 35), &on_v2).unwrap();
    assert!(
        parse(r.file.as_deref().unwrap())
            .get("failCgroupV1")
            .is_none()
    );
}

#[test]
fn serving_certificates_are_not_offered_before_1_12() {
    let err = render(Minor(1, 11), &inputs(docker())).unwrap_err();
    assert_eq!(err.class(), crate::error::ErrorClass::Refused);
    assert!(err.to_string().contains("need Kubernetes 1.12"), "{err}");
}

#[test]
fn tectonic_kubelets_get_flags_only() {
    let mut i = inputs(docker());
    i.bootstrap = None;
    i.server_tls_bootstrap = false;
    i.cgroup_driver = "cgroupfs".into();
    let r = render(Minor(1, 9), &i).unwrap();
    assert_eq!(r.file, None);
    assert_eq!(
        r.flags,
        [
            "--kubeconfig=/var/lib/kubelet/kubeconfig",
            "--client-ca-file=/etc/kubernetes/ca.crt",
            "--anonymous-auth=false",
            "--authentication-token-webhook=true",
            "--authorization-mode=Webhook",
            "--read-only-port=0",
            "--pod-manifest-path=/etc/kubernetes/manifests",
            "--cluster-dns=10.3.0.10,fd00::a",
            "--cluster-domain=cluster.local",
            "--cgroup-driver=cgroupfs",
            "--register-with-taints=node-role.kubernetes.io/master=:NoSchedule,dedicated=gpu:NoExecute",
            "--network-plugin=cni",
            "--cni-conf-dir=/etc/kubernetes/cni/net.d",
            "--cni-bin-dir=/opt/cni/bin",
            "--pod-infra-container-image=k8s.gcr.io/pause:3.2",
        ]
    );
}

#[test]
fn versions_outside_the_table_are_refused_unless_asked() {
    let err = check_known(Minor(1, 37), false).unwrap_err();
    assert_eq!(err.class(), crate::error::ErrorClass::Refused);
    assert!(
        err.to_string()
            .contains("1.37 is newer than the newest this agent knows (1.36)"),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("set kubelet_config.allow_newer_kubernetes"),
        "{err}"
    );
    assert_eq!(check_known(Minor(1, 37), true).unwrap(), NEWEST);
    assert_eq!(check_known(Minor(1, 20), false).unwrap(), Minor(1, 20));
    let err = check_known(Minor(1, 7), true).unwrap_err();
    assert!(err.to_string().contains("older than the oldest"), "{err}");
}

#[test]
fn strings_that_need_quoting_stay_one_yaml_value() {
    let mut i = inputs(containerd());
    i.cluster_domain = "a: b # c".into();
    i.static_pod_path = "/etc/k8s \"manifests\"".into();
    let r = render(Minor(1, 30), &i).unwrap();
    let doc = parse(r.file.as_deref().unwrap());
    assert_eq!(doc["clusterDomain"], "a: b # c");
    assert_eq!(doc["staticPodPath"], "/etc/k8s \"manifests\"");
}

#[test]
fn taints_parse_as_the_flag_writes_them() {
    let t = Taint::parse("node-role.kubernetes.io/master=:NoSchedule").unwrap();
    assert_eq!(
        (t.key.as_str(), t.value.as_deref()),
        ("node-role.kubernetes.io/master", Some(""))
    );
    let t = Taint::parse("dedicated:NoExecute").unwrap();
    assert_eq!(t.value, None);
    assert_eq!(t.flag_form(), "dedicated:NoExecute");
    for bad in [
        "dedicated",
        "a=b:Sometimes",
        ":NoSchedule",
        "a b=c:NoSchedule",
        "a=b c:NoSchedule",
    ] {
        assert!(Taint::parse(bad).is_err(), "{bad}");
    }
}
