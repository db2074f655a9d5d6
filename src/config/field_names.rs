//! Every config field a message of the agent names exists: the string
//! literals of `src/` are read for `section.field[.field…]` and each is
//! looked up in the settings `check-config` shows (every field, with the
//! optional sections filled in). A message that tells an operator to set
//! `kubelet.allow_newer_kubernetes`, a field that does not exist, fails
//! here.

use super::Config;
use std::path::{Path, PathBuf};

/// The config's top-level sections (`RawConfig`'s fields that hold objects).
const SECTIONS: [&str; 13] = [
    "paths",
    "cluster",
    "os_update",
    "addon",
    "assets",
    "sources",
    "helpers",
    "metrics",
    "reboot",
    "agent",
    "kubelet",
    "kubelet_config",
    "runtime",
];

/// Words that look like `section.field` and are not config fields: file
/// and unit names, API groups and services, DNS names.
const NOT_FIELDS: [&str; 11] = [
    "kubelet.env",
    "kubelet.service",
    "kubelet.config.k8s.io",
    "kubelet.kubernetes.io",
    "kubelet.lock",
    "cluster.local",
    "runtime.v1",
    "runtime.v1alpha2",
    "reboot.target",
    "metrics.json",
    "metrics.lock",
];

/// Every field, with each optional section and list filled in, as
/// `check-config` prints it.
fn schema() -> serde_json::Value {
    let full = r#"{
      "assets": {"mode": "pull", "s3": {"bucket": "b", "key": "k"}},
      "helpers": {"bootkube": {"mode": "docker", "docker": {"image": "i"}},
                  "tectonic": {"mode": "docker", "docker": {"image": "i"}}},
      "metrics": {"textfile_dir": "/var/lib/node_exporter/textfile_collector"},
      "sources": {"url": "https://m.example.com", "dev_dir": "/d", "default_url": "https://d.example.com",
                  "keyring": "/k", "allow_unsigned": ["url"]},
      "addon": {"enabled": true, "manifest_url": "https://m.example.com/m.json", "keyring": "/k",
                "mappings_file": "/m"},
      "cluster": {"forced_version": "v1.20.2"},
      "kubelet_config": {"taints": ["a=b:NoSchedule"]},
      "runtime": {"sandbox_image": "registry.k8s.io/pause:3.10"}
    }"#;
    let config = Config::from_json(full, Path::new("full.json")).expect("the full config reads");
    serde_json::to_value(config.to_raw()).expect("serializes")
}

/// Whether `field` (dotted; `<…>` and `*` stand for any key) names a value
/// of `schema`. Below a map (an object the schema shows empty, such as
/// `helpers.*.docker.env`) any key is a field.
fn exists(schema: &serde_json::Value, field: &str) -> bool {
    let mut at = vec![schema];
    for part in field.split('.') {
        let mut next = Vec::new();
        for v in at {
            let Some(obj) = v.as_object() else { continue };
            if obj.is_empty() {
                return true;
            }
            if part == "*" || part.starts_with('<') {
                next.extend(obj.values());
            } else if let Some(v) = obj.get(part) {
                next.push(v);
            }
        }
        if next.is_empty() {
            return false;
        }
        at = next;
    }
    true
}

/// The contents of the string literals of Rust source text (normal and
/// raw strings; escapes kept as written).
fn string_literals(src: &str) -> Vec<String> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'\'' => {
                // A char literal ('"') or a lifetime: skip what cannot open a string.
                if b.get(i + 2) == Some(&b'\'') {
                    i += 3;
                } else if b.get(i + 1) == Some(&b'\\') {
                    i += 4;
                } else {
                    i += 1;
                }
            }
            b'r' if matches!(b.get(i + 1), Some(b'#' | b'"'))
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                let start = i + 1 + hashes;
                if b.get(start) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let close = format!("\"{}", "#".repeat(hashes));
                let rest = &src[start + 1..];
                let end = rest.find(&close).map_or(b.len(), |e| start + 1 + e);
                out.push(src[start + 1..end.min(b.len())].to_string());
                i = end + close.len();
            }
            b'"' => {
                let start = i + 1;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                out.push(src[start..i.min(b.len())].to_string());
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}

/// The `section.field…` words of a text.
fn field_words(text: &str) -> Vec<String> {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let is_part = |c: char| is_word(c) || matches!(c, '.' | '<' | '>' | '*' | '|');
    let mut out = Vec::new();
    for (start, _) in text.char_indices() {
        let before = text[..start].chars().next_back();
        if before.is_some_and(|c| is_word(c) || matches!(c, '.' | '/' | '-' | '$' | '{')) {
            continue;
        }
        let Some(section) = SECTIONS
            .iter()
            .filter(|s| text[start..].starts_with(&format!("{s}.")))
            .max_by_key(|s| s.len())
        else {
            continue;
        };
        let end = text[start..]
            .find(|c: char| !is_part(c))
            .map_or(text.len(), |e| start + e);
        let word = text[start..end].trim_end_matches('.');
        // `cluster.proxy-url` (a kubeconfig's key): config fields have no
        // hyphen.
        if text[end..].starts_with('-') {
            continue;
        }
        if word.len() > section.len() + 1 {
            out.push(word.to_string());
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn every_config_field_a_message_names_exists() {
    let schema = schema();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut checked = 0;
    let mut wrong = Vec::new();
    for f in &files {
        // This file's own examples name a missing field on purpose.
        if f.ends_with("config/field_names.rs") {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        for lit in string_literals(&text) {
            for word in field_words(&lit) {
                if NOT_FIELDS
                    .iter()
                    .any(|n| word == *n || word.starts_with(&format!("{n}.")))
                {
                    continue;
                }
                checked += 1;
                if !exists(&schema, &word) {
                    wrong.push(format!(
                        "{}: `{word}` in {lit:?}",
                        f.strip_prefix(&src).unwrap().display()
                    ));
                }
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} field names found: is the scan blind?"
    );
    assert!(
        wrong.is_empty(),
        "messages name config fields that do not exist:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_scan_finds_fields_and_their_absence() {
    let schema = schema();
    assert_eq!(
        field_words("set kubelet.allow_newer_kubernetes to proceed (see paths.seed_dir)."),
        ["kubelet.allow_newer_kubernetes", "paths.seed_dir"]
    );
    assert!(!exists(&schema, "kubelet.allow_newer_kubernetes"));
    assert!(exists(&schema, "kubelet_config.allow_newer_kubernetes"));
    assert!(exists(&schema, "helpers.<step>.docker.image"));
    assert!(exists(&schema, "helpers.*.docker.env.API_TOKEN"));
    assert!(!exists(&schema, "helpers.bootkube.docker.imagee"));
    assert_eq!(
        string_literals("let a = \"x.y\"; // \"not\"\nlet b = r#\"q \"r\"\"#; let c = '\"';"),
        ["x.y", "q \"r\""]
    );
}
