//! kubelet.env: parsing the seed file provisioning wrote
//! (`/etc/kubernetes/installer/kubelet.env`) and rendering the real one
//! (`/etc/kubernetes/kubelet.env`) that kubelet.service reads with
//! `EnvironmentFile=`.
//!
//! Both sides follow systemd's EnvironmentFile syntax: `KEY=value` lines,
//! `#`/`;` comments, values unquoted, in single quotes (literal), or in double
//! quotes (where `\"`, `\\`, `` \` `` and `\$` are escapes). The rendered file
//! keeps every seed key in the seed's order (stable, unlike the original,
//! which wrote Go map order), replaces `KUBELET_IMAGE_TAG` with the cluster
//! version (`+` becomes `_`), sets `KUBELET_CGROUP_DRIVER` (what this node's
//! runtime uses, see [`cgroup_driver_for`]), adds `KUBELET_RUNTIME` and
//! `KUBELET_ARGS` (the flags of the cluster's kubelet version), and
//! double-quotes every value.

use crate::error::{Error, Result};
use std::path::Path;

/// The key kubelet-wrapper reads for the hyperkube image tag.
pub const IMAGE_TAG: &str = "KUBELET_IMAGE_TAG";
/// The key kubelet-wrapper reads for the hyperkube image.
pub const IMAGE_URL: &str = "KUBELET_IMAGE_URL";
/// The key kubelet.service passes as `--cgroup-driver`.
pub const CGROUP_DRIVER: &str = "KUBELET_CGROUP_DRIVER";

/// The cgroup driver the kubelet must use: the one docker uses, or kubelet
/// refuses to start ("kubelet cgroup driver: \"cgroupfs\" is different from
/// docker cgroup driver: \"systemd\""). Docker's default follows the
/// host: `systemd` on a unified cgroup v2 hierarchy (Flatcar since
/// 2983, Debian 12), `cgroupfs` on cgroup v1 (Container Linux, the
/// torcx era); a seed that names one (docker configured otherwise) wins.
pub fn cgroup_driver(unified_cgroup_hierarchy: bool) -> &'static str {
    if unified_cgroup_hierarchy {
        "systemd"
    } else {
        "cgroupfs"
    }
}

/// An environment file's entries, in file order (later duplicates replace
/// earlier values in place, as systemd's last-one-wins would).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EnvFile {
    entries: Vec<(String, String)>,
}

impl EnvFile {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn entries(&self) -> &[(String, String)] {
        &self.entries
    }

    /// Sets a key, keeping its position if present, appending otherwise.
    pub fn set(&mut self, key: &str, value: &str) {
        match self.entries.iter_mut().find(|(k, _)| k == key) {
            Some(e) => e.1 = value.to_string(),
            None => self.entries.push((key.to_string(), value.to_string())),
        }
    }

    /// Parses EnvironmentFile text; `source` names the file in errors.
    pub fn parse(text: &str, source: &Path) -> Result<EnvFile> {
        let mut env = EnvFile::default();
        let mut lines = text.split('\n').enumerate().peekable();
        while let Some((idx, raw)) = lines.next() {
            let lineno = idx + 1;
            let line = raw.trim_start();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            let bad = |msg: &str| Error::bad_input(format!("{}:{lineno}: {msg}", source.display()));
            let (key, rest) = line
                .split_once('=')
                .ok_or_else(|| bad("expected KEY=value"))?;
            let key = key.trim();
            if !valid_key(key) {
                return Err(bad(&format!("invalid variable name {key:?}")));
            }
            let rest = rest.trim_start();
            let value = match rest.chars().next() {
                Some('"') => {
                    let mut acc = rest[1..].to_string();
                    loop {
                        if let Some(v) = unquote_double(&acc) {
                            break v;
                        }
                        match lines.next() {
                            Some((_, more)) => {
                                acc.push('\n');
                                acc.push_str(more);
                            }
                            None => {
                                return Err(bad(&format!(
                                    "unterminated double quote in value of {key}"
                                )));
                            }
                        }
                    }
                }
                Some('\'') => {
                    let body = &rest[1..];
                    let end = body.find('\'').ok_or_else(|| {
                        bad(&format!("unterminated single quote in value of {key}"))
                    })?;
                    check_trailing(&body[end + 1..]).map_err(|m| bad(&m))?;
                    body[..end].to_string()
                }
                _ => unescape_unquoted(rest.trim_end()),
            };
            env.set(key, &value);
        }
        Ok(env)
    }

