#!/usr/bin/env bash
# Checks that the unit tests on the simulated node (the node tier's
# tests/node/node_units.rs, and tests/node/sandbox_node.rs for the
# sandboxes' grants) guard the settings they are about: for each setting,
# remove it from a copy of units/, run the test that checks it (`cargo test
# --test node node_units::<test>`, or `<file>::<test>` as the list names it,
# with NODE_BOOTSTRAP_UNITS_DIR pointing at the copy), and require that
# test to FAIL. Prints one line per
# mutation and exits non-zero if any mutation survives.
#
# What counts: first every covering test runs once on the unmutated units
# (the baseline) and must pass; a failing or skipping baseline stops the
# check (exit 2), since a test that fails anyway kills every mutation.
# Then a mutation is killed only when its test ran and failed on a panic
# on the test's own thread, raised in the test's own file (an assertion,
# an unwrap of what it waited for; a panic inside testkit, such as a
# simulated node that would not boot, is not a verdict); a build error, a
# run of no test, a timeout (TEST_TIMEOUT seconds) or a SKIPPED line is an
# error of the check (exit 2), not a kill.
#
# The sandbox settings of each service (the block from its "# --- Sandbox"
# line on, issue 35) are checked first, without a node: each one removed
# must change the unit's `systemd-analyze security` score, which
# tests/delivery/unit_security.rs pins to docs/security-review.md (so that
# test fails without it); a setting the analyzer does not weigh (a grant,
# such as ReadWritePaths=, or ReadOnlyPaths=/run, which only a node test
# can miss) is either in the node mutations below or listed in `unscored`
# with the reason it is not checked here. A setting in neither that changes no score SURVIVES.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --workspace --tests -q

TEST_TIMEOUT=${TEST_TIMEOUT:-600}
SANDBOX=sandbox_node::every_sandbox_option_of_the_shipped_units_is_applied_on_a_simulated_node

