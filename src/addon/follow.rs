//! A check that reads a package while it downloads: the download says how
//! far the partial file is written ([`Written`]); a [`Follow`] reader on
//! another thread reads the file up to there, waiting for more, so the
//! check (torcx's rules walk the whole inflated archive, about as long as
//! the download itself) is done when the download is, not after it.
//!
//! Only a download that writes the file once, in order, from its first
//! byte to its last, can be followed (a retry that continues where the
//! last attempt stopped still is). A resumed one (a partial from an
//! earlier run, or a retry whose server ignored `Range` and started over)
//! gives the follower up ([`Written::at`]), and the caller checks the
//! finished file instead; a download that fails gives it up too
//! ([`AbandonOnDrop`]), so it never waits for ever. The answer of a
//! followed check counts only for a file whose SHA-512 then matches the
//! manifest (the fetcher verifies it after).

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};

/// A check run on the bytes of a package as they download.
pub type Follower = Box<dyn FnOnce(&mut dyn Read) -> crate::error::Result<()> + Send>;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum End {
    #[default]
    Running,
    Complete,
    Abandoned,
}

#[derive(Debug, Default)]
struct State {
    bytes: u64,
    end: End,
}

/// How far the download has written the file, shared with the follower.
#[derive(Debug, Default)]
pub struct Written {
    state: Mutex<State>,
    more: Condvar,
}

impl Written {
    pub fn new() -> Arc<Written> {
        Arc::new(Written::default())
    }

    fn update(&self, f: impl FnOnce(&mut State)) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut s);
        self.more.notify_all();
    }

    /// Bytes `[0, bytes)` of the file are written. A download that
    /// continues from anywhere but where the follower is gives it up.
    pub fn at(&self, start: u64, bytes: u64) {
        self.update(|s| {
            if s.end == End::Running {
                if start == s.bytes {
                    s.bytes = bytes;
                } else {
                    s.end = End::Abandoned;
                }
            }
        });
    }

    /// The download is complete (a follower reads to the end).
    pub fn complete(&self) {
        self.update(|s| {
            if s.end == End::Running {
                s.end = End::Complete;
            }
        });
    }

    /// Whether the follower saw the whole file, written once in order.
    pub fn followed_whole(&self) -> bool {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).end == End::Complete
    }

    /// Waits until more than `pos` bytes are written or the download
    /// ended; how far it is written, and how it ended.
    fn wait_beyond(&self, pos: u64) -> (u64, End) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while s.bytes <= pos && s.end == End::Running {
            s = self.more.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        (s.bytes, s.end)
    }
}

/// Abandons the follower when the download ends without saying how (an
/// error, a dropped future), so it never waits for ever.
pub struct AbandonOnDrop(pub Arc<Written>);

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        self.0.update(|s| {
            if s.end == End::Running {
                s.end = End::Abandoned;
            }
        });
    }
}

/// Reads the file as far as it is written, in order, waiting for more.
pub struct Follow {
    path: PathBuf,
    file: Option<File>,
    pos: u64,
    written: Arc<Written>,
}

impl Follow {
    pub fn new(path: PathBuf, written: Arc<Written>) -> Follow {
        Follow {
            path,
            file: None,
            pos: 0,
            written,
        }
    }
}

impl Read for Follow {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let (bytes, end) = self.written.wait_beyond(self.pos);
        if end == End::Abandoned {
            return Err(io::Error::other(
                "the download was resumed or restarted; the finished file is checked instead",
            ));
        }
        if bytes <= self.pos {
            return Ok(0); // complete, and all read
        }
        if self.file.is_none() {
            self.file = Some(File::open(&self.path)?);
        }
        let file = self.file.as_ref().expect("opened above");
        let want = buf.len().min((bytes - self.pos) as usize);
        let n = file.read_at(&mut buf[..want], self.pos)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{} is shorter than the download wrote", self.path.display()),
            ));
        }
        self.pos += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_follower_reads_what_is_written_as_it_is_written() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("part");
        let mut f = File::create(&path).unwrap();
        let written = Written::new();
        let reader = {
            let (p, w) = (path.clone(), written.clone());
            std::thread::spawn(move || {
                let mut all = Vec::new();
                Follow::new(p, w).read_to_end(&mut all).map(|_| all)
            })
        };
        let mut at = 0u64;
        for chunk in [&b"hello "[..], b"torcx ", b"world"] {
            f.write_all(chunk).unwrap();
            written.at(at, at + chunk.len() as u64);
            at += chunk.len() as u64;
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        written.complete();
        assert_eq!(reader.join().unwrap().unwrap(), b"hello torcx world");
        assert!(written.followed_whole());
    }

    #[test]
    fn a_resumed_or_dropped_download_gives_up_the_follower() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("part");
        std::fs::write(&path, b"0123456789").unwrap();
        // The second write does not continue where the follower is.
        let written = Written::new();
        written.at(0, 4);
        written.at(0, 10);
        let mut all = Vec::new();
        let err = Follow::new(path.clone(), written.clone())
            .read_to_end(&mut all)
            .unwrap_err();
        assert!(err.to_string().contains("checked instead"), "{err}");
        assert!(!written.followed_whole());
        written.complete();
        assert!(!written.followed_whole(), "abandoned stays abandoned");
        // A download that ends without a word (an error, a dropped future).
        let written = Written::new();
        let reader = {
            let (p, w) = (path.clone(), written.clone());
            std::thread::spawn(move || Follow::new(p, w).read_to_end(&mut Vec::new()))
        };
        drop(AbandonOnDrop(written.clone()));
        assert!(reader.join().unwrap().is_err());
    }
}
