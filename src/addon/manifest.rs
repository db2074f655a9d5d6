//! The remote package manifest (`torcx-package-list-v0`) and the choice of
//! the docker package from it.
//!
//! ```json
//! {"kind":"torcx-package-list-v0","value":{"packages":[{"name":"docker","defaultVersion":"1.12",
//!  "versions":[{"version":"17.03","hash":"sha512-<hex>","sourcePackage":"app-torcx/docker-17.03",
//!   "locations":[{"path":"/usr/share/torcx/store/docker:17.03.torcx.tgz"},
//!                {"url":"https://…/pkgs/amd64-usr/docker/<hex>/docker:17.03.torcx.tgz"}]}]}]}}
//! ```
//!
//! Nothing here is trusted before the manifest's signature verified (see
//! [`super::verify`]); packages are trusted through the manifest's sha512.
//!
//! Choice (seed 003, tectonic-torcx's `PickVersion`): the first preferred
//! version the manifest offers for this board; among the builds that
//! preference matches (`17.03` matches `17.03.1` and `17.03.2`), the largest.
//! A version is offered for this board when it has an on-disk location, or a
//! URL that does not name another board (`…/pkgs/arm64-usr/…` is not for
//! `amd64-usr`).

use super::version::DockerVersion;
use crate::digest::Sha512;
use crate::error::{Error, Result};
use serde::Deserialize;
use std::path::PathBuf;

pub const KIND: &str = "torcx-package-list-v0";
/// The package name of docker in torcx manifests.
pub const DOCKER: &str = "docker";

#[derive(Debug, Clone, Deserialize)]
struct RawBox {
    kind: String,
    value: RawList,
}

#[derive(Debug, Clone, Deserialize)]
struct RawList {
    #[serde(default)]
    packages: Vec<Package>,
}

#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Package {
    pub name: String,
    #[serde(default, rename = "defaultVersion", alias = "DefaultVersion")]
    pub default_version: Option<String>,
    #[serde(default)]
    pub versions: Vec<PackageVersion>,
}

#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct PackageVersion {
    pub version: String,
    pub hash: String,
    #[serde(default, rename = "sourcePackage")]
    pub source_package: Option<String>,
    #[serde(default)]
    pub locations: Vec<Location>,
}

#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Location {
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub url: Option<String>,
}

/// A verified-manifest's view of the packages it lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageManifest {
    /// Where it came from (URL or file), for messages.
    pub source: String,
    pub packages: Vec<Package>,
}

/// The metadata item a [`Choice`] came from (compared by what it names).
#[derive(Debug, Clone)]
pub struct MetadataItem(pub Box<crate::metadata::Found>);

impl PartialEq for MetadataItem {
    fn eq(&self, o: &Self) -> bool {
        let (a, b) = (&self.0, &o.0);
        a.location == b.location
            && a.product_id == b.product_id
            && a.version == b.version
            && a.item_name == b.item_name
            && a.item == b.item
    }
}
impl Eq for MetadataItem {}

/// The package chosen for the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// The torcx reference, e.g. `17.03` (what goes into the profile).
    pub version: String,
    pub hash: Sha512,
    /// Download locations usable for this board, in manifest order.
    pub urls: Vec<url::Url>,
    /// On-disk locations (the OS image's vendor store).
    pub paths: Vec<PathBuf>,
    /// Which preference it satisfied.
    pub preference: String,
    /// Set when the package comes from the artifact metadata search path
    /// (`addon.package_source = "metadata"`): fetched from there, verified
    /// by the metadata's size and hashes. `None`: from `urls`/`paths`.
    pub origin: Option<MetadataItem>,
}

impl Choice {
    /// `docker:<version>.torcx.tgz`.
    pub fn archive_name(&self) -> String {
        archive_name(DOCKER, &self.version)
    }
}

/// torcx's archive name: `<name>:<reference>.torcx.tgz`.
pub fn archive_name(name: &str, reference: &str) -> String {
    format!("{name}:{reference}.torcx.tgz")
}

