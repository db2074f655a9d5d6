//! The kubelet settings the agent renders, and for each one the Kubernetes
//! versions that take it as a command-line flag and as a field of the
//! `KubeletConfiguration` file (`kubelet.config.k8s.io/v1beta1`), each row
//! with the place in Kubernetes' changelog or source that says so.
//! docs/operators.md ("The kubelet's configuration by version") shows this
//! table as [`markdown`] renders it; a test keeps the two the same.

use std::fmt;

/// A Kubernetes `major.minor` (the major is 1 for every release there is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Minor(pub u64, pub u64);

impl fmt::Display for Minor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.0, self.1)
    }
}

/// The oldest Kubernetes the renderer knows: Tectonic's first.
pub const OLDEST: Minor = Minor(1, 8);
/// The newest Kubernetes whose changelog the table was checked against.
/// A newer cluster is refused unless configuration says to proceed
/// (its kubelet may have removed a flag this table still passes).
pub const NEWEST: Minor = Minor(1, 36);

/// The first version with the configuration file (`--config`,
/// `kubelet.config.k8s.io/v1beta1`); 1.8 and 1.9 take flags only.
pub const CONFIG_FILE_SINCE: Minor = Minor(1, 10);
/// Where the file format and the `--config` flag come from.
pub const CONFIG_FILE_SOURCE: &str = "CHANGELOG-1.10.md: kubeletconfig graduated to beta as kubelet.config.k8s.io/v1beta1 (#53833); --init-config-dir removed, use --config (#57624)";

/// A setting the agent renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Key {
    ClientCaFile,
    AnonymousAuth,
    WebhookAuthentication,
    AuthorizationMode,
    ReadOnlyPort,
    StaticPodPath,
    ClusterDns,
    ClusterDomain,
    CgroupDriver,
    RegisterWithTaints,
    RotateCertificates,
    ServerTlsBootstrap,
    ContainerRuntime,
    ContainerRuntimeEndpoint,
    NetworkPlugin,
    CniConfDir,
    CniBinDir,
    PodInfraContainerImage,
    FailCgroupV1,
    NodeStatusUpdateFrequency,
    NodeStatusReportFrequency,
}

/// One row: how a setting is passed, by version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub key: Key,
    /// The command-line flag the agent may pass, or `None` where it never
    /// passes one (`failCgroupV1`: a field from 1.31, when every kubelet the
    /// agent configures reads a file; whether a `--fail-cgroupv1` flag
    /// exists is not relied on; `nodeStatusReportFrequency` has none).
    pub flag: Option<&'static str>,
    /// The last version that accepts the flag, when a later one removed it.
    pub flag_removed_in: Option<Minor>,
    /// The field's path in the file (`authentication.x509.clientCAFile`).
    pub field: Option<&'static str>,
    /// The first version whose file has the field.
    pub field_since: Option<Minor>,
    /// Where in Kubernetes' changelog or source the versions come from.
    pub source: &'static str,
}

impl Row {
    /// Whether a kubelet of `v` takes the setting in its file.
    pub fn field_at(&self, v: Minor) -> bool {
        self.field_since.is_some_and(|s| v >= s)
    }

    /// Whether a kubelet of `v` accepts the flag (an unknown flag makes the
    /// kubelet exit, and systemd restart it for ever).
    pub fn flag_at(&self, v: Minor) -> bool {
        self.flag.is_some() && self.flag_removed_in.is_none_or(|r| v < r)
    }
}

const fn row(
    key: Key,
    flag: Option<&'static str>,
    flag_removed_in: Option<Minor>,
    field: Option<&'static str>,
    field_since: Option<Minor>,
    source: &'static str,
) -> Row {
    Row {
        key,
        flag,
        flag_removed_in,
        field,
        field_since,
        source,
    }
}

const V1_10: Option<Minor> = Some(Minor(1, 10));

