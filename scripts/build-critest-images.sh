#!/usr/bin/env bash
# Builds, offline, the images critest 1.32 (cri-tools' CRI validation
# suite) runs its containers from, under the exact names critest gives
# them (pkg/framework/util.go, pkg/validate/consts.go,
# multi_container_linux.go, security_context_linux.go of cri-tools
# 1.32.0), as docker-archive tars that `ctr images import` loads into a
# node's containerd before critest runs. critest looks an image up
# (ImageStatus) before it pulls it when it creates a container, so with
# these loaded no spec but the Image Manager ones (which test PullImage
# itself) asks a registry. Test setup only.
#
#   scripts/build-critest-images.sh   prints the directory holding the
#                                     tars and images.txt (TAG TAR, a
#                                     line per image)
#
# The images (each on a root of Debian's busybox-static with every applet
# as a hard link,
# /etc/passwd and /etc/group, /tmp):
#   registry.k8s.io/e2e-test-images/busybox:1.29-2   critest's default
#       test image: busybox, command sh, with Debian's pgrep (procps) and
#       ipcs (util-linux), applets busybox-static lacks
#   registry.k8s.io/e2e-test-images/nonewprivs:1.3   test/images/nonewprivs
#       of Debian's kubernetes source (scripts/build-e2e.sh), setuid
#       /usr/local/bin/nnp, command nnp (prints "Effective uid: N")
#   gcr.io/k8s-staging-cri-tools/test-image-predefined-group:latest  as
#       cri-tools' images/image-predefined-group: user 1000 (default-user)
#       in group 50000 (group-defined-in-image), USER 1000
#   registry.k8s.io/e2e-test-images/nginx:1.14-2     a STAND-IN for nginx:
#       busybox's httpd on port 80 as the child of a process named nginx
#       whose pid is in /var/run/nginx.pid (what the web server and
#       HostPID specs look at); not nginx's "master process" title
#   registry.k8s.io/e2e-test-images/httpd:2.4.39-4   a STAND-IN for
#       Apache httpd: busybox's httpd on port 80, saying so in its log
#   gcr.io/k8s-staging-cri-tools/hostnet-nginx-amd64:latest  a STAND-IN
#       for cri-tools' images/hostnet-nginx: busybox's httpd on port 12003
# The stand-ins stop on SIGTERM (a shell as a container's PID 1 would
# ignore it, and every stop would wait for its timeout).
#
# Cached by its inputs (busybox, the e2e build's nonewprivs, these
# scripts) under $NB_TEST_CACHE/critest-images/<key>/; seconds to build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${NB_TEST_CACHE:-/var/cache/node-bootstrap-tests}
busybox=/bin/busybox

die() { echo "build-critest-images: $*" >&2; exit 1; }

command -v python3 >/dev/null || die "python3 is missing (scripts/setup.sh installs it)"
[ -x "$busybox" ] || die "$busybox is missing (scripts/setup.sh installs busybox-static)"
e2e=$("$root/scripts/build-e2e.sh") || die "no e2e build, whose nonewprivs the nonewprivs image carries (above)"
[ -x "$e2e/nonewprivs" ] || die "$e2e/nonewprivs is missing (scripts/build-e2e.sh builds it)"
key=$( (stat -c '%s %Y' "$busybox" "$e2e/nonewprivs"
        cat "$0" "$root/scripts/docker-archive.sh") | sha256sum | cut -c1-16)
out="$cache/critest-images/$key"

