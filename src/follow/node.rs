//! The real node seam ([`NodeSeams`]): this node's files (kubelet.env,
//! the KubeletConfiguration, the sysext's images and link, saved under
//! `<state_dir>/follow/`), and systemd over D-Bus. (The cluster seam is
//! [`super::api::Cluster`].)
//!
//! The kubelet's files for the new version are rendered as `run` renders
//! them (`crate::flow::node::render_kubelet_files`: the seed kubelet.env,
//! the runtime the state journal recorded, the KubeletConfiguration of
//! that version's rules). A version that would want another container
//! runtime than the node runs is refused (the node is provisioned again
//! for that), before a place in the lease is taken.

use super::config::FollowSettings;
use super::plan::{Backend, Change};
use super::record::{ENV, Files, KUBELET_CONFIG, Set, stamp};
use super::seams::NodeSeam;
use super::{Inputs, RenderKubelet};
use crate::cluster::version::KubeVersion;
use crate::error::{Error, Result};
use crate::fsutil;
use crate::journal::{JournalFile, Step, StepResult};
use std::time::Duration;
use tracing::info;

/// How long systemd's restart job of kubelet.service may take.
const RESTART_TIMEOUT: Duration = Duration::from_secs(90);

/// This node's side alone (no API server): what the boot-time converge
/// needs too.
pub struct Local<'a> {
    pub inputs: Inputs<'a>,
    pub files: Files,
}

pub struct NodeSeams<'a> {
    pub local: Local<'a>,
    pub follow: &'a FollowSettings,
    pub bus: zbus::Connection,
    pub render: RenderKubelet<'a>,
}

/// The version kubelet.env's `KUBELET_IMAGE_TAG` names (`+` written `_`).
pub fn kubelet_env_version(paths: &crate::settings::Paths) -> Result<KubeVersion> {
    let path = &paths.kubelet_env;
    let text = fsutil::read_input("kubelet.env", path)?;
    let env = crate::kubelet_env::EnvFile::parse(&text, path)?;
    let tag = env.get(crate::kubelet_env::IMAGE_TAG).ok_or_else(|| {
        Error::bad_input(format!(
            "{} has no {}",
            path.display(),
            crate::kubelet_env::IMAGE_TAG
        ))
    })?;
    KubeVersion::parse(&crate::kubelet_env::version_from_tag(tag)).map_err(|e| {
        Error::bad_input(format!(
            "{}: {}: {e}",
            path.display(),
            crate::kubelet_env::IMAGE_TAG
        ))
    })
}

