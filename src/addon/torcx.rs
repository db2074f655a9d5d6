//! torcx as the node sees it: stores, profiles, `next-profile`, and the
//! running state under `/run/torcx` (docs/formats.md §5).
//!
//! - Stores, searched in this order when booting OS version V, the first
//!   archive for a `name:reference` winning: `/usr/share/torcx/store/` (only
//!   when V is the OS running now: the next OS brings its own vendor store),
//!   `/usr/share/oem/torcx/store/<V>/`, `/usr/share/oem/torcx/store/`,
//!   `/var/lib/torcx/store/<V>/`, `/var/lib/torcx/store/`.
//! - Profiles (`profile-manifest-v0`) in `/usr/share/torcx/profiles/`,
//!   `/usr/share/oem/torcx/profiles/` and `/etc/torcx/profiles/` (only the
//!   last are the user's). At boot torcx merges the lower profiles `vendor`
//!   and `oem` with the upper profile named in `/etc/torcx/next-profile`.
//! - After boot: `/run/torcx/profile.json` (the merged images applied) and
//!   `/run/metadata/torcx`.

use super::fetch::{Fetcher, Source};
use super::follow::Follower;
use super::manifest::Choice;
use crate::digest::Sha512;
use crate::digest::sha512_file;
use crate::error::{Context as _, Error, ErrorClass, Result};
use crate::fsutil;
use crate::fsutil::staged::Staged;
use crate::settings::Paths;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use tracing::{info, warn};

/// The profile kinds torcx reads (`internal/torcx/profile.go`); it writes
/// `/run/torcx/profile.json` as v0, `torcx profile new` writes v1.
pub const PROFILE_KIND_V0: &str = "profile-manifest-v0";
pub const PROFILE_KIND_V1: &str = "profile-manifest-v1";
pub const VENDOR_PROFILE: &str = "vendor";
pub const OEM_PROFILE: &str = "oem";
pub const ARCHIVE_SUFFIX: &str = ".torcx.tgz";

/// One image of a profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    pub name: String,
    pub reference: String,
    /// v1 profiles: the remote the image comes from (`""`: the local
    /// stores); v0 has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
}

impl Image {
    /// A local image (no remote).
    pub fn new(name: &str, reference: &str) -> Image {
        Image {
            name: name.to_string(),
            reference: reference.to_string(),
            remote: None,
        }
    }
}

/// A profile as torcx reads it: its kind and images.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// v1 when the file was `profile-manifest-v1` (written back as v1).
    pub v1: bool,
    pub images: Vec<Image>,
}

#[derive(Debug, Deserialize)]
struct ProfileBox {
    kind: String,
    /// Required, as in torcx; `null` is an empty profile (Go leaves the
    /// struct empty).
    value: serde_json::Value,
}

#[derive(Debug, Default, Deserialize)]
struct ProfileValue {
    /// torcx writes `"images": null` when it applied no image.
    #[serde(default)]
    images: Option<Vec<Image>>,
}

#[derive(Serialize)]
struct ProfileOut<'a> {
    kind: &'a str,
    value: ImagesOut<'a>,
}

#[derive(Serialize)]
struct ImagesOut<'a> {
    images: Vec<ImageOut<'a>>,
}

#[derive(Serialize)]
struct ImageOut<'a> {
    name: &'a str,
    reference: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    remote: Option<&'a str>,
}

/// The torcx locations, derived from the agent's configured paths.
#[derive(Debug, Clone)]
pub struct TorcxPaths {
    pub vendor_store: PathBuf,
    pub oem_store: PathBuf,
    pub user_store: PathBuf,
    pub config_dir: PathBuf,
    pub run_dir: PathBuf,
}

impl TorcxPaths {
    pub fn new(p: &Paths) -> TorcxPaths {
        TorcxPaths {
            vendor_store: p.torcx_vendor_store.clone(),
            oem_store: p.torcx_oem_store.clone(),
            user_store: p.torcx_store.clone(),
            config_dir: p.torcx_config_dir.clone(),
            run_dir: p.torcx_run_dir.clone(),
        }
    }

