//! A VM node's disk while the VM is down: the raw ext4 image, read and
//! written with e2fsprogs (`e2fsck`, `debugfs`), never mounted on the host.
//!
//! Before anything reads it, [`Disk::replay_journal`] replays the ext4
//! journal (`e2fsck -E journal_only`), exactly what the guest kernel would
//! do when it mounts the file system after a power cut: what the guest had
//! committed survives, what was only in its page cache is gone. `debugfs`
//! alone would show the pre-replay blocks.

use anyhow::{Context, Result, bail};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One node's disk image file.
pub struct Disk {
    path: PathBuf,
}

impl Disk {
    /// Copies `image` (sparse) to `path`.
    pub fn copy_of(image: &Path, path: &Path) -> Result<Disk> {
        let out = Command::new("cp")
            .args(["--sparse=always", "--reflink=auto"])
            .arg(image)
            .arg(path)
            .output()
            .context("running cp")?;
        if !out.status.success() {
            bail!(
                "copying {} to {}: {}",
                image.display(),
                path.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(Disk { path: path.into() })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replays the ext4 journal if the file system was not cleanly
    /// unmounted (what the kernel does at mount). Nothing else is checked
    /// or repaired.
    pub fn replay_journal(&self) -> Result<()> {
        let out = Command::new("e2fsck")
            .args(["-E", "journal_only", "-p"])
            .arg(&self.path)
            .output()
            .context("running e2fsck (Debian package e2fsprogs)")?;
        // 0: clean, 1: errors corrected (the journal was replayed).
        match out.status.code() {
            Some(0 | 1) => Ok(()),
            _ => bail!(
                "replaying the journal of {} failed ({}): {}{}",
                self.path.display(),
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }

    /// A full read-only check of the file system (after
    /// [`replay_journal`](Self::replay_journal)): `e2fsck -fn`. Returns its
    /// report when it finds anything wrong.
    pub fn check(&self) -> Result<()> {
        let out = Command::new("e2fsck")
            .args(["-f", "-n"])
            .arg(&self.path)
            .output()
            .context("running e2fsck")?;
        if !out.status.success() {
            bail!(
                "e2fsck -fn {} found problems ({}):\n{}{}",
                self.path.display(),
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }

    fn debugfs(&self, write: bool, commands: &str) -> Result<(String, String)> {
        let mut cmd = Command::new("debugfs");
        if write {
            cmd.arg("-w");
        }
        let mut child = cmd
            .args(["-f", "-"])
            .arg(&self.path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("running debugfs (Debian package e2fsprogs)")?;
        child
            .stdin
            .take()
            .expect("piped stdin")
            .write_all(commands.as_bytes())?;
        let out = child.wait_with_output()?;
        if !out.status.success() {
            bail!(
                "debugfs on {} failed ({}): {}",
                self.path.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok((
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    }

    /// Whether `path` exists (any kind of inode). Replay the journal first.
    /// debugfs exits 0 whatever its commands did, so only its two answers
    /// count: an inode, or "File not found"; anything else is an error.
    pub fn exists(&self, path: &str) -> Result<bool> {
        Ok(self.size(path)?.is_some())
    }

    /// The size of the inode at `path` (`None`: there is none).
    fn size(&self, path: &str) -> Result<Option<u64>> {
        let (out, err) = self.debugfs(false, &format!("stat {}\n", quote(path)?))?;
        if out.contains("Inode:") {
            let size = out
                .lines()
                .find(|l| l.contains("User:"))
                .and_then(|l| l.split("Size:").nth(1))
                .and_then(|s| s.trim().parse().ok())
                .with_context(|| format!("debugfs stat {path}: no size in {out:?}"))?;
            return Ok(Some(size));
        }
        if err.contains("File not found by ext2_lookup") {
            return Ok(None);
        }
        bail!(
            "debugfs could not stat {path} in {}: {}",
            self.path.display(),
            err.trim()
        )
    }

    /// The contents of the regular file `path`, `None` if it does not
    /// exist. Replay the journal first.
    pub fn read(&self, path: &str) -> Result<Option<Vec<u8>>> {
        let Some(size) = self.size(path)? else {
            return Ok(None);
        };
        let tmp = tempfile::NamedTempFile::new()?;
        let (_, err) = self.debugfs(
            false,
            &format!(
                "dump {} {}\n",
                quote(path)?,
                quote(&tmp.path().display().to_string())?
            ),
        )?;
        let data = std::fs::read(tmp.path())?;
        // A failed dump leaves the file empty and says so only on stderr.
        if data.len() as u64 != size {
            bail!(
                "debugfs dumped {} bytes of {path} where its inode has {size}: {}",
                data.len(),
                err.trim()
            );
        }
        Ok(Some(data))
    }

    /// [`read`](Self::read) as text.
    pub fn read_string(&self, path: &str) -> Result<Option<String>> {
        Ok(self
            .read(path)?
            .map(|b| String::from_utf8_lossy(&b).into_owned()))
    }

    /// Writes (replaces) the regular file `path`, owned by root with
    /// `mode`, creating its parent directories (0755).
    pub fn write(&self, path: &str, data: impl AsRef<[u8]>, mode: u32) -> Result<()> {
        let tmp = tempfile::NamedTempFile::new()?;
        std::fs::write(tmp.path(), data.as_ref())?;
        let p = quote(path)?;
        let mut script = self.mkdir_p_script(parent(path))?;
        script.push_str(&format!(
            "rm {p}\nwrite {} {p}\nsif {p} mode 0{:o}\nsif {p} uid 0\nsif {p} gid 0\n",
            quote(&tmp.path().display().to_string())?,
            0o100000 | (mode & 0o7777)
        ));
        self.debugfs(true, &script)?;
        match self.read(path)? {
            Some(back) if back == data.as_ref() => Ok(()),
            _ => bail!("writing {path} into {} did not take", self.path.display()),
        }
    }

    /// Copies the host file `from` to `path` (see [`write`](Self::write)).
    pub fn install_file(&self, from: &Path, path: &str, mode: u32) -> Result<()> {
        let data = std::fs::read(from).with_context(|| format!("reading {}", from.display()))?;
        self.write(path, data, mode)
    }

    /// Makes `path` a symbolic link to `target` (replacing what is there).
    pub fn symlink(&self, path: &str, target: &str) -> Result<()> {
        let p = quote(path)?;
        let mut script = self.mkdir_p_script(parent(path))?;
        script.push_str(&format!("rm {p}\nsymlink {p} {}\n", quote(target)?));
        self.debugfs(true, &script)?;
        if !self.exists(path)? {
            bail!("linking {path} in {} did not take", self.path.display());
        }
        Ok(())
    }

    /// Removes the file `path` if it exists.
    pub fn remove(&self, path: &str) -> Result<()> {
        if self.exists(path)? {
            self.debugfs(true, &format!("rm {}\n", quote(path)?))?;
            if self.exists(path)? {
                bail!("removing {path} from {} did not take", self.path.display());
            }
        }
        Ok(())
    }

    fn mkdir_p_script(&self, dir: &str) -> Result<String> {
        let mut script = String::new();
        let mut at = String::new();
        for part in dir.split('/').filter(|p| !p.is_empty()) {
            at.push('/');
            at.push_str(part);
            if !self.exists(&at)? {
                script.push_str(&format!("mkdir {}\n", quote(&at)?));
            }
        }
        Ok(script)
    }
}

fn parent(path: &str) -> &str {
    path.rsplit_once('/').map(|(d, _)| d).unwrap_or("/")
}

/// A path as one debugfs argument (debugfs splits on blanks and knows
/// double quotes).
fn quote(path: &str) -> Result<String> {
    if path.contains(['"', '\n']) {
        bail!("debugfs cannot take the path {path:?}");
    }
    Ok(format!("\"{path}\""))
}
