//! The driver's tests: a node in memory ([`FakeNode`]) whose seams do
//! what each test scripts, and the journal in a temp dir.

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
            verified: None,
            advice: None,
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
    assert!(
        err.to_string().contains(
            "the OS update to 1576.4.0 did not take effect: after the reboot the node runs 1520.3.0"
        ),
        "{err}"
    );
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
