#!/usr/bin/env bash
# Renders the example Ignition configs (ignition/examples/*.ign) from the
# modules in terraform/modules, the units in units/ and the inputs in
# ignition/render/inputs, with terraform and no providers. Each file holds
# exactly the bytes the ignition module outputs (what a node gets as user
# data or what is uploaded to a bucket; the pointer example's SHA-512 is of
# these bytes). Read one with: python3 -m json.tool ignition/examples/worker.ign
#
#   scripts/render-ignition.sh [OUTDIR]     (default: ignition/examples)
#
# Nothing is written into the repository except OUTDIR: terraform's data dir
# and state live in a temporary directory.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/ignition/examples}
command -v terraform >/dev/null || { echo "render-ignition: terraform is not installed" >&2; exit 1; }
command -v python3 >/dev/null || { echo "render-ignition: python3 is not installed" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TF_CLI_CONFIG_FILE=/dev/null TF_DATA_DIR="$work/tfdata" TF_IN_AUTOMATION=1 CHECKPOINT_DISABLE=1
tf() { terraform -chdir="$root/ignition/render" "$@"; }

if ! tf init -input=false -no-color >"$work/init.log" 2>&1; then
    cat "$work/init.log" >&2
    exit 1
fi
if ! tf apply -input=false -no-color -auto-approve -lock=false -state="$work/state" >"$work/apply.log" 2>&1; then
    cat "$work/apply.log" >&2
    exit 1
fi
tf output -no-color -state="$work/state" -json configs >"$work/configs.json"

mkdir -p "$out"
python3 - "$work/configs.json" "$out" <<'PY'
import json, os, sys
configs = json.load(open(sys.argv[1]))
out = sys.argv[2]
for name, text in sorted(configs.items()):
    json.loads(text)  # fail loudly on anything but JSON
    tmp = os.path.join(out, "." + name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    os.replace(tmp, os.path.join(out, name))
    print(os.path.join(out, name))
PY
