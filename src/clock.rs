//! Wall-clock timestamps as the agent writes them (state journal, markers):
//! RFC 3339, UTC, whole seconds.

/// Now, e.g. `2026-11-23T13:47:11Z`.
pub fn now_rfc3339() -> String {
    let now = time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .unwrap_or_else(|_| time::OffsetDateTime::now_utc());
    now.format(&time::format_description::well_known::Rfc3339)
        .expect("RFC 3339 formatting cannot fail for UTC")
}
