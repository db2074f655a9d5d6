//! Bad input, property-based: every parser of data that comes from outside
//! the agent (the config file, the seed kubelet.env, os-release, the
//! kubeconfig, the state journal another run left behind, version strings)
//! is fed arbitrary and almost-valid input. None may panic; each rejection
//! carries the right class (exit code) and names the file it came from; a
//! typo in the config is never silently ignored; and a kubeconfig error
//! never quotes the credentials in it.

use node_bootstrap::cluster::KubeVersion;
use node_bootstrap::cluster::kubeconfig;
use node_bootstrap::config::Config;
use node_bootstrap::error::ErrorClass;
use node_bootstrap::journal::{
    JournalFile, StateJournal, Step, StepRecord, StepResult, StepStatus,
};
use node_bootstrap::kubelet_env::{self, EnvFile};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::path::Path;

const CONFIG_PATH: &str = "/etc/node-bootstrap/config.json";
const SEED_PATH: &str = "/etc/kubernetes/installer/kubelet.env";
const KUBECONFIG_PATH: &str = "/etc/kubernetes/kubeconfig";
const JOURNAL_PATH: &str = "/var/lib/node-bootstrap/state.json";

/// Arbitrary JSON, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    json_with(true)
}

/// Arbitrary JSON; `floats: false` leaves out floats (serde_json reads some
/// back one ulp off, which is no concern of the agent's).
fn json_with(floats: bool) -> impl Strategy<Value = Value> {
    let float = if floats {
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f))
            .boxed()
    } else {
        any::<i32>().prop_map(|n| json!(n)).boxed()
    };
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        float,
        "\\PC{0,20}".prop_map(Value::String),
        Just(json!("/abs/path")),
        Just(json!("relative/path")),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    "[a-z_]{1,16}",
                    prop::sample::select(KNOWN_KEYS.to_vec()).prop_map(str::to_string)
                ],
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Keys of the config file: sections (dotted for nested ones) and the
/// fields in them (as of this branch; a field added later only widens what
/// is valid). The trust settings (`allow_unsigned`, `keyring`, checksums)
/// are among them: a typo there must never leave the default in force
/// silently.
const SECTIONS: &[(&str, &[&str])] = &[
    (
        "paths",
        &[
            "kubelet_env",
            "seed_dir",
            "kubeconfig",
            "state_dir",
            "run_dir",
            "assets_dir",
            "torcx_store",
            "os_release",
            "bootstrap_kubeconfig",
            "kubelet_dir",
            "kubelet_config",
            "kubelet_client_ca",
            "static_pod_dir",
            "cni_conf_dir",
            "cni_bin_dir",
            "containerd_config",
            "containerd_socket",
        ],
    ),
    (
        "cluster",
        &[
            "forced_version",
            "api_attempts",
            "api_retry_initial_secs",
            "api_retry_max_secs",
            "api_timeout_secs",
            "fallback_to_seed",
            "check_forced_skew",
            "credential",
        ],
    ),
    (
        "os_update",
        &[
            "enabled",
            "timeout_secs",
            "poll_interval_secs",
            "stall_timeout_secs",
        ],
    ),
    ("reboot", &["wait_secs"]),
    (
        "addon",
        &[
            "enabled",
            "backend",
            "package_source",
            "manifest_url",
            "manifest_file",
            "mappings_file",
            "keyring",
            "allow_unsigned",
            "profile_name",
            "download_attempts",
            "max_package_bytes",
        ],
    ),
    (
        "sources",
        &[
            "local_dir",
            "url",
            "use_cluster_bucket",
            "default_url",
            "use_default",
            "allow_unsigned",
            "keyring",
            "dev_dir",
            "attempts",
        ],
    ),
    ("assets", &["mode", "marker", "s3", "limits"]),
    (
        "assets.s3",
        &[
            "bucket",
            "key",
            "region",
            "endpoint",
            "checksum_sha256",
            "checksum_sha512",
            "concurrency",
            "max_attempts",
        ],
    ),
    (
        "assets.limits",
        &["max_total_mib", "max_entry_mib", "max_entries"],
    ),
    (
        "helpers.bootkube",
        &["mode", "script", "timeout_secs", "docker"],
    ),
    (
        "kubelet",
        &[
            "backend",
            "extension_name",
            "images_dir",
            "max_minor_lag",
            "max_image_bytes",
            "merge_timeout_secs",
        ],
    ),
    ("runtime", &["name", "sandbox_image", "containerd"]),
    (
        "runtime.containerd",
        &["snapshotter", "existing_config", "start_timeout_secs"],
    ),
    (
        "kubelet_config",
        &[
            "cluster_dns",
            "cluster_domain",
            "taints",
            "server_tls_bootstrap",
            "allow_newer_kubernetes",
        ],
    ),
];

