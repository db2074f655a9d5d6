//! The pure decision: given the state journal, this boot's id and what the
//! node looks like, what `run` does next. No I/O here; the driver executes
//! the answer, records it in the journal, and asks again.
//!
//! Rules, per step (in flow order):
//! - a step done in this boot is not redone;
//! - `assets` is re-checked after every reboot (cheap, and the result lives
//!   on disk, where it could have gone);
//! - `cluster-version` done in any boot is kept (later decisions were made for it);
//! - `os-update` and `docker-addon` done in an earlier boot with a change that
//!   needed a reboot are *confirmed* (the node now runs the new OS / docker);
//!   done without a change, they are kept;
//! - a `reboot` requested in an earlier boot (still running, or failed
//!   because it came later than we waited) means it happened: it is confirmed;
//! - a step running (interrupted) or failed is run again;
//! - a reboot is requested when a step done in *this* boot needs one; and
//!   kubelet.env, the commit point, is written only when none is pending.

use crate::journal::{StateJournal, StepRecord, StepStatus};
use serde::{Deserialize, Serialize};

/// The steps of `run`, in order. Their names are the state journal's keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    Assets,
    ClusterVersion,
    OsUpdate,
    DockerAddon,
    Reboot,
    KubeletEnv,
}

impl Step {
    pub const ALL: [Step; 6] = [
        Step::Assets,
        Step::ClusterVersion,
        Step::OsUpdate,
        Step::DockerAddon,
        Step::Reboot,
        Step::KubeletEnv,
    ];

    /// The journal key (`cluster-version`, …).
    pub const fn name(self) -> &'static str {
        match self {
            Step::Assets => "assets",
            Step::ClusterVersion => "cluster-version",
            Step::OsUpdate => "os-update",
            Step::DockerAddon => "docker-addon",
            Step::Reboot => "reboot",
            Step::KubeletEnv => "kubelet-env",
        }
    }
}

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
    /// Whether OS updates are asked for (`os_update.enabled`). When off, the
    /// os-update step still reads whether a reboot is already pending.
    pub os_update_enabled: bool,
    pub addon_enabled: bool,
    /// `/etc/kubernetes/kubelet.env` exists.
    pub kubelet_env_present: bool,
}

/// Whether a done step's result says it needs a reboot to take effect.
/// Results follow the shapes the driver records: os-update
/// `{"outcome": "reboot-pending"}`, docker-addon `{"reboot_needed": true}`.
pub fn needs_reboot(step: Step, rec: &StepRecord) -> bool {
    let Some(result) = &rec.result else {
        return false;
    };
    match step {
        Step::OsUpdate => result.get("outcome").and_then(|v| v.as_str()) == Some("reboot-pending"),
        Step::DockerAddon => result.get("reboot_needed").and_then(|v| v.as_bool()) == Some(true),
        _ => false,
    }
}

/// Whether a step's effect was confirmed after its reboot.
pub fn confirmed(rec: &StepRecord) -> bool {
    rec.result
        .as_ref()
        .and_then(|r| r.get("confirmed_in_boot"))
        .is_some()
}

/// A human reason for the reboot, e.g. "os 1520.3.0 -> 1576.4.0; docker 1.12 -> 17.03".
fn reboot_reason(journal: &StateJournal, boot_id: &str) -> Option<(String, bool)> {
    let mut reasons = Vec::new();
    let mut wipe = false;
    let this_boot = |step: Step| {
        journal.step(step.name()).filter(|r| {
            r.status == StepStatus::Done && r.boot_id == boot_id && needs_reboot(step, r)
        })
    };
    if let Some(r) = this_boot(Step::OsUpdate) {
        let res = r.result.as_ref().expect("needs_reboot implies a result");
        let from = res
            .get("current_version")
            .and_then(|v| v.as_str())
            .unwrap_or("current");
        let to = res
            .get("new_version")
            .and_then(|v| v.as_str())
            .unwrap_or("new version");
        reasons.push(format!("os {from} -> {to}"));
    }
    if let Some(r) = this_boot(Step::DockerAddon) {
        let res = r.result.as_ref().expect("needs_reboot implies a result");
        let from = res
            .get("docker_running")
            .and_then(|v| v.as_str())
            .unwrap_or("none");
        let to = res
            .get("docker_next")
            .and_then(|v| v.as_str())
            .unwrap_or("?");
        reasons.push(format!("docker {from} -> {to}"));
        wipe = res
            .get("wipe_docker_datadir")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
    }
    (!reasons.is_empty()).then(|| (reasons.join("; "), wipe))
}

