//! The alert rules (monitoring/node-bootstrap.rules.yml) against the real
//! promtool (Debian `prometheus`): they load (`promtool check rules`), their
//! hand-written cases pass (`promtool test rules`), and they fire, and
//! only where they should, on series the agent itself writes: a fleet's
//! timelines rendered minute by minute by the agent's metrics code, and
//! the textfile the agent binary leaves after a config error. Every file
//! the agent writes also passes `promtool check metrics`.

use node_bootstrap::error::{Error, ErrorClass};
use node_bootstrap::journal::{StateJournal, Step};
use node_bootstrap::metrics::record::{Deltas, Finished};
use node_bootstrap::metrics::{Command as Cmd, Remote};
use node_bootstrap::textfile::render::{Snapshot, render};
use node_bootstrap::textfile::result_of;
use node_bootstrap::textfile::state::MetricsState;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use testkit::cli::stderr;

fn monitoring() -> PathBuf {
    testkit::project_root().join("monitoring")
}

fn promtool(args: &[&str], dir: &Path, stdin: Option<&str>) -> (bool, String) {
    let mut child = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running promtool");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.unwrap_or_default().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// `promtool check metrics` on a textfile: no error and no lint problem.
fn assert_lints_clean(text: &str) {
    let (ok, out) = promtool(&["check", "metrics"], &monitoring(), Some(text));
    assert!(
        ok && out.trim().is_empty(),
        "promtool check metrics:\n{out}\n{text}"
    );
}

#[test]
fn the_rules_load_and_their_hand_written_cases_pass() {
    if testkit::skip_without(&["promtool"]) {
        return;
    }
    let (ok, out) = promtool(
        &["check", "rules", "node-bootstrap.rules.yml"],
        &monitoring(),
        None,
    );
    assert!(ok && out.contains("SUCCESS: 8 rules found"), "{out}");
    let (ok, out) = promtool(
        &["test", "rules", "node-bootstrap.rules.test.yml"],
        &monitoring(),
        None,
    );
    assert!(ok, "{out}");
}

/// The samples of a textfile: (series without the instance, value).
fn samples(text: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').expect("series and value");
            (series.to_string(), value.parse().expect("a number"))
        })
        .collect()
}

/// A series with an `instance` label added.
fn with_instance(series: &str, instance: &str) -> String {
    match series.split_once('{') {
        Some((name, labels)) => format!("{name}{{instance=\"{instance}\",{labels}"),
        None => format!("{series}{{instance=\"{instance}\"}}"),
    }
}

/// A fleet's textfiles, minute by minute: instance -> minute -> text.
#[derive(Default)]
struct Fleet {
    files: BTreeMap<String, Vec<String>>,
}

impl Fleet {
    /// The promtool input series: every series any file held, with its
    /// value each minute (`_` while its file did not hold it).
    fn input_series(&self, minutes: usize) -> Vec<Value> {
        let mut series: BTreeMap<String, Vec<Option<f64>>> = BTreeMap::new();
        for (instance, files) in &self.files {
            for (minute, text) in files.iter().enumerate() {
                for (s, v) in samples(text) {
                    series
                        .entry(with_instance(&s, instance))
                        .or_insert_with(|| vec![None; minutes])[minute] = Some(v);
                }
            }
        }
        series
            .into_iter()
            .map(|(s, vals)| {
                let values: Vec<String> = vals
                    .iter()
                    .map(|v| v.map_or("_".to_string(), |v| v.to_string()))
                    .collect();
                json!({"series": s, "values": values.join(" ")})
            })
            .collect()
    }

