//! The downloaded prefix of a bundle that arrives in ranged parts, and
//! readers that follow it, so the bundle is unpacked and hashed while it
//! downloads instead of after.
//!
//! Parts are written at their offsets, several at a time and in any order;
//! within a part the bytes arrive in order. [`Prefix`] keeps, per part, how
//! far it has been written (the most ever: a retried part rewrites the same
//! bytes, pinned by the ETag), and from that the contiguous prefix
//! `[0, prefix)` that is on file ([`contiguous`], pure). A [`FollowReader`]
//! reads the file sequentially and blocks at the prefix until more arrives,
//! the download ends (EOF at the object's size) or fails (an error).
//!
//! Readers say how far they have read; bytes every live reader has passed
//! are punched out of the file (`FALLOC_FL_PUNCH_HOLE`): the download never
//! holds more than the readers' lag on disk or in the page cache, and the
//! kernel never spends disk bandwidth writing back a file that is deleted
//! once unpacked.

use super::config::Checksum;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// A reader waits for this much beyond its position (or the end) before it
/// is woken: few wake-ups, still a fine-grained pipeline.
const WAKE_BATCH: u64 = 1 << 20;
/// Consumed bytes are punched out in steps of at least this much.
const PUNCH_STEP: u64 = 8 << 20;

/// Where the object's parts lie: part `i` covers
/// `[i * part_size, min((i + 1) * part_size, size))`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub size: u64,
    pub part_size: u64,
}

impl Layout {
    pub fn parts(&self) -> u64 {
        self.size.div_ceil(self.part_size.max(1))
    }
    pub fn part_len(&self, i: u64) -> u64 {
        let start = i * self.part_size;
        self.part_size.min(self.size.saturating_sub(start))
    }
}