/// Every setting the agent renders. A field is used from its first version
/// on (the file wins over nothing: a kubelet silently drops a field it does
/// not know, so a field passed too early loses the setting); before it, the
/// flag. Flags that a version removed are never passed to it.
pub const ROWS: &[Row] = &[
    row(
        Key::ClientCaFile,
        Some("--client-ca-file"),
        None,
        Some("authentication.x509.clientCAFile"),
        V1_10,
        "CHANGELOG-1.10.md: flags that can be set in the --config file are deprecated in favour of the file (#60148)",
    ),
    row(
        Key::AnonymousAuth,
        Some("--anonymous-auth"),
        None,
        Some("authentication.anonymous.enabled"),
        V1_10,
        "CHANGELOG-1.10.md (#60148); the file's and the flags' defaults differ (#59666), so the agent always sets it",
    ),
    row(
        Key::WebhookAuthentication,
        Some("--authentication-token-webhook"),
        None,
        Some("authentication.webhook.enabled"),
        V1_10,
        "CHANGELOG-1.10.md (#60148, #59666)",
    ),
    row(
        Key::AuthorizationMode,
        Some("--authorization-mode"),
        None,
        Some("authorization.mode"),
        V1_10,
        "CHANGELOG-1.10.md (#60148); flag default AlwaysAllow, file default Webhook (#59666)",
    ),
    row(
        Key::ReadOnlyPort,
        Some("--read-only-port"),
        None,
        Some("readOnlyPort"),
        V1_10,
        "CHANGELOG-1.10.md (#60148); flag default 10255, file default 0 (#59666)",
    ),
    row(
        Key::StaticPodPath,
        Some("--pod-manifest-path"),
        None,
        Some("staticPodPath"),
        V1_10,
        "CHANGELOG-1.10.md: PodManifestPath is renamed to StaticPodPath (#60314)",
    ),
    row(
        Key::ClusterDns,
        Some("--cluster-dns"),
        None,
        Some("clusterDNS"),
        V1_10,
        "CHANGELOG-1.10.md (#60148); pkg/kubelet/apis/kubeletconfig/v1beta1/types.go in 1.10/1.11 (staging/src/k8s.io/kubelet/config/v1beta1/types.go from 1.13)",
    ),
    row(
        Key::ClusterDomain,
        Some("--cluster-domain"),
        None,
        Some("clusterDomain"),
        V1_10,
        "CHANGELOG-1.10.md (#60148); pkg/kubelet/apis/kubeletconfig/v1beta1/types.go in 1.10/1.11 (staging/src/k8s.io/kubelet/config/v1beta1/types.go from 1.13)",
    ),
    row(
        Key::CgroupDriver,
        Some("--cgroup-driver"),
        None,
        Some("cgroupDriver"),
        V1_10,
        "CHANGELOG-1.10.md (#60148); default cgroupfs in every release (v1beta1/types.go)",
    ),
    row(
        Key::RegisterWithTaints,
        Some("--register-with-taints"),
        None,
        Some("registerWithTaints"),
        Some(Minor(1, 23)),
        "CHANGELOG-1.23.md: --register-with-taints is now available via the config file field registerWithTaints (#105437)",
    ),
    row(
        Key::RotateCertificates,
        Some("--rotate-certificates"),
        None,
        Some("rotateCertificates"),
        Some(Minor(1, 11)),
        "CHANGELOG-1.11.md: --rotate-certificates deprecated, set .RotateCertificates in the config file (#63912)",
    ),
    row(
        Key::ServerTlsBootstrap,
        Some("--rotate-server-certificates"),
        None,
        Some("serverTLSBootstrap"),
        Some(Minor(1, 11)),
        "PR #62352: serverTLSBootstrap added in the 1.11 cycle (alpha); CHANGELOG-1.12.md: kubelet serving certificate bootstrap and rotation beta (#66726), the agent's floor (SERVER_TLS_BOOTSTRAP_SINCE)",
    ),
    row(
        Key::ContainerRuntime,
        Some("--container-runtime"),
        Some(Minor(1, 27)),
        None,
        None,
        "CHANGELOG-1.24.md: --container-runtime deprecated (#107094); CHANGELOG-1.27.md: removed (#114017)",
    ),
    row(
        Key::ContainerRuntimeEndpoint,
        Some("--container-runtime-endpoint"),
        None,
        Some("containerRuntimeEndpoint"),
        Some(Minor(1, 27)),
        "CHANGELOG-1.27.md: --container-runtime-endpoint and --image-service-endpoint migrated to the kubelet config (#112136)",
    ),
    row(
        Key::NetworkPlugin,
        Some("--network-plugin"),
        Some(Minor(1, 24)),
        None,
        None,
        "CHANGELOG-1.24.md: dockershim removed with its flags --network-plugin, --cni-conf-dir, --cni-bin-dir (#97252, #106907)",
    ),
    row(
        Key::CniConfDir,
        Some("--cni-conf-dir"),
        Some(Minor(1, 24)),
        None,
        None,
        "CHANGELOG-1.24.md (#106907)",
    ),
    row(
        Key::CniBinDir,
        Some("--cni-bin-dir"),
        Some(Minor(1, 24)),
        None,
        None,
        "CHANGELOG-1.24.md (#106907)",
    ),
    row(
        Key::PodInfraContainerImage,
        Some("--pod-infra-container-image"),
        Some(Minor(1, 35)),
        None,
        None,
        "CHANGELOG-1.24.md: deprecated (#108045); CHANGELOG-1.35.md: removed, remove it or the kubelet fails to start (#133779)",
    ),
    row(
        Key::FailCgroupV1,
        None,
        None,
        Some("failCgroupV1"),
        Some(Minor(1, 31)),
        "CHANGELOG-1.31.md: failCgroupV1 added (#126031); CHANGELOG-1.35.md: defaults to true, nodes on cgroup v1 do not start (#134298)",
    ),
    row(
        Key::NodeStatusUpdateFrequency,
        Some("--node-status-update-frequency"),
        None,
        Some("nodeStatusUpdateFrequency"),
        V1_10,
        "CHANGELOG-1.10.md (#60148); pkg/kubelet/apis/kubeletconfig/v1beta1/types.go in 1.10 (staging/src/k8s.io/kubelet/config/v1beta1/types.go from 1.13): how often the kubelet computes its node status",
    ),
    row(
        Key::NodeStatusReportFrequency,
        None,
        None,
        Some("nodeStatusReportFrequency"),
        Some(Minor(1, 13)),
        "CHANGELOG-1.13.md: with the node lease the kubelet posts its status only on a change or after the report interval (#69753), the file's nodeStatusReportFrequency (no flag); CHANGELOG-1.17.md: default 5m (#84007); v1beta1/defaults.go: unset, it takes nodeStatusUpdateFrequency's value when that is set",
    ),
];

