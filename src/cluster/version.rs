//! Kubernetes version strings and the version-skew policy.
//!
//! Versions come from three places and look like `v1.9.6+coreos.0` (an API
//! server's `gitVersion`), `v1.10.2`, `v1.11.0-beta.1` or `1.9.6` (typed by
//! an operator). Image tags cannot hold `+`, so the kubelet image tag is the
//! version with `+` turned into `_` (`v1.9.6_coreos.0`).
//!
//! Skew policy (Kubernetes "Version Skew Policy",
//! https://kubernetes.io/releases/version-skew-policy/, docs/formats.md §3):
//! the kubelet must never be newer than kube-apiserver; it may be up to
//! three minor versions older, "kubelet < 1.25 may only be up to two minor
//! versions older" (so a lag of three needs a kubelet of 1.25 or newer, and
//! an API server of 1.28 or newer); majors must match. Patch levels and
//! suffixes do not count.

use crate::error::{Error, Result};
use std::cmp::Ordering;
use std::fmt;

/// How many minor versions a kubelet may lag behind the API server at
/// most (a kubelet of 1.25 or newer; [`max_lag_for`]).
pub const MAX_KUBELET_MINOR_LAG: u64 = 3;
/// The first kubelet minor allowed a lag of [`MAX_KUBELET_MINOR_LAG`];
/// older kubelets may lag two.
pub const THREE_MINOR_LAG_FROM: u64 = 25;

/// How many minors a kubelet of `kubelet_minor` (major 1) may lag.
pub fn max_lag_for(kubelet_minor: u64) -> u64 {
    if kubelet_minor >= THREE_MINOR_LAG_FROM {
        MAX_KUBELET_MINOR_LAG
    } else {
        2
    }
}

/// A parsed Kubernetes version. Only major, minor and patch take part in
/// comparisons; `pre` and `build` are kept for display.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeVersion {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    /// `beta.1` of `v1.11.0-beta.1`.
    pub pre: Option<String>,
    /// `coreos.0` of `v1.9.6+coreos.0`.
    pub build: Option<String>,
}

impl KubeVersion {
    /// Parses `v1.9.6+coreos.0`, `v1.10.2`, `1.9.6`, `v1.11.0-beta.1`.
    /// The error says what is wrong with the string (the caller names where
    /// it came from).
    pub fn parse(s: &str) -> std::result::Result<KubeVersion, String> {
        let t = s.trim();
        if t != s || t.is_empty() {
            return Err(format!(
                "{s:?} is not a Kubernetes version (expected e.g. v1.31.4 or v1.9.6+coreos.0)"
            ));
        }
        let body = t.strip_prefix('v').unwrap_or(t);
        let (body, build) = match body.split_once('+') {
            Some((b, build)) => (b, Some(build)),
            None => (body, None),
        };
        let (core, pre) = match body.split_once('-') {
            Some((c, pre)) => (c, Some(pre)),
            None => (body, None),
        };
        let bad = || {
            format!("{s:?} is not a Kubernetes version (expected e.g. v1.31.4 or v1.9.6+coreos.0)")
        };
        let nums: Vec<&str> = core.split('.').collect();
        if nums.len() != 3 {
            return Err(bad());
        }
        let num = |p: &str| -> std::result::Result<u64, String> {
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) || p.len() > 9 {
                return Err(bad());
            }
            p.parse().map_err(|_| bad())
        };
        let ident_ok = |x: &str| {
            !x.is_empty()
                && x.split('.').all(|part| {
                    !part.is_empty()
                        && part
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                })
        };
        if let Some(p) = pre
            && !ident_ok(p)
        {
            return Err(bad());
        }
        if let Some(b) = build
            && !ident_ok(b)
        {
            return Err(bad());
        }
        Ok(KubeVersion {
            major: num(nums[0])?,
            minor: num(nums[1])?,
            patch: num(nums[2])?,
            pre: pre.map(str::to_string),
            build: build.map(str::to_string),
        })
    }

    /// `major.minor`, the key of the runtime mappings (`"1.9"`).
    pub fn minor_key(&self) -> String {
        format!("{}.{}", self.major, self.minor)
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}.{}", self.major, self.minor, self.patch)?;
        if let Some(p) = &self.pre {
            write!(f, "-{p}")?;
        }
        if let Some(b) = &self.build {
            write!(f, "+{b}")?;
        }
        Ok(())
    }
}

