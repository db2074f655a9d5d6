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

/// `sha512-<hex>` as torcx manifests spell a package hash.
pub fn manifest_hash(data: &[u8]) -> String {
    format!("sha512-{}", hex::encode(Sha512::digest(data)))
}

/// A real torcx image: a gzip'd tar with `.torcx/manifest.json`
/// (`image-manifest-v0`) and the given files (path, contents, mode).
/// `bins` are the absolute in-image paths listed under `value.bin`.
pub fn torcx_archive(files: &[(&str, &[u8], u32)], bins: &[&str]) -> Vec<u8> {
    let manifest = json!({"kind": "image-manifest-v0", "value": {"bin": bins}});
    let manifest = serde_json::to_vec_pretty(&manifest).unwrap();
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    let mut add = |path: &str, data: &[u8], mode: u32| {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(mode);
        h.set_mtime(1_500_000_000);
        h.set_uid(0);
        h.set_gid(0);
        h.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut h, path, data).expect("tar entry");
    };
    add(".torcx/manifest.json", &manifest, 0o644);
    for (p, d, m) in files {
        add(p, d, *m);
    }
    tar.into_inner().unwrap().finish().unwrap()
}

/// A docker torcx image for `version`: `bin/docker` and `bin/dockerd`
/// scripts that report the version, `.torcx/manifest.json` listing them.
pub fn docker_archive(version: &str) -> Vec<u8> {
    let docker = format!("#!/bin/sh\necho \"Docker version {version}, build torcx-test\"\n");
    let dockerd =
        format!("#!/bin/sh\necho \"dockerd {version} (test image)\"\nexec sleep infinity\n");
    torcx_archive(
        &[
            ("bin/docker", docker.as_bytes(), 0o755),
            ("bin/dockerd", dockerd.as_bytes(), 0o755),
        ],
        &["/bin/docker", "/bin/dockerd"],
    )
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
    let dir = tempfile::tempdir()?;
    let tree = dir.path().join("tree");
    let rel_dir = tree.join("usr/lib/extension-release.d");
    std::fs::create_dir_all(&rel_dir)?;
    std::fs::create_dir_all(tree.join("usr/bin"))?;
    std::fs::write(rel_dir.join("extension-release.docker"), release)?;
    let docker = tree.join("usr/bin/docker");
    std::fs::write(
        &docker,
        format!("#!/bin/sh\necho \"Docker version {version}, build sysext-test\"\n"),
    )?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&docker, std::fs::Permissions::from_mode(0o755))?;
    let img = dir.path().join("docker.raw");
    let f = std::fs::File::create(&img)?;
    f.set_len(8 * 1024 * 1024)?;
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
