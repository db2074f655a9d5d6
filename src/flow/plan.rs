//! The pure decision: given the state journal, this boot's id and what the
//! node looks like, what `run` does next. No I/O here; the driver executes
//! the answer, records it in the journal, and asks again.
//!
//! Rules, per step (in flow order):
//! - a step done in this boot is not redone;
//! - `agent-upgrade` (when `agent.upgrade` is on) comes first, once per
//!   bootstrap; when it installed a new agent, the driver hands over to it
//!   (the new binary runs `run` again and finds the step done);
//! - `assets` is re-checked after every reboot (cheap, and the result lives
//!   on disk, where it could have gone);
//! - `cluster-version` done in any boot is kept (later decisions were made for it);
//! - `os-update` and `docker-addon` done in an earlier boot with a change that
//!   needed a reboot are *confirmed* (the node now runs the new OS / docker);
//!   done without a change, they are kept;
//! - a `reboot` requested in an earlier boot (still running, or failed
//!   because it came later than we waited) means it happened: it is confirmed;
//! - a step running (interrupted) or failed is run again, and so is a done
//!   step whose result the flow cannot read (another agent version wrote it);
//! - `runtime` (the container runtime chosen with the cluster version,
//!   which the agent must know how to configure) comes right after
//!   `cluster-version`, before anything changes, and is kept once done;
//!   `docker-addon` runs only for docker, `containerd` only for containerd;
//! - `containerd` comes after any reboot and `kubelet-sysext`, before
//!   `kubelet-env`, and runs again in every boot that reaches it (it makes
//!   sure this boot's containerd runs the agent's config and answers);
//! - `kubelet-sysext` (the sysext kubelet: `kubelet.backend = "sysext"`, or
//!   `auto` on a release without kubelet-wrapper) comes after any
//!   reboot and before `kubelet-env`, and runs again in every boot that
//!   reaches it (it is cheap when the image is in place and merged, and it
//!   is what makes sure this boot's /usr has the kubelet);
//! - a reboot is requested when a step done in *this* boot needs one; and
//!   kubelet.env, the commit point, is written only when none is pending.

use crate::container_runtime::choice::Runtime;
use crate::journal::{StateJournal, Step, StepRecord, StepResult, StepStatus};
use crate::os_update::OsOutcome;

/// What the driver does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Execute the step.
    Run(Step),
    /// The step changed something that needed a reboot, in an earlier boot:
    /// check that the change is now in effect.
    Confirm(Step),
    /// Ask for a reboot (after installing the docker datadir cleanup unit
    /// when `wipe_docker_datadir`).
    Reboot {
        reason: String,
        wipe_docker_datadir: bool,
    },
    /// Nothing left to do: kubelet.env is in place.
    Done,
}

/// Which optional steps are enabled, and what the node looks like now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    pub boot_id: String,
    /// `agent.upgrade` is not `off`.
    pub agent_upgrade_enabled: bool,
    pub addon_enabled: bool,
    /// The kubelet is the system extension on this node: `kubelet.backend`
    /// `sysext`, or `auto` on a release without kubelet-wrapper.
    pub kubelet_sysext_enabled: bool,
    /// `/etc/kubernetes/kubelet.env` exists.
    pub kubelet_env_present: bool,
}

/// Whether a done step's result says it needs a reboot to take effect.
pub fn needs_reboot(rec: &StepRecord) -> bool {
    match &rec.result {
        Some(StepResult::OsUpdate(r)) => r.found.outcome == OsOutcome::RebootPending,
        Some(StepResult::DockerAddon(r)) => r.found.reboot_needed,
        _ => false,
    }
}

/// Whether a step's effect was confirmed after its reboot.
pub fn confirmed(rec: &StepRecord) -> bool {
    match &rec.result {
        Some(StepResult::OsUpdate(r)) => r.confirmed_in_boot.is_some(),
        Some(StepResult::DockerAddon(r)) => r.confirmed_in_boot.is_some(),
        _ => false,
    }
}

/// Whether the flow can read what a done step found: the later steps and
/// the reboot decision read the cluster version, the runtime, the OS
/// update and the addon's outcome; one it cannot read (another agent
/// version wrote it) is found again.
fn result_readable(step: Step, rec: &StepRecord) -> bool {
    let r = rec.result.as_ref();
    match step {
        Step::ClusterVersion => r.and_then(StepResult::cluster_version).is_some(),
        Step::Runtime => r.and_then(StepResult::runtime).is_some(),
        Step::Containerd => r.and_then(StepResult::containerd).is_some(),
        Step::OsUpdate => r.and_then(StepResult::os_update).is_some(),
        Step::DockerAddon => r.and_then(StepResult::docker_addon).is_some(),
        _ => true,
    }
}

