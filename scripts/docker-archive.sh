#!/usr/bin/env bash
# Writes a container image as a docker-archive tar (what `docker save`
# writes and `docker load` / `ctr images import` read): manifest.json, the
# image config and one layer, made of a root file system directory. Test
# setup only: the tests load the images it writes into the docker and
# containerd of simulated nodes and VMs, which reach no image registry.
#
#   scripts/docker-archive.sh ROOTFS TAG OUT [ENTRYPOINT...]
#
# ROOTFS  a directory: the image's whole file system (owned by root in the
#         image, times set to 0, names sorted: the same input gives the
#         same bytes, so the same image ID).
# TAG     the image's name, e.g. k8s.gcr.io/pause:3.2.
# OUT     the tar to write (replaced atomically).
# ENTRYPOINT...  the image's entrypoint, one argument per word (none: the
#         image has no entrypoint, only its command).
# Optional, from the environment: DOCKER_ARCHIVE_CMD, the image's command
# as a JSON list (e.g. '["pause"]'); DOCKER_ARCHIVE_USER, the user its
# processes run as (e.g. 1234). Unset, the config has neither.
set -euo pipefail

die() { echo "docker-archive: $*" >&2; exit 1; }

[ $# -ge 3 ] || die "usage: $0 ROOTFS TAG OUT [ENTRYPOINT...]"
rootfs=$1 tag=$2 out=$3
shift 3
[ -d "$rootfs" ] || die "the root file system $rootfs is not a directory"
case "$tag" in
    *:*) ;;
    *) die "the tag $tag names no version (NAME:VERSION)" ;;
esac
command -v python3 >/dev/null || die "python3 is missing (scripts/setup.sh installs it)"

work=$(mktemp -d "${TMPDIR:-/var/tmp}/nb-docker-archive.XXXXXX")
trap 'rm -rf "$work"' EXIT

tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
    -C "$rootfs" -cf "$work/layer.tar" . ||
    die "packing $rootfs failed"
layer_sha=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
mkdir "$work/$layer_sha"
mv "$work/layer.tar" "$work/$layer_sha/layer.tar"

# The config (its sha256 is the image ID) and the manifest, as JSON from
# Python so that the entrypoint's words are quoted right.
config_name=$(python3 - "$work" "$layer_sha" "$tag" "$@" <<'EOF'
import hashlib, json, os, sys
work, layer, tag, entrypoint = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
image_config = {"WorkingDir": "/"}
if entrypoint:
    image_config["Entrypoint"] = entrypoint
if os.environ.get("DOCKER_ARCHIVE_CMD"):
    image_config["Cmd"] = json.loads(os.environ["DOCKER_ARCHIVE_CMD"])
if os.environ.get("DOCKER_ARCHIVE_USER"):
    image_config["User"] = os.environ["DOCKER_ARCHIVE_USER"]
config = {
    "architecture": "amd64",
    "os": "linux",
    "created": "1970-01-01T00:00:00Z",
    "config": image_config,
    "rootfs": {"type": "layers", "diff_ids": ["sha256:" + layer]},
    "history": [{"created": "1970-01-01T00:00:00Z",
                 "created_by": "node-bootstrap scripts/docker-archive.sh"}],
}
data = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
config_name = hashlib.sha256(data).hexdigest() + ".json"
with open(f"{work}/{config_name}", "wb") as f:
    f.write(data)
manifest = [{"Config": config_name, "RepoTags": [tag], "Layers": [f"{layer}/layer.tar"]}]
with open(f"{work}/manifest.json", "w") as f:
    json.dump(manifest, f)
print(config_name)
EOF
) || die "writing the image config failed"

mkdir -p "$(dirname "$out")"
tmp="$out.tmp.$$"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
    -C "$work" -cf "$tmp" manifest.json "$config_name" "$layer_sha" ||
    { rm -f "$tmp"; die "writing $out failed"; }
mv "$tmp" "$out"
