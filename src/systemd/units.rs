//! Reading unit state (load/active/sub state, result, restarts, conditions)
//! from systemd over D-Bus, for `status`.
//!
//! One `Properties.GetAll` per interface (`…systemd1.Unit`, and `…Service` for
//! services), all units concurrently, on one connection: a handful of round
//! trips however many units, no property caching, no signal matches.
//! Timestamps are systemd's realtime µs since the epoch (0 = never).
//!
//! [`Units::unit`] computes the object path (systemd loads a unit asked for
//! by path, as `LoadUnit` does); [`Units::loaded_unit`] asks `GetUnit`.
//! Loading a unit systemd does not hold makes it search the unit paths and
//! parse the file (several ms, paid on every call: systemd unloads the
//! unused unit again soon after); do it where the unit file's state is part
//! of the answer. `GetUnit` never loads:
//! `NoSuchUnit` means systemd holds no such unit, so it is not running, has
//! not failed and nothing waits on it (a failed unit stays loaded).

use crate::error::{Error, Result};
use serde::Serialize;
use zbus::OwnedVariant;
use zbus::{Connection, DeserializeDict, Type};

const DEST: &str = "org.freedesktop.systemd1";
/// The error `GetUnit` answers for a unit systemd does not hold.
const NO_SUCH_UNIT: &str = "org.freedesktop.systemd1.NoSuchUnit";

fn unit_error(name: &str, e: zbus::Error) -> Error {
    Error::retryable(format!("cannot read unit {name} from systemd: {e}"))
}

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
    /// A unit systemd does not hold (`GetUnit` said `NoSuchUnit`): inactive
    /// and dead, as systemd would report it, with the load state `not-loaded`.
    pub fn not_loaded(name: &str) -> UnitState {
        UnitState {
            name: name.to_string(),
            load_state: "not-loaded".into(),
            active_state: "inactive".into(),
            sub_state: "dead".into(),
            unit_file_state: String::new(),
            result: None,
            n_restarts: None,
            exec_main_status: None,
            exec_main_start_us: None,
            condition_result: true,
            condition_timestamp_us: 0,
            active_enter_timestamp_us: 0,
            inactive_exit_timestamp_us: 0,
            state_change_timestamp_us: 0,
        }
    }
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

/// What `status` reads from a service's own interface.
const SERVICE_PROPS: &[&str] = &[
    "Result",
    "NRestarts",
    "ExecMainStatus",
    "ExecMainStartTimestamp",
];
/// What `status` reads from a path unit's own interface.
const PATH_PROPS: &[&str] = &["Result"];

#[derive(Debug, Default)]
struct ServiceProps {
    result: Option<String>,
    n_restarts: Option<u32>,
    exec_main_status: Option<i32>,
    exec_main_start_timestamp: Option<u64>,
}

impl ServiceProps {
    /// From `Get` answers; a value of another type than systemd documents
    /// is left out, as a missing key of `GetAll` was.
    fn from_values(values: Vec<(&str, OwnedVariant)>) -> Self {
        let mut s = ServiceProps::default();
        for (prop, v) in values {
            match prop {
                "Result" => s.result = String::try_from(v).ok(),
                "NRestarts" => s.n_restarts = u32::try_from(v).ok(),
                "ExecMainStatus" => s.exec_main_status = i32::try_from(v).ok(),
                "ExecMainStartTimestamp" => s.exec_main_start_timestamp = u64::try_from(v).ok(),
                _ => {}
            }
        }
        s
    }
}