/// The contiguous prefix of the object on file, given how far each part
/// has been written (`marks`), starting the scan at part `first_open` (all
/// before it complete). Returns the new first incomplete part and the
/// prefix's length.
pub fn contiguous(layout: Layout, marks: &[u64], first_open: usize) -> (usize, u64) {
    let mut i = first_open;
    while (i as u64) < layout.parts() && marks[i] >= layout.part_len(i as u64) {
        i += 1;
    }
    let prefix = if (i as u64) < layout.parts() {
        i as u64 * layout.part_size + marks[i]
    } else {
        layout.size
    };
    (i, prefix)
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum End {
    Running,
    Done,
    Failed(String),
}

#[derive(Debug)]
struct State {
    layout: Option<Layout>,
    marks: Vec<u64>,
    first_open: usize,
    prefix: u64,
    end: End,
    /// Wake waiting readers once the prefix reaches this.
    wake_at: u64,
    /// Each reader's position (`u64::MAX` once it is done).
    readers: Vec<u64>,
    /// Bytes punched out of the file so far: `[0, punched)`.
    punched: u64,
    /// Checksums the object's metadata names (known with the layout).
    metadata: Vec<Checksum>,
}

/// The progress of one download, shared by the downloader and its readers.
#[derive(Debug)]
pub struct Prefix {
    state: Mutex<State>,
    cond: Condvar,
}

impl Default for Prefix {
    fn default() -> Self {
        Prefix {
            state: Mutex::new(State {
                layout: None,
                marks: Vec::new(),
                first_open: 0,
                prefix: 0,
                end: End::Running,
                wake_at: u64::MAX,
                readers: Vec::new(),
                punched: 0,
                metadata: Vec::new(),
            }),
            cond: Condvar::new(),
        }
    }
}

impl Prefix {
    pub fn new() -> Arc<Prefix> {
        Arc::new(Prefix::default())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A reader or the downloader that panicked leaves consistent
        // numbers behind: keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The object's size, part size and metadata checksums are known (the
    /// first part's headers). Only the first call counts: a retried first
    /// part is pinned to the same ETag, so it is the same object.
    pub fn start(&self, layout: Layout, metadata: Vec<Checksum>) {
        let mut s = self.lock();
        if s.layout.is_none() {
            s.marks = vec![0; layout.parts() as usize];
            s.layout = Some(layout);
            s.metadata = metadata;
            self.moved(&mut s);
        }
    }

    /// The checksums the object's metadata names (empty before
    /// [`Prefix::start`]: a reader has data only after it).
    pub fn metadata_checksums(&self) -> Vec<Checksum> {
        self.lock().metadata.clone()
    }

    /// Part `part` has `written` bytes on file from its start.
    pub fn advance(&self, part: u64, written: u64) {
        let mut s = self.lock();
        let Some(layout) = s.layout else { return };
        let Some(m) = s.marks.get_mut(part as usize) else {
            return;
        };
        if written <= *m {
            return;
        }
        *m = written.min(layout.part_len(part));
        let first_open = s.first_open;
        let (first_open, prefix) = contiguous(layout, &s.marks, first_open);
        s.first_open = first_open;
        if prefix != s.prefix {
            s.prefix = prefix;
            self.moved(&mut s);
        }
    }

    /// The whole object is on file.
    pub fn finish(&self) {
        let mut s = self.lock();
        if s.end == End::Running {
            s.end = End::Done;
        }
        self.cond.notify_all();
    }

    /// The download failed: readers get an error.
    pub fn fail(&self, why: impl Into<String>) {
        let mut s = self.lock();
        if s.end == End::Running {
            s.end = End::Failed(why.into());
        }
        self.cond.notify_all();
    }

    fn moved(&self, s: &mut State) {
        if s.prefix >= s.wake_at {
            s.wake_at = u64::MAX;
            self.cond.notify_all();
        }
    }

    /// Blocks until bytes beyond `pos` are on file; returns the end of
    /// what may be read (`pos` itself: end of the object).
    fn wait_beyond(&self, pos: u64) -> io::Result<u64> {
        let mut s = self.lock();
        loop {
            if let End::Failed(why) = &s.end {
                return Err(io::Error::other(format!("the download failed: {why}")));
            }
            let done = s.end == End::Done;
            match s.layout {
                Some(l) if pos >= l.size => return Ok(pos),
                Some(l) if done => return Ok(l.size),
                None if done => return Ok(pos),
                Some(l) => {
                    let want = (pos + WAKE_BATCH).min(l.size);
                    if s.prefix >= want {
                        return Ok(s.prefix);
                    }
                    s.wake_at = s.wake_at.min(want);
                }
                None => s.wake_at = 0,
            }
            s = self.cond.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn register(&self) -> usize {
        let mut s = self.lock();
        s.readers.push(0);
        s.readers.len() - 1
    }

    /// Reader `id` is at `pos`; returns a range every reader has passed
    /// that is now to be punched out of the file.
    fn consumed(&self, id: usize, pos: u64) -> Option<(u64, u64)> {
        let mut s = self.lock();
        s.readers[id] = pos;
        let min = s.readers.iter().copied().min().unwrap_or(0);
        let upto = s.layout.map_or(0, |l| min.min(l.size));
        let upto = upto - upto % PUNCH_STEP;
        (upto > s.punched).then(|| {
            let from = std::mem::replace(&mut s.punched, upto);
            (from, upto - from)
        })
    }
}

/// Reads the file of a download as far as it has arrived (see module docs).
pub struct FollowReader {
    file: File,
    pos: u64,
    prefix: Arc<Prefix>,
    id: usize,
}

impl FollowReader {
    /// A reader from the start of `file` (the download's file, opened for
    /// writing too: punching holes needs it).
    pub fn new(file: File, prefix: Arc<Prefix>) -> FollowReader {
        let id = prefix.register();
        FollowReader {
            file,
            pos: 0,
            prefix,
            id,
        }
    }

    fn punch(&self, (offset, len): (u64, u64)) {
        use nix::fcntl::{FallocateFlags, fallocate};
        let flags = FallocateFlags::FALLOC_FL_PUNCH_HOLE | FallocateFlags::FALLOC_FL_KEEP_SIZE;
        // Only an optimisation: a filesystem without hole punching keeps
        // the bytes until the file is deleted.
        let _ = fallocate(&self.file, flags, offset as i64, len as i64);
    }
}

impl Read for FollowReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let end = self.prefix.wait_beyond(self.pos)?;
        let n = ((end - self.pos) as usize).min(buf.len());
        if n == 0 {
            return Ok(0);
        }
        let got = self.file.read_at(&mut buf[..n], self.pos)?;
        if got == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the download's file is shorter than what was written",
            ));
        }
        self.pos += got as u64;
        if let Some(range) = self.prefix.consumed(self.id, self.pos) {
            self.punch(range);
        }
        Ok(got)
    }
}

