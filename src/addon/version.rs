//! Version numbers as the addon step meets them: docker versions as torcx
//! references and Docker's API spell them (`17.03`, `1.12.6`, `17.03.2-ce`),
//! OS versions as os-release's `VERSION_ID` spells them (`1520.3.0`), and
//! Kubernetes' `major.minor` of a cluster version (`v1.9.6+coreos.0`).
//!
//! Docker versions are not semver (`17.03` has a leading zero, `1.12` has no
//! patch), so they are compared as lists of numbers.

use crate::error::{Error, Result};
use std::cmp::Ordering;
use std::fmt;

/// A docker version: at least `major.minor`, numeric components, and an
/// ignored suffix after `-`, `+`, `_` or `~` (`17.03.2-ce`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DockerVersion {
    parts: Vec<u64>,
    raw: String,
}

impl DockerVersion {
    /// Parses `17.03`, `v1.12.6`, `17.03.2-ce`. `None` for anything else.
    pub fn parse(s: &str) -> Option<DockerVersion> {
        let t = s.trim();
        let t = t.strip_prefix('v').unwrap_or(t);
        let core = t.split(['-', '+', '_', '~']).next().unwrap_or("");
        let parts: Option<Vec<u64>> = core
            .split('.')
            .map(|p| {
                if p.is_empty() || p.len() > 9 || !p.bytes().all(|b| b.is_ascii_digit()) {
                    None
                } else {
                    p.parse().ok()
                }
            })
            .collect();
        let parts = parts?;
        if parts.len() < 2 || parts.len() > 4 {
            return None;
        }
        Some(DockerVersion {
            parts,
            raw: s.trim().to_string(),
        })
    }

    /// `(major, minor)`.
    pub fn major_minor(&self) -> (u64, u64) {
        (self.parts[0], self.parts[1])
    }

    /// Whether this version is one the preference `pref` asks for: `pref`'s
    /// components are a prefix of this version's (`17.03` matches `17.03`
    /// and `17.03.2`; `17.03.1` matches only `17.03.1`).
    pub fn satisfies(&self, pref: &DockerVersion) -> bool {
        pref.parts.len() <= self.parts.len() && self.parts[..pref.parts.len()] == pref.parts[..]
    }

    /// Whether two versions name the same docker, as far as both say:
    /// `17.03` and `17.03.2-ce` are the same; `17.03.1` and `17.03.2` are not;
    /// `1.12` and `17.03` are not.
    pub fn same_docker(&self, other: &DockerVersion) -> bool {
        let n = self.parts.len().min(other.parts.len()).max(2);
        self.parts.get(..n) == other.parts.get(..n)
    }

    /// Whether docker's data directory may need wiping between the two:
    /// docker upgrades its datadir across minors but never downgrades it, so
    /// any change of `major.minor` counts.
    pub fn datadir_compatible(&self, other: &DockerVersion) -> bool {
        self.major_minor() == other.major_minor()
    }
}

impl Ord for DockerVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        self.parts
            .cmp(&other.parts)
            .then_with(|| self.raw.cmp(&other.raw))
    }
}

impl PartialOrd for DockerVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for DockerVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

/// `(major, minor)` of a Kubernetes cluster version: `v1.9.6+coreos.0` ->
/// `(1, 9)`, `1.10.2` -> `(1, 10)`.
pub fn kube_major_minor(cluster_version: &str) -> Result<(u64, u64)> {
    let t = cluster_version.trim();
    let t = t.strip_prefix('v').unwrap_or(t);
    let v = semver::Version::parse(t).map_err(|e| {
        Error::bad_input(format!(
            "cluster version {cluster_version:?} is not a Kubernetes version like v1.9.6+coreos.0: {e}"
        ))
    })?;
    Ok((v.major, v.minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> DockerVersion {
        DockerVersion::parse(s).unwrap()
    }

    #[test]
    fn docker_versions_parse_as_docker_spells_them() {
        assert_eq!(d("17.03").major_minor(), (17, 3));
        assert_eq!(d("1.12.6").major_minor(), (1, 12));
        assert_eq!(d("17.03.2-ce").major_minor(), (17, 3));
        assert_eq!(d("v20.10.24").major_minor(), (20, 10));
        for bad in ["", "17", "17.", "a.b", "17.03.x", "1.2.3.4.5", "-1.2"] {
            assert!(DockerVersion::parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn ordering_is_numeric_not_textual() {
        let mut v = [d("17.03.10"), d("1.12"), d("17.03.2"), d("17.03"), d("1.9")];
        v.sort();
        let s: Vec<String> = v.iter().map(|x| x.to_string()).collect();
        assert_eq!(s, ["1.9", "1.12", "17.03", "17.03.2", "17.03.10"]);
    }

    #[test]
    fn preferences_match_by_prefix() {
        assert!(d("17.03.2").satisfies(&d("17.03")));
        assert!(d("17.03").satisfies(&d("17.03")));
        assert!(!d("17.03").satisfies(&d("17.03.2")));
        assert!(!d("17.3").satisfies(&d("1.7")));
        assert!(!d("1.1").satisfies(&d("1.10")));
        assert!(!d("1.10").satisfies(&d("1.1")));
    }

    #[test]
    fn same_docker_compares_what_both_say() {
        assert!(d("17.03").same_docker(&d("17.03.2-ce")));
        assert!(d("17.03.2-ce").same_docker(&d("17.03")));
        assert!(!d("17.03.1").same_docker(&d("17.03.2")));
        assert!(!d("1.12").same_docker(&d("17.03")));
        assert!(d("17.03.1").datadir_compatible(&d("17.03.2")));
        assert!(!d("1.12.6").datadir_compatible(&d("17.03.2")));
    }

    #[test]
    fn kube_minor_of_cluster_versions() {
        assert_eq!(kube_major_minor("v1.9.6+coreos.0").unwrap(), (1, 9));
        assert_eq!(kube_major_minor("v1.10.0").unwrap(), (1, 10));
        let err = kube_major_minor("v1.9").unwrap_err();
        assert_eq!(err.class(), crate::error::ErrorClass::BadInput);
        assert!(err.to_string().contains("\"v1.9\""), "{err}");
    }
}
