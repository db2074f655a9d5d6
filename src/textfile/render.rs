//! The textfile itself: Prometheus' text exposition format (0.0.4), as
//! node_exporter's textfile collector reads it, rendered from the state
//! journal and the [`MetricsState`] by a pure function. Every metric is
//! listed in the module docs of [`super`]. Step names come from the
//! journal's records (ordered as the flow runs them), states from
//! [`StepStatus::ALL`]; no label value is a URL, a path or an error text.

use super::state::{MetricsState, parse_rfc3339};
use crate::journal::{StateJournal, Step, StepRecord, StepStatus};
use crate::metrics::record::Remote;
use std::fmt::Write as _;

/// Everything one rendering reads.
pub struct Snapshot<'a> {
    pub version: &'a str,
    pub role: &'a str,
    pub state: &'a MetricsState,
    /// `None` when there is none yet (or it cannot be read).
    pub journal: Option<&'a StateJournal>,
    pub kubelet_env_present: bool,
}

/// The file's text.
pub fn render(s: &Snapshot) -> String {
    let mut out = Out::default();
    out.family(
        "node_bootstrap_info",
        "The agent's version and the node's role (always 1).",
        Kind::Gauge,
        vec![(
            vec![
                ("version", s.version.to_string()),
                ("role", s.role.to_string()),
            ],
            1.0,
        )],
    );
    let st = s.state;
    out.family(
        "node_bootstrap_first_start_timestamp_seconds",
        "When the agent first started on this node (the current bootstrap's first run), unix time.",
        Kind::Gauge,
        st.bootstrap_started_at
            .map(|t| (vec![], t))
            .into_iter()
            .collect(),
    );
    let env_at = st.kubelet_env_at.filter(|_| s.kubelet_env_present);
    out.family(
        "node_bootstrap_kubelet_env_timestamp_seconds",
        "When the agent wrote kubelet.env, unix time (absent until it did, or once kubelet.env is removed).",
        Kind::Gauge,
        env_at.map(|t| (vec![], t)).into_iter().collect(),
    );
    out.family(
        "node_bootstrap_time_to_kubelet_env_seconds",
        "Seconds from the agent's first start on this node to kubelet.env, across reboots.",
        Kind::Gauge,
        st.time_to_kubelet_env()
            .filter(|_| s.kubelet_env_present)
            .map(|t| (vec![], t))
            .into_iter()
            .collect(),
    );
    join(&mut out, st, s.kubelet_env_present);
    if let Some(j) = s.journal {
        steps(&mut out, j);
    }
    commands(&mut out, st);
    out.family(
        "node_bootstrap_reboots_requested_total",
        "Reboots the agent asked for.",
        Kind::Counter,
        vec![(vec![], st.reboots_requested as f64)],
    );
    out.family(
        "node_bootstrap_retries_total",
        "Failed attempts against an outside service that the agent tries again, by cause.",
        Kind::Counter,
        by_remote(&st.retries, "cause"),
    );
    out.family(
        "node_bootstrap_fetched_bytes_total",
        "Bytes the agent downloaded, by source.",
        Kind::Counter,
        by_remote(&st.fetched_bytes, "source"),
    );
    out.text
}

type Labels = Vec<(&'static str, String)>;
type Samples = Vec<(Labels, f64)>;

/// Every known remote (0 if never counted), then any other the file holds.
fn by_remote(m: &std::collections::BTreeMap<String, u64>, label: &'static str) -> Samples {
    let known = Remote::ALL.map(Remote::name);
    known
        .iter()
        .map(|k| (k.to_string(), m.get(*k).copied().unwrap_or(0)))
        .chain(
            m.iter()
                .filter(|(k, _)| !known.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), *v)),
        )
        .map(|(k, v)| (vec![(label, k)], v as f64))
        .collect()
}

