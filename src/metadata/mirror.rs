//! Mirrors: `metadata generate` (the metadata of a directory of
//! artifacts, signed or not) and `metadata validate` (a mirror read as a
//! node reads it, every item downloaded and checked).

use super::config::{self, LocationKind, UserLocation};
use super::fetch::fetch_item;
use super::format;
use super::location::{self, Location};
use super::search::{Miss, load_keyring, load_location};
use super::sign;
use super::{Found, Inputs};
use crate::error::{Context as _, Error, ErrorClass, Result};
use crate::fsutil;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// What `metadata generate` wrote.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GenerateReport {
    pub items: usize,
    pub products: usize,
    pub signed: bool,
    pub written: Vec<PathBuf>,
    /// Files that do not follow the naming scheme (not listed).
    pub ignored: Vec<PathBuf>,
}

/// `<name>_<version>_<series>_<arch>[.<ext>]` -> (name, version, series, arch, ftype).
pub fn parse_artifact_name(file: &str) -> Option<(String, String, String, String, String)> {
    let parts: Vec<&str> = file.split('_').collect();
    if parts.len() != 4 || parts.iter().any(|p| p.is_empty()) {
        return None;
    }
    let (arch, ftype) = match parts[3].split_once('.') {
        Some((a, e)) => (a, e),
        None => (parts[3], ""),
    };
    if arch.is_empty() || parts[0].contains(':') || parts[2].contains(':') {
        return None;
    }
    Some((
        parts[0].to_string(),
        parts[1].to_string(),
        parts[2].to_string(),
        arch.to_string(),
        ftype.to_string(),
    ))
}

fn scan(dir: &Path, base: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries = std::fs::read_dir(dir).ctx(ErrorClass::BadInput, || {
        format!("failed to read {}", dir.display())
    })?;
    let mut list: Vec<_> = entries.filter_map(|e| e.ok()).collect();
    list.sort_by_key(|e| e.file_name());
    for e in list {
        let p = e.path();
        let ft = e.file_type().ctx(ErrorClass::BadInput, || {
            format!("failed to inspect {}", p.display())
        })?;
        if ft.is_dir() {
            if p == base.join("streams") {
                continue;
            }
            scan(&p, base, out)?;
        } else if ft.is_file() && !e.file_name().to_string_lossy().starts_with('.') {
            out.push(p);
        }
    }
    Ok(())
}

fn hash_file_sync(p: &Path) -> Result<(u64, String, String)> {
    let read_error = || format!("failed to read {}", p.display());
    let f = std::fs::File::open(p).ctx(ErrorClass::BadInput, read_error)?;
    let d = crate::digest::digest(f, true, || true).ctx(ErrorClass::BadInput, read_error)?;
    Ok((d.size, d.sha256, d.sha512))
}

