//! Reading the node: systemd (D-Bus), the state journal, kubelet.env,
//! markers and assets, torcx, Docker, update_engine, and once kubelet.env
//! exists the API server's view of this node (the join). Every probe is bounded
//! by a short timeout and, when it cannot read its source, records
//! "could not reach X: why" in `unreachable` instead of failing.

use super::facts::*;
use crate::config::Config;
use crate::journal::JournalFile;
use crate::settings::Role;
use crate::systemd::units::{UnitState, Units};
use std::path::Path;
use std::time::Duration;

/// Default bound of each probe that talks to another process.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// How the config was obtained.
pub struct LoadedConfig {
    pub config: Config,
    /// `None` when read fine; the error otherwise (defaults are used).
    pub error: Option<String>,
}

impl LoadedConfig {
    pub fn load(path: &Path) -> LoadedConfig {
        match Config::load(path) {
            Ok(config) => LoadedConfig {
                config,
                error: None,
            },
            Err(e) => {
                let mut config = Config::defaults();
                config.source = path.to_path_buf();
                LoadedConfig {
                    config,
                    error: Some(e.to_string()),
                }
            }
        }
    }
}

/// Reads everything `status` shows.
pub async fn collect(loaded: &LoadedConfig, timeout: Duration) -> Facts {
    let config = &loaded.config;
    let paths = &config.paths;
    let mut u = Unreachables::default();
    if let Some(e) = &loaded.error {
        u.note("config", format!("{e} (showing defaults)"));
    }
    let (units, update_engine, bus) = systemd_and_update_engine(timeout, &mut u).await;
    // Docker and the API server (once kubelet.env is there) at once.
    let (docker, join) = tokio::join!(
        docker(units.as_deref(), &paths.docker_socket, timeout),
        join(config, bus.as_ref(), timeout)
    );
    let docker = docker.and_then(|r| u.ok("docker", r));
    let join = join.map(|o| {
        if let Some(e) = &o.error {
            u.note("api-server", e);
        }
        JoinFacts::from_observation(&o)
    });
    let boot_id = crate::boot::read(&paths.run_dir).ok().flatten();
    let (role, role_source) = role(loaded, units.as_deref());
    let (state_journal, steps) = journal(config, boot_id.as_deref(), role, &mut u);
    let kubelet_env = kubelet_env(&paths.kubelet_env, &mut u);
    let torcx = u.ok(
        "torcx",
        read_torcx(&crate::addon::torcx::TorcxPaths::new(paths)),
    );
    let backends = backends(config);
    let kubelet_sysext = kubelet_sysext(config, &backends, steps.as_deref());
    Facts {
        node: NodeFacts {
            role,
            role_source,
            config: config.source.display().to_string(),
            boot_id,
        },
        units: units.map(|us| {
            us.into_iter()
                .filter(|u| u.name != DOCKER && (u.name != INIT_ASSETS || u.exists()))
                .map(UnitFacts::new)
                .collect()
        }),
        state_journal,
        steps,
        kubelet_env,
        assets: assets(config),
        torcx,
        backends,
        kubelet_sysext,
        docker,
        update_engine,
        join,
        follow: follow(config, &mut u),
        unreachable: u.0,
    }
}

/// What `follow` recorded (`<state_dir>/follow/`).
fn follow(
    config: &crate::config::Config,
    u: &mut Unreachables,
) -> Option<super::facts::FollowFacts> {
    let files = crate::follow::record::Files::new(&config.paths.state_dir);
    let state = u.ok("follow", files.load_state())?;
    let change = u.ok("follow", files.load_change()).flatten();
    if !config.follow.enabled && state.last_check.is_none() && change.is_none() {
        return None;
    }
    let rfc = |t: u64| {
        time::OffsetDateTime::from_unix_timestamp(t as i64)
            .ok()
            .and_then(|t| {
                t.format(&time::format_description::well_known::Rfc3339)
                    .ok()
            })
    };
    Some(super::facts::FollowFacts {
        enabled: config.follow.enabled,
        standing: state.standing.name(),
        why: state.why,
        current: state.current,
        target: state.target,
        last_check: state.last_check.and_then(rfc),
        change_phase: change.map(|c| c.phase.name()),
        last_change: state.last_change,
    })
}