if [ ! -s "$out/images.txt" ]; then
    work=$(mktemp -d "${TMPDIR:-/var/tmp}/nb-critest-images.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    base=$work/base
    mkdir -p "$base/bin" "$base/etc" "$base/tmp" "$base/usr/local/bin" "$base/usr/sbin" \
        "$base/root" "$base/var/run"
    chmod 1777 "$base/tmp"
    cp "$busybox" "$base/bin/busybox"
    # Hard links, as in busybox's own image (a masked /bin/ls must not mask
    # the shell too, as a symbolic link's target would be).
    for a in $("$busybox" --list); do
        [ "$a" = busybox ] || ln -f "$base/bin/busybox" "$base/bin/$a"
    done
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' > "$base/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' > "$base/etc/group"
    mkdir -p "$work/roots" "$work/out/tars"
    image() { # NAME TAG: the tar of $work/roots/NAME, listed in images.txt
        local name=$1 tag=$2
        "$root/scripts/docker-archive.sh" "$work/roots/$name" "$tag" "$work/out/tars/$name.tar"
        echo "$tag tars/$name.tar" >> "$work/out/images.txt"
    }
    root_of() { cp -a "$base" "$work/roots/$1"; echo "$work/roots/$1"; }
    # A web server stand-in: busybox's httpd on PORT serving a page, as the
    # child of the script NAME (its process name), stopped on SIGTERM.
    server() { # ROOT NAME PORT WHAT
        local r=$1 name=$2 port=$3 what=$4
        mkdir -p "$r/usr/share/$name/html"
        echo "<html><body>$what (node-bootstrap tests)</body></html>" > "$r/usr/share/$name/html/index.html"
        cat > "$r/usr/sbin/$name" <<EOF
#!/bin/sh
# $what (node-bootstrap scripts/build-critest-images.sh).
echo "$name: $what, port $port"
httpd -f -p $port -h /usr/share/$name/html &
child=\$!
echo \$\$ > /var/run/$name.pid
trap 'kill \$child; exit 0' TERM INT
wait
EOF
        chmod 755 "$r/usr/sbin/$name"
    }

    # Debian's busybox-static has no pgrep and no ipcs applets, which
    # busybox's own image has (the execSync-timeout and HostIPC specs run
    # them): procps' pgrep and util-linux's ipcs, with their libraries.
    with_libs() { # ROOT BINARY
        local r=$1 bin=$2 f
        [ -x "$bin" ] || die "$bin is missing (Debian's procps, util-linux)"
        for f in $(ldd "$bin" | grep -oE '/[^ ]+'); do
            mkdir -p "$r$(dirname "$f")"
            cp -L "$f" "$r$f"
        done
        mkdir -p "$r/usr/bin"
        cp -L "$bin" "$r/usr/bin/$(basename "$bin")"
    }
    r=$(root_of busybox)
    rm -f "$r/bin/pgrep" "$r/bin/ipcs"
    with_libs "$r" /usr/bin/pgrep
    with_libs "$r" /usr/bin/ipcs
    DOCKER_ARCHIVE_CMD='["sh"]' image busybox registry.k8s.io/e2e-test-images/busybox:1.29-2

    r=$(root_of nonewprivs)
    cp "$e2e/nonewprivs" "$r/usr/local/bin/nnp"
    chmod 4755 "$r/usr/local/bin/nnp"
    DOCKER_ARCHIVE_CMD='["nnp"]' image nonewprivs registry.k8s.io/e2e-test-images/nonewprivs:1.3

    r=$(root_of predefined-group)
    echo 'default-user:x:1000:1000::/home/default-user:/bin/sh' >> "$r/etc/passwd"
    printf 'default-user:x:1000:\ngroup-defined-in-image:x:50000:default-user\n' >> "$r/etc/group"
    mkdir -p "$r/home/default-user"
    DOCKER_ARCHIVE_CMD='["sh"]' DOCKER_ARCHIVE_USER=1000 \
        image predefined-group gcr.io/k8s-staging-cri-tools/test-image-predefined-group:latest

    r=$(root_of nginx)
    server "$r" nginx 80 "nginx STAND-IN: busybox httpd"
    DOCKER_ARCHIVE_CMD='["nginx","-g","daemon off;"]' image nginx registry.k8s.io/e2e-test-images/nginx:1.14-2

    r=$(root_of httpd)
    server "$r" httpd-foreground 80 "httpd STAND-IN: busybox httpd"
    DOCKER_ARCHIVE_CMD='["httpd-foreground"]' image httpd registry.k8s.io/e2e-test-images/httpd:2.4.39-4

    r=$(root_of hostnet-nginx)
    server "$r" nginx 12003 "hostnet-nginx STAND-IN: busybox httpd"
    DOCKER_ARCHIVE_CMD='["nginx","-g","daemon off;"]' \
        image hostnet-nginx gcr.io/k8s-staging-cri-tools/hostnet-nginx-amd64:latest

    mkdir -p "$cache/critest-images"
    tmp="$out.tmp.$$"
    rm -rf "$tmp"
    mv "$work/out" "$tmp"
    rm -rf "$out"
    mv "$tmp" "$out"
fi
echo "$out"
