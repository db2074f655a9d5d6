//! The node's cgroups: the host's cgroup hierarchies as mounted under
//! `/sys/fs/cgroup` (cgroup v1 controllers each where the host put them,
//! the named `systemd` hierarchy, the v2 one), a cgroup of the node's own
//! in each, which becomes the root of the node's cgroup namespace, and the
//! mounts that show those hierarchies inside the node exactly as on the
//! host.

use anyhow::{Context, Result, bail};
use std::fs;
use std::path::{Path, PathBuf};

const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// One mounted hierarchy of the host.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Hierarchy {
    /// Where the host has it mounted (e.g. `/sys/fs/cgroup/cpu`).
    mount_point: PathBuf,
    /// `cgroup` (v1) or `cgroup2`.
    fstype: String,
    /// Its mount options without `rw`/`ro` (`cpu`, `name=systemd`, `nsdelegate`).
    options: String,
}

/// The host's cgroup hierarchies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Layout {
    hierarchies: Vec<Hierarchy>,
}

impl Layout {
    /// The hierarchies this process sees mounted under `/sys/fs/cgroup`.
    pub(super) fn of_host() -> Result<Layout> {
        let text =
            fs::read_to_string("/proc/self/mountinfo").context("reading /proc/self/mountinfo")?;
        let layout = Layout::parse(&text);
        if layout.hierarchies.is_empty() {
            bail!("no cgroup hierarchy is mounted under {CGROUP_ROOT}");
        }
        Ok(layout)
    }

    /// Parses `/proc/self/mountinfo`: `id parent maj:min root mount-point
    /// options [optional fields...] - fstype source super-options`.
    fn parse(mountinfo: &str) -> Layout {
        let mut hierarchies = Vec::new();
        for line in mountinfo.lines() {
            let Some((before, after)) = line.split_once(" - ") else {
                continue;
            };
            let Some(mount_point) = before.split(' ').nth(4) else {
                continue;
            };
            let mut after = after.split(' ');
            let (Some(fstype), Some(_source), Some(super_opts)) =
                (after.next(), after.next(), after.next())
            else {
                continue;
            };
            if !(fstype == "cgroup" || fstype == "cgroup2")
                || !(mount_point == CGROUP_ROOT || mount_point.starts_with("/sys/fs/cgroup/"))
            {
                continue;
            }
            let options = super_opts
                .split(',')
                .filter(|o| *o != "rw" && *o != "ro")
                .collect::<Vec<_>>()
                .join(",");
            hierarchies.push(Hierarchy {
                mount_point: PathBuf::from(mount_point),
                fstype: fstype.to_string(),
                options,
            });
        }
        Layout { hierarchies }
    }

    /// Creates `name` (e.g. `nb-simnode/<node>`) in every hierarchy. v1
    /// cpuset cgroups take no task until they have CPUs and memory nodes:
    /// they get their parent's.
    pub(super) fn create(&self, name: &str) -> Result<()> {
        for h in &self.hierarchies {
            let mut dir = h.mount_point.clone();
            for part in name.split('/') {
                let parent = dir.clone();
                dir.push(part);
                match fs::create_dir(&dir) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => {
                        return Err(e)
                            .with_context(|| format!("creating cgroup {}", dir.display()));
                    }
                }
                for knob in ["cpuset.cpus", "cpuset.mems"] {
                    let own = dir.join(knob);
                    if own.exists() && fs::read_to_string(&own)?.trim().is_empty() {
                        let value = fs::read_to_string(parent.join(knob))?;
                        fs::write(&own, value.trim())
                            .with_context(|| format!("writing {}", own.display()))?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Shell lines that move the running shell (`$$`) into `name` in every
    /// hierarchy.
    pub(super) fn join_script(&self, name: &str) -> String {
        self.hierarchies
            .iter()
            .map(|h| {
                format!(
                    "echo $$ > {}/{name}/cgroup.procs\n",
                    h.mount_point.display()
                )
            })
            .collect()
    }

    /// Shell lines that mount, inside the node's root `root`, `/sys` and the
    /// hierarchies as the host has them. Run inside the node's cgroup
    /// namespace, each mount shows the node's own cgroup as its root. systemd
    /// keeps what it finds mounted.
    pub(super) fn mount_script(&self, root: &Path) -> String {
        let root = root.display();
        let mut s = format!("mount -t sysfs -o nosuid,nodev,noexec sysfs {root}/sys\n");
        let unified_at_root = self
            .hierarchies
            .iter()
            .any(|h| h.mount_point == Path::new(CGROUP_ROOT));
        if !unified_at_root {
            s += &format!(
                "mount -t tmpfs -o mode=755,nosuid,nodev,noexec tmpfs {root}{CGROUP_ROOT}\n"
            );
        }
        for h in &self.hierarchies {
            let at = format!("{root}{}", h.mount_point.display());
            let opts = if h.options.is_empty() {
                String::new()
            } else {
                format!("-o {} ", h.options)
            };
            s += &format!(
                "mkdir -p {at}\nmount -t {} {opts}{} {at}\n",
                h.fstype, h.fstype
            );
        }
        s
    }

    /// Removes `name` and every cgroup below it from every hierarchy
    /// (deepest first; a cgroup that still holds a process stays).
    pub(super) fn remove(&self, name: &str) {
        fn rmdir_tree(dir: &Path) {
            if let Ok(entries) = fs::read_dir(dir) {
                for e in entries.flatten() {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        rmdir_tree(&e.path());
                    }
                }
            }
            let _ = fs::remove_dir(dir);
        }
        for h in &self.hierarchies {
            rmdir_tree(&h.mount_point.join(name));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
22 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime shared:12 - cgroup cgroup rw,cpuacct
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate
";

    #[test]
    fn reads_the_hosts_hierarchies_with_their_options() {
        let l = Layout::parse(HYBRID);
        let got: Vec<_> = l
            .hierarchies
            .iter()
            .map(|h| {
                (
                    h.mount_point.display().to_string(),
                    h.fstype.as_str(),
                    h.options.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("/sys/fs/cgroup/cpu".to_string(), "cgroup", "cpu"),
                ("/sys/fs/cgroup/cpuacct".to_string(), "cgroup", "cpuacct"),
                (
                    "/sys/fs/cgroup/systemd".to_string(),
                    "cgroup",
                    "name=systemd"
                ),
                (
                    "/sys/fs/cgroup/unified".to_string(),
                    "cgroup2",
                    "nsdelegate"
                ),
            ]
        );
        let script = l.mount_script(Path::new("/n/root"));
        assert!(
            script.starts_with(
                "mount -t sysfs -o nosuid,nodev,noexec sysfs /n/root/sys\nmount -t tmpfs"
            ),
            "{script}"
        );
        assert!(script.contains("mkdir -p /n/root/sys/fs/cgroup/cpu\nmount -t cgroup -o cpu cgroup /n/root/sys/fs/cgroup/cpu\n"), "{script}");
        assert!(
            l.join_script("nb-simnode/x")
                .contains("echo $$ > /sys/fs/cgroup/systemd/nb-simnode/x/cgroup.procs\n")
        );
    }

    #[test]
    fn a_unified_host_gets_cgroup2_at_the_root_and_no_tmpfs() {
        let l = Layout::parse(
            "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n",
        );
        let script = l.mount_script(Path::new("/r"));
        assert!(!script.contains("tmpfs"), "{script}");
        assert!(
            script.contains(
                "mount -t cgroup2 -o nsdelegate,memory_recursiveprot cgroup2 /r/sys/fs/cgroup\n"
            ),
            "{script}"
        );
    }
}