/// Once kubelet.env exists: what the API server says of this node
/// (`crate::join`), asked with the node's own identity, or the bootstrap
/// token while the kubelet has none; each request within `timeout`.
async fn join(
    config: &Config,
    bus: Option<&zbus::Connection>,
    timeout: Duration,
) -> Option<crate::join::Observation> {
    if !config.paths.kubelet_env.exists() {
        return None;
    }
    let name = crate::join::node_name::of_this_node(&config.paths, bus).await;
    Some(crate::join::observe(&config.join_inputs(), &name, timeout).await)
}

/// The sources that could not be read, as the probes meet them.
#[derive(Default)]
struct Unreachables(Vec<Unreachable>);

impl Unreachables {
    fn note(&mut self, source: &'static str, error: impl ToString) {
        self.0.push(Unreachable {
            source,
            error: error.to_string(),
        });
    }

    /// The value, or `None` with the error noted under `source`.
    fn ok<T, E: ToString>(&mut self, source: &'static str, r: Result<T, E>) -> Option<T> {
        r.map_err(|e| self.note(source, e)).ok()
    }
}

/// The flow's units (and docker's) from systemd and update_engine's
/// status, over one bus connection.
///
/// init-assets.service (pull mode only) and docker.service are asked with
/// `GetUnit`, never loaded: where systemd does not hold them (push mode has
/// no init-assets; docker is not running), loading them from disk on every
/// `status` cost more than everything else it asks. Not held means not
/// running and not failed: init-assets is then left out, as a unit without
/// a file is, and docker counts as inactive.
async fn systemd_and_update_engine(
    timeout: Duration,
    u: &mut Unreachables,
) -> (
    Option<Vec<UnitState>>,
    Option<UpdateEngine>,
    Option<zbus::Connection>,
) {
    let bus = match crate::systemd::system_bus(timeout, timeout).await {
        Ok(bus) => bus,
        Err(e) => {
            u.note("systemd", e);
            u.note("update-engine", "the system bus is unreachable");
            return (None, None, None);
        }
    };
    let loaded: Vec<&str> = FLOW_UNITS
        .iter()
        .copied()
        .filter(|n| *n != INIT_ASSETS)
        .collect();
    let systemd = Units::new(bus.clone());
    let (states, init_assets, docker, ue) = tokio::join!(
        systemd.units(&loaded),
        systemd.loaded_unit(INIT_ASSETS),
        systemd.loaded_unit(DOCKER),
        update_engine_status(&bus, timeout)
    );
    let units = (|| {
        let mut units = states
            .into_iter()
            .collect::<crate::error::Result<Vec<_>>>()?;
        units.extend(init_assets?);
        units.push(docker?.unwrap_or_else(|| UnitState::not_loaded(DOCKER)));
        Ok::<_, crate::error::Error>(units)
    })();
    (u.ok("systemd", units), u.ok("update-engine", ue), Some(bus))
}

/// Docker's version, asked only when docker.service runs (asking a
/// socket-activated docker would start it) or when systemd cannot say.
/// Not asking is no fault: `units` shows docker.service's state.
async fn docker(
    units: Option<&[UnitState]>,
    socket: &Path,
    timeout: Duration,
) -> Option<Result<DockerInfo, String>> {
    match units.and_then(|us| us.iter().find(|s| s.name == DOCKER)) {
        Some(s) if !s.is_active() => None,
        _ => Some(docker_version(socket, timeout).await),
    }
}