/// The next action. See the module docs for the rules.
pub fn next_action(journal: &StateJournal, facts: &Facts) -> Action {
    if facts.kubelet_env_present {
        return Action::Done;
    }
    let boot = facts.boot_id.as_str();
    for step in Step::ALL {
        let rec = journal.step(step.name());
        let done_here = rec.is_some_and(|r| r.status == StepStatus::Done && r.boot_id == boot);
        if done_here && step != Step::Reboot {
            continue;
        }
        match step {
            Step::DockerAddon if !facts.addon_enabled => continue,
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
        match r.status {
            StepStatus::Running | StepStatus::Failed => return Action::Run(step),
            StepStatus::Done => {
                // Done in an earlier boot.
                match step {
                    Step::Assets => return Action::Run(step),
                    Step::ClusterVersion => continue,
                    Step::OsUpdate | Step::DockerAddon => {
                        if needs_reboot(step, r) && !confirmed(r) {
                            return Action::Confirm(step);
                        }
                        continue;
                    }
                    Step::KubeletEnv => return Action::Run(step),
                    Step::Reboot => unreachable!("handled above"),
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
    use crate::error::Error;
    use serde_json::json;

    const B1: &str = "boot-1";
    const B2: &str = "boot-2";

    fn facts(boot: &str) -> Facts {
        Facts {
            boot_id: boot.into(),
            os_update_enabled: true,
            addon_enabled: true,
            kubelet_env_present: false,
        }
    }

    fn done(j: &mut StateJournal, boot: &str, step: Step, result: serde_json::Value) {
        j.begin(boot, step.name());
        j.finish(boot, step.name(), result);
    }

    /// Plays the flow on a journal the way the driver would, returning the
    /// actions taken until `Done` or a reboot.
    fn journal_through_addon(
        boot: &str,
        os: serde_json::Value,
        addon: serde_json::Value,
    ) -> StateJournal {
        let mut j = StateJournal::default();
        done(&mut j, boot, Step::Assets, json!({}));
        done(
            &mut j,
            boot,
            Step::ClusterVersion,
            json!({"version": "v1.9.6+coreos.0"}),
        );
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
            Step::OsUpdate,
            Step::DockerAddon,
        ] {
            let a = next_action(&j, &f);
            assert_eq!(a, Action::Run(step));
            seen.push(step);
            let result = match step {
                Step::OsUpdate => json!({"outcome": "no-update"}),
                Step::DockerAddon => {
                    json!({"reboot_needed": false, "docker_next": "17.03", "docker_running": "17.03"})
                }
                _ => json!({}),
            };
            done(&mut j, B1, step, result);
        }
        assert_eq!(
            next_action(&j, &f),
            Action::Run(Step::KubeletEnv),
            "no reboot when nothing changed"
        );
        done(&mut j, B1, Step::KubeletEnv, json!({}));
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
    fn disabled_addon_is_skipped() {
        let mut j = StateJournal::default();
        done(&mut j, B1, Step::Assets, json!({}));
        done(&mut j, B1, Step::ClusterVersion, json!({}));
        done(&mut j, B1, Step::OsUpdate, json!({"outcome": "disabled"}));
        let f = Facts {
            addon_enabled: false,
            ..facts(B1)
        };
        assert_eq!(next_action(&j, &f), Action::Run(Step::KubeletEnv));
    }

    #[test]
    fn os_update_needing_reboot_reboots_before_kubelet_env() {
        let j = journal_through_addon(
            B1,
            json!({"outcome": "reboot-pending", "current_version": "1520.3.0", "new_version": "1576.4.0"}),
            json!({"reboot_needed": false, "docker_next": "17.03", "docker_running": "17.03"}),
        );
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
        let j = journal_through_addon(
            B1,
            json!({"outcome": "no-update"}),
            json!({"reboot_needed": true, "docker_running": "1.12", "docker_next": "17.03", "wipe_docker_datadir": true}),
        );
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
            json!({"outcome": "reboot-pending", "current_version": "1520.3.0", "new_version": "1576.4.0"}),
            json!({"reboot_needed": true, "docker_running": "1.12", "docker_next": "17.03", "wipe_docker_datadir": true}),
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
        let mut j = journal_through_addon(
            B1,
            json!({"outcome": "reboot-pending", "new_version": "1576.4.0"}),
            json!({"reboot_needed": false}),
        );
        j.begin(B1, Step::Reboot.name());
        j.fail(
            B1,
            Step::Reboot.name(),
            &Error::retryable("reboot did not happen within 300s"),
            vec![],
        );
        assert!(matches!(next_action(&j, &facts(B1)), Action::Reboot { .. }));
        // Same when the process was restarted while the reboot was pending.
        j.begin(B1, Step::Reboot.name());
        assert!(matches!(next_action(&j, &facts(B1)), Action::Reboot { .. }));
    }

    #[test]
    fn after_the_reboot_the_reboot_then_each_change_is_confirmed_then_kubelet_env() {
        let mut j = journal_through_addon(
            B1,
            json!({"outcome": "reboot-pending", "new_version": "1576.4.0"}),
            json!({"reboot_needed": true, "docker_next": "17.03"}),
        );
        j.begin(B1, Step::Reboot.name());
        let f = facts(B2);
        // Assets are re-checked first in the new boot.
        assert_eq!(next_action(&j, &f), Action::Run(Step::Assets));
        done(&mut j, B2, Step::Assets, json!({}));
        assert_eq!(next_action(&j, &f), Action::Confirm(Step::OsUpdate));
        let mut os = j.step("os-update").unwrap().result.clone().unwrap();
        os["confirmed_in_boot"] = json!(B2);
        j.finish(B1, "os-update", os);
        assert_eq!(next_action(&j, &f), Action::Confirm(Step::DockerAddon));
        let mut ad = j.step("docker-addon").unwrap().result.clone().unwrap();
        ad["confirmed_in_boot"] = json!(B2);
        j.finish(B1, "docker-addon", ad);
        assert_eq!(next_action(&j, &f), Action::Confirm(Step::Reboot));
        done(&mut j, B2, Step::Reboot, json!({"rebooted": true}));
        assert_eq!(next_action(&j, &f), Action::Run(Step::KubeletEnv));
    }

    #[test]
    fn interrupted_steps_are_run_again_in_any_boot() {
        for step in [
            Step::Assets,
            Step::ClusterVersion,
            Step::OsUpdate,
            Step::DockerAddon,
        ] {
            let mut j = StateJournal::default();
            for earlier in Step::ALL.iter().take_while(|s| **s != step) {
                done(
                    &mut j,
                    B1,
                    *earlier,
                    json!({"outcome": "no-update", "reboot_needed": false}),
                );
            }
            j.begin(B1, step.name());
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
            done(&mut j, B2, Step::Assets, json!({}));
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
        done(&mut j, B1, Step::Assets, json!({}));
        j.begin(B1, "cluster-version");
        j.fail(
            B1,
            "cluster-version",
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
        done(&mut j, B1, Step::Assets, json!({}));
        done(
            &mut j,
            B1,
            Step::ClusterVersion,
            json!({"version": "v1.9.6+coreos.0"}),
        );
        done(&mut j, B2, Step::Assets, json!({}));
        assert_eq!(next_action(&j, &facts(B2)), Action::Run(Step::OsUpdate));
    }

    #[test]
    fn steps_without_change_from_an_earlier_boot_are_not_redone() {
        let mut j = journal_through_addon(
            B1,
            json!({"outcome": "no-update"}),
            json!({"reboot_needed": false}),
        );
        done(&mut j, B2, Step::Assets, json!({}));
        assert_eq!(next_action(&j, &facts(B2)), Action::Run(Step::KubeletEnv));
    }

    #[test]
    fn kubelet_env_written_earlier_but_gone_is_rewritten() {
        let mut j = journal_through_addon(
            B1,
            json!({"outcome": "no-update"}),
            json!({"reboot_needed": false}),
        );
        done(&mut j, B1, Step::KubeletEnv, json!({}));
        assert_eq!(next_action(&j, &facts(B1)), Action::Run(Step::KubeletEnv));
        done(&mut j, B2, Step::Assets, json!({}));
        assert_eq!(next_action(&j, &facts(B2)), Action::Run(Step::KubeletEnv));
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
                                j.begin(B1, step.name());
                                match st {
                                    StepStatus::Done => j.finish(
                                        B1,
                                        step.name(),
                                        json!({"outcome": "reboot-pending", "reboot_needed": true}),
                                    ),
                                    StepStatus::Failed => {
                                        j.fail(B1, step.name(), &Error::retryable("x"), vec![])
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
                                os_update_enabled: true,
                                addon_enabled: true,
                                kubelet_env_present: env,
                            };
                            match next_action(&j, &f) {
                                Action::Done => break,
                                Action::Run(Step::KubeletEnv) => {
                                    done(&mut j, &boot, Step::KubeletEnv, json!({}));
                                    env = true;
                                }
                                Action::Run(s) => done(
                                    &mut j,
                                    &boot,
                                    s,
                                    json!({"outcome": "no-update", "reboot_needed": false}),
                                ),
                                Action::Confirm(Step::Reboot) => {
                                    done(&mut j, &boot, Step::Reboot, json!({}))
                                }
                                Action::Confirm(s) => {
                                    let mut r = j.step(s.name()).unwrap().result.clone().unwrap();
                                    r["confirmed_in_boot"] = json!(boot);
                                    let owner = j.step(s.name()).unwrap().boot_id.clone();
                                    j.finish(&owner, s.name(), r);
                                }
                                Action::Reboot { .. } => {
                                    j.begin(&boot, Step::Reboot.name());
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