    /// `/usr/share/torcx/profiles` (next to the vendor store).
    pub fn vendor_profiles(&self) -> PathBuf {
        sibling(&self.vendor_store, "profiles")
    }
    pub fn oem_profiles(&self) -> PathBuf {
        sibling(&self.oem_store, "profiles")
    }
    /// `/etc/torcx/profiles`.
    pub fn user_profiles(&self) -> PathBuf {
        self.config_dir.join("profiles")
    }
    /// `/etc/torcx/next-profile`.
    pub fn next_profile_file(&self) -> PathBuf {
        self.config_dir.join("next-profile")
    }
    /// `/run/torcx/profile.json`.
    pub fn run_profile(&self) -> PathBuf {
        self.run_dir.join("profile.json")
    }
    /// `/var/lib/torcx/store/<os_version>`.
    pub fn user_store_for(&self, os_version: &str) -> PathBuf {
        self.user_store.join(os_version)
    }

    /// The stores torcx searches when booting `os_version`, in its order.
    pub fn store_paths(&self, os_version: &str, current_os: &str) -> Vec<PathBuf> {
        let mut v = Vec::new();
        if os_version == current_os {
            v.push(self.vendor_store.clone());
        }
        v.push(self.oem_store.join(os_version));
        v.push(self.oem_store.clone());
        v.push(self.user_store_for(os_version));
        v.push(self.user_store.clone());
        v
    }

    /// Profile directories in torcx's order (a later one overrides).
    pub fn profile_dirs(&self) -> [PathBuf; 3] {
        [
            self.vendor_profiles(),
            self.oem_profiles(),
            self.user_profiles(),
        ]
    }
}

fn sibling(dir: &Path, name: &str) -> PathBuf {
    dir.parent().unwrap_or(Path::new("/")).join(name)
}

/// Parses a profile the way torcx does: v0 or v1, `null` images or value
/// meaning none, an empty file meaning none. A malformed one, or another
/// kind, is [`ErrorClass::BadInput`] naming the file.
pub fn parse_profile(bytes: &[u8], source: &Path) -> Result<Profile> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Profile {
            v1: false,
            images: Vec::new(),
        });
    }
    let b: ProfileBox = serde_json::from_slice(bytes).ctx(ErrorClass::BadInput, || {
        format!("invalid torcx profile {}", source.display())
    })?;
    let v1 = match b.kind.as_str() {
        PROFILE_KIND_V0 => false,
        PROFILE_KIND_V1 => true,
        other => {
            return Err(Error::bad_input(format!(
                "invalid torcx profile {}: kind is {other:?}, expected {PROFILE_KIND_V0:?} or {PROFILE_KIND_V1:?}",
                source.display(),
            )));
        }
    };
    let value: ProfileValue = match b.value {
        serde_json::Value::Null => ProfileValue::default(),
        v => serde_json::from_value(v).ctx(ErrorClass::BadInput, || {
            format!("invalid torcx profile {}", source.display())
        })?,
    };
    let mut images = value.images.unwrap_or_default();
    if !v1 {
        images.iter_mut().for_each(|i| i.remote = None);
    }
    Ok(Profile { v1, images })
}

/// A profile's JSON as torcx writes it: v1 images always carry `remote`.
pub fn render_profile(profile: &Profile) -> String {
    let out = ProfileOut {
        kind: if profile.v1 {
            PROFILE_KIND_V1
        } else {
            PROFILE_KIND_V0
        },
        value: ImagesOut {
            images: profile
                .images
                .iter()
                .map(|i| ImageOut {
                    name: &i.name,
                    reference: &i.reference,
                    remote: profile.v1.then(|| i.remote.as_deref().unwrap_or_default()),
                })
                .collect(),
        },
    };
    let mut s = serde_json::to_string(&out).expect("profiles serialize");
    s.push('\n');
    s
}

/// Reads a profile file; `Ok(None)` when it does not exist.
pub fn read_profile(path: &Path) -> Result<Option<Profile>> {
    match fs::read(path) {
        Ok(b) => parse_profile(&b, path).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::bad_input(format!(
            "failed to read torcx profile {}: {e}",
            path.display()
        ))),
    }
}