/// The join as last seen after kubelet.env (nothing before it, nothing
/// once kubelet.env is gone): its state (every state a series, 1 for the
/// one it is in) and when the node was first Ready.
fn join(out: &mut Out, st: &MetricsState, kubelet_env_present: bool) {
    use crate::join::{assess::JoinState, observe::UNKNOWN};
    let Some(current) = st.join_state.as_deref().filter(|_| kubelet_env_present) else {
        return;
    };
    let mut names: Vec<&str> = JoinState::NAMES.to_vec();
    names.push(UNKNOWN);
    if !names.contains(&current) {
        names.push(current);
    }
    out.family(
        "node_bootstrap_join_state",
        "Where the node stands in the cluster, as the agent last saw it after kubelet.env (1 for its state): certificate request, registered, Ready.",
        Kind::Gauge,
        names
            .iter()
            .map(|n| {
                (
                    vec![("state", n.to_string())],
                    f64::from(u8::from(*n == current)),
                )
            })
            .collect(),
    );
    out.family(
        "node_bootstrap_join_last_check_timestamp_seconds",
        "When the agent last looked at the node's join, unix time.",
        Kind::Gauge,
        st.join_observed_at
            .map(|t| (vec![], t))
            .into_iter()
            .collect(),
    );
    out.family(
        "node_bootstrap_node_ready_timestamp_seconds",
        "When the agent first saw the node Ready in the cluster, unix time (absent until then).",
        Kind::Gauge,
        st.node_ready_at.map(|t| (vec![], t)).into_iter().collect(),
    );
    out.family(
        "node_bootstrap_time_to_node_ready_seconds",
        "Seconds from the agent's first start on this node to the node Ready in the cluster.",
        Kind::Gauge,
        st.time_to_node_ready()
            .map(|t| (vec![], t))
            .into_iter()
            .collect(),
    );
}

/// The journal's steps in flow order (then helpers, then steps this agent
/// does not know, by name).
fn ordered(j: &StateJournal) -> Vec<(&str, &StepRecord)> {
    let known: Vec<Step> = Step::FLOW.into_iter().chain(Step::HELPERS).collect();
    let mut v: Vec<(&str, &StepRecord)> = j.steps.iter().map(|(n, r)| (n.as_str(), r)).collect();
    v.sort_by_key(|(n, _)| {
        let pos = Step::from_name(n)
            .and_then(|s| known.iter().position(|k| *k == s))
            .unwrap_or(usize::MAX);
        (pos, *n)
    });
    v
}

/// When a step's last finished attempt started and ended: from the
/// journal's history (a step confirmed after a reboot ends when it
/// finished before the reboot, not at the confirmation), else from its
/// record.
fn last_run(j: &StateJournal, name: &str, rec: &StepRecord) -> Option<(f64, f64)> {
    let mut open = None;
    let mut last = None;
    for e in j.history.iter().filter(|e| e.step == name) {
        let Some(at) = parse_rfc3339(&e.at) else {
            continue;
        };
        match e.event {
            StepStatus::Running => open = Some(at),
            StepStatus::Done | StepStatus::Failed => {
                if let Some(start) = open.take() {
                    last = Some((start, at));
                }
            }
        }
    }
    last.or_else(|| {
        if rec.status == StepStatus::Running {
            return None;
        }
        Some((
            parse_rfc3339(&rec.started_at)?,
            parse_rfc3339(rec.ended_at.as_deref()?)?,
        ))
    })
}

fn steps(out: &mut Out, j: &StateJournal) {
    let steps = ordered(j);
    let step = |n: &str| vec![("step", n.to_string())];
    let mut state = Vec::new();
    let mut attempts = Vec::new();
    let mut started = Vec::new();
    let mut ended = Vec::new();
    let mut duration = Vec::new();
    let mut failure = Vec::new();
    for (name, rec) in &steps {
        for s in StepStatus::ALL {
            let mut l = step(name);
            l.push(("state", s.name().to_string()));
            state.push((l, f64::from(u8::from(rec.status == s))));
        }
        attempts.push((step(name), f64::from(rec.attempts)));
        if let Some(t) = parse_rfc3339(&rec.started_at) {
            started.push((step(name), t));
        }
        if let Some((start, end)) = last_run(j, name, rec) {
            ended.push((step(name), end));
            duration.push((step(name), (end - start).max(0.0)));
        }
        if let (StepStatus::Failed, Some(class)) = (rec.status, rec.error_class) {
            let mut l = step(name);
            l.push(("class", class.name().to_string()));
            failure.push((l, 1.0));
        }
    }
    out.family(
        "node_bootstrap_step_state",
        "Each step's state in the state journal: 1 for the state it is in.",
        Kind::Gauge,
        state,
    );
    out.family(
        "node_bootstrap_step_attempts_total",
        "Times each step was started, across restarts and reboots.",
        Kind::Counter,
        attempts,
    );
    out.family(
        "node_bootstrap_step_last_start_timestamp_seconds",
        "When each step's latest attempt started, unix time (whole seconds).",
        Kind::Gauge,
        started,
    );
    out.family(
        "node_bootstrap_step_last_end_timestamp_seconds",
        "When each step's last finished attempt ended, unix time (whole seconds).",
        Kind::Gauge,
        ended,
    );
    out.family(
        "node_bootstrap_step_last_duration_seconds",
        "How long each step's last finished attempt took (whole seconds, as the state journal records them).",
        Kind::Gauge,
        duration,
    );
    out.family(
        "node_bootstrap_step_failure_info",
        "The error class of each step that failed last (1); exit codes by class: README \"Exit codes\".",
        Kind::Gauge,
        failure,
    );
}

