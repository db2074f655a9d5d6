//! Whether torcx can apply a `.torcx.tgz` image, checked before the agent
//! installs it or asks for a reboot: a node must never reboot into a docker
//! that torcx refuses (docs/formats.md, "torcx images").
//!
//! The rules are those of torcx's boot-time generator (flatcar/torcx
//! `pkg/tar/untar.go`, `internal/torcx/perform.go`, `propagate.go`), which
//! unpacks an image chrooted into `/run/torcx/unpack/<name>` and then
//! propagates its assets:
//! - the extractor creates nothing it is not given: a file, link, device or
//!   fifo whose parent directory has no entry earlier in the archive fails
//!   (`open /.torcx/manifest.json: no such file or directory`); only
//!   directory entries create their parents;
//! - a symlink over an existing path fails; a hard link needs its target;
//!   entry types other than files, directories, links, devices and fifos
//!   (old GNU sparse files, volume headers, ...) fail; contiguous files
//!   (`'7'`) are skipped;
//! - every image unpacks into one 450 MiB tmpfs;
//! - without `/.torcx/manifest.json` nothing is propagated; its assets
//!   (`bin`, `units`, `network`, `sysusers`, `tmpfiles`, `udev_rules`) are
//!   looked up in the image, a missing unit failing the image.
//!
//! On top of torcx, a docker image must declare the manifest kind
//! `image-manifest-v0`, contain every asset it lists, and provide a
//! `docker` binary: otherwise docker would not start after the reboot.

use crate::error::{Error, Result};
use serde::Deserialize;
use std::collections::{BTreeMap, VecDeque};
use std::io::Read;

/// torcx mounts `/run/torcx/unpack` as a tmpfs of this size
/// (`setupPaths` in `perform.go`), shared by all images.
pub const UNPACK_LIMIT_BYTES: u64 = 450 * 1024 * 1024;
/// Where an image's manifest is.
pub const MANIFEST_PATH: &str = "/.torcx/manifest.json";
pub const MANIFEST_KIND: &str = "image-manifest-v0";
const MAX_MANIFEST_BYTES: u64 = 1 << 20;
const PAGE: u64 = 4096;

/// What a checked image offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageSummary {
    /// Binaries torcx links into `/run/torcx/bin` (basenames).
    pub binaries: Vec<String>,
    /// Units torcx copies into `/run/systemd/system`.
    pub units: Vec<String>,
    /// Bytes the image takes in torcx's unpack tmpfs (files in pages).
    pub unpacked_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Dir,
    File,
    Symlink(String),
    Other,
}

#[derive(Debug, Default, Deserialize)]
struct Manifest {
    kind: String,
    #[serde(default)]
    value: Assets,
}

#[derive(Debug, Default, Deserialize)]
struct Assets {
    #[serde(default)]
    bin: Vec<String>,
    #[serde(default)]
    network: Vec<String>,
    #[serde(default)]
    units: Vec<String>,
    #[serde(default)]
    sysusers: Vec<String>,
    #[serde(default)]
    tmpfiles: Vec<String>,
    #[serde(default)]
    udev_rules: Vec<String>,
}

/// `filepath.Join("/", filepath.Clean(name))`: absolute, no `.`/`..`.
fn clean(name: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in name.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    format!("/{}", parts.join("/"))
}

fn parent(p: &str) -> &str {
    match p.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &p[..i],
    }
}

/// The image's tree as the extractor would build it.
#[derive(Default)]
struct Tree {
    nodes: BTreeMap<String, Node>,
}

impl Tree {
    /// The directory `path` resolves to (symlinks followed inside the
    /// image, as in the chroot), or why it does not.
    fn resolve_dir(&self, path: &str) -> std::result::Result<String, String> {
        let mut cur: Vec<String> = Vec::new();
        let mut todo: VecDeque<String> = path
            .split('/')
            .filter(|c| !c.is_empty())
            .map(str::to_string)
            .collect();
        let mut hops = 0;
        while let Some(c) = todo.pop_front() {
            match c.as_str() {
                "." => continue,
                ".." => {
                    cur.pop();
                    continue;
                }
                _ => {}
            }
            cur.push(c);
            let here = format!("/{}", cur.join("/"));
            match self.nodes.get(&here) {
                Some(Node::Dir) => {}
                Some(Node::Symlink(target)) => {
                    hops += 1;
                    if hops > 40 {
                        return Err(format!("{here} is a symlink loop"));
                    }
                    cur.pop();
                    if target.starts_with('/') {
                        cur.clear();
                    }
                    for (i, t) in target.split('/').filter(|c| !c.is_empty()).enumerate() {
                        todo.insert(i, t.to_string());
                    }
                }
                Some(_) => return Err(format!("{here} is not a directory")),
                None => return Err(format!("directory {here} has no entry before it")),
            }
        }
        Ok(format!("/{}", cur.join("/")))
    }