/// This node's backend, as `run` decided it (`kubelet.backend` against the
/// release, [`crate::kubelet_sysext::backend`]; a node whose release cannot
/// be read was never bootstrapped by `run`: kubelet-wrapper's rules).
pub fn backend(
    kubelet: &crate::kubelet_sysext::config::KubeletSettings,
    os_release: &std::path::Path,
) -> Backend {
    use crate::kubelet_sysext::backend::{Runs, on_node};
    match on_node(kubelet.backend, os_release).map(|r| r.runs) {
        Ok(Runs::Sysext) => Backend::Sysext,
        Ok(Runs::Wrapper) | Err(_) => Backend::Wrapper,
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Local<'_> {
    /// Puts set `set` of `change` in place: refused when the set on disk
    /// is not that change's (a stale set is never put in place).
    fn write_set(&self, change: &Change, set: Set) -> Result<()> {
        let paths = self.inputs.paths;
        if !self.files.has_set(set, &stamp(change)) {
            return Err(Error::internal(format!(
                "the saved {} set under {} is not of the change {} -> {}: nothing was put in place",
                set.name(),
                self.files.dir.display(),
                change.from,
                change.to
            )));
        }
        let env = self.files.saved(set, ENV)?.ok_or_else(|| {
            Error::internal(format!("the saved {} set has no kubelet.env", set.name()))
        })?;
        match self.files.saved(set, KUBELET_CONFIG)? {
            Some(c) => fsutil::write_file(
                "the kubelet's configuration",
                &paths.kubelet_config,
                &c,
                fsutil::MODE_PUBLIC,
            )?,
            None => {
                let _ = std::fs::remove_file(&paths.kubelet_config);
            }
        }
        fsutil::write_file("kubelet.env", &paths.kubelet_env, &env, fsutil::MODE_PUBLIC)
    }

    /// The sysext's image of `change.to`, where the kubelet step puts it.
    pub fn next_image(&self, change: &Change) -> Result<std::path::PathBuf> {
        let inputs = self.inputs.kubelet;
        let (_, arch) = crate::kubelet_sysext::product_id(&inputs)?;
        let ext = inputs.extension();
        Ok(ext.images_dir.join(ext.image_file_name(&change.to, arch)))
    }

    /// Links `image` and merges it unless it is merged already.
    async fn link_and_merge(&self, image: &std::path::Path) -> Result<()> {
        let inputs = self.inputs.kubelet;
        let ext = inputs.extension();
        let relinked = ext.link_to(image)?;
        if relinked || ext.merged_release().is_none() {
            crate::sysext::install::refresh(
                inputs.kubelet.merge_timeout,
                "kubelet.merge_timeout_secs",
                "follow",
            )
            .await?;
        }
        Ok(())
    }

    /// The image the sysext's link names now, as a versioned image of
    /// `version` the rollback can link again: a plain file where the link
    /// goes (an image put there by hand) is copied beside the others first,
    /// never linked to itself.
    fn previous_image(&self, version: &str) -> Result<Option<std::path::PathBuf>> {
        let inputs = self.inputs.kubelet;
        let ext = inputs.extension();
        let link = ext.link_path();
        let Some(linked) = ext.linked_image() else {
            return Ok(None);
        };
        if linked != link {
            return Ok(Some(linked));
        }
        let (_, arch) = crate::kubelet_sysext::product_id(&inputs)?;
        let kept = ext.images_dir.join(ext.image_file_name(version, arch));
        if !kept.is_file() {
            let bytes = std::fs::read(&link)
                .map_err(|e| Error::internal(format!("cannot read {}: {e}", link.display())))?;
            fsutil::write_file("the previous kubelet image", &kept, &bytes, 0o644)?;
        }
        info!(step = "follow", path = %link.display(), kept = %kept.display(), "the kubelet image was a plain file: kept as a versioned image for a rollback");
        Ok(Some(kept))
    }
}

impl NodeSeams<'_> {
    /// Renders the files of `version` (module docs).
    fn render(&self, version: &str) -> Result<(Option<String>, String)> {
        let c = &self.local.inputs;
        let journal = JournalFile::new(c.paths.state_journal())
            .load()?
            .unwrap_or_default();
        let recorded = |step| journal.step(step).and_then(|r| r.result.as_ref());
        let now = recorded(Step::Runtime).and_then(StepResult::runtime).ok_or_else(|| {
            Error::internal("the state journal has no runtime record: was this node bootstrapped by this agent?")
        })?;
        let want = crate::container_runtime::choice::decide(
            version,
            c.runtime_requested,
            c.allow_newer_kubernetes,
        )?;
        if want.runtime != now.runtime {
            return Err(Error::refused(format!(
                "Kubernetes {version} wants the container runtime {} and this node runs {}: provision the node again for that version",
                want.runtime.name(),
                now.runtime.name()
            )));
        }
        let containerd = recorded(Step::Containerd).and_then(StepResult::containerd);
        (self.render)(version, &want, containerd)
    }
}

