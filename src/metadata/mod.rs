//! Artifact metadata (simplestreams-shaped index and products, see
//! [`format`]) and the search path of locations it is looked up in.
//!
//! ## The search path ([`find`])
//! Locations, in order (seed 001; `sources` config section):
//! 1. `sources.dev_dir`: development mode only, unsigned allowed, logged
//!    loudly as such on every search;
//! 2. `sources.local_dir`: the node's local store;
//! 3. `sources.url`: a user-supplied URL or directory;
//! 4. the cluster's bucket, `s3://<assets.s3.bucket>/<sources.bucket_prefix>`;
//! 5. the built-in default URL.
//!
//! At each location `streams/v1/index.sjson` (inline-signed) is read first
//! and verified against the keyring; its product files are read as `.sjson`
//! and verified too. Only if there is no signed index is `index.json` read,
//! and only where `sources.allow_unsigned` lists the location's kind.
//! Signed metadata that fails verification disqualifies the whole location
//! (its unsigned files are not consulted: that would be a downgrade); the
//! search goes on to the next location, and if nothing matches the error
//! is a verification failure.
//!
//! The first location with a product that has a matching version wins.
//! [`Found`] says which location served it and why each earlier one did not.
//!
//! ## Mirrors ([`generate`], [`validate`])
//! `metadata generate <dir>` scans artifacts named
//! `<name>_<version>_<series>_<arch>[.<ext>]` (anywhere below `dir`, except
//! `streams/`) and writes the index and product file (and their signed
//! twins with `--sign-key`). `metadata validate <location>` reads a mirror
//! as a node would and checks every item's size and hash.

pub mod config;
pub mod format;
pub(crate) mod location;
pub mod sign;

use crate::error::{Context as _, Error, ErrorClass, Result};
use crate::fsutil;
use config::{LocationKind, UserLocation};
use format::{Artifact, Index, Products, VersionMatch};
use location::{FetchError, Location};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// What the metadata search reads of the agent's config: the `sources`
/// section, the node's paths (the keyring's default place) and the cluster
/// bucket's connection (`assets.s3`, for the bucket location).
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub paths: &'a crate::settings::Paths,
    pub sources: &'a config::SourcesSettings,
    pub s3: Option<&'a crate::assets::config::S3Settings>,
}

/// What to look for: a product, by its full id, and which version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArtifactQuery {
    /// e.g. `com.node-bootstrap:docker-torcx:1632.3.0:amd64-usr`, or a
    /// foreign writer's id such as `com.ubuntu.juju:16.04:amd64`.
    pub product_id: String,
    pub version: VersionMatch,
}

impl ArtifactQuery {
    /// The product `name` for `series` and `arch`, its id made by
    /// `sources.product_id_template`.
    pub fn new(
        sources: &config::SourcesSettings,
        name: &str,
        series: &str,
        arch: &str,
        version: VersionMatch,
    ) -> ArtifactQuery {
        ArtifactQuery {
            product_id: format::product_id(&sources.product_id_template, name, series, arch),
            version,
        }
    }

    /// A product by its full id.
    pub fn by_id(product_id: &str, version: VersionMatch) -> ArtifactQuery {
        ArtifactQuery {
            product_id: product_id.to_string(),
            version,
        }
    }
}

/// A location that did not serve the query, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub kind: LocationKind,
    pub location: String,
    pub reason: String,
}

/// The item chosen, and where it came from.
#[derive(Debug, Clone, Serialize)]
pub struct Found {
    pub kind: LocationKind,
    /// The location's base (directory, URL, `s3://bucket/prefix`).
    pub location: String,
    /// Whether the metadata was signed (and verified).
    pub signed: bool,
    pub product_id: String,
    /// The artifact's version (see [`format`]: the item's `version`, else
    /// the version name).
    pub version: String,
    /// The name of the version in the product file (a date in Juju streams).
    pub version_name: String,
    pub item_name: String,
    pub item: Artifact,
    /// Where the item itself is (path, URL or `s3://`).
    pub url: String,
    /// Earlier locations and why they did not serve it.
    pub skipped: Vec<Skipped>,
    #[serde(skip)]
    base: Option<Location>,
}

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
enum Miss {
    /// Not there / no match: go on.
    Plain(String),
    /// Signed metadata failed verification.
    Tampered(String),
    /// Could not ask (network, permissions).
    Unreachable(String),
}

