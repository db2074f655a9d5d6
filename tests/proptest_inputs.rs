//! Bad input, property-based, for the parsers of downloaded and provisioned
//! artifacts: runtime mappings, the torcx package manifest and profiles,
//! the artifact metadata (index, products, items, version order), and the
//! entries of an asset bundle. No panics; every rejection has the class a
//! retry cannot fix (BadInput) and names the file; the unpacker never
//! writes outside its target directory, whatever the archive says.

use node_bootstrap::addon::manifest::PackageManifest;
use node_bootstrap::addon::mappings::RuntimeMappings;
use node_bootstrap::addon::torcx::{Image, Profile, parse_profile, render_profile};
use node_bootstrap::assets::config::UnpackLimits;
use node_bootstrap::assets::unpack::{is_secret, unpack};
use node_bootstrap::error::ErrorClass;
use node_bootstrap::metadata::format::{Item, Products, compare_versions};
use proptest::prelude::*;
use std::cmp::Ordering;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const MAPPINGS: &str = "/etc/kubernetes/installer/runtime-mappings.yaml";
const MANIFEST: &str = "https://mirror.example/manifests/amd64-usr/1632.3.0/torcx_manifest.json";
const PROFILE: &str = "/etc/torcx/profiles/docker.json";

fn text_or_yaml() -> impl Strategy<Value = String> {
    prop_oneof![
        "(\\PC|\n){0,300}",
        // YAML-shaped: keys, nesting, lists, numbers that look like versions.
        prop::collection::vec(
            (
                0usize..4,
                prop::sample::select(vec![
                    "kind",
                    "versions",
                    "k8s",
                    "docker",
                    "data",
                    "\"1.9\"",
                    "1.10",
                    "1.9",
                    "runtime-mappings.yaml",
                    "VersionManifestV1",
                    "- 17.03",
                    "- 1.12",
                    "[\"17.03\", \"1.12\"]",
                    "[]",
                    "{}",
                    "null",
                    "|",
                    "1.1",
                ]),
                prop::option::of(prop::sample::select(vec![
                    "VersionManifestV1",
                    "17.03",
                    "[17.03, 1.12]",
                    "{}",
                    "\"x\"",
                    "1.10",
                    "~",
                ])),
            ),
            0..14
        )
        .prop_map(|lines| {
            lines
                .into_iter()
                .map(|(indent, k, v)| match v {
                    Some(v) => format!("{}{k}: {v}", "  ".repeat(indent)),
                    None => format!("{}{k}:", "  ".repeat(indent)),
                })
                .collect::<Vec<_>>()
                .join("\n")
        }),
    ]
}

