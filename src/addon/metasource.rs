//! `addon.package_source = "metadata"`: the docker package comes from the
//! artifact metadata search path ([`crate::metadata`], `sources` section)
//! instead of a torcx package manifest. Only where the candidates come from
//! and how they are trusted differ; the choice rules and the installation
//! (store, profile, next-profile, sysext image, reboot decision) are the
//! manifest source's, through the same [`Choice`].
//!
//! The product asked for is `com.node-bootstrap:<name>:<series>:<arch>`
//! (`sources.product_id_template`):
//! - name [`TORCX_PRODUCT`] (`docker-torcx`, `.torcx.tgz` archives) for the
//!   torcx backend, [`SYSEXT_PRODUCT`] (`docker-sysext`, `.raw` images) for
//!   the sysext backend;
//! - series: the OS version the node boots next (`VERSION_ID`, or the
//!   pending update's);
//! - arch: `COREOS_BOARD` (`amd64-usr`).
//!
//! Choice: the runtime mappings' preferences in order; for each, the search
//! path is asked for the largest version of that `major.minor`
//! ([`VersionMatch::Prefix`]) and the first location (in search order) that
//! has one serves it. A preference any location offers beats a later
//! preference, even one an earlier location offers: the preference order is
//! what the cluster is compatible with, the search order only where the bits
//! come from. Each location's metadata is read once ([`metadata::find_first`]).
//!
//! Trust: signed metadata verified against `sources.keyring`, unsigned only
//! where `sources.allow_unsigned` (or development mode) allows; the item
//! must carry a sha512 (the store reuses packages by it) and is verified by
//! size and every hash the metadata gives before it gets its final name.

use super::Inputs;
use super::config::Backend;
use super::manifest::{self, Choice, MetadataItem};
use super::version::DockerVersion;
use crate::digest::Sha512;
use crate::error::{Error, ErrorClass, Result};
use crate::fsutil::staged::Staged;
use crate::metadata::config::SourcesSettings;
use crate::metadata::format::VersionMatch;
use crate::metadata::{self, ArtifactQuery, Found};
use std::path::Path;
use tracing::{info, warn};

/// Product name of docker torcx archives in the metadata.
pub const TORCX_PRODUCT: &str = "docker-torcx";
/// Product name of docker sysext images in the metadata.
pub const SYSEXT_PRODUCT: &str = "docker-sysext";

/// The product name for a backend.
pub fn product_name(backend: Backend) -> &'static str {
    match backend {
        Backend::Torcx => TORCX_PRODUCT,
        Backend::Sysext => SYSEXT_PRODUCT,
    }
}

/// One query per preference, in preference order. Preferences that are not
/// docker versions are dropped (as the manifest source does).
pub fn queries(
    sources: &SourcesSettings,
    preferences: &[String],
    backend: Backend,
    series: &str,
    board: &str,
) -> Vec<ArtifactQuery> {
    preferences
        .iter()
        .filter(|p| DockerVersion::parse(p).is_some())
        .map(|p| {
            ArtifactQuery::new(
                sources,
                product_name(backend),
                series,
                board,
                VersionMatch::Prefix(p.trim().trim_start_matches('v').to_string()),
            )
        })
        .collect()
}

/// Turns what the search path found into the addon's [`Choice`]: the
/// version must be a docker version that can name a store file, the item
/// must carry a sha512.
pub fn choice_from_found(found: Found, preferences: &[String]) -> Result<Choice> {
    let what = format!(
        "{} {} at {}",
        found.product_id, found.version, found.location
    );
    let v = DockerVersion::parse(&found.version).ok_or_else(|| {
        Error::bad_input(format!(
            "{what}: {:?} is not a docker version",
            found.version
        ))
    })?;
    manifest::check_reference(&found.version)
        .map_err(|m| Error::bad_input(format!("{what}: {m}")))?;
    let preference = preferences
        .iter()
        .find(|p| DockerVersion::parse(p).is_some_and(|pv| v.satisfies(&pv)))
        .cloned()
        .ok_or_else(|| {
            Error::internal(format!(
                "{what} matches none of the preferences {}",
                preferences.join(", ")
            ))
        })?;
    let Some(hex) = found.item.sha512.as_deref() else {
        return Err(Error::bad_input(format!(
            "{what}: item {} has no sha512; docker packages need one (`metadata generate` writes it)",
            found.item_name
        )));
    };
    let hash = Sha512::parse_manifest_hash(&format!("sha512-{hex}")).ok_or_else(|| {
        Error::bad_input(format!(
            "{what}: item {} has a malformed sha512",
            found.item_name
        ))
    })?;
    Ok(Choice {
        version: found.version.clone(),
        hash,
        urls: Vec::new(),
        paths: Vec::new(),
        preference,
        origin: Some(MetadataItem(Box::new(found))),
    })
}

