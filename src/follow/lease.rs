//! The cluster-wide semaphore, the follow lease: one ConfigMap
//! (`follow.namespace`/`follow.lease`, `kube-system/node-bootstrap-follow-lease`)
//! with **one data key per node** that is in it. Pure: reading it,
//! deciding whether this node may take a place, and the object written
//! back (the I/O, with the API server's optimistic concurrency on
//! `resourceVersion`: a write over a version someone else replaced is
//! refused with 409, is [`super::api`]).
//!
//! Why a ConfigMap and not a `coordination.k8s.io` Lease: the agent asks
//! with the node's own identity (`system:node:<name>`), and the
//! NodeRestriction admission plugin refuses every Lease write of a node
//! but to its own heartbeat Lease (`kube-node-lease/<name>`), whatever
//! RBAC allows (Kubernetes 1.20's `plugin/pkg/admission/noderestriction`,
//! `admitLease`; seen in the node test: HTTP 403). It does not restrict
//! ConfigMaps, so RBAC can let nodes update this one.
//!
//! Why the lease is the whole cluster view a node has: from Kubernetes
//! 1.32 the Node authorizer lets a node read only its own Node object
//! (`AuthorizeNodeWithSelectors`, on by default in 1.32, locked on in
//! 1.34: "node '…' cannot read all nodes, only its own Node object",
//! `plugin/pkg/auth/authorizer/node/node_authorizer.go`). So nothing here
//! lists Nodes: a node learns what it must of the others from this
//! ConfigMap, which every following node reads anyway.
//!
//! | key | what |
//! | --- | --- |
//! | `node.<name>` | that node's entry (JSON): `state` `changing` (it holds a place: `from`, `to`, `since`, `renewed`), `halted` (its change was rolled back, `why`: the rollout halts), or `not-ready` (it found its own Node not Ready at its last run, `why`) |
//! | `leaseTransitions` | every take, counted |
//! | `leaseDurationSeconds` | after how long without a renewal a holder shows as stale |
//!
//! One key per node means the operator clears one node's entry without
//! touching the others' (`kubectl patch --type json` with a `remove` of
//! `/data/node.<name>`), and an admission policy can confine each node to
//! its own key (docs/security-review.md). It also means that only a take
//! must be a compare-and-swap of the whole object (it counts the others'
//! places): a node's renewal, release, halt and readiness touch its own
//! key alone ([`EntryPatch`]), so they never conflict with a fleet of
//! takers, and the takers' writes conflict only with each other and with
//! those. The list of an older agent (`data.holders`, a JSON list) is
//! read and counted, and moved to per-node keys at the next take.
//!
//! A node may take a place ([`place`], then [`node_fit`]) only when:
//! nobody's change was rolled back and left halted (the rollout halts at
//! the first node that did not come back: the operator looks, fixes, and
//! removes that node's entry, docs/operators.md); the operator has not
//! paused the rollout; fewer than `maxChanging` hold it; fewer than
//! `maxNotReady` nodes, counting this one (its change may take it out),
//! said in the lease that their Node is not Ready; and its own Node is
//! Ready and not cordoned by
//! someone else. A holder keeps its place until it releases it: a node
//! that loses power in the middle of its change finishes it when it comes
//! back, and one that never comes back holds the rollout as a halted one
//! does (it shows as stale: not renewed for longer than
//! `leaseDurationSeconds`).

use super::plan::NodeLook;
use super::policy::Policy;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The data keys of nodes' entries start so.
pub const PREFIX: &str = "node.";
/// An older agent's list of holders (read, counted, emptied at a write).
pub const LEGACY_HOLDERS: &str = "holders";
/// The longest key a ConfigMap takes.
const MAX_KEY: usize = 253;

/// The data key of `node`'s entry.
pub fn key(node: &str) -> String {
    format!("{PREFIX}{node}")
}

/// What a node's entry says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// It holds a place: its kubelet is changing.
    Changing,
    /// Its change was rolled back: the rollout halts here.
    Halted,
    /// It found its own Node not Ready (and holds no place).
    NotReady,
}

/// One node's entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub state: State,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub from: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub to: String,
    /// Unix seconds.
    pub since: u64,
    pub renewed: u64,
    /// Why it halted, or why its Node is not Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl Entry {
    /// It holds a place (changing or halted).
    pub fn holds(&self) -> bool {
        self.state != State::NotReady
    }
}