fn docker_version() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("17.03".to_string()),
        Just("1.12".to_string()),
        Just("18.06.3".to_string()),
        (1u32..30, 0u32..13).prop_map(|(a, b)| format!("{a}.{b:02}")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn runtime_mappings_never_panic_and_rejections_name_the_file(text in text_or_yaml()) {
        if let Err(e) = RuntimeMappings::parse(&text, Path::new(MAPPINGS)) {
            prop_assert_eq!(e.class(), ErrorClass::BadInput);
            prop_assert!(e.to_string().contains(MAPPINGS), "{e}");
        }
    }

    /// Whatever minors and docker lists the mappings hold, unquoted, every
    /// minor reads back as written (`1.10` is never 1.1) with its list in
    /// order.
    #[test]
    fn runtime_mappings_keep_every_minor_and_preference_order(
        entries in prop::collection::btree_map((1u64..3, 0u64..30), prop::collection::vec(docker_version(), 1..4), 1..6),
        quote_keys in any::<bool>(),
    ) {
        let mut yaml = "kind: VersionManifestV1\nversions:\n  k8s:\n".to_string();
        for ((maj, min), dockers) in &entries {
            let key = if quote_keys { format!("\"{maj}.{min}\"") } else { format!("{maj}.{min}") };
            yaml.push_str(&format!("    {key}:\n      docker: [{}]\n", dockers.join(", ")));
        }
        let m = RuntimeMappings::parse(&yaml, Path::new(MAPPINGS)).unwrap();
        for ((maj, min), dockers) in &entries {
            let got = m.docker_for(&format!("v{maj}.{min}.3+coreos.0")).unwrap();
            prop_assert_eq!(&got, dockers, "Kubernetes {}.{}", maj, min);
        }
        prop_assert_eq!(m.minors().len(), entries.len());
    }

    #[test]
    fn package_manifest_bytes_never_panic_and_rejections_name_the_url(
        bytes in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..300),
            "\\PC{0,300}".prop_map(String::into_bytes),
        ]
    ) {
        if let Err(e) = PackageManifest::parse(&bytes, MANIFEST) {
            prop_assert_eq!(e.class(), ErrorClass::BadInput);
            prop_assert!(e.to_string().contains(MANIFEST), "{e}");
        }
    }

    /// Any manifest of the right shape parses, and choosing from it either
    /// gives a package whose hash is the one listed, or a clear error.
    #[test]
    fn package_manifests_of_any_content_choose_or_explain(
        versions in prop::collection::vec(
            (docker_version(),
             prop_oneof![
                 "[0-9a-f]{128}".prop_map(|h| format!("sha512-{h}")),
                 "[0-9a-f]{0,130}".prop_map(|h| format!("sha512-{h}")),
                 "\\PC{0,20}",
             ],
             prop::collection::vec(prop_oneof![
                 "[a-z]{1,8}".prop_map(|p| serde_json::json!({"url": format!("https://mirror.example/pkgs/amd64-usr/docker/{p}/docker.torcx.tgz")})),
                 Just(serde_json::json!({"url": "https://mirror.example/pkgs/arm64-usr/docker/x/docker.torcx.tgz"})),
                 Just(serde_json::json!({"url": "relative/docker.torcx.tgz"})),
                 Just(serde_json::json!({"url": "not a url"})),
                 Just(serde_json::json!({"path": "/usr/share/torcx/store/docker:17.03.torcx.tgz"})),
                 Just(serde_json::json!({})),
             ], 0..3)),
            0..4),
        prefs in prop::collection::vec(docker_version(), 0..3),
    ) {
        let doc = serde_json::json!({
            "kind": "torcx-package-list-v0",
            "value": {"packages": [{
                "name": "docker",
                "defaultVersion": "1.12",
                "versions": versions.iter().map(|(v, h, locs)| serde_json::json!({
                    "version": v, "hash": h, "sourcePackage": "app-torcx/docker", "locations": locs,
                })).collect::<Vec<_>>(),
            }]},
        });
        let m = match PackageManifest::parse(doc.to_string().as_bytes(), MANIFEST) {
            Ok(m) => m,
            Err(e) => {
                prop_assert_eq!(e.class(), ErrorClass::BadInput);
                return Ok(());
            }
        };
        let base = url::Url::parse(MANIFEST).unwrap();
        match m.choose(&prefs, "amd64-usr", &base) {
            Ok(c) => {
                let listed: Vec<&String> = versions.iter().filter(|(v, _, _)| *v == c.version).map(|(_, h, _)| h).collect();
                prop_assert!(
                    listed.iter().any(|h| h.to_ascii_lowercase() == format!("sha512-{}", c.hash.to_hex())),
                    "chosen hash {} is not the one listed for {}", c.hash.to_hex(), c.version
                );
                for u in &c.urls {
                    prop_assert!(!u.as_str().contains("arm64-usr"), "a URL for another board was chosen: {u}");
                }
            }
            Err(e) => {
                prop_assert!(matches!(e.class(), ErrorClass::BadInput | ErrorClass::Refused), "{e:?}");
                prop_assert!(e.to_string().contains(MANIFEST) || e.to_string().contains("docker"), "{e}");
            }
        }
    }

    #[test]
    fn torcx_profiles_never_panic_and_round_trip(
        bytes in prop::collection::vec(any::<u8>(), 0..200),
        images in prop::collection::vec(("[a-z]{1,10}", "[0-9a-z.\\-]{1,10}"), 0..4),
    ) {
        if let Err(e) = parse_profile(&bytes, Path::new(PROFILE)) {
            prop_assert_eq!(e.class(), ErrorClass::BadInput);
            prop_assert!(e.to_string().contains(PROFILE), "{e}");
        }
        let imgs: Vec<Image> = images.iter().map(|(name, reference)| Image::new(name, reference)).collect();
        for v1 in [false, true] {
            let profile = Profile { v1, images: imgs.iter().cloned().map(|i| Image { remote: v1.then(String::new), ..i }).collect() };
            let back = parse_profile(render_profile(&profile).as_bytes(), Path::new(PROFILE)).unwrap();
            prop_assert_eq!(back, profile);
        }
    }

    // ---- artifact metadata ----

    #[test]
    fn metadata_products_of_any_shape_never_panic(text in "\\PC{0,400}") {
        let _ = Products::parse(&text);
    }

    /// An item is only usable with a well-formed hash and a path that stays
    /// inside the location.
    #[test]
    fn metadata_items_with_escaping_paths_or_bad_hashes_are_refused(
        path in prop_oneof![
            "[a-z0-9_./-]{0,30}",
            Just("../etc/passwd".to_string()),
            Just("/etc/passwd".to_string()),
            Just("a/../../b".to_string()),
            Just("https://evil.example/x".to_string()),
        ],
        sha256 in prop::option::of("[0-9a-fA-F]{60,68}"),
        sha512 in prop::option::of("[0-9a-fA-Fg]{126,130}"),
    ) {
        let item = Item { version: Some("1".into()), ftype: Some("torcx.tgz".into()), size: Some("1".into()), path: Some(path.clone()), sha256: sha256.clone(), sha512: sha512.clone(), md5: None };
        let hex_ok = |h: &Option<String>, n: usize| h.as_ref().is_none_or(|h| h.len() == n && h.bytes().all(|b| b.is_ascii_hexdigit()));
        let escapes = path.is_empty() || path.starts_with('/') || path.split('/').any(|c| c == "..") || path.contains("://");
        let ok = (sha256.is_some() || sha512.is_some()) && hex_ok(&sha256, 64) && hex_ok(&sha512, 128) && !escapes;
        prop_assert_eq!(item.artifact("id", "1").is_ok(), ok, "{:?}", item);
    }

    /// The version order the metadata selection uses is a total order:
    /// antisymmetric and transitive, equal only for equal strings' numbers.
    #[test]
    fn metadata_version_order_is_consistent(
        a in "v?[0-9]{1,3}(\\.[0-9]{1,3}){0,3}(-[a-z0-9]{1,4})?",
        b in "v?[0-9]{1,3}(\\.[0-9]{1,3}){0,3}(-[a-z0-9]{1,4})?",
        c in "v?[0-9]{1,3}(\\.[0-9]{1,3}){0,3}(-[a-z0-9]{1,4})?",
    ) {
        prop_assert_eq!(compare_versions(&a, &b), compare_versions(&b, &a).reverse());
        prop_assert_eq!(compare_versions(&a, &a), Ordering::Equal);
        if compare_versions(&a, &b) != Ordering::Greater && compare_versions(&b, &c) != Ordering::Greater {
            prop_assert_ne!(compare_versions(&a, &c), Ordering::Greater, "{} <= {} <= {}", a, b, c);
        }
    }
}