impl PackageManifest {
    /// Parses a manifest; malformed JSON or a wrong kind is
    /// [`crate::error::ErrorClass::BadInput`] naming `source`.
    pub fn parse(bytes: &[u8], source: &str) -> Result<PackageManifest> {
        let de = &mut serde_json::Deserializer::from_slice(bytes);
        let raw: RawBox = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            Error::bad_input(format!(
                "invalid package manifest {source}: {}{}",
                if path == "." {
                    String::new()
                } else {
                    format!("at {path}: ")
                },
                e.into_inner()
            ))
        })?;
        if raw.kind != KIND {
            return Err(Error::bad_input(format!(
                "invalid package manifest {source}: kind is {:?}, expected {KIND:?}",
                raw.kind
            )));
        }
        Ok(PackageManifest {
            source: source.to_string(),
            packages: raw.value.packages,
        })
    }

    fn docker(&self) -> Option<&Package> {
        self.packages.iter().find(|p| p.name == DOCKER)
    }

    /// Docker versions listed (any board), for messages.
    pub fn docker_versions(&self) -> Vec<String> {
        self.docker()
            .map(|p| p.versions.iter().map(|v| v.version.clone()).collect())
            .unwrap_or_default()
    }

    /// Chooses the docker package (see module docs). `base` resolves
    /// relative URLs (the manifest's own location).
    pub fn choose(&self, preferences: &[String], board: &str, base: &url::Url) -> Result<Choice> {
        let docker = self.docker();
        for pref in preferences {
            let Some(pref_v) = DockerVersion::parse(pref) else {
                continue;
            };
            let best = docker
                .into_iter()
                .flat_map(|p| p.versions.iter())
                .filter_map(|v| Some((DockerVersion::parse(&v.version)?, v)))
                .filter(|(dv, _)| dv.satisfies(&pref_v))
                .filter_map(|(dv, v)| {
                    let (urls, paths) = usable_locations(v, board, base);
                    (!urls.is_empty() || !paths.is_empty()).then_some((dv, v, urls, paths))
                })
                .max_by(|a, b| a.0.cmp(&b.0));
            if let Some((_, v, urls, paths)) = best {
                let hash = Sha512::parse_manifest_hash(&v.hash).ok_or_else(|| {
                    Error::bad_input(format!(
                        "invalid package manifest {}: docker {} has hash {:?}; expected sha512-<128 hex digits>",
                        self.source, v.version, v.hash
                    ))
                })?;
                check_reference(&v.version).map_err(|m| {
                    Error::bad_input(format!("invalid package manifest {}: {m}", self.source))
                })?;
                return Ok(Choice {
                    version: v.version.clone(),
                    hash,
                    urls,
                    paths,
                    preference: pref.clone(),
                    origin: None,
                });
            }
        }
        let listed = self.docker_versions();
        Err(Error::bad_input(format!(
            "package manifest {} offers none of the docker versions the cluster wants ({}) for board {board}; it lists: {}",
            self.source,
            preferences.join(", "),
            if listed.is_empty() {
                "no docker package".to_string()
            } else {
                listed.join(", ")
            }
        )))
    }
}

/// A torcx reference becomes part of a file name: keep it plain.
pub(crate) fn check_reference(r: &str) -> std::result::Result<(), String> {
    if r.is_empty()
        || r.len() > 64
        || r.starts_with('.')
        || !r
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '+'))
    {
        return Err(format!("docker version {r:?} cannot name a store file"));
    }
    Ok(())
}

/// A path segment that names a Container Linux board (`amd64-usr`).
fn is_board_name(seg: &str) -> bool {
    seg.strip_suffix("-usr").is_some_and(|a| {
        !a.is_empty()
            && a.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    })
}

