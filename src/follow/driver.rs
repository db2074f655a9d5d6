//! The driver: one `follow` run. It resumes a change the record shows
//! under way; else it looks at the cluster, decides ([`super::target`],
//! [`super::lease`]) and, when a change is due and a place in the lease
//! is free, takes it and carries the change through ([`super::plan`]),
//! recording each phase before its work. What it decided, and why it
//! waits, goes to `state.json` for `status` and the metrics.

use super::lease::{self, Grant, LeaseView};
use super::plan::{self, Action, Backend, Change, Phase, Verdict};
use super::record::{ChangeResult, Files, FollowState, Outcome, Set, Standing};
use super::seams::{EventKind, Seams};
use super::target::{self, Intent};
use crate::cluster::version::KubeVersion;
use crate::error::{Error, Result};
use crate::message_ids;
use tracing::{error, info, warn};

/// The settings a run reads (of `follow` and `kubelet`).
#[derive(Debug, Clone)]
pub struct Settings {
    pub stable_checks: usize,
    pub ready_timeout: std::time::Duration,
    pub poll: std::time::Duration,
    pub backend: Backend,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ran {
    /// Nothing changed; where following stands.
    Looked(Standing),
    /// A change ended (succeeded, rolled back, aborted).
    Changed(ChangeResult),
}

pub struct Driver<'a, S: Seams> {
    pub seams: &'a S,
    pub files: Files,
    pub settings: Settings,
}

const STEP: &str = "follow";

