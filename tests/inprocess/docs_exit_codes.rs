//! One exit-code table: README's "Exit codes", the binary's `--help`
//! epilog and the error classes (`ErrorClass::ALL`, their codes and names)
//! cannot drift apart. README's table is the full one; `--help` is its
//! short form, so every word `--help` uses for a code is a word README
//! uses for that code, both name the same codes, and where `--help` says
//! whether systemd restarts the unit, README's systemd column says the
//! same. That column is checked against the unit too.

use node_bootstrap::error::{ErrorClass, exit};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;

/// Words of `--help` that README no longer uses for that code, because
/// `--help` is the wrong side and a pending change to src/cli fixes it:
/// `(code, word, the pending change)`. Each stays tolerated only while
/// `--help` still says it: once src/cli is changed, the test fails until
/// the entry is removed here. Empty: `--help` and README agree.
const HELP_PENDING: &[(u8, &str, &str)] = &[];

/// Words too common to carry a meaning.
const STOPWORDS: &[&str] = &[
    "a", "an", "the", "or", "and", "of", "to", "in", "on", "for", "with", "is", "was", "not",
];

/// One row of README's table.
#[derive(Debug)]
struct Row {
    class: Option<String>,
    meaning: String,
    systemd: String,
}

/// The rows of the table under README's `## Exit codes`, by code.
fn readme_table() -> BTreeMap<u8, Row> {
    let readme = fs::read_to_string(testkit::project_root().join("README.md")).unwrap();
    let section = readme
        .split("\n## Exit codes\n")
        .nth(1)
        .expect("README has a \"## Exit codes\" section");
    let section = section.split("\n## ").next().unwrap();
    let mut rows = BTreeMap::new();
    for line in section.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let Ok(code) = cells[0].parse::<u8>() else {
            continue; // the header and its rule
        };
        assert_eq!(cells.len(), 4, "README exit code row has 4 cells: {line}");
        let class = cells[1].trim_matches('`');
        let row = Row {
            class: (!class.is_empty()).then(|| class.to_string()),
            meaning: cells[2].replace('`', ""),
            systemd: cells[3].to_string(),
        };
        assert!(
            rows.insert(code, row).is_none(),
            "README lists exit code {code} twice"
        );
    }
    assert!(
        rows.len() >= 10,
        "README's exit code table was not found or is short: {rows:?}"
    );
    rows
}