    /// Runs `promtool test rules` with these series and `tests` (alert
    /// expectations), the rules file beside it.
    fn promtool_test(&self, minutes: usize, alert_tests: Value) -> (bool, String) {
        let dir = tempfile::tempdir().unwrap();
        // The rules as shipped, less their annotations (which promtool
        // compares too; the hand-written cases check them): these tests
        // are about which alerts fire for whom.
        let text = std::fs::read_to_string(monitoring().join("node-bootstrap.rules.yml")).unwrap();
        let mut rules: Value = serde_saphyr::from_str(&text).unwrap();
        for group in rules["groups"].as_array_mut().unwrap() {
            for rule in group["rules"].as_array_mut().unwrap() {
                rule.as_object_mut().unwrap().remove("annotations");
            }
        }
        std::fs::write(
            dir.path().join("rules.yml"),
            serde_json::to_vec_pretty(&rules).unwrap(),
        )
        .unwrap();
        // JSON is YAML.
        let test = json!({
            "rule_files": ["rules.yml"],
            "evaluation_interval": "1m",
            "tests": [{
                "interval": "1m",
                "input_series": self.input_series(minutes),
                "alert_rule_test": alert_tests,
            }],
        });
        std::fs::write(
            dir.path().join("test.yml"),
            serde_json::to_vec_pretty(&test).unwrap(),
        )
        .unwrap();
        promtool(&["test", "rules", "test.yml"], dir.path(), None)
    }
}

const MINUTES: usize = 60;

fn index(r: Remote) -> usize {
    Remote::ALL.iter().position(|x| *x == r).unwrap()
}

/// One node's textfile each minute, as the agent renders it: `step(minute,
/// state, journal) -> kubelet.env present` moves the node on.
fn timeline(
    mut step: impl FnMut(usize, &mut MetricsState, &mut StateJournal) -> bool,
) -> Vec<String> {
    let mut state = MetricsState::default();
    let mut journal = StateJournal::default();
    (0..MINUTES)
        .map(|minute| {
            let present = step(minute, &mut state, &mut journal);
            render(&Snapshot {
                version: "0.1.0",
                role: "worker",
                state: &state,
                journal: Some(&journal),
                kubelet_env_present: present,
            })
        })
        .collect()
}

/// The bootstrap starts at unix time 0 (promtool's time 0).
fn started() -> Deltas {
    Deltas {
        run_started: Some((0.0, false)),
        ..Default::default()
    }
}

fn finished(outcome: Result<u8, Error>, minute: usize) -> Deltas {
    Deltas {
        finished: Some(Finished {
            command: Cmd::Run,
            result: result_of(&outcome),
            exit_code: Some(outcome.unwrap_or_else(|e| e.exit_code())),
            started_at: minute as f64 * 60.0,
            ended_at: minute as f64 * 60.0 + 1.0,
            counted: true,
        }),
        ..Default::default()
    }
}