/// `{"a": {"b": inner}}` for the dotted section `a.b`.
fn nest(section: &str, inner: Value) -> Value {
    section
        .rsplit('.')
        .fold(inner, |acc, part| json!({ part: acc }))
}

const KNOWN_KEYS: &[&str] = &[
    "role",
    "paths",
    "cluster",
    "os_update",
    "addon",
    "assets",
    "sources",
    "helpers",
    "reboot",
    "kubelet",
    "kubelet_config",
    "runtime",
    "kubelet_env",
    "forced_version",
    "api_attempts",
    "enabled",
    "timeout_secs",
    "wait_secs",
];

fn all_known_fields() -> Vec<&'static str> {
    SECTIONS
        .iter()
        .flat_map(|(_, f)| f.iter().copied())
        .collect()
}

/// A near miss of `name`: one character dropped, doubled, swapped or changed.
fn typo_of(name: &'static str) -> impl Strategy<Value = String> {
    let n = name.len();
    (0..n, 0..4u8, "[a-z_]").prop_map(move |(i, kind, c)| {
        let mut b: Vec<char> = name.chars().collect();
        match kind {
            0 => {
                b.remove(i);
            }
            1 => b.insert(i, b[i]),
            2 if i + 1 < n => b.swap(i, i + 1),
            _ => b[i] = c.chars().next().unwrap(),
        }
        b.into_iter().collect()
    })
}

fn load(text: &str) -> node_bootstrap::error::Result<Config> {
    Config::from_json(text, Path::new(CONFIG_PATH))
}

fn assert_config_error(e: &node_bootstrap::error::Error) {
    assert_eq!(e.class(), ErrorClass::Config, "{e}");
    let msg = e.to_string();
    assert!(msg.contains(CONFIG_PATH), "error must name the file: {msg}");
}