/// The runtime the `runtime` step chose, once it is done.
pub fn chosen_runtime(journal: &StateJournal) -> Option<Runtime> {
    journal
        .step(Step::Runtime)
        .filter(|r| r.status == StepStatus::Done)
        .and_then(|r| r.result.as_ref())
        .and_then(StepResult::runtime)
        .map(|r| r.runtime)
}

/// A human reason for the reboot, e.g. "os 1520.3.0 -> 1576.4.0; docker 1.12 -> 17.03".
fn reboot_reason(journal: &StateJournal, boot_id: &str) -> Option<(String, bool)> {
    let mut reasons = Vec::new();
    let mut wipe = false;
    let this_boot = |step: Step| {
        journal
            .step(step)
            .filter(|r| r.status == StepStatus::Done && r.boot_id == boot_id && needs_reboot(r))
            .and_then(|r| r.result.as_ref())
    };
    if let Some(os) = this_boot(Step::OsUpdate).and_then(StepResult::os_update) {
        reasons.push(format!(
            "os {} -> {}",
            os.found.current_version,
            os.found.new_version.as_deref().unwrap_or("new version")
        ));
    }
    if let Some(addon) = this_boot(Step::DockerAddon).and_then(StepResult::docker_addon) {
        reasons.push(format!(
            "docker {} -> {}",
            addon.found.docker_running.as_deref().unwrap_or("none"),
            addon.found.docker_next
        ));
        wipe = addon.found.wipe_docker_datadir;
    }
    (!reasons.is_empty()).then(|| (reasons.join("; "), wipe))
}