/// An older agent's holder (the `holders` list).
#[derive(Debug, Clone, Deserialize)]
struct LegacyHolder {
    node: String,
    #[serde(default)]
    from: String,
    #[serde(default)]
    to: String,
    #[serde(default)]
    since: u64,
    #[serde(default)]
    renewed: u64,
    #[serde(default)]
    halted: Option<String>,
}

/// The lease as read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseView {
    /// `None`: there is no lease ConfigMap (the follow-rbac module creates
    /// it). A take then POSTs one, refused (403) unless an operator granted
    /// nodes `create`; the refusal says to apply follow-rbac.
    pub resource_version: Option<String>,
    /// Node name -> its entry.
    pub entries: BTreeMap<String, Entry>,
    /// Node name -> its key's value as stored (what a patch tests).
    pub raw: BTreeMap<String, String>,
    pub transitions: u64,
    /// The object as read: a write keeps what others put there (labels,
    /// other annotations and keys) and changes only the agent's fields.
    pub object: Option<Value>,
}

impl LeaseView {
    pub fn entry(&self, node: &str) -> Option<&Entry> {
        self.entries.get(node)
    }

    /// The nodes holding a place, changing or halted.
    pub fn holders(&self) -> impl Iterator<Item = (&String, &Entry)> {
        self.entries.iter().filter(|(_, e)| e.holds())
    }

    pub fn halted(&self) -> Option<(&String, &Entry)> {
        self.entries.iter().find(|(_, e)| e.state == State::Halted)
    }
}

/// Reads the lease's ConfigMap (`None`: there is none).
pub fn read(lease: Option<&Value>) -> Result<LeaseView, String> {
    let Some(l) = lease else {
        return Ok(LeaseView::default());
    };
    let data = &l["data"];
    let mut entries = BTreeMap::new();
    let mut raw = BTreeMap::new();
    for (k, v) in data.as_object().into_iter().flatten() {
        let Some(node) = k.strip_prefix(PREFIX) else {
            continue;
        };
        let text = v.as_str().unwrap_or_default();
        let e: Entry = serde_json::from_str(text)
            .map_err(|e| format!("its data.{k} is not the agent's entry ({e}): {text:?}"))?;
        entries.insert(node.to_string(), e);
        raw.insert(node.to_string(), text.to_string());
    }
    if let Some(s) = data[LEGACY_HOLDERS].as_str() {
        let legacy: Vec<LegacyHolder> = serde_json::from_str(s).map_err(|e| {
            format!("its data.{LEGACY_HOLDERS} is not an agent's list of holders ({e}): {s:?}")
        })?;
        for h in legacy {
            entries.entry(h.node).or_insert(Entry {
                state: if h.halted.is_some() {
                    State::Halted
                } else {
                    State::Changing
                },
                from: h.from,
                to: h.to,
                since: h.since,
                renewed: h.renewed,
                why: h.halted,
            });
        }
    }
    Ok(LeaseView {
        resource_version: l["metadata"]["resourceVersion"]
            .as_str()
            .map(str::to_string),
        entries,
        raw,
        transitions: data["leaseTransitions"]
            .as_str()
            .and_then(|t| t.parse().ok())
            .unwrap_or(0),
        object: Some(l.clone()),
    })
}

/// An entry as stored.
pub fn entry_text(e: &Entry) -> String {
    serde_json::to_string(e).expect("an entry serializes")
}

/// The whole ConfigMap for `view` (a PUT over `view.resource_version`, or
/// the body of the POST that creates it): what others put on the object
/// is kept, the nodes' keys and the counts of the module docs written; an
/// older agent's list is emptied (its holders are keys now).
pub fn render(namespace: &str, name: &str, view: &LeaseView, duration_secs: u64) -> Value {
    let mut lease = view.object.clone().unwrap_or_else(|| {
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace},
        })
    });
    let metadata = &mut lease["metadata"];
    match &view.resource_version {
        Some(rv) => metadata["resourceVersion"] = json!(rv),
        None => {
            if let Some(m) = metadata.as_object_mut() {
                m.remove("resourceVersion");
            }
        }
    }
    if !lease["data"].is_object() {
        lease["data"] = json!({});
    }
    let data = lease["data"].as_object_mut().expect("an object");
    data.retain(|k, _| !k.starts_with(PREFIX));
    for (node, e) in &view.entries {
        // An entry as read stays as it was stored (a patch tests it).
        let text = match view.raw.get(node) {
            Some(t) if serde_json::from_str::<Entry>(t).ok().as_ref() == Some(e) => t.clone(),
            _ => entry_text(e),
        };
        data.insert(key(node), json!(text));
    }
    if data.contains_key(LEGACY_HOLDERS) {
        data.insert(LEGACY_HOLDERS.into(), json!("[]"));
    }
    data.insert(
        "leaseTransitions".into(),
        json!(view.transitions.to_string()),
    );
    data.insert(
        "leaseDurationSeconds".into(),
        json!(duration_secs.to_string()),
    );
    lease
}

