//! `node-bootstrap check-config`: the config file, and what the node
//! reads beside it that the config decides: the runtime mappings, the
//! keyrings its signed sources need, the seed kubelet.env. From this
//! machine's files (a node's), from files named on the command line (an
//! operator's workstation), or from a rendered Ignition config, which
//! holds them all; with a rendered config, also the pure steps the node
//! runs before it changes anything ([`steps`]).

mod steps;

use super::{Cli, load};
use crate::addon::mappings::RuntimeMappings;
use crate::config::Config;
use crate::error::{Error, Result, exit};
use crate::kubelet_env::EnvFile;
use clap::Args;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the Ignition module writes the agent's config.
const CONFIG_ON_NODE: &str = crate::config::DEFAULT_CONFIG_PATH;

#[derive(Debug, Args)]
pub struct CheckConfigArgs {
    /// The runtime mappings file to check (default: the one the config
    /// names, when this machine has it).
    #[arg(long, value_name = "FILE")]
    pub mappings: Option<PathBuf>,
    /// The OpenPGP public keyring the node will verify signed sources
    /// with (default: the keyring the config names, when this machine has
    /// it).
    #[arg(long, value_name = "FILE")]
    pub keyring: Option<PathBuf>,
    /// Check a rendered Ignition config as a whole instead: the agent
    /// config, runtime mappings, keyrings and seed kubelet.env it writes.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["mappings", "keyring"])]
    pub ignition: Option<PathBuf>,
}

/// The files a node will have: this machine's, or a rendered Ignition
/// config's (inline contents, by path).
enum NodeFiles {
    Here,
    Ignition {
        source: PathBuf,
        files: BTreeMap<String, Option<Vec<u8>>>,
    },
}

