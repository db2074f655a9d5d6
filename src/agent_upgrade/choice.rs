//! Which agent version to upgrade to (seed 003: C, D, E, F): a pure
//! decision over the running version and the versions the search path
//! offers.
//!
//! - the default takes the newest version with the running major
//!   (`upgrade`, `agent.upgrade: minor`); `--patch` the newest with the
//!   running major.minor; only newer versions count;
//! - `--major` also takes a newer major; without it a newer major is never
//!   taken, and when it is the only thing newer the answer says so
//!   ([`Decision::NewerMajorOnly`]), for the command to explain;
//! - `--to VERSION` takes exactly that version, also an older one (the one
//!   way to downgrade);
//! - pre-releases count only in development mode; in development mode
//!   (`sources.dev_dir`) a locally built agent is taken whatever its
//!   version ([`Candidate::dev`]);
//! - versions that are not semantic versions are ignored.

use semver::Version;

/// How far an upgrade may go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// Same major.minor (`--patch`).
    Patch,
    /// Same major (the default).
    Minor,
    /// Any newer version (`--major`).
    Major,
    /// Exactly this version, older or newer (`--to`).
    To(Version),
}

/// One version the search path offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub version: Version,
    /// Offered by the development location (`sources.dev_dir`).
    pub dev: bool,
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Install the candidate at this index.
    Install { index: usize, version: Version },
    /// Nothing newer within reach: the running agent stays.
    Current,
    /// Nothing newer within reach, but a newer major exists.
    NewerMajorOnly { newest: Version },
    /// `--to` names a version no location offers.
    NotOffered { wanted: Version },
}

/// Parses an offered version (`v` prefix allowed); `None` if it is not a
/// semantic version.
pub fn parse(v: &str) -> Option<Version> {
    Version::parse(v.trim().trim_start_matches('v')).ok()
}