fn usable_locations(
    v: &PackageVersion,
    board: &str,
    base: &url::Url,
) -> (Vec<url::Url>, Vec<PathBuf>) {
    let mut urls = Vec::new();
    let mut paths = Vec::new();
    for loc in &v.locations {
        if let Some(p) = &loc.path
            && p.starts_with('/')
            && !p.split('/').any(|s| s == "..")
        {
            paths.push(PathBuf::from(p));
        }
        if let Some(u) = &loc.url {
            let Ok(parsed) = base.join(u) else { continue };
            if !matches!(parsed.scheme(), "http" | "https" | "file") {
                continue;
            }
            let other_board = parsed
                .path_segments()
                .into_iter()
                .flatten()
                .any(|seg| is_board_name(seg) && seg != board);
            if !other_board {
                urls.push(parsed);
            }
        }
    }
    (urls, paths)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorClass;
    use serde_json::json;

    const SRC: &str = "https://m.example/manifests/amd64-usr/1632.3.0/torcx_manifest.json";

    fn h(c: char) -> String {
        format!("sha512-{}", c.to_string().repeat(128))
    }

    fn ver(v: &str, hash: &str, urls: &[&str]) -> serde_json::Value {
        json!({"version": v, "hash": hash, "sourcePackage": format!("app-torcx/docker-{v}"),
               "locations": urls.iter().map(|u| json!({"url": u})).collect::<Vec<_>>()})
    }

    fn manifest(versions: Vec<serde_json::Value>) -> PackageManifest {
        let doc = json!({"kind": KIND, "value": {"packages": [
            {"name": "rkt", "versions": [ver("1.12", &h('f'), &["https://x/rkt.tgz"])]},
            {"name": "docker", "defaultVersion": "1.12", "versions": versions}]}});
        PackageManifest::parse(doc.to_string().as_bytes(), SRC).unwrap()
    }

    fn pick(m: &PackageManifest, prefs: &[&str], board: &str) -> Result<Choice> {
        let prefs: Vec<String> = prefs.iter().map(|s| s.to_string()).collect();
        m.choose(&prefs, board, &url::Url::parse(SRC).unwrap())
    }

    fn u(board: &str, v: &str) -> String {
        format!("https://pkgs.example/pkgs/{board}/docker/abc/docker:{v}.torcx.tgz")
    }

    #[test]
    fn first_preference_offered_wins() {
        let m = manifest(vec![
            ver("1.12", &h('1'), &[&u("amd64-usr", "1.12")]),
            ver("17.03", &h('2'), &[&u("amd64-usr", "17.03")]),
        ]);
        let c = pick(&m, &["17.03", "1.12"], "amd64-usr").unwrap();
        assert_eq!(
            (c.version.as_str(), c.preference.as_str()),
            ("17.03", "17.03")
        );
        assert_eq!(c.hash.to_hex(), "2".repeat(128));
        assert_eq!(c.urls[0].as_str(), u("amd64-usr", "17.03"));
        assert_eq!(c.archive_name(), "docker:17.03.torcx.tgz");
        let c = pick(&m, &["1.12", "17.03"], "amd64-usr").unwrap();
        assert_eq!(c.version, "1.12");
        // A preference the manifest lacks falls through to the next one.
        let c = pick(&m, &["18.06", "1.12"], "amd64-usr").unwrap();
        assert_eq!(c.version, "1.12");
    }

    #[test]
    fn largest_build_of_the_preferred_minor() {
        let m = manifest(vec![
            ver("17.03.2", &h('2'), &[&u("amd64-usr", "17.03.2")]),
            ver("17.03.10", &h('a'), &[&u("amd64-usr", "17.03.10")]),
            ver("17.03.9", &h('9'), &[&u("amd64-usr", "17.03.9")]),
            ver("17.3.99", &h('b'), &[&u("amd64-usr", "17.3.99")]),
            ver("17.06.1", &h('6'), &[&u("amd64-usr", "17.06.1")]),
        ]);
        assert_eq!(
            pick(&m, &["17.03"], "amd64-usr").unwrap().version,
            "17.3.99"
        );
        // "17.03" and "17.3" are the same numbers; an exact pin stays exact.
        assert_eq!(
            pick(&m, &["17.03.9"], "amd64-usr").unwrap().version,
            "17.03.9"
        );
        let m = manifest(vec![
            ver("17.03.2", &h('2'), &[&u("amd64-usr", "17.03.2")]),
            ver("17.03.10", &h('a'), &[&u("amd64-usr", "17.03.10")]),
        ]);
        assert_eq!(
            pick(&m, &["17.03"], "amd64-usr").unwrap().version,
            "17.03.10"
        );
    }

    #[test]
    fn builds_for_another_board_are_not_offered() {
        let m = manifest(vec![
            ver("1.12", &h('1'), &[&u("amd64-usr", "1.12")]),
            ver("17.03.2", &h('2'), &[&u("arm64-usr", "17.03.2")]),
            ver("17.03.1", &h('3'), &[&u("amd64-usr", "17.03.1")]),
        ]);
        // The largest 17.03 is arm64-only: an amd64 node gets 17.03.1.
        assert_eq!(
            pick(&m, &["17.03"], "amd64-usr").unwrap().version,
            "17.03.1"
        );
        assert_eq!(
            pick(&m, &["17.03"], "arm64-usr").unwrap().version,
            "17.03.2"
        );
        let m = manifest(vec![
            ver("1.12", &h('1'), &[&u("amd64-usr", "1.12")]),
            ver("17.03", &h('2'), &[&u("arm64-usr", "17.03")]),
        ]);
        assert_eq!(
            pick(&m, &["17.03", "1.12"], "amd64-usr").unwrap().version,
            "1.12"
        );
        let err = pick(&m, &["17.03"], "amd64-usr").unwrap_err();
        assert_eq!(err.class(), ErrorClass::BadInput);
        assert_eq!(
            err.to_string(),
            format!(
                "package manifest {SRC} offers none of the docker versions the cluster wants (17.03) for board amd64-usr; it lists: 1.12, 17.03"
            )
        );
    }

    #[test]
    fn vendor_paths_and_relative_urls() {
        let doc = json!({"kind": KIND, "value": {"packages": [{"name": "docker", "versions": [
            {"version": "17.03", "hash": h('c'), "locations": [
                {"path": "/usr/share/torcx/store/docker:17.03.torcx.tgz"},
                {"url": "../../../pkgs/amd64-usr/docker/ccc/docker:17.03.torcx.tgz"}]}]}]}});
        let m = PackageManifest::parse(doc.to_string().as_bytes(), SRC).unwrap();
        let c = pick(&m, &["17.03"], "amd64-usr").unwrap();
        assert_eq!(
            c.paths,
            [PathBuf::from(
                "/usr/share/torcx/store/docker:17.03.torcx.tgz"
            )]
        );
        assert_eq!(
            c.urls[0].as_str(),
            "https://m.example/pkgs/amd64-usr/docker/ccc/docker:17.03.torcx.tgz"
        );
    }

    #[test]
    fn malformed_manifests_are_bad_input_naming_the_source() {
        for (text, want) in [
            ("{", "invalid package manifest"),
            (
                r#"{"kind":"profile-manifest-v0","value":{}}"#,
                "kind is \"profile-manifest-v0\"",
            ),
            (
                r#"{"kind":"torcx-package-list-v0","value":{"packages":[{"name":"docker","versions":[{"version":"17.03"}]}]}}"#,
                "at value.packages[0].versions[0]: missing field `hash`",
            ),
        ] {
            let err = PackageManifest::parse(text.as_bytes(), SRC).unwrap_err();
            assert_eq!(err.class(), ErrorClass::BadInput);
            let msg = err.to_string();
            assert!(
                msg.starts_with(&format!("invalid package manifest {SRC}")),
                "{msg}"
            );
            assert!(msg.contains(want), "{msg}");
        }
        let m = manifest(vec![ver(
            "17.03",
            "sha256-abcd",
            &[&u("amd64-usr", "17.03")],
        )]);
        let err = pick(&m, &["17.03"], "amd64-usr").unwrap_err();
        assert!(
            err.to_string().contains(
                "docker 17.03 has hash \"sha256-abcd\"; expected sha512-<128 hex digits>"
            ),
            "{err}"
        );
        let m = manifest(vec![ver("17.03/../x", &h('1'), &[&u("amd64-usr", "x")])]);
        assert!(pick(&m, &["17.03"], "amd64-usr").is_err());
    }
}