// ---- asset bundle entries ----

#[derive(Debug, Clone)]
enum Kind {
    File(Vec<u8>, u32),
    Dir,
    Symlink(String),
    Hardlink(String),
    Fifo,
    CharDev,
}

fn entry_path() -> impl Strategy<Value = String> {
    // Mostly ordinary names, sometimes hostile ones.
    let seg = prop_oneof![
        12 => prop::sample::select(vec![
            "a", "b", "tls", "auth", "x.key", "kubeconfig", "bootkube.sh", "manifests",
        ]),
        1 => Just(".."),
        1 => Just("."),
        1 => Just(""),
    ];
    (prop::bool::weighted(0.05), prop::collection::vec(seg, 1..4)).prop_map(|(abs, segs)| {
        let p = segs.join("/");
        if abs { format!("/{p}") } else { p }
    })
}

fn entry() -> impl Strategy<Value = (String, Kind)> {
    let target = prop_oneof![
        6 => entry_path(),
        1 => Just("../../outside".to_string()),
        1 => Just("/etc/passwd".to_string()),
        1 => Just("../sentinel".to_string()),
    ];
    (
        entry_path(),
        prop_oneof![
            10 => (
                prop::collection::vec(any::<u8>(), 0..64),
                prop::sample::select(vec![0o644u32, 0o755, 0o4755, 0o666, 0o777, 0o600])
            )
                .prop_map(|(d, m)| Kind::File(d, m)),
            3 => Just(Kind::Dir),
            2 => target.clone().prop_map(Kind::Symlink),
            2 => target.prop_map(Kind::Hardlink),
            1 => Just(Kind::Fifo),
            1 => Just(Kind::CharDev),
        ],
    )
}