/// The decision (see module docs). `dev_mode`: development mode is on.
pub fn choose(
    running: &Version,
    reach: &Reach,
    candidates: &[Candidate],
    dev_mode: bool,
) -> Decision {
    let usable = |c: &Candidate| dev_mode || c.version.pre.is_empty();
    let newest = |pred: &dyn Fn(&Candidate) -> bool| {
        candidates
            .iter()
            .enumerate()
            .filter(|(_, c)| usable(c) && pred(c))
            // Equal versions: the earlier location in search order.
            .max_by(|(ia, a), (ib, b)| a.version.cmp(&b.version).then(ib.cmp(ia)))
            .map(|(i, c)| (i, c.version.clone()))
    };
    if let Reach::To(wanted) = reach {
        return match newest(&|c| c.version == *wanted) {
            Some((index, version)) => Decision::Install { index, version },
            None => Decision::NotOffered {
                wanted: wanted.clone(),
            },
        };
    }
    if dev_mode && let Some((index, version)) = newest(&|c| c.dev) {
        return if version == *running {
            Decision::Current
        } else {
            Decision::Install { index, version }
        };
    }
    let within = |c: &Candidate| match reach {
        Reach::Patch => c.version.major == running.major && c.version.minor == running.minor,
        Reach::Minor => c.version.major == running.major,
        Reach::Major | Reach::To(_) => true,
    };
    if let Some((index, version)) = newest(&|c| within(c) && c.version > *running) {
        return Decision::Install { index, version };
    }
    match newest(&|c| c.version.major > running.major) {
        Some((_, newest)) if *reach != Reach::Major => Decision::NewerMajorOnly { newest },
        _ => Decision::Current,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    fn offered(versions: &[&str]) -> Vec<Candidate> {
        versions
            .iter()
            .map(|s| Candidate {
                version: v(s),
                dev: false,
            })
            .collect()
    }

    fn pick(d: Decision) -> String {
        match d {
            Decision::Install { version, .. } => version.to_string(),
            other => format!("{other:?}"),
        }
    }

    const RUNNING: &str = "1.4.2";

    #[test]
    fn the_default_takes_the_newest_of_the_same_major() {
        let c = offered(&["1.4.1", "1.4.3", "1.10.0", "1.9.9", "2.0.0", "0.9.0"]);
        assert_eq!(
            pick(choose(&v(RUNNING), &Reach::Minor, &c, false)),
            "1.10.0"
        );
    }

    #[test]
    fn patch_stays_in_the_same_minor() {
        let c = offered(&["1.4.1", "1.4.3", "1.4.10", "1.5.0"]);
        assert_eq!(
            pick(choose(&v(RUNNING), &Reach::Patch, &c, false)),
            "1.4.10"
        );
        let c = offered(&["1.5.0"]);
        assert_eq!(
            choose(&v(RUNNING), &Reach::Patch, &c, false),
            Decision::Current
        );
    }

    #[test]
    fn a_newer_major_is_only_taken_when_asked_and_said_otherwise() {
        let c = offered(&["1.4.2", "2.0.0", "2.1.0"]);
        assert_eq!(
            choose(&v(RUNNING), &Reach::Minor, &c, false),
            Decision::NewerMajorOnly { newest: v("2.1.0") }
        );
        assert_eq!(pick(choose(&v(RUNNING), &Reach::Major, &c, false)), "2.1.0");
        // A same-major upgrade wins over reporting the new major.
        let c = offered(&["1.5.0", "2.0.0"]);
        assert_eq!(pick(choose(&v(RUNNING), &Reach::Minor, &c, false)), "1.5.0");
    }

    #[test]
    fn pre_releases_only_in_development_mode() {
        let c = offered(&["1.5.0-rc.1", "1.4.3"]);
        assert_eq!(pick(choose(&v(RUNNING), &Reach::Minor, &c, false)), "1.4.3");
        assert_eq!(
            pick(choose(&v(RUNNING), &Reach::Minor, &c, true)),
            "1.5.0-rc.1"
        );
    }

    #[test]
    fn nothing_newer_and_older_only_are_current() {
        assert_eq!(
            choose(
                &v(RUNNING),
                &Reach::Minor,
                &offered(&["1.4.2", "1.3.0"]),
                false
            ),
            Decision::Current
        );
        assert_eq!(
            choose(&v(RUNNING), &Reach::Major, &[], false),
            Decision::Current
        );
    }

    #[test]
    fn downgrades_only_when_to_names_the_version() {
        let c = offered(&["1.3.0", "1.4.2"]);
        assert_eq!(
            choose(&v(RUNNING), &Reach::Minor, &c, false),
            Decision::Current
        );
        assert_eq!(
            pick(choose(&v(RUNNING), &Reach::To(v("1.3.0")), &c, false)),
            "1.3.0"
        );
        assert_eq!(
            choose(&v(RUNNING), &Reach::To(v("1.2.0")), &c, false),
            Decision::NotOffered { wanted: v("1.2.0") }
        );
    }

    #[test]
    fn development_mode_takes_the_local_build_whatever_its_version() {
        let mut c = offered(&["1.9.0"]);
        c.push(Candidate {
            version: v("1.0.0-dev"),
            dev: true,
        });
        let d = choose(&v(RUNNING), &Reach::Minor, &c, true);
        assert_eq!(
            d,
            Decision::Install {
                index: 1,
                version: v("1.0.0-dev")
            }
        );
    }

    #[test]
    fn equal_versions_come_from_the_earlier_location() {
        let c = offered(&["1.5.0", "1.5.0"]);
        assert_eq!(
            choose(&v(RUNNING), &Reach::Minor, &c, false),
            Decision::Install {
                index: 0,
                version: v("1.5.0")
            }
        );
    }

    #[test]
    fn versions_parse_as_semver_with_an_optional_v() {
        assert_eq!(parse("v1.2.3"), Some(v("1.2.3")));
        assert_eq!(parse("1.2"), None);
        assert_eq!(parse("17.03"), None);
    }
}