/// `metadata generate <dir>`: see module docs. Writes what simplestreams'
/// own writers write: `index.json` naming `.json` product files; with a
/// signer also `index.sjson` naming the `.sjson` product files, each the
/// same JSON inline-signed (`util.make_signed_content_paths`); `updated` in
/// RFC 2822. Without a signer, stale signed files (which readers would
/// otherwise prefer) are removed.
pub fn generate(dir: &Path, signer: Option<&sign::Signer>) -> Result<GenerateReport> {
    let mut files = Vec::new();
    scan(dir, dir, &mut files)?;
    let mut report = GenerateReport {
        signed: signer.is_some(),
        ..Default::default()
    };
    let updated = format::timestamp(time::OffsetDateTime::now_utc());
    let mut products = serde_json::Map::new();
    for f in files {
        let name = f
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let Some((pname, version, series, arch, ftype)) = parse_artifact_name(&name) else {
            tracing::warn!(step = "metadata", path = %f.display(),
                "ignored: not named <name>_<version>_<series>_<arch>[.<ext>]");
            report.ignored.push(f);
            continue;
        };
        let (size, sha256, sha512) = hash_file_sync(&f)?;
        let rel = f
            .strip_prefix(dir)
            .expect("scanned below dir")
            .to_string_lossy()
            .into_owned();
        let id = format::product_id(format::DEFAULT_PRODUCT_ID_TEMPLATE, &pname, &series, &arch);
        let product = products.entry(id).or_insert_with(
            || serde_json::json!({"name": pname, "series": series, "arch": arch, "versions": {}}),
        );
        let versions = product["versions"]
            .as_object_mut()
            .expect("made with a versions object");
        let v = versions
            .entry(version.clone())
            .or_insert_with(|| serde_json::json!({"items": {}}));
        v["items"].as_object_mut().expect("made with items").insert(
            name.clone(),
            serde_json::json!({"version": version, "ftype": ftype, "size": size,
                "path": rel, "sha256": sha256, "sha512": sha512}),
        );
        report.items += 1;
    }
    report.products = products.len();
    let index = |path: &str| {
        serde_json::json!({
            "format": format::INDEX_FORMAT,
            "updated": updated,
            "index": {format::CONTENT_ID: {
                "format": format::PRODUCTS_FORMAT,
                "datatype": format::DATATYPE,
                "updated": updated,
                "path": path,
                "products": products.keys().collect::<Vec<_>>(),
            }},
        })
    };
    let pretty =
        |v: &serde_json::Value| serde_json::to_string_pretty(v).expect("serializes") + "\n";
    let products_text = pretty(&serde_json::json!({
        "format": format::PRODUCTS_FORMAT,
        "content_id": format::CONTENT_ID,
        "datatype": format::DATATYPE,
        "updated": updated,
        "products": products,
    }));
    let signed_products = format::signed_twin(format::PRODUCTS_PATH);
    // Product files before the index, signed before unsigned, so a reader
    // never sees an index naming a file not yet written.
    let mut docs = Vec::new();
    if let Some(s) = signer {
        docs.push((signed_products.clone(), s.sign(&products_text)?));
        docs.push((
            format::index_path(true).to_string(),
            s.sign(&pretty(&index(&signed_products)))?,
        ));
    } else {
        for rel in [format::index_path(true), signed_products.as_str()] {
            let p = dir.join(rel);
            if p.exists() {
                std::fs::remove_file(&p).ctx(ErrorClass::Internal, || {
                    format!("failed to remove stale signed metadata {}", p.display())
                })?;
                tracing::warn!(step = "metadata", path = %p.display(), "removed stale signed metadata");
            }
        }
    }
    docs.push((format::PRODUCTS_PATH.to_string(), products_text));
    docs.push((
        format::index_path(false).to_string(),
        pretty(&index(format::PRODUCTS_PATH)),
    ));
    for (rel, text) in docs {
        let p = dir.join(&rel);
        fsutil::write_file("metadata", &p, text.as_bytes(), fsutil::MODE_PUBLIC)?;
        report.written.push(p);
    }
    Ok(report)
}

/// A product in our own namespace whose `name`, `series` and `arch` (where
/// it has all three) do not make its id; foreign products are whatever
/// their writer says.
fn own_product_mismatch(id: &str, product: &format::Product) -> Option<String> {
    let own = format::product_id(format::DEFAULT_PRODUCT_ID_TEMPLATE, "", "", "");
    let own_prefix = own.split(':').next().unwrap_or_default();
    if !id.starts_with(&format!("{own_prefix}:")) {
        return None;
    }
    let (name, series, arch) = (
        product.field("name")?,
        product.field("series")?,
        product.field("arch")?,
    );
    let want = format::product_id(format::DEFAULT_PRODUCT_ID_TEMPLATE, name, series, arch);
    (want != id).then(|| format!("product {id} says name={name} series={series} arch={arch}"))
}

/// What `metadata validate` found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ValidateReport {
    pub location: String,
    pub signed: bool,
    pub products: usize,
    pub items: usize,
    pub problems: Vec<String>,
}

/// Parses a location for `metadata validate`: a path, `file://`,
/// `http(s)://`, or `s3://bucket/prefix` (S3 connection settings from
/// `assets.s3`, if any, else the standard AWS chain).
pub fn parse_validate_location(config: &Inputs<'_>, s: &str) -> Result<Location> {
    if let Some(rest) = s.strip_prefix("s3://") {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(Error::bad_input(format!("{s:?} names no bucket")));
        }
        let s3 = match config.s3 {
            // The cluster's connection settings (endpoint, region), this bucket.
            Some(s3) => {
                let mut s3 = s3.clone();
                s3.bucket = bucket.to_string();
                s3.key = prefix.trim_matches('/').to_string();
                s3
            }
            None => crate::assets::config::S3Settings::for_prefix(bucket, prefix)
                .map_err(|e| Error::bad_input(format!("{s:?}: {}", e.message)))?,
        };
        return Ok(Location::S3(Box::new(s3)));
    }
    match config::parse_location("location", s) {
        Ok(UserLocation::Dir(d)) => Ok(Location::Dir(d)),
        Ok(UserLocation::Http(u)) => Ok(Location::Http(u)),
        Err(e) => Err(Error::bad_input(format!("{s:?}: {}", e.message))),
    }
}

