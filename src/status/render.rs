//! The human-readable report: one screen, verdict first.

use super::Report;
use super::facts::{JournalFacts, StepState};
use std::fmt::Write;

fn ago(rfc: &str, now: time::OffsetDateTime) -> String {
    let Ok(t) = time::OffsetDateTime::parse(rfc, &time::format_description::well_known::Rfc3339)
    else {
        return rfc.to_string();
    };
    let secs = (now - t).whole_seconds();
    let rel = match secs {
        s if s < 0 => "in the future".to_string(),
        s if s < 120 => format!("{s}s ago"),
        s if s < 7200 => format!("{}m ago", s / 60),
        s if s < 172_800 => format!("{}h ago", s / 3600),
        s => format!("{}d ago", s / 86_400),
    };
    format!("{rfc} ({rel})")
}

/// Renders the report as text (no colours, so it reads the same in a log).
pub fn text(r: &Report) -> String {
    let now = time::OffsetDateTime::now_utc();
    let f = &r.facts;
    let mut o = String::new();
    header(&mut o, r);
    units(&mut o, f, now);
    steps(&mut o, f, now);
    files(&mut o, f);
    join(&mut o, f);
    follow(&mut o, f);
    if !f.unreachable.is_empty() {
        let _ = writeln!(o, "\nCould not reach:");
        for u in &f.unreachable {
            let _ = writeln!(o, "  - {}: {}", u.source, u.error);
        }
    }
    o
}

/// A serialized enum's name (`bootkube-master`, `running`).
fn name_of(v: impl serde::Serialize) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The verdict, the node, and why / what it waits for.
fn header(o: &mut String, r: &Report) {
    let f = &r.facts;
    let _ = writeln!(
        o,
        "node-bootstrap status: {}",
        r.assessment.verdict.as_str().to_uppercase()
    );
    let _ = writeln!(
        o,
        "role: {} ({}; config {})   boot: {}",
        name_of(f.node.role),
        f.node.role_source,
        f.node.config,
        f.node
            .boot_id
            .as_deref()
            .unwrap_or("no agent run this boot")
    );
    for (title, lines) in [
        ("Why", &r.assessment.reasons),
        ("Waiting for", &r.assessment.waiting_for),
    ] {
        if !lines.is_empty() {
            let _ = writeln!(o, "\n{title}:");
            for l in lines {
                let _ = writeln!(o, "  - {l}");
            }
        }
    }
}

/// The flow's units as systemd sees them.
fn units(o: &mut String, f: &super::facts::Facts, now: time::OffsetDateTime) {
    let _ = writeln!(o, "\nUnits (systemd):");
    let Some(units) = &f.units else {
        let _ = writeln!(o, "  (could not reach systemd; see below)");
        return;
    };
    let _ = writeln!(
        o,
        "  {:<28} {:<9} {:<11} {:<13} {:<10} {:>8}  SINCE",
        "UNIT", "LOAD", "ACTIVE", "SUB", "RESULT", "RESTARTS"
    );
    // The bootkube master's units, on a node that has none of them: left
    // out (`--json` keeps them).
    let master_only = [
        super::facts::BOOTKUBE_PATH,
        super::facts::BOOTKUBE,
        super::facts::TECTONIC_PATH,
        super::facts::TECTONIC,
    ];
    let shown = units.iter().filter(|u| {
        f.node.role.is_bootkube_master()
            || !(master_only.contains(&u.state.name.as_str()) && u.state.load_state == "not-found")
    });
    for u in shown {
        let s = &u.state;
        let mut since = u.since.as_deref().map(|t| ago(t, now)).unwrap_or_default();
        if u.condition_skipped {
            since.push_str("  [skipped: condition not met]");
        }
        let _ = writeln!(
            o,
            "  {:<28} {:<9} {:<11} {:<13} {:<10} {:>8}  {}",
            s.name,
            s.load_state,
            s.active_state,
            s.sub_state,
            s.result.as_deref().unwrap_or("-"),
            s.n_restarts.map(|n| n.to_string()).unwrap_or("-".into()),
            since
        );
    }
}

