//! The driver: asks [`plan::next_action`] what to do, does it through the
//! [`Seams`], records start/end/result/error of every step in the state
//! journal, and asks again until the plan says `Done` or a step fails.
//!
//! Journal writes are few and cheap, because they sit on the path between
//! boot and kubelet: a step's start is in the file before the step does
//! anything; its end reaches the file together with the next step's start
//! (or the final write), in one atomic replace. These writes are not
//! fsynced ([`Durability::AtomicOnly`]): after a power cut the journal may
//! be older than what happened (or empty, which `run` moves aside), and the
//! flow then redoes the steps it no longer sees, which every step allows:
//! each is idempotent and re-derives its result from the node. What must
//! survive a power cut is made durable where it is written: kubelet.env,
//! the docker wipe marker, store files, profiles. The record of a failure
//! and the record written just before a reboot request are fsynced (the
//! reboot is the one action that cannot be taken back). So is the run's
//! last write, the one after kubelet.env: once kubelet.env is there no
//! later boot runs the flow again, so a record lost there would never be
//! redone (a power cut right after kubelet.env, in a VM test, left
//! `kubelet-env` "interrupted" for good on a complete node). That write
//! is off kubelet's path: the driver tells systemd `READY=1`
//! ([`Progress::KubeletEnvInPlace`]) first, and kubelet starts beside it.

use super::plan::{self, Action, Facts};
use super::seams::{Progress, Seams};
use crate::agent_upgrade::UpgradeAction;
use crate::error::{Error, Result};
use crate::fsutil::Durability;
use crate::journal::{
    Confirmable, JournalFile, RebootRecord, StateJournal, Step, StepResult, StepStatus,
};
use crate::message_ids;
use tracing::{error, info, warn};

/// How `run` ended when it did not fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    /// kubelet.env is in place (written now, or already there).
    Complete,
    /// The agent-upgrade step installed a new agent at `binary`: it takes
    /// over (runs `run` again, and finds the step done).
    Handover { binary: std::path::PathBuf },
}

/// The most actions one `run` takes before it calls itself stuck. A full
/// flow with confirmations is about a dozen.
const MAX_ACTIONS: usize = 32;

pub struct Driver<'a, S: Seams> {
    pub seams: &'a S,
    pub journal: JournalFile,
    pub boot_id: String,
    pub agent_upgrade_enabled: bool,
    pub os_update_enabled: bool,
    pub addon_enabled: bool,
    pub kubelet_sysext_enabled: bool,
}

type Edit = Box<dyn Fn(&mut StateJournal)>;

/// The state journal as this run sees it: the file as last read or written,
/// plus the edits not yet written (applied to the view at once, to the file
/// at the next [`Recorder::flush`], under the journal's lock so a helper's
/// concurrent record is kept).
struct Recorder<'j> {
    file: &'j JournalFile,
    view: StateJournal,
    pending: Vec<Edit>,
}

impl<'j> Recorder<'j> {
    /// Reads the journal; a corrupt one is moved aside (by `update`) and the
    /// flow starts afresh from what the node shows.
    fn open(file: &'j JournalFile) -> Result<Self> {
        let view = match file.load() {
            Ok(j) => j.unwrap_or_default(),
            Err(_) => file.update(|j| j.clone())?,
        };
        Ok(Recorder {
            file,
            view,
            pending: Vec::new(),
        })
    }

    fn record(&mut self, edit: impl Fn(&mut StateJournal) + 'static) {
        edit(&mut self.view);
        self.pending.push(Box::new(edit));
    }

    /// Writes the pending edits (one atomic replace).
    fn flush(&mut self, durability: Durability) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let edits = std::mem::take(&mut self.pending);
        self.view = self.file.update_with(durability, |j| {
            for e in &edits {
                e(j);
            }
            j.clone()
        })?;
        Ok(())
    }
}

