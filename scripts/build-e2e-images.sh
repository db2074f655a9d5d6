#!/usr/bin/env bash
# Builds, offline, the images that Kubernetes 1.20.2's [NodeConformance]
# specs pull (`e2e.test --list-images`; test/utils/image/manifest.go), and
# lays them out as the storage of two image registries (Debian's
# docker-registry, distribution 2.8) that the conformance rig serves on
# loopback (testkit/src/conformance/registry.rs): a public one, and a
# private one that the rig serves with htpasswd authentication for the
# private-registry specs. Test setup only.
#
#   scripts/build-e2e-images.sh     prints the directory holding
#                                   public/ and private/ (registry storage),
#                                   tars/ (each image as a docker-archive
#                                   tar, for a node that cannot reach the
#                                   registries: the VM tier's worker) and
#                                   images.txt (STORAGE PATH:TAG TAR, a line
#                                   per image)
#
# The images, under the paths KUBE_TEST_REPO_LIST maps the suite's
# registries to (testkit::conformance::registry writes that list):
#   e2e-test-images/agnhost:2.21               agnhost, built from the same
#       source's test/images/agnhost (scripts/build-e2e.sh; that tree
#       calls it 2.25; the 1.20.2 manifest asks for 2.21): /agnhost,
#       /agnhost-2, entrypoint /agnhost, command pause, on busybox, with
#       Debian's curl and netcat-openbsd (`nc`) and the libraries they load
#       (the upstream image adds both from Alpine; the networking and
#       lifecycle hook specs dial with them; busybox's nc has no -u), and
#       Debian's dash as /bin/sh (busybox's sh prefers its own applets)
#   kubernetes-e2e-test-images/nonewprivs:1.0  test/images/nonewprivs
#       (setuid /usr/local/bin/nnp, command nnp), on busybox
#   kubernetes-e2e-test-images/nonroot:1.0     busybox, user 1234
#   library/busybox:1.29                       Debian's busybox-static,
#       every applet, command sh
#   library/nginx:1.14-alpine, library/nginx:1.15-alpine  a STAND-IN for
#       nginx, named as one: busybox's httpd serving a page on port 80
#   k8s/pause:3.2                              scripts/build-pause.sh's
#   (private) authenticated-image-pulling/alpine:3.7  busybox (a STAND-IN
#       named as the suite's private alpine)
# Every image's root is busybox-static with all its applets, /etc/passwd
# and /etc/group (root, nobody), /tmp.
#
# Cached by its inputs (the e2e build's key, the pause image, busybox,
# these scripts) under $NB_TEST_CACHE/e2e-images/<key>/; seconds to build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${NB_TEST_CACHE:-/var/cache/node-bootstrap-tests}
busybox=/bin/busybox

die() { echo "build-e2e-images: $*" >&2; exit 1; }

for tool in docker-registry skopeo python3; do
    command -v "$tool" >/dev/null ||
        die "$tool is missing (scripts/setup.sh installs docker-registry, skopeo, python3)"
done
[ -x "$busybox" ] || die "$busybox is missing (scripts/setup.sh installs busybox-static)"
e2e=$("$root/scripts/build-e2e.sh") || die "no e2e build (above)"
pause=$("$root/scripts/build-pause.sh") || die "no pause image (above)"
key=$( (echo "$e2e"; stat -c '%s %Y' "$pause" "$busybox"
        cat "$0" "$root/scripts/docker-archive.sh") | sha256sum | cut -c1-16)
out="$cache/e2e-images/$key"