    /// Renders every entry as `KEY="value"`, one per line, in order.
    /// Values with control characters are refused (they cannot be written
    /// unambiguously for every reader of the file).
    pub fn render(&self) -> Result<String> {
        let mut out = String::new();
        for (k, v) in &self.entries {
            if let Some(c) = v.chars().find(|c| c.is_control() && *c != '\t') {
                return Err(Error::bad_input(format!(
                    "value of {k} contains control character {c:?}"
                )));
            }
            out.push_str(k);
            out.push_str("=\"");
            for c in v.chars() {
                if matches!(c, '"' | '\\' | '`' | '$') {
                    out.push('\\');
                }
                out.push(c);
            }
            out.push_str("\"\n");
        }
        Ok(out)
    }
}

fn valid_key(k: &str) -> bool {
    let mut chars = k.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Unquotes the body after an opening `"`; `None` if the quote is not closed.
fn unquote_double(body: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return check_trailing(chars.as_str()).ok().map(|_| out),
            '\\' => match chars.next() {
                Some(n @ ('"' | '\\' | '`' | '$')) => out.push(n),
                Some('\n') => {}
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                }
                None => return None,
            },
            c => out.push(c),
        }
    }
    None
}

fn check_trailing(rest: &str) -> std::result::Result<(), String> {
    let rest = rest.trim();
    if rest.is_empty() || rest.starts_with('#') {
        Ok(())
    } else {
        Err(format!("unexpected text after closing quote: {rest:?}"))
    }
}

