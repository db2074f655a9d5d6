# Sourced by scripts/test.sh and .ci/run: cargo's intermediate files (the
# dependencies' builds, build scripts' output, fingerprints, the test
# executables) go to a cache outside the checkout, shared by every checkout
# on this machine, so a fresh clone compiles only the workspace's own crates
# (docs/testing.md, "The build cache"). The binaries stay in the checkout's
# target/ (cargo's `build.build-dir`, stable since cargo 1.91).
#
# - One test command at a time uses the cache: the workspace's crates of two
#   checkouts have the same names in it (cargo hashes a path package by its
#   place in the workspace), so a second command waits for the first.
# - The cache is emptied when it holds more than NB_BUILD_CACHE_MAX_GB
#   (default 20) GB: each toolchain or lockfile change adds a set.
# - A CARGO_BUILD_BUILD_DIR or CARGO_TARGET_DIR of your own wins: then
#   nothing here applies.
if [ -z "${CARGO_BUILD_BUILD_DIR:-}${CARGO_TARGET_DIR:-}" ]; then
  nb_build_dir=${NB_TEST_CACHE:-/var/cache/node-bootstrap-tests}/cargo-build
  mkdir -p "$nb_build_dir"
  exec 9>"$nb_build_dir.lock"
  if ! flock -n 9; then
    echo "build cache: another test command uses $nb_build_dir; waiting for it to end" >&2
    flock 9
  fi
  nb_used_kb=$(du -sk "$nb_build_dir" | cut -f1)
  if [ "$nb_used_kb" -gt $((${NB_BUILD_CACHE_MAX_GB:-20} * 1024 * 1024)) ]; then
    echo "build cache: $nb_build_dir holds $((nb_used_kb / 1024 / 1024)) GB, over ${NB_BUILD_CACHE_MAX_GB:-20}: emptied" >&2
    rm -rf "$nb_build_dir"
    mkdir -p "$nb_build_dir"
  fi
  # The workspace's own crates have the same names whichever checkout built
  # them, and cargo judges them fresh by their sources' times: when another
  # checkout built last, their fingerprints go, so this checkout's crates
  # are compiled from its own sources (the dependencies stay).
  if [ "$(cat "$nb_build_dir/.checkout" 2>/dev/null)" != "$(pwd -P)" ]; then
    for nb_package in $(cargo metadata --no-deps --offline --format-version 1 |
        python3 -c 'import json, sys; print(*(p["name"] for p in json.load(sys.stdin)["packages"]))'); do
      rm -rf "$nb_build_dir"/*/.fingerprint/"$nb_package"-* "$nb_build_dir"/*/*/.fingerprint/"$nb_package"-*
    done
    pwd -P >"$nb_build_dir/.checkout"
  fi
  export CARGO_BUILD_BUILD_DIR=$nb_build_dir
  unset nb_build_dir nb_used_kb nb_package
fi