    /// The node at `path` (its parents resolved), if any.
    fn find(&self, path: &str) -> Option<&Node> {
        let dir = self.resolve_dir(parent(path)).ok()?;
        let name = path.rsplit('/').next().unwrap_or_default();
        let full = if dir == "/" {
            format!("/{name}")
        } else {
            format!("{dir}/{name}")
        };
        self.nodes.get(&full).or_else(|| self.nodes.get(path))
    }

    fn mkdir_all(&mut self, path: &str) -> std::result::Result<(), String> {
        let mut p = String::new();
        for c in path.split('/').filter(|c| !c.is_empty()) {
            p.push('/');
            p.push_str(c);
            match self.nodes.get(&p) {
                None => {
                    self.nodes.insert(p.clone(), Node::Dir);
                }
                Some(Node::Dir | Node::Symlink(_)) => {}
                Some(_) => return Err(format!("{p} is a file, so no directory can be made there")),
            }
        }
        Ok(())
    }
}

/// Checks that torcx can apply the image at `path` and that it provides
/// docker (see module docs). `what` names the package in errors. (The
/// agent reads the file through [`check_reader`].)
#[cfg(test)]
pub fn check(path: &std::path::Path, what: &str) -> Result<ImageSummary> {
    match std::fs::File::open(path) {
        Ok(f) => check_reader(&mut std::io::BufReader::new(f), what),
        Err(e) => Err(refused(
            what,
            format!("cannot open {}: {e}", path.display()),
        )),
    }
}

fn refused(what: &str, why: String) -> Error {
    Error::bad_input(format!(
        "{what} is not an image torcx can apply: {why}; it is not installed and no reboot is asked for"
    ))
}

/// [`check`] of the image's bytes as `image` reads them (the file, or a
/// download as it arrives).
pub fn check_reader(image: &mut dyn Read, what: &str) -> Result<ImageSummary> {
    let refuse = |why: String| refused(what, why);
    let image = extract_as_torcx(image).map_err(refuse)?;
    if image.unpacked_bytes > UNPACK_LIMIT_BYTES {
        return Err(refuse(format!(
            "it unpacks to {} MiB, more than torcx's {} MiB unpack tmpfs",
            image.unpacked_bytes >> 20,
            UNPACK_LIMIT_BYTES >> 20
        )));
    }
    let text = image.manifest.as_deref().ok_or_else(|| {
        refuse(format!(
            "it has no {MANIFEST_PATH}, so torcx would activate none of its binaries or units"
        ))
    })?;
    let assets = check_manifest(text, &image.tree).map_err(refuse)?;
    let binaries: Vec<String> = assets
        .bin
        .iter()
        .filter_map(|b| clean(b).rsplit('/').next().map(str::to_string))
        .collect();
    if !binaries.iter().any(|b| b == "docker") {
        return Err(refuse(format!(
            "its manifest lists no docker binary (bin: {})",
            assets.bin.join(", ")
        )));
    }
    Ok(ImageSummary {
        binaries,
        units: assets.units,
        unpacked_bytes: image.unpacked_bytes,
    })
}

/// What torcx's extractor would make of an archive.
struct Extracted {
    tree: Tree,
    /// The text of `/.torcx/manifest.json`, if the archive has one.
    manifest: Option<String>,
    /// Bytes in the unpack tmpfs (files in pages).
    unpacked_bytes: u64,
}