fn commands(out: &mut Out, st: &MetricsState) {
    let cmd = |c: &str| vec![("command", c.to_string())];
    let runs = st
        .runs
        .iter()
        .flat_map(|(c, results)| {
            results.iter().map(move |(r, n)| {
                let mut l = cmd(c);
                l.push(("result", r.clone()));
                (l, *n as f64)
            })
        })
        .collect();
    out.family(
        "node_bootstrap_runs_total",
        "Commands run (run, helper-*, upgrade, assets-pull, status-wait), by result: success, an error class, a status verdict, reboot or handover.",
        Kind::Counter,
        runs,
    );
    let mut result = Vec::new();
    let mut exit = Vec::new();
    let mut end = Vec::new();
    let mut duration = Vec::new();
    for (c, last) in &st.last {
        let mut l = cmd(c);
        l.push(("result", last.result.clone()));
        result.push((l, 1.0));
        if let Some(code) = last.exit_code {
            exit.push((cmd(c), f64::from(code)));
        }
        end.push((cmd(c), last.ended_at));
        duration.push((cmd(c), (last.ended_at - last.started_at).max(0.0)));
    }
    out.family(
        "node_bootstrap_last_result",
        "How each command's last run ended (1 for its result).",
        Kind::Gauge,
        result,
    );
    out.family(
        "node_bootstrap_last_exit_code",
        "Each command's last exit code (absent when the run ended in a reboot or a handover).",
        Kind::Gauge,
        exit,
    );
    out.family(
        "node_bootstrap_last_end_timestamp_seconds",
        "When each command's last run ended, unix time.",
        Kind::Gauge,
        end,
    );
    out.family(
        "node_bootstrap_last_duration_seconds",
        "How long each command's last run took.",
        Kind::Gauge,
        duration,
    );
}

#[derive(Clone, Copy)]
enum Kind {
    Gauge,
    Counter,
}

#[derive(Default)]
struct Out {
    text: String,
}

impl Out {
    /// One metric family; nothing at all when it has no samples.
    fn family(&mut self, name: &str, help: &str, kind: Kind, samples: Samples) {
        if samples.is_empty() {
            return;
        }
        let kind = match kind {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
        };
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
        for (labels, value) in samples {
            self.text.push_str(name);
            if !labels.is_empty() {
                let l: Vec<String> = labels
                    .iter()
                    .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                    .collect();
                let _ = write!(self.text, "{{{}}}", l.join(","));
            }
            let _ = writeln!(self.text, " {}", number(value));
        }
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Error, ErrorClass};
    use crate::journal::Event;

    fn at(secs: i64) -> String {
        time::OffsetDateTime::from_unix_timestamp(secs)
            .unwrap()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap()
    }

    fn event(secs: i64, step: &str, event: StepStatus) -> Event {
        Event {
            at: at(secs),
            boot_id: "b".into(),
            step: step.into(),
            event,
            detail: None,
        }
    }

    /// A journal: assets done, os-update finished before a reboot and
    /// confirmed after it, cluster-version failed twice.
    fn journal() -> StateJournal {
        let mut j = StateJournal::default();
        j.begin("b", Step::OsUpdate);
        j.finish(
            "b",
            Step::OsUpdate,
            crate::journal::StepResult::Raw(serde_json::json!({})),
        );
        j.begin("b", Step::ClusterVersion);
        j.begin("b", Step::ClusterVersion);
        j.fail("b", Step::ClusterVersion, &Error::retryable("x"), vec![]);
        j.begin("b", Step::Assets);
        j.finish(
            "b",
            Step::Assets,
            crate::journal::StepResult::Raw(serde_json::json!({})),
        );
        j.history = vec![
            event(1000, "assets", StepStatus::Running),
            event(1001, "assets", StepStatus::Done),
            event(1010, "os-update", StepStatus::Running),
            event(1070, "os-update", StepStatus::Done),
            event(1300, "os-update", StepStatus::Done), // confirmed after the reboot
            event(1301, "cluster-version", StepStatus::Running),
            event(1321, "cluster-version", StepStatus::Failed),
            event(1331, "cluster-version", StepStatus::Running),
        ];
        j.steps.get_mut("cluster-version").unwrap().status = StepStatus::Running;
        j.steps.get_mut("os-update").unwrap().ended_at = Some(at(1300));
        j
    }

