//! A panic is an error like the others. [`install`] (the first thing
//! [`crate::cli::main`] does) replaces Rust's own report (a "thread 'main'
//! panicked at …" line and exit 101, or SIGABRT in the release build,
//! which aborts on a panic) with what every other failure gives: a journal
//! entry with a `MESSAGE_ID` ([`crate::message_ids::PANICKED`], explained
//! by the catalog), the panic's location (`PANIC_LOCATION=src/…:line:col`),
//! its thread and message, the class `internal` (`ERROR_CLASS`,
//! `EXIT_CODE`), a line on stderr, and exit code 1 (`internal` in
//! README "Exit codes"): k8s-node-bootstrap.service and init-assets.service
//! restart it after `RestartSec=` as any internal error (`Restart=on-failure`;
//! 1 is not in `RestartPreventExitStatus=`), the helpers' path units retry
//! within their start limit. The process ends at once, from whichever
//! thread panicked: no destructor runs (as with the release build's abort),
//! the locks go with the process, and temp files are the ones an
//! interrupted run leaves and the next run removes.
//!
//! A test makes `run` panic through [`panic_if_asked`]: the variable
//! [`TEST_TRIGGER_VAR`] must hold exactly [`TEST_TRIGGER_VALUE`], a
//! sentence no configuration holds by accident (tests/node/panic_node.rs).

use crate::error::{ErrorClass, exit};

/// The environment variable of the test-only trigger.
pub const TEST_TRIGGER_VAR: &str = "NODE_BOOTSTRAP_TEST_PANIC";
/// The only value of [`TEST_TRIGGER_VAR`] that makes `run` panic.
pub const TEST_TRIGGER_VALUE: &str = "run: panic on purpose, for a test of the panic hook";

/// Installs the hook for the rest of the process (see the module's docs).
pub fn install() {
    std::panic::set_hook(Box::new(|info| {
        let location = info
            .location()
            .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
            .unwrap_or_else(|| "an unknown location".to_string());
        let message = payload_text(info.payload());
        let thread = std::thread::current()
            .name()
            .unwrap_or("unnamed")
            .to_string();
        let backtrace = std::backtrace::Backtrace::capture();
        let backtrace = match backtrace.status() {
            std::backtrace::BacktraceStatus::Captured => backtrace.to_string(),
            _ => String::new(),
        };
        let class = ErrorClass::Internal;
        macro_rules! report {
            ($($backtrace:tt)*) => {
                tracing::error!(
                    message_id = crate::message_ids::PANICKED,
                    panic_location = %location,
                    panic_thread = %thread,
                    error_class = class.name(),
                    exit_code = class.exit_code(),
                    $($backtrace)*
                    "node-bootstrap panicked at {location}: {message}"
                )
            };
        }
        if backtrace.is_empty() {
            report!();
        } else {
            report!(backtrace = %backtrace,);
        }
        eprintln!(
            "node-bootstrap: error: internal error: panicked at {location} (thread {thread}): {message}"
        );
        if !backtrace.is_empty() {
            eprintln!("{backtrace}");
        }
        std::process::exit(i32::from(exit::INTERNAL));
    }));
}

/// What a panic said (`panic!("…")` gives a `&str` or a `String`).
fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(a panic without a message)".to_string())
}

/// Panics when [`TEST_TRIGGER_VAR`] holds exactly [`TEST_TRIGGER_VALUE`]
/// (nothing else does anything): the test-only way to see the hook work
/// in a real unit. `run` calls it once it has started.
pub fn panic_if_asked() {
    if std::env::var_os(TEST_TRIGGER_VAR).is_some_and(|v| v == TEST_TRIGGER_VALUE) {
        panic!("{TEST_TRIGGER_VAR} asked for a panic");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_payload_is_read_whether_str_or_string() {
        let s: Box<dyn std::any::Any + Send> = Box::new("static text");
        assert_eq!(payload_text(s.as_ref()), "static text");
        let s: Box<dyn std::any::Any + Send> = Box::new(format!("formatted {}", 1));
        assert_eq!(payload_text(s.as_ref()), "formatted 1");
        let s: Box<dyn std::any::Any + Send> = Box::new(7u8);
        assert_eq!(payload_text(s.as_ref()), "(a panic without a message)");
    }
}
