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
mod tests;
