//! `node-bootstrap preflight`: the checks `run` starts with, and the API
//! server asked once, one line each (or one JSON document).

use super::runtime;
use crate::config::Config;
use crate::error::{ErrorClass, Result, exit};
use crate::flow::preflight::{Check, first_failure};
use clap::Args;

#[derive(Debug, Args)]
pub struct PreflightArgs {
    /// Print the checks as JSON: {"checks": [{"name", "ok", "detail" or
    /// "error", "class"}], "passed"}.
    #[arg(long)]
    pub json: bool,
}

/// Runs the checks, prints them, fails with the first failure's class.
/// With `--json` the one document printed carries the failure too
/// (`"error"`, as every `--json` command's failure: [`super::json_error`]).
pub(super) fn command(config: &Config, args: &PreflightArgs) -> Result<u8> {
    let checks = runtime()?.block_on(crate::flow::command::preflight(config));
    let failed = checks.iter().filter(|c| c.outcome.is_err()).count();
    if !args.json {
        for c in &checks {
            match &c.outcome {
                Ok(detail) => println!("ok    {:<18} {detail}", c.name),
                Err(e) => println!("FAIL  {:<18} {e}", c.name),
            }
        }
        if failed == 0 {
            println!("preflight: all {} checks passed", checks.len());
        }
    }
    let mut doc = document(&checks);
    let outcome = first_failure(checks).map_err(|e| {
        if e.class() == ErrorClass::Internal {
            e
        } else {
            e.context(format!("{failed} preflight check(s) failed"))
        }
    });
    if !args.json {
        outcome?;
        return Ok(exit::SUCCESS);
    }
    match outcome {
        Ok(()) => {
            super::print_json(&doc);
            Ok(exit::SUCCESS)
        }
        Err(e) => {
            doc["error"] = super::json_error::document(&e)["error"].take();
            super::print_json(&doc);
            eprintln!("node-bootstrap: error: {e}");
            Ok(e.exit_code())
        }
    }
}

/// The checks as `--json` prints them.
fn document(checks: &[Check]) -> serde_json::Value {
    let list: Vec<_> = checks
        .iter()
        .map(|c| match &c.outcome {
            Ok(detail) => serde_json::json!({"name": c.name, "ok": true, "detail": detail}),
            Err(e) => serde_json::json!({
                "name": c.name, "ok": false, "error": e.to_string(),
                "class": e.class().name(), "exit_code": e.exit_code(),
            }),
        })
        .collect();
    serde_json::json!({
        "checks": list,
        "passed": checks.iter().all(|c| c.outcome.is_ok()),
    })
}
