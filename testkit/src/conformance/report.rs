//! What a run of the suite says: the JUnit files `e2e.test --report-dir`
//! writes (one per parallel ginkgo node, `junit_NN.xml`), read spec by
//! spec, and the table a run prints for a worker.

use anyhow::{Context as _, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// How one spec ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Passed,
    /// The failure's message (its first lines).
    Failed(String),
    /// Not run (filtered out, or skipped by the suite itself).
    Skipped,
}

/// Every spec of a run, by its full name, with its outcome and seconds.
#[derive(Debug, Clone, Default)]
pub struct Results {
    pub specs: BTreeMap<String, (Outcome, f64)>,
}

impl Results {
    /// Reads every `junit_*.xml` in `dir`. A spec that some file reports
    /// as run (passed or failed) counts as run; only what no file ran is
    /// skipped.
    pub fn read_dir(dir: &Path) -> Result<Results> {
        let mut r = Results::default();
        let mut found = false;
        for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
            let p = e?.path();
            let name = p
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            if !(name.starts_with("junit") && name.ends_with(".xml")) {
                continue;
            }
            found = true;
            let text =
                std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
            for (spec, outcome, secs) in parse_junit(&text) {
                let slot = r.specs.entry(spec).or_insert((Outcome::Skipped, 0.0));
                if slot.0 == Outcome::Skipped || matches!(outcome, Outcome::Failed(_)) {
                    *slot = (outcome, secs);
                }
            }
        }
        anyhow::ensure!(found, "no junit_*.xml in {}", dir.display());
        Ok(r)
    }

    pub fn outcome(&self, spec: &str) -> Option<&Outcome> {
        self.specs.get(spec).map(|(o, _)| o)
    }

    pub fn seconds(&self, spec: &str) -> Option<f64> {
        self.specs.get(spec).map(|(_, s)| *s)
    }
}

/// The `<testcase>`s of a JUnit file as ginkgo 1 writes it: name, outcome
/// (a `<failure>` child: failed, with its message; a `<skipped>` child:
/// skipped; neither: passed) and `time` in seconds.
pub fn parse_junit(xml: &str) -> Vec<(String, Outcome, f64)> {
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(start) = rest.find("<testcase ") {
        rest = &rest[start..];
        let head_end = rest.find('>').unwrap_or(rest.len());
        let head = &rest[..head_end];
        let (body, next) = if head.ends_with('/') {
            ("", &rest[head_end..])
        } else {
            match rest.find("</testcase>") {
                Some(end) => (&rest[head_end..end], &rest[end..]),
                None => (&rest[head_end..], ""),
            }
        };
        let name = attr(head, "name").map(|n| unescape(&n)).unwrap_or_default();
        let secs = attr(head, "time")
            .and_then(|t| t.parse().ok())
            .unwrap_or(0.0);
        let outcome = if let Some(i) = body.find("<failure") {
            let msg = body[i..]
                .split_once('>')
                .map(|(_, m)| m.split("</failure>").next().unwrap_or(m))
                .unwrap_or("");
            let msg = unescape(msg);
            Outcome::Failed(msg.lines().take(6).collect::<Vec<_>>().join("\n"))
        } else if body.contains("<skipped") {
            Outcome::Skipped
        } else {
            Outcome::Passed
        };
        out.push((name, outcome, secs));
        rest = next.get(1..).unwrap_or("");
    }
    out
}

fn attr(head: &str, name: &str) -> Option<String> {
    let key = format!(" {name}=\"");
    let i = head.find(&key)? + key.len();
    let end = head[i..].find('"')?;
    Some(head[i..i + end].to_string())
}

/// XML's five entities and numeric character references.
pub fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let Some(end) = rest.find(';').filter(|e| *e <= 10) else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let entity = &rest[1..end];
        let c = match entity {
            "lt" => Some('<'),
            "gt" => Some('>'),
            "amp" => Some('&'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => entity
                .strip_prefix("#x")
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .or_else(|| entity.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match c {
            Some(c) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The counts of one worker's run: of the specs it was given, how many
/// ran, passed, were skipped by the repository's list, and failed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    pub given: usize,
    pub ran: usize,
    pub passed: usize,
    pub skipped: usize,
    pub failed: usize,
}

impl Counts {
    /// One row of the table (`worker | given | ran | passed | skipped | failed | seconds`).
    pub fn row(&self, worker: &str, seconds: f64) -> String {
        format!(
            "| {worker} | {} | {} | {} | {} | {} | {:.0} |",
            self.given, self.ran, self.passed, self.skipped, self.failed, seconds
        )
    }

    pub const HEADER: &'static str = "| worker | specs | ran | passed | skipped (list) | failed | seconds |\n| --- | --- | --- | --- | --- | --- | --- |";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn junit_testcases_read_as_passed_failed_and_skipped() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
  <testsuite name="Kubernetes e2e suite" tests="3" failures="1" errors="0" time="20">
      <testcase name="[k8s.io] Pods should get a host IP [NodeConformance] [Conformance]" classname="Kubernetes e2e suite" time="12.5"></testcase>
      <testcase name="[sig-storage] HostPath should support r/w [NodeConformance]" classname="Kubernetes e2e suite" time="3.25">
          <failure type="Failure">/go/src/x.go:1&#xA;Unexpected error: &#34;boom&#34; &amp; more</failure>
          <system-out>log</system-out>
      </testcase>
      <testcase name="[k8s.io] Probing container should be slow [Slow]" classname="Kubernetes e2e suite" time="0">
          <skipped></skipped>
      </testcase>
  </testsuite>"#;
        let specs = parse_junit(xml);
        assert_eq!(specs.len(), 3);
        assert_eq!(specs[0].1, Outcome::Passed);
        assert_eq!(specs[0].2, 12.5);
        assert_eq!(
            specs[1].1,
            Outcome::Failed("/go/src/x.go:1\nUnexpected error: \"boom\" & more".into())
        );
        assert_eq!(specs[2].1, Outcome::Skipped);
        assert_eq!(
            specs[0].0,
            "[k8s.io] Pods should get a host IP [NodeConformance] [Conformance]"
        );
    }

    #[test]
    fn entities_unescape_and_stray_ampersands_stay() {
        assert_eq!(unescape("a &lt;b&gt; &#39;c&#39; & d"), "a <b> 'c' & d");
    }
}
