//! What Ignition does on a simulated node's first boot, for the parts of
//! spec 3.3 the project's configs use: files (data URLs decoded, remote
//! sources fetched through the caller and checked against their SHA-512 as
//! Ignition checks them), units with their drop-ins (written; the enabled
//! ones returned for [`SimNode::enable`]), and the SSH keys of `passwd`
//! users. Any other key fails the test, so nothing a config says is
//! silently skipped. (The VM tier runs the real Ignition; this lets the
//! simulated node tiers boot nodes from exactly the configs the terraform
//! module renders.)

use crate::simnode::SimNode;
use crate::sshd::NodeSsh;
use base64::Engine as _;
use serde_json::Value;
use sha2::{Digest, Sha512};

/// Decodes an Ignition `contents.source` data URL (`data:[<type>][;base64],<data>`).
pub fn decode_data_url(url: &str) -> Option<Vec<u8>> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    if meta.ends_with(";base64") {
        base64::engine::general_purpose::STANDARD.decode(data).ok()
    } else {
        // Percent-encoded text.
        let bytes = data.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' && i + 2 < bytes.len() {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        Some(out)
    }
}

fn only(v: &Value, keys: &[&str], what: &str) {
    for k in v
        .as_object()
        .unwrap_or_else(|| panic!("{what} is not an object"))
        .keys()
    {
        assert!(
            keys.contains(&k.as_str()),
            "the test's Ignition does not handle {what}.{k}"
        );
    }
}

