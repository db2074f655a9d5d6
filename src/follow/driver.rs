//! The driver: one `follow` run. It resumes a change the record shows
//! under way ([`change`]); else it looks at the cluster, decides
//! ([`super::target`], [`super::lease`]) and, when a change is due and a
//! place in the lease is free, takes it and carries the change through
//! ([`super::plan`]), recording each phase before its work. What it
//! decided, and why it waits, goes to `state.json` for `status` and the
//! metrics.
//!
//! What a run asks of the API server, by where the node stands (a fleet
//! of a thousand nodes asks this of one API server every timer period):
//!
//! | the node | requests |
//! | --- | --- |
//! | up to date (its kubelet is the API server's release) | `/version`, its own Node (and a lease write when its Ready changed: [`super::lease::report_not_ready`]) |
//! | the API server at another release | `/version`, the operator's ConfigMap |
//! | waiting for a place (a target settled by earlier runs) | the operator's ConfigMap, the lease |
//! | halted | the lease |
//! | taking a place | the above, each API server's `/version` (their Endpoints), its own Node, its pods for a minor change, the lease written |
//!
//! No run lists Nodes (module docs of [`super::api`]).

mod change;

use super::lease::{self, EntryPatch, Grant};
use super::plan::{self, Backend, Change, Phase};
use super::policy::{MinorVersion, Policy};
use super::record::{Files, FollowState, Standing};
use super::seams::{ClusterSeam, EventKind, NodeSeam};
use super::target::{self, Intent};
use crate::cluster::version::KubeVersion;
use crate::error::{Error, ErrorClass, Result};
use crate::message_ids;
use tracing::{info, warn};

/// The settings a run reads (of `follow` and `kubelet`).
#[derive(Debug, Clone)]
pub struct Settings {
    pub stable_checks: usize,
    pub ready_timeout: std::time::Duration,
    pub drain_timeout: std::time::Duration,
    pub poll: std::time::Duration,
    pub backend: Backend,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ran {
    /// Nothing changed; where following stands.
    Looked(Standing),
    /// A change ended (succeeded, rolled back, aborted).
    Changed(super::record::ChangeResult),
}

pub struct Driver<'a, C: ClusterSeam, N: NodeSeam> {
    pub cluster: &'a C,
    pub node: &'a N,
    pub files: Files,
    pub settings: Settings,
}

const STEP: &str = "follow";

/// How many conflicts (409) a write of this node's own entry meets before
/// the run gives up (the next run carries on).
const CONFLICTS: usize = 10;

/// A pause between two tries of a write that met a conflict: 50 to 250
/// ms, at random, so that the nodes that met it do not meet again.
fn conflict_pause() -> std::time::Duration {
    std::time::Duration::from_millis(50 + fastrand::u64(..200))
}

/// How long after an aborted change the next may start: twice the last
/// wait, from ten minutes up to six hours.
pub fn abort_backoff(streak: u32) -> u64 {
    (600u64 << streak.saturating_sub(1).min(10)).min(6 * 3600)
}

