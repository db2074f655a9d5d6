//! The search path ([`find`], [`find_first`], [`find_all`]): its
//! locations in order, each read signed first (unsigned only where
//! allowed), and why each location did not serve a query.

use super::config::{LocationKind, UserLocation};
use super::format::{self, Artifact, Index, Products, VersionMatch};
use super::location::{FetchError, Location};
use super::{ArtifactQuery, Found, Inputs, Skipped};
use crate::error::{Error, Result};

/// The locations of the search path, in order.
pub fn search_path(config: &Inputs<'_>) -> Vec<(LocationKind, Location)> {
    let s = &config.sources;
    let mut v = Vec::new();
    if let Some(d) = &s.dev_dir {
        v.push((LocationKind::Dev, Location::Dir(d.clone())));
    }
    v.push((LocationKind::Local, Location::Dir(s.local_dir.clone())));
    match &s.url {
        Some(UserLocation::Dir(d)) => v.push((LocationKind::Url, Location::Dir(d.clone()))),
        Some(UserLocation::Http(u)) => v.push((LocationKind::Url, Location::Http(u.clone()))),
        None => {}
    }
    if s.use_cluster_bucket
        && let Some(s3) = config.s3
    {
        let mut b = s3.clone();
        b.key = s.bucket_prefix.clone();
        v.push((LocationKind::Bucket, Location::S3(Box::new(b))));
    }
    if let Some(u) = &s.default_url {
        v.push((LocationKind::Default, Location::Http(u.clone())));
    }
    v
}

/// Why one location did not answer.
pub(super) enum Miss {
    /// Not there / no match: go on.
    Plain(String),
    /// Signed metadata failed verification.
    Tampered(String),
    /// Could not ask (network, permissions).
    Unreachable(String),
    /// Signed metadata, and the keyring to verify it cannot be read (the
    /// error reading it): as good as unreachable while searching, a missing
    /// `--keyring` to `metadata validate`.
    NoKeyring(String),
}

/// Why a location with signed metadata and no readable keyring did not serve.
fn unverifiable(keyring_error: &str) -> String {
    format!("has signed metadata but it cannot be verified: {keyring_error}")
}

pub(super) struct Loaded {
    pub(super) signed: bool,
    pub(super) products: Vec<Products>,
    /// Every product id the index lists (also of the files not read).
    listed: Vec<String>,
}

/// How a location is read: where, with which settings and keys.
struct Reader<'a> {
    config: &'a Inputs<'a>,
    kind: LocationKind,
    loc: &'a Location,
    keyring: &'a std::result::Result<crate::openpgp::Keyring, String>,
}

/// Reads a location's metadata (signed first), see module docs.
pub(super) async fn load_location(
    config: &Inputs<'_>,
    kind: LocationKind,
    loc: &Location,
    keyring: &std::result::Result<crate::openpgp::Keyring, String>,
    product_filter: Option<&str>,
) -> std::result::Result<Loaded, Miss> {
    let r = Reader {
        config,
        kind,
        loc,
        keyring,
    };
    let (signed, index) = r.index().await?;
    let mut products = Vec::new();
    for (content_id, entry) in &index.index {
        if let Some(id) = product_filter
            && !entry.may_hold(id)
        {
            continue;
        }
        if entry.path.starts_with('/') || entry.path.split('/').any(|c| c == "..") {
            return Err(Miss::Plain(format!(
                "index entry {content_id} has path {:?} outside the location",
                entry.path
            )));
        }
        // A signed index names the signed product files (as simplestreams
        // writes it); one that names `.json` files is read through their
        // `.sjson` twins, never unsigned.
        let rel = if signed {
            format::signed_twin(&entry.path)
        } else {
            entry.path.clone()
        };
        products.push(r.products(&rel).await?);
    }
    let listed = index
        .index
        .values()
        .flat_map(|e| e.products.iter().cloned())
        .collect();
    Ok(Loaded {
        signed,
        products,
        listed,
    })
}