struct Loaded {
    signed: bool,
    products: Vec<Products>,
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
async fn load_location(
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
        let ring = self.keyring.as_ref().map_err(|e| {
            Miss::Unreachable(format!(
                "has signed metadata but it cannot be verified: {e}"
            ))
        })?;
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

fn load_keyring(config: &Inputs<'_>) -> std::result::Result<crate::openpgp::Keyring, String> {
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

/// Checks a downloaded file's size and hashes against its item.
pub fn verify_file(path: &Path, item: &Artifact, what: &str) -> Result<()> {
    let f = std::fs::File::open(path).ctx(ErrorClass::Internal, || {
        format!("failed to open {}", path.display())
    })?;
    let d = crate::digest::digest(f, item.sha256.is_some(), || item.sha512.is_some())
        .ctx(ErrorClass::Internal, || {
            format!("failed to read {}", path.display())
        })?;
    let size = d.size;
    if size != item.size {
        return Err(Error::verification(format!(
            "{what}: size is {size} bytes, the metadata says {}",
            item.size
        )));
    }
    if let Some(h) = &item.sha256 {
        let got = &d.sha256;
        if !got.eq_ignore_ascii_case(h) {
            return Err(Error::verification(format!(
                "{what}: sha256 is {got}, the metadata says {h}"
            )));
        }
    }
    if let Some(h) = &item.sha512 {
        let got = &d.sha512;
        if !got.eq_ignore_ascii_case(h) {
            return Err(Error::verification(format!(
                "{what}: sha512 is {got}, the metadata says {h}"
            )));
        }
    }
    Ok(())
}

/// Downloads the item `found` names to `dest`, verifying size and hashes
/// before it appears there ([`fsutil::AtomicFile`]); a bad download is
/// removed.
pub async fn fetch_item(config: &Inputs<'_>, found: &Found, dest: &Path) -> Result<()> {
    let mut out = fsutil::AtomicFile::create(dest, fsutil::MODE_PUBLIC)
        .ctx(ErrorClass::Internal, || {
            format!("failed to create a file beside {}", dest.display())
        })?;
    fetch_into(config, found, &mut out).await?;
    out.commit().ctx(ErrorClass::Internal, || {
        format!("failed to put {} in place", dest.display())
    })
}

/// Fetches the artifact `found` names into `dir` as `final_name`,
/// verified (size and hashes, by [`fetch_item`]) under its hidden partial
/// name ([`fsutil::staged`]), and returns it staged: refused when larger
/// than `limit` (the setting's name and value), logged as `step`.
pub(crate) async fn fetch_staged(
    config: &Inputs<'_>,
    found: &Found,
    dir: &Path,
    final_name: &str,
    hash: &crate::digest::Sha512,
    limit: (&str, u64),
    step: &'static str,
) -> Result<fsutil::staged::Staged> {
    let (setting, max) = limit;
    if found.item.size > max {
        return Err(Error::bad_input(format!(
            "{} is {} bytes, more than {setting} ({max})",
            found.url, found.item.size
        )));
    }
    fsutil::staged::ensure_dir(dir)?;
    let partial = fsutil::staged::partial_path(dir, final_name, hash);
    fsutil::staged::remove_other_partials(dir, final_name, &partial);
    let started = std::time::Instant::now();
    fetch_item(config, found, &partial).await.map_err(|e| {
        if e.class() == ErrorClass::Verification {
            e.context("nothing was installed")
        } else {
            e
        }
    })?;
    let staged = fsutil::staged::Staged::new(partial, dir.join(final_name));
    tracing::info!(step, source = "metadata", url = %found.url, location = %found.location,
        path = %staged.target().display(), bytes = found.item.size,
        elapsed_ms = started.elapsed().as_millis() as u64, "package fetched and verified");
    Ok(staged)
}

/// Downloads the item `found` names into `out` and verifies its size and
/// hashes; `out` stays under its temp name for the caller to commit.
pub async fn fetch_into(
    config: &Inputs<'_>,
    found: &Found,
    out: &mut fsutil::AtomicFile,
) -> Result<()> {
    let loc = found
        .base
        .as_ref()
        .ok_or_else(|| Error::internal("Found without a location"))?;
    match loc
        .fetch_to(
            &found.item.path,
            out,
            config.sources.timeout,
            config.sources.attempts,
            found.item.size,
        )
        .await
    {
        Ok(()) => {}
        Err(FetchError::NotFound) => {
            return Err(Error::bad_input(format!(
                "{} is listed in the metadata of {} but does not exist",
                found.url, found.location
            )));
        }
        Err(FetchError::Failed(e)) => return Err(e),
    }
    verify_file(out.temp_path(), &found.item, &found.url)
}

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
    let mut sources = config.sources.clone();
    if allow_unsigned {
        sources.allow_unsigned = vec![LocationKind::Url];
    } else {
        sources.allow_unsigned.clear();
    }
    let c = Inputs {
        sources: &sources,
        ..*config
    };
    let loaded = match load_location(&c, LocationKind::Url, loc, &keyring, None).await {
        Ok(l) => l,
        Err(Miss::Tampered(r)) => return Err(Error::verification(format!("{loc}: {r}"))),
        Err(Miss::Unreachable(r)) => return Err(Error::retryable(format!("{loc}: {r}"))),
        Err(Miss::Plain(r)) => return Err(Error::bad_input(format!("{loc}: {r}"))),
    };
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
