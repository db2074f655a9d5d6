//! What serde says of a config file it cannot read, made fit to print:
//! a wrong value is quoted only when it is short (a secret pasted into the
//! wrong field, such as a whole bootstrap token, is said by its length
//! instead), and an unknown field or variant gets the nearest expected
//! name ("did you mean").

/// Longest value quoted as it is.
const QUOTED_MAX: usize = 16;

/// `inner` (serde's message) with long values described, and a suggestion
/// for an unknown name.
pub fn describe(inner: &str) -> String {
    let mut out = redact(inner);
    if let Some(s) = suggestion(inner) {
        out.push_str(&format!(" (did you mean `{s}`?)"));
    }
    out
}

/// Replaces each quoted value longer than [`QUOTED_MAX`] (`string "…"`,
/// and `` `…` `` after `unknown variant`) by its length. Field names are
/// the file's keys, quoted as they are.
fn redact(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg;
    loop {
        let next = [("string \"", '"'), ("variant `", '`')]
            .iter()
            .filter_map(|(open, close)| rest.find(open).map(|i| (i, *open, *close)))
            .min_by_key(|(i, _, _)| *i);
        let Some((i, open, close)) = next else {
            out.push_str(rest);
            return out;
        };
        let start = i + open.len();
        out.push_str(&rest[..start]);
        let body = &rest[start..];
        let end = quoted_end(body, close).unwrap_or(body.len());
        let value = &body[..end];
        if value.chars().count() > QUOTED_MAX {
            out.push_str(&format!(
                "<{} characters, not shown>",
                value.chars().count()
            ));
        } else {
            out.push_str(value);
        }
        rest = &body[end..];
    }
}

/// Where the quote closing `body` is (a `"` escaped by `\` does not close).
fn quoted_end(body: &str, close: char) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in body.char_indices() {
        match c {
            '\\' if close == '"' && !escaped => escaped = true,
            c if c == close && !escaped => return Some(i),
            _ => escaped = false,
        }
    }
    None
}

/// For `unknown field `x`, expected one of `a`, `b`` (or `unknown
/// variant`), the expected name nearest to `x`, when it is near.
fn suggestion(msg: &str) -> Option<String> {
    let given = ["unknown field `", "unknown variant `"]
        .iter()
        .find_map(|p| msg.split_once(p))
        .and_then(|(_, r)| r.split_once('`'))
        .map(|(g, _)| g)?;
    let (_, expected) = msg.split_once("expected ")?;
    let candidates: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    let (best, d) = candidates
        .iter()
        .map(|c| (*c, distance(given, c)))
        .min_by_key(|(_, d)| *d)?;
    (d > 0 && d <= (given.chars().count() / 3).max(2)).then(|| best.to_string())
}

/// Levenshtein distance.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_near_name_is_suggested() {
        assert_eq!(
            describe(
                "unknown field `kubelet_evn`, expected one of `kubelet_env`, `seed_dir`, `kubeconfig`"
            ),
            "unknown field `kubelet_evn`, expected one of `kubelet_env`, `seed_dir`, `kubeconfig` (did you mean `kubelet_env`?)"
        );
        assert_eq!(
            describe("unknown variant `sysxt`, expected one of `auto`, `wrapper`, `sysext`"),
            "unknown variant `sysxt`, expected one of `auto`, `wrapper`, `sysext` (did you mean `sysext`?)"
        );
        // Nothing near: no guess.
        assert_eq!(
            describe("unknown variant `rkt`, expected one of `auto`, `wrapper`, `sysext`"),
            "unknown variant `rkt`, expected one of `auto`, `wrapper`, `sysext`"
        );
    }

    #[test]
    fn long_values_are_said_by_their_length() {
        let token = "abcdef.0123456789abcdef";
        let m = describe(&format!("invalid type: string \"{token}\", expected u32"));
        assert_eq!(
            m,
            "invalid type: string \"<23 characters, not shown>\", expected u32"
        );
        let m = describe(&format!("unknown variant `{token}`, expected `a` or `b`"));
        assert!(!m.contains(token), "{m}");
        let m = describe("invalid type: string \"a \\\"q\\\" longer than sixteen\", expected u32");
        assert!(m.contains("<") && !m.contains("sixteen"), "{m}");
        assert_eq!(
            describe("invalid type: string \"short\", expected u32"),
            "invalid type: string \"short\", expected u32"
        );
    }
}
