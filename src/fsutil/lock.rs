//! The run lock: an exclusive `flock(2)` on a file in the state dir, so two
//! `run`s never interleave. The kernel drops it when the process dies, so a
//! crash never leaves a stale lock.

use crate::error::{Error, ErrorClass, Result};
use nix::fcntl::{Flock, FlockArg};
use std::fs::{File, OpenOptions};
use std::path::Path;
use std::time::{Duration, Instant};

/// Held for as long as the value lives.
pub struct RunLock {
    _lock: Flock<File>,
}

impl RunLock {
    /// Takes the lock, waiting up to `wait` for another holder to finish.
    /// `Duration::ZERO` refuses at once. Fails with [`ErrorClass::Locked`].
    pub fn acquire(path: &Path, wait: Duration) -> Result<RunLock> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| {
                Error::new(
                    ErrorClass::Internal,
                    format!("failed to create lock directory {}: {e}", dir.display()),
                )
            })?;
        }
        let deadline = Instant::now() + wait;
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| {
                Error::internal(format!("failed to open lock file {}: {e}", path.display()))
            })?;
        loop {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(lock) => return Ok(RunLock { _lock: lock }),
                Err((f, nix::errno::Errno::EWOULDBLOCK)) => {
                    if Instant::now() >= deadline {
                        return Err(Error::new(
                            ErrorClass::Locked,
                            format!(
                                "another node-bootstrap holds {} (waited {}s)",
                                path.display(),
                                wait.as_secs()
                            ),
                        ));
                    }
                    file = f;
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err((_, e)) => {
                    return Err(Error::internal(format!(
                        "failed to lock {}: {e}",
                        path.display()
                    )));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_holder_is_refused_then_admitted_after_release() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("run.lock");
        let first = RunLock::acquire(&p, Duration::ZERO).unwrap();
        // flock locks belong to the open file description, so a second open in
        // the same process contends like another process would.
        let err = RunLock::acquire(&p, Duration::from_millis(200))
            .err()
            .expect("must be refused");
        assert_eq!(err.class(), ErrorClass::Locked);
        assert!(err.to_string().contains("run.lock"));
        drop(first);
        RunLock::acquire(&p, Duration::ZERO).unwrap();
    }
}