/// A write of one node's own key, which needs no compare-and-swap of the
/// whole lease (module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryPatch {
    /// Sets the key whatever it holds (a halt, which is never lost; a
    /// not-Ready report).
    Set(Entry),
    /// Replaces the key only while it still holds `old` (as stored): a
    /// renewal, which must not put back a place the operator removed.
    Replace { old: String, new: Entry },
    /// Removes the key only while it still holds `old`: a release, or a
    /// report taken back.
    Remove { old: String },
}

/// The patch that renews `me`'s place in `view`, or `None` when it holds
/// none.
pub fn renewal(view: &LeaseView, me: &str, now: u64) -> Option<EntryPatch> {
    let old = view.raw.get(me)?.clone();
    let e = renew(view, me, now)?.entries.remove(me)?;
    Some(EntryPatch::Replace { old, new: e })
}

/// The patch that releases `me`'s place (or report) in `view`, or `None`
/// when it has no entry.
pub fn removal(view: &LeaseView, me: &str) -> Option<EntryPatch> {
    Some(EntryPatch::Remove {
        old: view.raw.get(me)?.clone(),
    })
}

/// `unix` as RFC 3339, UTC.
pub fn rfc3339(unix: u64) -> String {
    time::OffsetDateTime::from_unix_timestamp(unix as i64)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Whether this node may hold a place, as far as the lease goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// It holds one already (a change under way, or interrupted).
    Held,
    /// A place is free for it.
    Take,
    /// Not now, and why.
    Wait { why: String },
    /// This node's own name is halted in the lease (its change, or that of
    /// a node of the same name before it, was rolled back): it waits for
    /// the operator, and never clears the mark itself.
    HaltedHere { why: String },
}

fn describe(node: &str, e: &Entry, now: u64, duration_secs: u64) -> String {
    let stale = now.saturating_sub(e.renewed) > duration_secs;
    format!(
        "{node} ({} -> {}{})",
        e.from,
        e.to,
        if stale {
            ", not renewed for longer than the lease: did it go down?"
        } else {
            ""
        }
    )
}

/// The lease's part of the rule of the module docs (the node's own part
/// is [`node_fit`]).
pub fn place(view: &LeaseView, me: &str, policy: &Policy, now: u64, duration_secs: u64) -> Grant {
    match view.entry(me) {
        Some(e) if e.state == State::Halted => {
            return Grant::HaltedHere {
                why: format!(
                    "the follow lease keeps this node halted: its change {} -> {} was rolled back ({}); the operator removes data.{} (docs/operators.md, \"When a node does not come back\")",
                    e.from,
                    e.to,
                    e.why.as_deref().unwrap_or_default(),
                    key(me)
                ),
            };
        }
        Some(e) if e.state == State::Changing => return Grant::Held,
        _ => {}
    }
    if let Some((n, h)) = view.halted() {
        return Grant::Wait {
            why: format!(
                "the rollout is halted at {n}: its change {} -> {} was rolled back ({}); the operator removes data.{} (docs/operators.md, \"When a node does not come back\")",
                h.from,
                h.to,
                h.why.as_deref().unwrap_or_default(),
                key(n)
            ),
        };
    }
    if policy.paused {
        return Grant::Wait {
            why: "the operator paused the rollout (data.paused of the follow ConfigMap)".into(),
        };
    }
    let holders: Vec<(&String, &Entry)> = view.holders().collect();
    if holders.len() >= policy.max_changing as usize {
        let who: Vec<String> = holders
            .iter()
            .map(|(n, e)| describe(n, e, now, duration_secs))
            .collect();
        return Grant::Wait {
            why: format!(
                "{} of {} places taken: {}",
                holders.len(),
                policy.max_changing,
                who.join(", ")
            ),
        };
    }
    // The nodes that said they are not Ready (the holders count against
    // maxChanging); this node's change may take it out too, so it counts.
    let out: Vec<&str> = view
        .entries
        .iter()
        .filter(|(n, e)| *n != me && e.state == State::NotReady)
        .map(|(n, _)| n.as_str())
        .collect();
    if out.len() + 1 > policy.max_not_ready as usize {
        return Grant::Wait {
            why: format!(
                "{} other node(s) not Ready ({}); the follow ConfigMap's maxNotReady is {}",
                out.len(),
                out.join(", "),
                policy.max_not_ready
            ),
        };
    }
    Grant::Take
}