/// Walks the archive the way torcx's extractor would unpack it (see module
/// docs); the error says which entry it would fail on, and why.
fn extract_as_torcx(image: &mut dyn Read) -> std::result::Result<Extracted, String> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(image));
    let entries = archive
        .entries()
        .map_err(|e| format!("not a gzip'd tar ({e})"))?;
    let mut x = Extracted {
        tree: Tree::default(),
        manifest: None,
        unpacked_bytes: 0,
    };
    x.tree.nodes.insert("/".into(), Node::Dir);
    for entry in entries {
        let mut entry = entry.map_err(|e| format!("unreadable archive ({e})"))?;
        let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let p = clean(&raw);
        let kind = entry.header().entry_type();
        let link = entry
            .link_name_bytes()
            .map(|b| String::from_utf8_lossy(&b).into_owned());
        use tar::EntryType as T;
        if matches!(
            kind,
            T::Regular | T::Symlink | T::Link | T::Char | T::Block | T::Fifo
        ) {
            x.tree.resolve_dir(parent(&p)).map_err(|why| {
                format!(
                    "entry {raw:?} comes before any entry for its directory ({why}); \
                     torcx's extractor does not create missing directories"
                )
            })?;
        }
        let node = match kind {
            T::Directory => {
                x.tree
                    .mkdir_all(&p)
                    .map_err(|why| format!("entry {raw:?}: {why}"))?;
                continue;
            }
            T::Regular => {
                if x.tree.find(&p) == Some(&Node::Dir) {
                    return Err(format!("entry {raw:?} is a file where a directory is"));
                }
                let size = entry.header().size().unwrap_or(0);
                x.unpacked_bytes += size.div_ceil(PAGE) * PAGE;
                if p == MANIFEST_PATH {
                    x.manifest = Some(read_manifest(&mut entry)?);
                }
                Node::File
            }
            T::Symlink => {
                if x.tree.find(&p).is_some() {
                    return Err(format!(
                        "symlink {raw:?} is over a path that exists already"
                    ));
                }
                Node::Symlink(link.unwrap_or_default())
            }
            T::Link => {
                let target = clean(&link.unwrap_or_default());
                if !matches!(x.tree.find(&target), Some(Node::File)) {
                    return Err(format!(
                        "hard link {raw:?} points at {target:?}, which is not a file before it"
                    ));
                }
                Node::File
            }
            T::Char | T::Block | T::Fifo => Node::Other,
            T::Continuous | T::XGlobalHeader | T::XHeader => continue,
            other => {
                return Err(format!(
                    "entry {raw:?} has type {:?}, which torcx's extractor does not know",
                    other.as_byte() as char
                ));
            }
        };
        x.tree.nodes.insert(p, node);
    }
    Ok(x)
}

fn read_manifest(entry: &mut impl Read) -> std::result::Result<String, String> {
    let mut text = String::new();
    entry
        .take(MAX_MANIFEST_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| format!("{MANIFEST_PATH} is not UTF-8 text ({e})"))?;
    Ok(text)
}

