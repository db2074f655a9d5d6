//! The repository's list of [NodeConformance] specs that a node of this
//! test rig cannot host (`tests/conformance/skip-list.txt`), each with the
//! workers it concerns and why. Nothing else is skipped: a spec that
//! fails is a failure, and a spec the list names but the suite no longer
//! has is an error (the list must not rot).

use super::WorkerKind;
use anyhow::{Result, bail};

/// One entry of the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    /// The workers it concerns (`all` in the file: every kind).
    pub workers: Vec<WorkerKind>,
    /// The spec's full name, as ginkgo reports it.
    pub spec: String,
    /// Why a node of this rig cannot host it.
    pub why: String,
}

/// The list's path in the repository.
pub fn path() -> std::path::PathBuf {
    crate::project_root().join("tests/conformance/skip-list.txt")
}

/// Reads the repository's list.
pub fn load() -> Result<Vec<Skip>> {
    let p = path();
    let text =
        std::fs::read_to_string(&p).map_err(|e| anyhow::anyhow!("reading {}: {e}", p.display()))?;
    parse(&text).map_err(|e| anyhow::anyhow!("{}: {e:#}", p.display()))
}

/// `WORKERS | SPEC | WHY` per line; `#` comments and blank lines aside.
pub fn parse(text: &str) -> Result<Vec<Skip>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.splitn(3, " | ").map(str::trim).collect();
        let [workers, spec, why] = fields[..] else {
            bail!("line {}: not WORKERS | SPEC | WHY: {line}", i + 1);
        };
        if why.is_empty() {
            bail!("line {}: an entry without its reason: {line}", i + 1);
        }
        let workers = if workers == "all" {
            WorkerKind::ALL.to_vec()
        } else {
            workers
                .split(',')
                .map(|w| {
                    WorkerKind::parse(w.trim())
                        .ok_or_else(|| anyhow::anyhow!("line {}: no worker kind {w:?}", i + 1))
                })
                .collect::<Result<_>>()?
        };
        out.push(Skip {
            workers,
            spec: spec.to_string(),
            why: why.to_string(),
        });
    }
    Ok(out)
}

/// The entries for worker `kind`.
pub fn for_worker(list: &[Skip], kind: WorkerKind) -> Vec<&Skip> {
    list.iter().filter(|s| s.workers.contains(&kind)).collect()
}

/// Entries naming a spec that is not in `specs` (the suite's): each is
/// stale.
pub fn stale<'a>(list: &'a [Skip], specs: &[String]) -> Vec<&'a Skip> {
    list.iter().filter(|s| !specs.contains(&s.spec)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_name_their_workers_and_reason() {
        let list = parse(
            "# comment\n\nall | [k8s.io] A [Slow] [NodeConformance] | [Slow]: 20 minutes\n\
             docker,vm | [sig-storage] B | no CAP_SYS_RESOURCE\n",
        )
        .unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].workers, WorkerKind::ALL.to_vec());
        assert_eq!(list[1].workers, vec![WorkerKind::Docker, WorkerKind::Vm]);
        assert_eq!(for_worker(&list, WorkerKind::Containerd).len(), 1);
        assert!(parse("docker | spec | \n").is_err());
        assert!(parse("podman | spec | why\n").is_err());
        assert!(parse("just a spec\n").is_err());
        let specs = vec!["[sig-storage] B".to_string()];
        assert_eq!(stale(&list, &specs).len(), 1);
    }
}