/// The node's role: from the config, else inferred from the enabled units.
fn role(loaded: &LoadedConfig, units: Option<&[UnitState]>) -> (Role, &'static str) {
    if loaded.error.is_none() {
        return (loaded.config.role, "config");
    }
    let bootkube_path_enabled = units.is_some_and(|us| {
        us.iter()
            .any(|u| u.name == BOOTKUBE_PATH && u.unit_file_state == "enabled")
    });
    if bootkube_path_enabled {
        (Role::BootkubeMaster, "inferred")
    } else {
        (loaded.config.role, "default")
    }
}

/// The state journal, and its steps as `status` shows them.
fn journal(
    config: &Config,
    boot_id: Option<&str>,
    role: Role,
    u: &mut Unreachables,
) -> (JournalFacts, Option<Vec<StepView>>) {
    let jpath = config.paths.state_journal();
    let path = jpath.display().to_string();
    match JournalFile::new(&jpath).load() {
        Ok(Some(j)) => {
            let steps = super::facts::steps(
                &j,
                boot_id,
                role.is_bootkube_master(),
                &disabled_steps(config),
            );
            (JournalFacts::Present { path }, Some(steps))
        }
        Ok(None) => {
            u.note(
                "state-journal",
                format!("no state journal at {path} (the agent has not recorded anything yet)"),
            );
            (JournalFacts::Missing { path }, None)
        }
        Err(e) => {
            u.note("state-journal", &e);
            let error = e.to_string();
            (JournalFacts::Corrupt { path, error }, None)
        }
    }
}

fn kubelet_env(path: &Path, u: &mut Unreachables) -> KubeletEnv {
    let shown = path.display().to_string();
    match crate::fsutil::read_optional(path) {
        Ok(text) => KubeletEnv {
            path: shown,
            present: text.is_some(),
            values: text.as_deref().map(parse_env).unwrap_or_default(),
        },
        Err(e) => {
            u.note("kubelet-env", format!("cannot read {shown}: {e}"));
            KubeletEnv {
                path: shown,
                // It exists (we could not read it); kubelet.service decides.
                present: path.exists(),
                values: vec![],
            }
        }
    }
}

/// The assets and the helpers' scripts and markers.
fn assets(config: &Config) -> Assets {
    let paths = &config.paths;
    let bk = config
        .helpers
        .bootkube
        .script_path(&paths.assets_dir, "bootkube.sh");
    let tc = config
        .helpers
        .tectonic
        .script_path(&paths.assets_dir, "tectonic-wrapper.sh");
    Assets {
        dir: paths.assets_dir.display().to_string(),
        mode: match config.assets.mode {
            crate::assets::config::AssetsMode::Push => "push",
            crate::assets::config::AssetsMode::Pull => "pull",
        },
        bootkube_script_present: bk.exists(),
        bootkube_script: bk.display().to_string(),
        tectonic_script_present: tc.exists(),
        tectonic_script: tc.display().to_string(),
        bootkube_done: paths.bootkube_done().exists(),
        tectonic_done: paths.tectonic_done().exists(),
    }
}

/// Whether a kubelet.env key looks like it holds a secret.
pub fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_uppercase();
    ["TOKEN", "SECRET", "PASSWORD", "KEY"]
        .iter()
        .any(|s| k.contains(s))
}