/// The next action. See the module docs for the rules.
pub fn next_action(journal: &StateJournal, facts: &Facts) -> Action {
    if facts.kubelet_env_present {
        return Action::Done;
    }
    let boot = facts.boot_id.as_str();
    for step in Step::FLOW {
        let rec = journal.step(step);
        let done_here = rec.is_some_and(|r| {
            r.status == StepStatus::Done && r.boot_id == boot && result_readable(step, r)
        });
        if done_here && step != Step::Reboot {
            continue;
        }
        match step {
            Step::AgentUpgrade if !facts.agent_upgrade_enabled => continue,
            Step::DockerAddon
                if !facts.addon_enabled || chosen_runtime(journal) != Some(Runtime::Docker) =>
            {
                continue;
            }
            Step::Containerd if chosen_runtime(journal) != Some(Runtime::Containerd) => continue,
            Step::KubeletSysext if !facts.kubelet_sysext_enabled => continue,
            Step::Reboot => {
                // Requested in an earlier boot and not yet confirmed (running
                // when the shutdown stopped us, or failed because it came
                // later than we waited): we are past it now.
                if let Some(r) = rec
                    && r.boot_id != boot
                    && r.status != StepStatus::Done
                {
                    return Action::Confirm(Step::Reboot);
                }
                match reboot_reason(journal, boot) {
                    Some((reason, wipe)) => {
                        return Action::Reboot {
                            reason,
                            wipe_docker_datadir: wipe,
                        };
                    }
                    None => continue,
                }
            }
            _ => {}
        }
        let Some(r) = rec else {
            return Action::Run(step);
        };
        if !result_readable(step, r) {
            return Action::Run(step);
        }
        match r.status {
            StepStatus::Running | StepStatus::Failed => return Action::Run(step),
            StepStatus::Done => {
                // Done in an earlier boot.
                match step {
                    // Upgraded once per bootstrap; the cluster version is
                    // kept once found.
                    Step::AgentUpgrade | Step::ClusterVersion | Step::Runtime => continue,
                    Step::Assets | Step::KubeletSysext | Step::Containerd => {
                        return Action::Run(step);
                    }
                    Step::OsUpdate | Step::DockerAddon => {
                        if needs_reboot(r) && !confirmed(r) {
                            return Action::Confirm(step);
                        }
                        continue;
                    }
                    Step::KubeletEnv => return Action::Run(step),
                    Step::Reboot | Step::Bootkube | Step::Tectonic => {
                        unreachable!("not a flow step, or handled above")
                    }
                }
            }
        }
    }
    // Every step is done or skipped; kubelet-env is the last, so this means
    // it was written in this boot and the file is gone again: rewrite it.
    Action::Run(Step::KubeletEnv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addon::AddonOutcome;
    use crate::error::Error;
    use crate::journal::{AssetsRecord, Confirmable, KubeletEnvRecord, RebootRecord};
    use crate::os_update::OsUpdateRecord;

    const B1: &str = "boot-1";
    const B2: &str = "boot-2";

    fn facts(boot: &str) -> Facts {
        Facts {
            boot_id: boot.into(),
            agent_upgrade_enabled: false,
            addon_enabled: true,
            kubelet_sysext_enabled: false,
            kubelet_env_present: false,
        }
    }

    fn done(j: &mut StateJournal, boot: &str, step: Step, result: StepResult) {
        j.begin(boot, step);
        j.finish(boot, step, result);
    }

    fn os(outcome: OsOutcome, current: &str, new: Option<&str>) -> StepResult {
        StepResult::OsUpdate(Confirmable::new(OsUpdateRecord {
            outcome,
            current_version: current.into(),
            new_version: new.map(str::to_string),
        }))
    }

    fn no_os_update() -> StepResult {
        os(OsOutcome::NoUpdate, "1520.3.0", None)
    }

    fn os_update_to(new: &str) -> StepResult {
        os(OsOutcome::RebootPending, "1520.3.0", Some(new))
    }

    fn addon(running: &str, next: &str, reboot: bool, wipe: bool) -> StepResult {
        StepResult::DockerAddon(Confirmable::new(AddonOutcome {
            docker_running: Some(running.into()),
            docker_next: next.into(),
            reboot_needed: reboot,
            wipe_docker_datadir: wipe,
            installed: vec![],
            backend: Default::default(),
            docker_running_source: None,
            os_versions: vec![],
            profile: None,
            note: None,
        }))
    }

    fn same_docker() -> StepResult {
        addon("17.03", "17.03", false, false)
    }

    fn version() -> StepResult {
        StepResult::ClusterVersion(crate::cluster::ClusterVersion {
            version: "v1.9.6+coreos.0".into(),
            source: crate::cluster::VersionSource::Forced,
            apiserver_version: None,
        })
    }

    fn assets() -> StepResult {
        StepResult::Assets(AssetsRecord {
            seed: "/etc/kubernetes/installer/kubelet.env".into(),
            kubeconfig: None,
            assets: "none pushed to this role".into(),
        })
    }

    fn kubelet_env() -> StepResult {
        StepResult::KubeletEnv(KubeletEnvRecord {
            path: "/etc/kubernetes/kubelet.env".into(),
            image_tag: "v1.9.6_coreos.0".into(),
            runtime: Some("docker".into()),
            kubelet_config: None,
        })
    }

    fn runtime(runtime: Runtime) -> StepResult {
        StepResult::Runtime(crate::container_runtime::choice::RuntimeRecord {
            runtime,
            requested: crate::container_runtime::choice::Requested::Auto,
            kubernetes: "1.9".into(),
            kubelet_rules: "1.9".into(),
            kubelet: None,
            kubelet_why: None,
            docker_backend: None,
        })
    }

    fn containerd() -> StepResult {
        StepResult::Containerd(crate::container_runtime::ensure::ContainerdRecord {
            config: "/etc/containerd/config.toml".into(),
            config_source: crate::container_runtime::ensure::ConfigSource::Unchanged,
            restarted: false,
            socket: "/run/containerd/containerd.sock".into(),
            runtime: "containerd://1.6.20".into(),
            cri_api: crate::container_runtime::cri::CriApi::V1alpha2,
            cgroup_driver: "cgroupfs".into(),
            verified: None,
            advice: None,
            package: None,
        })
    }

    fn rebooted() -> StepResult {
        StepResult::Reboot(RebootRecord {
            reason: None,
            wipe_docker_datadir: None,
            rebooted: Some(true),
        })
    }

    /// A plausible result for `step`, with or without a change that needs
    /// a reboot.
    fn result_for(step: Step, change: bool) -> StepResult {
        match step {
            Step::AgentUpgrade => StepResult::AgentUpgrade(crate::agent_upgrade::UpgradeOutcome {
                running: "0.1.0".into(),
                action: if change {
                    crate::agent_upgrade::UpgradeAction::Upgraded
                } else {
                    crate::agent_upgrade::UpgradeAction::Current
                },
                to: change.then(|| "0.2.0".into()),
                url: None,
                newer_major: None,
                binary: "/opt/bin/node-bootstrap".into(),
            }),
            Step::Assets => assets(),
            Step::ClusterVersion => version(),
            Step::Runtime => runtime(Runtime::Docker),
            Step::OsUpdate if change => os_update_to("1576.4.0"),
            Step::OsUpdate => no_os_update(),
            Step::DockerAddon => addon("1.12", "17.03", change, change),
            Step::Reboot => rebooted(),
            Step::KubeletSysext => kubelet_sysext(),
            Step::Containerd => containerd(),
            Step::KubeletEnv => kubelet_env(),
            Step::Bootkube | Step::Tectonic => unreachable!("not a flow step"),
        }
    }

    fn kubelet_sysext() -> StepResult {
        StepResult::KubeletSysext(crate::kubelet_sysext::KubeletSysextRecord {
            cluster_version: "v1.20.2".into(),
            version: "v1.20.2".into(),
            rule: crate::kubelet_sysext::choice::Rule::Exact,
            installed: crate::sysext::package::Installed::example(
                "/opt/extensions/kubernetes/kubernetes-v1.20.2-x86-64.raw",
                "https://mirror/kubernetes_v1.20.2_any_x86-64.raw",
            ),
        })
    }

    fn sysext(boot: &str) -> Facts {
        Facts {
            kubelet_sysext_enabled: true,
            ..facts(boot)
        }
    }

    #[test]
    fn the_kubelet_sysext_comes_after_the_reboot_and_before_kubelet_env() {
        let mut j = journal_through_addon(B1, os_update_to("1576.4.0"), same_docker());
        assert!(matches!(
            next_action(&j, &sysext(B1)),
            Action::Reboot { .. }
        ));
        j.begin(B1, Step::Reboot);
        // Next boot: the reboot and the OS update are confirmed first.
        assert_eq!(next_action(&j, &sysext(B2)), Action::Run(Step::Assets));
        done(&mut j, B2, Step::Assets, assets());
        assert_eq!(
            next_action(&j, &sysext(B2)),
            Action::Confirm(Step::OsUpdate)
        );
        confirm_in(&mut j, Step::OsUpdate, B2);
        assert_eq!(next_action(&j, &sysext(B2)), Action::Confirm(Step::Reboot));
        done(&mut j, B2, Step::Reboot, rebooted());
        assert_eq!(
            next_action(&j, &sysext(B2)),
            Action::Run(Step::KubeletSysext)
        );
        done(&mut j, B2, Step::KubeletSysext, kubelet_sysext());
        assert_eq!(next_action(&j, &sysext(B2)), Action::Run(Step::KubeletEnv));
        // Without the sysext backend the step is never asked for.
        assert_eq!(next_action(&j, &facts(B2)), Action::Run(Step::KubeletEnv));
    }

    #[test]
    fn the_kubelet_sysext_runs_again_in_a_later_boot_and_a_failure_is_retried() {
        let mut j = journal_through_addon(B1, no_os_update(), same_docker());
        done(&mut j, B1, Step::KubeletSysext, kubelet_sysext());
        assert_eq!(next_action(&j, &sysext(B1)), Action::Run(Step::KubeletEnv));
        // Power cut before kubelet.env: the next boot checks the merge again.
        done(&mut j, B2, Step::Assets, assets());
        assert_eq!(
            next_action(&j, &sysext(B2)),
            Action::Run(Step::KubeletSysext)
        );
        j.begin(B2, Step::KubeletSysext);
        j.fail(B2, Step::KubeletSysext, &Error::refused("skew"), vec![]);
        assert_eq!(
            next_action(&j, &sysext(B2)),
            Action::Run(Step::KubeletSysext)
        );
    }

    /// Marks a step that needed a reboot as confirmed in `boot`.
    fn confirm_in(j: &mut StateJournal, step: Step, boot: &str) {
        let rec = j.step(step).unwrap();
        let owner = rec.boot_id.clone();
        let mut r = rec.result.clone().unwrap();
        match &mut r {
            StepResult::OsUpdate(c) => c.confirmed_in_boot = Some(boot.into()),
            StepResult::DockerAddon(c) => c.confirmed_in_boot = Some(boot.into()),
            other => panic!("{step} is never confirmed: {other:?}"),
        }
        j.finish(&owner, step, r);
    }

    /// Plays the flow on a journal the way the driver would, returning the
    /// actions taken until `Done` or a reboot.
    fn journal_through_addon(boot: &str, os: StepResult, addon: StepResult) -> StateJournal {
        let mut j = StateJournal::default();
        done(&mut j, boot, Step::Assets, assets());
        done(&mut j, boot, Step::ClusterVersion, version());
        done(&mut j, boot, Step::Runtime, runtime(Runtime::Docker));
        done(&mut j, boot, Step::OsUpdate, os);
        done(&mut j, boot, Step::DockerAddon, addon);
        j
    }

    #[test]
    fn fresh_node_starts_with_assets_then_each_step_in_order() {
        let mut j = StateJournal::default();
        let f = facts(B1);
        let mut seen = Vec::new();
        for step in [
            Step::Assets,
            Step::ClusterVersion,
            Step::Runtime,
            Step::OsUpdate,
            Step::DockerAddon,
        ] {
            let a = next_action(&j, &f);
            assert_eq!(a, Action::Run(step));
            seen.push(step);
            let result = match step {
                Step::DockerAddon => same_docker(),
                s => result_for(s, false),
            };
            done(&mut j, B1, step, result);
        }
        assert_eq!(
            next_action(&j, &f),
            Action::Run(Step::KubeletEnv),
            "no reboot when nothing changed"
        );
        done(&mut j, B1, Step::KubeletEnv, kubelet_env());
        assert_eq!(
            next_action(
                &j,
                &Facts {
                    kubelet_env_present: true,
                    ..f
                }
            ),
            Action::Done
        );
    }

    #[test]
    fn containerd_replaces_the_docker_addon_and_is_proved_in_every_boot_before_kubelet_env() {
        let mut j = StateJournal::default();
        done(&mut j, B1, Step::Assets, assets());
        done(&mut j, B1, Step::ClusterVersion, version());
        assert_eq!(next_action(&j, &facts(B1)), Action::Run(Step::Runtime));
        done(&mut j, B1, Step::Runtime, runtime(Runtime::Containerd));
        assert_eq!(next_action(&j, &facts(B1)), Action::Run(Step::OsUpdate));
        done(&mut j, B1, Step::OsUpdate, os_update_to("3815.2.0"));
        // No docker addon with containerd, even with the addon enabled.
        assert!(matches!(next_action(&j, &facts(B1)), Action::Reboot { .. }));
        j.begin(B1, Step::Reboot);
        let f = facts(B2);
        done(&mut j, B2, Step::Assets, assets());
        confirm_in(&mut j, Step::OsUpdate, B2);
        assert_eq!(next_action(&j, &f), Action::Confirm(Step::Reboot));
        done(&mut j, B2, Step::Reboot, rebooted());
        assert_eq!(next_action(&j, &f), Action::Run(Step::Containerd));
        done(&mut j, B2, Step::Containerd, containerd());
        assert_eq!(next_action(&j, &f), Action::Run(Step::KubeletEnv));
        // kubelet.env gone in a later boot: containerd is proved again first.
        done(&mut j, B2, Step::KubeletEnv, kubelet_env());
        let b3 = facts("boot-3");
        done(&mut j, "boot-3", Step::Assets, assets());
        assert_eq!(next_action(&j, &b3), Action::Run(Step::Containerd));
    }

    #[test]
    fn docker_nodes_never_run_the_containerd_step() {
        let j = journal_through_addon(B1, no_os_update(), same_docker());
        assert_eq!(next_action(&j, &facts(B1)), Action::Run(Step::KubeletEnv));
    }

    #[test]
    fn disabled_addon_is_skipped() {
        let mut j = StateJournal::default();
        done(&mut j, B1, Step::Assets, assets());
        done(&mut j, B1, Step::ClusterVersion, version());
        done(&mut j, B1, Step::Runtime, runtime(Runtime::Docker));
        done(
            &mut j,
            B1,
            Step::OsUpdate,
            os(OsOutcome::Disabled, "1520.3.0", None),
        );
        let f = Facts {
            addon_enabled: false,
            ..facts(B1)
        };
        assert_eq!(next_action(&j, &f), Action::Run(Step::KubeletEnv));
    }

    #[test]
    fn os_update_needing_reboot_reboots_before_kubelet_env() {
        let j = journal_through_addon(B1, os_update_to("1576.4.0"), same_docker());
        assert_eq!(
            next_action(&j, &facts(B1)),
            Action::Reboot {
                reason: "os 1520.3.0 -> 1576.4.0".into(),
                wipe_docker_datadir: false
            }
        );
    }

    #[test]
    fn docker_change_reboots_and_wipes_datadir() {
        let j = journal_through_addon(B1, no_os_update(), addon("1.12", "17.03", true, true));
        assert_eq!(
            next_action(&j, &facts(B1)),
            Action::Reboot {
                reason: "docker 1.12 -> 17.03".into(),
                wipe_docker_datadir: true
            }
        );
    }

    #[test]
    fn both_changes_give_one_reboot_with_both_reasons() {
        let j = journal_through_addon(
            B1,
            os_update_to("1576.4.0"),
            addon("1.12", "17.03", true, true),
        );
        assert_eq!(
            next_action(&j, &facts(B1)),
            Action::Reboot {
                reason: "os 1520.3.0 -> 1576.4.0; docker 1.12 -> 17.03".into(),
                wipe_docker_datadir: true
            }
        );
    }

    #[test]
    fn a_reboot_that_did_not_happen_is_requested_again_in_the_same_boot() {
        let mut j = journal_through_addon(B1, os_update_to("1576.4.0"), same_docker());
        j.begin(B1, Step::Reboot);
        j.fail(
            B1,
            Step::Reboot,
            &Error::retryable("reboot did not happen within 300s"),
            vec![],
        );
        assert!(matches!(next_action(&j, &facts(B1)), Action::Reboot { .. }));
        // Same when the process was restarted while the reboot was pending.
        j.begin(B1, Step::Reboot);
        assert!(matches!(next_action(&j, &facts(B1)), Action::Reboot { .. }));
    }

    #[test]
    fn after_the_reboot_the_reboot_then_each_change_is_confirmed_then_kubelet_env() {
        let mut j = journal_through_addon(
            B1,
            os_update_to("1576.4.0"),
            addon("1.12", "17.03", true, false),
        );
        j.begin(B1, Step::Reboot);
        let f = facts(B2);
        // Assets are re-checked first in the new boot.
        assert_eq!(next_action(&j, &f), Action::Run(Step::Assets));
        done(&mut j, B2, Step::Assets, assets());
        assert_eq!(next_action(&j, &f), Action::Confirm(Step::OsUpdate));
        confirm_in(&mut j, Step::OsUpdate, B2);
        assert_eq!(next_action(&j, &f), Action::Confirm(Step::DockerAddon));
        confirm_in(&mut j, Step::DockerAddon, B2);
        assert_eq!(next_action(&j, &f), Action::Confirm(Step::Reboot));
        done(&mut j, B2, Step::Reboot, rebooted());
        assert_eq!(next_action(&j, &f), Action::Run(Step::KubeletEnv));
    }

    #[test]
    fn interrupted_steps_are_run_again_in_any_boot() {
        for step in [
            Step::Assets,
            Step::ClusterVersion,
            Step::Runtime,
            Step::OsUpdate,
            Step::DockerAddon,
        ] {
            let mut j = StateJournal::default();
            for earlier in Step::FLOW.iter().take_while(|s| **s != step) {
                done(&mut j, B1, *earlier, result_for(*earlier, false));
            }
            j.begin(B1, step);
            assert_eq!(
                next_action(&j, &facts(B1)),
                Action::Run(step),
                "{step:?} interrupted, same boot"
            );
            assert_eq!(
                next_action(&j, &facts(B2)),
                Action::Run(Step::Assets),
                "{step:?}: assets first after a power loss"
            );
            done(&mut j, B2, Step::Assets, assets());
            if step != Step::Assets {
                assert_eq!(
                    next_action(&j, &facts(B2)),
                    Action::Run(step),
                    "{step:?} interrupted, next boot"
                );
            }
        }
    }

    #[test]
    fn failed_steps_are_retried() {
        let mut j = StateJournal::default();
        done(&mut j, B1, Step::Assets, assets());
        j.begin(B1, Step::ClusterVersion);
        j.fail(
            B1,
            Step::ClusterVersion,
            &Error::retryable("API unreachable"),
            vec![],
        );
        assert_eq!(
            next_action(&j, &facts(B1)),
            Action::Run(Step::ClusterVersion)
        );
    }

    #[test]
    fn cluster_version_from_an_earlier_boot_is_kept() {
        let mut j = StateJournal::default();
        done(&mut j, B1, Step::Assets, assets());
        done(&mut j, B1, Step::ClusterVersion, version());
        done(&mut j, B1, Step::Runtime, runtime(Runtime::Docker));
        done(&mut j, B2, Step::Assets, assets());
        assert_eq!(next_action(&j, &facts(B2)), Action::Run(Step::OsUpdate));
    }

    #[test]
    fn steps_without_change_from_an_earlier_boot_are_not_redone() {
        let mut j = journal_through_addon(B1, no_os_update(), same_docker());
        done(&mut j, B2, Step::Assets, assets());
        assert_eq!(next_action(&j, &facts(B2)), Action::Run(Step::KubeletEnv));
    }

    #[test]
    fn kubelet_env_written_earlier_but_gone_is_rewritten() {
        let mut j = journal_through_addon(B1, no_os_update(), same_docker());
        done(&mut j, B1, Step::KubeletEnv, kubelet_env());
        assert_eq!(next_action(&j, &facts(B1)), Action::Run(Step::KubeletEnv));
        done(&mut j, B2, Step::Assets, assets());
        assert_eq!(next_action(&j, &facts(B2)), Action::Run(Step::KubeletEnv));
    }

    #[test]
    fn a_done_step_whose_result_cannot_be_read_is_found_again() {
        let mut j = journal_through_addon(B1, no_os_update(), same_docker());
        let unreadable = StepResult::Raw(serde_json::json!({"reboot_needed": "yes"}));
        j.finish(B1, Step::DockerAddon, unreadable.clone());
        assert_eq!(next_action(&j, &facts(B1)), Action::Run(Step::DockerAddon));
        j.finish(B1, Step::OsUpdate, unreadable);
        assert_eq!(next_action(&j, &facts(B1)), Action::Run(Step::OsUpdate));
    }

    #[test]
    fn present_kubelet_env_means_done_whatever_the_journal() {
        let j = StateJournal::default();
        assert_eq!(
            next_action(
                &j,
                &Facts {
                    kubelet_env_present: true,
                    ..facts(B1)
                }
            ),
            Action::Done
        );
    }

    #[test]
    fn the_plan_always_terminates() {
        // Executing every action as success reaches Done within a bound, from
        // any starting combination of step states, with and without reboots.
        let states = [
            None,
            Some(StepStatus::Running),
            Some(StepStatus::Done),
            Some(StepStatus::Failed),
        ];
        let mut combos = 0;
        for a in states {
            for b in states {
                for c in states {
                    for d in states {
                        combos += 1;
                        let mut j = StateJournal::default();
                        for (step, st) in [
                            (Step::Assets, a),
                            (Step::ClusterVersion, b),
                            (Step::OsUpdate, c),
                            (Step::DockerAddon, d),
                        ] {
                            if let Some(st) = st {
                                j.begin(B1, step);
                                match st {
                                    StepStatus::Done => j.finish(B1, step, result_for(step, true)),
                                    StepStatus::Failed => {
                                        j.fail(B1, step, &Error::retryable("x"), vec![])
                                    }
                                    StepStatus::Running => {}
                                }
                            }
                        }
                        let mut boot = B2.to_string();
                        let mut env = false;
                        let mut steps = 0;
                        loop {
                            steps += 1;
                            assert!(steps < 40, "no progress from {a:?} {b:?} {c:?} {d:?}");
                            let f = Facts {
                                boot_id: boot.clone(),
                                agent_upgrade_enabled: true,
                                addon_enabled: true,
                                kubelet_sysext_enabled: true,
                                kubelet_env_present: env,
                            };
                            match next_action(&j, &f) {
                                Action::Done => break,
                                Action::Run(Step::KubeletEnv) => {
                                    done(&mut j, &boot, Step::KubeletEnv, kubelet_env());
                                    env = true;
                                }
                                Action::Run(s) => done(&mut j, &boot, s, result_for(s, false)),
                                Action::Confirm(Step::Reboot) => {
                                    done(&mut j, &boot, Step::Reboot, rebooted())
                                }
                                Action::Confirm(s) => confirm_in(&mut j, s, &boot),
                                Action::Reboot { .. } => {
                                    j.begin(&boot, Step::Reboot);
                                    boot = format!("{boot}x");
                                }
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(combos, 256);
    }
}