#[test]
fn alerts_fire_on_the_series_the_agent_renders_and_only_there() {
    if testkit::skip_without(&["promtool"]) {
        return;
    }
    let mut fleet = Fleet::default();
    // Stuck: started at 0, in os-update ever since (update_engine failing,
    // the unit retrying each minute).
    fleet.files.insert(
        "stuck".into(),
        timeline(|minute, st, j| {
            if minute == 0 {
                st.apply(&started(), None);
                j.begin("b1", Step::Assets);
            }
            j.begin("b1", Step::OsUpdate);
            let mut d = finished(Err(Error::retryable("update_engine stalled")), minute);
            d.retries[index(Remote::UpdateEngine)] = 1;
            st.apply(&d, None);
            false
        }),
    );
    // Done after 6 minutes (kubelet.env written at 360 s).
    fleet.files.insert(
        "done".into(),
        timeline(|minute, st, _| {
            if minute == 0 {
                st.apply(&started(), None);
            }
            if minute == 6 {
                st.apply(
                    &Deltas {
                        kubelet_env_at: Some(360.0),
                        ..finished(Ok(0), minute)
                    },
                    None,
                );
            }
            minute >= 6
        }),
    );
    // A bad seed file from the start (not retried: exit 5), kubelet.env
    // never comes.
    fleet.files.insert(
        "bad-seed".into(),
        timeline(|minute, st, j| {
            if minute == 0 {
                st.apply(&started(), None);
                j.begin("b1", Step::Assets);
                let e = Error::bad_input(
                    "failed to read seed kubelet.env at /etc/kubernetes/installer/kubelet.env",
                );
                j.fail("b1", Step::Assets, &e, vec![]);
                st.apply(&finished(Err(e), minute), None);
            }
            false
        }),
    );
    // Five nodes that finish in minute 30, each retrying the API server
    // 30 times a minute from minute 10 on (2.5/s across the fleet).
    for n in 0..5 {
        fleet.files.insert(
            format!("retrying-{n}"),
            timeline(|minute, st, _| {
                if minute == 0 {
                    st.apply(&started(), None);
                }
                if (10..30).contains(&minute) {
                    let mut d = Deltas::default();
                    d.retries[index(Remote::ApiServer)] = 30;
                    st.apply(&d, None);
                }
                if minute == 30 {
                    st.apply(
                        &Deltas {
                            kubelet_env_at: Some(1800.0),
                            ..finished(Ok(0), minute)
                        },
                        None,
                    );
                }
                minute >= 30
            }),
        );
    }
    for files in fleet.files.values() {
        assert_lints_clean(files.last().unwrap());
    }
    let alert = |at: &str, name: &str, labels: Vec<Value>| {
        let exp: Vec<Value> = labels
            .into_iter()
            .map(|l| json!({"exp_labels": l}))
            .collect();
        json!({"eval_time": at, "alertname": name, "exp_alerts": exp})
    };
    let not_complete = |instance: &str| json!({"severity": "warning", "instance": instance});
    let non_retryable = json!({"severity": "critical", "instance": "bad-seed", "command": "run", "result": "bad-input"});
    let spike = json!({"severity": "warning"});
    let (ok, out) = fleet.promtool_test(
        MINUTES,
        json!([
            // Not yet 30 + 5 minutes.
            alert("30m", "NodeBootstrapNotComplete", vec![]),
            // The two nodes without kubelet.env; not the ones that got there.
            alert(
                "40m",
                "NodeBootstrapNotComplete",
                vec![not_complete("bad-seed"), not_complete("stuck")]
            ),
            // The bad seed alone: the stuck node fails retryably.
            alert(
                "5m",
                "NodeBootstrapFailedNonRetryable",
                vec![non_retryable.clone()]
            ),
            alert(
                "50m",
                "NodeBootstrapFailedNonRetryable",
                vec![non_retryable]
            ),
            // Retries from minute 10, 5 minutes of rate and 5 of `for`.
            alert("12m", "NodeBootstrapAPIServerRetriesSpike", vec![]),
            alert("25m", "NodeBootstrapAPIServerRetriesSpike", vec![spike]),
            // They stopped at 30; the rate window empties by 36.
            alert("45m", "NodeBootstrapAPIServerRetriesSpike", vec![]),
        ]),
    );
    assert!(ok, "{out}");
}

/// kubelet.env at minute 2, then what `run`'s join watch records (on each
/// change of state).
fn joining(states: &'static [(usize, &'static str)]) -> Vec<String> {
    use node_bootstrap::metrics::record::JoinSeen;
    timeline(move |minute, st, _| {
        if minute == 0 {
            st.apply(&started(), None);
        }
        if minute == 2 {
            st.apply(
                &Deltas {
                    kubelet_env_at: Some(120.0),
                    ..finished(Ok(0), minute)
                },
                None,
            );
        }
        for (at, state) in states {
            if *at == minute {
                let seen = JoinSeen {
                    state,
                    at: minute as f64 * 60.0,
                    ready: *state == "ready",
                };
                st.apply(
                    &Deltas {
                        join: Some(seen),
                        ..Default::default()
                    },
                    None,
                );
            }
        }
        minute >= 2
    })
}