/// This node's own part of the rule: its Node Ready, and not cordoned by
/// someone else (an operator's cordon means "leave it alone": it changes
/// once uncordoned).
pub fn node_fit(own: &NodeLook) -> Result<(), String> {
    if !own.ready {
        return Err(format!(
            "this node is not Ready ({}): only a Ready node changes its kubelet",
            own.detail.as_deref().unwrap_or("not ready")
        ));
    }
    if own.unschedulable {
        return Err(
            "this node is cordoned (spec.unschedulable) by someone else: it changes its kubelet once uncordoned"
                .into(),
        );
    }
    Ok(())
}

/// Whether a change under way whose entry was removed (by the operator)
/// may put it back: only into a free place, never past a halt.
pub fn retake(view: &LeaseView, me: &str, policy: &Policy) -> Result<(), String> {
    if let Some((n, _)) = view.halted().filter(|(n, _)| *n != me) {
        return Err(format!("the rollout is halted at {n}"));
    }
    let holders = view.holders().filter(|(n, _)| *n != me).count();
    if holders >= policy.max_changing as usize {
        return Err(format!(
            "{holders} of {} places are taken by others",
            policy.max_changing
        ));
    }
    Ok(())
}

/// `view` with `me` changing `from` -> `to` (its not-Ready report, if
/// any, replaced). `Err` when its name cannot be a key.
pub fn take(
    view: &LeaseView,
    me: &str,
    from: &str,
    to: &str,
    now: u64,
) -> Result<LeaseView, String> {
    if key(me).len() > MAX_KEY {
        return Err(format!(
            "the node name {me:?} is too long for a key of the follow lease (at most {} characters)",
            MAX_KEY - PREFIX.len()
        ));
    }
    let mut v = view.clone();
    v.entries.insert(
        me.into(),
        Entry {
            state: State::Changing,
            from: from.into(),
            to: to.into(),
            since: now,
            renewed: now,
            why: None,
        },
    );
    v.transitions += 1;
    Ok(v)
}

/// `view` with `me`'s place renewed; `None` when it holds none.
pub fn renew(view: &LeaseView, me: &str, now: u64) -> Option<LeaseView> {
    let mut v = view.clone();
    let e = v.entries.get_mut(me).filter(|e| e.holds())?;
    e.renewed = now;
    Some(v)
}

/// `view` with `me`'s place back (`entry` as its change recorded it).
pub fn put_back(view: &LeaseView, me: &str, entry: Entry) -> LeaseView {
    let mut v = view.clone();
    v.entries.insert(me.into(), entry);
    v
}

/// `view` with `me` marked halted with `why` (taking its place back if
/// it was removed: a halt is never lost).
pub fn halt(view: &LeaseView, me: &str, entry: Entry, why: &str, now: u64) -> LeaseView {
    let mut v = view.clone();
    let e = v.entries.entry(me.into()).or_insert(entry);
    e.state = State::Halted;
    e.why = Some(why.into());
    e.renewed = now;
    v
}

/// `view` without `me`.
pub fn release(view: &LeaseView, me: &str) -> LeaseView {
    let mut v = view.clone();
    v.entries.remove(me);
    v
}

/// `view` with `me` reported not Ready (`why`), or `None` when nothing
/// changes (already reported, or it holds a place).
pub fn report_not_ready(view: &LeaseView, me: &str, why: &str, now: u64) -> Option<LeaseView> {
    if view.entry(me).is_some() {
        return None;
    }
    let mut v = view.clone();
    v.entries.insert(
        me.into(),
        Entry {
            state: State::NotReady,
            from: String::new(),
            to: String::new(),
            since: now,
            renewed: now,
            why: Some(why.into()),
        },
    );
    Some(v)
}

/// `view` without `me`'s not-Ready report, or `None` when it has none.
pub fn clear_report(view: &LeaseView, me: &str) -> Option<LeaseView> {
    view.entry(me)
        .filter(|e| e.state == State::NotReady)
        .map(|_| release(view, me))
}

#[cfg(test)]
mod tests;