fn unescape_unquoted(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The kubelet.env image tag for a cluster version: `v1.9.6+coreos.0` ->
/// `v1.9.6_coreos.0` (image tags cannot contain `+`).
pub fn image_tag(cluster_version: &str) -> String {
    cluster_version.replace('+', "_")
}

/// The cluster version a seed tag stands for: `v1.9.6_coreos.0` -> `v1.9.6+coreos.0`.
pub fn version_from_tag(tag: &str) -> String {
    tag.replace('_', "+")
}

/// Reads the seed kubelet.env; every error names the file.
pub fn read_seed(path: &Path) -> Result<EnvFile> {
    let text = crate::fsutil::read_input("seed kubelet.env", path)?;
    parse_seed(&text, path)
}

/// A seed kubelet.env's text, checked as [`read_seed`] checks the file
/// (`check-config --ignition` reads it out of a rendered config).
pub fn parse_seed(text: &str, path: &Path) -> Result<EnvFile> {
    let env = EnvFile::parse(text, path)
        .map_err(|e| e.context(format!("invalid seed kubelet.env {}", path.display())))?;
    if env.get(IMAGE_URL).is_none_or(str::is_empty) {
        return Err(Error::bad_input(format!(
            "seed kubelet.env {} has no {IMAGE_URL}",
            path.display()
        )));
    }
    Ok(env)
}

/// The cgroup driver of a node's runtime before it runs: the seed's, when
/// provisioning named one (a docker or containerd configured otherwise),
/// else the hierarchy's ([`cgroup_driver`]).
pub fn cgroup_driver_for(seed: &EnvFile, unified_cgroup_hierarchy: bool) -> String {
    seed.get(CGROUP_DRIVER)
        .filter(|d| !d.is_empty())
        .unwrap_or(cgroup_driver(unified_cgroup_hierarchy))
        .to_string()
}

/// The key that names the runtime (`docker` or `containerd`), for people
/// and `status`; the kubelet gets it through `KUBELET_ARGS`.
pub const RUNTIME: &str = "KUBELET_RUNTIME";
/// The key kubelet.service passes as `$KUBELET_ARGS`: the flags of the
/// cluster's kubelet version (see `crate::kubelet_config`).
pub const ARGS: &str = "KUBELET_ARGS";

/// The kubelet.env the node should get: the seed's keys in order, the tag
/// for the cluster version, the cgroup driver the kubelet is given, the
/// runtime and the kubelet's flags (`None` leaves the last two out, as
/// for a kubelet that takes every setting from the unit).
pub fn render_for(
    seed: &EnvFile,
    cluster_version: &str,
    cgroup_driver: &str,
    runtime_and_args: Option<(&str, &[String])>,
) -> Result<String> {
    let mut env = seed.clone();
    env.set(IMAGE_TAG, &image_tag(cluster_version));
    env.set(CGROUP_DRIVER, cgroup_driver);
    if let Some((runtime, args)) = runtime_and_args {
        env.set(RUNTIME, runtime);
        env.set(ARGS, &args.join(" "));
    }
    env.render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(t: &str) -> Result<EnvFile> {
        EnvFile::parse(t, Path::new("/seed/kubelet.env"))
    }

    #[test]
    fn parses_the_seed_tectonic_wrote() {
        let env = parse("KUBELET_IMAGE_URL=\"quay.io/coreos/hyperkube\"\nKUBELET_IMAGE_TAG=\"v1.9.6_coreos.0\"\n").unwrap();
        assert_eq!(env.get(IMAGE_URL), Some("quay.io/coreos/hyperkube"));
        assert_eq!(env.get(IMAGE_TAG), Some("v1.9.6_coreos.0"));
    }

    #[test]
    fn renders_every_seed_key_in_seed_order_with_the_cluster_tag() {
        let seed = parse("# provisioned\nKUBELET_IMAGE_URL=quay.io/coreos/hyperkube\nKUBELET_IMAGE_TAG=v1.8.0_coreos.0\nKUBELET_EXTRA='--node-labels=a=b'\n").unwrap();
        assert_eq!(
            render_for(&seed, "v1.9.6+coreos.0", "cgroupfs", None).unwrap(),
            "KUBELET_IMAGE_URL=\"quay.io/coreos/hyperkube\"\nKUBELET_IMAGE_TAG=\"v1.9.6_coreos.0\"\nKUBELET_EXTRA=\"--node-labels=a=b\"\nKUBELET_CGROUP_DRIVER=\"cgroupfs\"\n"
        );
        let args = [
            "--config=/etc/kubernetes/kubelet-config.yaml".to_string(),
            "--container-runtime=remote".to_string(),
        ];
        assert_eq!(
            render_for(&seed, "v1.20.2", "systemd", Some(("containerd", &args))).unwrap(),
            "KUBELET_IMAGE_URL=\"quay.io/coreos/hyperkube\"\nKUBELET_IMAGE_TAG=\"v1.20.2\"\nKUBELET_EXTRA=\"--node-labels=a=b\"\nKUBELET_CGROUP_DRIVER=\"systemd\"\nKUBELET_RUNTIME=\"containerd\"\nKUBELET_ARGS=\"--config=/etc/kubernetes/kubelet-config.yaml --container-runtime=remote\"\n"
        );
    }

    #[test]
    fn missing_tag_is_appended() {
        let seed = parse("KUBELET_IMAGE_URL=quay.io/coreos/hyperkube\n").unwrap();
        assert!(
            render_for(&seed, "v1.10.2", "systemd", None)
                .unwrap()
                .ends_with("KUBELET_IMAGE_TAG=\"v1.10.2\"\nKUBELET_CGROUP_DRIVER=\"systemd\"\n")
        );
    }

    #[test]
    fn the_cgroup_driver_follows_the_hierarchy_unless_the_seed_names_one() {
        assert_eq!(cgroup_driver(true), "systemd");
        assert_eq!(cgroup_driver(false), "cgroupfs");
        let seed = parse(
            "KUBELET_IMAGE_URL=u\nKUBELET_CGROUP_DRIVER=systemd\nKUBELET_IMAGE_TAG=v1.19.7\n",
        )
        .unwrap();
        assert_eq!(cgroup_driver_for(&seed, false), "systemd");
        let plain = parse("KUBELET_IMAGE_URL=u\n").unwrap();
        assert_eq!(cgroup_driver_for(&plain, false), "cgroupfs");
        assert_eq!(cgroup_driver_for(&plain, true), "systemd");
        assert_eq!(
            render_for(&seed, "v1.20.2", "systemd", None).unwrap(),
            "KUBELET_IMAGE_URL=\"u\"\nKUBELET_CGROUP_DRIVER=\"systemd\"\nKUBELET_IMAGE_TAG=\"v1.20.2\"\n"
        );
    }

    #[test]
    fn quoting_and_escapes_round_trip() {
        let mut env = EnvFile::default();
        env.set("A", "say \"hi\" to $HOME and `x` \\ back");
        env.set("B", "  spaced  ");
        env.set("C", "");
        let text = env.render().unwrap();
        assert_eq!(
            text.lines().next().unwrap(),
            r#"A="say \"hi\" to \$HOME and \`x\` \\ back""#
        );
        assert_eq!(parse(&text).unwrap(), env);
    }

    #[test]
    fn single_quotes_are_literal_and_comments_skipped() {
        let env = parse("; comment\n  # indented comment\nA='no $escapes \\ here'\n\nB=plain\\ value # not a comment\n").unwrap();
        assert_eq!(env.get("A"), Some("no $escapes \\ here"));
        assert_eq!(env.get("B"), Some("plain value # not a comment"));
    }

    #[test]
    fn errors_name_file_and_line() {
        let err = parse("A=1\nNOT A KEY=2\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "/seed/kubelet.env:2: invalid variable name \"NOT A KEY\""
        );
        let err = parse("A=1\nno equals sign\n").unwrap_err();
        assert_eq!(err.to_string(), "/seed/kubelet.env:2: expected KEY=value");
        let err = parse("A=\"open\n").unwrap_err();
        assert!(
            err.to_string()
                .contains("unterminated double quote in value of A"),
            "{err}"
        );
        let err = parse("A='x' y\n").unwrap_err();
        assert!(
            err.to_string()
                .contains("unexpected text after closing quote"),
            "{err}"
        );
    }

    #[test]
    fn control_characters_are_refused_on_render() {
        let mut env = EnvFile::default();
        env.set("A", "line\nbreak");
        assert!(
            env.render()
                .unwrap_err()
                .to_string()
                .contains("value of A contains control character")
        );
    }

    #[test]
    fn seed_without_image_url_is_bad_input() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("kubelet.env");
        std::fs::write(&p, "KUBELET_IMAGE_TAG=v1.9.6_coreos.0\n").unwrap();
        let err = read_seed(&p).unwrap_err();
        assert_eq!(err.class(), crate::error::ErrorClass::BadInput);
        assert!(
            err.to_string().contains("has no KUBELET_IMAGE_URL"),
            "{err}"
        );
        let err = read_seed(&d.path().join("missing.env")).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("failed to read seed kubelet.env at "),
            "{err}"
        );
    }

    #[test]
    fn tag_and_version_convert_both_ways() {
        assert_eq!(image_tag("v1.9.6+coreos.0"), "v1.9.6_coreos.0");
        assert_eq!(version_from_tag("v1.9.6_coreos.0"), "v1.9.6+coreos.0");
    }

    proptest! {
        #[test]
        fn any_printable_value_round_trips(key in "[A-Za-z_][A-Za-z0-9_]{0,20}", value in "[^\\p{Cc}]{0,60}") {
            let mut env = EnvFile::default();
            env.set(&key, &value);
            let text = env.render().unwrap();
            prop_assert_eq!(parse(&text).unwrap(), env);
        }

        #[test]
        fn parser_never_panics(text in "\\PC{0,200}") {
            let _ = parse(&text);
        }
    }
}