/// The images of a profile file; `Ok(None)` when it does not exist.
pub fn read_images(path: &Path) -> Result<Option<Vec<Image>>> {
    Ok(read_profile(path)?.map(|p| p.images))
}

/// Every profile by name (user profiles override OEM, OEM vendor).
pub fn list_profiles(tp: &TorcxPaths) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    for dir in tp.profile_dirs() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(stem) = name.strip_suffix(".json")
                && e.path().is_file()
            {
                out.insert(stem.to_string(), e.path());
            }
        }
    }
    out
}

/// The name in `/etc/torcx/next-profile`, if any.
pub fn read_next_profile(tp: &TorcxPaths) -> Result<Option<String>> {
    let p = tp.next_profile_file();
    let text = fsutil::read_optional(&p).ctx(ErrorClass::BadInput, || {
        format!("failed to read {}", p.display())
    })?;
    Ok(text
        .map(|t| t.trim().trim_end_matches(".json").to_string())
        .filter(|t| !t.is_empty()))
}

/// torcx's merge: upper images override lower ones of the same name.
pub fn merge_images(lower: &[Image], upper: &[Image]) -> Vec<Image> {
    let mut out: Vec<Image> = lower
        .iter()
        .filter(|l| !upper.iter().any(|u| u.name == l.name))
        .cloned()
        .collect();
    out.extend(upper.iter().cloned());
    out.retain(|i| !i.name.is_empty() && !i.reference.is_empty());
    out
}

/// The images torcx will apply on the next boot (vendor + oem + the next
/// profile), as far as this OS image tells.
pub fn next_boot_images(tp: &TorcxPaths) -> Result<Vec<Image>> {
    let profiles = list_profiles(tp);
    let mut images = Vec::new();
    for lower in [VENDOR_PROFILE, OEM_PROFILE] {
        if let Some(p) = profiles.get(lower)
            && let Some(imgs) = read_images(p)?
        {
            images = merge_images(&images, &imgs);
        }
    }
    if let Some(next) = read_next_profile(tp)?
        && let Some(p) = profiles.get(&next)
        && let Some(imgs) = read_images(p)?
    {
        images = merge_images(&images, &imgs);
    }
    Ok(images)
}

/// What torcx applied at this boot (`/run/torcx/profile.json`).
pub fn running_images(tp: &TorcxPaths) -> Result<Option<Vec<Image>>> {
    read_images(&tp.run_profile())
}

/// The docker reference among images.
pub fn docker_ref(images: &[Image]) -> Option<String> {
    images
        .iter()
        .find(|i| i.name == super::manifest::DOCKER)
        .map(|i| i.reference.clone())
}

/// How the package for one OS version is (or gets) in place.
#[derive(Debug)]
pub enum PackagePlan {
    /// An archive with the right hash is where torcx will find it.
    InPlace(PathBuf),
    /// The next OS image ships it in its vendor store (the signed manifest
    /// says so).
    ShippedWithOs(PathBuf),
    /// Fetched and verified, waiting to be renamed into place;
    /// `followed`: the answer of the check of torcx's rules that read it
    /// as it downloaded, when that check saw the whole package
    /// ([`super::follow`]).
    Staged {
        staged: Staged,
        followed: Option<Result<()>>,
    },
}