impl Reader<'_> {
    async fn get(&self, rel: &str) -> std::result::Result<Vec<u8>, FetchError> {
        let s = &self.config.sources;
        self.loc.get(rel, s.timeout, s.attempts).await
    }

    /// Verifies an inline-signed file; the error is the location's miss.
    fn verified(&self, bytes: &[u8], rel: &str) -> std::result::Result<String, Miss> {
        let ring = self
            .keyring
            .as_ref()
            .map_err(|e| Miss::NoKeyring(e.clone()))?;
        ring.verify_cleartext(bytes, &self.loc.resolve(rel))
            .map_err(|e| Miss::Tampered(format!("signed metadata rejected: {e}")))
    }

    fn text(&self, bytes: Vec<u8>, rel: &str) -> std::result::Result<String, Miss> {
        String::from_utf8(bytes)
            .map_err(|_| Miss::Plain(format!("{} is not UTF-8", self.loc.resolve(rel))))
    }

    /// The index, signed (`index.sjson`) before unsigned (`index.json`,
    /// only where allowed); says whether it was signed.
    async fn index(&self) -> std::result::Result<(bool, Index), Miss> {
        let signed_path = format::index_path(true);
        let unsigned_path = format::index_path(false);
        let (signed, text) = match self.get(signed_path).await {
            Ok(bytes) => (true, self.verified(&bytes, signed_path)?),
            Err(FetchError::Failed(e)) => {
                return Err(Miss::Unreachable(format!("unreachable: {e}")));
            }
            Err(FetchError::NotFound) => match self.get(unsigned_path).await {
                Ok(bytes) => {
                    let s = &self.config.sources;
                    if self.kind != LocationKind::Dev && !s.allow_unsigned.contains(&self.kind) {
                        return Err(Miss::Plain(format!(
                            "has only unsigned metadata ({unsigned_path}), and sources.allow_unsigned does not include {:?}",
                            self.kind.as_str()
                        )));
                    }
                    (false, self.text(bytes, unsigned_path)?)
                }
                Err(FetchError::NotFound) => {
                    return Err(Miss::Plain(format!(
                        "no metadata ({signed_path} nor {unsigned_path})"
                    )));
                }
                Err(FetchError::Failed(e)) => {
                    return Err(Miss::Unreachable(format!("unreachable: {e}")));
                }
            },
        };
        let index: Index = serde_json::from_str(&text).map_err(|e| {
            Miss::Plain(format!(
                "{} is not a valid index: {e}",
                self.loc.resolve(format::index_path(signed))
            ))
        })?;
        if index.format != format::INDEX_FORMAT {
            return Err(Miss::Plain(format!(
                "index format is {:?}, expected {:?}",
                index.format,
                format::INDEX_FORMAT
            )));
        }
        Ok((signed, index))
    }

    /// A product file; a `.sjson` one is always verified.
    async fn products(&self, rel: &str) -> std::result::Result<Products, Miss> {
        let bytes = match self.get(rel).await {
            Ok(b) => b,
            Err(FetchError::NotFound) => {
                return Err(Miss::Plain(format!(
                    "index names {rel}, which does not exist"
                )));
            }
            Err(FetchError::Failed(e)) => {
                return Err(Miss::Unreachable(format!("unreachable: {e}")));
            }
        };
        let text = if format::is_signed_path(rel) {
            self.verified(&bytes, rel)?
        } else {
            self.text(bytes, rel)?
        };
        let shown = self.loc.resolve(rel);
        let p = Products::parse(&text)
            .map_err(|e| Miss::Plain(format!("{shown} is not a valid product file: {e}")))?;
        if p.format != format::PRODUCTS_FORMAT {
            return Err(Miss::Plain(format!(
                "{shown} has format {:?}, expected {:?}",
                p.format,
                format::PRODUCTS_FORMAT
            )));
        }
        Ok(p)
    }
}

pub(super) fn load_keyring(
    config: &Inputs<'_>,
) -> std::result::Result<crate::openpgp::Keyring, String> {
    let path = config.sources.keyring_path(config.paths);
    crate::openpgp::Keyring::load(&path).map_err(|e| e.to_string())
}

/// Searches the search path for `query` (see module docs).
pub async fn find(config: &Inputs<'_>, query: &ArtifactQuery) -> Result<Found> {
    find_first(config, std::slice::from_ref(query)).await
}

