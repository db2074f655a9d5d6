//! The join, seen from the node: once kubelet.env is written, whether the
//! cluster knows this node, asked of the API server with the node's own
//! identity (or, while TLS bootstrapping has not yet earned the kubelet
//! one, with the bootstrap token: where its certificate request stands).
//! [`assess`] reads the API server's objects (pure), [`observe`] asks
//! for them, [`node_name`] says which node to ask about. `run` watches the
//! join after kubelet.env (`src/flow/join_watch.rs`); `status` asks once.

pub mod assess;
pub mod node_name;
pub mod observe;

pub use observe::{AskedAs, Inputs, Observation, observe};