impl<S: Seams> Driver<'_, S> {
    fn facts(&self) -> Facts {
        Facts {
            boot_id: self.boot_id.clone(),
            agent_upgrade_enabled: self.agent_upgrade_enabled,
            addon_enabled: self.addon_enabled,
            kubelet_sysext_enabled: self.kubelet_sysext_enabled,
            kubelet_env_present: self.seams.kubelet_env_present(),
        }
    }

    /// Runs the flow to its end (or its first failure).
    pub async fn run(&self) -> Result<RunOutcome> {
        let mut rec = Recorder::open(&self.journal)?;
        for _ in 0..MAX_ACTIONS {
            let action = plan::next_action(&rec.view, &self.facts());
            match action {
                Action::Done => {
                    // kubelet may start now (the unit's start job ends
                    // here); the last record is written beside it.
                    self.seams.progress(Progress::KubeletEnvInPlace);
                    // Durable: nothing rewrites it after the commit point
                    // (module docs). Empty when kubelet.env was already
                    // there, and then nothing is written.
                    rec.flush(Durability::Durable)?;
                    info!(
                        message_id = message_ids::NODE_BOOTSTRAPPED,
                        step = "run",
                        "node bootstrapped: kubelet.env is in place"
                    );
                    return Ok(RunOutcome::Complete);
                }
                Action::Run(step) => match self.run_step(&mut rec, step).await {
                    Ok(StepResult::AgentUpgrade(o)) if o.action == UpgradeAction::Upgraded => {
                        // The new agent must find the step done.
                        rec.flush(Durability::Durable)?;
                        info!(step = step.name(), path = %o.binary.display(), "handing over to the new agent");
                        return Ok(RunOutcome::Handover { binary: o.binary });
                    }
                    r => r.map(|_| ()),
                },
                Action::Confirm(step) => self.confirm(&mut rec, step).await,
                Action::Reboot {
                    reason,
                    wipe_docker_datadir,
                } => Err(self.reboot(&mut rec, &reason, wipe_docker_datadir).await),
            }
            .inspect_err(|_| {
                // Whatever ended the run, what it recorded (the steps it
                // finished, the failure) goes to disk, durably.
                if let Err(fe) = rec.flush(Durability::Durable) {
                    warn!(error = %fe, "could not update the state journal");
                }
            })?;
        }
        rec.flush(Durability::Durable)?;
        Err(Error::internal(format!(
            "the flow made no progress after {MAX_ACTIONS} actions; state journal {}",
            self.journal.path().display()
        )))
    }

    fn finish(&self, rec: &mut Recorder, step: Step, owner_boot: &str, result: StepResult) {
        info!(message_id = message_ids::STEP_DONE, step = step.name(), result = %result.to_json(), "step done");
        let owner = owner_boot.to_string();
        rec.record(move |j| j.finish(&owner, step, result.clone()));
    }

    /// Logs and records a step's failure; [`Driver::run`] writes it (durably)
    /// as the run ends.
    fn fail(&self, rec: &mut Recorder, step: Step, err: Error) -> Error {
        error!(message_id = message_ids::STEP_FAILED, step = step.name(), error_class = err.class().name(), error = %err, "step failed");
        let boot = self.boot_id.clone();
        let (class, message) = (err.class(), err.to_string());
        rec.record(move |j| {
            let recorded = Error::new(class, message.clone());
            j.fail(&boot, step, &recorded, Vec::new())
        });
        err
    }

    /// Runs a step and records it; returns what it recorded.
    async fn run_step(&self, rec: &mut Recorder<'_>, step: Step) -> Result<StepResult> {
        info!(step = step.name(), boot_id = %self.boot_id, "step started");
        self.seams.progress(Progress::Step(step));
        let boot = self.boot_id.clone();
        rec.record(move |j| j.begin(&boot, step));
        rec.flush(Durability::AtomicOnly)?;
        let result = match self.execute(step, &rec.view).await {
            Ok(v) => v,
            Err(e) => {
                return Err(self.fail(rec, step, e.context(format!("{} failed", step.name()))));
            }
        };
        self.finish(rec, step, &self.boot_id, result.clone());
        Ok(result)
    }
    async fn execute(&self, step: Step, journal: &StateJournal) -> Result<StepResult> {
        let s = self.seams;
        Ok(match step {
            Step::AgentUpgrade => StepResult::AgentUpgrade(s.agent_upgrade().await?),
            Step::Assets => StepResult::Assets(s.check_assets().await?),
            Step::ClusterVersion => StepResult::ClusterVersion(s.discover_version().await?),
            Step::Runtime => StepResult::Runtime(s.decide_runtime(&cluster_version(journal)?)?),
            Step::OsUpdate => StepResult::OsUpdate(Confirmable::new(if self.os_update_enabled {
                s.os_update().await?
            } else {
                s.os_update_disabled().await?
            })),
            Step::DockerAddon => {
                let version = cluster_version(journal)?;
                let next_os = pending_os_version(journal, &self.boot_id);
                StepResult::DockerAddon(Confirmable::new(
                    s.addon_ensure(&version, next_os.as_deref()).await?,
                ))
            }
            Step::KubeletSysext => {
                let version = cluster_version(journal)?;
                StepResult::KubeletSysext(s.kubelet_sysext(&version).await?)
            }
            Step::Containerd => {
                let rules = runtime_record(journal)?.rules().ok_or_else(|| {
                    Error::internal(
                        "the runtime step recorded no Kubernetes version for the kubelet's rules",
                    )
                })?;
                let version = cluster_version(journal)?;
                StepResult::Containerd(s.containerd(&version, rules).await?)
            }
            Step::KubeletEnv => {
                let version = cluster_version(journal)?;
                let runtime = runtime_record(journal)?;
                let containerd = journal
                    .step(Step::Containerd)
                    .filter(|r| r.boot_id == self.boot_id && r.status == StepStatus::Done)
                    .and_then(|r| r.result.as_ref())
                    .and_then(StepResult::containerd);
                StepResult::KubeletEnv(s.write_kubelet_env(&version, &runtime, containerd).await?)
            }
            Step::Reboot | Step::Bootkube | Step::Tectonic => {
                unreachable!("{step} is not a step the driver executes")
            }
        })
    }

    async fn confirm(&self, rec: &mut Recorder<'_>, step: Step) -> Result<()> {
        let record = rec
            .view
            .step(step)
            .expect("the plan confirms recorded steps");
        let owner = record.boot_id.clone();
        let result = record.result.clone();
        if step == Step::Reboot {
            info!(step = step.name(), "the node rebooted");
            let reason = result
                .as_ref()
                .and_then(StepResult::reboot)
                .and_then(|r| r.reason.clone());
            let done = StepResult::Reboot(RebootRecord {
                reason,
                wipe_docker_datadir: None,
                rebooted: Some(true),
            });
            self.finish(rec, Step::Reboot, &self.boot_id, done);
            return Ok(());
        }
        let Some(mut result) = result else {
            unreachable!("the plan confirms only steps whose result it read")
        };
        match self.check_in_effect(&result).await {
            Ok(()) => {
                match &mut result {
                    StepResult::OsUpdate(c) => c.confirmed_in_boot = Some(self.boot_id.clone()),
                    StepResult::DockerAddon(c) => c.confirmed_in_boot = Some(self.boot_id.clone()),
                    _ => unreachable!("only the OS update and the addon are confirmed"),
                }
                info!(step = step.name(), "change confirmed after the reboot");
                self.finish(rec, step, &owner, result);
                Ok(())
            }
            Err(e) => Err(self.fail(rec, step, e)),
        }
    }

    /// Whether the change a step recorded before the reboot is in effect now.
    async fn check_in_effect(&self, result: &StepResult) -> Result<()> {
        match result {
            StepResult::OsUpdate(os) => {
                let want = os.found.new_version.as_deref().unwrap_or_default();
                let before = os.found.current_version.as_str();
                let have = self.seams.os_version().await?;
                // update_engine reports "0.0.0" when it no longer knows the
                // target (it restarted); then any version but the old one is it.
                let unknown_target = want.is_empty() || want == "0.0.0";
                if have == want || (unknown_target && have != before) {
                    Ok(())
                } else {
                    Err(Error::refused(format!(
                        "the OS update to {want} did not take effect: after the reboot the node runs {have} \
                         (update_engine may have rolled back); not rebooting again. Check `journalctl -u update-engine`, \
                         then restart k8s-node-bootstrap.service to try the update again"
                    )))
                }
            }
            StepResult::DockerAddon(addon) => {
                if self.seams.addon_confirm(&addon.found).await? {
                    Ok(())
                } else {
                    let want = &addon.found.docker_next;
                    Err(Error::refused(format!(
                        "docker {want} is not active after the reboot; not rebooting again. Check /etc/torcx/next-profile \
                         and /run/torcx/profile.json, then restart k8s-node-bootstrap.service"
                    )))
                }
            }
            other => unreachable!("{other:?} is never confirmed"),
        }
    }

    /// Asks for the reboot and returns the error to exit with: the process is
    /// normally stopped by the shutdown before this returns.
    async fn reboot(
        &self,
        rec: &mut Recorder<'_>,
        reason: &str,
        wipe_docker_datadir: bool,
    ) -> Error {
        info!(
            message_id = message_ids::REBOOT_REQUESTED,
            step = Step::Reboot.name(),
            reason,
            wipe_docker_datadir,
            "rebooting to apply changes"
        );
        if wipe_docker_datadir {
            // Durable before the record below (see `reboot`'s module doc).
            if let Err(e) = self.seams.owe_docker_wipe().await {
                return self.fail(rec, Step::Reboot, e);
            }
        }
        let boot = self.boot_id.clone();
        let intent = StepResult::Reboot(RebootRecord {
            reason: Some(reason.to_string()),
            wipe_docker_datadir: Some(wipe_docker_datadir),
            rebooted: None,
        });
        rec.record(move |j| {
            j.begin(&boot, Step::Reboot);
            j.note(Step::Reboot, intent.clone());
        });
        if let Err(e) = rec.flush(Durability::Durable) {
            return e;
        }
        self.seams.progress(Progress::RebootRequested);
        match self.seams.reboot(reason, wipe_docker_datadir).await {
            Ok(never) => match never {},
            Err(e) => self.fail(rec, Step::Reboot, e),
        }
    }
}

