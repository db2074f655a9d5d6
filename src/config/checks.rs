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
            r#"{"sources": {"url": "https://mirror.example.com/nb"}}"#,
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
}