/// Searches the search path for each query in turn (a preference order)
/// and returns the first one any location serves: for each query, the
/// first location in search order that has a match. Each location's
/// metadata is read once per product, however many queries ask.
/// `Found.skipped` lists, for every query tried, the locations that did
/// not serve it and why (the reasons name the version asked for).
pub async fn find_first(config: &Inputs<'_>, queries: &[ArtifactQuery]) -> Result<Found> {
    let keyring = load_keyring(config);
    let path = search_path(config);
    let mut cache: std::collections::HashMap<(usize, String), std::result::Result<Loaded, Miss>> =
        Default::default();
    let mut skipped: Vec<Skipped> = Vec::new();
    let (mut tampered, mut unreachable) = (false, false);
    if let Some((_, dev)) = path.iter().find(|(k, _)| *k == LocationKind::Dev) {
        tracing::warn!(step = "metadata", location = %dev,
            products = %queries.iter().map(|q| q.product_id.as_str()).collect::<Vec<_>>().join(","),
            "DEVELOPMENT MODE: searching locally built artifacts first (sources.dev_dir); unsigned metadata accepted there");
    }
    for query in queries {
        let id = &query.product_id;
        for (i, (kind, loc)) in path.iter().enumerate() {
            let key = (i, id.clone());
            if !cache.contains_key(&key) {
                let l = load_location(config, *kind, loc, &keyring, Some(id)).await;
                cache.insert(key.clone(), l);
            }
            let served = match &cache[&key] {
                Ok(loaded) => serve(loaded, query).map(|pick| (loaded.signed, pick)),
                Err(Miss::Plain(r)) => Err(r.clone()),
                Err(Miss::Tampered(r)) => {
                    tracing::warn!(step = "metadata", location = %loc, reason = %r, "signed metadata failed verification");
                    tampered = true;
                    Err(r.clone())
                }
                Err(Miss::Unreachable(r)) => {
                    unreachable = true;
                    Err(r.clone())
                }
                Err(Miss::NoKeyring(e)) => {
                    unreachable = true;
                    Err(unverifiable(e))
                }
            };
            let (signed, (version_name, item_name, item)) = match served {
                Ok(s) => s,
                Err(reason) => {
                    tracing::info!(step = "metadata", location = %loc, kind = kind.as_str(), product = %id,
                        wanted = %query.version, reason = %reason, "location did not serve the artifact");
                    skipped.push(Skipped {
                        kind: *kind,
                        location: loc.to_string(),
                        reason,
                    });
                    continue;
                }
            };
            let url = loc.resolve(&item.path);
            tracing::info!(step = "metadata", location = %loc, kind = kind.as_str(), product = %id,
                version = %item.version, url = %url, signed, skipped = skipped.len(), "artifact found");
            return Ok(Found {
                kind: *kind,
                location: loc.to_string(),
                signed,
                product_id: id.clone(),
                version: item.version.clone(),
                version_name,
                item_name,
                item,
                url,
                skipped,
                base: Some(loc.clone()),
            });
        }
    }
    Err(not_found(queries, &skipped, tampered, unreachable))
}

/// What a location's metadata offers for `query`: (version name, item
/// name, artifact), or why it offers nothing.
fn serve(
    loaded: &Loaded,
    query: &ArtifactQuery,
) -> std::result::Result<(String, String, Artifact), String> {
    let id = &query.product_id;
    let product = product_in(loaded, id)?;
    let pick = format::select(product, &query.version).ok_or_else(|| {
        format!(
            "product {id} has no {} (has: {})",
            query.version,
            product.artifact_versions().join(", ")
        )
    })?;
    let item = pick
        .item
        .artifact(pick.item_name, pick.version_name)
        .map_err(|e| format!("bad item: {e}"))?;
    Ok((
        pick.version_name.to_string(),
        pick.item_name.to_string(),
        item,
    ))
}

/// The product `id` in a location's metadata, or why not (naming the
/// products of the same name for other arches or series, if any: "this
/// mirror only has arm64").
fn product_in<'a>(
    loaded: &'a Loaded,
    id: &str,
) -> std::result::Result<&'a format::Product, String> {
    if let Some(p) = loaded.products.iter().find_map(|p| p.products.get(id)) {
        return Ok(p);
    }
    let stem = id.rsplit_once(':').map_or(id, |(s, _)| s);
    let stem = stem.rsplit_once(':').map_or(stem, |(s, _)| s);
    let mut others: Vec<&str> = loaded
        .products
        .iter()
        .flat_map(|p| p.products.keys())
        .chain(&loaded.listed)
        .filter(|k| k.starts_with(&format!("{stem}:")))
        .map(String::as_str)
        .collect();
    others.sort();
    others.dedup();
    Err(if others.is_empty() {
        format!("no product {id}")
    } else {
        format!("no product {id} (it has {})", others.join(", "))
    })
}

/// Every downloadable item of one product along the whole search path,
/// each location read with the usual trust rules (signed first, unsigned
/// only where allowed, tampered metadata disqualifying the location), in
/// search order; and why the other locations offered none.
#[derive(Debug, Clone, Default)]
pub struct Offers {
    pub items: Vec<Found>,
    pub skipped: Vec<Skipped>,
}