# unit | line to delete (exact) | test that must fail (of node_units, or
# <file>::<test>)
mutations=(
  "k8s-node-bootstrap.service|Before=kubelet.service|master_first_boot"
  "k8s-node-bootstrap.service|Type=notify|master_first_boot"
  "k8s-node-bootstrap.service|Restart=on-failure|failing_bootstrap_crash_loops_until_it_succeeds"
  "k8s-node-bootstrap.service|RestartPreventExitStatus=4 5 7|configuration_error_does_not_crash_loop"
  "k8s-node-bootstrap.service|ConditionPathExists=!/etc/kubernetes/kubelet.env|reboot_from_bootstrap_leads_to_a_boot_that_skips_it"
  "k8s-node-bootstrap.service|WantedBy=multi-user.target|master_first_boot"
  "kubelet.service|EnvironmentFile=/etc/kubernetes/kubelet.env|master_first_boot"
  "bootkube.service|After=kubelet.service|master_first_boot"
  "bootkube.service|ConditionPathExists=!/opt/tectonic/init_bootkube.done|failed_tectonic_is_retried"
  "bootkube.path|PathExists=/opt/tectonic/bootkube.sh|bootkube_waits_for_assets_and_tectonic_never_follows_a_failed_bootkube"
  "tectonic.service|Requires=bootkube.service|bootkube_waits_for_assets_and_tectonic_never_follows_a_failed_bootkube"
  "tectonic.service|After=bootkube.service|master_first_boot"
  "tectonic.service|ConditionPathExists=!/opt/tectonic/init_tectonic.done|failed_tectonic_is_retried"
  "tectonic.service|StartLimitBurst=3|failed_tectonic_is_retried"
  # Sandbox grants the agent stub needs as the agent does: kubelet.env in
  # /etc/kubernetes, its own state in the state dir.
  "k8s-node-bootstrap.service|ReadWritePaths=-/etc/kubernetes -/etc/torcx -/etc/extensions -/opt/extensions -/etc/containerd|master_first_boot"
  "k8s-node-bootstrap.service|StateDirectory=node-bootstrap torcx/store node_exporter/textfile_collector|master_first_boot"
  # Every grant and the read-only /run, read from the sandboxed processes
  # (a few seconds each): each line removed makes a path that must be
  # writable read-only, or one that must be read-only writable, or leaves
  # a device off the cgroup's list.
  # The mkdir for grants under read-only parents: the rig's nodes have
  # /etc/kubernetes already (master_first_boot passes without it), but not
  # /etc/torcx, /etc/extensions or /opt/extensions.
  "k8s-node-bootstrap.service|ExecStartPre=+/usr/bin/mkdir -p /etc/kubernetes /etc/torcx /etc/extensions /opt/extensions /etc/containerd|$SANDBOX"
  "k8s-node-bootstrap.service|ReadOnlyPaths=/run|$SANDBOX"
  "k8s-node-bootstrap.service|ReadWritePaths=-/etc/systemd/system -/run/systemd/system -/opt/bin -/var/lib/docker|$SANDBOX"
  "k8s-node-bootstrap.service|RuntimeDirectory=node-bootstrap|$SANDBOX"
  "k8s-node-bootstrap.service|DeviceAllow=/dev/loop-control rw|$SANDBOX"
  "k8s-node-bootstrap.service|DeviceAllow=block-loop rw|$SANDBOX"
  "init-assets.service|ReadOnlyPaths=/run|$SANDBOX"
  "init-assets.service|ReadWritePaths=/opt|$SANDBOX"
  "init-assets.service|ReadOnlyPaths=-/opt/bin|$SANDBOX"
  "init-assets.service|StateDirectory=node-bootstrap node_exporter/textfile_collector|$SANDBOX"
  "init-assets.service|RuntimeDirectory=node-bootstrap|$SANDBOX"
  "node-bootstrap-catalog.service|ReadOnlyPaths=/run|$SANDBOX"
  "node-bootstrap-catalog.service|StateDirectory=systemd/catalog|$SANDBOX"
  "node-bootstrap-follow.service|ReadOnlyPaths=/run|$SANDBOX"
  "node-bootstrap-follow.service|ReadWritePaths=-/etc/kubernetes -/etc/extensions -/opt/extensions|$SANDBOX"
  "node-bootstrap-follow.service|StateDirectory=node-bootstrap node_exporter/textfile_collector|$SANDBOX"
  "node-bootstrap-follow.service|RuntimeDirectory=node-bootstrap|$SANDBOX"
  "node-bootstrap-follow.service|DeviceAllow=/dev/loop-control rw|$SANDBOX"
  "node-bootstrap-follow.service|DeviceAllow=block-loop rw|$SANDBOX"
  "node-bootstrap-follow-converge.service|ReadOnlyPaths=/run|$SANDBOX"
  "node-bootstrap-follow-converge.service|ReadWritePaths=-/etc/kubernetes -/etc/extensions -/opt/extensions|$SANDBOX"
  "node-bootstrap-follow-converge.service|StateDirectory=node-bootstrap node_exporter/textfile_collector|$SANDBOX"
  "node-bootstrap-follow-converge.service|RuntimeDirectory=node-bootstrap|$SANDBOX"
  "node-bootstrap-follow-converge.service|DeviceAllow=/dev/loop-control rw|$SANDBOX"
  "node-bootstrap-follow-converge.service|DeviceAllow=block-loop rw|$SANDBOX"
)

# Sandbox settings the analyzer does not score and no node_units test
# checks: unit | line | why.
unscored=(
  "*|SystemCallErrorNumber=EPERM|how a denied system call fails (EPERM, not a kill): the node and VM tiers would see a kill"
  "*|RuntimeDirectoryPreserve=yes|keeps this boot's id across restarts: the real agent's node tests (a restart mid-flow resumes in the same boot), minutes per mutation"
  "bootkube.service|ProtectSystem=yes|flagged either way (only strict passes), its 0.1 lost in the score's rounding; read in the unit"
  "bootkube.service|ProtectHome=read-only|flagged either way (only yes passes), its 0.1 lost in the score's rounding; read in the unit"
  "tectonic.service|ProtectSystem=yes|flagged either way (only strict passes), its 0.1 lost in the score's rounding; read in the unit"
  "tectonic.service|ProtectHome=read-only|flagged either way (only yes passes), its 0.1 lost in the score's rounding; read in the unit"
)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# seen FILE: what systemd-analyze security sees of the unit file: its
# overall exposure, and the options it flags (what the unit's "Left off,
# and why" must name).
seen() {
  local score flags
  score=$(systemd-analyze security --offline=true --no-pager "$1" 2>/dev/null |
    sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\) .*/\1/p')
  flags=$(systemd-analyze security --offline=true --no-pager --json=short "$1" 2>/dev/null |
    python3 -c 'import json, sys; print(" ".join(sorted({c["name"].split("=")[0] for c in json.load(sys.stdin) if not c["set"] and c.get("exposure") is not None})))')
  [ -n "$score" ] && echo "$score, flags: $flags"
}