impl FollowReader {
    /// The download this reader follows.
    pub fn prefix(&self) -> &Prefix {
        &self.prefix
    }
}

impl Drop for FollowReader {
    fn drop(&mut self) {
        // A reader that stopped (done, or its unpack failed) no longer
        // holds bytes back.
        if let Some(range) = self.prefix.consumed(self.id, u64::MAX) {
            self.punch(range);
        }
    }
}

/// Fails the download's readers unless it finished: a downloader that
/// returns early or is dropped never leaves them waiting.
pub struct FailOnDrop(pub Arc<Prefix>);

impl Drop for FailOnDrop {
    fn drop(&mut self) {
        self.0.fail("the download stopped");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: Layout = Layout {
        size: 25,
        part_size: 10,
    };

    #[test]
    fn prefix_is_the_contiguous_start() {
        assert_eq!(contiguous(L, &[0, 0, 0], 0), (0, 0));
        assert_eq!(contiguous(L, &[4, 10, 5], 0), (0, 4));
        assert_eq!(contiguous(L, &[10, 3, 5], 0), (1, 13));
        assert_eq!(contiguous(L, &[10, 10, 4], 1), (2, 24));
        assert_eq!(contiguous(L, &[10, 10, 5], 0), (3, 25));
        let whole = Layout {
            size: 7,
            part_size: 7,
        };
        assert_eq!(contiguous(whole, &[7], 0), (1, 7));
    }

    fn file_with(bytes: &[u8]) -> (tempfile::TempDir, File, File) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("bundle");
        std::fs::write(&p, bytes).unwrap();
        let open = || {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&p)
                .unwrap()
        };
        (d, open(), open())
    }

    #[test]
    fn reader_follows_parts_arriving_out_of_order_and_ends_at_the_size() {
        let data: Vec<u8> = (0..25u8).collect();
        let (_d, f, _) = file_with(&data);
        let p = Prefix::new();
        let mut r = FollowReader::new(f, p.clone());
        let reader = std::thread::spawn(move || {
            let mut out = Vec::new();
            r.read_to_end(&mut out).map(|_| out)
        });
        p.start(L, Vec::new());
        p.advance(2, 5);
        p.advance(1, 10);
        p.advance(0, 6);
        p.advance(0, 3); // a retry rewriting the start: no step back
        p.advance(0, 10);
        p.finish();
        assert_eq!(reader.join().unwrap().unwrap(), data);
    }

    #[test]
    fn a_failed_download_is_an_error_for_its_readers_not_an_end() {
        let (_d, f, _) = file_with(&[1u8; 25]);
        let p = Prefix::new();
        let mut r = FollowReader::new(f, p.clone());
        let reader = std::thread::spawn(move || {
            let mut out = Vec::new();
            r.read_to_end(&mut out).map(|_| out.len())
        });
        p.start(L, Vec::new());
        p.advance(0, 10);
        drop(FailOnDrop(p.clone()));
        let e = reader.join().unwrap().unwrap_err();
        assert!(e.to_string().contains("the download failed"), "{e}");
    }

    #[test]
    fn bytes_all_readers_passed_are_punched_out() {
        let size = 3 * PUNCH_STEP;
        let (_d, a, b) = file_with(&vec![7u8; size as usize]);
        let p = Prefix::new();
        let mut ra = FollowReader::new(a, p.clone());
        let mut rb = FollowReader::new(b, p.clone());
        p.start(
            Layout {
                size,
                part_size: size,
            },
            Vec::new(),
        );
        p.advance(0, size);
        p.finish();
        let mut buf = vec![0u8; PUNCH_STEP as usize + 10];
        ra.read_exact(&mut buf).unwrap();
        assert_eq!(p.lock().punched, 0, "b has read nothing yet");
        rb.read_exact(&mut buf).unwrap();
        assert_eq!(p.lock().punched, PUNCH_STEP);
        assert!(buf.iter().all(|b| *b == 7), "read before the punch");
        drop(rb);
        std::io::copy(&mut ra, &mut std::io::sink()).unwrap();
        assert_eq!(p.lock().punched, size);
    }
}