proptest! {
    #![proptest_config(crate::proptest_config(512))]

    #[test]
    fn config_text_never_panics_and_every_rejection_names_the_file(text in "\\PC{0,300}") {
        if let Err(e) = load(&text) {
            assert_config_error(&e);
        }
    }

    #[test]
    fn config_json_of_any_shape_is_accepted_or_rejected_naming_the_file(v in any_json()) {
        if let Err(e) = load(&v.to_string()) {
            assert_config_error(&e);
        }
    }

    #[test]
    fn config_sections_of_any_shape_are_rejected_by_field(
        section in prop::sample::select(SECTIONS.iter().map(|(s, _)| *s).collect::<Vec<_>>()),
        body in any_json(),
    ) {
        let text = nest(section, body).to_string();
        if let Err(e) = load(&text) {
            assert_config_error(&e);
            let msg = e.to_string();
            prop_assert!(msg.contains(section), "error must name the section {section}: {msg}");
        }
    }

    /// A misspelled field is never ignored (a typo in a security setting
    /// must not leave the default in force silently).
    #[test]
    fn a_misspelled_field_in_any_section_is_refused_by_name(
        (section, typo) in prop::sample::select(SECTIONS.to_vec()).prop_flat_map(|(s, fields)| {
            prop::sample::select(fields.to_vec()).prop_flat_map(typo_of).prop_map(move |t| (s, t))
        }),
        value in prop_oneof![Just(json!(true)), Just(json!(1)), Just(json!("/x"))],
    ) {
        prop_assume!(!all_known_fields().contains(&typo.as_str()));
        let e = load(&nest(section, json!({ typo.clone(): value })).to_string()).unwrap_err();
        assert_config_error(&e);
        let msg = e.to_string();
        prop_assert!(msg.contains(&typo), "error must name the unknown field {typo:?}: {msg}");
    }

    #[test]
    fn a_misspelled_section_is_refused_by_name(
        typo in prop::sample::select(KNOWN_KEYS[..9].to_vec()).prop_flat_map(typo_of)
    ) {
        prop_assume!(!KNOWN_KEYS[..9].contains(&typo.as_str()));
        let e = load(&json!({ typo.clone(): {} }).to_string()).unwrap_err();
        assert_config_error(&e);
        prop_assert!(e.to_string().contains(&typo), "{e}");
    }

    // ---- seed kubelet.env / os-release (systemd EnvironmentFile syntax) ----

    #[test]
    fn env_file_rejections_name_the_file_and_line(text in "(\\PC|\n){0,300}") {
        if let Err(e) = EnvFile::parse(&text, Path::new(SEED_PATH)) {
            prop_assert_eq!(e.class(), ErrorClass::BadInput);
            let msg = e.to_string();
            prop_assert!(msg.starts_with(&format!("{SEED_PATH}:")), "{msg}");
            let line: usize = msg[SEED_PATH.len() + 1..]
                .split(':')
                .next()
                .unwrap()
                .parse()
                .unwrap_or_else(|_| panic!("no line number in {msg}"));
            prop_assert!(line >= 1 && line <= text.split('\n').count(), "{msg}");
        }
    }

    /// Whatever seed provisioning wrote (valid keys, printable values), the
    /// kubelet.env the agent renders parses back to every seed entry in
    /// order, with the cluster's image tag.
    #[test]
    fn rendered_kubelet_env_keeps_every_seed_entry_and_sets_the_tag(
        entries in prop::collection::vec(("[A-Z_][A-Z0-9_]{0,12}", "[^\\p{Cc}]{0,40}"), 0..8),
        version in (0u64..3, 0u64..40, 0u64..20, prop::option::of("[a-z]{1,6}\\.[0-9]")),
    ) {
        let mut seed = EnvFile::default();
        seed.set("KUBELET_IMAGE_URL", "quay.io/coreos/hyperkube");
        for (k, v) in &entries {
            seed.set(k, v);
        }
        let (maj, min, pat, build) = version;
        let v = match build {
            Some(b) => format!("v{maj}.{min}.{pat}+{b}"),
            None => format!("v{maj}.{min}.{pat}"),
        };
        let text = kubelet_env::render_for(&seed, &v, "cgroupfs", None).unwrap();
        let back = EnvFile::parse(&text, Path::new("/etc/kubernetes/kubelet.env")).unwrap();
        let tag = v.replace('+', "_");
        prop_assert_eq!(back.get("KUBELET_IMAGE_TAG"), Some(tag.as_str()));
        let mut want = seed.clone();
        want.set("KUBELET_IMAGE_TAG", &v.replace('+', "_"));
        want.set("KUBELET_CGROUP_DRIVER", "cgroupfs");
        prop_assert_eq!(back, want);
    }

    #[test]
    fn os_release_rejections_are_bad_input_naming_the_file(text in "(\\PC|\n){0,200}") {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("os-release");
        std::fs::write(&p, &text).unwrap();
        match node_bootstrap::osrelease::version_id(&p) {
            Ok(v) => prop_assert!(!v.is_empty()),
            Err(e) => {
                prop_assert_eq!(e.class(), ErrorClass::BadInput);
                prop_assert!(e.to_string().contains(&p.display().to_string()), "{e}");
            }
        }
    }

    // ---- versions ----

    #[test]
    fn version_strings_never_panic_and_parsed_ones_round_trip(s in "\\PC{0,30}") {
        if let Ok(v) = KubeVersion::parse(&s) {
            prop_assert_eq!(KubeVersion::parse(&v.to_string()), Ok(v));
        }
    }

    #[test]
    fn generated_versions_parse(
        maj in 0u64..100, min in 0u64..100, pat in 0u64..100,
        pre in prop::option::of("[a-z0-9]{1,5}(\\.[a-z0-9]{1,3})?"),
        build in prop::option::of("[a-z0-9_-]{1,8}(\\.[0-9]{1,2})?"),
        v_prefix in any::<bool>(),
    ) {
        let mut s = format!("{}{maj}.{min}.{pat}", if v_prefix { "v" } else { "" });
        if let Some(p) = &pre { s.push('-'); s.push_str(p); }
        if let Some(b) = &build { s.push('+'); s.push_str(b); }
        let v = KubeVersion::parse(&s).unwrap();
        prop_assert_eq!((v.major, v.minor, v.patch), (maj, min, pat));
    }
}