/// A tar archive written header by header, so names and link targets are
/// exactly what a hostile bundle could carry (the `tar` crate's builder
/// refuses `..` and absolute names).
fn tar_bytes(entries: &[(String, Kind)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (path, kind) in entries {
        let mut h = tar::Header::new_gnu();
        let name = path.as_bytes();
        let n = name.len().min(99);
        h.as_old_mut().name[..n].copy_from_slice(&name[..n]);
        let (ty, data, mode, link): (tar::EntryType, &[u8], u32, Option<&str>) = match kind {
            Kind::File(d, m) => (tar::EntryType::Regular, d, *m, None),
            Kind::Dir => (tar::EntryType::Directory, &[], 0o755, None),
            Kind::Symlink(t) => (tar::EntryType::Symlink, &[], 0o777, Some(t)),
            Kind::Hardlink(t) => (tar::EntryType::Link, &[], 0o644, Some(t)),
            Kind::Fifo => (tar::EntryType::Fifo, &[], 0o644, None),
            Kind::CharDev => (tar::EntryType::Char, &[], 0o644, None),
        };
        h.set_entry_type(ty);
        h.set_mode(mode);
        h.set_size(data.len() as u64);
        h.set_mtime(0);
        if let Some(l) = link {
            let l = l.as_bytes();
            let n = l.len().min(99);
            h.as_old_mut().linkname[..n].copy_from_slice(&l[..n]);
        }
        h.set_cksum();
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.extend_from_slice(&[0u8; 1024]);
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            out.push(p.clone());
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                walk(&p, out);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    #[test]
    fn hostile_bundles_never_write_outside_the_target(
        entries in prop::collection::vec(entry(), 1..8),
        gzip in any::<bool>(),
    ) {
        let outer = tempfile::tempdir().unwrap();
        let sentinel = outer.path().join("sentinel");
        std::fs::write(&sentinel, "untouched").unwrap();
        let dest = outer.path().join("tree");
        std::fs::create_dir(&dest).unwrap();
        let raw = tar_bytes(&entries);
        let bytes = if gzip {
            use std::io::Write;
            let mut g = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            g.write_all(&raw).unwrap();
            g.finish().unwrap()
        } else {
            raw
        };
        let res = unpack(&bytes[..], &dest, &UnpackLimits::default());
        if std::env::var_os("NB_UNPACK_STATS").is_some() {
            eprintln!("STAT {}", match &res { Ok(_) => "ok".to_string(), Err(e) => e.to_string().split(':').next_back().unwrap_or("").trim().chars().take(40).collect() });
        }

        // Nothing outside the target, whatever happened.
        let mut top: Vec<String> = std::fs::read_dir(outer.path()).unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        top.sort();
        prop_assert_eq!(top, vec!["sentinel".to_string(), "tree".to_string()]);
        prop_assert_eq!(std::fs::read_to_string(&sentinel).unwrap(), "untouched");

        match res {
            Err(e) => {
                prop_assert!(matches!(e.class(), ErrorClass::BadInput), "{e:?}");
            }
            Ok(_) => {
                let root = dest.canonicalize().unwrap();
                let mut all = Vec::new();
                walk(&dest, &mut all);
                for p in all {
                    let md = std::fs::symlink_metadata(&p).unwrap();
                    let ft = md.file_type();
                    prop_assert!(ft.is_dir() || ft.is_file() || ft.is_symlink(), "special file {}", p.display());
                    if ft.is_symlink() {
                        let r = p.canonicalize();
                        prop_assert!(r.as_ref().is_ok_and(|r| r.starts_with(&root)), "{} resolves to {:?}", p.display(), r);
                    }
                    if ft.is_file() {
                        let mode = md.permissions().mode() & 0o7777;
                        let rel = p.strip_prefix(&dest).unwrap();
                        if is_secret(rel) {
                            prop_assert_eq!(mode, 0o600, "secret {} has mode {:o}", rel.display(), mode);
                        } else {
                            prop_assert_eq!(mode & 0o7022, 0, "{} has mode {:o}", rel.display(), mode);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn bundle_bytes_of_any_kind_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let d = tempfile::tempdir().unwrap();
        if let Err(e) = unpack(&bytes[..], d.path(), &UnpackLimits::default()) {
            prop_assert!(matches!(e.class(), ErrorClass::BadInput), "{e:?}");
        }
    }
}

#[test]
fn a_plain_bundle_unpacks() {
    let d = tempfile::tempdir().unwrap();
    let bytes = tar_bytes(&[
        (
            "bootkube.sh".into(),
            Kind::File(b"#!/bin/sh\n".to_vec(), 0o755),
        ),
        ("tls".into(), Kind::Dir),
        ("tls/ca.crt".into(), Kind::File(b"pem".to_vec(), 0o644)),
        ("link".into(), Kind::Symlink("bootkube.sh".into())),
    ]);
    let r = unpack(&bytes[..], d.path(), &UnpackLimits::default()).unwrap();
    assert_eq!((r.files, r.symlinks), (2, 1));
    assert_eq!(r.secrets, vec!["tls/ca.crt".to_string()]);
}
