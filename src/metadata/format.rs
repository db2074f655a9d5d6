//! The simplestreams metadata format (seed 001), read and written the way
//! Canonical's simplestreams tools read and write it (docs/formats.md).
//!
//! Layout below a location's base:
//! ```text
//! streams/v1/index.json    {"format": "index:1.0", "index": {<content id>: {"path": "streams/v1/<file>.json", "products": [...]}}}
//! streams/v1/index.sjson   the same index, inline-signed (`gpg --clearsign`), its paths naming the `.sjson` product files
//! streams/v1/<file>.json   {"format": "products:1.0", "content_id": ..., "products": {<product id>: {"versions": {<version name>: {"items": {<item name>: {...}}}}}}}
//! streams/v1/<file>.sjson  the same product file, inline-signed
//! <item paths, relative to the base>
//! ```
//!
//! Reading a product file follows simplestreams (`util.expand_tree`,
//! `util.products_exdata`):
//! - `_aliases` at the top are expanded first: a field whose name has an
//!   alias table and whose string value is in it is replaced by the fields
//!   the table gives for that value;
//! - every item carries the string and number fields of each level above it
//!   (the file, its product, its version) unless it sets them itself. Writers
//!   "condense" trees by moving fields that all children share up a level
//!   (simplestreams' `products_condense`, which `json2streams` applies), so
//!   an item's `path`, `sha256`, `ftype` or `version` may sit at the version
//!   or product level.
//!
//! Product ids are whatever the writer chose: ours are
//! `com.node-bootstrap:<name>:<series>:<arch>` (the default of
//! `sources.product_id_template`), a Juju agent stream's are
//! `com.ubuntu.juju:<series version>:<arch>` with no `name` field at all.
//! Queries name a product by its full id.
//!
//! An item's artifact version is its (possibly inherited) `version` field,
//! else its version's name: our writer uses the artifact version as the
//! version name, Juju uses a publication date as the version name and puts
//! the agent version in the items.
//!
//! Version order: numeric component by component (`1.10` after `1.9`), a
//! pre-release (`-rc1`) before its release ([`compare_versions`]); seed 003
//! asks for "the largest version". simplestreams' own `--max` keeps the
//! largest version *names* in string order instead, which agrees on date
//! names but not on `1.9` against `1.10`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::cmp::Ordering;
use std::collections::BTreeMap;

pub const INDEX_FORMAT: &str = "index:1.0";
pub const PRODUCTS_FORMAT: &str = "products:1.0";
pub const CONTENT_ID: &str = "com.node-bootstrap:artifacts";
pub const DATATYPE: &str = "content-download";
pub const STREAMS_DIR: &str = "streams/v1";
pub const PRODUCTS_PATH: &str = "streams/v1/com.node-bootstrap-artifacts.json";
/// The product id of our own artifacts, `{name}`, `{series}` and `{arch}`
/// filled in (the default of `sources.product_id_template`).
pub const DEFAULT_PRODUCT_ID_TEMPLATE: &str = "com.node-bootstrap:{name}:{series}:{arch}";
/// The top-level key of simplestreams' alias tables.
const ALIASES: &str = "_aliases";

/// `streams/v1/index.json` or `.sjson`.
pub fn index_path(signed: bool) -> &'static str {
    if signed {
        "streams/v1/index.sjson"
    } else {
        "streams/v1/index.json"
    }
}

/// The `.sjson` twin of a `.json` path (unchanged for other names), as
/// simplestreams' `util.signed_fname` names it.
pub fn signed_twin(path: &str) -> String {
    match path.strip_suffix(".json") {
        Some(stem) => format!("{stem}.sjson"),
        None => path.to_string(),
    }
}

/// Whether a metadata path names an inline-signed file.
pub fn is_signed_path(path: &str) -> bool {
    path.ends_with(".sjson")
}

/// Fills a product id template (`{name}`, `{series}`, `{arch}`).
pub fn product_id(template: &str, name: &str, series: &str, arch: &str) -> String {
    template
        .replace("{name}", name)
        .replace("{series}", series)
        .replace("{arch}", arch)
}

