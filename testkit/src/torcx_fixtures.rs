//! Test fixtures for the docker addon, generated at test time: an OpenPGP
//! keypair (no private key is committed anywhere), detached signatures,
//! torcx package manifests, real `.torcx.tgz` archives with a
//! `.torcx/manifest.json` inside, and systemd-sysext images.

use anyhow::{Context, Result, bail};
use pgp::composed::{
    ArmorOptions, DetachedSignature, EncryptionCaps, KeyType, SecretKeyParamsBuilder,
    SignedPublicKey, SignedSecretKey, SubkeyParamsBuilder,
};
use pgp::crypto::hash::HashAlgorithm;
use pgp::ser::Serialize as _;
use pgp::types::{KeyDetails, Password};
use serde_json::json;
use sha2::{Digest, Sha512};
use std::io::Write;
use std::path::Path;
use std::process::Command;

/// A release signing key made for one test.
pub struct SigningKey {
    secret: SignedSecretKey,
    /// Sign with the signing subkey rather than the primary key.
    use_subkey: bool,
}

impl SigningKey {
    /// An Ed25519 key whose primary key certifies and signs.
    pub fn generate(uid: &str) -> SigningKey {
        Self::make(uid, false)
    }

    /// An Ed25519 key that signs with a signing subkey (as release keys
    /// usually do); the primary key only certifies.
    pub fn generate_with_signing_subkey(uid: &str) -> SigningKey {
        Self::make(uid, true)
    }

    fn make(uid: &str, use_subkey: bool) -> SigningKey {
        let mut params = SecretKeyParamsBuilder::default();
        params
            .key_type(KeyType::Ed25519Legacy)
            .can_certify(true)
            .can_sign(!use_subkey)
            .can_encrypt(EncryptionCaps::None)
            .primary_user_id(uid.into());
        if use_subkey {
            let mut sub = SubkeyParamsBuilder::default();
            sub.key_type(KeyType::Ed25519Legacy)
                .can_sign(true)
                .can_encrypt(EncryptionCaps::None)
                .can_authenticate(false);
            params.subkeys(vec![sub.build().expect("subkey params")]);
        }
        let secret = params
            .build()
            .expect("key params")
            .generate(rand::thread_rng())
            .expect("generating an OpenPGP key");
        SigningKey { secret, use_subkey }
    }

    /// Fingerprint of the primary key (lowercase hex).
    pub fn fingerprint(&self) -> String {
        hex::encode(self.secret.fingerprint().as_bytes())
    }

    /// The public key, ASCII-armored (what goes into the node's keyring).
    pub fn public_armored(&self) -> String {
        SignedPublicKey::from(self.secret.clone())
            .to_armored_string(ArmorOptions::default())
            .expect("armoring a public key")
    }

    /// The secret key, ASCII-armored (what `metadata generate --sign-key`
    /// reads).
    pub fn secret_armored(&self) -> String {
        self.secret
            .to_armored_string(ArmorOptions::default())
            .expect("armoring a secret key")
    }

    /// The public key, binary (`gpg --export` form).
    pub fn public_binary(&self) -> Vec<u8> {
        SignedPublicKey::from(self.secret.clone())
            .to_bytes()
            .expect("serializing a public key")
    }

    /// An armored detached signature over `data` (what `<url>.asc` holds).
    pub fn sign(&self, data: &[u8]) -> String {
        let sig = if self.use_subkey {
            DetachedSignature::sign_binary_data(
                rand::thread_rng(),
                &self.secret.secret_subkeys[0].key,
                &Password::empty(),
                HashAlgorithm::Sha256,
                data,
            )
        } else {
            DetachedSignature::sign_binary_data(
                rand::thread_rng(),
                &self.secret.primary_key,
                &Password::empty(),
                HashAlgorithm::Sha256,
                data,
            )
        }
        .expect("signing");
        sig.to_armored_string(ArmorOptions::default())
            .expect("armoring a signature")
    }
}

/// A fresh Ed25519 secret key whose primary key certifies and signs, for
/// an API that takes the key itself (`metadata::sign::Signer::from_key`,
/// `to_public_key()` for the keyring).
pub fn secret_key(uid: &str) -> SignedSecretKey {
    SigningKey::generate(uid).secret
}

/// `sha512-<hex>` as torcx manifests spell a package hash.
pub fn manifest_hash(data: &[u8]) -> String {
    format!("sha512-{}", hex::encode(Sha512::digest(data)))
}

