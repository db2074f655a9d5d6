#!/usr/bin/env bash
# Builds node-bootstrap as the binary nodes run: x86_64 static-pie, glibc
# linked in (`-C target-feature=+crt-static`), no dynamic loader, no shared
# library, no NSS (the agent resolves host names itself: src/dns.rs). It
# needs a Linux kernel 3.2 or newer and nothing on the node (README "Does it
# fit your cluster?"; tests/inprocess/static_binary.rs holds the binary to
# that).
#
#   scripts/build-static.sh            target/debug/node-bootstrap-static
#                                      (what the VM tier boots; the build
#                                      step of scripts/test.sh runs this)
#   scripts/build-static.sh --release  target/release/node-bootstrap-static
#                                      (what you host for your nodes)
#
# crt-static changes only the final link on this target, but the dependencies
# are a second set all the same: built for the agent alone, they have other
# features than in the tests' build (`cargo build --workspace --all-targets`
# adds those of testkit, benchkit and the dev-dependencies: tokio's
# test-util, zbus's service side, ...). About 2 minutes on 2 cores the first
# time; scripts/test.sh keeps them in its build cache (docs/testing.md).
set -euo pipefail
cd "$(dirname "$0")/.."
profile=debug
args=()
case "${1:-}" in
  "") ;;
  --release) profile=release; args=(--release) ;;
  *) echo "usage: $0 [--release]" >&2; exit 2 ;;
esac
target=target/$profile
cargo rustc "${args[@]}" --bin node-bootstrap -- -C target-feature=+crt-static
# Copied out under its own name: the next `cargo build` or `cargo test`
# links the ordinary node-bootstrap again (its flags differ), for the tests
# that run it. (testkit::static_agent_binary refuses a static binary older
# than a source of the agent.)
cp "$target/node-bootstrap" "$target/.node-bootstrap-static.tmp"
mv -f "$target/.node-bootstrap-static.tmp" "$target/node-bootstrap-static"
echo "built $target/node-bootstrap-static"
