//! Files on the host: what a directory holds, and archives made for a test.

use std::path::{Path, PathBuf};

/// The entry names directly in `dir`, sorted; empty when `dir` does not
/// exist (what `ls` shows: "no temp files left", "the store is empty").
pub fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Every path below `dir` (files, directories and links; links are not
/// followed), sorted; empty when `dir` does not exist.
pub fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p.clone());
            }
            out.push(p);
        }
    }
    out.sort();
    out
}

/// The regular files below `dir` (see [`tree`]), sorted.
pub fn files_below(dir: &Path) -> Vec<PathBuf> {
    tree(dir)
        .into_iter()
        .filter(|p| p.symlink_metadata().is_ok_and(|m| m.is_file()))
        .collect()
}

/// A gzipped tar (what an asset bundle is) of regular files given as
/// `(path, contents, mode)`, in that order.
pub fn targz(files: &[(&str, &[u8], u32)]) -> Vec<u8> {
    targz_with_links(files, &[])
}

/// Like [`targz`], followed by symbolic links given as `(path, target)`.
pub fn targz_with_links(files: &[(&str, &[u8], u32)], links: &[(&str, &str)]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut b = tar::Builder::new(gz);
    for (path, data, mode) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(*mode);
        h.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut h, path, *data)
            .expect("appending to a tar");
    }
    for (path, target) in links {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        h.set_mode(0o777);
        b.append_link(&mut h, path, target)
            .expect("appending a link to a tar");
    }
    b.into_inner()
        .expect("finishing a tar")
        .finish()
        .expect("finishing a gzip stream")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_names_and_files_below_see_the_same_directory() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("a/b")).unwrap();
        std::fs::write(d.path().join("a/b/f"), "x").unwrap();
        std::fs::write(d.path().join("g"), "y").unwrap();
        std::os::unix::fs::symlink("g", d.path().join("l")).unwrap();
        assert_eq!(names(d.path()), ["a", "g", "l"]);
        let rel = |v: Vec<PathBuf>| -> Vec<String> {
            v.iter()
                .map(|p| p.strip_prefix(d.path()).unwrap().display().to_string())
                .collect()
        };
        assert_eq!(rel(tree(d.path())), ["a", "a/b", "a/b/f", "g", "l"]);
        assert_eq!(rel(files_below(d.path())), ["a/b/f", "g"]);
        assert!(names(&d.path().join("missing")).is_empty());
        assert!(tree(&d.path().join("missing")).is_empty());
    }
}

/// Writes `data` to `path` with `mode`, creating its parent directories.
pub fn write_mode(path: &Path, data: &[u8], mode: u32) -> anyhow::Result<()> {
    use anyhow::Context as _;
    use std::os::unix::fs::PermissionsExt;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(path, data).with_context(|| format!("writing {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("setting the mode of {}", path.display()))
}