/// The lines of `node-bootstrap --help` after "Exit codes:", by code.
fn help_epilog() -> BTreeMap<u8, String> {
    let out = testkit::cli::agent_command()
        .arg("--help")
        .output()
        .unwrap();
    assert_eq!(testkit::cli::code(&out), 0, "--help exits 0");
    let text = testkit::cli::stdout(&out);
    let epilog = text
        .lines()
        .skip_while(|l| !l.starts_with("Exit codes"))
        .skip(1);
    let mut codes: BTreeMap<u8, String> = BTreeMap::new();
    let mut last = None;
    for line in epilog {
        let line = line.trim();
        let (first, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        match first.parse::<u8>() {
            Ok(code) => {
                assert!(
                    codes.insert(code, rest.trim().to_string()).is_none(),
                    "--help lists exit code {code} twice"
                );
                last = Some(code);
            }
            // clap wraps long lines: the rest of the previous code's.
            Err(_) if !line.is_empty() => {
                let code = last.unwrap_or_else(|| panic!("--help: {line:?} before any code"));
                let text = codes.get_mut(&code).unwrap();
                text.push(' ');
                text.push_str(line);
            }
            Err(_) => {}
        }
    }
    assert!(
        codes.len() >= 10,
        "--help's exit codes are short: {codes:?}"
    );
    codes
}

fn words(text: &str) -> BTreeSet<String> {
    text.to_lowercase()
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
        .map(|w| w.trim_matches('-'))
        .filter(|w| !w.is_empty() && !STOPWORDS.contains(w))
        .map(str::to_string)
        .collect()
}

/// What `--help` says about systemd for a code, if anything.
#[derive(Debug, PartialEq)]
enum Restart {
    Restarts,
    NotRestarted,
}

/// Splits a `--help` line into its meaning and what it says about systemd
/// (`; systemd restarts the unit`, `; not retried`).
fn help_parts(line: &str) -> (String, Option<Restart>) {
    let mut meaning = Vec::new();
    let mut restart = None;
    for part in line.split("; ") {
        match part.trim() {
            "systemd restarts the unit" => restart = Some(Restart::Restarts),
            "not retried" | "not restarted" => restart = Some(Restart::NotRestarted),
            other => meaning.push(other),
        }
    }
    (meaning.join("; "), restart)
}

fn readme_restart(row: &Row) -> Option<Restart> {
    if row.systemd.starts_with("not restarted") {
        Some(Restart::NotRestarted)
    } else if row.systemd.starts_with("restarts") {
        Some(Restart::Restarts)
    } else {
        None
    }
}

#[test]
fn every_error_class_has_a_readme_row_with_its_code_and_name() {
    let rows = readme_table();
    for class in ErrorClass::ALL {
        let code = class.exit_code();
        let row = rows.get(&code).unwrap_or_else(|| {
            panic!(
                "README \"Exit codes\" has no row for exit {code} (class {})",
                class.name()
            )
        });
        assert_eq!(
            row.class.as_deref(),
            Some(class.name()),
            "README's row for exit {code} names class {:?}, the code's class is {:?}",
            row.class,
            class.name()
        );
    }
    // A class cell names a class, and no class is named twice.
    let by_name: BTreeMap<&str, u8> = ErrorClass::ALL
        .iter()
        .map(|c| (c.name(), c.exit_code()))
        .collect();
    for (code, row) in &rows {
        if let Some(name) = &row.class {
            assert_eq!(
                by_name.get(name.as_str()),
                Some(code),
                "README gives exit {code} the class {name:?}, which is not the class of that code"
            );
        }
    }
    // The codes that are not a class's: success, usage, status verdicts.
    for code in [
        exit::SUCCESS,
        exit::USAGE,
        exit::STATUS_IN_PROGRESS,
        exit::STATUS_FAILED,
        exit::STATUS_UNKNOWN,
    ] {
        assert!(
            rows.contains_key(&code),
            "README has no row for exit {code}"
        );
    }
    assert!(words(&rows[&exit::STATUS_IN_PROGRESS].meaning).contains("progress"));
    assert!(words(&rows[&exit::STATUS_FAILED].meaning).contains("failed"));
    assert!(words(&rows[&exit::STATUS_UNKNOWN].meaning).contains("unknown"));
}

#[test]
fn readme_and_help_name_the_same_codes_and_help_says_nothing_readme_does_not() {
    let rows = readme_table();
    let help = help_epilog();
    let readme_codes: BTreeSet<u8> = rows.keys().copied().collect();
    let help_codes: BTreeSet<u8> = help.keys().copied().collect();
    assert_eq!(
        readme_codes, help_codes,
        "README \"Exit codes\" and `node-bootstrap --help` list different codes"
    );
    let mut differences = Vec::new();
    for (code, line) in &help {
        let row = &rows[code];
        let (meaning, restart) = help_parts(line);
        let readme_words = words(&row.meaning);
        for w in words(&meaning).difference(&readme_words) {
            let pending = HELP_PENDING.iter().any(|(c, p, _)| c == code && p == w);
            if !pending {
                differences.push(format!(
                    "exit {code}: --help says {w:?} (\"{line}\"), README does not (\"{}\")",
                    row.meaning
                ));
            }
        }
        if let Some(r) = restart
            && readme_restart(row) != Some(r)
        {
            differences.push(format!(
                "exit {code}: --help says \"{line}\", README's systemd column says {:?}",
                row.systemd
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "README \"Exit codes\" and --help disagree:\n{}",
        differences.join("\n")
    );
    // A pending change that has landed is removed from HELP_PENDING.
    for (code, word, entry) in HELP_PENDING {
        assert!(
            words(&help[code]).contains(*word),
            "--help no longer says {word:?} for exit {code} ({entry} landed): \
             remove it from HELP_PENDING"
        );
    }
}

#[test]
fn readme_systemd_column_is_what_the_bootstrap_unit_does() {
    let rows = readme_table();
    let unit = fs::read_to_string(testkit::unit_file("k8s-node-bootstrap.service")).unwrap();
    let setting = |key: &str| {
        unit.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("k8s-node-bootstrap.service has no {key}="))
            .trim()
            .to_string()
    };
    assert_eq!(setting("Restart"), "on-failure");
    let prevented: BTreeSet<u8> = setting("RestartPreventExitStatus")
        .split_whitespace()
        .map(|c| c.parse().unwrap())
        .collect();
    for class in ErrorClass::ALL {
        let code = class.exit_code();
        let want = if prevented.contains(&code) {
            Restart::NotRestarted
        } else {
            Restart::Restarts
        };
        let row = rows
            .get(&code)
            .unwrap_or_else(|| panic!("README \"Exit codes\" has no row for exit {code}"));
        assert_eq!(
            readme_restart(row),
            Some(want),
            "README's systemd column for exit {code} ({}) contradicts \
             RestartPreventExitStatus={prevented:?} with Restart=on-failure",
            class.name()
        );
    }
}