impl NodeSeam for NodeSeams<'_> {
    fn now(&self) -> u64 {
        unix_now()
    }

    async fn sleep(&self, d: Duration) {
        tokio::time::sleep(d).await;
    }

    fn current_version(&self) -> Result<KubeVersion> {
        kubelet_env_version(self.local.inputs.paths)
    }

    async fn offers(&self) -> Result<Option<Vec<KubeVersion>>> {
        if backend(
            self.local.inputs.kubelet.kubelet,
            &self.local.inputs.paths.os_release,
        ) == Backend::Wrapper
        {
            return Ok(None);
        }
        let inputs = self.local.inputs.kubelet;
        let offers = crate::sysext::offers::find(
            &inputs.metadata,
            crate::kubelet_sysext::PRODUCT,
            "kubelet sysext",
            "follow",
            KubeVersion::parse,
        )
        .await?;
        Ok(Some(offers.versions()))
    }

    async fn check(&self, to: &str) -> Result<()> {
        self.render(to)?;
        if backend(
            self.local.inputs.kubelet.kubelet,
            &self.local.inputs.paths.os_release,
        ) == Backend::Sysext
        {
            let image = crate::kubelet_sysext::fetch_exact(&self.local.inputs.kubelet, to).await?;
            info!(step = "follow", version = to, image = %image.display(), "the new kubelet's image is fetched and checked, not linked yet");
        }
        Ok(())
    }

    async fn prepare(&self, change: &mut Change) -> Result<()> {
        let local = &self.local;
        let paths = local.inputs.paths;
        let mine = stamp(change);
        let env = std::fs::read(&paths.kubelet_env).map_err(|e| {
            Error::internal(format!("cannot read {}: {e}", paths.kubelet_env.display()))
        })?;
        let config = fsutil::read_optional(&paths.kubelet_config).map_err(|e| {
            Error::internal(format!(
                "cannot read {}: {e}",
                paths.kubelet_config.display()
            ))
        })?;
        // A set of this change saved by an interrupted Prepare is the
        // truth (the files may be the new ones by now); one of another
        // change is not.
        if !local.files.has_set(Set::Previous, &mine) {
            local.files.save_set(
                Set::Previous,
                &mine,
                &[
                    (KUBELET_CONFIG, config.as_deref().map(str::as_bytes)),
                    (ENV, Some(&env)),
                ],
            )?;
        }
        let (next_config, next_env) = self.render(&change.to)?;
        local.files.save_set(
            Set::Next,
            &mine,
            &[
                (KUBELET_CONFIG, next_config.as_deref().map(str::as_bytes)),
                (ENV, Some(next_env.as_bytes())),
            ],
        )?;
        if change.backend == Backend::Sysext && change.previous_image.is_none() {
            change.previous_image = local.previous_image(&change.from)?;
        }
        Ok(())
    }

    async fn put_in_place(&self, change: &Change, set: Set) -> Result<()> {
        let local = &self.local;
        if change.backend == Backend::Sysext {
            match set {
                Set::Next => {
                    let r = crate::kubelet_sysext::ensure_exact(&local.inputs.kubelet, &change.to)
                        .await?;
                    info!(step = "follow", version = %r.version, image = %r.installed.image.display(), "kubelet image merged");
                }
                Set::Previous => {
                    let image = change.previous_image.as_deref().ok_or_else(|| {
                        Error::internal(
                            "the change recorded no previous kubelet image to go back to",
                        )
                    })?;
                    local.link_and_merge(image).await?;
                }
            }
        }
        local.write_set(change, set)
    }

    async fn restart_kubelet(&self) -> Result<()> {
        let systemd = crate::systemd::manager::Systemd::new(self.bus.clone());
        systemd
            .start_and_wait("kubelet.service", true, RESTART_TIMEOUT)
            .await
    }
}

