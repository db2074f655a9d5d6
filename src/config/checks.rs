//! What a config needs beside it on the node, decided from the settings
//! alone: the keyrings its signed sources are verified with. `check-config`
//! refuses a config whose keyring is not there, before a node finds out.

use super::Config;
use crate::metadata::config::LocationKind;
use std::path::PathBuf;

/// A keyring the node will need, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyringNeed {
    /// Where the node reads it.
    pub path: PathBuf,
    /// The settings that make it needed, as the config names them.
    pub why: String,
    /// How to do without it instead (the setting that accepts unsigned input).
    pub unsigned: String,
}

/// What a node with this config may lack, said without refusing: a
/// kubelet sysext (`kubelet.backend` `sysext`, or `auto` on today's
/// releases) with no remote location to come from (only the node's own
/// store, which is empty on a new node).
pub fn warnings(config: &Config) -> Vec<String> {
    use crate::kubelet_sysext::config::Backend;
    let s = &config.sources;
    let remote = s.url.is_some()
        || (s.use_cluster_bucket && config.assets.s3.is_some())
        || s.default_url.is_some()
        || s.dev_dir.is_some();
    let mut w = Vec::new();
    let backend = match config.kubelet.backend {
        Backend::Sysext => Some("\"sysext\""),
        Backend::Auto => Some(
            "\"auto\" (the sysext on every release from 2857.0.0, which has no kubelet-wrapper)",
        ),
        Backend::Wrapper => None,
    };
    if let (Some(backend), false) = (backend, remote) {
        w.push(format!(
            "kubelet.backend is {backend}, but no remote location is set to take the kubelet \
             from (sources.url, the cluster's bucket, sources.default_url): only {} is searched, \
             and a new node has nothing there, so its kubelet-sysext step would stop (exit 5)",
            s.local_dir.display()
        ));
    }
    w
}

