//! Errors and the exit codes they map to.
//!
//! Every failure the agent reports carries an [`ErrorClass`] that decides its
//! exit code, and a message with context ("failed to read seed kubelet.env at
//! …: …"). systemd's `RestartPreventExitStatus=` lists the classes where a
//! retry cannot help, so a bad config does not crash-loop forever.

use std::fmt;

/// What kind of failure this is; decides the process exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorClass {
    /// Transient: network, API server, update_engine, Docker, S3 and
    /// mirrors, a reboot not done within `reboot.wait_secs`, a helper step
    /// that failed or timed out. systemd restarts the unit.
    Retryable,
    /// The agent's configuration file is missing, unreadable or invalid; or
    /// S3 denies access to the asset bundle (after
    /// `assets.s3.access_denied_grace_secs`).
    Config,
    /// An input provisioned onto the node (seed file, kubeconfig, mappings,
    /// archive) is missing or malformed.
    BadInput,
    /// A signature, checksum or TLS trust check (the API server's
    /// certificate against the kubeconfig's CA) failed, or `metadata
    /// validate` found problems. Nothing was installed.
    Verification,
    /// The node must not proceed: version skew, an update that did not take
    /// effect, the clock before the kubeconfig CA's validity, an unusable
    /// API server version, an unsupported platform, tectonic before
    /// bootkube, `upgrade` when a newer major exists, `addon confirm` of a
    /// docker this boot did not apply.
    Refused,
    /// Another instance holds the lock.
    Locked,
    /// A bug or an unexpected condition of the host.
    Internal,
}

impl ErrorClass {
    /// The documented exit code of this class (see README "Exit codes").
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorClass::Internal => exit::INTERNAL,
            ErrorClass::Retryable => exit::RETRYABLE,
            ErrorClass::Config => exit::CONFIG,
            ErrorClass::BadInput => exit::BAD_INPUT,
            ErrorClass::Verification => exit::VERIFICATION,
            ErrorClass::Refused => exit::REFUSED,
            ErrorClass::Locked => exit::LOCKED,
        }
    }

    /// Every class, in exit code order.
    pub const ALL: [ErrorClass; 7] = [
        ErrorClass::Internal,
        ErrorClass::Retryable,
        ErrorClass::Config,
        ErrorClass::BadInput,
        ErrorClass::Verification,
        ErrorClass::Refused,
        ErrorClass::Locked,
    ];

    /// The class's name as files, logs (`ERROR_CLASS=`) and metrics give
    /// it: `retryable`, `bad-input`, ….
    pub const fn name(self) -> &'static str {
        match self {
            ErrorClass::Retryable => "retryable",
            ErrorClass::Config => "config",
            ErrorClass::BadInput => "bad-input",
            ErrorClass::Verification => "verification",
            ErrorClass::Refused => "refused",
            ErrorClass::Locked => "locked",
            ErrorClass::Internal => "internal",
        }
    }

    /// Whether running again unchanged can succeed.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ErrorClass::Retryable | ErrorClass::Locked | ErrorClass::Verification
        )
    }
}

/// Process exit codes, documented in README.md "Exit codes" (a test holds
/// that table against these, `--help` and the unit).
/// `units/k8s-node-bootstrap.service` lists in `RestartPreventExitStatus=`
/// the codes a restart cannot help (4, 5, 7); an internal error (1) is
/// restarted, as a crash may not repeat.
pub mod exit {
    pub const SUCCESS: u8 = 0;
    pub const INTERNAL: u8 = 1;
    /// Command-line usage error (clap's own code).
    pub const USAGE: u8 = 2;
    pub const RETRYABLE: u8 = 3;
    pub const CONFIG: u8 = 4;
    pub const BAD_INPUT: u8 = 5;
    pub const VERIFICATION: u8 = 6;
    pub const REFUSED: u8 = 7;
    pub const LOCKED: u8 = 8;
    /// `status`: the node is still bootstrapping.
    pub const STATUS_IN_PROGRESS: u8 = 10;
    /// `status`: a step failed and needs attention (or is crash-looping).
    pub const STATUS_FAILED: u8 = 11;
    /// `status`: not enough could be read to tell.
    pub const STATUS_UNKNOWN: u8 = 12;
}

