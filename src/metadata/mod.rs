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
//! Files: [`search`] (the search path), [`fetch`] (an item found, fetched
//! and verified), [`mirror`] (`generate`, `validate`), [`location`] (how a
//! directory, URL or bucket is read), [`format`], [`sign`], [`config`].
//!
//! `metadata generate <dir>` scans artifacts named
//! `<name>_<version>_<series>_<arch>[.<ext>]` (anywhere below `dir`, except
//! `streams/`) and writes the index and product file (and their signed
//! twins with `--sign-key`). `metadata validate <location>` reads a mirror
//! as a node would and checks every item's size and hash.

pub mod config;
mod fetch;
pub mod format;
pub(crate) mod location;
mod mirror;
mod search;
pub mod sign;

use config::LocationKind;
use format::{Artifact, VersionMatch};
use location::Location;
use serde::Serialize;

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
    pub(crate) base: Option<Location>,
}

pub(crate) use fetch::fetch_staged;
pub use fetch::{fetch_into, fetch_item, verify_file};
pub use mirror::{
    GenerateReport, ValidateReport, generate, parse_artifact_name, parse_validate_location,
    validate,
};
pub use search::{Offers, find, find_all, find_first, search_path};
