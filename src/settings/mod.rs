//! The vocabulary of settings, below every config section: what a section
//! validates its fields with ([`FieldError`], [`absolute_path`],
//! [`seconds_in`], [`in_range`]) and the node-wide settings a subsystem may
//! take beside its own section ([`Paths`], [`Role`]).
//!
//! Imports nothing of the crate. Each subsystem's section (`<subsystem>/config.rs`)
//! imports only this; [`crate::config`] composes the sections into the
//! config file, and nothing below it imports it.

mod paths;
mod role;

pub use paths::{Paths, RawPaths};
pub use role::Role;

use std::fmt::Display;
use std::path::PathBuf;
use std::time::Duration;

/// A validation failure of one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Dotted path of the field, e.g. `os_update.timeout_secs`.
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

pub type FieldResult<T> = std::result::Result<T, FieldError>;

/// Checks that a configured path is absolute (the agent runs from systemd,
/// where a relative path has no useful meaning).
pub fn absolute_path(field: &str, p: PathBuf) -> FieldResult<PathBuf> {
    if p.is_absolute() {
        Ok(p)
    } else {
        Err(FieldError::new(
            field,
            format!(
                "must be an absolute path, got {:?}",
                p.display().to_string()
            ),
        ))
    }
}

/// A number that must lie within `min..=max`. `after_bounds` follows the
/// bounds in the message: a unit (`" MiB"`), a reason, or nothing (`""`):
/// `must be between 1 and 20, got 30`.
pub fn in_range<T: PartialOrd + Display + Copy>(
    field: &str,
    v: T,
    min: T,
    max: T,
    after_bounds: &str,
) -> FieldResult<T> {
    if v < min || v > max {
        return Err(FieldError::new(
            field,
            format!("must be between {min} and {max}{after_bounds}, got {v}"),
        ));
    }
    Ok(v)
}

/// A duration in seconds that must lie within bounds.
pub fn seconds_in(field: &str, secs: u64, min: u64, max: u64) -> FieldResult<Duration> {
    in_range(field, secs, min, max, " seconds").map(Duration::from_secs)
}

/// For unit tests of a subsystem: section `name` of a config file's JSON
/// (its defaults when the file has none), not yet validated.
#[cfg(test)]
pub(crate) fn section<R: serde::de::DeserializeOwned + Default>(
    file: &serde_json::Value,
    name: &str,
) -> R {
    file.get(name)
        .map(|v| serde_json::from_value(v.clone()).unwrap())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_names_bounds_unit_and_value() {
        assert_eq!(in_range("a.b", 5u32, 1, 20, ""), Ok(5));
        assert_eq!(in_range("a.b", 1u32, 1, 20, ""), Ok(1));
        assert_eq!(in_range("a.b", 20u32, 1, 20, ""), Ok(20));
        assert_eq!(
            in_range("a.b", 21u32, 1, 20, ""),
            Err(FieldError::new("a.b", "must be between 1 and 20, got 21"))
        );
        assert_eq!(
            seconds_in("x.timeout_secs", 0, 1, 60),
            Err(FieldError::new(
                "x.timeout_secs",
                "must be between 1 and 60 seconds, got 0"
            ))
        );
        assert_eq!(seconds_in("x", 60, 1, 60), Ok(Duration::from_secs(60)));
    }

    #[test]
    fn relative_path_is_named() {
        assert_eq!(
            absolute_path("p.q", PathBuf::from("var/lib")),
            Err(FieldError::new(
                "p.q",
                "must be an absolute path, got \"var/lib\""
            ))
        );
    }
}