/// Does to `node` (not running) what Ignition does with `cfg`; returns the
/// units to enable. `fetch` gives the bytes of a remote source; `ssh`
/// installs `passwd` users' keys (a config with users needs one).
pub fn apply(
    node: &SimNode,
    cfg: &Value,
    fetch: impl Fn(&str) -> Option<Vec<u8>>,
    ssh: Option<&NodeSsh>,
) -> Vec<String> {
    only(cfg, &["ignition", "passwd", "storage", "systemd"], "config");
    only(&cfg["ignition"], &["version", "security"], "ignition");
    assert_eq!(cfg["ignition"]["version"], "3.3.0");
    only(&cfg["storage"], &["files"], "storage");
    for f in cfg["storage"]["files"].as_array().unwrap() {
        only(
            f,
            &["path", "mode", "overwrite", "contents"],
            "storage.files[]",
        );
        only(&f["contents"], &["source", "verification"], "contents");
        let path = f["path"].as_str().unwrap();
        let source = f["contents"]["source"].as_str().unwrap();
        let data = match decode_data_url(source) {
            Some(d) => d,
            None => fetch(source).unwrap_or_else(|| panic!("{path}: cannot fetch {source}")),
        };
        if let Some(hash) = f["contents"]["verification"]["hash"].as_str() {
            let want = hash.strip_prefix("sha512-").expect("sha512 verification");
            assert_eq!(
                hex::encode(Sha512::digest(&data)),
                want,
                "{path}: Ignition would refuse {source}"
            );
        }
        let mode = f["mode"].as_u64().unwrap_or(0o644) as u32;
        node.write(path, &data, mode).unwrap();
    }
    let mut enabled = Vec::new();
    only(&cfg["systemd"], &["units"], "systemd");
    for u in cfg["systemd"]["units"].as_array().unwrap() {
        only(
            u,
            &["name", "enabled", "contents", "dropins"],
            "systemd.units[]",
        );
        let name = u["name"].as_str().unwrap();
        node.write(
            &format!("/etc/systemd/system/{name}"),
            u["contents"].as_str().unwrap(),
            0o644,
        )
        .unwrap();
        for d in u["dropins"].as_array().into_iter().flatten() {
            only(d, &["name", "contents"], "systemd.units[].dropins[]");
            node.write(
                &format!(
                    "/etc/systemd/system/{name}.d/{}",
                    d["name"].as_str().unwrap()
                ),
                d["contents"].as_str().unwrap(),
                0o644,
            )
            .unwrap();
        }
        if u["enabled"] == Value::Bool(true) {
            enabled.push(name.to_string());
        }
    }
    for user in cfg["passwd"]["users"].as_array().into_iter().flatten() {
        only(user, &["name", "sshAuthorizedKeys"], "passwd.users[]");
        let keys: Vec<&str> = user["sshAuthorizedKeys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap())
            .collect();
        ssh.expect("a config with passwd users needs the node's sshd")
            .authorize(node, user["name"].as_str().unwrap(), &keys)
            .unwrap();
    }
    enabled
}

/// The files of an Ignition config whose contents travel inline (data
/// URLs), decoded: path -> (mode, contents). What a reader of the config
/// (anyone with the instance's user data) gets.
pub fn inline_files(cfg: &Value) -> std::collections::BTreeMap<String, (u32, Vec<u8>)> {
    cfg["storage"]["files"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| {
            let data = decode_data_url(f["contents"]["source"].as_str()?)?;
            let mode = f["mode"].as_u64().unwrap_or(0o644) as u32;
            Some((f["path"].as_str()?.to_string(), (mode, data)))
        })
        .collect()
}

/// What the ignition module is given for one node (its other variables
/// keep their defaults).
#[derive(Debug, Clone, serde::Serialize)]
pub struct NodeVars {
    pub role: String,
    pub agent_url: String,
    pub agent_sha512: String,
    /// The agent's config (a JSON object as text).
    pub agent_config: String,
    pub kubelet_image_tag: String,
    pub runtime_mappings: String,
    pub keyring: Option<String>,
    /// Exactly one of `kubeconfig` (a long-lived credential) and
    /// `bootstrap_kubeconfig` (a bootstrap token only), as the module
    /// takes them.
    pub kubeconfig: Option<String>,
    pub bootstrap_kubeconfig: Option<String>,
    /// The kubelet's `--cluster-dns` and `--cluster-domain` (the module's
    /// `cluster_dns_ip` and `cluster_domain`).
    pub cluster_dns_ip: String,
    pub cluster_domain: String,
    /// The module's `follow` switch (day two).
    pub follow: bool,
}

/// Renders each node's Ignition config with `terraform/modules/ignition`
/// (real terraform, no providers, everything in a temp dir), as operators
/// render theirs, with the units of [`crate::unit_file`]: node name -> the
/// config.
pub fn render(
    nodes: &std::collections::BTreeMap<String, NodeVars>,
) -> anyhow::Result<std::collections::BTreeMap<String, Value>> {
    use anyhow::Context as _;
    let work = tempfile::tempdir()?;
    let module = crate::project_root().join("terraform/modules/ignition");
    std::fs::write(
        work.path().join("main.tf"),
        format!(
            r#"variable "nodes" {{
  type = any
}}

module "node" {{
  source   = "{}"
  for_each = var.nodes

  role              = each.value.role
  agent_url         = each.value.agent_url
  agent_sha512      = each.value.agent_sha512
  agent_config      = each.value.agent_config
  kubelet_image_tag = each.value.kubelet_image_tag
  runtime_mappings  = each.value.runtime_mappings
  keyring           = each.value.keyring
  kubeconfig        = each.value.kubeconfig
  bootstrap_kubeconfig = each.value.bootstrap_kubeconfig
  cluster_dns_ip    = each.value.cluster_dns_ip
  cluster_domain    = each.value.cluster_domain
  follow            = each.value.follow
  units_dir         = "{}"
}}

output "rendered" {{
  value     = {{ for k, m in module.node : k => m.rendered }}
  sensitive = true
}}
"#,
            module.display(),
            crate::unit_file("kubelet.service")
                .parent()
                .unwrap()
                .display()
        ),
    )?;
    std::fs::write(
        work.path().join("nodes.tfvars.json"),
        serde_json::to_string(&serde_json::json!({ "nodes": nodes }))?,
    )?;
    let var_file = format!(
        "-var-file={}",
        work.path().join("nodes.tfvars.json").display()
    );
    let rendered = crate::terraform::Terraform::new(work.path())
        .render(&[&var_file], "rendered")
        .with_context(|| format!("rendering Ignition configs with {}", module.display()))?;
    let out: std::collections::BTreeMap<String, String> = serde_json::from_value(rendered)?;
    out.into_iter()
        .map(|(k, v)| Ok((k, serde_json::from_str(&v)?)))
        .collect()
}