/// Logs where the package was found and why earlier locations did not
/// serve it; `purpose` says which OS it is for.
fn log_found(found: &Found, purpose: &str) {
    for s in &found.skipped {
        info!(step = "docker-addon", source = "metadata", location = %s.location,
            location_kind = s.kind.as_str(), reason = %s.reason, purpose,
            "location did not serve the docker package");
    }
    let skipped: Vec<String> = found
        .skipped
        .iter()
        .map(|s| format!("{} ({}): {}", s.location, s.kind.as_str(), s.reason))
        .collect();
    if found.kind == metadata::config::LocationKind::Dev {
        warn!(step = "docker-addon", source = "metadata", location = %found.location,
            location_kind = found.kind.as_str(), product = %found.product_id, version = %found.version,
            url = %found.url, signed = found.signed, purpose,
            "DEVELOPMENT MODE: the docker package is a locally built one from sources.dev_dir");
    }
    info!(step = "docker-addon", source = "metadata", location = %found.location,
        location_kind = found.kind.as_str(), product = %found.product_id, version = %found.version,
        url = %found.url, signed = found.signed, skipped = %skipped.join("; "), purpose,
        "docker package found");
}

/// The docker package for `series` and `board`: see module docs.
pub async fn choose(
    config: &Inputs<'_>,
    backend: Backend,
    preferences: &[String],
    board: &str,
    series: &str,
) -> Result<Choice> {
    let qs = queries(config.sources, preferences, backend, series, board);
    if qs.is_empty() {
        return Err(Error::bad_input(format!(
            "the runtime mappings' docker preferences ({}) contain no docker version",
            preferences.join(", ")
        )));
    }
    let found = metadata::find_first(&config.metadata(), &qs).await.map_err(|e| {
        e.context(format!(
            "no docker package for OS {series} on {board} in the metadata search path (addon.package_source \"metadata\")"
        ))
    })?;
    log_found(&found, "next boot");
    choice_from_found(found, preferences)
}

/// The same docker `version` for another OS `series` (a rollback target of
/// the torcx backend, which keeps a store per OS version), when the search
/// path has it; `Ok(None)` when none does. Tampered metadata is still an
/// error.
pub async fn same_version_for(
    config: &Inputs<'_>,
    version: &str,
    board: &str,
    series: &str,
) -> Result<Option<Choice>> {
    let q = ArtifactQuery::new(
        config.sources,
        product_name(Backend::Torcx),
        series,
        board,
        VersionMatch::Exact(version.to_string()),
    );
    match metadata::find(&config.metadata(), &q).await {
        Ok(found) => {
            log_found(&found, "running OS (rollback)");
            choice_from_found(found, &[version.to_string()]).map(Some)
        }
        Err(e) if e.class() == ErrorClass::Verification => Err(e),
        Err(e) => {
            info!(step = "docker-addon", source = "metadata", os_version = series, version,
                reason = %e, "no docker package of this version for the running OS");
            Ok(None)
        }
    }
}