// ---- kubeconfig ----

const TOKEN: &str = "s3cr3t-t0ken-4f9a1c";

fn good_kubeconfig() -> String {
    let pki = testkit::apiserver::Pki::generate();
    pki.kubeconfig(
        "https://10.3.0.1:443",
        &testkit::apiserver::KubeAuth::Token(TOKEN.into()),
    )
}

fn client_cert_kubeconfig() -> String {
    let pki = testkit::apiserver::Pki::generate();
    pki.kubeconfig(
        "https://10.3.0.1:443",
        &testkit::apiserver::KubeAuth::ClientCert,
    )
}

/// The base64 of the client key, as it stands in the file.
fn key_data(kc: &str) -> String {
    kc.lines()
        .find_map(|l| l.trim().strip_prefix("client-key-data: "))
        .unwrap()
        .to_string()
}

fn check_kubeconfig_result(text: &str, secrets: &[&str]) -> Result<(), TestCaseError> {
    if let Err(e) = kubeconfig::parse(text, Path::new(KUBECONFIG_PATH)) {
        prop_assert_eq!(e.class(), ErrorClass::BadInput);
        let msg = e.to_string();
        prop_assert!(msg.contains(KUBECONFIG_PATH), "{msg}");
        for s in secrets {
            // A 12-character window of a secret is enough to leak it.
            for w in s.as_bytes().windows(12).step_by(6) {
                let w = std::str::from_utf8(w).unwrap();
                prop_assert!(!msg.contains(w), "the error quotes a secret ({w:?}): {msg}");
            }
        }
    }
    Ok(())
}

/// A random edit: delete, insert or replace a span.
fn mutate(base: String) -> impl Strategy<Value = String> {
    let n = base.len();
    prop::collection::vec((0..n, 0..3u8, "(\\PC|\n| |:|-){0,8}", 0usize..12), 1..4).prop_map(
        move |edits| {
            let mut s = base.clone();
            for (at, kind, ins, len) in edits {
                let mut at = at.min(s.len());
                while !s.is_char_boundary(at) {
                    at -= 1;
                }
                let mut end = (at + len).min(s.len());
                while !s.is_char_boundary(end) {
                    end -= 1;
                }
                match kind {
                    0 => s.replace_range(at..end, ""),
                    1 => s.insert_str(at, &ins),
                    _ => s.replace_range(at..end, &ins),
                }
            }
            s
        },
    )
}

proptest! {
    #![proptest_config(crate::proptest_config(512))]

    #[test]
    fn kubeconfig_text_never_panics(text in "(\\PC|\n){0,400}") {
        check_kubeconfig_result(&text, &[])?;
    }

    #[test]
    fn a_damaged_token_kubeconfig_is_rejected_without_quoting_the_token(
        text in mutate(good_kubeconfig())
    ) {
        check_kubeconfig_result(&text, &[TOKEN])?;
    }

    #[test]
    fn a_damaged_client_cert_kubeconfig_is_rejected_without_quoting_the_key(
        text in {
            let kc = client_cert_kubeconfig();
            mutate(kc)
        }
    ) {
        // The key of *this* file: edits may have cut it, so check the
        // longest run of base64 after `client-key-data:` in the input.
        let key = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("client-key-data: "))
            .map(|k| k.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '+' || *c == '/').collect::<String>())
            .unwrap_or_default();
        check_kubeconfig_result(&text, &[key.as_str()])?;
    }

    #[test]
    fn kubeconfig_yaml_of_any_shape_is_rejected_naming_the_file(v in any_json()) {
        // JSON is YAML: exercises every type mismatch in the schema.
        check_kubeconfig_result(&v.to_string(), &[])?;
    }
}