/// The files of a torcx image: (path inside the image, contents, mode).
pub type ImageFile<'a> = (&'a str, &'a [u8], u32);

/// A torcx image as Flatcar builds one (`tar -C root -czf NAME.torcx.tgz .`):
/// entries named `./...`, every directory with an entry of its own before
/// what it holds (torcx's extractor creates no missing directory), and
/// `.torcx/manifest.json` (`image-manifest-v0`) listing `bins` and `units`
/// (absolute in-image paths).
pub fn torcx_archive(files: &[ImageFile<'_>], bins: &[&str], units: &[&str]) -> Vec<u8> {
    let manifest = image_manifest(bins, units);
    let mut all: Vec<ImageFile<'_>> = vec![(".torcx/manifest.json", &manifest, 0o644)];
    all.extend_from_slice(files);
    let mut dirs = std::collections::BTreeSet::new();
    for (p, _, _) in &all {
        let mut d = Path::new(p).parent();
        while let Some(x) = d.filter(|x| !x.as_os_str().is_empty()) {
            dirs.insert(x.to_path_buf());
            d = x.parent();
        }
    }
    let mut tar = tar_builder();
    append(&mut tar, "./", tar::EntryType::Directory, &[], 0o755);
    for d in &dirs {
        append(
            &mut tar,
            &format!("./{}/", d.display()),
            tar::EntryType::Directory,
            &[],
            0o755,
        );
    }
    for (p, data, mode) in &all {
        append(
            &mut tar,
            &format!("./{p}"),
            tar::EntryType::Regular,
            data,
            *mode,
        );
    }
    tar.into_inner().unwrap().finish().unwrap()
}

/// The same image without any directory entries, as a naive packer (or
/// Python's `tarfile.add` of single files) writes it: real torcx refuses
/// it (`open /.torcx/manifest.json: no such file or directory`).
pub fn torcx_archive_without_directories(
    files: &[ImageFile<'_>],
    bins: &[&str],
    units: &[&str],
) -> Vec<u8> {
    let manifest = image_manifest(bins, units);
    let mut tar = tar_builder();
    append(
        &mut tar,
        ".torcx/manifest.json",
        tar::EntryType::Regular,
        &manifest,
        0o644,
    );
    for (p, data, mode) in files {
        append(&mut tar, p, tar::EntryType::Regular, data, *mode);
    }
    tar.into_inner().unwrap().finish().unwrap()
}

fn image_manifest(bins: &[&str], units: &[&str]) -> Vec<u8> {
    let manifest = json!({"kind": "image-manifest-v0", "value": {"bin": bins, "units": units}});
    serde_json::to_vec_pretty(&manifest).unwrap()
}

fn tar_builder() -> tar::Builder<flate2::write::GzEncoder<Vec<u8>>> {
    tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::default(),
    ))
}

fn append(
    tar: &mut tar::Builder<flate2::write::GzEncoder<Vec<u8>>>,
    path: &str,
    kind: tar::EntryType,
    data: &[u8],
    mode: u32,
) {
    let mut h = tar::Header::new_gnu();
    h.set_size(data.len() as u64);
    h.set_mode(mode);
    h.set_mtime(1_500_000_000);
    h.set_uid(0);
    h.set_gid(0);
    h.set_entry_type(kind);
    tar.append_data(&mut h, path, data).expect("tar entry");
}

/// `docker.service` of a docker torcx image, as Flatcar's: it runs the
/// image's `dockerd` from torcx's bin dir once torcx applied the profile.
pub const DOCKER_SERVICE: &str = "[Unit]\nDescription=Docker Application Container Engine (torcx test image)\n\
Requires=torcx.target\nAfter=torcx.target\n\n[Service]\nEnvironmentFile=/run/metadata/torcx\n\
ExecStart=/usr/bin/env PATH=${TORCX_BINDIR}:${PATH} ${TORCX_BINDIR}/dockerd\n\n[Install]\nWantedBy=multi-user.target\n";

