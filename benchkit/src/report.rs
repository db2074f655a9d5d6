//! Rows of the benchmark table (`bench/run.sh`): the harness prints one
//! `ROW\t…` line per measurement on stdout, the script collects them and
//! prints the table.

/// One measured comparison.
#[derive(Debug, Clone)]
pub struct Row {
    /// What is measured, e.g. "critical path to kubelet (ms)".
    pub name: String,
    pub ours: String,
    /// The other side: floor, competitor, or limit.
    pub theirs: String,
    /// `theirs`'s label, e.g. "floor", "docker run".
    pub theirs_label: String,
    pub ratio: String,
    pub target: String,
    pub met: bool,
}

impl Row {
    /// The line `bench/run.sh` reads (tab-separated).
    pub fn line(&self) -> String {
        format!(
            "ROW\t{}\t{}\t{} ({})\t{}\t{}\t{}",
            self.name,
            self.ours,
            self.theirs,
            self.theirs_label,
            self.ratio,
            self.target,
            if self.met { "yes" } else { "NO" }
        )
    }
}

/// Median of a non-empty sample.
pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_samples() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn row_line_is_tab_separated_with_verdict() {
        let r = Row {
            name: "x".into(),
            ours: "1".into(),
            theirs: "2".into(),
            theirs_label: "floor".into(),
            ratio: "0.5x".into(),
            target: "<1.5x".into(),
            met: false,
        };
        assert_eq!(r.line(), "ROW\tx\t1\t2 (floor)\t0.5x\t<1.5x\tNO");
    }
}
