//! The simplestreams-shaped metadata format (seed 001).
//!
//! Layout below a location's base:
//! ```text
//! streams/v1/index.json | index.sjson        (sjson: OpenPGP inline-signed)
//! streams/v1/com.node-bootstrap-artifacts.json | .sjson
//! <item paths, relative to the base>
//! ```
//! `index.json`:
//! ```json
//! {"format": "index:1.0", "updated": "2026-11-22T03:58:33Z",
//!  "index": {"com.node-bootstrap:artifacts": {
//!     "format": "products:1.0", "datatype": "content-download",
//!     "updated": "…", "path": "streams/v1/com.node-bootstrap-artifacts.json",
//!     "products": ["com.node-bootstrap:docker:1520.3.0:amd64"]}}}
//! ```
//! product file:
//! ```json
//! {"format": "products:1.0", "content_id": "com.node-bootstrap:artifacts",
//!  "datatype": "content-download", "updated": "…",
//!  "products": {"com.node-bootstrap:docker:1520.3.0:amd64": {
//!     "name": "docker", "series": "1520.3.0", "arch": "amd64",
//!     "versions": {"17.03": {"items": {"docker_17.03_1520.3.0_amd64.torcx.tgz": {
//!        "version": "17.03", "ftype": "torcx.tgz", "size": 123,
//!        "path": "docker/docker_17.03_1520.3.0_amd64.torcx.tgz",
//!        "sha256": "…", "sha512": "…"}}}}}}}
//! ```
//! A signed index points at product files by their `.json` path; readers of
//! the signed form fetch the `.sjson` twin, which must be signed too.

use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::BTreeMap;

pub const INDEX_FORMAT: &str = "index:1.0";
pub const PRODUCTS_FORMAT: &str = "products:1.0";
pub const CONTENT_ID: &str = "com.node-bootstrap:artifacts";
pub const DATATYPE: &str = "content-download";
pub const PRODUCT_PREFIX: &str = "com.node-bootstrap";
pub const STREAMS_DIR: &str = "streams/v1";
pub const PRODUCTS_PATH: &str = "streams/v1/com.node-bootstrap-artifacts.json";

/// `streams/v1/index.json` or `.sjson`.
pub fn index_path(signed: bool) -> &'static str {
    if signed {
        "streams/v1/index.sjson"
    } else {
        "streams/v1/index.json"
    }
}

/// The `.sjson` twin of a `.json` path (unchanged for other names).
pub fn signed_twin(path: &str) -> String {
    match path.strip_suffix(".json") {
        Some(stem) => format!("{stem}.sjson"),
        None => path.to_string(),
    }
}