/// The keyrings the node will read to verify what it fetches: the artifact
/// metadata search path's (`sources.keyring`) when something searches it
/// (the kubelet sysext, docker packages from metadata, agent upgrades) at
/// a location whose unsigned metadata `sources.allow_unsigned` does not
/// accept; the torcx manifest's (`addon.keyring`) unless
/// `addon.allow_unsigned`. The node's local store alone needs none here (it
/// holds what the node put there).
pub fn keyrings_needed(config: &Config) -> Vec<KeyringNeed> {
    let mut needs = Vec::new();
    let searchers: Vec<&str> = [
        (
            config.kubelet.backend == crate::kubelet_sysext::config::Backend::Sysext,
            "kubelet.backend is \"sysext\"",
        ),
        (
            config.kubelet.backend == crate::kubelet_sysext::config::Backend::Auto,
            "kubelet.backend is \"auto\" (the kubelet sysext on releases from 2857.0.0)",
        ),
        (
            config.addon.enabled
                && config.addon.package_source == crate::addon::config::PackageSource::Metadata,
            "addon.package_source is \"metadata\"",
        ),
        (
            config.agent.upgrade != crate::agent_upgrade::config::AutoUpgrade::Off,
            "agent.upgrade is on",
        ),
    ]
    .into_iter()
    .filter_map(|(on, why)| on.then_some(why))
    .collect();
    let s = &config.sources;
    let remote: Vec<(LocationKind, &str)> = [
        (s.url.is_some(), LocationKind::Url, "sources.url is set"),
        (
            s.use_cluster_bucket && config.assets.s3.is_some(),
            LocationKind::Bucket,
            "the cluster's bucket is searched (sources.use_cluster_bucket and assets.s3)",
        ),
        (
            s.default_url.is_some(),
            LocationKind::Default,
            "the default location is searched (sources.default_url or sources.use_default)",
        ),
    ]
    .into_iter()
    .filter(|(on, kind, _)| *on && !s.allow_unsigned.contains(kind))
    .map(|(_, kind, why)| (kind, why))
    .collect();
    if !searchers.is_empty() && !remote.is_empty() {
        let kinds: Vec<String> = remote
            .iter()
            .map(|(k, _)| format!("{:?}", k.as_str()))
            .collect();
        needs.push(KeyringNeed {
            path: s.keyring_path(&config.paths),
            why: format!(
                "{}, {}, and sources.allow_unsigned does not include {}: only signed metadata is \
                 used there (sources.keyring)",
                searchers.join(" and "),
                remote
                    .iter()
                    .map(|(_, why)| *why)
                    .collect::<Vec<_>>()
                    .join(" and "),
                kinds.join(" or ")
            ),
            unsigned: format!("add {} to sources.allow_unsigned", kinds.join(" and ")),
        });
    }
    if config.addon.enabled
        && config.addon.package_source == crate::addon::config::PackageSource::TorcxManifest
        && !config.addon.allow_unsigned
    {
        needs.push(KeyringNeed {
            path: config.addon.keyring_path(&config.paths),
            why: "addon.enabled takes docker from a torcx manifest, which must be signed unless \
                  addon.allow_unsigned (addon.keyring)"
                .to_string(),
            unsigned: "set addon.allow_unsigned".to_string(),
        });
    }
    needs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(json: &str) -> Config {
        Config::from_json(json, std::path::Path::new("test.json")).unwrap()
    }

    #[test]
    fn a_sysext_kubelet_from_a_mirror_needs_the_sources_keyring() {
        let needs = keyrings_needed(&config(
            r#"{"kubelet": {"backend": "sysext"}, "sources": {"url": "https://mirror.example.com/nb"}}"#,
        ));
        assert_eq!(needs.len(), 1, "{needs:?}");
        assert_eq!(
            needs[0].path,
            PathBuf::from("/etc/kubernetes/installer/keyring.asc")
        );
        assert!(
            needs[0].why.starts_with(
                "kubelet.backend is \"sysext\", sources.url is set, and sources.allow_unsigned does not include \"url\""
            ),
            "{}",
            needs[0].why
        );
        assert_eq!(needs[0].unsigned, "add \"url\" to sources.allow_unsigned");
    }

    #[test]
    fn nothing_signed_to_verify_needs_no_keyring() {
        for json in [
            // Nothing searches the mirror.
            r#"{"kubelet": {"backend": "wrapper"}, "sources": {"url": "https://mirror.example.com/nb"}}"#,
            // Unsigned metadata from the URL is accepted.
            r#"{"kubelet": {"backend": "sysext"}, "sources": {"url": "https://m.example.com", "allow_unsigned": ["url"]}}"#,
            // Only the node's local store is searched.
            r#"{"kubelet": {"backend": "sysext"}}"#,
            // An unsigned torcx manifest is allowed.
            r#"{"addon": {"enabled": true, "manifest_url": "https://m.example.com/m.json", "allow_unsigned": true}}"#,
        ] {
            assert_eq!(keyrings_needed(&config(json)), [], "{json}");
        }
    }

    #[test]
    fn a_signed_torcx_manifest_needs_the_addon_keyring() {
        let needs = keyrings_needed(&config(
            r#"{"addon": {"enabled": true, "manifest_url": "https://m.example.com/m.json", "keyring": "/etc/torcx/keys.asc"}}"#,
        ));
        assert_eq!(needs.len(), 1);
        assert_eq!(needs[0].path, PathBuf::from("/etc/torcx/keys.asc"));
        assert_eq!(needs[0].unsigned, "set addon.allow_unsigned");
    }

    #[test]
    fn the_default_kubelet_from_a_mirror_needs_the_keyring_too() {
        let needs = keyrings_needed(&config(
            r#"{"sources": {"url": "https://mirror.example.com/nb"}}"#,
        ));
        assert_eq!(needs.len(), 1, "{needs:?}");
        assert!(
            needs[0].why.starts_with("kubelet.backend is \"auto\""),
            "{}",
            needs[0].why
        );
    }

    #[test]
    fn a_sysext_kubelet_with_nowhere_to_come_from_is_warned_of() {
        for json in [r#"{}"#, r#"{"kubelet": {"backend": "sysext"}}"#] {
            let w = warnings(&config(json));
            assert_eq!(w.len(), 1, "{json}: {w:?}");
            assert!(w[0].contains("no remote location is set"), "{}", w[0]);
        }
        for json in [
            r#"{"kubelet": {"backend": "wrapper"}}"#,
            r#"{"sources": {"url": "https://m.example.com"}}"#,
        ] {
            assert_eq!(warnings(&config(json)), Vec::<String>::new(), "{json}");
        }
    }
}
