//! Reading unit state (load/active/sub state, result, restarts, conditions)
//! from systemd over D-Bus, for `status`.
//!
//! One `LoadUnit` (zbus_systemd's Manager proxy) per unit, then one
//! `Properties.GetAll` per interface (`…systemd1.Unit`, and `…Service` for
//! services), all units concurrently, on one connection: a handful of round
//! trips however many units, no property caching, no signal matches.
//! Timestamps are systemd's realtime µs since the epoch (0 = never).

use crate::error::{Error, Result};
use serde::Serialize;
use zbus::{Connection, DeserializeDict, Type};

const DEST: &str = "org.freedesktop.systemd1";

/// One unit as systemd sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnitState {
    pub name: String,
    /// `loaded`, `not-found`, `masked`, `error`, …
    pub load_state: String,
    /// `active`, `activating`, `deactivating`, `inactive`, `failed`, …
    pub active_state: String,
    /// Type-specific: `running`, `exited`, `auto-restart`, `start-pre`, `waiting`, …
    pub sub_state: String,
    /// `enabled`, `disabled`, `static`, `masked`, `` (runtime units).
    pub unit_file_state: String,
    /// Services and path units: `success`, `exit-code`, `signal`,
    /// `timeout`, `unit-start-limit-hit`, …
    pub result: Option<String>,
    /// Services: automatic restarts so far (this boot).
    pub n_restarts: Option<u32>,
    /// Services: exit status of the main process (last run).
    pub exec_main_status: Option<i32>,
    /// Services: when the main process last started (µs, 0 = never).
    pub exec_main_start_us: Option<u64>,
    /// Whether the unit's conditions held at the last check.
    pub condition_result: bool,
    /// When the conditions were last checked (µs, 0 = never).
    pub condition_timestamp_us: u64,
    pub active_enter_timestamp_us: u64,
    pub inactive_exit_timestamp_us: u64,
    /// When ActiveState last changed (µs, 0 = never).
    pub state_change_timestamp_us: u64,
}

impl UnitState {
    /// The unit exists (a unit file was found).
    pub fn exists(&self) -> bool {
        self.load_state != "not-found"
    }
    /// Its conditions were checked and did not hold, so it was skipped.
    pub fn condition_skipped(&self) -> bool {
        self.condition_timestamp_us != 0 && !self.condition_result
    }
    /// Waiting out `RestartSec=` before the next automatic restart.
    pub fn auto_restarting(&self) -> bool {
        self.sub_state == "auto-restart"
    }
    pub fn is_active(&self) -> bool {
        self.active_state == "active"
    }
    pub fn is_failed(&self) -> bool {
        self.active_state == "failed"
    }
}

#[derive(Debug, Default, DeserializeDict, Type)]
#[zbus(signature = "a{sv}", rename_all = "PascalCase")]
struct UnitProps {
    load_state: Option<String>,
    active_state: Option<String>,
    sub_state: Option<String>,
    unit_file_state: Option<String>,
    condition_result: Option<bool>,
    condition_timestamp: Option<u64>,
    active_enter_timestamp: Option<u64>,
    inactive_exit_timestamp: Option<u64>,
    state_change_timestamp: Option<u64>,
}

#[derive(Debug, Default, DeserializeDict, Type)]
#[zbus(signature = "a{sv}", rename_all = "PascalCase")]
struct ServiceProps {
    result: Option<String>,
    #[zbus(rename = "NRestarts")]
    n_restarts: Option<u32>,
    exec_main_status: Option<i32>,
    exec_main_start_timestamp: Option<u64>,
}

/// A connection to systemd's manager on the system bus.
#[derive(Clone)]
pub struct Units {
    conn: Connection,
}

impl Units {
    pub fn new(conn: Connection) -> Self {
        Units { conn }
    }

    /// The state of one unit (a unit without a file has `load_state`
    /// `not-found`; that is not an error).
    pub async fn unit(&self, name: &str) -> Result<UnitState> {
        let err =
            |e: zbus::Error| Error::retryable(format!("cannot read unit {name} from systemd: {e}"));
        let manager = zbus_systemd::systemd1::ManagerProxy::builder(&self.conn)
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await
            .map_err(err)?;
        let path = manager.load_unit(name.to_string()).await.map_err(err)?;
        let get_all = |iface: &'static str| {
            let path = path.clone();
            async move {
                self.conn
                    .call_method(
                        Some(DEST),
                        path.as_str(),
                        Some("org.freedesktop.DBus.Properties"),
                        "GetAll",
                        &(iface,),
                    )
                    .await
            }
        };
        // The type-specific interface carries Result (and, for services,
        // restarts and the main process).
        let typed = if name.ends_with(".service") {
            Some("org.freedesktop.systemd1.Service")
        } else if name.ends_with(".path") {
            Some("org.freedesktop.systemd1.Path")
        } else {
            None
        };
        let (unit, service) = match typed {
            Some(iface) => {
                let (u, s) = tokio::join!(get_all("org.freedesktop.systemd1.Unit"), get_all(iface));
                (u.map_err(err)?, Some(s.map_err(err)?))
            }
            None => (
                get_all("org.freedesktop.systemd1.Unit")
                    .await
                    .map_err(err)?,
                None,
            ),
        };
        let u: UnitProps = unit.body().deserialize().map_err(err)?;
        let s: ServiceProps = match &service {
            Some(m) => m.body().deserialize().map_err(err)?,
            None => ServiceProps::default(),
        };
        Ok(UnitState {
            name: name.to_string(),
            load_state: u.load_state.unwrap_or_default(),
            active_state: u.active_state.unwrap_or_default(),
            sub_state: u.sub_state.unwrap_or_default(),
            unit_file_state: u.unit_file_state.unwrap_or_default(),
            result: s.result,
            n_restarts: s.n_restarts,
            exec_main_status: s.exec_main_status,
            exec_main_start_us: s.exec_main_start_timestamp,
            condition_result: u.condition_result.unwrap_or(true),
            condition_timestamp_us: u.condition_timestamp.unwrap_or(0),
            active_enter_timestamp_us: u.active_enter_timestamp.unwrap_or(0),
            inactive_exit_timestamp_us: u.inactive_exit_timestamp.unwrap_or(0),
            state_change_timestamp_us: u.state_change_timestamp.unwrap_or(0),
        })
    }

    /// Several units at once, in the order given.
    pub async fn units(&self, names: &[&str]) -> Vec<Result<UnitState>> {
        futures_util::future::join_all(names.iter().map(|n| self.unit(n))).await
    }
}
