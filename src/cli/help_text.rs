//! The help an operator reads (`--help` of every command): every argument
//! described, the exit codes at the end, and no term of the project's own
//! history ("seed 003") in it.

use super::Cli;
use clap::CommandFactory;

/// Every (command path, text) of the help: about texts and argument helps.
fn texts(cmd: &clap::Command, path: &str, out: &mut Vec<(String, String)>) {
    for t in [cmd.get_about(), cmd.get_long_about()]
        .into_iter()
        .flatten()
    {
        out.push((path.to_string(), t.to_string()));
    }
    for a in cmd.get_arguments() {
        let name = format!("{path} {}", a.get_id());
        if matches!(a.get_id().as_str(), "help" | "version") {
            continue;
        }
        let help = a
            .get_long_help()
            .or(a.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default();
        out.push((name, help));
    }
    for sub in cmd.get_subcommands() {
        texts(sub, &format!("{path} {}", sub.get_name()), out);
    }
}

#[test]
fn every_argument_is_described_in_plain_words() {
    let mut all = Vec::new();
    texts(&Cli::command(), "node-bootstrap", &mut all);
    assert!(
        all.len() > 60,
        "only {} help texts: is the walk blind?",
        all.len()
    );
    let empty: Vec<&str> = all
        .iter()
        .filter(|(_, t)| t.trim().is_empty())
        .map(|(p, _)| p.as_str())
        .collect();
    assert!(
        empty.is_empty(),
        "arguments without a description: {empty:?}"
    );
    let internal: Vec<String> = all
        .iter()
        .filter(|(_, t)| t.to_lowercase().contains("seed 0"))
        .map(|(p, t)| format!("{p}: {t}"))
        .collect();
    assert!(
        internal.is_empty(),
        "help that names the project's seed documents: {internal:?}"
    );
}

#[test]
fn every_command_says_its_exit_codes() {
    fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
        let long = cmd
            .get_after_long_help()
            .map(|h| h.to_string())
            .unwrap_or_default();
        if !long.contains("Exit codes") || !long.contains("4   configuration error") {
            missing.push(path.to_string());
        }
        for sub in cmd.get_subcommands() {
            walk(sub, &format!("{path} {}", sub.get_name()), missing);
        }
    }
    let mut missing = Vec::new();
    walk(&super::command(), "node-bootstrap", &mut missing);
    assert!(
        missing.is_empty(),
        "--help without the exit codes: {missing:?}"
    );
}
