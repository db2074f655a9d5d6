#!/usr/bin/env bash
# The supply-chain check: `cargo deny check` (advisories, licenses, bans,
# sources; deny.toml says what each allows and every exception's reason)
# against the dated snapshot of the RustSec advisory database that CI
# machines carry in ../shared/tools/advisory-db (a git bundle; nothing is
# fetched). Prints the snapshot's commit and date first: an advisory
# published after that date is not seen.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bundle=${NB_ADVISORY_DB_BUNDLE:-$root/../shared/tools/advisory-db/advisory-db.bundle}
if [ ! -f "$bundle" ]; then
    echo "deny: the advisory database snapshot is not at $bundle (set NB_ADVISORY_DB_BUNDLE)" >&2
    exit 1
fi
deny=$("$root/scripts/build-cargo-deny.sh")
# cargo-deny looks for the database of deny.toml's db-urls in a directory
# named after the URL under db-path (target/advisory-dbs).
db=$root/target/advisory-dbs/advisory-db-3157b0e258782691
key=$(sha256sum "$bundle" | cut -c1-16)
if [ "$(cat "$db/.nb-bundle" 2>/dev/null)" != "$key" ]; then
    rm -rf "$db"
    mkdir -p "$(dirname "$db")"
    git clone -q "$bundle" "$db"
    echo "$key" > "$db/.nb-bundle"
fi
echo "deny: RustSec advisory database snapshot $(git -C "$db" log -1 --format='%H of %cs' HEAD)"
cd "$root"
# cargo-deny reads `cargo metadata` of every platform, so the crates only
# other platforms use (core-foundation for macOS, ...) must be in cargo's
# cache too; the build fetched only Linux's.
cargo fetch --locked --quiet
"$deny" --version
# --frozen: Cargo.lock as it is, and nothing fetched (the database included).
"$deny" --frozen check --show-stats "$@"