/// The row of a setting.
pub fn row_of(key: Key) -> &'static Row {
    ROWS.iter()
        .find(|r| r.key == key)
        .expect("every key has a row in ROWS")
}

/// The table as docs/operators.md shows it.
pub fn markdown() -> String {
    let mut out = String::from(
        "| flag | removed in | file field | field since | source |\n| --- | --- | --- | --- | --- |\n",
    );
    let or_dash = |s: Option<String>| s.unwrap_or_else(|| "—".to_string());
    out.push_str(&format!(
        "| `--config` | — | (the file itself) | {CONFIG_FILE_SINCE} | {CONFIG_FILE_SOURCE} |\n"
    ));
    for r in ROWS {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            or_dash(r.flag.map(|f| format!("`{f}`"))),
            or_dash(r.flag_removed_in.map(|m| m.to_string())),
            or_dash(r.field.map(|f| format!("`{f}`"))),
            or_dash(r.field_since.map(|m| m.to_string())),
            r.source
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_has_one_row_with_a_way_to_pass_it_and_a_source() {
        let mut seen = std::collections::HashSet::new();
        for r in ROWS {
            assert!(seen.insert(r.key), "{:?} has two rows", r.key);
            assert!(r.flag.is_some() || r.field.is_some(), "{:?}", r.key);
            assert_eq!(r.field.is_some(), r.field_since.is_some(), "{:?}", r.key);
            assert!(r.source.contains("CHANGELOG-1.") || r.source.contains(".go"));
            if let (Some(removed), Some(since)) = (r.flag_removed_in, r.field_since) {
                assert!(since <= removed, "{:?}: a gap with neither", r.key);
            }
        }
    }

    #[test]
    fn docs_show_this_table() {
        let doc =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operators.md"))
                .expect("docs/operators.md");
        let table = markdown();
        assert!(
            doc.contains(&table),
            "docs/operators.md (\"The kubelet's configuration by version\") must hold the table \
             as src/kubelet_config/table.rs renders it:\n{table}"
        );
    }

    #[test]
    fn minors_order_numerically() {
        assert!(Minor(1, 10) > Minor(1, 9));
        assert!(Minor(1, 9) < Minor(1, 10));
        assert_eq!(Minor(1, 27).to_string(), "1.27");
    }
}