/// Makes sure `choice` will be found by torcx when booting `os_version`:
/// already there, shipped with that OS, copied from another store (by
/// hash, or from `staged_copy`: a verified file of the same hash staged for
/// another OS version in this run), or downloaded. Nothing gets a final
/// name here.
pub async fn prepare_package(
    config: &super::Inputs<'_>,
    tp: &TorcxPaths,
    fetcher: &Fetcher,
    os_version: &str,
    current_os: &str,
    choice: &Choice,
    staged_copy: Option<&Path>,
) -> Result<PackagePlan> {
    let name = choice.archive_name();
    let ours = tp.user_store_for(os_version);
    for dir in tp.store_paths(os_version, current_os) {
        let f = dir.join(&name);
        if !f.is_file() {
            continue;
        }
        let h = hash_of(&f)?;
        if h == choice.hash {
            info!(step = "docker-addon", path = %f.display(), version = %choice.version, os_version, "package already in a torcx store");
            return Ok(PackagePlan::InPlace(f));
        }
        if dir == ours {
            warn!(step = "docker-addon", path = %f.display(), "store file does not match the manifest; replacing it");
            break;
        }
        if dir.starts_with(&tp.user_store) {
            // The unversioned user store comes after ours: ours will win.
            continue;
        }
        warn!(
            step = "docker-addon",
            path = %f.display(),
            version = %choice.version,
            "the OS or OEM image ships its own build of this docker version, which torcx prefers; using it"
        );
        return Ok(PackagePlan::InPlace(f));
    }
    if os_version != current_os {
        let vendor = tp.vendor_store.join(&name);
        if choice.paths.contains(&vendor) {
            info!(step = "docker-addon", path = %vendor.display(), os_version, "the next OS image ships this package");
            return Ok(PackagePlan::ShippedWithOs(vendor));
        }
    }
    let found = match staged_copy {
        Some(p) => Some(p.to_path_buf()),
        None => find_by_hash(tp, &choice.hash)?,
    };
    if let Some(found) = found {
        info!(step = "docker-addon", from = %found.display(), os_version, "reusing a package from another store");
        let staged = fetcher
            .fetch_package(&Source::File(found), &ours, &name, &choice.hash)
            .await?;
        return Ok(PackagePlan::Staged {
            staged,
            followed: None,
        });
    }
    if let Some(item) = &choice.origin {
        let staged =
            super::metasource::fetch_staged(config, item, &ours, &name, &choice.hash).await?;
        return Ok(PackagePlan::Staged {
            staged,
            followed: None,
        });
    }
    download_any(
        fetcher,
        &choice.urls,
        &ours,
        &name,
        &choice.hash,
        &choice.version,
        &|| super::image_check(choice, os_version),
    )
    .await
}

/// Tries each URL in turn; the first verified download wins. `check`
/// gives the check of torcx's rules that follows each download.
pub async fn download_any(
    fetcher: &Fetcher,
    urls: &[url::Url],
    dir: &Path,
    name: &str,
    hash: &Sha512,
    version: &str,
    check: &(dyn Fn() -> Follower + Sync),
) -> Result<PackagePlan> {
    if urls.is_empty() {
        return Err(Error::bad_input(format!(
            "the package manifest lists no download location for docker {version}"
        )));
    }
    let mut first_err: Option<Error> = None;
    for u in urls {
        let res = match Source::from_url(u) {
            Ok(src) => {
                fetcher
                    .fetch_package_following(&src, dir, name, hash, Some(check()))
                    .await
            }
            Err(e) => Err(e),
        };
        match res {
            // A package torcx would refuse is no use from another URL
            // either: the caller refuses it.
            Ok((staged, followed)) => return Ok(PackagePlan::Staged { staged, followed }),
            Err(e) => {
                warn!(step = "docker-addon", url = %u, error = %e, "package location failed");
                // A verification failure is the most important to report.
                if first_err
                    .as_ref()
                    .is_none_or(|f| f.class() != ErrorClass::Verification)
                {
                    first_err = Some(e);
                }
            }
        }
    }
    Err(first_err.expect("at least one URL was tried"))
}

fn hash_of(f: &Path) -> Result<Sha512> {
    sha512_file(f).ctx(ErrorClass::Internal, || {
        format!("failed to read {}", f.display())
    })
}

/// Any `*.torcx.tgz` in any store (all OS versions) with this hash.
fn find_by_hash(tp: &TorcxPaths, hash: &Sha512) -> Result<Option<PathBuf>> {
    let mut dirs = vec![
        tp.vendor_store.clone(),
        tp.oem_store.clone(),
        tp.user_store.clone(),
    ];
    for base in [&tp.oem_store, &tp.user_store] {
        if let Ok(entries) = fs::read_dir(base) {
            let mut subs: Vec<PathBuf> = entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect();
            subs.sort();
            dirs.extend(subs);
        }
    }
    for dir in dirs {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.ends_with(ARCHIVE_SUFFIX) && !n.starts_with('.')
            })
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        for f in files {
            if hash_of(&f)? == *hash {
                return Ok(Some(f));
            }
        }
    }
    Ok(None)
}