impl<S: Seams> Driver<'_, S> {
    /// One run (module docs).
    pub async fn run(&self) -> Result<Ran> {
        let mut state = self.files.load_state()?;
        if let Some(change) = self.files.load_change()? {
            info!(step = STEP, from = %change.from, to = %change.to, phase = change.phase.name(),
                "resuming the change under way");
            return self.carry(change, &mut state).await;
        }
        let standing = self.look(&mut state).await;
        match standing {
            Ok(Some((to, apiserver))) => {
                let started = self.start(&mut state, to, &apiserver).await;
                if let Err(e) = &started {
                    // What it looked at (the API server's answers) is kept,
                    // and why it could not go on.
                    state.why = Some(e.to_string());
                    self.files.save_state(&state, false)?;
                }
                started
            }
            Ok(None) => {
                self.files.save_state(&state, false)?;
                Ok(Ran::Looked(state.standing))
            }
            Err(e) => {
                state.standing = Standing::Waiting;
                state.why = Some(e.to_string());
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

    /// Looks at the cluster; `Some((to, apiserver))` when a change is due.
    async fn look(&self, state: &mut FollowState) -> Result<Option<(KubeVersion, KubeVersion)>> {
        let s = self.seams;
        let current = s.current_version()?;
        state.current = Some(current.to_string());
        let api = s.apiserver_version().await?;
        state.saw(&api.to_string(), s.now());
        if state.halted.is_some() && !self.halt_cleared(state).await? {
            return Ok(None);
        }
        let policy = match s.policy().await {
            Ok(p) => p,
            Err(e) => {
                Self::stand(state, Standing::Refused, Some(e.to_string()));
                return Ok(None);
            }
        };
        let seen: Vec<KubeVersion> = state
            .seen
            .iter()
            .filter_map(|v| KubeVersion::parse(v).ok())
            .collect();
        let (minor, apiserver) =
            match target::intent(&current, &seen, self.settings.stable_checks, policy.minor) {
                Intent::Settling { why } => return self.stood(state, Standing::Settling, why),
                Intent::UpToDate { why } => return self.stood(state, Standing::UpToDate, why),
                Intent::AwaitOperator { why } => {
                    return self.stood(state, Standing::AwaitingOperator, why);
                }
                Intent::Refuse { why } => return self.stood(state, Standing::Refused, why),
                Intent::Move { minor, apiserver } => (minor, apiserver),
            };
        let offers = s.offers().await?;
        let to = match target::pick(&current, minor, &apiserver, offers.as_deref()) {
            Ok(Some(to)) => to,
            Ok(None) => {
                let why = format!("kubelet {current}: nothing newer to take within {minor}");
                return self.stood(state, Standing::UpToDate, why);
            }
            Err(why) => return self.stood(state, Standing::Refused, why),
        };
        state.target = Some(to.to_string());
        Ok(Some((to, apiserver)))
    }

    fn stood(
        &self,
        state: &mut FollowState,
        standing: Standing,
        why: String,
    ) -> Result<Option<(KubeVersion, KubeVersion)>> {
        if standing == Standing::UpToDate {
            state.target = state.current.clone();
        }
        Self::stand(state, standing, Some(why));
        Ok(None)
    }

    /// A halted node stays halted while the lease still shows it so.
    async fn halt_cleared(&self, state: &mut FollowState) -> Result<bool> {
        let view = self.seams.lease().await?;
        let me = self.seams.node_name();
        if view.holder(me).is_some_and(|h| h.halted.is_some()) {
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

    /// Takes a place in the lease for the change to `to` and carries it.
    async fn start(
        &self,
        state: &mut FollowState,
        to: KubeVersion,
        api: &KubeVersion,
    ) -> Result<Ran> {
        let s = self.seams;
        let me = s.node_name().to_string();
        let from = state.current.clone().unwrap_or_default();
        let policy = s.policy().await?;
        let view = s.lease().await?;
        let ready = s.readiness().await?;
        let duration = self.settings.ready_timeout.as_secs();
        let why = match lease::may_take(&view, &me, &policy, &ready, s.now(), duration) {
            Grant::Take | Grant::Held => {
                let taken = lease::take(&view, &me, &from, &to.to_string(), s.now());
                if s.write_lease(&taken).await? {
                    None
                } else {
                    Some(
                        "another node wrote the lease at the same moment; looking again next run"
                            .to_string(),
                    )
                }
            }
            Grant::Wait { why } => Some(why),
        };
        if let Some(why) = why {
            Self::stand(
                state,
                Standing::Waiting,
                Some(format!("kubelet {from} -> {to} waits: {why}")),
            );
            self.files.save_state(state, false)?;
            return Ok(Ran::Looked(Standing::Waiting));
        }
        let kind = target::kind(&KubeVersion::parse(&from).map_err(Error::internal)?, &to);
        let change = Change {
            node: me,
            from,
            to: to.to_string(),
            kind,
            backend: self.settings.backend,
            phase: Phase::Taken,
            started_at: s.now(),
            restarted_at: None,
            cordoned: false,
            previous_image: None,
            why: None,
        };
        self.files.save_change(&change)?;
        info!(message_id = message_ids::FOLLOW_STARTED, step = STEP, from = %change.from, to = %change.to,
            kind = kind.name(), apiserver = %api, "kubelet change started: this node holds the follow lease");
        s.event(
            EventKind::Normal,
            "KubeletChangeStarted",
            &format!(
                "node-bootstrap changes the kubelet {} -> {} ({} release)",
                change.from,
                change.to,
                kind.name()
            ),
        )
        .await;
        self.carry(change, state).await
    }

    /// Carries `change` through its phases to its end.
    async fn carry(&self, mut change: Change, state: &mut FollowState) -> Result<Ran> {
        Self::stand(
            state,
            Standing::Changing,
            Some(format!(
                "kubelet {} -> {}: {}",
                change.from,
                change.to,
                change.phase.name()
            )),
        );
        state.target = Some(change.to.clone());
        self.files.save_state(state, false)?;
        let s = self.seams;
        for _ in 0..16 {
            match plan::next(&change) {
                Action::Cordon => {
                    s.set_unschedulable(true).await?;
                    change.cordoned = true;
                }
                Action::Drain => {
                    let minor = KubeVersion::parse(&change.to)
                        .map_err(Error::internal)?
                        .minor;
                    if let Err(e) = s.drain(minor).await {
                        return self.abort(change, state, e).await;
                    }
                    change.phase = Phase::Drained;
                }
                Action::Prepare => {
                    s.prepare(&mut change).await?;
                    change.phase = Phase::Prepared;
                }
                Action::Switch => {
                    self.switch(&mut change, Set::Next, Phase::Switching, Phase::Switched)
                        .await?
                }
                Action::Verify => match self.wait_back(&change, &change.to).await? {
                    Verdict::Back => return self.succeeded(change, state).await,
                    Verdict::Failed(why) | Verdict::Waiting(why) => {
                        error!(step = STEP, from = %change.from, to = %change.to, why = %why, "the changed kubelet did not come back: rolling back");
                        change.why = Some(why);
                        change.phase = Phase::RollingBack;
                    }
                },
                Action::RollBack => {
                    self.switch(
                        &mut change,
                        Set::Previous,
                        Phase::RollingBack,
                        Phase::RolledBack,
                    )
                    .await?
                }
                Action::Halt => return self.halt(change, state).await,
            }
            self.files.save_change(&change)?;
            self.renew(&change, None).await;
        }
        Err(Error::internal(
            "the follow change made no progress after 16 actions",
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
        self.seams.put_in_place(change, set).await?;
        self.seams.restart_kubelet().await?;
        change.restarted_at = Some(self.seams.now());
        change.phase = after;
        info!(step = STEP, from = %change.from, to = %change.to, phase = after.name(), "kubelet restarted");
        Ok(())
    }

    /// Waits until the restarted kubelet is back as `expected`, or the
    /// deadline passes.
    async fn wait_back(&self, change: &Change, expected: &str) -> Result<Verdict> {
        let s = self.seams;
        let at = change.restarted_at.unwrap_or_else(|| s.now());
        let deadline = self.settings.ready_timeout.as_secs();
        let mut last_renewal = s.now();
        loop {
            let look = s.node().await;
            match plan::verify(
                expected,
                at,
                look.as_ref().map_err(String::as_str),
                s.now(),
                deadline,
            ) {
                Verdict::Waiting(w) => {
                    tracing::debug!(step = STEP, waiting = %w, "waiting for the kubelet");
                    if s.now() >= last_renewal + 30 {
                        self.renew(change, None).await;
                        last_renewal = s.now();
                    }
                    s.sleep(self.settings.poll).await;
                }
                done => return Ok(done),
            }
        }
    }

    /// Renews (or marks halted) this node's place; a failure is logged:
    /// the place stays the node's either way.
    async fn renew(&self, change: &Change, halted: Option<&str>) {
        let me = lease::Holder {
            node: change.node.clone(),
            from: change.from.clone(),
            to: change.to.clone(),
            since: change.started_at,
            renewed: change.started_at,
            halted: None,
        };
        let s = self.seams;
        let r = self
            .rewrite_lease(|v| lease::renew(v, &me, s.now(), halted))
            .await;
        if let Err(e) = r {
            warn!(step = STEP, error = %e, "cannot renew this node's place in the follow lease");
        }
    }

    /// Reads, edits and writes the lease, again on a conflict (a few times).
    async fn rewrite_lease(&self, edit: impl Fn(&LeaseView) -> LeaseView) -> Result<()> {
        for _ in 0..5 {
            let view = self.seams.lease().await?;
            if self.seams.write_lease(&edit(&view)).await? {
                return Ok(());
            }
        }
        Err(Error::retryable(
            "the follow lease kept changing under this node's write (5 conflicts)",
        ))
    }

    fn outcome(&self, change: &Change, result: ChangeResult, why: Option<String>) -> Outcome {
        let now = self.seams.now();
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
        let s = self.seams;
        if change.cordoned {
            s.set_unschedulable(false).await?;
        }
        self.rewrite_lease(|v| lease::release(v, &change.node))
            .await?;
        let o = self.outcome(&change, ChangeResult::Succeeded, None);
        info!(message_id = message_ids::FOLLOW_SUCCEEDED, step = STEP, from = %change.from, to = %change.to,
            back_after_secs = o.back_after_secs.unwrap_or(0), "kubelet changed: the Node is Ready with the new version");
        s.event(
            EventKind::Normal,
            "KubeletChanged",
            &format!(
                "the kubelet is {} (was {}); the Node is Ready",
                change.to, change.from
            ),
        )
        .await;
        state.current = Some(change.to.clone());
        state.ended(o);
        Self::stand(
            state,
            Standing::UpToDate,
            Some(format!("kubelet {}", change.to)),
        );
        self.files.save_state(state, true)?;
        self.files.end_change()?;
        Ok(Ran::Changed(ChangeResult::Succeeded))
    }

    /// The previous kubelet is back in place: wait for it (bounded), mark
    /// the lease halted, tell everyone.
    async fn halt(&self, change: Change, state: &mut FollowState) -> Result<Ran> {
        let s = self.seams;
        let why = change
            .why
            .clone()
            .unwrap_or_else(|| "the change was rolled back".into());
        let back = self.wait_back(&change, &change.from).await?;
        let back_says = match &back {
            Verdict::Back => format!("the previous kubelet {} is Ready again", change.from),
            Verdict::Failed(w) | Verdict::Waiting(w) => format!(
                "the previous kubelet {} is not Ready either: {w}",
                change.from
            ),
        };
        self.renew(&change, Some(&why)).await;
        if change.cordoned && back == Verdict::Back {
            s.set_unschedulable(false).await?;
        }
        error!(message_id = message_ids::FOLLOW_ROLLED_BACK, step = STEP, from = %change.from, to = %change.to,
            why = %why, "kubelet change rolled back ({back_says}); the rollout halts at this node");
        s.event(EventKind::Warning, "KubeletChangeRolledBack",
            &format!("kubelet {} -> {} rolled back: {why}; {back_says}; the follow lease keeps this node, halting the rollout", change.from, change.to)).await;
        let o = self.outcome(&change, ChangeResult::RolledBack, Some(why.clone()));
        state.current = Some(change.from.clone());
        state.halted = Some(o.clone());
        state.ended(o);
        Self::stand(
            state,
            Standing::Halted,
            Some(format!(
                "kubelet {} -> {} rolled back: {why}",
                change.from, change.to
            )),
        );
        self.files.save_state(state, true)?;
        self.files.end_change()?;
        Ok(Ran::Changed(ChangeResult::RolledBack))
    }

    /// The drain could not finish: nothing changed on the node; uncordon,
    /// release, say why.
    async fn abort(&self, change: Change, state: &mut FollowState, e: Error) -> Result<Ran> {
        let s = self.seams;
        warn!(step = STEP, from = %change.from, to = %change.to, error = %e, "the drain did not finish: the change stops before anything changed");
        if change.cordoned {
            s.set_unschedulable(false).await?;
        }
        self.rewrite_lease(|v| lease::release(v, &change.node))
            .await?;
        s.event(
            EventKind::Warning,
            "KubeletChangeAborted",
            &format!("kubelet {} -> {} not started: {e}", change.from, change.to),
        )
        .await;
        state.ended(self.outcome(&change, ChangeResult::Aborted, Some(e.to_string())));
        Self::stand(
            state,
            Standing::Waiting,
            Some(format!(
                "the drain for kubelet {} did not finish: {e}",
                change.to
            )),
        );
        self.files.save_state(state, true)?;
        self.files.end_change()?;
        Ok(Ran::Changed(ChangeResult::Aborted))
    }
}

#[cfg(test)]
mod tests;