/// The D-Bus object path systemd gives unit `name`: its name with every
/// byte other than an ASCII letter (or a digit, after the first byte)
/// escaped as `_xx` (lowercase hex), under `/org/freedesktop/systemd1/unit/`.
pub fn unit_object_path(name: &str) -> String {
    let mut p = String::from("/org/freedesktop/systemd1/unit/");
    for (i, b) in name.bytes().enumerate() {
        if b.is_ascii_alphabetic() || (i > 0 && b.is_ascii_digit()) {
            p.push(b as char);
        } else {
            p.push_str(&format!("_{b:02x}"));
        }
    }
    if name.is_empty() {
        p.push('_');
    }
    p
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

    /// The state of one unit, loading it if systemd has not (a unit without
    /// a file has `load_state` `not-found`; that is not an error). Its
    /// object path is computed ([`unit_object_path`]): systemd loads a unit
    /// asked for by path as `LoadUnit` would, and the round trip of asking
    /// for the path first is saved.
    pub async fn unit(&self, name: &str) -> Result<UnitState> {
        let path =
            zbus::ObjectPath::try_from(unit_object_path(name)).map_err(|e| unit_error(name, e))?;
        self.state_at(name, &path).await
    }

    /// The state of one unit if systemd has it loaded; `None` when it does
    /// not (`NoSuchUnit`: not running, not failed, never loaded from disk
    /// for this question).
    pub async fn loaded_unit(&self, name: &str) -> Result<Option<UnitState>> {
        match self.manager_call("GetUnit", name).await {
            Ok(path) => self.state_at(name, &path).await.map(Some),
            Err(zbus::Error::MethodError(e, _, _)) if e.as_str() == NO_SUCH_UNIT => Ok(None),
            Err(e) => Err(unit_error(name, e)),
        }
    }

    /// A Manager method that answers a unit's object path (`GetUnit`).
    async fn manager_call(
        &self,
        method: &'static str,
        name: &str,
    ) -> zbus::Result<zbus::OwnedObjectPath> {
        let reply = self
            .conn
            .call_method(
                Some(DEST),
                "/org/freedesktop/systemd1",
                Some("org.freedesktop.systemd1.Manager"),
                method,
                &(name,),
            )
            .await?;
        reply.body().deserialize()
    }

    /// The properties of the unit at `path`.
    async fn state_at(&self, name: &str, path: &zbus::ObjectPath<'_>) -> Result<UnitState> {
        let err = |e: zbus::Error| unit_error(name, e);
        let get_all = |iface: &'static str| async move {
            self.conn
                .call_method(
                    Some(DEST),
                    path,
                    Some("org.freedesktop.DBus.Properties"),
                    "GetAll",
                    &(iface,),
                )
                .await
        };
        // The type-specific interface carries Result (and, for services,
        // restarts and the main process). Those few are asked for one by
        // one: `GetAll` there makes systemd serialize some 250 properties,
        // reading the unit's cgroup files for the accounting ones.
        let typed = if name.ends_with(".service") {
            Some(("org.freedesktop.systemd1.Service", SERVICE_PROPS))
        } else if name.ends_with(".path") {
            Some(("org.freedesktop.systemd1.Path", PATH_PROPS))
        } else {
            None
        };
        let get = |iface: &'static str, prop: &'static str| async move {
            let reply = self
                .conn
                .call_method(
                    Some(DEST),
                    path,
                    Some("org.freedesktop.DBus.Properties"),
                    "Get",
                    &(iface, prop),
                )
                .await?;
            let value: OwnedVariant = reply.body().deserialize()?;
            zbus::Result::Ok((prop, value))
        };
        let typed_props = async {
            match typed {
                Some((iface, props)) => {
                    futures_util::future::try_join_all(props.iter().map(|p| get(iface, p))).await
                }
                None => Ok(Vec::new()),
            }
        };
        let (unit, typed_values) =
            tokio::join!(get_all("org.freedesktop.systemd1.Unit"), typed_props);
        let unit = unit.map_err(err)?;
        let s = ServiceProps::from_values(typed_values.map_err(err)?);
        let u: UnitProps = unit.body().deserialize().map_err(err)?;
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

    /// A service's `Environment=` settings (`KEY=value` each, as systemd
    /// holds them after its drop-ins; not those of `EnvironmentFile=`).
    pub async fn service_environment(&self, name: &str) -> Result<Vec<String>> {
        let err = |e: zbus::Error| unit_error(name, e);
        let path =
            zbus::ObjectPath::try_from(unit_object_path(name)).map_err(|e| unit_error(name, e))?;
        let reply = self
            .conn
            .call_method(
                Some(DEST),
                &path,
                Some("org.freedesktop.DBus.Properties"),
                "Get",
                &("org.freedesktop.systemd1.Service", "Environment"),
            )
            .await
            .map_err(err)?;
        let value: OwnedVariant = reply.body().deserialize().map_err(err)?;
        Vec::<String>::try_from(value).map_err(err)
    }

    /// Several units at once, in the order given.
    pub async fn units(&self, names: &[&str]) -> Vec<Result<UnitState>> {
        futures_util::future::join_all(names.iter().map(|n| self.unit(n))).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_paths_are_escaped_as_systemd_escapes_them() {
        // As `busctl tree org.freedesktop.systemd1` lists them.
        assert_eq!(
            unit_object_path("k8s-node-bootstrap.service"),
            "/org/freedesktop/systemd1/unit/k8s_2dnode_2dbootstrap_2eservice"
        );
        assert_eq!(
            unit_object_path("dbus.service"),
            "/org/freedesktop/systemd1/unit/dbus_2eservice"
        );
        assert_eq!(
            unit_object_path("getty@tty1.service"),
            "/org/freedesktop/systemd1/unit/getty_40tty1_2eservice"
        );
        assert_eq!(
            unit_object_path("1x.mount"),
            "/org/freedesktop/systemd1/unit/_31x_2emount"
        );
    }
}
