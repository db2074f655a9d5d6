#!/usr/bin/env bash
# Checks that the unit tests on the simulated node (the node tier's
# tests/node/node_units.rs) guard the settings they are about: for each
# setting, remove it from a copy of units/, run the test that checks it
# (`cargo test --test node node_units::<test>`, with NODE_BOOTSTRAP_UNITS_DIR
# pointing at the copy), and require that test to FAIL. Prints one line per
# mutation and exits non-zero if any mutation survives.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --workspace --tests -q

# unit | line to delete (exact) | test that must fail
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
)
survived=0
for m in "${mutations[@]}"; do
  IFS='|' read -r unit line test <<<"$m"
  dir=$(mktemp -d)
  cp units/* "$dir/"
  grep -qxF "$line" "$dir/$unit" || { echo "mutation setup: '$line' not found in $unit" >&2; exit 2; }
  grep -vxF "$line" "$dir/$unit" > "$dir/$unit.new" && mv "$dir/$unit.new" "$dir/$unit"
  if NODE_BOOTSTRAP_UNITS_DIR="$dir" cargo test -q --test node "node_units::$test" >"$dir/log" 2>&1; then
    echo "SURVIVED  $unit without '$line': $test still passes"
    survived=$((survived + 1))
  else
    echo "killed    $unit without '$line': $test fails"
  fi
  rm -rf "$dir"
done
echo "$survived mutation(s) survived of ${#mutations[@]}"
[ "$survived" -eq 0 ]
