//! What the artifact search path offers of one extension's images, read
//! the same way for the kubelet and containerd: product `<name>`, series
//! `any` (an image fits whatever OS its extension-release allows), the
//! node's architecture as systemd names it (`x86-64`, `arm64`), so a
//! mirror holds files named `kubernetes_v1.20.2_any_x86-64.raw`; each
//! location read signed first, unsigned only where `sources.allow_unsigned`
//! allows. Each caller then chooses by its own rule and takes the offer
//! ([`Offers::take`]) that [`super::package::install`] installs.

use super::image::systemd_arch;
use crate::error::{Error, Result};
use crate::metadata::{self, ArtifactQuery, Found, format::VersionMatch};
use serde::Serialize;
use tracing::warn;

/// Their series.
pub const SERIES: &str = "any";

/// The product id of `product` images for this machine, and its
/// architecture as systemd names it; refused on an architecture systemd
/// has no name for here.
pub fn product_id(
    sources: &metadata::config::SourcesSettings,
    product: &str,
) -> Result<(String, &'static str)> {
    let arch = systemd_arch().ok_or_else(|| {
        Error::refused(format!(
            "no {product} images exist for architecture {}",
            std::env::consts::ARCH
        ))
    })?;
    let q = ArtifactQuery::new(sources, product, SERIES, arch, VersionMatch::Latest);
    Ok((q.product_id, arch))
}

/// The images offered, in search order, with the versions read.
#[derive(Debug)]
pub struct Offers<V> {
    pub arch: &'static str,
    /// Every item found, readable version or not.
    pub all: Vec<Found>,
    /// Those whose version reads, with it.
    pub usable: Vec<(V, Found)>,
}

/// Every image of `product` the search path offers (an error when none
/// at all), each version read by `read` (one that does not is logged and
/// left out); `what` names the images in messages.
pub async fn find<V>(
    source: &metadata::Inputs<'_>,
    product: &str,
    what: &str,
    step: &'static str,
    read: impl Fn(&str) -> std::result::Result<V, String>,
) -> Result<Offers<V>> {
    let (id, arch) = product_id(source.sources, product)?;
    let found = metadata::find_all(source, &id)
        .await
        .map_err(|e| e.context(format!("no {what} image ({id}) in the search path")))?;
    let mut usable = Vec::new();
    for f in &found.items {
        match read(&f.version) {
            Ok(v) => usable.push((v, f.clone())),
            Err(e) => {
                warn!(step, url = %f.url, error = %e, "ignoring a {what} image whose version does not read")
            }
        }
    }
    Ok(Offers {
        arch,
        all: found.items,
        usable,
    })
}

/// An image taken from the search path: what `choose` commands print.
#[derive(Debug, Clone, Serialize)]
pub struct Taken<V> {
    pub version: String,
    pub url: String,
    pub location: String,
    pub signed: bool,
    /// Every version the search path offered, in search order.
    pub offered: Vec<String>,
    #[serde(skip)]
    pub found: Box<Found>,
    #[serde(skip)]
    pub parsed: V,
    #[serde(skip)]
    pub arch: &'static str,
}

impl<V: Clone> Offers<V> {
    /// The versions read, in search order (what a rule chooses among).
    pub fn versions(&self) -> Vec<V> {
        self.usable.iter().map(|(v, _)| v.clone()).collect()
    }

    /// "v1.21.0 at https://mirror/…, …": what the search path offered.
    pub fn listed(&self) -> String {
        let mut v: Vec<String> = self
            .all
            .iter()
            .map(|f| format!("{} at {}", f.version, f.location))
            .collect();
        v.dedup();
        v.join(", ")
    }

    /// The usable offer at `index`.
    pub fn take(&self, index: usize) -> Taken<V> {
        let (parsed, found) = &self.usable[index];
        Taken {
            version: found.version.clone(),
            url: found.url.clone(),
            location: found.location.clone(),
            signed: found.signed,
            offered: self.all.iter().map(|f| f.version.clone()).collect(),
            found: Box::new(found.clone()),
            parsed: parsed.clone(),
            arch: self.arch,
        }
    }
}