/// The state journal's steps, one line each (plus attempts, error, output).
fn steps(o: &mut String, f: &super::facts::Facts, now: time::OffsetDateTime) {
    let _ = match &f.state_journal {
        JournalFacts::Present { path } => writeln!(o, "\nSteps (state journal {path}):"),
        JournalFacts::Missing { path } => writeln!(o, "\nSteps: no state journal at {path}"),
        JournalFacts::Corrupt { path, .. } => {
            writeln!(o, "\nSteps: state journal {path} is unreadable (see below)")
        }
    };
    for p in f.steps.iter().flatten() {
        let when = match (p.state, &p.started_at, &p.ended_at) {
            (StepState::Pending | StepState::Skipped, _, _) => String::new(),
            (_, _, Some(end)) => ago(end, now),
            (_, Some(start), None) => format!("since {}", ago(start, now)),
            _ => String::new(),
        };
        let boot = match p.this_boot {
            Some(false) if p.state != StepState::Done => " [earlier boot]",
            _ => "",
        };
        let detail = match p.result.as_ref().filter(|_| p.state != StepState::Failed) {
            Some(res) => format!("  {}", result_fields(&res.to_json())),
            None => String::new(),
        };
        let detail = if detail.trim().is_empty() {
            ""
        } else {
            &detail
        };
        let _ = writeln!(
            o,
            "  {:<16} {:<11} {when}{boot}{detail}",
            p.name,
            name_of(p.state)
        );
        if p.attempts > 1 {
            let _ = writeln!(o, "  {:<16} attempts: {}", "", p.attempts);
        }
        if let Some(e) = &p.error {
            let _ = writeln!(o, "  {:<16} error: {e}", "");
        }
        if p.state == StepState::Failed {
            for l in &p.log_tail {
                let _ = writeln!(o, "  {:<16} | {l}", "");
            }
        }
    }
}

/// A step's result as `key=value` pairs (null fields left out).
fn result_fields(v: &serde_json::Value) -> String {
    let Some(obj) = v.as_object() else {
        return String::new();
    };
    let parts: Vec<String> = obj
        .iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| match v.as_str() {
            Some(s) => format!("{k}={s}"),
            None => format!("{k}={v}"),
        })
        .collect();
    parts.join(" ")
}

/// The join: what the API server says of this node, and who asked.
fn join(o: &mut String, f: &super::facts::Facts) {
    let Some(j) = &f.join else {
        return;
    };
    let who = match (j.asked_as, &j.bootstrap_token_id) {
        (crate::join::AskedAs::BootstrapToken, Some(id)) => format!("bootstrap token {id}"),
        (crate::join::AskedAs::BootstrapToken, None) => "the bootstrap token".to_string(),
        (crate::join::AskedAs::Kubelet, _) => "the kubelet's own certificate".to_string(),
        (crate::join::AskedAs::Kubeconfig, _) => "the node's kubeconfig".to_string(),
    };
    let _ = writeln!(
        o,
        "cluster ({}, asked with {who}, {}): {}",
        j.state, j.kubeconfig, j.detail
    );
}

/// Following the cluster's version: where it stands, why, the last change.
fn follow(o: &mut String, f: &super::facts::Facts) {
    let Some(fo) = &f.follow else {
        return;
    };
    let versions = match (&fo.current, &fo.target) {
        (Some(c), Some(t)) if c != t => format!("kubelet {c} -> {t}"),
        (Some(c), _) => format!("kubelet {c}"),
        _ => "kubelet unknown".to_string(),
    };
    let phase = fo
        .change_phase
        .map(|p| format!(", change {p}"))
        .unwrap_or_default();
    let off = if fo.enabled {
        ""
    } else {
        " (follow.enabled is off)"
    };
    let _ = writeln!(
        o,
        "follow: {} ({versions}{phase}){off}{}",
        fo.standing,
        fo.why
            .as_deref()
            .map(|w| format!(": {w}"))
            .unwrap_or_default()
    );
    if let Some(c) = &fo.last_change {
        let why = c
            .why
            .as_deref()
            .map(|w| format!(" ({w})"))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "  last change: {} -> {} {}{why}",
            c.from,
            c.to,
            c.result.name()
        );
    }
}

/// Which kubelet and docker addon this release takes, and why.
fn backends(o: &mut String, b: &super::facts::Backends) {
    let kubelet = match &b.kubelet {
        Some(k) => format!("kubelet {k} ({})", b.kubelet_why),
        None => format!("kubelet: {}", b.kubelet_why),
    };
    let docker = match (&b.docker, &b.docker_why) {
        (Some(d), Some(why)) => format!("; docker addon {d} ({why})"),
        (None, Some(why)) => format!("; docker addon: {why}"),
        _ => String::new(),
    };
    let _ = writeln!(o, "backends: {kubelet}{docker}");
}