#[test]
fn the_undamaged_kubeconfigs_parse() {
    let kc = kubeconfig::parse(&good_kubeconfig(), Path::new(KUBECONFIG_PATH)).unwrap();
    assert_eq!(kc.credentials.token.as_deref(), Some(TOKEN));
    let text = client_cert_kubeconfig();
    assert!(key_data(&text).len() > 100);
    let kc = kubeconfig::parse(&text, Path::new(KUBECONFIG_PATH)).unwrap();
    assert!(kc.credentials.client_cert.is_some());
}

// ---- state journal ----

fn any_status() -> impl Strategy<Value = StepStatus> {
    prop_oneof![
        Just(StepStatus::Running),
        Just(StepStatus::Done),
        Just(StepStatus::Failed)
    ]
}

fn any_journal() -> impl Strategy<Value = StateJournal> {
    let rec = (
        any_status(),
        "[0-9a-f]{32}",
        0u32..50,
        // `"result": null` reads back as no result: the same thing.
        prop::option::of(json_with(false).prop_filter("not null", |v| !v.is_null())),
        prop::option::of("\\PC{0,40}"),
    )
        .prop_map(|(status, boot_id, attempts, result, error)| StepRecord {
            status,
            boot_id,
            started_at: "2026-01-01T00:00:00Z".into(),
            ended_at: None,
            attempts,
            result: result.map(StepResult::Raw),
            error,
            error_class: None,
            log_tail: Vec::new(),
        });
    prop::collection::btree_map(
        prop::sample::select(vec![
            "assets",
            "cluster-version",
            "os-update",
            "docker-addon",
            "reboot",
            "kubelet-sysext",
            "kubelet-env",
            "helper/bootkube",
        ])
        .prop_map(str::to_string),
        rec,
        0..7,
    )
    .prop_map(|steps| StateJournal {
        schema: 1,
        // A result is typed by its step's name, as the file reader does.
        steps: steps
            .into_iter()
            .map(|(name, mut rec)| {
                rec.result = rec.result.map(|r| StepResult::read(&name, r.to_json()));
                (name, rec)
            })
            .collect(),
        history: Vec::new(),
    })
}

proptest! {
    #![proptest_config(crate::proptest_config(256))]

    #[test]
    fn journal_text_never_panics_and_rejections_name_the_file(text in "(\\PC|\n){0,300}") {
        if let Err(e) = StateJournal::parse(&text, Path::new(JOURNAL_PATH)) {
            prop_assert_eq!(e.class(), ErrorClass::BadInput);
            prop_assert!(e.to_string().contains(JOURNAL_PATH), "{e}");
        }
    }

    #[test]
    fn journals_round_trip_and_any_journal_gives_a_next_action(j in any_journal()) {
        let text = serde_json::to_string_pretty(&j).unwrap();
        let back = StateJournal::parse(&text, Path::new(JOURNAL_PATH)).unwrap();
        prop_assert_eq!(&back, &j);
        // Whatever an earlier run left, the plan decides without panicking.
        for (kubelet_env_present, kubelet_sysext_enabled) in
            [(false, false), (false, true), (true, false), (true, true)]
        {
            let facts = node_bootstrap::flow::plan::Facts {
                boot_id: "b".repeat(32),
                agent_upgrade_enabled: true,
                addon_enabled: true,
                kubelet_sysext_enabled,
                kubelet_env_present,
            };
            let _ = node_bootstrap::flow::plan::next_action(&back, &facts);
        }
    }

    /// A journal damaged on disk (torn write by an old version, disk error)
    /// is moved aside and a fresh one started: the next run is not stuck.
    #[test]
    fn a_corrupt_journal_file_is_moved_aside_and_replaced(
        bytes in prop::collection::vec(any::<u8>(), 1..200)
    ) {
        prop_assume!(serde_json::from_slice::<StateJournal>(&bytes).is_err());
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("state.json");
        std::fs::write(&p, &bytes).unwrap();
        let jf = JournalFile::new(&p);
        jf.update(|j| j.begin("boot", Step::Assets)).unwrap();
        let now = jf.load().unwrap().unwrap();
        prop_assert_eq!(now.step(Step::Assets).unwrap().status, StepStatus::Running);
        prop_assert_eq!(std::fs::read(d.path().join("state.json.corrupt")).unwrap(), bytes);
    }
}
