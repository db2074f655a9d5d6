//! A command asked for `--json` answers in JSON when it fails too: one
//! document on stdout, `{"error": {"message", "class", "exit_code"}}`,
//! besides the usual `node-bootstrap: error: …` line on stderr, so a
//! script that reads stdout as JSON reads either outcome.

use super::Command;
use crate::error::Error;

/// The error object a failed `--json` command prints on stdout.
pub fn document(e: &Error) -> serde_json::Value {
    serde_json::json!({
        "error": {
            "message": e.to_string(),
            "class": e.class().name(),
            "exit_code": e.exit_code(),
        }
    })
}

/// Prints [`document`] on stdout.
pub fn print(e: &Error) {
    println!("{}", document(e));
}

/// Whether the command line asked for JSON output.
pub fn wanted(command: &Command) -> bool {
    use super::assets::AssetsCommand;
    use super::containerd::ContainerdCommand;
    use super::kubelet_sysext::KubeletCommand;
    use super::metadata::MetadataCommand;
    match command {
        Command::Status(a) => a.json,
        Command::Preflight(a) => a.json,
        Command::Upgrade(a) => a.json,
        Command::Version { json } => *json,
        Command::Assets(AssetsCommand::Pull { json } | AssetsCommand::Check { json }) => *json,
        Command::Kubelet(
            KubeletCommand::Choose { json, .. } | KubeletCommand::Ensure { json, .. },
        ) => *json,
        Command::Containerd(ContainerdCommand::Choose { json, .. }) => *json,
        Command::Metadata(MetadataCommand::Validate(a)) => a.json,
        Command::Metadata(MetadataCommand::Find(a)) => a.json,
        // The commands without `--json` (and any added later: they say so
        // here when they get one).
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn wants(args: &[&str]) -> bool {
        let mut argv = vec!["node-bootstrap"];
        argv.extend_from_slice(args);
        wanted(&super::super::Cli::try_parse_from(argv).unwrap().command)
    }

    /// Every command that takes `--json` is known here: a command that
    /// prints JSON on success must print its failure as JSON too.
    #[test]
    fn every_command_with_a_json_flag_answers_its_errors_in_json() {
        use clap::CommandFactory;
        fn walk(cmd: &clap::Command, path: Vec<String>, found: &mut Vec<Vec<String>>) {
            if cmd.get_arguments().any(|a| a.get_id() == "json") {
                found.push(path.clone());
            }
            for sub in cmd.get_subcommands() {
                let mut p = path.clone();
                p.push(sub.get_name().to_string());
                walk(sub, p, found);
            }
        }
        let mut found = Vec::new();
        walk(&super::super::Cli::command(), Vec::new(), &mut found);
        assert!(found.len() >= 10, "{found:?}");
        for path in found {
            let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
            // The required arguments of the commands that have them.
            match args.as_slice() {
                ["kubelet" | "containerd", _] => args.extend(["--cluster-version", "v1.31.0"]),
                ["metadata", "validate"] => args.push("/srv/mirror"),
                ["metadata", "find"] => args.extend(["--product-id", "x"]),
                _ => {}
            }
            assert!(!wants(&args), "{args:?} without --json");
            args.push("--json");
            assert!(wants(&args), "{args:?}: its errors are not printed as JSON");
        }
    }

    #[test]
    fn the_document_names_message_class_and_exit_code() {
        let d = document(&Error::bad_input("no such file"));
        assert_eq!(
            d,
            serde_json::json!({"error": {"message": "no such file", "class": "bad-input", "exit_code": 5}})
        );
    }
}
