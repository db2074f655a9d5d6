//! The docs point only at what the repository has: every path of the
//! repository that README.md, docs/*.md, terraform/README.md and
//! ignition/README.md name (`src/addon/config.rs`, `scripts/setup.sh`,
//! `tests/node/run_e2e.rs`, …) exists, so a file renamed or split leaves no
//! pointer behind; and none of them cites a file outside the repository.

use std::fs;
use std::path::{Path, PathBuf};

/// Top-level directories of the repository a doc may point into.
const TOP: &[&str] = &[
    "src",
    "units",
    "scripts",
    "terraform",
    "ignition",
    "monitoring",
    "testkit",
    "tests",
    "docs",
    "bench",
    "benchkit",
];

/// Names that exist only outside the repository.
const OUTSIDE: &[&str] = &["../shared", "FORMATS.md", "TEST-RIG.md", "PRODUCT.md"];

fn docs() -> Vec<PathBuf> {
    let root = testkit::project_root();
    let mut files = vec![
        root.join("README.md"),
        root.join("terraform/README.md"),
        root.join("ignition/README.md"),
    ];
    for e in fs::read_dir(root.join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            files.push(p);
        }
    }
    files.sort();
    files
}

/// The repository paths a text names: a word that starts with one of
/// [`TOP`] and a `/`, and is not the tail of a longer path or URL
/// (`s3://bucket/ignition/x.ign`). It ends before a placeholder (`<tier>`,
/// `*`, `{name}`), where what is left is the directory it names, and
/// before a sentence's closing punctuation.
fn paths_in(text: &str) -> Vec<String> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let mut found = Vec::new();
    for (i, _) in text.match_indices('/') {
        let start = text[..i]
            .char_indices()
            .rev()
            .find(|&(_, c)| !word(c))
            .map_or(0, |(p, c)| p + c.len_utf8());
        if !TOP.contains(&&text[start..i]) {
            continue;
        }
        let before = text[..start].chars().next_back();
        if before.is_some_and(|c| !matches!(c, ' ' | '`' | '(' | '[' | '"' | '\'')) {
            continue;
        }
        let end = text[i..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || "_-./".contains(c)))
            .map_or(text.len(), |p| i + p);
        let mut path = text[start..end].trim_end_matches('.');
        if text[end..].starts_with(['*', '<', '{']) {
            // `tests/inprocess/proptest_*.rs`: the directory it is in.
            path = &path[..=path.rfind('/').unwrap()];
        }
        found.push(path.to_string());
    }
    found
}

#[test]
fn every_repository_path_the_docs_name_exists() {
    let root = testkit::project_root();
    let mut missing = Vec::new();
    let mut checked = 0;
    for doc in docs() {
        let text = fs::read_to_string(&doc).unwrap();
        let name = doc.strip_prefix(&root).unwrap().display().to_string();
        for (n, line) in text.lines().enumerate() {
            for path in paths_in(line) {
                checked += 1;
                if !Path::new(&root).join(&path).exists() {
                    missing.push(format!("{name}:{}: {path}", n + 1));
                }
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} paths found: the scan is broken"
    );
    assert!(
        missing.is_empty(),
        "the docs name paths the repository does not have (renamed or split? point \
         the doc at the new place):\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_docs_cite_nothing_outside_the_repository() {
    let root = testkit::project_root();
    let mut cited = Vec::new();
    for doc in docs() {
        let text = fs::read_to_string(&doc).unwrap();
        for (n, line) in text.lines().enumerate() {
            for outside in OUTSIDE {
                if line.contains(outside) {
                    cited.push(format!(
                        "{}:{}: {outside}",
                        doc.strip_prefix(&root).unwrap().display(),
                        n + 1
                    ));
                }
            }
        }
    }
    assert!(cited.is_empty(), "{}", cited.join("\n"));
}

#[test]
fn the_path_scan_finds_what_a_reader_would_follow() {
    assert_eq!(
        paths_in(
            "see `src/addon/config.rs`; (scripts/setup.sh). tests/<tier>/ and bench/*.sh, \
             tests/inprocess/proptest_*.rs"
        ),
        [
            "src/addon/config.rs",
            "scripts/setup.sh",
            "tests/",
            "bench/",
            "tests/inprocess/"
        ]
    );
    // Not a path of the repository: part of a URL or of a longer path.
    assert!(paths_in("s3://my-bucket/ignition/master-0.ign and /opt/units/x").is_empty());
}