/// kubelet.env, the backends, the assets, torcx, the kubelet sysext,
/// docker and update_engine.
fn files(o: &mut String, f: &super::facts::Facts) {
    let k = &f.kubelet_env;
    if k.present {
        let _ = writeln!(o, "\nkubelet.env ({}): present", k.path);
        for (key, v) in &k.values {
            let _ = writeln!(o, "  {key}={v}");
        }
    } else {
        let _ = writeln!(o, "\nkubelet.env ({}): not written yet", k.path);
    }
    backends(o, &f.backends);
    let a = &f.assets;
    let yn = |b: bool| if b { "present" } else { "absent" };
    // The bootkube master's scripts: on other nodes only when there.
    let any_asset = a.bootkube_script_present
        || a.tectonic_script_present
        || a.bootkube_done
        || a.tectonic_done;
    if f.node.role.is_bootkube_master() || any_asset {
        let _ = writeln!(
            o,
            "assets ({} mode, {}): bootkube.sh {}, tectonic-wrapper.sh {}; init_bootkube.done {}, init_tectonic.done {}",
            a.mode,
            a.dir,
            yn(a.bootkube_script_present),
            yn(a.tectonic_script_present),
            yn(a.bootkube_done),
            yn(a.tectonic_done)
        );
    }
    // torcx: where the addon takes it, or where a profile is set.
    let torcx_used = f.backends.docker.as_deref() == Some("torcx")
        || f.torcx.as_ref().is_some_and(|t| t.next_profile.is_some());
    if let Some(t) = f.torcx.as_ref().filter(|_| torcx_used) {
        let _ = match (&t.next_profile, &t.next_images) {
            (None, _) => writeln!(o, "torcx: no next profile set"),
            (Some(p), Some(imgs)) => writeln!(o, "torcx: next profile {p} ({})", imgs.join(", ")),
            (Some(p), None) => writeln!(o, "torcx: next profile {p} (profile file not found)"),
        };
    }
    if let Some(k) = &f.kubelet_sysext {
        let _ = match &k.image {
            None => writeln!(o, "kubelet sysext: no image linked at {}", k.link),
            Some(img) => writeln!(
                o,
                "kubelet sysext: {} -> {img}{}, {}",
                k.link,
                k.version
                    .as_ref()
                    .map(|v| format!(" (kubelet {v})"))
                    .unwrap_or_default(),
                if k.merged { "merged" } else { "not merged" }
            ),
        };
    }
    if let Some(d) = &f.docker {
        let _ = writeln!(o, "docker: {} (API {})", d.version, d.api_version);
    } else if f.units.is_some() && !f.unreachable.iter().any(|u| u.source == "docker") {
        // systemd answered and Docker was not asked: docker.service is not
        // active, and asking would start it.
        let _ = writeln!(
            o,
            "docker: not asked ({} is not active)",
            super::facts::DOCKER
        );
    }
    if let Some(u) = &f.update_engine {
        let mut s = u.current_operation.clone();
        if u.current_operation.ends_with("DOWNLOADING") {
            s.push_str(&format!(" {}%", (u.progress * 100.0).round() as i64));
        }
        if !u.new_version.is_empty() {
            s.push_str(&format!(", new version {}", u.new_version));
        }
        let _ = writeln!(o, "update_engine: {s}");
    }
}

#[cfg(test)]
mod tests {
    use super::super::facts::{BOOTKUBE, BOOTKUBE_PATH, TECTONIC, TECTONIC_PATH};
    use super::super::verdict::{Require, tests::facts};
    use super::super::{Report, facts::UnitFacts};
    use crate::settings::Role;

    fn not_found(mut u: UnitFacts) -> UnitFacts {
        u.state.load_state = "not-found".into();
        u
    }

    /// A worker has neither bootkube's units nor its assets: its text
    /// names none of them (`--json` keeps the units); a bootkube master's
    /// names them all, whatever their state.
    #[test]
    fn a_workers_status_leaves_out_what_only_the_bootkube_master_has() {
        let master_only = [BOOTKUBE_PATH, BOOTKUBE, TECTONIC_PATH, TECTONIC];
        let mut worker = facts();
        worker.node.role = Role::Worker;
        for u in worker.units.as_mut().unwrap() {
            if master_only.contains(&u.state.name.as_str()) {
                *u = not_found(u.clone());
            }
        }
        let text = super::text(&Report::with(
            worker.clone(),
            std::time::Duration::ZERO,
            Require::default(),
        ));
        for name in master_only {
            assert!(!text.contains(name), "{name} in a worker's status:\n{text}");
        }
        assert!(!text.contains("/opt/tectonic"), "{text}");
        assert!(text.contains("k8s-node-bootstrap.service"), "{text}");

        let mut master = worker;
        master.node.role = Role::BootkubeMaster;
        let text = super::text(&Report::with(
            master,
            std::time::Duration::ZERO,
            Require::default(),
        ));
        for name in master_only {
            assert!(
                text.contains(name),
                "{name} not in a master's status:\n{text}"
            );
        }
        assert!(text.contains("/opt/tectonic"), "{text}");
    }
}