/// An error with a class (exit code) and a message chain.
pub struct Error {
    class: ErrorClass,
    inner: anyhow::Error,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(class: ErrorClass, msg: impl fmt::Display) -> Self {
        Error {
            class,
            inner: anyhow::anyhow!("{msg}"),
        }
    }
    pub fn from_anyhow(class: ErrorClass, inner: anyhow::Error) -> Self {
        Error { class, inner }
    }
    pub fn config(msg: impl fmt::Display) -> Self {
        Self::new(ErrorClass::Config, msg)
    }
    pub fn bad_input(msg: impl fmt::Display) -> Self {
        Self::new(ErrorClass::BadInput, msg)
    }
    pub fn retryable(msg: impl fmt::Display) -> Self {
        Self::new(ErrorClass::Retryable, msg)
    }
    pub fn verification(msg: impl fmt::Display) -> Self {
        Self::new(ErrorClass::Verification, msg)
    }
    pub fn refused(msg: impl fmt::Display) -> Self {
        Self::new(ErrorClass::Refused, msg)
    }
    pub fn internal(msg: impl fmt::Display) -> Self {
        Self::new(ErrorClass::Internal, msg)
    }
    pub fn class(&self) -> ErrorClass {
        self.class
    }
    pub fn exit_code(&self) -> u8 {
        self.class.exit_code()
    }
    /// Adds an outer layer of context, keeping the class.
    pub fn context(self, ctx: impl fmt::Display + Send + Sync + 'static) -> Self {
        Error {
            class: self.class,
            inner: self.inner.context(ctx),
        }
    }
    /// Same message, other class.
    pub fn with_class(self, class: ErrorClass) -> Self {
        Error {
            class,
            inner: self.inner,
        }
    }
    /// The innermost cause, for matching in tests and for short summaries.
    pub fn root_cause(&self) -> String {
        self.inner.root_cause().to_string()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#}", self.inner)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} error: {:#}", self.class, self.inner)
    }
}

impl std::error::Error for Error {}

/// Attaches a class and context to any error result.
pub trait Context<T> {
    /// `io_result.ctx(ErrorClass::BadInput, || format!("failed to read {}", p.display()))`
    fn ctx<C, F>(self, class: ErrorClass, f: F) -> Result<T>
    where
        C: fmt::Display + Send + Sync + 'static,
        F: FnOnce() -> C;
}

impl<T, E> Context<T> for std::result::Result<T, E>
where
    E: std::error::Error + Send + Sync + 'static,
{
    fn ctx<C, F>(self, class: ErrorClass, f: F) -> Result<T>
    where
        C: fmt::Display + Send + Sync + 'static,
        F: FnOnce() -> C,
    {
        self.map_err(|e| Error {
            class,
            inner: anyhow::Error::new(e).context(f()),
        })
    }
}

/// Adds context to an [`Error`] result, keeping its class.
pub trait ResultExt<T> {
    fn context<C, F>(self, f: F) -> Result<T>
    where
        C: fmt::Display + Send + Sync + 'static,
        F: FnOnce() -> C;
}

impl<T> ResultExt<T> for Result<T> {
    fn context<C, F>(self, f: F) -> Result<T>
    where
        C: fmt::Display + Send + Sync + 'static,
        F: FnOnce() -> C,
    {
        self.map_err(|e| e.context(f()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_names_are_the_serialized_names() {
        for c in ErrorClass::ALL {
            assert_eq!(serde_json::to_value(c).unwrap(), c.name());
        }
    }

    #[test]
    fn display_shows_the_whole_chain() {
        let io: std::result::Result<(), std::io::Error> = Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "No such file",
        ));
        let err = io
            .ctx(
                ErrorClass::BadInput,
                || "failed to read seed kubelet.env at /x",
            )
            .unwrap_err();
        let err = err.context("preparing kubelet.env");
        assert_eq!(
            err.to_string(),
            "preparing kubelet.env: failed to read seed kubelet.env at /x: No such file"
        );
        assert_eq!(err.exit_code(), 5);
        assert_eq!(err.root_cause(), "No such file");
    }

    #[test]
    fn exit_codes_are_distinct() {
        let classes = ErrorClass::ALL;
        let mut codes: Vec<u8> = classes.iter().map(|c| c.exit_code()).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), classes.len());
        assert!(!codes.contains(&exit::USAGE), "usage code is clap's own");
    }
}