    /// A worker's snapshot of `state`, no journal.
    fn worker(state: &MetricsState, kubelet_env_present: bool) -> Snapshot<'_> {
        Snapshot {
            version: "0.1.0",
            role: "worker",
            state,
            journal: None,
            kubelet_env_present,
        }
    }

    fn snapshot<'a>(state: &'a MetricsState, j: Option<&'a StateJournal>) -> String {
        render(&Snapshot {
            journal: j,
            ..worker(state, false)
        })
    }

    fn lines<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
        text.lines().filter(|l| l.starts_with(prefix)).collect()
    }

    #[test]
    fn steps_come_in_flow_order_with_one_state_set() {
        let j = journal();
        let t = snapshot(&MetricsState::default(), Some(&j));
        assert_eq!(
            lines(&t, "node_bootstrap_step_state{"),
            [
                r#"node_bootstrap_step_state{step="assets",state="running"} 0"#,
                r#"node_bootstrap_step_state{step="assets",state="done"} 1"#,
                r#"node_bootstrap_step_state{step="assets",state="failed"} 0"#,
                r#"node_bootstrap_step_state{step="cluster-version",state="running"} 1"#,
                r#"node_bootstrap_step_state{step="cluster-version",state="done"} 0"#,
                r#"node_bootstrap_step_state{step="cluster-version",state="failed"} 0"#,
                r#"node_bootstrap_step_state{step="os-update",state="running"} 0"#,
                r#"node_bootstrap_step_state{step="os-update",state="done"} 1"#,
                r#"node_bootstrap_step_state{step="os-update",state="failed"} 0"#,
            ]
        );
        assert_eq!(
            lines(&t, "node_bootstrap_step_attempts_total{"),
            [
                r#"node_bootstrap_step_attempts_total{step="assets"} 1"#,
                r#"node_bootstrap_step_attempts_total{step="cluster-version"} 2"#,
                r#"node_bootstrap_step_attempts_total{step="os-update"} 1"#,
            ]
        );
    }

    #[test]
    fn steps_come_in_flow_order_not_in_name_order() {
        // By name: docker-addon, kubelet-env, os-update; by the flow:
        // os-update, docker-addon, kubelet-env.
        let mut j = StateJournal::default();
        for step in [Step::KubeletEnv, Step::DockerAddon, Step::OsUpdate] {
            j.begin("b", step);
        }
        let t = snapshot(&MetricsState::default(), Some(&j));
        assert_eq!(
            lines(&t, "node_bootstrap_step_attempts_total{"),
            [
                r#"node_bootstrap_step_attempts_total{step="os-update"} 1"#,
                r#"node_bootstrap_step_attempts_total{step="docker-addon"} 1"#,
                r#"node_bootstrap_step_attempts_total{step="kubelet-env"} 1"#,
            ]
        );
    }

    #[test]
    fn durations_are_of_the_last_finished_attempt_and_exclude_a_reboot() {
        let j = journal();
        let t = snapshot(&MetricsState::default(), Some(&j));
        assert_eq!(
            lines(&t, "node_bootstrap_step_last_duration_seconds{"),
            [
                r#"node_bootstrap_step_last_duration_seconds{step="assets"} 1"#,
                r#"node_bootstrap_step_last_duration_seconds{step="cluster-version"} 20"#,
                r#"node_bootstrap_step_last_duration_seconds{step="os-update"} 60"#,
            ]
        );
        assert_eq!(
            lines(&t, "node_bootstrap_step_last_end_timestamp_seconds{")[1],
            r#"node_bootstrap_step_last_end_timestamp_seconds{step="cluster-version"} 1321"#
        );
    }

    #[test]
    fn a_failed_step_names_its_class_and_no_error_text() {
        let mut j = StateJournal::default();
        j.begin("b", Step::ClusterVersion);
        j.fail(
            "b",
            Step::ClusterVersion,
            &Error::new(
                ErrorClass::Refused,
                "GET https://10.0.0.1/version: \"skew\"",
            ),
            vec![],
        );
        let t = snapshot(&MetricsState::default(), Some(&j));
        assert_eq!(
            lines(&t, "node_bootstrap_step_failure_info{"),
            [r#"node_bootstrap_step_failure_info{step="cluster-version",class="refused"} 1"#]
        );
        assert!(!t.contains("https://"), "{t}");
    }

    #[test]
    fn kubelet_env_times_show_only_while_it_exists() {
        let st = MetricsState {
            bootstrap_started_at: Some(1000.0),
            kubelet_env_at: Some(1123.5),
            ..Default::default()
        };
        let mut s = worker(&st, true);
        let t = render(&s);
        assert!(
            t.contains("\nnode_bootstrap_time_to_kubelet_env_seconds 123.5\n"),
            "{t}"
        );
        assert!(
            t.contains("\nnode_bootstrap_kubelet_env_timestamp_seconds 1123.5\n"),
            "{t}"
        );
        assert!(
            t.contains("\nnode_bootstrap_first_start_timestamp_seconds 1000\n"),
            "{t}"
        );
        s.kubelet_env_present = false;
        let t = render(&s);
        assert!(!t.contains("kubelet_env_timestamp"), "{t}");
        assert!(!t.contains("time_to_kubelet_env"), "{t}");
    }

    #[test]
    fn the_join_shows_one_state_of_all_and_the_first_ready_once_kubelet_env_is_there() {
        let st = MetricsState {
            bootstrap_started_at: Some(1000.0),
            kubelet_env_at: Some(1010.0),
            join_state: Some("certificate-pending".into()),
            join_observed_at: Some(1012.0),
            ..Default::default()
        };
        let mut s = worker(&st, true);
        let t = render(&s);
        let states = lines(&t, "node_bootstrap_join_state{");
        assert_eq!(
            states.len(),
            crate::join::assess::JoinState::NAMES.len() + 1
        );
        assert_eq!(
            states
                .iter()
                .filter(|l| l.ends_with(" 1"))
                .collect::<Vec<_>>(),
            [&r#"node_bootstrap_join_state{state="certificate-pending"} 1"#]
        );
        assert!(states.contains(&r#"node_bootstrap_join_state{state="unknown"} 0"#));
        assert!(!t.contains("node_ready_timestamp"), "not Ready yet: {t}");
        let ready = MetricsState {
            join_state: Some("ready".into()),
            node_ready_at: Some(1030.0),
            ..st.clone()
        };
        s.state = &ready;
        let t = render(&s);
        assert!(
            t.contains("\nnode_bootstrap_node_ready_timestamp_seconds 1030\n"),
            "{t}"
        );
        assert!(
            t.contains("\nnode_bootstrap_time_to_node_ready_seconds 30\n"),
            "{t}"
        );
        assert!(
            t.contains("node_bootstrap_join_state{state=\"ready\"} 1"),
            "{t}"
        );
        s.kubelet_env_present = false;
        assert!(!render(&s).contains("join"), "no kubelet.env, no join");
    }

    #[test]
    fn every_remote_is_listed_and_label_values_are_escaped() {
        let t = render(&Snapshot {
            version: "0.1.0-\"dev\"\\x",
            role: "worker",
            state: &MetricsState::default(),
            journal: None,
            kubelet_env_present: false,
        });
        assert_eq!(
            lines(&t, "node_bootstrap_retries_total{"),
            [
                r#"node_bootstrap_retries_total{cause="api_server"} 0"#,
                r#"node_bootstrap_retries_total{cause="mirror"} 0"#,
                r#"node_bootstrap_retries_total{cause="asset_bucket"} 0"#,
                r#"node_bootstrap_retries_total{cause="update_engine"} 0"#,
            ]
        );
        assert!(
            t.contains(r#"node_bootstrap_info{version="0.1.0-\"dev\"\\x",role="worker"} 1"#),
            "{t}"
        );
        // Families without samples are left out whole.
        assert!(!t.contains("node_bootstrap_step_"), "{t}");
        assert!(!t.contains("node_bootstrap_last_"), "{t}");
    }
}
