//! The operator's word on the rollout: the ConfigMap `follow.config_map`
//! in `follow.namespace` (default `kube-system/node-bootstrap-follow`),
//! read by every following node. Every key is optional; no ConfigMap at
//! all means the defaults.
//!
//! | key | value | default |
//! | --- | --- | --- |
//! | `minor` | the Kubernetes minor the nodes may move to, `"1.21"` | none: patch releases of each node's own minor only |
//! | `maxChanging` | how many nodes may change their kubelet at once (holders of the lease) | `1` |
//! | `maxNotReady` | how many nodes may be not Ready at once, counting the one that starts a change: no node starts one while that many others are not Ready | `1` |
//! | `paused` | `"true"`: no node starts a change (one under way finishes) | `false` |
//! | `deleteEmptyDirData` | `"true"`: the drain of a minor change evicts pods with `emptyDir` volumes, whose data goes with them (`kubectl drain --delete-emptydir-data`) | `false`: such a pod stops the drain, as plain `kubectl drain` refuses it |
//!
//! A value that does not read is not guessed at: the node changes nothing
//! and says which key is wrong ([`PolicyError`]).

use crate::cluster::version::KubeVersion;
use serde::Serialize;
use serde_json::Value;

/// A Kubernetes `major.minor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct MinorVersion {
    pub major: u64,
    pub minor: u64,
}

impl MinorVersion {
    pub fn of(v: &KubeVersion) -> MinorVersion {
        MinorVersion {
            major: v.major,
            minor: v.minor,
        }
    }

    /// `"1.21"` (a leading `v` is taken too).
    pub fn parse(s: &str) -> Option<MinorVersion> {
        let (major, minor) = s.trim().trim_start_matches('v').split_once('.')?;
        let num = |p: &str| {
            (!p.is_empty()
                && p.bytes().all(|b| b.is_ascii_digit())
                && (p == "0" || !p.starts_with('0')))
            .then(|| p.parse().ok())
            .flatten()
        };
        Some(MinorVersion {
            major: num(major)?,
            minor: num(minor)?,
        })
    }
}

impl std::fmt::Display for MinorVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// The operator's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Policy {
    pub minor: Option<MinorVersion>,
    pub max_changing: u32,
    pub max_not_ready: u32,
    pub paused: bool,
    pub delete_emptydir_data: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            minor: None,
            max_changing: 1,
            max_not_ready: 1,
            paused: false,
            delete_emptydir_data: false,
        }
    }
}

/// A key of the ConfigMap that does not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError {
    pub key: &'static str,
    pub why: String,
}

impl std::fmt::Display for PolicyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "data.{}: {}", self.key, self.why)
    }
}

/// The largest `maxChanging` and `maxNotReady` taken.
pub const MAX_COUNT: u32 = 1000;

/// Reads the ConfigMap object (`None`: there is none, the defaults).
pub fn read(config_map: Option<&Value>) -> Result<Policy, PolicyError> {
    let mut p = Policy::default();
    let Some(data) = config_map.map(|c| &c["data"]) else {
        return Ok(p);
    };
    let get = |key: &'static str| -> Result<Option<&str>, PolicyError> {
        match data.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.trim())),
            Some(other) => Err(PolicyError {
                key,
                why: format!("must be a string, got {other}"),
            }),
        }
    };
    if let Some(m) = get("minor")?.filter(|m| !m.is_empty()) {
        p.minor = Some(MinorVersion::parse(m).ok_or_else(|| PolicyError {
            key: "minor",
            why: format!("{m:?} is not a Kubernetes minor version such as \"1.21\""),
        })?);
    }
    let count = |key: &'static str, min: u32| -> Result<Option<u32>, PolicyError> {
        let Some(s) = get(key)? else { return Ok(None) };
        match s.parse::<u32>() {
            Ok(n) if (min..=MAX_COUNT).contains(&n) => Ok(Some(n)),
            _ => Err(PolicyError {
                key,
                why: format!("must be a whole number from {min} to {MAX_COUNT}, got {s:?}"),
            }),
        }
    };
    if let Some(n) = count("maxChanging", 1)? {
        p.max_changing = n;
    }
    if let Some(n) = count("maxNotReady", 1)? {
        p.max_not_ready = n;
    }
    let flag = |key: &'static str| -> Result<bool, PolicyError> {
        match get(key)? {
            Some("true") => Ok(true),
            Some("false" | "") | None => Ok(false),
            Some(other) => Err(PolicyError {
                key,
                why: format!("must be \"true\" or \"false\", got {other:?}"),
            }),
        }
    };
    p.paused = flag("paused")?;
    p.delete_emptydir_data = flag("deleteEmptyDirData")?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn no_config_map_or_no_keys_are_the_defaults() {
        assert_eq!(read(None).unwrap(), Policy::default());
        assert_eq!(
            read(Some(&json!({"metadata": {}}))).unwrap(),
            Policy::default()
        );
        assert_eq!(
            read(Some(&json!({"data": {"minor": ""}}))).unwrap(),
            Policy::default()
        );
    }

    #[test]
    fn every_key_reads() {
        let p = read(Some(&json!({"data": {
            "minor": "1.21", "maxChanging": "3", "maxNotReady": "2", "paused": "true",
            "deleteEmptyDirData": "true"
        }})))
        .unwrap();
        assert_eq!(
            p,
            Policy {
                minor: Some(MinorVersion {
                    major: 1,
                    minor: 21
                }),
                max_changing: 3,
                max_not_ready: 2,
                paused: true,
                delete_emptydir_data: true,
            }
        );
        assert_eq!(p.minor.unwrap().to_string(), "1.21");
        assert_eq!(
            MinorVersion::parse("v1.9"),
            Some(MinorVersion { major: 1, minor: 9 })
        );
    }

    #[test]
    fn a_value_that_does_not_read_names_its_key() {
        for (data, key, says) in [
            (
                json!({"minor": "1.21.3"}),
                "minor",
                "is not a Kubernetes minor version",
            ),
            (json!({"minor": "latest"}), "minor", "\"latest\""),
            (
                json!({"minor": "1.021"}),
                "minor",
                "is not a Kubernetes minor",
            ),
            (
                json!({"maxChanging": "0"}),
                "maxChanging",
                "from 1 to 1000, got \"0\"",
            ),
            (json!({"maxChanging": 2}), "maxChanging", "must be a string"),
            (json!({"maxNotReady": "0"}), "maxNotReady", "from 1 to 1000"),
            (json!({"paused": "yes"}), "paused", "\"true\" or \"false\""),
            (
                json!({"deleteEmptyDirData": "1"}),
                "deleteEmptyDirData",
                "\"true\" or \"false\"",
            ),
        ] {
            let e = read(Some(&json!({ "data": data }))).unwrap_err();
            assert_eq!(e.key, key, "{data}");
            assert!(e.to_string().contains(says), "{data}: {e}");
            assert!(e.to_string().starts_with(&format!("data.{key}: ")), "{e}");
        }
    }
}