/// Writes the user profile `name` with docker at `reference` (other images
/// and the profile's kind kept: a v1 profile stays v1) and points
/// `next-profile` at it, each atomically and only when it changes. Returns
/// the files written.
pub fn activate(tp: &TorcxPaths, name: &str, reference: &str) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let path = tp.user_profiles().join(format!("{name}.json"));
    let existing = read_profile(&path)?;
    let mut profile = existing.clone().unwrap_or(Profile {
        v1: false,
        images: Vec::new(),
    });
    // Our package is in a local store: no remote.
    let docker = Image {
        remote: profile.v1.then(String::new),
        ..Image::new(super::manifest::DOCKER, reference)
    };
    match profile.images.iter_mut().find(|i| i.name == docker.name) {
        Some(i) => *i = docker,
        None => profile.images.push(docker),
    }
    if existing.as_ref() != Some(&profile) {
        fsutil::write_file(
            "torcx profile",
            &path,
            render_profile(&profile).as_bytes(),
            fsutil::MODE_PUBLIC,
        )?;
        written.push(path);
    }
    let next = tp.next_profile_file();
    let want = format!("{name}\n");
    let have = fsutil::read_optional(&next).ctx(ErrorClass::BadInput, || {
        format!("failed to read {}", next.display())
    })?;
    if have.as_deref() != Some(want.as_str()) {
        fsutil::write_file(
            "torcx next-profile",
            &next,
            want.as_bytes(),
            fsutil::MODE_PUBLIC,
        )?;
        written.push(next);
    }
    Ok(written)
}

/// The profile to write: the user's own next profile when it is one (an
/// upper profile under `/etc/torcx/profiles`), else `configured`.
pub fn profile_to_use(tp: &TorcxPaths, configured: &str) -> Result<String> {
    if let Some(next) = read_next_profile(tp)?
        && next != VENDOR_PROFILE
        && next != OEM_PROFILE
    {
        if tp.user_profiles().join(format!("{next}.json")).is_file() {
            return Ok(next);
        }
        warn!(
            step = "docker-addon",
            profile = %next,
            path = %tp.next_profile_file().display(),
            "next-profile names no user profile under {}; using {configured}",
            tp.user_profiles().display()
        );
    }
    Ok(configured.to_string())
}