/// [`Offers`] of `product_id`; an error when no location offers any item.
pub async fn find_all(config: &Inputs<'_>, product_id: &str) -> Result<Offers> {
    let keyring = load_keyring(config);
    let mut offers = Offers::default();
    let (mut tampered, mut unreachable) = (false, false);
    for (kind, loc) in search_path(config) {
        let mut skip = |reason: String| {
            tracing::info!(step = "metadata", location = %loc, kind = kind.as_str(), product = %product_id,
                reason = %reason, "location offers nothing");
            offers.skipped.push(Skipped {
                kind,
                location: loc.to_string(),
                reason,
            });
        };
        let loaded = match load_location(config, kind, &loc, &keyring, Some(product_id)).await {
            Ok(l) => l,
            Err(Miss::Plain(r)) => {
                skip(r);
                continue;
            }
            Err(Miss::Tampered(r)) => {
                tampered = true;
                skip(r);
                continue;
            }
            Err(Miss::Unreachable(r)) => {
                unreachable = true;
                skip(r);
                continue;
            }
            Err(Miss::NoKeyring(e)) => {
                unreachable = true;
                skip(unverifiable(&e));
                continue;
            }
        };
        let product = match product_in(&loaded, product_id) {
            Ok(p) => p,
            Err(r) => {
                skip(r);
                continue;
            }
        };
        for (version_name, item_name, item) in product.downloads() {
            match item.artifact(item_name, version_name) {
                Ok(item) => offers.items.push(Found {
                    kind,
                    location: loc.to_string(),
                    signed: loaded.signed,
                    product_id: product_id.to_string(),
                    version: item.version.clone(),
                    version_name: version_name.to_string(),
                    item_name: item_name.to_string(),
                    url: loc.resolve(&item.path),
                    item,
                    skipped: Vec::new(),
                    base: Some(loc.clone()),
                }),
                Err(e) => tracing::warn!(step = "metadata", location = %loc, product = %product_id,
                    reason = %e, "ignoring a bad item"),
            }
        }
    }
    if offers.items.is_empty() {
        let q = ArtifactQuery::by_id(product_id, VersionMatch::Latest);
        return Err(not_found(&[q], &offers.skipped, tampered, unreachable));
    }
    Ok(offers)
}

/// The error when no location served any query: what was wanted, why each
/// location did not serve it; tampered metadata first, then unreachable
/// locations decide the class.
fn not_found(
    queries: &[ArtifactQuery],
    skipped: &[Skipped],
    tampered: bool,
    unreachable: bool,
) -> Error {
    let reasons: Vec<String> = skipped
        .iter()
        .map(|s| format!("{} ({}): {}", s.location, s.kind.as_str(), s.reason))
        .collect();
    let wanted: Vec<String> = queries
        .iter()
        .map(|q| format!("{} of {}", q.version, q.product_id))
        .collect();
    let msg = format!(
        "no location has {}; tried: {}",
        wanted.join(" nor "),
        reasons.join("; ")
    );
    if tampered {
        Error::verification(msg)
    } else if unreachable {
        Error::retryable(msg)
    } else {
        Error::bad_input(msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::config;

    #[test]
    fn default_search_path_order() {
        let sources: config::RawSources = serde_json::from_str(
            r#"{"url":"https://mirror.internal/x","dev_dir":"/home/dev/out","use_default":true}"#,
        )
        .unwrap();
        let sources = sources.validate().unwrap();
        let assets: crate::assets::config::RawAssets =
            serde_json::from_str(r#"{"s3":{"bucket":"b","key":"k"}}"#).unwrap();
        let assets = assets.validate().unwrap();
        let paths = crate::settings::Paths::defaults();
        let c = Inputs {
            paths: &paths,
            sources: &sources,
            s3: assets.s3.as_ref(),
        };
        let p: Vec<(LocationKind, String)> = search_path(&c)
            .into_iter()
            .map(|(k, l)| (k, l.to_string()))
            .collect();
        assert_eq!(
            p,
            vec![
                (LocationKind::Dev, "/home/dev/out".to_string()),
                (LocationKind::Local, config::DEFAULT_LOCAL_DIR.to_string()),
                (LocationKind::Url, "https://mirror.internal/x".to_string()),
                (LocationKind::Bucket, "s3://b/metadata".to_string()),
                (LocationKind::Default, config::DEFAULT_URL.to_string()),
            ]
        );
    }
}