/// The kubelet image tag for a version: `+` becomes `_`
/// (`v1.9.6+coreos.0` -> `v1.9.6_coreos.0`).
pub fn tag_from_version(v: &str) -> String {
    v.replace('+', "_")
}

/// The version an image tag stands for: `_` becomes `+`
/// (`v1.9.6_coreos.0` -> `v1.9.6+coreos.0`).
pub fn version_from_tag(t: &str) -> String {
    t.replace('_', "+")
}

/// Checks the version-skew policy between the kubelet this node will run
/// and the API server it joins. A violation is a
/// [`crate::error::ErrorClass::Refused`] error naming both versions; an
/// unparsable version is [`crate::error::ErrorClass::BadInput`].
pub fn check_skew(kubelet: &str, apiserver: &str) -> Result<()> {
    let k = KubeVersion::parse(kubelet)
        .map_err(|e| Error::bad_input(format!("kubelet version: {e}")))?;
    let a = KubeVersion::parse(apiserver)
        .map_err(|e| Error::bad_input(format!("API server version: {e}")))?;
    skew_violation(&k, &a).map_or(Ok(()), |why| {
        Err(Error::refused(format!(
            "version skew: kubelet {kubelet} cannot join API server {apiserver}: {why} \
             (Kubernetes version-skew policy: the kubelet must not be newer than \
             kube-apiserver and at most 3 minor versions older, 2 for a kubelet before 1.25)"
        )))
    })
}

/// Why `kubelet` may not talk to `apiserver`, or `None` when it may.
pub fn skew_violation(kubelet: &KubeVersion, apiserver: &KubeVersion) -> Option<String> {
    if kubelet.major != apiserver.major {
        return Some(format!(
            "major versions differ ({} vs {})",
            kubelet.major, apiserver.major
        ));
    }
    if kubelet.minor > apiserver.minor {
        return Some(format!(
            "the kubelet is newer ({} > {})",
            kubelet.minor_key(),
            apiserver.minor_key()
        ));
    }
    let lag = apiserver.minor - kubelet.minor;
    let allowed = max_lag_for(kubelet.minor);
    if lag > allowed {
        return Some(format!(
            "the kubelet is {lag} minor versions older ({} < {}; a {} kubelet may lag {allowed})",
            kubelet.minor_key(),
            apiserver.minor_key(),
            kubelet.minor_key()
        ));
    }
    None
}

/// Semantic-version precedence of major, minor, patch and pre-release (the
/// `+build` suffix does not count).
pub fn precedence(a: &KubeVersion, b: &KubeVersion) -> Ordering {
    (a.major, a.minor, a.patch)
        .cmp(&(b.major, b.minor, b.patch))
        .then_with(|| match (&a.pre, &b.pre) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Greater,
            (Some(_), None) => Ordering::Less,
            (Some(x), Some(y)) => pre_release_cmp(x, y),
        })
}

