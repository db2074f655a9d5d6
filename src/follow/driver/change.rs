//! A change carried through its phases ([`super::plan`]) to one of its
//! three ends, each a release of this node's place or a halt:
//!
//! - **succeeded**: the Node Ready with the new version; uncordoned (when
//!   the change cordoned it), the place released;
//! - **aborted**: something failed before the kubelet's files changed (the
//!   drain, the preparation, the place removed by the operator): nothing
//!   on the node changed, uncordoned, released; the next try waits longer
//!   after each ([`super::abort_backoff`]);
//! - **halted**: the switch failed, or the new kubelet did not come back:
//!   the previous one put back and restarted, the place kept and marked
//!   halted, so no other node starts. The halt is written before the
//!   change's record goes: a write that fails is tried again at the next
//!   run, and until then the place is still held.
//!
//! Before each action the place is renewed; a place the operator removed
//! is never put back past `maxChanging` or a halt.

use super::{Driver, Ran, STEP};
use crate::cluster::version::KubeVersion;
use crate::error::{Error, Result};
use crate::follow::lease::{self, Entry};
use crate::follow::plan::{self, Action, Change, Phase, Verdict};
use crate::follow::record::{ChangeResult, FollowState, Outcome, Set, Standing};
use crate::follow::seams::{ClusterSeam, EventKind, NodeSeam};
use crate::message_ids;
use tracing::{error, info, warn};

/// How often a long wait renews this node's place.
const RENEW_EVERY: u64 = 30;

