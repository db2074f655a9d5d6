#!/bin/sh
# Moves pushed cluster assets into place on the node, in one step.
#
#   install-assets.sh STAGING TARGET [MARKER]
#
# STAGING holds what terraform uploaded: assets/ and SHA256SUMS (a manifest
# of every file under assets/, computed by terraform from the local copy).
# Runs as root (the push-assets module calls it through sudo unless it
# connects as root). Steps:
#   1. verify every uploaded file against SHA256SUMS (a partial or corrupt
#      upload never reaches TARGET);
#   2. copy assets/ to a new directory next to TARGET (same filesystem, so
#      the final rename is atomic; the staging dir may be on another one),
#      root-owned, mode 0700 (assets carry TLS keys and kubeconfigs);
#   3. carry over init_*.done markers from an existing TARGET, so a re-push
#      never makes bootkube or tectonic run a second time;
#   4. write MARKER (if given) last, fsync, and rename into TARGET: the path
#      units (bootkube.path: PathExists=TARGET/bootkube.sh) see complete
#      assets or nothing. A previous TARGET is renamed aside first and then
#      removed (mv cannot replace a directory atomically; while it is away
#      nothing triggers, as the path units only wait for files to appear).
# Refuses to replace assets while bootkube.service or tectonic.service is
# running from them. Exit status: 0 done, 1 error (reason on stderr).
set -eu

fail() {
    echo "install-assets: $*" >&2
    exit 1
}

[ $# -ge 2 ] && [ $# -le 3 ] || fail "usage: install-assets.sh STAGING TARGET [MARKER]"
staging=$1
target=${2%/}
marker=${3:-}

case "$target" in
*/../* | */.. | */./* | */.) fail "target must not contain . or .. components, got '$2'" ;;
/?*) ;;
*) fail "target must be an absolute path below /, got '$2'" ;;
esac
case "$staging" in
/?*) ;;
*) fail "staging must be an absolute path below /, got '$staging'" ;;
esac
case "$target" in
/ | /bin | /boot | /dev | /etc | /home | /lib | /lib64 | /opt | /proc | /root | /run | /sbin | /srv | /sys | /tmp | /usr | /var)
    fail "refusing to replace system directory $target" ;;
esac
case "$marker" in
*/* | . | ..) fail "marker must be a plain file name, got '$marker'" ;;
esac
[ "$(id -u)" -eq 0 ] || fail "must run as root (got uid $(id -u))"
[ -d "$staging/assets" ] || fail "no uploaded assets at $staging/assets"
[ -f "$staging/SHA256SUMS" ] || fail "no manifest at $staging/SHA256SUMS"

# 1. Verify the upload.
if ! (cd "$staging/assets" && sha256sum --check --strict --quiet ../SHA256SUMS) >&2; then
    fail "uploaded assets in $staging/assets do not match the manifest; nothing was changed in $target"
fi

parent=$(dirname "$target")
name=$(basename "$target")
mkdir -p "$parent"

# One push at a time per target.
exec 9>"$parent/.$name.push.lock"
flock -w 60 9 || fail "another push to $target holds $parent/.$name.push.lock"

if [ -d "$target" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
    for unit in bootkube.service tectonic.service; do
        state=$(systemctl show -p ActiveState --value "$unit" 2>/dev/null || true)
        if [ "$state" = activating ] || [ "$state" = deactivating ]; then
            fail "$unit is running from $target; push again once it has finished"
        fi
    done
fi

new="$parent/.$name.new"
old="$parent/.$name.old"
# Leftovers of an interrupted push: a push cut off between its two renames
# left the previous assets (and their .done markers) aside; put them back.
if [ ! -e "$target" ] && [ -d "$old" ]; then
    mv "$old" "$target"
fi
rm -rf "$new" "$old"

# 2. Copy next to the target, root-owned, private.
mkdir -m 0700 "$new"
cp -R "$staging/assets/." "$new/"
chown -R 0:0 "$new"
chmod 0700 "$new"

# 3. Keep the record of steps that already ran.
if [ -d "$target" ]; then
    for done_file in "$target"/init_*.done; do
        [ -e "$done_file" ] || continue
        cp -p "$done_file" "$new/"
    done
fi

# 4. Complete marker last, flush, rename into place.
if [ -n "$marker" ]; then
    : >"$new/$marker"
fi
sync
if [ -e "$target" ]; then
    mv "$target" "$old"
fi
if ! mv "$new" "$target"; then
    [ -e "$old" ] && mv "$old" "$target"
    fail "could not rename $new to $target; the previous assets are back in place"
fi
sync
rm -rf "$old" "$staging"
echo "install-assets: $(find "$target" -type f | wc -l) files in place at $target"