fn runtime_record(
    journal: &StateJournal,
) -> Result<crate::container_runtime::choice::RuntimeRecord> {
    journal
        .step(Step::Runtime)
        .and_then(|r| r.result.as_ref())
        .and_then(StepResult::runtime)
        .cloned()
        .ok_or_else(|| {
            Error::internal(
                "the flow reached a step that needs the runtime before the runtime step",
            )
        })
}

fn cluster_version(journal: &StateJournal) -> Result<String> {
    journal
        .step(Step::ClusterVersion)
        .and_then(|r| r.result.as_ref())
        .and_then(StepResult::cluster_version)
        .map(|c| c.version.clone())
        .ok_or_else(|| Error::internal("no cluster version recorded in the state journal"))
}

/// The OS version the node boots next, when an update is pending in this boot.
fn pending_os_version(journal: &StateJournal, boot_id: &str) -> Option<String> {
    let rec = journal.step(Step::OsUpdate)?;
    if rec.boot_id != boot_id || !plan::needs_reboot(rec) {
        return None;
    }
    rec.result.as_ref()?.os_update()?.found.new_version.clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addon::AddonOutcome;
    use crate::cluster::{ClusterVersion, VersionSource};
    use crate::container_runtime::choice::{Requested, RuntimeRecord};
    use crate::container_runtime::ensure::{ConfigSource, ContainerdRecord};
    use crate::error::ErrorClass;
    use crate::journal::{AssetsRecord, KubeletEnvRecord, StepStatus};
    use crate::kubelet_config::table::Minor;
    use crate::os_update::{OsOutcome, OsUpdateRecord};
    use std::cell::RefCell;
    use std::convert::Infallible;

    /// A node in memory: each seam does what the test scripted and records calls.
    #[derive(Default)]
    struct FakeNode {
        calls: RefCell<Vec<String>>,
        env_written: RefCell<Option<String>>,
        os_version: RefCell<String>,
        update: Option<String>,
        docker_change: bool,
        fail_version: bool,
        version_error: Option<ErrorClass>,
        reboot_happens: bool,
        /// When set, `discover_version` records what the journal file on
        /// disk says at that moment.
        journal_file: Option<std::path::PathBuf>,
        on_disk_during_version: RefCell<Option<StateJournal>>,
        /// What `kubelet_sysext` fails with, if it does.
        sysext_error: Option<ErrorClass>,
        /// `addon_confirm` cannot ask (e.g. Docker's API is down).
        confirm_error: RefCell<bool>,
        /// What `agent_upgrade` does.
        agent_upgrade: crate::agent_upgrade::UpgradeAction,
        /// What the service manager was told, in order; at `ready`, also
        /// whether kubelet.env was written and what the journal file said.
        notices: RefCell<Vec<String>>,
        on_disk_at_ready: RefCell<Option<StateJournal>>,
        on_disk_at_reboot: RefCell<Option<StateJournal>>,
        on_disk_at_wipe_owed: RefCell<Option<StateJournal>>,
        /// `runtime.name` (`None`: auto).
        runtime: Option<Requested>,
        /// What the API server says (`None`: v1.9.6+coreos.0).
        cluster: Option<String>,
        /// What `containerd` fails with, if it does.
        containerd_error: Option<ErrorClass>,
    }

    impl Seams for FakeNode {
        fn progress(&self, progress: Progress) {
            let notice = match progress {
                Progress::Step(s) => format!("step {s}"),
                Progress::KubeletEnvInPlace => {
                    if let Some(p) = &self.journal_file {
                        *self.on_disk_at_ready.borrow_mut() = JournalFile::new(p).load().unwrap();
                    }
                    let written = self.env_written.borrow().is_some();
                    format!("ready (kubelet.env written: {written})")
                }
                Progress::RebootRequested => {
                    if let Some(p) = &self.journal_file {
                        *self.on_disk_at_reboot.borrow_mut() = JournalFile::new(p).load().unwrap();
                    }
                    let asked = self.calls.borrow().iter().any(|c| c.starts_with("reboot"));
                    format!("reboot requested (asked already: {asked})")
                }
            };
            self.notices.borrow_mut().push(notice);
        }
        fn kubelet_env_present(&self) -> bool {
            self.env_written.borrow().is_some()
        }
        async fn agent_upgrade(&self) -> Result<crate::agent_upgrade::UpgradeOutcome> {
            self.calls.borrow_mut().push("agent-upgrade".into());
            Ok(crate::agent_upgrade::UpgradeOutcome {
                running: "0.1.0".into(),
                action: self.agent_upgrade,
                to: Some("0.2.0".into()),
                url: None,
                newer_major: None,
                binary: "/opt/bin/node-bootstrap".into(),
            })
        }
        async fn check_assets(&self) -> Result<AssetsRecord> {
            self.calls.borrow_mut().push("assets".into());
            Ok(AssetsRecord {
                seed: "/etc/kubernetes/installer/kubelet.env".into(),
                kubeconfig: None,
                assets: "none pushed to this role".into(),
            })
        }
        async fn discover_version(&self) -> Result<ClusterVersion> {
            self.calls.borrow_mut().push("version".into());
            if let Some(p) = &self.journal_file {
                *self.on_disk_during_version.borrow_mut() = JournalFile::new(p).load().unwrap();
            }
            if let Some(class) = self.version_error {
                return Err(Error::new(class, "scripted"));
            }
            if self.fail_version {
                return Err(Error::retryable(
                    "GET https://10.0.0.1:443/version: connection refused",
                ));
            }
            let version = self.cluster.clone().unwrap_or("v1.9.6+coreos.0".into());
            Ok(ClusterVersion {
                version: version.clone(),
                source: VersionSource::ApiServer {
                    url: "https://10.0.0.1:443/version".into(),
                },
                apiserver_version: Some(version),
            })
        }
        async fn os_update(&self) -> Result<OsUpdateRecord> {
            self.calls.borrow_mut().push("os-update".into());
            let current = self.os_version.borrow().clone();
            Ok(match &self.update {
                Some(v) => OsUpdateRecord {
                    outcome: OsOutcome::RebootPending,
                    current_version: current,
                    new_version: Some(v.clone()),
                },
                None => OsUpdateRecord {
                    outcome: OsOutcome::NoUpdate,
                    current_version: current,
                    new_version: None,
                },
            })
        }
        async fn os_update_disabled(&self) -> Result<OsUpdateRecord> {
            unreachable!()
        }
        async fn os_version(&self) -> Result<String> {
            Ok(self.os_version.borrow().clone())
        }
        async fn addon_ensure(&self, version: &str, next_os: Option<&str>) -> Result<AddonOutcome> {
            self.calls
                .borrow_mut()
                .push(format!("addon {version} next-os={next_os:?}"));
            Ok(AddonOutcome {
                docker_running: Some("1.12".into()),
                docker_next: if self.docker_change { "17.03" } else { "1.12" }.into(),
                reboot_needed: self.docker_change,
                wipe_docker_datadir: self.docker_change,
                installed: vec![],
                backend: Default::default(),
                docker_running_source: None,
                os_versions: vec![],
                profile: None,
                note: None,
            })
        }
        async fn addon_confirm(&self, _intended: &AddonOutcome) -> Result<bool> {
            self.calls.borrow_mut().push("addon-confirm".into());
            if *self.confirm_error.borrow() {
                return Err(Error::retryable("(test) docker API unreachable"));
            }
            Ok(true)
        }
        async fn owe_docker_wipe(&self) -> Result<()> {
            self.calls.borrow_mut().push("owe docker wipe".into());
            if let Some(p) = &self.journal_file {
                *self.on_disk_at_wipe_owed.borrow_mut() = JournalFile::new(p).load().unwrap();
            }
            Ok(())
        }
        async fn reboot(&self, reason: &str, wipe: bool) -> Result<Infallible> {
            self.calls
                .borrow_mut()
                .push(format!("reboot ({reason}) wipe={wipe}"));
            if self.reboot_happens {
                if let Some(v) = &self.update {
                    *self.os_version.borrow_mut() = v.clone();
                }
                Err(Error::retryable("(test) rebooting"))
            } else {
                Err(Error::retryable("reboot did not happen within 300s"))
            }
        }
        async fn kubelet_sysext(
            &self,
            version: &str,
        ) -> Result<crate::kubelet_sysext::KubeletSysextRecord> {
            self.calls
                .borrow_mut()
                .push(format!("kubelet-sysext {version}"));
            if let Some(class) = self.sysext_error {
                return Err(Error::new(class, "no kubelet the policy allows"));
            }
            Ok(crate::kubelet_sysext::KubeletSysextRecord {
                cluster_version: version.into(),
                version: "v1.9.6".into(),
                rule: crate::kubelet_sysext::choice::Rule::Exact,
                installed: crate::sysext::package::Installed::example(
                    "/opt/extensions/kubernetes/kubernetes-v1.9.6-x86-64.raw",
                    "file:///mirror/kubernetes_v1.9.6_any_x86-64.raw",
                ),
            })
        }
        fn decide_runtime(&self, version: &str) -> Result<RuntimeRecord> {
            crate::container_runtime::choice::decide(
                version,
                self.runtime.unwrap_or(Requested::Auto),
                false,
            )
        }
        async fn containerd(&self, _cluster: &str, rules: Minor) -> Result<ContainerdRecord> {
            self.calls.borrow_mut().push(format!("containerd {rules}"));
            if let Some(class) = self.containerd_error {
                return Err(Error::new(
                    class,
                    "containerd did not answer on /run/containerd/containerd.sock",
                ));
            }
            Ok(ContainerdRecord {
                config: "/etc/containerd/config.toml".into(),
                config_source: ConfigSource::Written,
                restarted: true,
                socket: "/run/containerd/containerd.sock".into(),
                runtime: "containerd://1.6.20".into(),
                cri_api: crate::container_runtime::cri::CriApi::V1,
                cgroup_driver: "systemd".into(),
                package: None,
            })
        }
        async fn write_kubelet_env(
            &self,
            version: &str,
            runtime: &RuntimeRecord,
            containerd: Option<&ContainerdRecord>,
        ) -> Result<KubeletEnvRecord> {
            let on = match containerd {
                Some(c) => c.runtime.clone(),
                None => runtime.runtime.name().to_string(),
            };
            self.calls
                .borrow_mut()
                .push(format!("kubelet-env {version} on {on}"));
            *self.env_written.borrow_mut() = Some(version.to_string());
            Ok(KubeletEnvRecord {
                path: "/etc/kubernetes/kubelet.env".into(),
                image_tag: version.replace('+', "_"),
                runtime: Some(runtime.runtime.name().into()),
                kubelet_config: None,
            })
        }
    }

    fn driver<'a>(node: &'a FakeNode, dir: &std::path::Path, boot: &str) -> Driver<'a, FakeNode> {
        Driver {
            seams: node,
            journal: JournalFile::new(dir.join("state.json")),
            boot_id: boot.into(),
            agent_upgrade_enabled: false,
            os_update_enabled: true,
            addon_enabled: true,
            kubelet_sysext_enabled: false,
        }
    }

    #[tokio::test]
    async fn a_step_starts_on_disk_before_it_runs_and_the_last_end_is_written() {
        let d = tempfile::tempdir().unwrap();
        let node = FakeNode {
            os_version: RefCell::new("1576.4.0".into()),
            journal_file: Some(d.path().join("state.json")),
            ..Default::default()
        };
        driver(&node, d.path(), "b1").run().await.unwrap();
        // While the version was being discovered, the file already said so,
        // and the step before it had its end recorded.
        let during = node.on_disk_during_version.borrow().clone().unwrap();
        let status = |j: &StateJournal, s: Step| j.step(s).map(|r| r.status);
        assert_eq!(
            status(&during, Step::ClusterVersion),
            Some(StepStatus::Running)
        );
        assert_eq!(status(&during, Step::Assets), Some(StepStatus::Done));
        assert_eq!(status(&during, Step::OsUpdate), None);
        // After the run, the final step's end is on disk too.
        let after = JournalFile::new(d.path().join("state.json"))
            .load()
            .unwrap()
            .unwrap();
        assert_eq!(status(&after, Step::KubeletEnv), Some(StepStatus::Done));
    }

    #[tokio::test]
    async fn systemd_hears_each_step_and_ready_once_kubelet_env_is_in_place() {
        let d = tempfile::tempdir().unwrap();
        let node = FakeNode {
            os_version: RefCell::new("1576.4.0".into()),
            journal_file: Some(d.path().join("state.json")),
            ..Default::default()
        };
        driver(&node, d.path(), "b1").run().await.unwrap();
        assert_eq!(
            *node.notices.borrow(),
            vec![
                "step assets",
                "step cluster-version",
                "step runtime",
                "step os-update",
                "step docker-addon",
                "step kubelet-env",
                "ready (kubelet.env written: true)",
            ]
        );
        // READY=1 lets kubelet start before the run's last record: at that
        // moment the file still says kubelet-env is running; after the run,
        // it is done.
        let status = |j: &StateJournal| j.step(Step::KubeletEnv).map(|r| r.status);
        let at_ready = node.on_disk_at_ready.borrow().clone().unwrap();
        assert_eq!(status(&at_ready), Some(StepStatus::Running));
        let after = JournalFile::new(d.path().join("state.json"))
            .load()
            .unwrap()
            .unwrap();
        assert_eq!(status(&after), Some(StepStatus::Done));
    }

    #[tokio::test]
    async fn containerd_is_configured_after_the_os_and_before_kubelet_env() {
        let d = tempfile::tempdir().unwrap();
        let node = FakeNode {
            os_version: RefCell::new("3815.2.0".into()),
            cluster: Some("v1.24.3".into()),
            ..Default::default()
        };
        let mut drv = driver(&node, d.path(), "b1");
        drv.kubelet_sysext_enabled = true;
        assert_eq!(drv.run().await.unwrap(), RunOutcome::Complete);
        assert_eq!(
            *node.calls.borrow(),
            [
                "assets",
                "version",
                "os-update",
                "kubelet-sysext v1.24.3",
                "containerd 1.24",
                "kubelet-env v1.24.3 on containerd://1.6.20"
            ],
            "no docker addon on a containerd node"
        );
        let j = JournalFile::new(d.path().join("state.json"))
            .load()
            .unwrap()
            .unwrap();
        let runtime = j
            .step(Step::Runtime)
            .unwrap()
            .result
            .as_ref()
            .unwrap()
            .runtime()
            .unwrap()
            .clone();
        assert_eq!(
            runtime.runtime,
            crate::container_runtime::choice::Runtime::Containerd
        );
        assert!(j.step(Step::DockerAddon).is_none());

        // A containerd that does not answer: retryable, nothing committed.
        let d = tempfile::tempdir().unwrap();
        let node = FakeNode {
            cluster: Some("v1.26.0".into()),
            containerd_error: Some(ErrorClass::Retryable),
            ..Default::default()
        };
        let err = driver(&node, d.path(), "b1").run().await.unwrap_err();
        assert_eq!(err.class(), ErrorClass::Retryable);
        assert!(
            err.to_string().contains("/run/containerd/containerd.sock"),
            "{err}"
        );
        assert!(node.env_written.borrow().is_none());
        assert!(!node.notices.borrow().iter().any(|n| n.starts_with("ready")));
    }

    #[tokio::test]
    async fn docker_for_a_cluster_without_dockershim_is_refused_before_anything_changes() {
        let d = tempfile::tempdir().unwrap();
        let node = FakeNode {
            update: Some("1576.4.0".into()),
            docker_change: true,
            cluster: Some("v1.24.0".into()),
            runtime: Some(Requested::Docker),
            ..Default::default()
        };
        let err = driver(&node, d.path(), "b1").run().await.unwrap_err();
        assert_eq!(err.class(), ErrorClass::Refused);
        assert!(
            err.to_string().contains("runtime.name is \"docker\""),
            "{err}"
        );
        assert_eq!(
            *node.calls.borrow(),
            ["assets", "version"],
            "no OS update, no addon, no reboot"
        );
        assert!(node.env_written.borrow().is_none());
        let j = JournalFile::new(d.path().join("state.json"))
            .load()
            .unwrap()
            .unwrap();
        let rec = j.step(Step::Runtime).unwrap();
        assert_eq!(rec.status, StepStatus::Failed);
        assert_eq!(rec.error_class, Some(ErrorClass::Refused));
    }

    #[tokio::test]
    async fn the_kubelet_sysext_is_merged_before_kubelet_env_and_ready() {
        let d = tempfile::tempdir().unwrap();
        let node = FakeNode {
            os_version: RefCell::new("1576.4.0".into()),
            ..Default::default()
        };
        let mut drv = driver(&node, d.path(), "b1");
        drv.kubelet_sysext_enabled = true;
        assert_eq!(drv.run().await.unwrap(), RunOutcome::Complete);
        assert_eq!(
            node.calls.borrow()[3..],
            [
                "addon v1.9.6+coreos.0 next-os=None",
                "kubelet-sysext v1.9.6+coreos.0",
                "kubelet-env v1.9.6+coreos.0 on docker"
            ]
        );
        assert_eq!(
            node.notices.borrow()[5..],
            [
                "step kubelet-sysext",
                "step kubelet-env",
                "ready (kubelet.env written: true)"
            ]
        );
        // Refused: no kubelet.env, no READY=1, the refusal recorded.
        let d = tempfile::tempdir().unwrap();
        let node = FakeNode {
            os_version: RefCell::new("1576.4.0".into()),
            sysext_error: Some(ErrorClass::Refused),
            ..Default::default()
        };
        let mut drv = driver(&node, d.path(), "b1");
        drv.kubelet_sysext_enabled = true;
        let err = drv.run().await.unwrap_err();
        assert_eq!(err.class(), ErrorClass::Refused);
        assert!(node.env_written.borrow().is_none());
        assert!(!node.notices.borrow().iter().any(|n| n.starts_with("ready")));
        let j = JournalFile::new(d.path().join("state.json"))
            .load()
            .unwrap()
            .unwrap();
        assert_eq!(
            j.step(Step::KubeletSysext).unwrap().status,
            StepStatus::Failed
        );
    }

    #[tokio::test]
    async fn no_ready_before_a_reboot_or_after_a_failure() {
        let d = tempfile::tempdir().unwrap();
        let node = node_updating_to_1576_with_new_docker();
        driver(&node, d.path(), "b1").run().await.unwrap_err();
        assert!(
            !node.notices.borrow().iter().any(|n| n.starts_with("ready")),
            "{:?}",
            node.notices.borrow()
        );
        let d = tempfile::tempdir().unwrap();
        let node = FakeNode {
            fail_version: true,
            ..Default::default()
        };
        driver(&node, d.path(), "b1").run().await.unwrap_err();
        assert_eq!(
            *node.notices.borrow(),
            vec!["step assets", "step cluster-version"]
        );
    }

    #[tokio::test]
    async fn the_reboot_is_told_once_its_record_is_on_disk_and_before_it_is_asked() {
        let d = tempfile::tempdir().unwrap();
        let node = FakeNode {
            journal_file: Some(d.path().join("state.json")),
            ..node_updating_to_1576_with_new_docker()
        };
        driver(&node, d.path(), "b1").run().await.unwrap_err();
        assert_eq!(
            node.notices.borrow().last().unwrap(),
            "reboot requested (asked already: false)"
        );
        let at_reboot = node.on_disk_at_reboot.borrow().clone().unwrap();
        let rec = at_reboot.step(Step::Reboot).unwrap();
        assert_eq!(rec.status, StepStatus::Running);
        assert_eq!(
            rec.result
                .as_ref()
                .and_then(StepResult::reboot)
                .unwrap()
                .reason
                .as_deref(),
            Some("os 1520.3.0 -> 1576.4.0; docker 1.12 -> 17.03")
        );
        // The wipe was owed (durably, by the seam) before the journal said
        // a reboot that wipes is under way: a power cut between the two
        // must not leave that record without the marker.
        let at_wipe = node.on_disk_at_wipe_owed.borrow().clone().unwrap();
        assert!(
            at_wipe.step(Step::Reboot).is_none(),
            "the reboot was recorded before the wipe was owed: {:?}",
            at_wipe.step(Step::Reboot)
        );
        let calls = node.calls.borrow();
        assert_eq!(
            calls[calls.len() - 2..],
            [
                "owe docker wipe".to_string(),
                "reboot (os 1520.3.0 -> 1576.4.0; docker 1.12 -> 17.03) wipe=true".to_string()
            ]
        );
    }

    #[tokio::test]
    async fn nothing_to_change_writes_kubelet_env_without_a_reboot() {
        let d = tempfile::tempdir().unwrap();
        let node = FakeNode {
            os_version: RefCell::new("1576.4.0".into()),
            ..Default::default()
        };
        assert_eq!(
            driver(&node, d.path(), "b1").run().await.unwrap(),
            RunOutcome::Complete
        );
        assert_eq!(
            *node.calls.borrow(),
            vec![
                "assets",
                "version",
                "os-update",
                "addon v1.9.6+coreos.0 next-os=None",
                "kubelet-env v1.9.6+coreos.0 on docker"
            ]
        );
        let j = JournalFile::new(d.path().join("state.json"))
            .load()
            .unwrap()
            .unwrap();
        for step in [
            Step::Assets,
            Step::ClusterVersion,
            Step::OsUpdate,
            Step::DockerAddon,
            Step::KubeletEnv,
        ] {
            assert_eq!(j.step(step).unwrap().status, StepStatus::Done, "{step}");
        }
        assert!(j.step(Step::Reboot).is_none());
    }

    /// A node on 1520.3.0 whose update_engine offers 1576.4.0, whose docker
    /// changes with it, and whose reboot takes effect.
    fn node_updating_to_1576_with_new_docker() -> FakeNode {
        FakeNode {
            os_version: RefCell::new("1520.3.0".into()),
            update: Some("1576.4.0".into()),
            docker_change: true,
            reboot_happens: true,
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn os_update_reboots_first_and_kubelet_env_comes_after_confirmation() {
        let d = tempfile::tempdir().unwrap();
        let node = node_updating_to_1576_with_new_docker();
        let err = driver(&node, d.path(), "b1").run().await.unwrap_err();
        assert_eq!(err.to_string(), "(test) rebooting");
        assert!(
            node.env_written.borrow().is_none(),
            "kubelet.env must wait for the reboot"
        );
        assert_eq!(
            node.calls.borrow().last().unwrap(),
            "reboot (os 1520.3.0 -> 1576.4.0; docker 1.12 -> 17.03) wipe=true"
        );
        assert!(
            node.calls
                .borrow()
                .contains(&"addon v1.9.6+coreos.0 next-os=Some(\"1576.4.0\")".to_string())
        );
        node.calls.borrow_mut().clear();
        // Second boot.
        assert_eq!(
            driver(&node, d.path(), "b2").run().await.unwrap(),
            RunOutcome::Complete
        );
        assert_eq!(
            *node.calls.borrow(),
            vec![
                "assets",
                "addon-confirm",
                "kubelet-env v1.9.6+coreos.0 on docker"
            ]
        );
        let j = JournalFile::new(d.path().join("state.json"))
            .load()
            .unwrap()
            .unwrap();
        let result = |s: Step| j.step(s).unwrap().result.clone().unwrap();
        let reboot = result(Step::Reboot);
        let reboot = reboot.reboot().unwrap();
        assert_eq!(reboot.rebooted, Some(true));
        assert_eq!(
            reboot.reason.as_deref(),
            Some("os 1520.3.0 -> 1576.4.0; docker 1.12 -> 17.03"),
            "the reason asked for, kept"
        );
        assert_eq!(
            result(Step::OsUpdate)
                .os_update()
                .unwrap()
                .confirmed_in_boot,
            Some("b2".to_string())
        );
    }

    #[tokio::test]
    async fn an_os_update_that_did_not_take_effect_is_refused_not_looped() {
        let d = tempfile::tempdir().unwrap();
        let node = FakeNode {
            os_version: RefCell::new("1520.3.0".into()),
            update: Some("1576.4.0".into()),
            ..Default::default()
        };
        let err = driver(&node, d.path(), "b1").run().await.unwrap_err();
        assert_eq!(err.class(), ErrorClass::Retryable);
        assert!(err.to_string().contains("reboot did not happen"), "{err}");
        // The node came back (power cycle) on the old OS.
        let err = driver(&node, d.path(), "b2").run().await.unwrap_err();
        assert_eq!(err.class(), ErrorClass::Refused);
        assert!(err.to_string().contains("the OS update to 1576.4.0 did not take effect: after the reboot the node runs 1520.3.0"), "{err}");
        assert!(node.env_written.borrow().is_none());
    }

    #[tokio::test]
    async fn an_unknown_update_target_is_confirmed_by_a_changed_version() {
        let d = tempfile::tempdir().unwrap();
        let node = FakeNode {
            os_version: RefCell::new("1520.3.0".into()),
            update: Some("0.0.0".into()),
            reboot_happens: true,
            ..Default::default()
        };
        driver(&node, d.path(), "b1").run().await.unwrap_err();
        *node.os_version.borrow_mut() = "1576.4.0".into();
        assert_eq!(
            driver(&node, d.path(), "b2").run().await.unwrap(),
            RunOutcome::Complete
        );
    }

    #[tokio::test]
    async fn a_seam_error_while_confirming_is_recorded_with_the_steps_finished_before_it() {
        let d = tempfile::tempdir().unwrap();
        let node = node_updating_to_1576_with_new_docker();
        driver(&node, d.path(), "b1").run().await.unwrap_err();
        *node.confirm_error.borrow_mut() = true;
        let err = driver(&node, d.path(), "b2").run().await.unwrap_err();
        assert_eq!(err.to_string(), "(test) docker API unreachable");
        let j = JournalFile::new(d.path().join("state.json"))
            .load()
            .unwrap()
            .unwrap();
        let assets = j.step(Step::Assets).unwrap();
        assert_eq!(
            (assets.status, assets.boot_id.as_str()),
            (StepStatus::Done, "b2")
        );
        let os = j.step(Step::OsUpdate).unwrap().result.clone().unwrap();
        assert_eq!(
            os.os_update().unwrap().confirmed_in_boot.as_deref(),
            Some("b2"),
            "{os:?}"
        );
        // The confirmation that could not ask is that step's failure, for
        // `status` to show.
        let addon = j.step(Step::DockerAddon).unwrap();
        assert_eq!(addon.status, StepStatus::Failed);
        assert_eq!(
            addon.error.as_deref(),
            Some("(test) docker API unreachable")
        );
    }

    #[tokio::test]
    async fn a_failing_step_is_recorded_and_the_next_run_resumes_there() {
        let d = tempfile::tempdir().unwrap();
        let mut node = FakeNode {
            fail_version: true,
            os_version: RefCell::new("1".into()),
            ..Default::default()
        };
        let err = driver(&node, d.path(), "b1").run().await.unwrap_err();
        assert_eq!(err.class(), ErrorClass::Retryable);
        assert_eq!(
            err.to_string(),
            "cluster-version failed: GET https://10.0.0.1:443/version: connection refused"
        );
        let j = JournalFile::new(d.path().join("state.json"))
            .load()
            .unwrap()
            .unwrap();
        let rec = j.step(Step::ClusterVersion).unwrap();
        assert_eq!(rec.status, StepStatus::Failed);
        assert_eq!(rec.error_class, Some(ErrorClass::Retryable));
        node.fail_version = false;
        node.calls.borrow_mut().clear();
        driver(&node, d.path(), "b1").run().await.unwrap();
        assert_eq!(
            node.calls.borrow()[0],
            "version",
            "assets were done in this boot and not redone"
        );
    }

    #[tokio::test]
    async fn every_error_class_is_recorded_and_returned_unchanged() {
        for class in ErrorClass::ALL {
            let d = tempfile::tempdir().unwrap();
            let node = FakeNode {
                version_error: Some(class),
                ..Default::default()
            };
            let err = driver(&node, d.path(), "b1").run().await.unwrap_err();
            assert_eq!(err.class(), class);
            let j = JournalFile::new(d.path().join("state.json"))
                .load()
                .unwrap()
                .unwrap();
            let rec = j.step(Step::ClusterVersion).unwrap();
            assert_eq!(rec.error_class, Some(class));
            assert_eq!(
                rec.error.as_deref(),
                Some("cluster-version failed: scripted")
            );
            assert!(node.env_written.borrow().is_none());
        }
    }

    #[tokio::test]
    async fn a_new_agent_takes_over_and_finds_its_upgrade_done() {
        let d = tempfile::tempdir().unwrap();
        let node = FakeNode {
            os_version: RefCell::new("1576.4.0".into()),
            agent_upgrade: UpgradeAction::Upgraded,
            ..Default::default()
        };
        let mut first = driver(&node, d.path(), "b1");
        first.agent_upgrade_enabled = true;
        assert_eq!(
            first.run().await.unwrap(),
            RunOutcome::Handover {
                binary: "/opt/bin/node-bootstrap".into()
            }
        );
        assert_eq!(
            *node.calls.borrow(),
            vec!["agent-upgrade"],
            "nothing else yet"
        );
        // The new agent, same boot: the upgrade is done, the flow goes on.
        node.calls.borrow_mut().clear();
        assert_eq!(first.run().await.unwrap(), RunOutcome::Complete);
        assert_eq!(node.calls.borrow()[0], "assets");
        assert!(!node.calls.borrow().contains(&"agent-upgrade".to_string()));
        let j = JournalFile::new(d.path().join("state.json"))
            .load()
            .unwrap()
            .unwrap();
        let up = j.step(Step::AgentUpgrade).unwrap();
        assert_eq!(up.status, StepStatus::Done);
        assert_eq!(
            up.result
                .as_ref()
                .and_then(StepResult::agent_upgrade)
                .unwrap()
                .to
                .as_deref(),
            Some("0.2.0")
        );
    }

    #[tokio::test]
    async fn a_current_agent_goes_straight_on() {
        let d = tempfile::tempdir().unwrap();
        let node = FakeNode {
            os_version: RefCell::new("1576.4.0".into()),
            ..Default::default()
        };
        let mut drv = driver(&node, d.path(), "b1");
        drv.agent_upgrade_enabled = true;
        assert_eq!(drv.run().await.unwrap(), RunOutcome::Complete);
        assert_eq!(node.calls.borrow()[..2], ["agent-upgrade", "assets"]);
    }

    #[tokio::test]
    async fn a_present_kubelet_env_makes_run_a_no_op() {
        let d = tempfile::tempdir().unwrap();
        let node = FakeNode {
            env_written: RefCell::new(Some("x".into())),
            ..Default::default()
        };
        driver(&node, d.path(), "b1").run().await.unwrap();
        assert!(node.calls.borrow().is_empty());
    }
}
