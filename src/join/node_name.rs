//! The name this node registers under, as the kubelet picks it: its
//! `--hostname-override` when it has one, else the host name, lowercased
//! and trimmed (Kubernetes' `nodeutil.GetHostname`). Where the kubelet's
//! flags come from on these nodes: kubelet.env (`KUBELET_ARGS`, any other
//! value) and kubelet.service's own environment (`KUBELET_EXTRA_ARGS` of
//! the Ignition config's drop-in). Once the kubelet has a certificate of
//! its own, its `CN=system:node:<name>` says it for sure (see
//! [`super::observe`]).

/// The value of the last `--hostname-override` among `texts` (the values
/// of environment variables that hold flags, split as a shell splits
/// them: `--hostname-override=x`, `--hostname-override x`, quoted or not),
/// if any.
pub fn override_in<'a>(texts: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut found = None;
    for text in texts {
        let mut words = text
            .split_whitespace()
            .map(|w| w.trim_matches(|c| c == '"' || c == '\''));
        while let Some(w) = words.next() {
            let value = if let Some(v) = w
                .strip_prefix("--hostname-override=")
                .or_else(|| w.strip_prefix("-hostname-override="))
            {
                Some(v.to_string())
            } else if w == "--hostname-override" || w == "-hostname-override" {
                words.next().map(str::to_string)
            } else {
                None
            };
            if let Some(v) = value.filter(|v| !v.trim().is_empty()) {
                found = Some(v);
            }
        }
    }
    found
}

/// The kubelet's node name: the override if any, else `hostname`, either
/// trimmed and lowercased.
pub fn resolve(hostname: &str, hostname_override: Option<&str>) -> String {
    hostname_override.unwrap_or(hostname).trim().to_lowercase()
}

/// The unit the kubelet runs in (its `Environment=` may hold
/// `--hostname-override`).
const KUBELET: &str = "kubelet.service";

/// The kubelet's node name on this node: `--hostname-override` from
/// kubelet.env (`paths.kubelet_env`) or kubelet.service's environment
/// (asked of systemd when `bus` is there, within two seconds), else the
/// host name.
pub async fn of_this_node(
    paths: &crate::settings::Paths,
    bus: Option<&zbus::Connection>,
) -> String {
    let env = crate::fsutil::read_optional(&paths.kubelet_env)
        .ok()
        .flatten()
        .and_then(|t| crate::kubelet_env::EnvFile::parse(&t, &paths.kubelet_env).ok());
    let mut values: Vec<String> = env
        .iter()
        .flat_map(|e| e.entries().iter().map(|(_, v)| v.clone()))
        .collect();
    if let Some(bus) = bus {
        let units = crate::systemd::units::Units::new(bus.clone());
        let asked = tokio::time::timeout(
            std::time::Duration::from_secs(2),
            units.service_environment(KUBELET),
        );
        if let Ok(Ok(service_env)) = asked.await {
            values.extend(
                service_env
                    .iter()
                    .filter_map(|kv| kv.split_once('=').map(|(_, v)| v.to_string())),
            );
        }
    }
    let hostname_override = override_in(values.iter().map(String::as_str));
    resolve(&hostname(), hostname_override.as_deref())
}

/// This host's name (the node's own UTS namespace).
pub fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubelets_override_wins_over_the_hostname_lowercased() {
        assert_eq!(
            resolve(" Worker-1.Example.COM\n", None),
            "worker-1.example.com"
        );
        assert_eq!(
            override_in([
                "node.kubernetes.io/role=worker",
                "--v=2 --hostname-override=Node-A",
            ]),
            Some("Node-A".into())
        );
        assert_eq!(
            resolve(
                "host",
                override_in(["--hostname-override node-b --v=2"]).as_deref()
            ),
            "node-b"
        );
        assert_eq!(
            override_in(["\"--hostname-override=node-c\"", "--max-pods=10"]),
            Some("node-c".into())
        );
        // The last one given wins, as for the kubelet's flag parsing.
        assert_eq!(
            override_in(["--hostname-override=a", "--hostname-override=b"]),
            Some("b".into())
        );
        assert_eq!(
            override_in(["--hostname-override=", "--node-ip=10.0.0.1"]),
            None
        );
        assert_eq!(override_in(["--hostname-overrides=x"]), None);
    }
}
