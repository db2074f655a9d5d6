//! The config file as a whole, then each section as the agent reads it
//! (one file a section).

mod addon;
mod agent;
mod assets;
mod cluster;
mod helpers;
mod kubelet;
mod metrics;
mod os_update;
mod runtime;
mod sources;

use super::*;

fn load(text: &str) -> Result<Config> {
    Config::from_json(text, Path::new("/etc/node-bootstrap/config.json"))
}

#[test]
fn empty_object_gives_real_defaults() {
    let c = load("{}").unwrap();
    assert_eq!(c.role, Role::Worker);
    assert_eq!(
        c.paths.kubelet_env,
        PathBuf::from("/etc/kubernetes/kubelet.env")
    );
    assert_eq!(c.paths.seed_dir, PathBuf::from("/etc/kubernetes/installer"));
    assert_eq!(c.paths.state_dir, PathBuf::from("/var/lib/node-bootstrap"));
    assert_eq!(c.paths.assets_dir, PathBuf::from("/opt/tectonic"));
    assert_eq!(c.paths.torcx_store, PathBuf::from("/var/lib/torcx/store"));
}

#[test]
fn unknown_field_is_named_with_file() {
    let err = load(r#"{"paths": {"kubelet_evn": "/x"}}"#).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("/etc/node-bootstrap/config.json"), "{msg}");
    assert!(msg.contains("paths"), "{msg}");
    assert!(msg.contains("kubelet_evn"), "{msg}");
    assert_eq!(err.exit_code(), crate::error::exit::CONFIG);
}

#[test]
fn wrong_type_names_the_field() {
    let err = load(r#"{"role": "captain"}"#).unwrap_err();
    assert!(err.to_string().contains("field `role`"), "{err}");
}

#[test]
fn relative_path_is_rejected_by_field() {
    let err = load(r#"{"paths": {"state_dir": "var/lib"}}"#).unwrap_err();
    assert!(
        err.to_string()
            .contains("field `paths.state_dir`: must be an absolute path"),
        "{err}"
    );
}

#[test]
fn syntax_error_names_the_file() {
    let err = load("{").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("invalid config file /etc/node-bootstrap/config.json"),
        "{err}"
    );
}

#[test]
fn missing_file_is_a_config_error() {
    let err = Config::load(Path::new("/nonexistent/config.json")).unwrap_err();
    assert_eq!(err.exit_code(), crate::error::exit::CONFIG);
    assert!(err.to_string().contains("/nonexistent/config.json"));
}

#[test]
fn bootkube_master_role_parses() {
    assert_eq!(
        load(r#"{"role":"bootkube-master"}"#).unwrap().role,
        Role::BootkubeMaster
    );
}

/// The JSON `check-config` prints for `text`.
fn shown(text: &str) -> serde_json::Value {
    serde_json::to_value(load(text).unwrap().to_raw()).unwrap()
}

/// The dotted names of the `null` leaves of `v`.
fn nulls(v: &serde_json::Value, at: &str, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Null => out.push(at.to_string()),
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                let name = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                nulls(v, &name, out);
            }
        }
        _ => {}
    }
}

#[test]
fn the_settings_in_effect_fill_in_every_default_in_the_files_names_and_units() {
    let j = shown("{}");
    let mut unset = Vec::new();
    nulls(&j, "", &mut unset);
    unset.sort();
    // Only what is off or absent by default is `null`.
    assert_eq!(
        unset,
        [
            "addon.manifest_file",
            "addon.manifest_url",
            "assets.marker",
            "assets.s3",
            "cluster.forced_version",
            "helpers.bootkube.docker",
            "helpers.tectonic.docker",
            "kubelet_config.taints",
            "metrics.textfile_dir",
            "runtime.sandbox_image",
            "sources.default_url",
            "sources.dev_dir",
            "sources.url",
        ],
        "{j:#}"
    );
    for (pointer, want) in [
        ("/role", serde_json::json!("worker")),
        ("/cluster/api_retry_initial_secs", 2.into()),
        ("/cluster/api_attempts", 3.into()),
        ("/os_update/timeout_secs", 2400.into()),
        ("/reboot/wait_secs", 300.into()),
        ("/assets/limits/max_total_mib", 4096.into()),
        ("/assets/limits/max_entry_mib", 1024.into()),
        ("/addon/max_package_bytes", 536_870_912.into()),
        (
            "/addon/keyring",
            "/etc/kubernetes/installer/keyring.asc".into(),
        ),
        (
            "/addon/mappings_file",
            "/etc/kubernetes/installer/runtime-mappings.yaml".into(),
        ),
        ("/kubelet/max_image_bytes", 1_073_741_824u64.into()),
        ("/kubelet/merge_timeout_secs", 120.into()),
        ("/runtime/containerd/package", "sysext".into()),
        (
            "/runtime/containerd/sysext_mask",
            serde_json::json!(["containerd-flatcar"]),
        ),
        ("/paths/containerd_binary", "/usr/bin/containerd".into()),
        ("/sources/use_default", false.into()),
        (
            "/sources/keyring",
            "/etc/kubernetes/installer/keyring.asc".into(),
        ),
        (
            "/helpers/bootkube/script",
            "/opt/tectonic/bootkube.sh".into(),
        ),
        ("/helpers/bootkube/timeout_secs", 1500.into()),
        ("/agent/check_timeout_secs", 10.into()),
        (
            "/paths/torcx_oem_store",
            "/usr/share/oem/torcx/store".into(),
        ),
    ] {
        assert_eq!(j.pointer(pointer), Some(&want), "{pointer} in {j:#}");
    }
}