/// Removes store directories of OS versions older than `running`
/// (`/var/lib/torcx/store/<V>/` with V < running). Returns what it removed.
pub fn gc(tp: &TorcxPaths, running: crate::osrelease::OsVersion) -> Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    let entries = match fs::read_dir(&tp.user_store) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(removed),
        Err(e) => {
            return Err(Error::internal(format!(
                "failed to list torcx store {}: {e}",
                tp.user_store.display()
            )));
        }
    };
    let mut dirs: Vec<(crate::osrelease::OsVersion, PathBuf)> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let v = crate::osrelease::OsVersion::parse(&e.file_name().to_string_lossy())?;
            Some((v, e.path()))
        })
        .filter(|(v, _)| *v < running)
        .collect();
    dirs.sort();
    for (v, p) in dirs {
        fs::remove_dir_all(&p).ctx(ErrorClass::Internal, || {
            format!("failed to remove old torcx store {}", p.display())
        })?;
        info!(step = "docker-addon", path = %p.display(), os_version = %v, "removed the store of an older OS version");
        removed.push(p);
    }
    if !removed.is_empty() {
        let _ = fsutil::fsync_dir(&tp.user_store);
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn img(n: &str, r: &str) -> Image {
        Image::new(n, r)
    }

    fn v0(images: &[Image]) -> Profile {
        Profile {
            v1: false,
            images: images.to_vec(),
        }
    }

    #[test]
    fn profile_round_trip_and_torcx_merge() {
        let text = render_profile(&v0(&[img("docker", "17.03")]));
        assert_eq!(
            text,
            "{\"kind\":\"profile-manifest-v0\",\"value\":{\"images\":[{\"name\":\"docker\",\"reference\":\"17.03\"}]}}\n"
        );
        assert_eq!(
            parse_profile(text.as_bytes(), Path::new("/p")).unwrap(),
            v0(&[img("docker", "17.03")])
        );
        let merged = merge_images(
            &[img("docker", "1.12"), img("rkt", "1.0")],
            &[img("docker", "17.03"), img("x", "")],
        );
        assert_eq!(merged, [img("rkt", "1.0"), img("docker", "17.03")]);
        let err = parse_profile(
            br#"{"kind":"image-manifest-v0","value":{}}"#,
            Path::new("/etc/torcx/profiles/a.json"),
        )
        .unwrap_err();
        assert_eq!(err.class(), ErrorClass::BadInput);
        assert!(
            err.to_string().contains("/etc/torcx/profiles/a.json"),
            "{err}"
        );
    }

    #[test]
    fn empty_profiles_read_as_torcx_reads_them() {
        for text in [
            &br#"{"kind":"profile-manifest-v0","value":{"images":null}}"#[..],
            br#"{"kind":"profile-manifest-v0","value":null}"#,
            br#"{"kind":"profile-manifest-v1","value":{}}"#,
            b"",
            b"\n",
        ] {
            let p = parse_profile(text, Path::new("/run/torcx/profile.json")).unwrap();
            assert!(p.images.is_empty(), "{}", String::from_utf8_lossy(text));
        }
        assert!(parse_profile(br#"{"kind":"profile-manifest-v0"}"#, Path::new("/p")).is_err());
    }

    /// Files the real torcx wrote (tests/fixtures/torcx; the simulated-node
    /// test `the_torcx_fixtures_are_what_the_real_torcx_writes` keeps them
    /// honest).
    #[test]
    fn profiles_written_by_the_real_torcx_are_read() {
        let read =
            |name: &str, text: &str| parse_profile(text.as_bytes(), Path::new(name)).unwrap();
        let none = read(
            "run-profile-no-images.json",
            include_str!("../../tests/fixtures/torcx/run-profile-no-images.json"),
        );
        assert_eq!(none, v0(&[]));
        let docker = read(
            "run-profile-docker.json",
            include_str!("../../tests/fixtures/torcx/run-profile-docker.json"),
        );
        assert_eq!(docker, v0(&[img("docker", "1.12")]));
        assert_eq!(
            read(
                "user-profile-new.json",
                include_str!("../../tests/fixtures/torcx/user-profile-new.json")
            ),
            v0(&[])
        );
        assert_eq!(
            read(
                "user-profile-use-image.json",
                include_str!("../../tests/fixtures/torcx/user-profile-use-image.json")
            ),
            v0(&[img("docker", "1.12")])
        );
    }

    #[test]
    fn v1_profiles_keep_their_kind_and_remotes() {
        let text = br#"{"kind":"profile-manifest-v1","value":{"images":[{"name":"docker","reference":"1.12","remote":"com.coreos.cl"},{"name":"rkt","reference":"1.0","remote":""}]}}"#;
        let p = parse_profile(text, Path::new("/p")).unwrap();
        assert!(p.v1);
        assert_eq!(p.images[0].remote.as_deref(), Some("com.coreos.cl"));
        assert_eq!(
            render_profile(&p),
            format!("{}\n", String::from_utf8_lossy(text)),
            "written back as read"
        );
    }

    #[test]
    fn store_order_skips_the_vendor_store_of_another_os() {
        let tp = TorcxPaths::new(&crate::settings::Paths::defaults());
        let same: Vec<String> = tp
            .store_paths("1632.3.0", "1632.3.0")
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        assert_eq!(
            same,
            [
                "/usr/share/torcx/store",
                "/usr/share/oem/torcx/store/1632.3.0",
                "/usr/share/oem/torcx/store",
                "/var/lib/torcx/store/1632.3.0",
                "/var/lib/torcx/store"
            ]
        );
        assert_eq!(tp.store_paths("1688.0.0", "1632.3.0").len(), 4);
        assert_eq!(
            tp.vendor_profiles(),
            PathBuf::from("/usr/share/torcx/profiles")
        );
        assert_eq!(
            tp.oem_profiles(),
            PathBuf::from("/usr/share/oem/torcx/profiles")
        );
    }
}