impl NodeFiles {
    /// `path`'s contents and a name for messages; `None` when the node
    /// will not have it. A file the Ignition config fetches from a URL is
    /// not checked (`Some(None)`).
    fn read(&self, path: &Path) -> Result<Option<(Option<Vec<u8>>, String)>> {
        match self {
            NodeFiles::Here => match std::fs::read(path) {
                Ok(b) => Ok(Some((Some(b), path.display().to_string()))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(Error::bad_input(format!(
                    "failed to read {}: {e}",
                    path.display()
                ))),
            },
            NodeFiles::Ignition { source, files } => {
                Ok(files.get(path.to_string_lossy().as_ref()).map(|b| {
                    (
                        b.clone(),
                        format!("{}:{}", source.display(), path.display()),
                    )
                }))
            }
        }
    }

    /// Where `path` would come from, for a message saying it is missing.
    fn missing(&self, path: &Path) -> String {
        match self {
            NodeFiles::Here => format!("no file at {}", path.display()),
            NodeFiles::Ignition { source, .. } => {
                format!("{} writes no {}", source.display(), path.display())
            }
        }
    }
}

/// Reads a rendered Ignition config's `storage.files`: path => contents
/// of inline (`data:`) files, `None` for files fetched from elsewhere.
fn ignition_files(path: &Path) -> Result<BTreeMap<String, Option<Vec<u8>>>> {
    let bad = |m: String| Error::bad_input(format!("Ignition config {}: {m}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| bad(format!("cannot read it: {e}")))?;
    let doc: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad(format!("not JSON: {e}")))?;
    let files = doc["storage"]["files"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut out = BTreeMap::new();
    for f in files {
        let Some(p) = f["path"].as_str() else {
            return Err(bad("a storage.files entry has no path".to_string()));
        };
        let contents = match f["contents"]["source"].as_str() {
            Some(src) if src.starts_with("data:") => {
                Some(decode_data_url(src).ok_or_else(|| bad(format!("{p}: unreadable data URL")))?)
            }
            _ => None,
        };
        out.insert(p.to_string(), contents);
    }
    Ok(out)
}

/// The bytes of an RFC 2397 `data:` URL, base64 or plain (percent
/// escapes decoded).
fn decode_data_url(src: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    let (meta, data) = src.strip_prefix("data:")?.split_once(',')?;
    if meta.ends_with(";base64") {
        return base64::engine::general_purpose::STANDARD.decode(data).ok();
    }
    let bytes = data.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

fn text(bytes: Vec<u8>, source: &str) -> Result<String> {
    String::from_utf8(bytes).map_err(|_| Error::bad_input(format!("{source} is not UTF-8")))
}

/// `check-config`: exit 0 and the settings in effect on stdout, what was
/// checked beside them on stderr; else the first problem, with the class
/// the node would fail with (4 for the config, 5 for a file beside it).
pub(super) fn check_config(cli: &Cli, args: &CheckConfigArgs) -> Result<u8> {
    let (config, files) = match &args.ignition {
        Some(ign) => {
            let files = ignition_files(ign)?;
            let source = format!("{}:{CONFIG_ON_NODE}", ign.display());
            let Some(Some(bytes)) = files.get(CONFIG_ON_NODE).cloned() else {
                return Err(Error::config(format!(
                    "Ignition config {} writes no {CONFIG_ON_NODE} inline",
                    ign.display()
                )));
            };
            let config = Config::from_json(&text(bytes, &source)?, Path::new(&source))?;
            let source = ign.clone();
            (config, NodeFiles::Ignition { source, files })
        }
        None => (load(cli)?, NodeFiles::Here),
    };
    let mut checked = vec![format!("config ok: {}", config.source.display())];
    let (line, mapped) = mappings(&config, &files, args.mappings.as_deref())?;
    checked.push(line);
    checked.extend(keyrings(&config, &files, args.keyring.as_deref())?);
    if args.ignition.is_some() {
        let (line, seed) = seed(&config, &files)?;
        checked.push(line);
        checked.extend(steps::pure_steps(&config, mapped.as_ref(), seed.as_ref())?);
    }
    checked.extend(
        crate::config::checks::warnings(&config)
            .into_iter()
            .map(|w| format!("WARN {w}")),
    );
    let shown = serde_json::to_string_pretty(&config.to_raw())
        .map_err(|e| Error::internal(format!("failed to show the settings: {e}")))?;
    for line in checked {
        eprintln!("{line}");
    }
    println!("{shown}");
    Ok(exit::SUCCESS)
}

/// The runtime mappings as the node reads them (every entry checked, as
/// `run` and `containerd choose` check it).
fn mappings(
    config: &Config,
    files: &NodeFiles,
    given: Option<&Path>,
) -> Result<(String, Option<RuntimeMappings>)> {
    let on_node = config.addon.mappings_path(&config.paths);
    let m = match given {
        Some(p) => RuntimeMappings::load(p)?,
        None => match files.read(&on_node)? {
            Some((Some(bytes), source)) => {
                RuntimeMappings::parse(&text(bytes, &source)?, Path::new(&source))?
            }
            Some((None, source)) => {
                return Ok((
                    format!("runtime mappings: not checked ({source} is fetched by Ignition)"),
                    None,
                ));
            }
            None => {
                return Ok((
                    format!(
                        "runtime mappings: not checked ({}; pass --mappings FILE)",
                        files.missing(&on_node)
                    ),
                    None,
                ));
            }
        },
    };
    let minors: Vec<String> = m.minors().iter().map(|(a, b)| format!("{a}.{b}")).collect();
    Ok((
        format!(
            "runtime mappings ok: {} (Kubernetes {})",
            m.source.display(),
            minors.join(", ")
        ),
        Some(m),
    ))
}

/// Every keyring the config's signed sources need is there and reads.
fn keyrings(config: &Config, files: &NodeFiles, given: Option<&Path>) -> Result<Vec<String>> {
    let mut checked = Vec::new();
    for need in crate::config::checks::keyrings_needed(config) {
        let found = match given {
            Some(p) => Some((
                Some(std::fs::read(p).map_err(|e| {
                    Error::bad_input(format!("failed to read --keyring {}: {e}", p.display()))
                })?),
                p.display().to_string(),
            )),
            None => files.read(&need.path)?,
        };
        let (bytes, source) = match found {
            Some((Some(b), s)) => (b, s),
            Some((None, s)) => {
                checked.push(format!("keyring: not checked ({s} is fetched by Ignition)"));
                continue;
            }
            None => {
                let here = match files {
                    NodeFiles::Here => "; off the node, name it with --keyring FILE",
                    NodeFiles::Ignition { .. } => {
                        "; the ignition module writes it from its keyring variable"
                    }
                };
                return Err(Error::bad_input(format!(
                    "{}, but {}: the node could verify nothing signed there. Give the public key \
                     that signs it ({}{here}), or {}",
                    need.why,
                    files.missing(&need.path),
                    need.path.display(),
                    need.unsigned
                )));
            }
        };
        let ring = crate::openpgp::Keyring::parse(&bytes, Path::new(&source))?;
        checked.push(format!(
            "keyring ok: {source} ({} keys) for {}",
            ring.fingerprints().len(),
            need.path.display()
        ));
    }
    Ok(checked)
}

/// The seed kubelet.env a rendered config writes reads as the node reads it.
fn seed(config: &Config, files: &NodeFiles) -> Result<(String, Option<EnvFile>)> {
    let path = config.paths.seed_kubelet_env();
    match files.read(&path)? {
        Some((Some(bytes), source)) => {
            let env = crate::kubelet_env::parse_seed(&text(bytes, &source)?, Path::new(&source))?;
            Ok((
                format!(
                    "seed kubelet.env ok: {source} ({} entries)",
                    env.entries().len()
                ),
                Some(env),
            ))
        }
        Some((None, source)) => Ok((
            format!("seed kubelet.env: not checked ({source} is fetched by Ignition)"),
            None,
        )),
        None => Err(Error::bad_input(format!(
            "{}: the node's `run` needs its seed kubelet.env",
            files.missing(&path)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::decode_data_url;

    #[test]
    fn data_urls_base64_and_plain() {
        assert_eq!(decode_data_url("data:;base64,aGk=").unwrap(), b"hi");
        assert_eq!(decode_data_url("data:,a%20b").unwrap(), b"a b");
        assert_eq!(decode_data_url("data:text/plain;base64,!"), None);
    }
}