/// `updated` as simplestreams writes it (`util.timestamp()`, RFC 2822:
/// `Mon, 23 Nov 2026 13:02:42 +0000`).
pub fn timestamp(t: time::OffsetDateTime) -> String {
    let f = time::macros::format_description!(
        "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] +0000"
    );
    t.to_offset(time::UtcOffset::UTC)
        .format(&f)
        .expect("a UTC time formats")
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
    #[serde(default)]
    pub format: String,
    #[serde(default)]
    pub datatype: String,
    #[serde(default)]
    pub updated: String,
    pub path: String,
    #[serde(default)]
    pub products: Vec<String>,
}

impl IndexEntry {
    /// Whether this entry may hold `product_id` (an entry that lists no
    /// products may hold any).
    pub fn may_hold(&self, product_id: &str) -> bool {
        self.products.is_empty() || self.products.iter().any(|p| p == product_id)
    }
}

/// A product file, expanded (see module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct Products {
    pub format: String,
    pub content_id: String,
    pub products: BTreeMap<String, Product>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Product {
    /// The product's own fields with the file's (`name`, `series`, `arch`,
    /// `release`, ...), as strings.
    pub fields: BTreeMap<String, String>,
    pub versions: BTreeMap<String, Version>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Version {
    pub items: BTreeMap<String, Item>,
}

/// One item with everything it inherits. Items of other datatypes (image
/// ids) have no `path`: they are not artifacts to download.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub version: Option<String>,
    pub ftype: Option<String>,
    pub size: Option<String>,
    pub path: Option<String>,
    pub sha256: Option<String>,
    pub sha512: Option<String>,
    pub md5: Option<String>,
}

/// A downloadable item whose fields have been checked ([`Item::artifact`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifact {
    /// The artifact's version (the item's `version`, else its version name).
    pub version: String,
    pub ftype: String,
    pub size: u64,
    /// Relative to the location's base.
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha512: Option<String>,
}

impl Item {
    fn from_fields(f: &BTreeMap<String, String>) -> Item {
        let get = |k: &str| f.get(k).cloned();
        Item {
            version: get("version"),
            ftype: get("ftype"),
            size: get("size"),
            path: get("path"),
            sha256: get("sha256"),
            sha512: get("sha512"),
            md5: get("md5"),
        }
    }

    /// The artifact version: the item's `version`, else `version_name`.
    pub fn artifact_version<'a>(&'a self, version_name: &'a str) -> &'a str {
        self.version.as_deref().unwrap_or(version_name)
    }

    /// Checks what a download needs: a path below the base, a size, and a
    /// sha256 or sha512 (md5 alone is not a checksum worth trusting).
    pub fn artifact(&self, id: &str, version_name: &str) -> Result<Artifact, String> {
        let path = match self.path.as_deref() {
            Some(p) if !p.is_empty() => p,
            _ => return Err(format!("item {id} has no path (it is not a download)")),
        };
        if path.starts_with('/') || path.split('/').any(|c| c == "..") || path.contains("://") {
            return Err(format!(
                "item {id} has path {path:?}, which is not relative to the location"
            ));
        }
        let size = match self.size.as_deref() {
            None => return Err(format!("item {id} has no size")),
            Some(s) => parse_size(s).ok_or_else(|| format!("item {id} has size {s:?}"))?,
        };
        if self.sha256.is_none() && self.sha512.is_none() {
            return Err(if self.md5.is_some() {
                format!(
                    "item {id} has only an md5 checksum, which is not accepted: \
                     it needs a sha256 or sha512"
                )
            } else {
                format!("item {id} has neither sha256 nor sha512")
            });
        }
        for (alg, h, len) in [("sha256", &self.sha256, 64), ("sha512", &self.sha512, 128)] {
            if let Some(h) = h
                && (h.len() != len || !h.bytes().all(|b| b.is_ascii_hexdigit()))
            {
                return Err(format!("item {id} has a malformed {alg}"));
            }
        }
        Ok(Artifact {
            version: self.artifact_version(version_name).to_string(),
            ftype: self.ftype.clone().unwrap_or_default(),
            size,
            path: path.to_string(),
            sha256: self.sha256.clone(),
            sha512: self.sha512.clone(),
        })
    }
}

