//! The journal events an operator searches for, each with a stable
//! `MESSAGE_ID` (128-bit, generated once with `journalctl --new-id128`;
//! never reuse or change one): `journalctl MESSAGE_ID=<id>` finds the
//! event on a node, and `journalctl -x` shows beside it the explanation of
//! the catalog `units/node-bootstrap.catalog` (one entry per id here,
//! `@FIELD@` filled in from the entry's fields), which the Ignition config
//! installs (docs/operators.md).
//!
//! A log line carries its id as the `message_id` field, which the journald
//! layer writes as `MESSAGE_ID=` ([`crate::logging`]):
//! `info!(message_id = message_ids::STEP_DONE, step = "os-update", "step done")`.

/// `run` started (fields `VERSION`).
pub const RUN_STARTED: &str = "be24b3ea85014cec833f0910173c1027";
/// A step finished (`STEP`; helpers too: `helper/bootkube`).
pub const STEP_DONE: &str = "46854d578dd34bafaa15d386656d0a77";
/// A step failed (`STEP`, `ERROR_CLASS`, `ERROR`).
pub const STEP_FAILED: &str = "3ce06f81ef444ac5be7baf42a65d0546";
/// The agent asks for a reboot (`REASON`, `WIPE_DOCKER_DATADIR`).
pub const REBOOT_REQUESTED: &str = "ee7cc295331f4c1ebac5cdad16563c53";
/// kubelet.env is in place: the node is bootstrapped.
pub const NODE_BOOTSTRAPPED: &str = "5ca3e4340c0a456690dc029365aa9c18";
/// A docker package was refused: its checksum does not match the signed
/// manifest, or torcx could not apply it (`PACKAGE`, the file; `ERROR`).
pub const PACKAGE_REFUSED: &str = "56b09dc340774738b7b9e038ed336fb3";
/// A new agent was installed (`FROM`, `TO`).
pub const AGENT_UPGRADED: &str = "8f9a3c20c97249c886aff499af5f43c7";
/// The previous agent was put back (`FROM`, `TO`).
pub const AGENT_ROLLED_BACK: &str = "9711371f93a742ec91c686c794fac9d0";
/// A command ended with an error (`ERROR_CLASS`, `EXIT_CODE`).
pub const COMMAND_FAILED: &str = "6cb5bc21a9af4672b80a7ed1f7f1c9b6";
/// After kubelet.env, `run` saw this node Ready in the cluster (`NODE`,
/// `KUBELET_VERSION`, `CONTAINER_RUNTIME`, `AFTER_SECS`: since kubelet.env).
pub const NODE_READY: &str = "31ec97ed544a4d00addc282e7ff53b5b";
/// `run` stopped watching the join (`cluster.join_watch_secs`) and the
/// node is not Ready in the cluster (`NODE`, `JOIN_STATE`, `DETAIL`).
pub const NODE_NOT_READY: &str = "7d7acba420d5423798c943775f5d9f73";
/// The kubelet's newest certificate request for this node was denied, or
/// approved and not signed (`NODE`, `CSR`, `JOIN_STATE`, `DETAIL`).
pub const CERTIFICATE_REQUEST_REFUSED: &str = "23e88cde729a4182999362fcf9121055";
/// `follow` took a place in the lease and starts changing the kubelet
/// (`FROM`, `TO`, `KIND`: patch or minor, `APISERVER`).
pub const FOLLOW_STARTED: &str = "ba4b38c47fd94737876d243e8740a325";
/// `follow` changed the kubelet and the Node is Ready with it (`FROM`,
/// `TO`, `BACK_AFTER_SECS`: from the kubelet's restart).
pub const FOLLOW_SUCCEEDED: &str = "9f5480c21b1a4868b7649a3103c43c34";
/// `follow` rolled a kubelet change back: the Node was not Ready with the
/// new version in time (`FROM`, `TO`, `WHY`); the rollout halts here.
pub const FOLLOW_ROLLED_BACK: &str = "058b27a45c7a44569c7a61fa3e1f8ee9";

/// The agent panicked: a bug (`PANIC_LOCATION`, `PANIC_THREAD`,
/// `ERROR_CLASS`, `EXIT_CODE`; [`crate::panic_hook`]).
pub const PANICKED: &str = "30c4968befe84d13978d2ab7930081fe";

/// Every id with its name, for the catalog check.
#[cfg(test)]
pub const ALL: [(&str, &str); 16] = [
    ("RUN_STARTED", RUN_STARTED),
    ("STEP_DONE", STEP_DONE),
    ("STEP_FAILED", STEP_FAILED),
    ("REBOOT_REQUESTED", REBOOT_REQUESTED),
    ("NODE_BOOTSTRAPPED", NODE_BOOTSTRAPPED),
    ("PACKAGE_REFUSED", PACKAGE_REFUSED),
    ("AGENT_UPGRADED", AGENT_UPGRADED),
    ("AGENT_ROLLED_BACK", AGENT_ROLLED_BACK),
    ("COMMAND_FAILED", COMMAND_FAILED),
    ("NODE_READY", NODE_READY),
    ("NODE_NOT_READY", NODE_NOT_READY),
    ("CERTIFICATE_REQUEST_REFUSED", CERTIFICATE_REQUEST_REFUSED),
    ("PANICKED", PANICKED),
    ("FOLLOW_STARTED", FOLLOW_STARTED),
    ("FOLLOW_SUCCEEDED", FOLLOW_SUCCEEDED),
    ("FOLLOW_ROLLED_BACK", FOLLOW_ROLLED_BACK),
];

#[cfg(test)]
mod tests {
    use super::ALL;
    use std::collections::BTreeSet;

    const CATALOG: &str = include_str!("../units/node-bootstrap.catalog");

    /// The ids of the catalog's entries (`-- <id>` lines), in order.
    fn catalog_ids() -> Vec<&'static str> {
        CATALOG
            .lines()
            .filter_map(|l| l.strip_prefix("-- "))
            .map(str::trim)
            .collect()
    }

    #[test]
    fn ids_are_unique_128_bit_lowercase_hex() {
        let mut seen = BTreeSet::new();
        for (name, id) in ALL {
            assert!(
                id.len() == 32
                    && id
                        .bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
                "{name}: {id}"
            );
            assert!(seen.insert(id), "{name}: {id} used twice");
        }
    }

    #[test]
    fn the_catalog_explains_every_id_and_only_those() {
        let listed: BTreeSet<&str> = ALL.iter().map(|(_, id)| *id).collect();
        let ids = catalog_ids();
        let in_catalog: BTreeSet<&str> = ids.iter().copied().collect();
        assert_eq!(in_catalog.len(), ids.len(), "an id has two entries");
        assert_eq!(listed, in_catalog);
        // Each entry: a subject, who defines it, and a body saying what to do.
        for entry in CATALOG.split("\n-- ").skip(1) {
            let id = entry.lines().next().unwrap();
            assert!(entry.contains("\nSubject: node-bootstrap"), "{id}");
            assert!(entry.contains("\nDefined-By: node-bootstrap\n"), "{id}");
            let body = entry.split_once("\n\n").map_or("", |(_, b)| b);
            assert!(body.len() > 80, "{id}: no explanation");
        }
    }
}