/// The manifest's kind, and every asset it lists present in the image.
fn check_manifest(text: &str, tree: &Tree) -> std::result::Result<Assets, String> {
    let m: Manifest = serde_json::from_str(text)
        .map_err(|e| format!("{MANIFEST_PATH} is not a valid manifest ({e})"))?;
    if m.kind != MANIFEST_KIND {
        return Err(format!(
            "{MANIFEST_PATH} has kind {:?}, expected {MANIFEST_KIND:?}",
            m.kind
        ));
    }
    let a = &m.value;
    for (field, list) in [
        ("bin", &a.bin),
        ("units", &a.units),
        ("network", &a.network),
        ("sysusers", &a.sysusers),
        ("tmpfiles", &a.tmpfiles),
        ("udev_rules", &a.udev_rules),
    ] {
        for asset in list.iter().filter(|s| !s.is_empty()) {
            if tree.find(&clean(asset)).is_none() {
                return Err(format!(
                    "its manifest lists {field} {asset:?}, which the archive does not contain"
                ));
            }
        }
    }
    Ok(m.value)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (path, type, contents or link target) entries, gzip'd.
    fn archive(entries: &[(&str, tar::EntryType, &str)]) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().unwrap();
        let gz = flate2::write::GzEncoder::new(f.reopen().unwrap(), flate2::Compression::fast());
        let mut b = tar::Builder::new(gz);
        for (path, kind, data) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*kind);
            h.set_mode(0o755);
            if matches!(kind, tar::EntryType::Symlink | tar::EntryType::Link) {
                h.set_size(0);
                b.append_link(&mut h, path, data).unwrap();
            } else {
                h.set_size(data.len() as u64);
                b.append_data(&mut h, path, data.as_bytes()).unwrap();
            }
        }
        b.into_inner().unwrap().finish().unwrap();
        f
    }

    const D: tar::EntryType = tar::EntryType::Directory;
    const F: tar::EntryType = tar::EntryType::Regular;
    const MANIFEST: &str = r#"{"kind":"image-manifest-v0","value":{"bin":["/bin/docker"],"units":["/lib/systemd/system/docker.service"]}}"#;

    fn good() -> Vec<(&'static str, tar::EntryType, &'static str)> {
        vec![
            ("./", D, ""),
            ("./.torcx/", D, ""),
            ("./.torcx/manifest.json", F, MANIFEST),
            ("./bin/", D, ""),
            ("./bin/docker", F, "#!/bin/sh\n"),
            ("./lib/systemd/system/", D, ""),
            ("./lib/systemd/system/docker.service", F, "[Service]\n"),
        ]
    }

    fn check_entries(
        entries: &[(&str, tar::EntryType, &str)],
    ) -> std::result::Result<ImageSummary, String> {
        let f = archive(entries);
        check(f.path(), "docker:17.03.torcx.tgz").map_err(|e| e.to_string())
    }

    #[test]
    fn an_image_as_flatcar_packs_it_passes() {
        let s = check_entries(&good()).unwrap();
        assert_eq!(s.binaries, ["docker"]);
        assert_eq!(s.units, ["/lib/systemd/system/docker.service"]);
        assert_eq!(s.unpacked_bytes, 3 * PAGE);
    }

    #[test]
    fn what_torcx_would_refuse_is_refused_by_name() {
        let refused = |entries: Vec<(&str, tar::EntryType, &str)>, why: &str| {
            let e = check_entries(&entries).unwrap_err();
            assert!(
                e.contains("docker:17.03.torcx.tgz is not an image torcx can apply"),
                "{e}"
            );
            assert!(e.contains(why), "wanted {why:?} in: {e}");
        };
        let mut no_dirs = good();
        no_dirs.retain(|(_, t, _)| *t != D);
        refused(
            no_dirs,
            "entry \".torcx/manifest.json\" comes before any entry for its directory",
        );

        let mut kind = good();
        kind[2].2 = r#"{"kind":"image-manifest-v1","value":{}}"#;
        refused(
            kind,
            "has kind \"image-manifest-v1\", expected \"image-manifest-v0\"",
        );

        let mut no_manifest = good();
        no_manifest.remove(2);
        refused(no_manifest, "it has no /.torcx/manifest.json");

        let mut no_unit = good();
        no_unit.pop();
        refused(
            no_unit,
            "lists units \"/lib/systemd/system/docker.service\", which the archive does not contain",
        );

        let mut no_docker = good();
        no_docker[2].2 = r#"{"kind":"image-manifest-v0","value":{"bin":["/bin/containerd"]}}"#;
        no_docker.push(("./bin/containerd", F, ""));
        refused(no_docker, "lists no docker binary");

        let mut twice = good();
        twice.push(("./bin/dockerd", tar::EntryType::Symlink, "docker"));
        twice.push(("./bin/dockerd", tar::EntryType::Symlink, "docker"));
        refused(
            twice,
            "symlink \"bin/dockerd\" is over a path that exists already",
        );

        let mut volume = good();
        volume.push(("./label", tar::EntryType::new(b'V'), ""));
        refused(volume, "has type 'V'");

        let mut dangling = good();
        dangling.push(("./bin/hard", tar::EntryType::Link, "bin/none"));
        refused(dangling, "hard link \"bin/hard\" points at \"/bin/none\"");

        assert!(
            check_entries(&[])
                .unwrap_err()
                .contains("it has no /.torcx/manifest.json")
        );
    }

    #[test]
    fn links_and_symlinked_directories_are_followed_as_in_the_chroot() {
        let mut e = good();
        e.push(("./usr/", D, ""));
        e.push(("./usr/lib/", D, ""));
        e.push(("./lib64", tar::EntryType::Symlink, "usr/lib"));
        e.push(("./lib64/libx.so", F, "x"));
        e.push(("./bin/docker-hard", tar::EntryType::Link, "bin/docker"));
        check_entries(&e).unwrap();
    }

    #[test]
    fn paths_clean_like_torcx() {
        assert_eq!(clean("./bin/docker"), "/bin/docker");
        assert_eq!(clean("../../etc/x"), "/etc/x");
        assert_eq!(clean("a//b/./c/.."), "/a/b");
        assert_eq!(clean("."), "/");
        assert_eq!(parent("/bin/docker"), "/bin");
        assert_eq!(parent("/docker"), "/");
    }

    #[test]
    fn parents_resolve_through_symlinks_inside_the_image() {
        let mut t = Tree::default();
        t.nodes.insert("/".into(), Node::Dir);
        t.mkdir_all("/usr/lib").unwrap();
        t.nodes
            .insert("/lib".into(), Node::Symlink("usr/lib".into()));
        t.nodes.insert("/abs".into(), Node::Symlink("/usr".into()));
        t.nodes
            .insert("/loop".into(), Node::Symlink("/loop".into()));
        t.nodes.insert("/usr/lib/f".into(), Node::File);
        assert_eq!(t.resolve_dir("/lib").unwrap(), "/usr/lib");
        assert_eq!(t.resolve_dir("/abs/lib").unwrap(), "/usr/lib");
        assert_eq!(t.find("/lib/f"), Some(&Node::File));
        assert!(t.resolve_dir("/loop").unwrap_err().contains("loop"));
        assert!(
            t.resolve_dir("/usr/lib/f")
                .unwrap_err()
                .contains("not a directory")
        );
        assert!(
            t.resolve_dir("/opt")
                .unwrap_err()
                .contains("no entry before it")
        );
    }
}