/// A size as simplestreams' `stringitems` leaves it: `123`, or `123.0`
/// from a writer that wrote a float.
fn parse_size(s: &str) -> Option<u64> {
    s.parse()
        .ok()
        .or_else(|| s.strip_suffix(".0").and_then(|i| i.parse().ok()))
}

/// The string and number fields of a level (`util.stringitems`).
fn string_fields(m: &Map<String, Value>, into: &mut BTreeMap<String, String>) {
    for (k, v) in m {
        match v {
            Value::String(s) => {
                into.insert(k.clone(), s.clone());
            }
            Value::Number(n) => {
                into.insert(k.clone(), n.to_string());
            }
            _ => {}
        }
    }
}

/// simplestreams' `expand_data`: alias references replaced by their fields.
fn expand_aliases(v: &mut Value, aliases: &Map<String, Value>) {
    match v {
        Value::Object(m) => {
            let keys: Vec<String> = m.keys().filter(|k| *k != ALIASES).cloned().collect();
            for k in keys {
                let Some(Value::Object(table)) = aliases.get(&k) else {
                    continue;
                };
                if let Some(Value::String(name)) = m.get(&k)
                    && let Some(Value::Object(fields)) = table.get(name)
                {
                    let fields = fields.clone();
                    m.extend(fields);
                }
            }
            for (k, child) in m.iter_mut() {
                if k != ALIASES {
                    expand_aliases(child, aliases);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|c| expand_aliases(c, aliases)),
        _ => {}
    }
}

/// The children of one level (`products`, `versions` or `items`), each an
/// object; `parent` names the level for messages.
fn children<'a>(
    level: &'a Map<String, Value>,
    key: &str,
    parent: &str,
) -> Result<Vec<(&'a String, &'a Map<String, Value>)>, String> {
    let kind = key.strip_suffix('s').unwrap_or(key);
    match level.get(key) {
        None => Ok(Vec::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::Object(o) => Ok((k, o)),
                _ => Err(format!("{kind} {k:?} of {parent} is not an object")),
            })
            .collect(),
        Some(_) => Err(format!("{key:?} of {parent} is not an object")),
    }
}

impl Products {
    /// Parses and expands a product file (see module docs); the message
    /// says what is wrong.
    pub fn parse(text: &str) -> Result<Products, String> {
        let mut tree: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if let Some(Value::Object(aliases)) = tree.get(ALIASES).cloned() {
            expand_aliases(&mut tree, &aliases);
        }
        let Value::Object(top) = &tree else {
            return Err("is not a JSON object".into());
        };
        let format = match top.get("format") {
            Some(Value::String(f)) => f.clone(),
            _ => return Err("has no \"format\"".into()),
        };
        if !matches!(top.get("products"), Some(Value::Object(_))) {
            return Err("has no \"products\" object".into());
        }
        let mut file_fields = BTreeMap::new();
        string_fields(top, &mut file_fields);
        let mut products = BTreeMap::new();
        for (pid, p) in children(top, "products", "the file")? {
            let mut pf = file_fields.clone();
            string_fields(p, &mut pf);
            let mut versions = BTreeMap::new();
            for (vname, v) in children(p, "versions", &format!("product {pid}"))? {
                let mut vf = pf.clone();
                string_fields(v, &mut vf);
                let mut items = BTreeMap::new();
                for (iname, i) in children(v, "items", &format!("version {vname} of {pid}"))? {
                    let mut f = vf.clone();
                    string_fields(i, &mut f);
                    items.insert(iname.clone(), Item::from_fields(&f));
                }
                versions.insert(vname.clone(), Version { items });
            }
            products.insert(
                pid.clone(),
                Product {
                    fields: pf,
                    versions,
                },
            );
        }
        Ok(Products {
            format,
            content_id: file_fields.get("content_id").cloned().unwrap_or_default(),
            products,
        })
    }
}

