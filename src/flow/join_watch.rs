//! After kubelet.env: `run` watches the join. The unit has its `READY=1`
//! (kubelet runs), the run's outcome is published; the same process then
//! asks the API server about this node ([`crate::join::observe`]) every
//! [`POLL`] until the Node is Ready in the cluster or
//! `cluster.join_watch_secs` have passed since kubelet.env.
//!
//! Why here and not in a unit of its own: `k8s-node-bootstrap.service` is
//! `Type=notify` with `RemainAfterExit=`, so a main process that goes on
//! after `READY=1` holds nothing back (kubelet started at `READY=1`) and
//! nothing waits on its exit; it runs exactly once per bootstrap, right
//! when the join starts, on every node the Ignition config makes, with no
//! unit to deliver, enable or order. A shutdown stops it like any
//! service (SIGTERM, a clean exit for systemd).
//!
//! What is recorded, and when the state changes (the state's name, as
//! `status` and the metrics name it): a journal line (`STEP=join`,
//! `JOIN_STATE`, `NODE`), the unit's status line (`systemctl status
//! k8s-node-bootstrap`: `kubelet.env is in place; node worker-1: Ready
//! (…)`), and the metrics (`node_bootstrap_join_state`, published at once,
//! without fsync); at the end, durably. Three events carry a `MESSAGE_ID`:
//! [`message_ids::NODE_READY`], [`message_ids::NODE_NOT_READY`] (the watch
//! ended first) and [`message_ids::CERTIFICATE_REQUEST_REFUSED`] (the
//! kubelet's request denied, or approved and not signed). The watch never
//! fails: the run's exit code stays 0 (a non-zero exit after `READY=1`
//! would mark the unit failed for a node whose bootstrap is done).

use crate::config::Config;
use crate::fsutil::Durability;
use crate::join::{self, Observation, assess::JoinState};
use crate::message_ids;
use crate::systemd::notify::Notifier;
use crate::textfile::{Target, publish::publish_or_warn};
use std::time::{Duration, Instant};
use tracing::{info, warn};

/// How often the watch asks.
pub const POLL: Duration = Duration::from_secs(5);

/// Watches the join (module docs); returns when the node is Ready or the
/// watch's time is up. `kubelet_env_at`: when kubelet.env was written.
pub async fn watch(config: &Config, notifier: &Notifier, kubelet_env_at: Instant) {
    let limit = config.cluster.join_watch;
    if limit.is_zero() {
        return;
    }
    let bus = crate::systemd::agent_bus().await.ok();
    let name = join::node_name::of_this_node(&config.paths, bus.as_ref()).await;
    let inputs = config.join_inputs();
    let target = Target::from_config(config);
    info!(step = "join", node = %name, limit_secs = limit.as_secs(),
        "watching the join: asking the API server about this node until it is Ready in the cluster");
    let mut last: Option<&'static str> = None;
    loop {
        let obs = join::observe(&inputs, &name, config.cluster.api_timeout).await;
        let state = obs.state_name();
        if last != Some(state) {
            changed(&obs, notifier);
            crate::metrics::record::join_observed(state, obs.is_ready());
            publish_or_warn(&target, Durability::AtomicOnly);
            last = Some(state);
        }
        let waited = kubelet_env_at.elapsed();
        if obs.is_ready() {
            let (kubelet, runtime) = match &obs.state {
                Some(JoinState::Registered(n)) => {
                    (n.kubelet_version.clone(), n.container_runtime.clone())
                }
                _ => Default::default(),
            };
            info!(message_id = message_ids::NODE_READY, step = "join", node = %obs.node_name,
                kubelet_version = %kubelet, container_runtime = %runtime, after_secs = waited.as_secs(),
                "node Ready in the cluster");
            break;
        }
        if waited >= limit {
            warn!(message_id = message_ids::NODE_NOT_READY, step = "join", node = %obs.node_name,
                join_state = state, detail = %obs.describe(), limit_secs = limit.as_secs(),
                "the node is not Ready in the cluster; no longer watching (cluster.join_watch_secs)");
            break;
        }
        tokio::time::sleep(POLL.min(limit - waited)).await;
    }
    publish_or_warn(&target, Durability::Durable);
}

/// A new state: the journal, the unit's status line.
fn changed(obs: &Observation, notifier: &Notifier) {
    let state = obs.state_name();
    let words = obs.describe();
    notifier.status(&format!("{}; {words}", super::node::READY_STATUS));
    let refused = matches!(&obs.state, Some(JoinState::AwaitingCertificate { csr: Some(c) })
        if matches!(c.state, join::assess::CsrState::Denied | join::assess::CsrState::Failed));
    if refused {
        let csr = match &obs.state {
            Some(JoinState::AwaitingCertificate { csr: Some(c) }) => c.name.clone(),
            _ => String::new(),
        };
        warn!(message_id = message_ids::CERTIFICATE_REQUEST_REFUSED, step = "join",
            node = %obs.node_name, csr = %csr, join_state = state, detail = %words,
            "the kubelet's certificate request was refused");
    } else {
        info!(step = "join", node = %obs.node_name, join_state = state,
            asked_as = obs.asked_as.name(), detail = %words, "join state");
    }
}