/// Fetches the chosen item into `dir` as `final_name`, verified (size and
/// hashes, by [`metadata::fetch_item`]) under its hidden partial name, and
/// returns it staged.
pub async fn fetch_staged(
    config: &Inputs<'_>,
    item: &MetadataItem,
    dir: &Path,
    final_name: &str,
    hash: &Sha512,
) -> Result<Staged> {
    metadata::fetch_staged(
        &config.metadata(),
        &item.0,
        dir,
        final_name,
        hash,
        ("addon.max_package_bytes", config.addon.max_package_bytes),
        "docker-addon",
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::path::PathBuf;

    const OS: &str = "1632.3.0";
    const BOARD: &str = "amd64-usr";

    struct Mirrors {
        dir: tempfile::TempDir,
    }

    impl Mirrors {
        fn new() -> Mirrors {
            Mirrors {
                dir: tempfile::tempdir().unwrap(),
            }
        }
        fn path(&self, name: &str) -> PathBuf {
            self.dir.path().join(name)
        }
        /// `name` mirror with artifacts `(file name, contents)`, unsigned.
        fn mirror(&self, name: &str, files: &[&str]) -> PathBuf {
            let d = self.path(name);
            fs::create_dir_all(&d).unwrap();
            for f in files {
                fs::write(d.join(f), format!("contents of {f}")).unwrap();
            }
            metadata::generate(&d, None).unwrap();
            d
        }
        fn config(&self, backend: &str) -> super::super::OwnedInputs {
            super::super::OwnedInputs::parse(
                serde_json::json!({"enabled": true, "package_source": "metadata", "backend": backend}),
                serde_json::json!({
                    "local_dir": self.path("local"),
                    "url": format!("file://{}", self.path("url").display()),
                    "use_default": false,
                    "keyring": self.path("no-keyring.asc"),
                    "allow_unsigned": ["local", "url"],
                }),
            )
        }
    }

    fn prefs(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| s.to_string()).collect()
    }

    fn torcx(v: &str, series: &str, board: &str) -> String {
        format!("{TORCX_PRODUCT}_{v}_{series}_{board}.torcx.tgz")
    }

    #[test]
    fn one_prefix_query_per_docker_preference() {
        let sources = SourcesSettings::default();
        let q = queries(
            &sources,
            &prefs(&["17.03", "not-a-version", "v1.12"]),
            Backend::Sysext,
            OS,
            BOARD,
        );
        assert_eq!(q.len(), 2);
        assert_eq!(
            q[0].product_id,
            "com.node-bootstrap:docker-sysext:1632.3.0:amd64-usr"
        );
        assert_eq!(q[0].version, VersionMatch::Prefix("17.03".into()));
        assert_eq!(q[1].version, VersionMatch::Prefix("1.12".into()));
        assert_eq!(
            queries(&sources, &prefs(&["17.03"]), Backend::Torcx, OS, BOARD)[0].product_id,
            "com.node-bootstrap:docker-torcx:1632.3.0:amd64-usr"
        );
        let other = SourcesSettings {
            product_id_template: "com.example.flatcar:{name}:{arch}:{series}".into(),
            ..SourcesSettings::default()
        };
        assert_eq!(
            queries(&other, &prefs(&["17.03"]), Backend::Torcx, OS, BOARD)[0].product_id,
            "com.example.flatcar:docker-torcx:amd64-usr:1632.3.0"
        );
    }

    #[tokio::test]
    async fn first_preference_anywhere_beats_a_later_one_in_an_earlier_location() {
        let m = Mirrors::new();
        m.mirror("local", &[&torcx("1.12", OS, BOARD)]);
        let url = m.mirror(
            "url",
            &[
                &torcx("17.03.1", OS, BOARD),
                &torcx("17.03.2", OS, BOARD),
                &torcx("17.06.0", OS, BOARD),
            ],
        );
        let c = choose(
            &m.config("torcx").inputs(),
            Backend::Torcx,
            &prefs(&["17.03", "1.12"]),
            BOARD,
            OS,
        )
        .await
        .unwrap();
        assert_eq!(c.version, "17.03.2", "the largest build of 17.03");
        assert_eq!(c.preference, "17.03");
        assert_eq!(c.archive_name(), "docker:17.03.2.torcx.tgz");
        let found = &c.origin.as_ref().unwrap().0;
        assert_eq!(found.location, url.display().to_string());
        assert_eq!(
            hex::encode(c.hash.0),
            found.item.sha512.clone().unwrap(),
            "the store keys on the metadata's sha512"
        );
        let local = &found.skipped[0];
        assert_eq!(local.kind, metadata::config::LocationKind::Local);
        assert!(
            local
                .reason
                .contains("has no the largest version 17.03[.x] (has: 1.12)"),
            "{}",
            local.reason
        );
    }

    #[tokio::test]
    async fn next_preference_from_the_first_location_that_has_it() {
        let m = Mirrors::new();
        let local = m.mirror("local", &[&torcx("1.12.6", OS, BOARD)]);
        m.mirror(
            "url",
            &[&torcx("1.12.7", OS, BOARD), &torcx("17.06.0", OS, BOARD)],
        );
        let c = choose(
            &m.config("torcx").inputs(),
            Backend::Torcx,
            &prefs(&["17.03", "1.12"]),
            BOARD,
            OS,
        )
        .await
        .unwrap();
        // No location has 17.03; 1.12 comes from the first that has it,
        // even though a later one has a larger 1.12 build.
        assert_eq!(
            (c.version.as_str(), c.preference.as_str()),
            ("1.12.6", "1.12")
        );
        assert_eq!(
            c.origin.as_ref().unwrap().0.location,
            local.display().to_string()
        );
    }

    #[tokio::test]
    async fn other_boards_os_versions_and_backends_are_not_offered() {
        let m = Mirrors::new();
        m.mirror(
            "local",
            &[
                &torcx("17.03.2", OS, "arm64-usr"),
                &torcx("17.03.2", "1688.0.0", BOARD),
                &format!("{SYSEXT_PRODUCT}_17.03.2_{OS}_{BOARD}.raw"),
                &torcx("1.12", OS, BOARD),
            ],
        );
        let c = choose(
            &m.config("torcx").inputs(),
            Backend::Torcx,
            &prefs(&["17.03", "1.12"]),
            BOARD,
            OS,
        )
        .await
        .unwrap();
        assert_eq!(c.version, "1.12");
        let c = choose(
            &m.config("sysext").inputs(),
            Backend::Sysext,
            &prefs(&["17.03", "1.12"]),
            BOARD,
            OS,
        )
        .await
        .unwrap();
        assert_eq!(c.version, "17.03.2");
        assert_eq!(c.origin.as_ref().unwrap().0.item.ftype, "raw");
        let err = choose(
            &m.config("torcx").inputs(),
            Backend::Torcx,
            &prefs(&["17.03"]),
            "arm64-usr",
            "1688.0.0",
        )
        .await
        .unwrap_err();
        assert_eq!(err.class(), ErrorClass::BadInput);
        let msg = err.to_string();
        assert!(
            msg.starts_with(
                "no docker package for OS 1688.0.0 on arm64-usr in the metadata search path"
            ),
            "{msg}"
        );
        assert!(
            msg.contains("no product com.node-bootstrap:docker-torcx:1688.0.0:arm64-usr"),
            "{msg}"
        );
    }

    #[tokio::test]
    async fn items_without_sha512_are_refused() {
        let m = Mirrors::new();
        let d = m.mirror("local", &[&torcx("17.03", OS, BOARD)]);
        let products = d.join(metadata::format::PRODUCTS_PATH);
        let text = fs::read_to_string(&products).unwrap();
        let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        let item = doc["products"]["com.node-bootstrap:docker-torcx:1632.3.0:amd64-usr"]
            ["versions"]["17.03"]["items"]
            .as_object_mut()
            .unwrap()
            .values_mut()
            .next()
            .unwrap();
        item.as_object_mut().unwrap().remove("sha512");
        fs::write(&products, doc.to_string()).unwrap();
        let err = choose(
            &m.config("torcx").inputs(),
            Backend::Torcx,
            &prefs(&["17.03"]),
            BOARD,
            OS,
        )
        .await
        .unwrap_err();
        assert_eq!(err.class(), ErrorClass::BadInput);
        assert!(err.to_string().contains("has no sha512"), "{err}");
    }

    #[tokio::test]
    async fn same_version_for_the_running_os_or_none() {
        let m = Mirrors::new();
        m.mirror(
            "local",
            &[
                &torcx("17.03.2", OS, BOARD),
                &torcx("17.03.1", "1576.5.0", BOARD),
            ],
        );
        let owned = m.config("torcx");
        let c = owned.inputs();
        let got = same_version_for(&c, "17.03.2", BOARD, OS).await.unwrap();
        assert_eq!(got.unwrap().version, "17.03.2");
        // Exactly that version: another build of 17.03 does not do.
        assert!(
            same_version_for(&c, "17.03.2", BOARD, "1576.5.0")
                .await
                .unwrap()
                .is_none()
        );
    }
}