impl Product {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }

    /// Every downloadable item: (version name, item name, item).
    pub fn downloads(&self) -> impl Iterator<Item = (&str, &str, &Item)> {
        self.versions.iter().flat_map(|(v, ver)| {
            ver.items
                .iter()
                .filter(|(_, i)| i.path.is_some())
                .map(move |(n, i)| (v.as_str(), n.as_str(), i))
        })
    }

    /// The artifact versions it offers, in version order.
    pub fn artifact_versions(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self
            .downloads()
            .map(|(vn, _, i)| i.artifact_version(vn))
            .collect();
        v.sort_by(|a, b| compare_versions(a, b));
        v.dedup();
        v
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

/// The item a query picked.
#[derive(Debug, Clone, Copy)]
pub struct Pick<'a> {
    pub version_name: &'a str,
    pub item_name: &'a str,
    pub item: &'a Item,
}

/// Picks the downloadable item of `product` that `m` selects: the largest
/// accepted artifact version; among equals the latest version name, then
/// the first item name.
pub fn select<'a>(product: &'a Product, m: &VersionMatch) -> Option<Pick<'a>> {
    product
        .downloads()
        .filter(|(vn, _, i)| m.accepts(i.artifact_version(vn)))
        .max_by(|(va, na, a), (vb, nb, b)| {
            compare_versions(a.artifact_version(va), b.artifact_version(vb))
                .then_with(|| compare_versions(va, vb))
                .then_with(|| nb.cmp(na))
        })
        .map(|(version_name, item_name, item)| Pick {
            version_name,
            item_name,
            item,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

    #[test]
    fn versions_order_numerically_with_prereleases_first() {
        let mut v = vec!["1.12", "17.03", "1.9", "17.03-rc1", "1.12.6", "v1.10"];
        v.sort_by(|a, b| compare_versions(a, b));
        assert_eq!(
            v,
            vec!["1.9", "v1.10", "1.12", "1.12.6", "17.03-rc1", "17.03"]
        );
    }

    fn product(versions: &[&str]) -> Product {
        let items: Vec<String> = versions
            .iter()
            .map(|v| {
                format!(
                    r#""{v}": {{"items": {{"x": {{"path": "a/{v}", "size": 1, "sha256": "{HASH}"}}}}}}"#
                )
            })
            .collect();
        let text = format!(
            r#"{{"format": "products:1.0", "products": {{"p": {{"versions": {{{}}}}}}}}}"#,
            items.join(",")
        );
        Products::parse(&text)
            .unwrap()
            .products
            .remove("p")
            .unwrap()
    }

    #[test]
    fn selection_takes_the_largest_matching_major() {
        let p = product(&["1.2.0", "1.10.1", "2.0.0", "1.9.9"]);
        let pick = |m| select(&p, &m).map(|p| p.version_name);
        assert_eq!(pick(VersionMatch::Major(1)), Some("1.10.1"));
        assert_eq!(pick(VersionMatch::Latest), Some("2.0.0"));
        assert_eq!(pick(VersionMatch::Exact("1.2.0".into())), Some("1.2.0"));
        assert_eq!(pick(VersionMatch::Major(3)), None);
        assert_eq!(p.artifact_versions(), ["1.2.0", "1.9.9", "1.10.1", "2.0.0"]);
    }

    #[test]
    fn prefix_takes_the_largest_build_of_a_major_minor() {
        let p = product(&[
            "1.12",
            "17.03.2",
            "17.03.10",
            "17.030",
            "17.06.1",
            "17.03.9-ce",
        ]);
        let pick = |s: &str| select(&p, &VersionMatch::Prefix(s.into())).map(|p| p.version_name);
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
    fn items_inherit_the_fields_of_every_level_above_them() {
        // What json2streams writes: shared fields condensed upwards.
        let text = format!(
            r#"{{"format": "products:1.0", "content_id": "c", "ftype": "tar.gz",
                "products": {{"com.ubuntu.juju:16.04:amd64": {{"arch": "amd64", "release": "xenial",
                  "versions": {{
                    "20190110": {{"version": "2.5.0", "items": {{
                        "2.5.0-xenial-amd64": {{"path": "agent/2.5.0.tgz", "size": 10, "sha256": "{HASH}"}}}}}},
                    "20180101": {{"items": {{
                        "2.4.9-xenial-amd64": {{"version": "2.4.9", "ftype": "tgz", "path": "agent/2.4.9.tgz", "size": 9, "sha256": "{HASH}"}}}}}}}}}}}}}}"#
        );
        let p = Products::parse(&text).unwrap();
        let prod = &p.products["com.ubuntu.juju:16.04:amd64"];
        assert_eq!(prod.field("release"), Some("xenial"));
        assert_eq!(prod.field("name"), None);
        let pick = select(prod, &VersionMatch::Major(2)).unwrap();
        assert_eq!(pick.version_name, "20190110");
        let a = pick
            .item
            .artifact(pick.item_name, pick.version_name)
            .unwrap();
        assert_eq!(a.version, "2.5.0", "the version level's field");
        assert_eq!(a.ftype, "tar.gz", "the file level's field");
        let old = &prod.versions["20180101"].items["2.4.9-xenial-amd64"];
        assert_eq!(
            old.ftype.as_deref(),
            Some("tgz"),
            "an item's own field wins"
        );
    }

    #[test]
    fn aliases_expand_before_inheritance() {
        let text = format!(
            r#"{{"format": "products:1.0",
                "_aliases": {{"crsn": {{"xenial": {{"release": "xenial", "version": "16.04"}}}}}},
                "products": {{"p": {{"crsn": "xenial", "versions": {{"v1": {{"items": {{
                    "i": {{"path": "x", "size": "3", "sha256": "{HASH}"}}}}}}}}}}}}}}"#
        );
        let p = Products::parse(&text).unwrap();
        let prod = &p.products["p"];
        assert_eq!(prod.field("release"), Some("xenial"));
        let a = prod.versions["v1"].items["i"].artifact("i", "v1").unwrap();
        assert_eq!((a.version.as_str(), a.size), ("16.04", 3));
    }

    #[test]
    fn artifacts_need_a_path_below_the_base_a_size_and_a_strong_hash() {
        let mut i = Item {
            version: Some("1".into()),
            ftype: None,
            size: Some("1".into()),
            path: Some("../x".into()),
            sha256: Some("a".repeat(64)),
            sha512: None,
            md5: None,
        };
        assert!(i.artifact("x", "1").is_err());
        i.path = Some("https://elsewhere/x".into());
        assert!(i.artifact("x", "1").is_err());
        i.path = Some("pkgs/x.tgz".into());
        assert!(i.artifact("x", "1").is_ok());
        i.sha256 = None;
        assert!(
            i.artifact("x", "1")
                .unwrap_err()
                .contains("neither sha256 nor sha512")
        );
        i.md5 = Some("d41d8cd98f00b204e9800998ecf8427e".into());
        let e = i.artifact("x", "1").unwrap_err();
        assert!(e.contains("only an md5 checksum"), "{e}");
        i.sha512 = Some("b".repeat(128));
        i.size = None;
        assert!(i.artifact("x", "1").unwrap_err().contains("no size"));
        i.size = Some("12.0".into());
        assert_eq!(i.artifact("x", "1").unwrap().size, 12);
    }

    #[test]
    fn timestamps_are_rfc_2822_as_simplestreams_writes_them() {
        let t = time::macros::datetime!(2026-11-23 13:02:42 UTC);
        assert_eq!(timestamp(t), "Mon, 23 Nov 2026 13:02:42 +0000");
    }

    #[test]
    fn malformed_trees_say_what_is_wrong() {
        assert!(
            Products::parse("[]")
                .unwrap_err()
                .contains("not a JSON object")
        );
        assert!(
            Products::parse(r#"{"format":"products:1.0"}"#)
                .unwrap_err()
                .contains("no \"products\"")
        );
        let e =
            Products::parse(r#"{"format":"products:1.0","products":{"p":{"versions":{"v":3}}}}"#)
                .unwrap_err();
        assert_eq!(e, "version \"v\" of product p is not an object");
    }
}