#[test]
fn the_join_alert_fires_for_a_node_not_ready_after_kubelet_env_and_only_there() {
    if testkit::skip_without(&["promtool"]) {
        return;
    }
    let mut fleet = Fleet::default();
    // The kubelet's certificate request is never approved.
    fleet.files.insert(
        "pending".into(),
        joining(&[(2, "no-certificate-request"), (3, "certificate-pending")]),
    );
    // Registered at 3, Ready at 4.
    fleet.files.insert(
        "joined".into(),
        joining(&[(2, "certificate-pending"), (3, "not-ready"), (4, "ready")]),
    );
    // The API server cannot be asked at all.
    fleet
        .files
        .insert("cut-off".into(), joining(&[(2, "unknown")]));
    // Its agent does not watch the join (cluster.join_watch_secs 0).
    fleet.files.insert("unwatched".into(), joining(&[]));
    for files in fleet.files.values() {
        assert_lints_clean(files.last().unwrap());
    }
    let warning =
        |instance: &str| json!({"exp_labels": {"severity": "warning", "instance": instance}});
    let (ok, out) = fleet.promtool_test(
        MINUTES,
        json!([
            // 15 minutes after kubelet.env (at 2) plus 5 of `for`: not yet.
            {"eval_time": "21m", "alertname": "NodeBootstrapNotReadyInCluster", "exp_alerts": []},
            {"eval_time": "23m", "alertname": "NodeBootstrapNotReadyInCluster",
             "exp_alerts": [warning("cut-off"), warning("pending")]},
            {"eval_time": "50m", "alertname": "NodeBootstrapNotReadyInCluster",
             "exp_alerts": [warning("cut-off"), warning("pending")]},
            // Nor does the bootstrap alert fire: kubelet.env is there.
            {"eval_time": "50m", "alertname": "NodeBootstrapNotComplete", "exp_alerts": []},
        ]),
    );
    assert!(ok, "{out}");
}

#[test]
fn a_config_error_leaves_a_textfile_that_raises_the_non_retryable_alert() {
    if testkit::skip_without(&["promtool"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let textfile_dir = dir.path().join("textfile");
    let config = dir.path().join("config.json");
    // A typo in a field: the config does not load, but names where its
    // metrics and state go.
    std::fs::write(
        &config,
        json!({
            "paths": {"state_dir": dir.path().join("state"), "kubelet_env": dir.path().join("kubelet.env")},
            "metrics": {"textfile_dir": textfile_dir},
            "cluster": {"api_atempts": 3},
        })
        .to_string(),
    )
    .unwrap();
    let out = testkit::cli::agent_command()
        .args(["--log-format", "text", "--config"])
        .arg(&config)
        .arg("run")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let text = std::fs::read_to_string(textfile_dir.join("node_bootstrap.prom"))
        .unwrap_or_else(|e| panic!("no textfile after the config error ({e}): {}", stderr(&out)));
    assert!(
        text.contains("node_bootstrap_last_result{command=\"run\",result=\"config\"} 1\n")
            && text.contains("node_bootstrap_last_exit_code{command=\"run\"} 4\n")
            && text.contains("role=\"unknown\"} 1\n"),
        "{text}"
    );
    assert_lints_clean(&text);
    // The same file every minute for 10 minutes, its times moved to
    // promtool's clock.
    let mut fleet = Fleet::default();
    let file: String = text
        .lines()
        .filter(|l| !l.contains("timestamp_seconds"))
        .map(|l| format!("{l}\n"))
        .collect();
    fleet.files.insert("n1".into(), vec![file; 10]);
    let (ok, out) = fleet.promtool_test(
        10,
        json!([{
            "eval_time": "2m",
            "alertname": "NodeBootstrapFailedNonRetryable",
            "exp_alerts": [{"exp_labels": {"severity": "critical", "instance": "n1", "command": "run", "result": "config"}}],
        }]),
    );
    assert!(ok, "{out}");
    // The class named in the alert is one retrying cannot fix.
    assert!(!ErrorClass::Config.is_retryable());
}

#[test]
fn the_non_retryable_alert_names_exactly_the_classes_that_retrying_cannot_fix() {
    let rules = std::fs::read_to_string(monitoring().join("node-bootstrap.rules.yml")).unwrap();
    let (_, rest) = rules
        .split_once("result=~\"")
        .expect("the rule matches results by regex");
    let named: std::collections::BTreeSet<&str> =
        rest.split('"').next().unwrap().split('|').collect();
    let want: std::collections::BTreeSet<&str> = ErrorClass::ALL
        .into_iter()
        .filter(|c| !c.is_retryable())
        .map(ErrorClass::name)
        .collect();
    assert_eq!(named, want);
}