/// A config that sets something in every section, away from the defaults.
const EVERY_SECTION: &str = r#"{
  "role": "bootkube-master",
  "paths": {"assets_dir": "/srv/assets", "seed_dir": "/srv/seed"},
  "cluster": {"forced_version": "v1.9.6+coreos.0", "api_attempts": 7, "api_retry_initial_secs": 0},
  "os_update": {"enabled": true, "timeout_secs": 100, "poll_interval_secs": 2},
  "addon": {"enabled": true, "backend": "sysext", "package_source": "metadata",
            "max_package_bytes": 1000, "sysext_mask": []},
  "assets": {"mode": "pull", "marker": ".done",
             "s3": {"bucket": "b", "key": "/k/bundle.tgz", "endpoint": "http://127.0.0.1:9000",
                    "checksum_sha256": "AB00000000000000000000000000000000000000000000000000000000000000",
                    "part_size_mib": 8, "wait_for_object_secs": 0},
             "limits": {"max_entry_mib": 10}},
  "sources": {"url": "file:///srv/mirror", "default_url": "https://mirror.example/streams",
              "allow_unsigned": ["local", "url"], "dev_dir": "/srv/dev", "timeout_secs": 5},
  "helpers": {"bootkube": {"mode": "docker", "timeout_secs": 60,
                           "docker": {"image": "quay.io/coreos/bootkube:v0.10.0",
                                      "env": {"TOKEN": "s3cret-token"}, "host_network": false}},
              "tectonic": {"script": "/srv/t.sh", "log_tail_lines": 5}},
  "metrics": {"textfile_dir": "/var/lib/node_exporter/textfile_collector"},
  "reboot": {"wait_secs": 30},
  "agent": {"upgrade": "minor", "binary": "/opt/bin/nb", "check_timeout_secs": 3},
  "kubelet": {"backend": "sysext", "max_minor_lag": 2, "merge_timeout_secs": 9},
  "runtime": {"name": "containerd",
              "containerd": {"package": "none", "sysext_mask": [], "images_dir": "/srv/ext/containerd",
                             "max_image_bytes": 1000, "merge_timeout_secs": 9}}
}"#;

#[test]
fn the_settings_in_effect_read_back_as_the_same_settings() {
    for text in ["{}", EVERY_SECTION] {
        let c = load(text).unwrap();
        let j = serde_json::to_value(c.to_raw()).unwrap();
        let back = load(&j.to_string())
            .unwrap_or_else(|e| panic!("the shown settings do not load: {e}\n{j:#}"));
        assert_eq!(serde_json::to_value(back.to_raw()).unwrap(), j);
        assert_eq!(back.role, c.role);
        assert_eq!(back.paths, c.paths);
        assert_eq!(back.cluster, c.cluster);
        assert_eq!(back.os_update, c.os_update);
        assert_eq!(back.assets, c.assets);
        assert_eq!(back.metrics, c.metrics);
        assert_eq!(back.reboot, c.reboot);
        assert_eq!(back.agent, c.agent);
        assert_eq!(back.kubelet, c.kubelet);
        // Filled-in defaults are the ones in effect before.
        let with = |mut s: crate::metadata::config::SourcesSettings| {
            s.keyring = Some(s.keyring_path(&c.paths));
            s
        };
        assert_eq!(back.sources, with(c.sources.clone()));
        assert_eq!(
            back.addon.mappings_path(&back.paths),
            c.addon.mappings_path(&c.paths)
        );
        assert_eq!(
            back.addon.keyring_path(&back.paths),
            c.addon.keyring_path(&c.paths)
        );
        for (b, s, name) in [
            (&back.helpers.bootkube, &c.helpers.bootkube, "bootkube.sh"),
            (
                &back.helpers.tectonic,
                &c.helpers.tectonic,
                "tectonic-wrapper.sh",
            ),
        ] {
            let a = &c.paths.assets_dir;
            assert_eq!(b.script_path(a, name), s.script_path(a, name));
            assert_eq!(
                (b.mode, b.timeout, b.log_tail_lines),
                (s.mode, s.timeout, s.log_tail_lines)
            );
            assert_eq!(
                b.docker
                    .as_ref()
                    .map(|d| (d.binds(a), d.env.keys().collect::<Vec<_>>())),
                s.docker
                    .as_ref()
                    .map(|d| (d.binds(a), d.env.keys().collect::<Vec<_>>()))
            );
        }
    }
}

#[test]
fn the_settings_in_effect_name_docker_env_variables_but_never_show_their_values() {
    let j = shown(EVERY_SECTION).to_string();
    assert!(j.contains(r#""env":{"TOKEN":"<redacted>"}"#), "{j}");
    assert!(!j.contains("s3cret-token"), "{j}");
}