/// The product id of (name, series, arch).
pub fn product_id(name: &str, series: &str, arch: &str) -> String {
    format!("{PRODUCT_PREFIX}:{name}:{series}:{arch}")
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Index {
    pub format: String,
    #[serde(default)]
    pub updated: String,
    pub index: BTreeMap<String, IndexEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexEntry {
    pub format: String,
    #[serde(default)]
    pub datatype: String,
    #[serde(default)]
    pub updated: String,
    pub path: String,
    #[serde(default)]
    pub products: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Products {
    pub format: String,
    #[serde(default)]
    pub content_id: String,
    #[serde(default)]
    pub datatype: String,
    #[serde(default)]
    pub updated: String,
    pub products: BTreeMap<String, Product>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Product {
    pub name: String,
    pub series: String,
    pub arch: String,
    pub versions: BTreeMap<String, Version>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Version {
    pub items: BTreeMap<String, Item>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub ftype: String,
    pub size: u64,
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha512: Option<String>,
}

impl Item {
    /// Items must carry a hash and a path that stays below the base.
    pub fn check(&self, id: &str) -> Result<(), String> {
        if self.sha256.is_none() && self.sha512.is_none() {
            return Err(format!("item {id} has neither sha256 nor sha512"));
        }
        for (alg, h, len) in [("sha256", &self.sha256, 64), ("sha512", &self.sha512, 128)] {
            if let Some(h) = h
                && (h.len() != len || !h.bytes().all(|b| b.is_ascii_hexdigit()))
            {
                return Err(format!("item {id} has a malformed {alg}"));
            }
        }
        if self.path.is_empty()
            || self.path.starts_with('/')
            || self.path.split('/').any(|c| c == "..")
            || self.path.contains("://")
        {
            return Err(format!(
                "item {id} has path {:?}, which is not relative to the location",
                self.path
            ));
        }
        Ok(())
    }
}

/// Which versions a query accepts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum VersionMatch {
    /// Exactly this version string.
    Exact(String),
    /// The largest version whose first component is this major (seed 003).
    Major(u64),
    /// The largest version whose numeric components start with these
    /// (`17.03` accepts `17.03`, `17.03.2`, `17.3.9` and `17.03.2-ce`, not
    /// `17.06` or `17.030`): "the largest build of this major.minor".
    Prefix(String),
    /// The largest version.
    Latest,
}

impl VersionMatch {
    pub fn accepts(&self, v: &str) -> bool {
        match self {
            VersionMatch::Exact(e) => e == v,
            VersionMatch::Major(m) => major(v) == Some(*m),
            VersionMatch::Prefix(p) => match (numeric_parts(p), numeric_parts(v)) {
                (Some(p), Some(v)) => !p.is_empty() && v.starts_with(&p),
                _ => false,
            },
            VersionMatch::Latest => true,
        }
    }
}

impl std::fmt::Display for VersionMatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VersionMatch::Exact(v) => write!(f, "version {v}"),
            VersionMatch::Major(m) => write!(f, "the largest version {m}.x"),
            VersionMatch::Prefix(p) => write!(f, "the largest version {p}[.x]"),
            VersionMatch::Latest => write!(f, "the largest version"),
        }
    }
}

/// The numbers of `v` before any `-`/`+` suffix (`v17.03.2-ce` -> 17, 3, 2);
/// `None` when a component is not a number.
fn numeric_parts(v: &str) -> Option<Vec<u64>> {
    let core = v.trim_start_matches('v').split(['-', '+']).next()?;
    core.split('.').map(|c| c.parse().ok()).collect()
}

fn major(v: &str) -> Option<u64> {
    v.trim_start_matches('v')
        .split(['.', '-', '+', '_'])
        .next()?
        .parse()
        .ok()
}

/// Orders version strings component-wise: numbers numerically, other parts
/// lexically, a number after a non-number ("1.12" vs "1.12-rc1": the
/// shorter is larger when the longer continues with a pre-release).
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    let split = |s: &str| -> (Vec<String>, Option<String>) {
        let s = s.trim_start_matches('v');
        let (main, pre) = match s.split_once('-') {
            Some((m, p)) => (m, Some(p.to_string())),
            None => (s, None),
        };
        let main = main.split_once('+').map_or(main, |(m, _)| m);
        (main.split(['.', '_']).map(str::to_string).collect(), pre)
    };
    let (am, ap) = split(a);
    let (bm, bp) = split(b);
    for i in 0..am.len().max(bm.len()) {
        let x = am.get(i).map(String::as_str).unwrap_or("0");
        let y = bm.get(i).map(String::as_str).unwrap_or("0");
        let o = match (x.parse::<u64>(), y.parse::<u64>()) {
            (Ok(p), Ok(q)) => p.cmp(&q),
            _ => x.cmp(y),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    match (ap, bp) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Greater,
        (Some(_), None) => Ordering::Less,
        (Some(p), Some(q)) => compare_versions(&p, &q),
    }
}

/// Picks the version of `product` that `m` selects: the largest accepted.
pub fn select<'a>(product: &'a Product, m: &VersionMatch) -> Option<(&'a str, &'a Version)> {
    product
        .versions
        .iter()
        .filter(|(v, ver)| m.accepts(v) && !ver.items.is_empty())
        .max_by(|(a, _), (b, _)| compare_versions(a, b))
        .map(|(v, ver)| (v.as_str(), ver))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_order_numerically_with_prereleases_first() {
        let mut v = vec!["1.12", "17.03", "1.9", "17.03-rc1", "1.12.6", "v1.10"];
        v.sort_by(|a, b| compare_versions(a, b));
        assert_eq!(
            v,
            vec!["1.9", "v1.10", "1.12", "1.12.6", "17.03-rc1", "17.03"]
        );
    }

    #[test]
    fn selection_takes_the_largest_matching_major() {
        let item = Item {
            version: String::new(),
            ftype: "tgz".into(),
            size: 1,
            path: "a".into(),
            sha256: Some("0".repeat(64)),
            sha512: None,
        };
        let ver = |_: &str| Version {
            items: BTreeMap::from([("x".to_string(), item.clone())]),
        };
        let p = Product {
            name: "agent".into(),
            series: "flatcar".into(),
            arch: "amd64".into(),
            versions: ["1.2.0", "1.10.1", "2.0.0", "1.9.9"]
                .iter()
                .map(|v| (v.to_string(), ver(v)))
                .collect(),
        };
        assert_eq!(select(&p, &VersionMatch::Major(1)).unwrap().0, "1.10.1");
        assert_eq!(select(&p, &VersionMatch::Latest).unwrap().0, "2.0.0");
        assert_eq!(
            select(&p, &VersionMatch::Exact("1.2.0".into())).unwrap().0,
            "1.2.0"
        );
        assert!(select(&p, &VersionMatch::Major(3)).is_none());
    }

    #[test]
    fn prefix_takes_the_largest_build_of_a_major_minor() {
        let item = Item {
            version: String::new(),
            ftype: "torcx.tgz".into(),
            size: 1,
            path: "a".into(),
            sha256: None,
            sha512: Some("0".repeat(128)),
        };
        let p = Product {
            name: "docker-torcx".into(),
            series: "1632.3.0".into(),
            arch: "amd64-usr".into(),
            versions: [
                "1.12",
                "17.03.2",
                "17.03.10",
                "17.030",
                "17.06.1",
                "17.03.9-ce",
            ]
            .iter()
            .map(|v| {
                (
                    v.to_string(),
                    Version {
                        items: BTreeMap::from([("x".to_string(), item.clone())]),
                    },
                )
            })
            .collect(),
        };
        let pick = |s: &str| select(&p, &VersionMatch::Prefix(s.into())).map(|(v, _)| v);
        assert_eq!(pick("17.03"), Some("17.03.10"));
        assert_eq!(pick("17.3"), Some("17.03.10"), "numbers, not text");
        assert_eq!(pick("17.03.9"), Some("17.03.9-ce"));
        assert_eq!(pick("1.12"), Some("1.12"));
        assert_eq!(pick("17.06"), Some("17.06.1"));
        assert_eq!(pick("18.09"), None);
        assert_eq!(pick("17.0"), None, "17.03 is not a build of 17.0");
        assert_eq!(pick(""), None);
        assert!(!VersionMatch::Prefix("17.03".into()).accepts("17.03x"));
    }

    #[test]
    fn item_paths_must_stay_below_the_base() {
        let mut i = Item {
            version: "1".into(),
            ftype: String::new(),
            size: 1,
            path: "../x".into(),
            sha256: Some("a".repeat(64)),
            sha512: None,
        };
        assert!(i.check("x").is_err());
        i.path = "https://elsewhere/x".into();
        assert!(i.check("x").is_err());
        i.path = "pkgs/x.tgz".into();
        assert!(i.check("x").is_ok());
        i.sha256 = None;
        assert!(
            i.check("x")
                .unwrap_err()
                .contains("neither sha256 nor sha512")
        );
    }
}