/// semver's pre-release order (`beta.2` before `beta.10`): identifier by identifier, numeric ones
/// numerically and below alphanumeric ones, a shorter prefix first.
pub fn pre_release_cmp(a: &str, b: &str) -> Ordering {
    let mut ia = a.split('.');
    let mut ib = b.split('.');
    loop {
        match (ia.next(), ib.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => {
                let o = match (x.parse::<u64>(), y.parse::<u64>()) {
                    (Ok(n), Ok(m)) => n.cmp(&m),
                    (Ok(_), Err(_)) => Ordering::Less,
                    (Err(_), Ok(_)) => Ordering::Greater,
                    (Err(_), Err(_)) => x.cmp(y),
                };
                if o != Ordering::Equal {
                    return o;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorClass;

    #[test]
    fn pre_releases_order_as_semver_orders_them() {
        assert_eq!(pre_release_cmp("beta.2", "beta.10"), Ordering::Less);
        assert_eq!(pre_release_cmp("alpha", "alpha.1"), Ordering::Less);
        assert_eq!(pre_release_cmp("1", "alpha"), Ordering::Less);
    }

    #[test]
    fn parses_the_shapes_seen_in_the_wild() {
        let v = KubeVersion::parse("v1.9.6+coreos.0").unwrap();
        assert_eq!((v.major, v.minor, v.patch), (1, 9, 6));
        assert_eq!(v.build.as_deref(), Some("coreos.0"));
        assert_eq!(v.to_string(), "v1.9.6+coreos.0");
        let v = KubeVersion::parse("1.10.2").unwrap();
        assert_eq!((v.major, v.minor, v.patch, v.pre.clone()), (1, 10, 2, None));
        assert_eq!(v.minor_key(), "1.10");
        let v = KubeVersion::parse("v1.11.0-beta.1").unwrap();
        assert_eq!(v.pre.as_deref(), Some("beta.1"));
        let v = KubeVersion::parse("v1.9.7-gke.6").unwrap();
        assert_eq!((v.minor, v.pre.as_deref()), (9, Some("gke.6")));
    }

    #[test]
    fn rejects_what_is_not_a_version() {
        for bad in [
            "",
            "v",
            "1.9",
            "v1.9.x",
            "1.9.6.1",
            " v1.9.6",
            "v1.9.6 ",
            "v1.9.6+",
            "v1.9.6-",
            "v1..6",
            "latest",
            "v1.9.6+coreos/0",
            "v-1.9.6",
        ] {
            let e = KubeVersion::parse(bad).unwrap_err();
            assert!(e.contains("is not a Kubernetes version"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn tags_and_versions_convert_both_ways() {
        assert_eq!(tag_from_version("v1.9.6+coreos.0"), "v1.9.6_coreos.0");
        assert_eq!(version_from_tag("v1.9.6_coreos.0"), "v1.9.6+coreos.0");
        assert_eq!(tag_from_version("v1.10.2"), "v1.10.2");
        assert_eq!(version_from_tag("v1.10.2"), "v1.10.2");
    }

    #[test]
    fn skew_allows_same_minor_and_up_to_three_older() {
        for (k, a) in [
            ("v1.9.6+coreos.0", "v1.9.6+coreos.0"),
            ("v1.9.9", "v1.9.1"), // patch newer is fine
            ("v1.8.0", "v1.9.6"),
            ("v1.7.4", "v1.9.6"),
            ("1.10.2", "v1.10.0-beta.1"),
            ("v1.25.0", "v1.28.3"),
            ("v1.29.1", "v1.32.0"),
        ] {
            check_skew(k, a).unwrap_or_else(|e| panic!("{k} vs {a}: {e}"));
        }
    }

    #[test]
    fn a_kubelet_before_1_25_may_lag_only_two_minors() {
        // "kubelet < 1.25 may only be up to two minor versions older"
        for (k, a) in [
            ("v1.6.4", "v1.9.6"),
            ("v1.17.0", "v1.20.2"),
            ("v1.24.9", "v1.27.0"),
        ] {
            let e = check_skew(k, a).unwrap_err();
            assert_eq!(e.class(), ErrorClass::Refused);
            assert!(
                e.to_string().contains("minor versions older")
                    && e.to_string().contains("may lag 2"),
                "{k} vs {a}: {e}"
            );
        }
        assert_eq!(max_lag_for(24), 2);
        assert_eq!(max_lag_for(25), 3);
    }

    #[test]
    fn skew_refuses_newer_kubelet() {
        let e = check_skew("v1.10.2", "v1.9.6+coreos.0").unwrap_err();
        assert_eq!(e.class(), ErrorClass::Refused);
        assert_eq!(e.exit_code(), crate::error::exit::REFUSED);
        let m = e.to_string();
        assert!(m.contains("kubelet v1.10.2"), "{m}");
        assert!(m.contains("API server v1.9.6+coreos.0"), "{m}");
        assert!(m.contains("the kubelet is newer (1.10 > 1.9)"), "{m}");
    }

    #[test]
    fn skew_refuses_four_minors_older_and_other_majors() {
        let e = check_skew("v1.5.7", "v1.9.6").unwrap_err();
        assert_eq!(e.class(), ErrorClass::Refused);
        assert!(
            e.to_string().contains(
                "the kubelet is 4 minor versions older (1.5 < 1.9; a 1.5 kubelet may lag 2)"
            ),
            "{e}"
        );
        let e = check_skew("v2.0.0", "v1.9.6").unwrap_err();
        assert_eq!(e.class(), ErrorClass::Refused);
        assert!(e.to_string().contains("major versions differ"), "{e}");
    }

    #[test]
    fn skew_with_garbage_is_bad_input_naming_the_side() {
        let e = check_skew("v1.9.6", "banana").unwrap_err();
        assert_eq!(e.class(), ErrorClass::BadInput);
        assert!(e.to_string().starts_with("API server version:"), "{e}");
    }
}
