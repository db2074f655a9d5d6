//! The node's part in the cluster (`role` in the config file).

use serde::{Deserialize, Serialize};

/// The node's part in the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Joins an existing cluster.
    #[default]
    Worker,
    /// A control-plane node that joins an existing cluster.
    Master,
    /// The first master: runs bootkube and tectonic, and does not wait on an
    /// API server that cannot exist before it.
    BootkubeMaster,
}

impl Role {
    pub fn is_bootkube_master(self) -> bool {
        self == Role::BootkubeMaster
    }
}