impl<C: ClusterSeam, N: NodeSeam> Driver<'_, C, N> {
    /// One run (module docs).
    pub async fn run(&self) -> Result<Ran> {
        let mut state = self.files.load_state()?;
        let r = match self.files.load_change()? {
            Some(change) => {
                info!(step = STEP, from = %change.from, to = %change.to, phase = change.phase.name(),
                    "resuming the change under way");
                self.carry(change, &mut state).await
            }
            None => self.look(&mut state).await,
        };
        match r {
            Ok(ran) => {
                self.files.save_state(&state, false)?;
                Ok(ran)
            }
            Err(e) => {
                // Never left saying what it said before: a refusal, or a
                // wait (a change keeps "changing").
                let standing = match (state.standing, e.class()) {
                    (Standing::Changing, _) => Standing::Changing,
                    (_, ErrorClass::Refused) => Standing::Refused,
                    _ => Standing::Waiting,
                };
                Self::stand(&mut state, standing, Some(e.to_string()));
                self.files.save_state(&state, false)?;
                Err(e)
            }
        }
    }

    fn stand(state: &mut FollowState, standing: Standing, why: Option<String>) {
        if state.standing != standing || state.why != why {
            info!(
                step = STEP,
                standing = standing.name(),
                why = why.as_deref().unwrap_or(""),
                "follow: {}",
                standing.name()
            );
        }
        state.standing = standing;
        state.why = why;
    }

    /// Stands `standing` for `why`; up to date, the target is the kubelet
    /// itself; anything but waiting forgets the pending change.
    fn stood(state: &mut FollowState, standing: Standing, why: String) -> Ran {
        if standing == Standing::UpToDate {
            state.target = state.current.clone();
        }
        if standing != Standing::Waiting && standing != Standing::Halted {
            state.waiting_for = None;
        }
        Self::stand(state, standing, Some(why));
        Ran::Looked(standing)
    }

    /// Looks at the cluster (the module docs' table) and takes a place
    /// when a change is due and one is free.
    async fn look(&self, state: &mut FollowState) -> Result<Ran> {
        let n = self.node;
        let current = n.current_version()?;
        state.current = Some(current.to_string());
        if state.halted.is_some() && !self.halt_cleared(state).await? {
            return Ok(Ran::Looked(Standing::Halted));
        }
        if let Some(at) = state.retry_at.filter(|at| n.now() < *at) {
            let last = state.last_change.as_ref().and_then(|o| o.why.clone());
            let why = format!(
                "{} change(s) aborted in a row (the last: {}); the next try is in {} s",
                state.abort_streak,
                last.unwrap_or_default(),
                at - n.now()
            );
            return Ok(Self::stood(state, Standing::Waiting, why));
        }
        if let (Some(to), Some(api)) = (state.target.clone(), state.waiting_for.clone()) {
            return self.wait_turn(state, &current, &to, &api).await;
        }
        let api = target::upstream(&self.cluster.apiserver_version().await?);
        state.saw(&api.to_string(), n.now());
        if plan::same_release(&current.to_string(), &api.to_string()) {
            self.self_check(state).await;
            let why = format!("kubelet {current}, the API server's release");
            return Ok(Self::stood(state, Standing::UpToDate, why));
        }
        let policy = match self.cluster.policy().await {
            Ok(p) => p,
            Err(e) if e.class() == ErrorClass::Refused => {
                return Ok(Self::stood(state, Standing::Refused, e.to_string()));
            }
            Err(e) => return Err(e),
        };
        let (to, apiserver) = match self.decide(state, &current, &policy).await? {
            Ok(due) => due,
            Err(ran) => return Ok(ran),
        };
        if state.checked.as_deref() != Some(&to.to_string()) {
            // Can this node run it at all? Found now, before a place is
            // taken, not after the node was cordoned and drained.
            if let Err(e) = n.check(&to.to_string()).await {
                let standing = match e.class() {
                    ErrorClass::Retryable => Standing::Waiting,
                    _ => Standing::Refused,
                };
                let why = format!("kubelet {current} -> {to}: {e}");
                return Ok(Self::stood(state, standing, why));
            }
            state.checked = Some(to.to_string());
        }
        state.target = Some(to.to_string());
        state.waiting_for = Some(apiserver.to_string());
        self.try_take(state, &current, &to, &apiserver, &policy)
            .await
    }

    /// Rules 1-5 of [`super::target`] over the looks kept in `state`:
    /// `Ok((to, apiserver))` when a change is due, else how the node
    /// stands (`Err`, already recorded).
    async fn decide(
        &self,
        state: &mut FollowState,
        current: &KubeVersion,
        policy: &Policy,
    ) -> Result<std::result::Result<(KubeVersion, KubeVersion), Ran>> {
        let (minor, apiserver) = match self.intent(state, current, policy) {
            Ok(m) => m,
            Err(ran) => return Ok(Err(ran)),
        };
        let offers = self.node.offers().await?;
        match target::pick(current, minor, &apiserver, offers.as_deref()) {
            Ok(Some(to)) => Ok(Ok((to, apiserver))),
            Ok(None) => {
                let why = format!("kubelet {current}: nothing newer to take within {minor}");
                Ok(Err(Self::stood(state, Standing::UpToDate, why)))
            }
            Err(why) => Ok(Err(Self::stood(state, Standing::Refused, why))),
        }
    }

    /// Rules 1-3: the minor to move within and the API server's release.
    fn intent(
        &self,
        state: &mut FollowState,
        current: &KubeVersion,
        policy: &Policy,
    ) -> std::result::Result<(MinorVersion, KubeVersion), Ran> {
        let seen: Vec<KubeVersion> = state
            .seen
            .iter()
            .filter_map(|v| KubeVersion::parse(v).ok())
            .collect();
        match target::intent(current, &seen, self.settings.stable_checks, policy.minor) {
            Intent::Settling { why } => Err(Self::stood(state, Standing::Settling, why)),
            Intent::UpToDate { why } => Err(Self::stood(state, Standing::UpToDate, why)),
            Intent::AwaitOperator { why } => {
                Err(Self::stood(state, Standing::AwaitingOperator, why))
            }
            Intent::Refuse { why } => Err(Self::stood(state, Standing::Refused, why)),
            Intent::Move { minor, apiserver } => Ok((minor, apiserver)),
        }
    }

    /// A waiting run: the change decided by earlier runs, checked against
    /// the operator's word as it is now (no new look at the API server:
    /// the take looks at every one), and the lease.
    async fn wait_turn(
        &self,
        state: &mut FollowState,
        current: &KubeVersion,
        to: &str,
        api: &str,
    ) -> Result<Ran> {
        let policy = match self.cluster.policy().await {
            Ok(p) => p,
            Err(e) if e.class() == ErrorClass::Refused => {
                return Ok(Self::stood(state, Standing::Refused, e.to_string()));
            }
            Err(e) => return Err(e),
        };
        let to = KubeVersion::parse(to).map_err(Error::internal)?;
        let same = match self.intent(state, current, &policy) {
            Ok((minor, apiserver)) => {
                minor == MinorVersion::of(&to) && apiserver.to_string() == api
            }
            Err(ran) => return Ok(ran),
        };
        if !same {
            let why = format!(
                "the operator's word changed since kubelet {current} -> {to} was due; looking again"
            );
            return Ok(Self::stood(state, Standing::Settling, why));
        }
        let api = KubeVersion::parse(api).map_err(Error::internal)?;
        self.try_take(state, current, &to, &api, &policy).await
    }

    /// The lease, and a take when it grants one.
    async fn try_take(
        &self,
        state: &mut FollowState,
        current: &KubeVersion,
        to: &KubeVersion,
        api: &KubeVersion,
        policy: &Policy,
    ) -> Result<Ran> {
        let view = self.cluster.lease().await?;
        let me = self.cluster.node_name();
        let duration = self.settings.ready_timeout.as_secs();
        match lease::place(&view, me, policy, self.node.now(), duration) {
            Grant::Wait { why } => {
                let why = format!("kubelet {current} -> {to} waits: {why}");
                Ok(Self::stood(state, Standing::Waiting, why))
            }
            Grant::HaltedHere { why } => Ok(Self::stood(state, Standing::Halted, why)),
            Grant::Held | Grant::Take => self.take(state, current, to, api, policy, view).await,
        }
    }

    /// Every API server at `api` (each asked at its own address where
    /// their Endpoints can be read, else through the load balancer once
    /// more); `Err(why)` when not.
    async fn servers_agree(
        &self,
        state: &mut FollowState,
        api: &KubeVersion,
    ) -> Result<std::result::Result<(), String>> {
        let answers = match self.cluster.apiserver_versions().await? {
            Some(sv) => sv.answers,
            None => vec![(
                "the kubeconfig's server".to_string(),
                Ok(self.cluster.apiserver_version().await?),
            )],
        };
        for (at, answer) in answers {
            match answer.map(|v| target::upstream(&v)) {
                Ok(v) if v == *api => {}
                Ok(v) => {
                    state.saw(&v.to_string(), self.node.now());
                    return Ok(Err(format!(
                        "the API server at {at} runs {v}, not {api}: the control plane is still changing"
                    )));
                }
                Err(e) => {
                    return Ok(Err(format!(
                        "the API server at {at} did not answer /version ({e}): not every API server is known to run {api}"
                    )));
                }
            }
        }
        Ok(Ok(()))
    }

    /// Takes the place the lease `view` shows free for `current` -> `to`
    /// (its compare-and-swap straight after the read, so that losing the
    /// race to another node costs one request), then makes sure the change
    /// may go ([`Self::unfit`]; if not, the place is given back at once),
    /// and carries it.
    async fn take(
        &self,
        state: &mut FollowState,
        current: &KubeVersion,
        to: &KubeVersion,
        api: &KubeVersion,
        policy: &Policy,
        view: lease::LeaseView,
    ) -> Result<Ran> {
        let (c, n) = (self.cluster, self.node);
        let me = c.node_name().to_string();
        let (from, now) = (current.to_string(), n.now());
        let taken = lease::take(&view, &me, &from, &to.to_string(), now).map_err(Error::refused)?;
        if !c.write_lease(&taken).await? {
            let why = format!(
                "kubelet {current} -> {to} waits: another node wrote the lease at the same moment; looking again next run"
            );
            return Ok(Self::stood(state, Standing::Waiting, why));
        }
        let unfit = self.unfit(state, current, to, api, policy).await;
        if !matches!(unfit, Ok(None)) {
            self.own_write(|v| lease::removal(v, &me)).await?;
            info!(
                step = STEP,
                "the place taken in the follow lease is given back: the change may not go now"
            );
            return unfit.map(|ran| ran.expect("unfit"));
        }
        let change = Change {
            node: me,
            from,
            to: to.to_string(),
            kind: target::kind(current, to),
            backend: self.settings.backend,
            phase: Phase::Taken,
            started_at: now,
            restarted_at: None,
            cordoned: false,
            previous_image: None,
            why: None,
            delete_emptydir_data: policy.delete_emptydir_data,
        };
        self.files.save_change(&change)?;
        state.waiting_for = None;
        state.reported_not_ready = false;
        info!(message_id = message_ids::FOLLOW_STARTED, step = STEP, from = %change.from, to = %change.to,
            kind = change.kind.name(), apiserver = %api, "kubelet change started: this node holds the follow lease");
        let what = format!(
            "node-bootstrap changes the kubelet {} -> {} ({} release)",
            change.from,
            change.to,
            change.kind.name()
        );
        c.event(EventKind::Normal, "KubeletChangeStarted", &what)
            .await;
        self.carry(change, state).await
    }

    /// Why the change may not go now, as how the node stands (`None`: it
    /// may): not every API server runs `api`; this node's Node not fit;
    /// (minor) a pod the drain could not move.
    async fn unfit(
        &self,
        state: &mut FollowState,
        current: &KubeVersion,
        to: &KubeVersion,
        api: &KubeVersion,
        policy: &Policy,
    ) -> Result<Option<Ran>> {
        let c = self.cluster;
        if let Err(why) = self.servers_agree(state, api).await? {
            return Ok(Some(Self::stood(state, Standing::Settling, why)));
        }
        let own = c
            .own_node()
            .await
            .map_err(|w| Error::retryable(format!("this node's Node cannot be read: {w}")))?;
        let waits = |why: String| format!("kubelet {current} -> {to} waits: {why}");
        if let Err(why) = lease::node_fit(&own) {
            return Ok(Some(Self::stood(state, Standing::Waiting, waits(why))));
        }
        if target::kind(current, to) == target::Kind::Minor
            && let Err(why) = c.drain_plan(policy.delete_emptydir_data).await?
        {
            let why = waits(format!("the drain could not go on: {why}"));
            return Ok(Some(Self::stood(state, Standing::Waiting, why)));
        }
        Ok(None)
    }

    /// A halted node stays halted while the lease still shows it so.
    async fn halt_cleared(&self, state: &mut FollowState) -> Result<bool> {
        let view = self.cluster.lease().await?;
        let me = self.cluster.node_name();
        if view
            .entry(me)
            .is_some_and(|e| e.state == lease::State::Halted)
        {
            let why = state.halted.as_ref().and_then(|h| h.why.clone());
            Self::stand(state, Standing::Halted, why);
            return Ok(false);
        }
        info!(
            step = STEP,
            "the operator cleared this node's halt: following again"
        );
        state.halted = None;
        Ok(true)
    }

    /// An up-to-date node says in the lease when its own Node is not
    /// Ready, and takes it back when it is again (a write only when that
    /// changes): what `maxNotReady` counts.
    async fn self_check(&self, state: &mut FollowState) {
        let own = match self.cluster.own_node().await {
            Ok(own) => own,
            Err(why) => {
                warn!(step = STEP, error = %why, "cannot read this node's Node");
                return;
            }
        };
        let me = self.cluster.node_name();
        let now = self.node.now();
        let written = if !own.ready && !state.reported_not_ready {
            let why = own.detail.clone().unwrap_or_else(|| "not Ready".into());
            self.own_write(|v| {
                lease::report_not_ready(v, me, &why, now)
                    .and_then(|r| r.entries.get(me).cloned())
                    .map(EntryPatch::Set)
            })
            .await
            .map(|_| state.reported_not_ready = true)
        } else if own.ready && state.reported_not_ready {
            self.own_write(|v| {
                v.entry(me)
                    .filter(|e| e.state == lease::State::NotReady)
                    .and_then(|_| lease::removal(v, me))
            })
            .await
            .map(|_| state.reported_not_ready = false)
        } else {
            return;
        };
        match written {
            Ok(()) => info!(
                step = STEP,
                ready = own.ready,
                "this node's readiness said in the follow lease"
            ),
            Err(e) => {
                warn!(step = STEP, error = %e, "cannot say this node's readiness in the follow lease")
            }
        }
    }

    /// Writes this node's own key (module docs of [`super::lease`]): the
    /// patch `edit` gives for the lease as read (`None`: nothing to
    /// write), again when the key changed meanwhile (a few times, after a
    /// short pause). Whether it wrote.
    async fn own_write(
        &self,
        edit: impl Fn(&lease::LeaseView) -> Option<EntryPatch>,
    ) -> Result<bool> {
        let me = self.cluster.node_name();
        for attempt in 0..CONFLICTS {
            if attempt > 0 {
                self.node.sleep(conflict_pause()).await;
            }
            let view = self.cluster.lease().await?;
            let Some(patch) = edit(&view) else {
                return Ok(false);
            };
            if self.cluster.patch_entry(me, &patch).await? {
                return Ok(true);
            }
        }
        Err(Error::retryable(format!(
            "this node's key of the follow lease kept changing under its write ({CONFLICTS} tries)"
        )))
    }
}

#[cfg(test)]
mod tests;