/// `metadata validate <location>`: reads the mirror as a node would
/// (signed first; unsigned only with `allow_unsigned`), then downloads and
/// checks every item. Problems are collected, not stopped at.
pub async fn validate(
    config: &Inputs<'_>,
    loc: &Location,
    allow_unsigned: bool,
) -> Result<ValidateReport> {
    let keyring = load_keyring(config);
    // Unsigned metadata is read (signed is still tried first) and refused
    // below unless `allow_unsigned`: the refusal then names the flag, not
    // the node's setting.
    let mut sources = config.sources.clone();
    sources.allow_unsigned = vec![LocationKind::Url];
    let c = Inputs {
        sources: &sources,
        ..*config
    };
    let loaded = match load_location(&c, LocationKind::Url, loc, &keyring, None).await {
        Ok(l) => l,
        Err(Miss::Tampered(r)) => return Err(Error::verification(format!("{loc}: {r}"))),
        Err(Miss::Unreachable(r)) => return Err(Error::retryable(format!("{loc}: {r}"))),
        Err(Miss::Plain(r)) => return Err(Error::bad_input(format!("{loc}: {r}"))),
        // Off the node (an operator's machine) the node's keyring is not
        // there: retrying cannot help, the command line can.
        Err(Miss::NoKeyring(e)) => {
            return Err(Error::config(format!(
                "{loc}: has signed metadata, and the keyring to verify it cannot be read ({e}): \
                 pass --keyring <public key> (on a node: sources.keyring)"
            )));
        }
    };
    if !loaded.signed && !allow_unsigned {
        return Err(Error::bad_input(format!(
            "{loc}: has only unsigned metadata ({}); pass --allow-unsigned to accept it (a node \
             uses it only where sources.allow_unsigned names the location)",
            format::index_path(false)
        )));
    }
    let mut report = ValidateReport {
        location: loc.to_string(),
        signed: loaded.signed,
        ..Default::default()
    };
    for p in &loaded.products {
        for (id, product) in &p.products {
            report.products += 1;
            if let Some(problem) = own_product_mismatch(id, product) {
                report.problems.push(problem);
            }
            for (version_name, name, item) in product.downloads() {
                report.items += 1;
                let item = match item.artifact(name, version_name) {
                    Ok(a) => a,
                    Err(e) => {
                        report.problems.push(format!("{id} {version_name}: {e}"));
                        continue;
                    }
                };
                let what = format!("{id} {version_name} {name}");
                let dest = location::Scratch::new();
                let found = Found {
                    kind: LocationKind::Url,
                    location: loc.to_string(),
                    signed: loaded.signed,
                    product_id: id.clone(),
                    version: item.version.clone(),
                    version_name: version_name.to_string(),
                    item_name: name.to_string(),
                    url: loc.resolve(&item.path),
                    item,
                    skipped: vec![],
                    base: Some(loc.clone()),
                };
                match fetch_item(&c, &found, &dest.0).await {
                    Ok(()) => {
                        tracing::info!(step = "metadata", url = %found.url, "item verified")
                    }
                    Err(e) => report.problems.push(format!("{what}: {e}")),
                }
            }
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifact_names_follow_the_scheme() {
        assert_eq!(
            parse_artifact_name("docker_17.03_1520.3.0_amd64.torcx.tgz"),
            Some((
                "docker".into(),
                "17.03".into(),
                "1520.3.0".into(),
                "amd64".into(),
                "torcx.tgz".into()
            ))
        );
        assert_eq!(
            parse_artifact_name("node-bootstrap_0.2.0_flatcar_arm64")
                .unwrap()
                .4,
            ""
        );
        assert!(parse_artifact_name("README.md").is_none());
        assert!(parse_artifact_name("a_b_c").is_none());
        assert!(parse_artifact_name("a__c_d").is_none());
    }
}