# why_unscored UNIT LINE: the reason listed in `unscored`, if any.
why_unscored() {
  local u l why
  for e in "${unscored[@]}"; do
    IFS='|' read -r u l why <<<"$e"
    if { [ "$u" = '*' ] || [ "$u" = "$1" ]; } && [ "$l" = "$2" ]; then
      echo "$why"
      return
    fi
  done
}

echo "=== sandbox settings: each one removed changes the unit's score or what the analyzer flags (tests/delivery/unit_security.rs holds both)"
sandbox_survived=0
mkdir "$work/sec"
for file in units/*.service; do
  unit=$(basename "$file")
  base=$(seen "$file") || { echo "mutation check: no score for $unit" >&2; exit 2; }
  while IFS= read -r line; do
    if printf '%s\n' "${mutations[@]}" | cut -d'|' -f1,2 | grep -qxF "$unit|$line"; then
      echo "node      $unit: '$line' (a node test below)"
      continue
    fi
    why=$(why_unscored "$unit" "$line")
    if [ -n "$why" ]; then
      echo "unscored  $unit: '$line': $why"
      continue
    fi
    grep -vxF "$line" "$file" >"$work/sec/$unit"
    now=$(seen "$work/sec/$unit") || now=
    if [ "$now" != "$base" ]; then
      echo "killed    $unit without '$line': score ${base%%,*} -> ${now%%,*}$(diff <(tr ' ' '\n' <<<"${base#*flags: }") <(tr ' ' '\n' <<<"${now#*flags: }") | sed -n 's/^> / flags /p' | tr -d '\n')"
    else
      echo "SURVIVED  $unit without '$line': the analyzer sees no change and nothing else checks it"
      sandbox_survived=$((sandbox_survived + 1))
    fi
  done < <(sed -n '/^# --- Sandbox/,/^\[/p' "$file" | grep -E '^[A-Za-z]+=')
done
echo "$sandbox_survived sandbox setting(s) survived"

# qualified TEST: the test's name in the node tier (node_units:: unless
# the list names its file).
qualified() {
  case $1 in
  *::*) echo "$1" ;;
  *) echo "node_units::$1" ;;
  esac
}

# run_tests LOG FILTER...: the node tier's tests matching the filters
# (units from $NODE_BOOTSTRAP_UNITS_DIR if set); skips go to LOG.skips.
# Returns the exit code, 124 when it timed out: then everything the run
# started is killed (it runs in a session of its own; a simulated node's
# PID 1 and unshare outlive a plain SIGTERM of the test binary).
run_tests() {
  local log=$1
  shift
  local filters=()
  for t in "$@"; do filters+=("$(qualified "$t")"); done
  NODE_BOOTSTRAP_SKIP_LOG="$log.skips" setsid \
    cargo test --test node -- "${filters[@]}" >"$log" 2>&1 &
  local run=$!
  (
    sleep "$TEST_TIMEOUT" &
    trap 'kill $! 2>/dev/null; exit 0' TERM
    wait $! && touch "$log.timeout" && kill -KILL -- "-$run"
  ) 2>/dev/null &
  local watchdog=$!
  local rc=0
  wait "$run" 2>/dev/null || rc=$?
  kill "$watchdog" 2>/dev/null || true
  wait "$watchdog" 2>/dev/null || true
  if [ -e "$log.timeout" ]; then
    rc=124
  fi
  return "$rc"
}

# why_not_a_verdict LOG RC N: why the run in LOG (exit RC, N tests asked
# for) says nothing about the tests, or nothing when it does.
why_not_a_verdict() {
  local log=$1 rc=$2 n=$3
  if [ "$rc" -eq 124 ]; then
    echo "timed out after ${TEST_TIMEOUT}s"
  elif [ -s "$log.skips" ]; then
    echo "skipped: $(head -n 1 "$log.skips")"
  elif grep -q 'must run in CI but cannot' "$log"; then
    echo "skipped (CI): $(grep -m 1 'must run in CI but cannot' "$log")"
  elif ! grep -qx "running $n tests\?" "$log"; then
    echo "did not run $n test(s) (build error, or a filter that matches another number of tests): $(grep -m 1 -E '^(error|running )' "$log" || tail -n 1 "$log")"
  fi
}

# file_of TEST: the file of tests/node/ the test is in.
file_of() {
  local q
  q=$(qualified "$1")
  echo "${q%%::*}"
}

# The test's own panic in LOG: `<location>: <first line of its message>`.
panic_of() {
  local log=$1 test
  test=$(qualified "$2")
  grep -A 1 -m 1 -E "^thread '$test[a-z_]*'( \([0-9]+\))? panicked at " "$log" |
    sed -E "1s/^thread '[^']*'( \([0-9]+\))? panicked at ([^ ]+):$/\2:/" | paste -sd ' ' -
}

echo "=== baseline: every covering test passes on the unmutated units"
mapfile -t tests < <(printf '%s\n' "${mutations[@]}" | cut -d'|' -f3 | sort -u)
rc=0
run_tests "$work/baseline" "${tests[@]}" || rc=$?
why=$(why_not_a_verdict "$work/baseline" "$rc" "${#tests[@]}")
if [ -n "$why" ] || [ "$rc" -ne 0 ]; then
  echo "mutation check: the baseline run is no baseline (exit $rc): ${why:-a covering test fails without any mutation}" >&2
  grep -E '^test [a-z_]+::' "$work/baseline" >&2 || true
  grep -A 1 -E "^thread '[^']*'( \([0-9]+\))? panicked at " "$work/baseline" >&2 ||
    tail -n 40 "$work/baseline" >&2
  exit 2
fi
grep -E '^test [a-z_]+::' "$work/baseline"

# judge N UNIT LINE TEST: mutation N (its own directory under $work/N)
# run and judged; prints its verdict line (killed, SURVIVED, ERROR with the
# end of its log) to $work/N/verdict.
judge() {
  local n=$1 unit=$2 line=$3 test=$4
  local dir="$work/$n/units" log="$work/$n/log" rc=0 panic="" why
  mkdir -p "$dir"
  cp units/* "$dir/"
  grep -vxF "$line" "$dir/$unit" >"$dir/$unit.new" && mv "$dir/$unit.new" "$dir/$unit"
  NODE_BOOTSTRAP_UNITS_DIR="$dir" run_tests "$log" "$test" || rc=$?
  why=$(why_not_a_verdict "$log" "$rc" 1)
  {
    if [ -n "$why" ]; then
      echo "ERROR     $unit without '$line': $test $why"
      tail -n 20 "$log" | sed 's/^/    /'
    elif [ "$rc" -eq 0 ]; then
      echo "SURVIVED  $unit without '$line': $test still passes"
    elif grep -qE "^test $(qualified "$test")[a-z_]* \.\.\. FAILED$" "$log" &&
      panic=$(panic_of "$log" "$test") && [[ "$panic" == "tests/node/$(file_of "$test").rs:"* ]]; then
      echo "killed    $unit without '$line': $test fails at $panic"
    else
      echo "ERROR     $unit without '$line': $test exited $rc without failing on a panic of its own in tests/node/$(file_of "$test").rs${panic:+ (it panicked at $panic)}"
      tail -n 20 "$log" | sed 's/^/    /'
    fi
  } >"$work/$n/verdict"
}

# The mutations run MUTATE_JOBS at a time (each its own copy of units/ and
# its own simulated node; a run mostly waits on its node's boot and
# timers, about a fifth of one core), and their verdicts print in the
# list's order.
jobs_at_once=${MUTATE_JOBS:-3}
for m in "${mutations[@]}"; do
  IFS='|' read -r unit line test <<<"$m"
  grep -qxF "$line" "units/$unit" || { echo "mutation setup: '$line' not found in $unit" >&2; exit 2; }
done
running=0
for i in "${!mutations[@]}"; do
  IFS='|' read -r unit line test <<<"${mutations[$i]}"
  if [ "$running" -ge "$jobs_at_once" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  judge "$i" "$unit" "$line" "$test" &
  running=$((running + 1))
done
wait
survived=0
errors=0
for i in "${!mutations[@]}"; do
  verdict="$work/$i/verdict"
  if [ ! -s "$verdict" ]; then
    echo "ERROR     mutation ${mutations[$i]}: no verdict (its run ended early)"
    errors=$((errors + 1))
    continue
  fi
  cat "$verdict"
  case $(head -c 8 "$verdict") in
  SURVIVED) survived=$((survived + 1)) ;;
  ERROR*) errors=$((errors + 1)) ;;
  esac
done
echo "$survived mutation(s) survived of ${#mutations[@]}; $errors could not be judged"
[ "$errors" -eq 0 ] || exit 2
[ "$survived" -eq 0 ] && [ "$sandbox_survived" -eq 0 ]