/// How an image's files are packed: [`torcx_archive`] or
/// [`torcx_archive_without_directories`].
type Pack = fn(&[ImageFile<'_>], &[&str], &[&str]) -> Vec<u8>;

/// A docker torcx image for `version` packed by `pack`: `bin/docker` and
/// `bin/dockerd` scripts that report the version, `docker.service`, and
/// incompressible filler the size of a small binary (so downloads take more
/// than one read and can be cut half-way).
fn docker_image(version: &str, pack: Pack) -> Vec<u8> {
    let docker = format!("#!/bin/sh\necho \"Docker version {version}, build torcx-test\"\n");
    let dockerd =
        format!("#!/bin/sh\necho \"dockerd {version} (test image)\"\nexec sleep infinity\n");
    let filler = filler(version, 256 * 1024);
    pack(
        &[
            ("bin/docker", docker.as_bytes(), 0o755),
            ("bin/dockerd", dockerd.as_bytes(), 0o755),
            ("lib/docker/filler.bin", &filler, 0o644),
            (
                "lib/systemd/system/docker.service",
                DOCKER_SERVICE.as_bytes(),
                0o644,
            ),
        ],
        &["/bin/docker", "/bin/dockerd"],
        &["/lib/systemd/system/docker.service"],
    )
}

/// A docker torcx image for `version` that the real torcx applies: it
/// links `docker` and `dockerd` into `/run/torcx/bin` and copies
/// `docker.service` into `/run/systemd/system`.
pub fn docker_archive(version: &str) -> Vec<u8> {
    docker_image(version, torcx_archive)
}

/// The same docker image without directory entries: what the tests served
/// before they ran the real torcx, which refuses it.
pub fn docker_archive_without_directories(version: &str) -> Vec<u8> {
    docker_image(version, torcx_archive_without_directories)
}

/// Deterministic pseudo-random bytes (the same for the same seed).
pub fn filler(seed: &str, len: usize) -> Vec<u8> {
    let mut x: u64 = 0xcbf2_9ce4_8422_2325;
    for b in seed.bytes() {
        x = (x ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// One docker version of a package manifest.
#[derive(Debug, Clone)]
pub struct PkgEntry {
    pub version: String,
    pub hash: String,
    pub urls: Vec<String>,
    pub paths: Vec<String>,
}

impl PkgEntry {
    /// A version whose package is `data`, downloadable from `url`.
    pub fn new(version: &str, data: &[u8], url: &str) -> PkgEntry {
        PkgEntry {
            version: version.to_string(),
            hash: manifest_hash(data),
            urls: vec![url.to_string()],
            paths: Vec::new(),
        }
    }
}

/// A `torcx-package-list-v0` manifest listing docker `entries`.
pub fn package_manifest(entries: &[PkgEntry]) -> String {
    let versions: Vec<_> = entries
        .iter()
        .map(|e| {
            let mut locations: Vec<_> = e.paths.iter().map(|p| json!({"path": p})).collect();
            locations.extend(e.urls.iter().map(|u| json!({"url": u})));
            json!({"version": e.version, "hash": e.hash,
                   "sourcePackage": format!("app-torcx/docker-{}", e.version),
                   "locations": locations})
        })
        .collect();
    let doc = json!({"kind": "torcx-package-list-v0", "value": {"packages": [
        {"name": "docker", "defaultVersion": "1.12", "versions": versions}]}});
    serde_json::to_string_pretty(&doc).unwrap()
}

/// Runtime mappings (YAML, as Tectonic shipped them) for one Kubernetes
/// minor, with an unquoted key the way the original file had them.
pub fn runtime_mappings_yaml(kube_minor: &str, docker: &[&str]) -> String {
    let list: Vec<String> = docker.iter().map(|d| format!("\"{d}\"")).collect();
    format!(
        "kind: VersionManifestV1\nversions:\n  k8s:\n    {kube_minor}:\n      docker: [{}]\n",
        list.join(", ")
    )
}

/// A Container Linux os-release.
pub fn os_release(version_id: &str, board: &str) -> String {
    format!(
        "NAME=\"Container Linux by CoreOS\"\nID=coreos\nVERSION={version_id}\nVERSION_ID={version_id}\nBUILD_ID=test\nPRETTY_NAME=\"Container Linux by CoreOS {version_id} (test)\"\nCOREOS_BOARD=\"{board}\"\n"
    )
}

/// A systemd-sysext image (a raw ext4 file system, as `systemd-sysext`
/// accepts) named `docker`, with `usr/bin/docker` reporting `version` and
/// `usr/lib/extension-release.d/extension-release.docker` carrying
/// `release` (e.g. `ID=debian\nVERSION_ID=12\nSYSEXT_VERSION_ID=24.0.9\n`).
/// Needs `mkfs.ext4` (e2fsprogs).
pub fn sysext_image(version: &str, release: &str) -> Result<Vec<u8>> {
    let docker = format!("#!/bin/sh\necho \"Docker version {version}, build sysext-test\"\n");
    sysext_image_of(
        "docker",
        &[("usr/bin/docker", docker.as_bytes(), 0o755)],
        release,
    )
}

/// A systemd-sysext image named `name` (a raw ext4 file system) holding
/// `files` (path inside the image, contents, mode) and
/// `usr/lib/extension-release.d/extension-release.<name>` with `release`.
/// Sized to what it holds. Needs `mkfs.ext4` (e2fsprogs).
pub fn sysext_image_of(name: &str, files: &[ImageFile<'_>], release: &str) -> Result<Vec<u8>> {
    let dir = tempfile::tempdir()?;
    let tree = dir.path().join("tree");
    let rel_dir = tree.join("usr/lib/extension-release.d");
    std::fs::create_dir_all(&rel_dir)?;
    std::fs::write(rel_dir.join(format!("extension-release.{name}")), release)?;
    let mut bytes = 0u64;
    for (path, data, mode) in files {
        let p = tree.join(path);
        std::fs::create_dir_all(p.parent().expect("a file in a directory"))?;
        std::fs::write(&p, data)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(*mode))?;
        bytes += data.len() as u64;
    }
    let img = dir.path().join(format!("{name}.raw"));
    let f = std::fs::File::create(&img)?;
    f.set_len((8 << 20).max(bytes + bytes / 4 + (4 << 20)))?;
    drop(f);
    let out = Command::new("mkfs.ext4")
        .args(["-q", "-F", "-E", "root_owner=0:0", "-d"])
        .arg(&tree)
        .arg(&img)
        .output()
        .context("running mkfs.ext4 (e2fsprogs)")?;
    if !out.status.success() {
        bail!("mkfs.ext4 failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(std::fs::read(&img)?)
}

/// Writes `data` to `path`, creating parent directories.
pub fn write(path: &Path, data: impl AsRef<[u8]>) -> Result<()> {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p)?;
    }
    let mut f =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    f.write_all(data.as_ref())?;
    Ok(())
}

/// A temp-dir node for addon tests: every path the agent touches lives
/// under `root`, a signing key, and a package server.
pub struct AddonRig {
    pub dir: tempfile::TempDir,
    pub key: SigningKey,
    pub server: crate::pkgserver::PkgServer,
    pub board: String,
}

impl AddonRig {
    /// os-release with `os_version`, runtime mappings for Kubernetes 1.9
    /// (`17.03`, `1.12`), the key's public half as the keyring.
    pub fn new(os_version: &str) -> AddonRig {
        let rig = AddonRig {
            dir: tempfile::tempdir().unwrap(),
            key: SigningKey::generate("torcx-release@example.invalid"),
            server: crate::pkgserver::PkgServer::start().unwrap(),
            board: "amd64-usr".to_string(),
        };
        rig.set_os_version(os_version);
        rig.write(
            "/etc/kubernetes/installer/runtime-mappings.yaml",
            runtime_mappings_yaml("1.9", &["17.03", "1.12"]),
        );
        rig.write(
            "/etc/kubernetes/installer/keyring.asc",
            rig.key.public_armored(),
        );
        rig
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// A node path under the rig's root.
    pub fn path(&self, inside: &str) -> std::path::PathBuf {
        self.dir.path().join(inside.trim_start_matches('/'))
    }

    pub fn write(&self, inside: &str, data: impl AsRef<[u8]>) {
        write(&self.path(inside), data).unwrap();
    }

    pub fn read(&self, inside: &str) -> Option<String> {
        std::fs::read_to_string(self.path(inside)).ok()
    }

    pub fn exists(&self, inside: &str) -> bool {
        self.path(inside).exists()
    }

    pub fn set_os_version(&self, v: &str) {
        self.write("/usr/lib/os-release", os_release(v, &self.board));
    }

    /// What torcx applied at "boot": `/run/torcx/profile.json`.
    pub fn set_running_docker(&self, reference: &str) {
        self.write(
            "/run/torcx/profile.json",
            json!({"kind": "profile-manifest-v0", "value": {"images": [
                {"name": "docker", "reference": reference}]}})
            .to_string(),
        );
    }

    /// The manifest URL template served by the rig's server.
    pub fn manifest_url_template(&self) -> String {
        self.server
            .url("/manifests/{board}/{os_version}/torcx_manifest.json")
    }

    /// The served path of a package.
    pub fn package_path(&self, version: &str, data: &[u8]) -> String {
        let h = manifest_hash(data);
        format!(
            "/pkgs/{}/docker/{}/docker:{version}.torcx.tgz",
            self.board,
            &h[7..23]
        )
    }

    /// Serves a package and returns its manifest entry.
    pub fn publish_package(&self, version: &str, data: &[u8]) -> PkgEntry {
        let p = self.package_path(version, data);
        self.server.put(&p, data.to_vec());
        PkgEntry::new(version, data, &self.server.url(&p))
    }

    /// Serves the manifest for `os_version`, signed by the rig's key.
    pub fn publish_manifest(&self, os_version: &str, entries: &[PkgEntry]) -> String {
        let m = package_manifest(entries);
        let sig = self.key.sign(m.as_bytes());
        self.publish_manifest_raw(os_version, m.as_bytes(), Some(sig.as_bytes()));
        m
    }

    /// Serves manifest bytes and (optionally) a signature as given.
    pub fn publish_manifest_raw(&self, os_version: &str, manifest: &[u8], sig: Option<&[u8]>) {
        let p = self.manifest_path(os_version);
        self.server.put(&p, manifest.to_vec());
        match sig {
            Some(s) => self.server.put(&format!("{p}.asc"), s.to_vec()),
            None => self.server.remove(&format!("{p}.asc")),
        }
    }

    pub fn manifest_path(&self, os_version: &str) -> String {
        format!("/manifests/{}/{os_version}/torcx_manifest.json", self.board)
    }

    /// The agent's config with every path under `root` (`""` for a real
    /// node), the addon enabled with the rig's manifest URL, fast retries,
    /// and `addon` overrides merged in.
    pub fn config_json_for_root(&self, root: &str, addon: serde_json::Value) -> String {
        let p = |s: &str| format!("{root}{s}");
        let mut a = json!({
            "enabled": true,
            "manifest_url": self.manifest_url_template(),
            "download_attempts": 3,
            "download_backoff_secs": 0,
            "download_backoff_max_secs": 0,
            "connect_timeout_secs": 5,
            "read_timeout_secs": 5,
            "docker_api_timeout_secs": 2,
            "sysext_release_dir": p("/usr/lib/extension-release.d"),
            "systemd_config_dir": p("/etc/systemd/system"),
        });
        if let (Some(a), Some(o)) = (a.as_object_mut(), addon.as_object()) {
            for (k, v) in o {
                a.insert(k.clone(), v.clone());
            }
        }
        json!({
            "paths": {
                "kubelet_env": p("/etc/kubernetes/kubelet.env"),
                "seed_dir": p("/etc/kubernetes/installer"),
                "kubeconfig": p("/etc/kubernetes/kubeconfig"),
                "state_dir": p("/var/lib/node-bootstrap"),
                "run_dir": p("/run/node-bootstrap"),
                "assets_dir": p("/opt/tectonic"),
                "torcx_store": p("/var/lib/torcx/store"),
                "torcx_vendor_store": p("/usr/share/torcx/store"),
                "torcx_oem_store": p("/usr/share/oem/torcx/store"),
                "torcx_config_dir": p("/etc/torcx"),
                "torcx_run_dir": p("/run/torcx"),
                "os_release": p("/usr/lib/os-release"),
                "extensions_dir": p("/etc/extensions"),
                "systemd_runtime_dir": p("/run/systemd/system"),
                "docker_datadir": p("/var/lib/docker"),
                "docker_socket": p("/run/docker.sock"),
            },
            "addon": a,
        })
        .to_string()
    }

    /// [`config_json_for_root`](Self::config_json_for_root) under the rig's temp dir.
    pub fn config_json(&self, addon: serde_json::Value) -> String {
        self.config_json_for_root(&self.root().display().to_string(), addon)
    }

    /// The names in a node directory, sorted, hidden ones included: what
    /// a user sees with `ls -A` (empty when it does not exist).
    pub fn files_in(&self, inside: &str) -> Vec<String> {
        crate::files::names(&self.path(inside))
    }
}