/// systemd `EnvironmentFile=` lines -> pairs, secret values redacted. A
/// file that does not parse gives no values (status reports it present).
pub fn parse_env(text: &str) -> Vec<(String, String)> {
    let Ok(env) = crate::kubelet_env::EnvFile::parse(text, Path::new("kubelet.env")) else {
        return Vec::new();
    };
    env.entries()
        .iter()
        .map(|(k, v)| {
            let v = if is_secret_key(k) {
                "<redacted>".to_string()
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect()
}

/// `/etc/torcx/next-profile` and the images of that profile, found the way
/// torcx finds it (the configured torcx paths; a user profile overrides an
/// OEM one, which overrides the vendor's).
fn read_torcx(tp: &crate::addon::torcx::TorcxPaths) -> Result<Torcx, String> {
    use crate::addon::torcx;
    let Some(name) = torcx::read_next_profile(tp).map_err(|e| e.to_string())? else {
        return Ok(Torcx {
            next_profile: None,
            next_images: None,
        });
    };
    let images = match torcx::list_profiles(tp).get(&name) {
        Some(p) => torcx::read_images(p)
            .map_err(|e| e.to_string())?
            .map(|imgs| {
                imgs.iter()
                    .map(|i| format!("{}:{}", i.name, i.reference))
                    .collect()
            }),
        None => None,
    };
    Ok(Torcx {
        next_profile: Some(name),
        next_images: images,
    })
}

async fn docker_version(socket: &Path, timeout: Duration) -> Result<DockerInfo, String> {
    let v = crate::docker::version(socket, timeout)
        .await
        .map_err(|e| e.to_string())?;
    Ok(DockerInfo {
        version: v.version,
        api_version: v.api_version,
    })
}

/// Flow steps the config turns off (shown as skipped, not pending).
/// Which kubelet image the link names, whether it is merged, and the
/// version the agent recorded for it (`None` with kubelet-wrapper).
fn kubelet_sysext(
    config: &Config,
    backends: &Backends,
    steps: Option<&[StepView]>,
) -> Option<KubeletSysext> {
    if backends.kubelet.as_deref() != Some("sysext") {
        return None;
    }
    let inputs = config.kubelet_sysext_inputs();
    let extension = inputs.extension();
    let image = extension.linked_image();
    let record = steps
        .into_iter()
        .flatten()
        .filter_map(|s| s.result.as_ref()?.kubelet_sysext())
        .next();
    let version = record
        .filter(|r| Some(&r.installed.image) == image.as_ref())
        .map(|r| r.version.clone());
    Some(KubeletSysext {
        link: extension.link_path().display().to_string(),
        image: image.map(|p| p.display().to_string()),
        merged: extension.merged_release().is_some(),
        version,
    })
}

fn disabled_steps(config: &crate::config::Config) -> Vec<&'static str> {
    let mut off = Vec::new();
    if config.agent.upgrade == crate::agent_upgrade::config::AutoUpgrade::Off {
        off.push(crate::journal::Step::AgentUpgrade.name());
    }
    if !config.addon.enabled {
        off.push(crate::journal::Step::DockerAddon.name());
    }
    if backends(config).kubelet.as_deref() != Some("sysext") {
        off.push(crate::journal::Step::KubeletSysext.name());
    }
    off
}

/// The backends the flow takes on this node's release (never fails: what
/// cannot be decided says why).
pub fn backends(config: &Config) -> Backends {
    let os = crate::osrelease::OsIdentity::read(&config.paths.os_release);
    let (kubelet, kubelet_why) = match crate::kubelet_sysext::backend::on_node(
        config.kubelet.backend,
        &config.paths.os_release,
    ) {
        Ok(r) => (Some(r.runs.name().to_string()), r.why),
        Err(e) => (None, e.to_string()),
    };
    let (docker, docker_why) = match (&os, config.addon.enabled) {
        (_, false) => (None, None),
        (Ok(os), true) => match config.addon.backend.resolve(os.version, &os.describe()) {
            Ok(b) => (
                Some(b.name().to_string()),
                Some(format!(
                    "addon.backend \"{}\" on {}",
                    config.addon.backend.name(),
                    os.describe()
                )),
            ),
            Err(e) => (None, Some(e.to_string())),
        },
        (Err(e), true) => (None, Some(e.to_string())),
    };
    Backends {
        os: os.ok().map(|o| o.describe()),
        kubelet,
        kubelet_why,
        docker,
        docker_why,
    }
}

/// update_engine's `GetStatus` (docs/formats.md §7) through os_update's client.
pub async fn update_engine_status(
    conn: &zbus::Connection,
    timeout: Duration,
) -> Result<UpdateEngine, String> {
    let ask = async {
        let engine = crate::os_update::UpdateEngine::new(conn).await?;
        engine.get_status().await
    };
    let r = match tokio::time::timeout(timeout, ask).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return Err(format!("GetStatus on com.coreos.update1: {e}")),
        Err(_) => {
            return Err(format!(
                "com.coreos.update1 did not answer within {}ms",
                timeout.as_millis()
            ));
        }
    };
    Ok(UpdateEngine {
        current_operation: r.current_operation.as_str().to_string(),
        progress: r.progress,
        new_version: r.new_version,
        new_size: r.new_size,
        last_checked_time: r.last_checked_time,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubelet_sysext_shows_the_linked_image_whether_merged_and_the_recorded_version() {
        use crate::journal::{StateJournal, Step, StepResult};
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let text = serde_json::json!({
            "paths": {"extensions_dir": root.join("etc/extensions")},
            "addon": {"sysext_release_dir": root.join("release.d")},
            "kubelet": {"backend": "sysext", "images_dir": root.join("images")},
        });
        let config = Config::from_json(&text.to_string(), Path::new("/c.json")).unwrap();
        let sysext = backends(&config);
        assert_eq!(sysext.kubelet.as_deref(), Some("sysext"));
        // A release with kubelet-wrapper: auto takes it, and nothing shows.
        std::fs::write(root.join("os-release"), "ID=coreos\nVERSION_ID=1632.3.0\n").unwrap();
        let wrapper = Config::from_json(
            &serde_json::json!({"paths": {"os_release": root.join("os-release")}}).to_string(),
            Path::new("/c.json"),
        )
        .unwrap();
        let on_wrapper = backends(&wrapper);
        assert_eq!(on_wrapper.kubelet.as_deref(), Some("wrapper"));
        assert_eq!(
            on_wrapper.kubelet_why,
            "auto: coreos 1632.3.0 has kubelet-wrapper"
        );
        assert!(
            kubelet_sysext(&wrapper, &on_wrapper, None).is_none(),
            "wrapper: nothing"
        );
        let none = kubelet_sysext(&config, &sysext, None).unwrap();
        assert_eq!((none.image, none.merged, none.version), (None, false, None));
        let image = root.join("images/kubernetes-v1.20.2-x86-64.raw");
        std::fs::create_dir_all(root.join("etc/extensions")).unwrap();
        std::os::unix::fs::symlink(&image, root.join("etc/extensions/kubernetes.raw")).unwrap();
        std::fs::create_dir_all(root.join("release.d")).unwrap();
        std::fs::write(
            root.join("release.d/extension-release.kubernetes"),
            "ID=_any\n",
        )
        .unwrap();
        let record = |img: &Path| {
            let mut j = StateJournal::default();
            j.begin("b", Step::KubeletSysext);
            j.finish(
                "b",
                Step::KubeletSysext,
                StepResult::read(
                    "kubelet-sysext",
                    serde_json::json!({
                        "cluster_version": "v1.20.2", "version": "v1.20.2", "rule": "exact",
                        "image": img, "link": "/etc/extensions/kubernetes.raw", "sha512": "00",
                        "url": "u", "location": "l", "signed": true, "downloaded": true,
                        "refreshed": true
                    }),
                ),
            );
            super::super::facts::steps(&j, Some("b"), false, &[])
        };
        let steps = record(&image);
        let k = kubelet_sysext(&config, &sysext, Some(&steps)).unwrap();
        assert_eq!(k.image.as_deref(), Some(image.to_str().unwrap()));
        assert!(k.merged);
        assert_eq!(k.version.as_deref(), Some("v1.20.2"));
        // A record of another image says nothing about this one.
        let steps = record(&root.join("images/kubernetes-v1.19.0-x86-64.raw"));
        assert_eq!(
            kubelet_sysext(&config, &sysext, Some(&steps))
                .unwrap()
                .version,
            None
        );
    }

    #[test]
    fn kubelet_env_is_parsed_and_secrets_redacted() {
        let text = "# written by node-bootstrap\n\
                    KUBELET_IMAGE_URL=\"quay.io/coreos/hyperkube\"\n\
                    KUBELET_IMAGE_TAG='v1.9.6_coreos.0'\n\
                    \n\
                    BOOTSTRAP_TOKEN=abcdef.0123456789abcdef\n\
                    aws_secret_access=xyz\n\
                    API_KEY=k\n\
                    DB_PASSWORD = hunter2\n\
                    PLAIN=a=b\n";
        let v = parse_env(text);
        assert_eq!(
            v,
            vec![
                (
                    "KUBELET_IMAGE_URL".into(),
                    "quay.io/coreos/hyperkube".into()
                ),
                ("KUBELET_IMAGE_TAG".into(), "v1.9.6_coreos.0".into()),
                ("BOOTSTRAP_TOKEN".into(), "<redacted>".into()),
                ("aws_secret_access".into(), "<redacted>".into()),
                ("API_KEY".into(), "<redacted>".into()),
                ("DB_PASSWORD".into(), "<redacted>".into()),
                ("PLAIN".into(), "a=b".into()),
            ]
        );
        let joined = format!("{v:?}");
        for secret in ["abcdef", "xyz", "hunter2"] {
            assert!(!joined.contains(secret), "{secret} leaked");
        }
    }

    #[test]
    fn torcx_next_profile_and_its_images() {
        let d = tempfile::tempdir().unwrap();
        let mut paths = crate::config::Config::defaults().paths;
        paths.torcx_config_dir = d.path().to_path_buf();
        paths.torcx_vendor_store = d.path().join("usr/store");
        paths.torcx_oem_store = d.path().join("oem/store");
        let tp = crate::addon::torcx::TorcxPaths::new(&paths);
        assert_eq!(read_torcx(&tp).unwrap().next_profile, None);
        std::fs::write(d.path().join("next-profile"), "docker-1703\n").unwrap();
        let t = read_torcx(&tp).unwrap();
        assert_eq!(t.next_profile.as_deref(), Some("docker-1703"));
        assert_eq!(t.next_images, None);
        std::fs::create_dir_all(d.path().join("usr/profiles")).unwrap();
        std::fs::write(
            d.path().join("usr/profiles/docker-1703.json"),
            r#"{"kind":"profile-manifest-v0","value":{"images":[{"name":"docker","reference":"1.12"}]}}"#,
        )
        .unwrap();
        assert_eq!(
            read_torcx(&tp).unwrap().next_images,
            Some(vec!["docker:1.12".to_string()]),
            "the vendor's profile of that name"
        );
        std::fs::create_dir_all(d.path().join("profiles")).unwrap();
        std::fs::write(
            d.path().join("profiles/docker-1703.json"),
            r#"{"kind":"profile-manifest-v1","value":{"images":[{"name":"docker","reference":"17.03","remote":""}]}}"#,
        )
        .unwrap();
        assert_eq!(
            read_torcx(&tp).unwrap().next_images,
            Some(vec!["docker:17.03".to_string()]),
            "the user's overrides it"
        );
        std::fs::write(d.path().join("profiles/docker-1703.json"), "{").unwrap();
        assert!(
            read_torcx(&tp)
                .unwrap_err()
                .contains("invalid torcx profile")
        );
    }

    #[test]
    fn an_inactive_docker_is_not_asked_and_not_unreachable() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let d = tempfile::tempdir().unwrap();
        let socket = d.path().join("docker.sock");
        let ask = |units: Option<Vec<UnitState>>| {
            let mut u = Unreachables::default();
            let info = rt
                .block_on(docker(
                    units.as_deref(),
                    &socket,
                    Duration::from_millis(200),
                ))
                .and_then(|r| u.ok("docker", r));
            (info.is_some(), u.0)
        };
        let (asked, notes) = ask(Some(vec![UnitState::not_loaded(DOCKER)]));
        assert!(!asked);
        assert!(notes.is_empty(), "not asked is no fault: {notes:?}");
        // systemd could not say: the socket is asked, and it does not answer.
        let (asked, notes) = ask(None);
        assert!(!asked);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert_eq!(notes[0].source, "docker");
    }
}