/// At boot, before kubelet.service: an interrupted change's files made
/// one kubelet's whole set ([`super::plan::converge`]). Returns what it did.
pub async fn converge(seams: &Local<'_>) -> Result<super::plan::Converge> {
    use super::plan::{Converge, Phase};
    let Some(mut change) = seams.files.load_change()? else {
        return Ok(Converge::Nothing);
    };
    let mine = stamp(&change);
    let next_complete = seams.files.has_set(Set::Next, &mine)
        && (change.backend == Backend::Wrapper || seams.next_image(&change)?.is_file());
    let what = super::plan::converge(change.phase, next_complete);
    match what {
        Converge::Nothing => {}
        Converge::Forward => {
            if change.backend == Backend::Sysext {
                seams.link_and_merge(&seams.next_image(&change)?).await?;
            }
            seams.write_set(&change, Set::Next)?;
            change.phase = Phase::Switched;
            change.restarted_at = Some(unix_now());
        }
        Converge::Back { to } => {
            if change.backend == Backend::Sysext
                && let Some(image) = change.previous_image.clone()
            {
                seams.link_and_merge(&image).await?;
            }
            if seams.files.has_set(Set::Previous, &mine) {
                seams.write_set(&change, Set::Previous)?;
            }
            change.phase = to;
            change.restarted_at = Some(unix_now());
        }
    }
    if what != Converge::Nothing {
        seams.files.save_change(&change)?;
        info!(step = "follow", from = %change.from, to = %change.to, phase = change.phase.name(), converged = ?what,
            "an interrupted kubelet change converged before the kubelet starts");
    }
    Ok(what)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::follow::plan::{Converge, Phase};
    use crate::follow::target::Kind;

    /// A wrapper node's settings, its files under a temp dir.
    struct Node {
        dir: tempfile::TempDir,
        paths: crate::settings::Paths,
        cluster: crate::cluster::config::ClusterSettings,
        follow: FollowSettings,
        kubelet: crate::kubelet_sysext::OwnedInputs,
    }

    impl Node {
        fn inputs(&self) -> Inputs<'_> {
            Inputs {
                paths: &self.paths,
                cluster: &self.cluster,
                follow: &self.follow,
                kubelet: self.kubelet.inputs(),
                runtime_requested: crate::container_runtime::choice::Requested::Auto,
                allow_newer_kubernetes: false,
                textfile_dir: None,
            }
        }
    }

    /// A wrapper node with a change recorded in `phase`, cut in the
    /// middle: kubelet.env already the new one's, the KubeletConfiguration
    /// still the old one's; the new set saved when `next_saved`.
    fn node(phase: Phase, next_saved: bool) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let mut paths = crate::settings::Paths::defaults();
        paths.kubelet_env = dir.path().join("etc/kubernetes/kubelet.env");
        paths.kubelet_config = dir.path().join("etc/kubernetes/kubelet-config.yaml");
        paths.state_dir = dir.path().join("var/lib/node-bootstrap");
        std::fs::create_dir_all(dir.path().join("etc/kubernetes")).unwrap();
        std::fs::write(&paths.kubelet_env, "KUBELET_IMAGE_TAG=\"v1.20.3\"\n").unwrap();
        std::fs::write(&paths.kubelet_config, "old: config\n").unwrap();
        let files = Files::new(&paths.state_dir);
        let change = Change {
            node: "w1".into(),
            from: "v1.20.2".into(),
            to: "v1.20.3".into(),
            kind: Kind::Patch,
            backend: Backend::Wrapper,
            phase,
            started_at: 1,
            restarted_at: None,
            cordoned: false,
            previous_image: None,
            why: None,
            delete_emptydir_data: false,
        };
        let mine = stamp(&change);
        files
            .save_set(
                Set::Previous,
                &mine,
                &[
                    (ENV, Some(b"KUBELET_IMAGE_TAG=\"v1.20.2\"\n")),
                    (KUBELET_CONFIG, Some(b"old: config\n")),
                ],
            )
            .unwrap();
        if next_saved {
            files
                .save_set(
                    Set::Next,
                    &mine,
                    &[
                        (ENV, Some(b"KUBELET_IMAGE_TAG=\"v1.20.3\"\n")),
                        (KUBELET_CONFIG, Some(b"new: config\n")),
                    ],
                )
                .unwrap();
        }
        files.save_change(&change).unwrap();
        Node {
            dir,
            paths,
            cluster: crate::cluster::config::RawCluster::default()
                .validate()
                .unwrap(),
            follow: FollowSettings::default(),
            kubelet: crate::kubelet_sysext::OwnedInputs::defaults(),
        }
    }

    fn converge_on(n: &Node) -> Converge {
        let local = Local {
            inputs: n.inputs(),
            files: Files::new(&n.paths.state_dir),
        };
        crate::async_runtime::current_thread()
            .unwrap()
            .block_on(converge(&local))
            .unwrap()
    }

    fn on_disk(n: &Node) -> (String, String, Phase) {
        let _ = n.dir.path();
        let phase = Files::new(&n.paths.state_dir)
            .load_change()
            .unwrap()
            .unwrap()
            .phase;
        (
            std::fs::read_to_string(&n.paths.kubelet_env).unwrap(),
            std::fs::read_to_string(&n.paths.kubelet_config).unwrap(),
            phase,
        )
    }

    #[test]
    fn a_cut_while_switching_goes_forward_when_the_new_set_is_whole() {
        let config = node(Phase::Switching, true);
        assert_eq!(converge_on(&config), Converge::Forward);
        assert_eq!(
            on_disk(&config),
            (
                "KUBELET_IMAGE_TAG=\"v1.20.3\"\n".into(),
                "new: config\n".into(),
                Phase::Switched
            )
        );
        // Again (a cut during the converge itself): nothing more to do.
        assert_eq!(converge_on(&config), Converge::Nothing);
    }

    #[test]
    fn a_cut_before_the_new_set_was_whole_goes_back_to_the_previous_kubelet() {
        let config = node(Phase::Switching, false);
        assert_eq!(
            converge_on(&config),
            Converge::Back {
                to: Phase::Prepared
            }
        );
        assert_eq!(
            on_disk(&config),
            (
                "KUBELET_IMAGE_TAG=\"v1.20.2\"\n".into(),
                "old: config\n".into(),
                Phase::Prepared
            )
        );
    }

    #[test]
    fn a_cut_while_rolling_back_finishes_the_rollback() {
        let config = node(Phase::RollingBack, true);
        assert_eq!(
            converge_on(&config),
            Converge::Back {
                to: Phase::RolledBack
            }
        );
        let (env, cfg, phase) = on_disk(&config);
        assert_eq!(
            (env.as_str(), cfg.as_str(), phase),
            (
                "KUBELET_IMAGE_TAG=\"v1.20.2\"\n",
                "old: config\n",
                Phase::RolledBack
            )
        );
    }

    #[test]
    fn no_change_nothing_to_converge() {
        let config = node(Phase::Switched, true);
        assert_eq!(converge_on(&config), Converge::Nothing);
        let (env, _, _) = on_disk(&config);
        assert_eq!(env, "KUBELET_IMAGE_TAG=\"v1.20.3\"\n");
        Files::new(&config.paths.state_dir).end_change().unwrap();
        assert_eq!(converge_on(&config), Converge::Nothing);
    }

    /// A sysext node whose image was put in place by hand (a plain file
    /// where the link goes): before a change it is copied beside the
    /// others under the running version's name, so that a rollback links
    /// that copy, never the link to itself; a link is answered as itself.
    #[test]
    fn a_plain_file_image_is_kept_under_its_version_for_a_rollback() {
        let mut n = node(Phase::Prepared, false);
        n.kubelet.paths.extensions_dir = n.dir.path().join("etc/extensions");
        n.kubelet.kubelet.images_dir = n.dir.path().join("opt/extensions/kubernetes");
        std::fs::create_dir_all(&n.kubelet.paths.extensions_dir).unwrap();
        std::fs::create_dir_all(&n.kubelet.kubelet.images_dir).unwrap();
        let link = n.kubelet.paths.extensions_dir.join("kubernetes.raw");
        std::fs::write(&link, b"the image put there by hand").unwrap();
        let local = Local {
            inputs: n.inputs(),
            files: Files::new(&n.paths.state_dir),
        };
        let (_, arch) = crate::kubelet_sysext::product_id(&local.inputs.kubelet).unwrap();
        let kept = n
            .kubelet
            .kubelet
            .images_dir
            .join(format!("kubernetes-v1.20.2-{arch}.raw"));
        assert_eq!(local.previous_image("v1.20.2").unwrap(), Some(kept.clone()));
        assert_eq!(
            std::fs::read(&kept).unwrap(),
            b"the image put there by hand"
        );
        assert!(link.is_file() && std::fs::read_link(&link).is_err());
        // Again: the copy is there, nothing changes.
        assert_eq!(local.previous_image("v1.20.2").unwrap(), Some(kept.clone()));
        // A link is answered with what it names.
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(&kept, &link).unwrap();
        assert_eq!(local.previous_image("v1.20.9").unwrap(), Some(kept));
        // No image at all: nothing to keep.
        std::fs::remove_file(&link).unwrap();
        assert_eq!(local.previous_image("v1.20.2").unwrap(), None);
    }
}