impl<C: ClusterSeam, N: NodeSeam> Driver<'_, C, N> {
    /// Carries `change` through its phases to its end.
    pub(super) async fn carry(&self, mut change: Change, state: &mut FollowState) -> Result<Ran> {
        let doing = format!(
            "kubelet {} -> {}: {}",
            change.from,
            change.to,
            change.phase.name()
        );
        Self::stand(state, Standing::Changing, Some(doing));
        state.target = Some(change.to.clone());
        self.files.save_state(state, false)?;
        let (c, n) = (self.cluster, self.node);
        for _ in 0..24 {
            if let Some(ran) = self.keep_place(&change, state).await? {
                return Ok(ran);
            }
            match plan::next(&change) {
                Action::Cordon => {
                    c.set_unschedulable(true).await?;
                    change.cordoned = true;
                }
                Action::Drain => {
                    if let Err(e) = self.drain(&change).await {
                        return self.abort(change, state, e.to_string()).await;
                    }
                    change.phase = Phase::Drained;
                }
                Action::Prepare => {
                    if let Err(e) = n.prepare(&mut change).await {
                        let why = format!("preparing the kubelet's files failed: {e}");
                        return self.abort(change, state, why).await;
                    }
                    change.phase = Phase::Prepared;
                }
                Action::Switch => {
                    if let Err(e) = self
                        .switch(&mut change, Set::Next, Phase::Switching, Phase::Switched)
                        .await
                    {
                        error!(step = STEP, from = %change.from, to = %change.to, error = %e, "the switch failed: rolling back");
                        change.why =
                            Some(format!("the switch to kubelet {} failed: {e}", change.to));
                        change.phase = Phase::RollingBack;
                    }
                }
                Action::Verify => match self.wait_back(&change, &change.to).await {
                    Verdict::Back => return self.succeeded(change, state).await,
                    Verdict::Failed(why) | Verdict::Waiting(why) => {
                        error!(step = STEP, from = %change.from, to = %change.to, why = %why, "the changed kubelet did not come back: rolling back");
                        change.why = Some(why);
                        change.phase = Phase::RollingBack;
                    }
                    Verdict::Unreachable(why) => return Err(Error::retryable(why)),
                },
                Action::RollBack => {
                    if let Err(e) = self
                        .switch(
                            &mut change,
                            Set::Previous,
                            Phase::RollingBack,
                            Phase::RolledBack,
                        )
                        .await
                    {
                        // The fleet stops here now; the rollback is tried
                        // again at the next run (and at boot).
                        let why = format!("rolling back to kubelet {} failed: {e}", change.from);
                        self.mark_halted(&change, &why).await?;
                        return Err(e.context(why));
                    }
                }
                Action::Halt => return self.halt(change, state).await,
            }
            self.files.save_change(&change)?;
        }
        Err(Error::internal(
            "the follow change made no progress after 24 actions",
        ))
    }

    /// Records `during`, puts set `set` in place, restarts the kubelet,
    /// records `after`.
    async fn switch(
        &self,
        change: &mut Change,
        set: Set,
        during: Phase,
        after: Phase,
    ) -> Result<()> {
        change.phase = during;
        self.files.save_change(change)?;
        self.node.put_in_place(change, set).await?;
        self.node.restart_kubelet().await?;
        change.restarted_at = Some(self.node.now());
        change.phase = after;
        info!(step = STEP, from = %change.from, to = %change.to, phase = after.name(), "kubelet restarted");
        Ok(())
    }

    /// This node's entry as its change has it.
    fn entry(change: &Change) -> Entry {
        Entry {
            state: lease::State::Changing,
            from: change.from.clone(),
            to: change.to.clone(),
            since: change.started_at,
            renewed: change.started_at,
            why: None,
        }
    }

    /// Makes sure this node still holds its place, renewing it when the
    /// last renewal is [`RENEW_EVERY`] old (a read, and rarely a write);
    /// when the operator removed it: before the kubelet's files changed,
    /// the change is aborted; after, the place is taken back only when one
    /// is free (`maxChanging`, no halt), else the run ends waiting for one
    /// (`Some`), the record kept.
    async fn keep_place(&self, change: &Change, state: &mut FollowState) -> Result<Option<Ran>> {
        let (c, now) = (self.cluster, self.node.now());
        for attempt in 0..5 {
            if attempt > 0 {
                self.node.sleep(super::conflict_pause()).await;
            }
            let view = c.lease().await?;
            let next = match view.entry(&change.node) {
                Some(e) if e.holds() && now < e.renewed + RENEW_EVERY => return Ok(None),
                Some(e) if e.holds() => {
                    let renewal = lease::renewal(&view, &change.node, now).expect("held");
                    if c.patch_entry(&change.node, &renewal).await? {
                        return Ok(None);
                    }
                    continue;
                }
                _ if matches!(
                    change.phase,
                    Phase::Taken | Phase::Drained | Phase::Prepared
                ) =>
                {
                    let why = "the operator removed this node's place in the follow lease before its kubelet changed".to_string();
                    return self.abort(change.clone(), state, why).await.map(Some);
                }
                _ => {
                    let policy = c.policy().await?;
                    if let Err(why) = lease::retake(&view, &change.node, &policy) {
                        let why = format!(
                            "kubelet {} -> {}: this node's place in the follow lease was removed at phase {}; it finishes once a place is free ({why})",
                            change.from,
                            change.to,
                            change.phase.name()
                        );
                        Self::stand(state, Standing::Waiting, Some(why));
                        return Ok(Some(Ran::Looked(Standing::Waiting)));
                    }
                    lease::put_back(&view, &change.node, Self::entry(change))
                }
            };
            if c.write_lease(&next).await? {
                return Ok(None);
            }
        }
        Err(Error::retryable(
            "the follow lease kept changing under this node's write (5 conflicts)",
        ))
    }

    /// Renews this node's place if it still has one; a failure is logged
    /// (the next action's [`Self::keep_place`] settles it).
    async fn renew_quietly(&self, change: &Change) {
        let (me, now) = (&change.node, self.node.now());
        if let Err(e) = self.own_write(|v| lease::renewal(v, me, now)).await {
            warn!(step = STEP, error = %e, "cannot renew this node's place in the follow lease");
        }
    }

    /// Evicts this node's pods in passes (module docs of
    /// [`crate::follow::drain`]) until none is left, bounded by
    /// `follow.drain_timeout_secs`, renewing the place meanwhile.
    async fn drain(&self, change: &Change) -> Result<()> {
        let (c, n) = (self.cluster, self.node);
        let minor = KubeVersion::parse(&change.to)
            .map_err(Error::internal)?
            .minor;
        let deadline = n.now() + self.settings.drain_timeout.as_secs();
        let mut renewed = n.now();
        loop {
            let plan = c
                .drain_plan(change.delete_emptydir_data)
                .await?
                .map_err(Error::refused)?;
            if plan.done() {
                return Ok(());
            }
            let mut waiting: Vec<String> =
                plan.terminating.iter().map(ToString::to_string).collect();
            for p in &plan.evict {
                if let Some(why) = c.evict(p, minor).await? {
                    waiting.push(format!("{p} ({why})"));
                }
            }
            if n.now() >= deadline {
                return Err(Error::retryable(format!(
                    "the drain did not finish within {} s (follow.drain_timeout_secs): still there or not allowed to go: {}",
                    self.settings.drain_timeout.as_secs(),
                    waiting.join(", ")
                )));
            }
            if n.now() >= renewed + RENEW_EVERY {
                self.renew_quietly(change).await;
                renewed = n.now();
            }
            n.sleep(self.settings.poll).await;
        }
    }

    /// Waits until the restarted kubelet is back as `expected`, or the
    /// deadline passes.
    async fn wait_back(&self, change: &Change, expected: &str) -> Verdict {
        let (c, n) = (self.cluster, self.node);
        let at = change.restarted_at.unwrap_or_else(|| n.now());
        let deadline = self.settings.ready_timeout.as_secs();
        let mut renewed = n.now();
        loop {
            let look = c.own_node().await;
            let look = look.as_ref().map_err(String::as_str);
            match plan::verify(expected, at, look, n.now(), deadline) {
                Verdict::Waiting(w) => {
                    tracing::debug!(step = STEP, waiting = %w, "waiting for the kubelet");
                    if n.now() >= renewed + RENEW_EVERY {
                        self.renew_quietly(change).await;
                        renewed = n.now();
                    }
                    n.sleep(self.settings.poll).await;
                }
                done => return done,
            }
        }
    }

    fn outcome(&self, change: &Change, result: ChangeResult, why: Option<String>) -> Outcome {
        let now = self.node.now();
        Outcome {
            from: change.from.clone(),
            to: change.to.clone(),
            kind: change.kind,
            result,
            why,
            started_at: change.started_at,
            ended_at: now,
            back_after_secs: (result == ChangeResult::Succeeded)
                .then(|| change.restarted_at.map(|r| now.saturating_sub(r)))
                .flatten(),
        }
    }

    async fn succeeded(&self, change: Change, state: &mut FollowState) -> Result<Ran> {
        let c = self.cluster;
        if change.cordoned {
            c.set_unschedulable(false).await?;
        }
        self.own_write(|v| lease::removal(v, &change.node)).await?;
        let o = self.outcome(&change, ChangeResult::Succeeded, None);
        info!(message_id = message_ids::FOLLOW_SUCCEEDED, step = STEP, from = %change.from, to = %change.to,
            back_after_secs = o.back_after_secs.unwrap_or(0), "kubelet changed: the Node is Ready with the new version");
        let what = format!(
            "the kubelet is {} (was {}); the Node is Ready",
            change.to, change.from
        );
        c.event(EventKind::Normal, "KubeletChanged", &what).await;
        state.current = Some(change.to.clone());
        state.ended(o);
        state.abort_streak = 0;
        state.retry_at = None;
        state.checked = None;
        let why = format!("kubelet {}", change.to);
        Self::stood(state, Standing::UpToDate, why);
        self.files.save_state(state, true)?;
        self.files.end_change()?;
        Ok(Ran::Changed(ChangeResult::Succeeded))
    }

    /// Marks this node's place halted with `why`, whatever its key holds
    /// (taking it back if it was removed: a halt is never lost).
    async fn mark_halted(&self, change: &Change, why: &str) -> Result<()> {
        let halted = lease::Entry {
            state: lease::State::Halted,
            why: Some(why.to_string()),
            renewed: self.node.now(),
            ..Self::entry(change)
        };
        let set = lease::EntryPatch::Set(halted);
        self.cluster
            .patch_entry(&change.node, &set)
            .await
            .map(|_| ())
            .map_err(|e| e.context("cannot mark the follow lease halted; the next run tries again"))
    }

    /// The previous kubelet is back in place: wait for it (bounded), mark
    /// the lease halted (a failure ends the run: the next one writes it),
    /// tell everyone.
    async fn halt(&self, change: Change, state: &mut FollowState) -> Result<Ran> {
        let c = self.cluster;
        let why = change
            .why
            .clone()
            .unwrap_or_else(|| "the change was rolled back".into());
        let back = self.wait_back(&change, &change.from).await;
        let back_says = match &back {
            Verdict::Back => format!("the previous kubelet {} is Ready again", change.from),
            Verdict::Failed(w) | Verdict::Waiting(w) | Verdict::Unreachable(w) => format!(
                "the previous kubelet {} is not Ready either: {w}; the node stays cordoned if the change cordoned it",
                change.from
            ),
        };
        self.mark_halted(&change, &why).await?;
        if change.cordoned && back == Verdict::Back {
            c.set_unschedulable(false).await?;
        }
        error!(message_id = message_ids::FOLLOW_ROLLED_BACK, step = STEP, from = %change.from, to = %change.to,
            why = %why, "kubelet change rolled back ({back_says}); the rollout halts at this node");
        let what = format!(
            "kubelet {} -> {} rolled back: {why}; {back_says}; the follow lease keeps this node, halting the rollout",
            change.from, change.to
        );
        c.event(EventKind::Warning, "KubeletChangeRolledBack", &what)
            .await;
        let o = self.outcome(&change, ChangeResult::RolledBack, Some(why.clone()));
        state.current = Some(change.from.clone());
        state.halted = Some(o.clone());
        state.ended(o);
        state.checked = None;
        let says = format!(
            "kubelet {} -> {} rolled back: {why}",
            change.from, change.to
        );
        Self::stood(state, Standing::Halted, says);
        self.files.save_state(state, true)?;
        self.files.end_change()?;
        Ok(Ran::Changed(ChangeResult::RolledBack))
    }

    /// Something failed before the kubelet's files changed: uncordon,
    /// release, say why, wait longer before the next try.
    async fn abort(&self, change: Change, state: &mut FollowState, why: String) -> Result<Ran> {
        let c = self.cluster;
        warn!(step = STEP, from = %change.from, to = %change.to, error = %why, "the change stops before the kubelet changed");
        if change.cordoned {
            c.set_unschedulable(false).await?;
        }
        self.own_write(|v| lease::removal(v, &change.node)).await?;
        let what = format!(
            "kubelet {} -> {} not started: {why}",
            change.from, change.to
        );
        c.event(EventKind::Warning, "KubeletChangeAborted", &what)
            .await;
        state.ended(self.outcome(&change, ChangeResult::Aborted, Some(why.clone())));
        state.abort_streak += 1;
        state.retry_at = Some(self.node.now() + super::abort_backoff(state.abort_streak));
        state.waiting_for = None;
        let says = format!(
            "kubelet {} -> {} stopped before the kubelet changed: {why}",
            change.from, change.to
        );
        Self::stood(state, Standing::Waiting, says);
        self.files.save_state(state, true)?;
        self.files.end_change()?;
        Ok(Ran::Changed(ChangeResult::Aborted))
    }
}