if [ ! -s "$out/images.txt" ]; then
    work=$(mktemp -d "${TMPDIR:-/var/tmp}/nb-e2e-images.XXXXXX")
    registry_pid=
    cleanup() {
        [ -z "$registry_pid" ] || kill "$registry_pid" 2>/dev/null || true
        rm -rf "$work"
    }
    trap cleanup EXIT
    # The root every image starts from.
    base=$work/base
    mkdir -p "$base/bin" "$base/etc" "$base/tmp" "$base/usr/local/bin" "$base/root"
    chmod 1777 "$base/tmp"
    cp "$busybox" "$base/bin/busybox"
    for a in $("$busybox" --list); do
        [ "$a" = busybox ] || ln -sf busybox "$base/bin/$a"
    done
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' > "$base/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' > "$base/etc/group"
    image() { # NAME TAG [ENTRYPOINT...]: the tar of $work/roots/NAME
        local name=$1 tag=$2
        shift 2
        "$root/scripts/docker-archive.sh" "$work/roots/$name" "$tag" "$work/tars/$name.tar" "$@"
    }
    mkdir -p "$work/roots" "$work/tars"
    for r in agnhost nonewprivs nonroot busybox nginx alpine; do
        cp -a "$base" "$work/roots/$r"
    done
    cp "$e2e/agnhost" "$work/roots/agnhost/agnhost"
    # Debian's curl and nc (netcat-openbsd) as /usr/bin/curl and
    # /usr/bin/nc (before busybox's /bin on PATH), with every library
    # they load at its own path.
    with_libs() { # ROOT BINARY NAME
        local r=$1 bin=$2 name=$3 f
        [ -x "$bin" ] || die "$bin is missing (scripts/setup.sh installs curl and netcat-openbsd)"
        for f in $(ldd "$bin" | grep -oE '/[^ ]+'); do
            mkdir -p "$r$(dirname "$f")"
            cp -L "$f" "$r$f"
        done
        mkdir -p "$r/usr/bin"
        cp -L "$bin" "$r/usr/bin/$name"
    }
    with_libs "$work/roots/agnhost" /usr/bin/curl curl
    with_libs "$work/roots/agnhost" /bin/nc.openbsd nc
    # Debian's busybox-static runs its own applets before anything on
    # PATH (FEATURE_SH_STANDALONE), so its sh would run busybox's nc, which
    # has no -u: agnhost's /bin/sh is Debian's dash, as Alpine's image has
    # an sh that looks up PATH.
    with_libs "$work/roots/agnhost" /bin/dash dash
    ln -sf /usr/bin/dash "$work/roots/agnhost/bin/sh"
    mkdir -p "$work/roots/agnhost/etc/ssl/certs"
    ln -s agnhost "$work/roots/agnhost/agnhost-2"
    mkdir -p "$work/roots/agnhost/uploads"
    DOCKER_ARCHIVE_CMD='["pause"]' image agnhost e2e-test-images/agnhost:2.21 /agnhost
    cp "$e2e/nonewprivs" "$work/roots/nonewprivs/usr/local/bin/nnp"
    chmod 4755 "$work/roots/nonewprivs/usr/local/bin/nnp"
    DOCKER_ARCHIVE_CMD='["nnp"]' image nonewprivs kubernetes-e2e-test-images/nonewprivs:1.0
    DOCKER_ARCHIVE_CMD='["sh"]' DOCKER_ARCHIVE_USER=1234 image nonroot kubernetes-e2e-test-images/nonroot:1.0
    DOCKER_ARCHIVE_CMD='["sh"]' image busybox library/busybox:1.29
    mkdir -p "$work/roots/nginx/usr/share/nginx/html"
    echo '<html><body>nginx stand-in (busybox httpd, node-bootstrap tests)</body></html>' \
        > "$work/roots/nginx/usr/share/nginx/html/index.html"
    DOCKER_ARCHIVE_CMD='["httpd","-f","-p","80","-h","/usr/share/nginx/html"]' \
        image nginx library/nginx:1.14-alpine
    DOCKER_ARCHIVE_CMD='["sh"]' image alpine authenticated-image-pulling/alpine:3.7

    # Each image pushed into the registry storage it belongs to.
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    push() { # STORAGE ARCHIVE PATH:TAG
        local storage=$1 archive=$2 ref=$3
        skopeo copy -q --dest-tls-verify=false "docker-archive:$archive" \
            "docker://127.0.0.1:$port/$ref" >>"$work/skopeo.log" 2>&1 ||
            die "skopeo copy $archive to $ref failed: $(tail -3 "$work/skopeo.log")"
        mkdir -p "$work/out/tars"
        cp "$archive" "$work/out/tars/$(basename "$archive")"
        echo "$storage $ref tars/$(basename "$archive")" >> "$work/out/images.txt"
    }
    serve() { # STORAGE: a registry on $port writing into $work/out/STORAGE
        [ -z "$registry_pid" ] || { kill "$registry_pid"; wait "$registry_pid" 2>/dev/null || true; }
        mkdir -p "$work/out/$1"
        cat > "$work/registry.yml" <<EOF
version: 0.1
log: {level: error}
storage:
  filesystem: {rootdirectory: $work/out/$1}
http: {addr: 127.0.0.1:$port}
EOF
        docker-registry serve "$work/registry.yml" >"$work/registry-$1.log" 2>&1 &
        registry_pid=$!
        for _ in $(seq 1 100); do
            python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/v2/')" 2>/dev/null && return 0
            sleep 0.1
        done
        die "docker-registry did not answer: $(tail -3 "$work/registry-$1.log")"
    }
    mkdir -p "$work/out"
    serve public
    push public "$work/tars/agnhost.tar" e2e-test-images/agnhost:2.21
    push public "$work/tars/nonewprivs.tar" kubernetes-e2e-test-images/nonewprivs:1.0
    push public "$work/tars/nonroot.tar" kubernetes-e2e-test-images/nonroot:1.0
    push public "$work/tars/busybox.tar" library/busybox:1.29
    push public "$work/tars/nginx.tar" library/nginx:1.14-alpine
    push public "$work/tars/nginx.tar" library/nginx:1.15-alpine
    push public "$pause" k8s/pause:3.2
    serve private
    push private "$work/tars/alpine.tar" authenticated-image-pulling/alpine:3.7
    kill "$registry_pid"
    wait "$registry_pid" 2>/dev/null || true
    registry_pid=
    mkdir -p "$cache/e2e-images"
    tmp="$out.tmp.$$"
    rm -rf "$tmp"
    mv "$work/out" "$tmp"
    rm -rf "$out"
    mv "$tmp" "$out"
fi
echo "$out"
