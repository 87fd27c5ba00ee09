#!/usr/bin/env bash
# Prepare a machine without Docker (Debian, as root) to build and run georep's image with
# podman, and print the environment that testcontainers and the Docker SDK need.
#
#   eval "$(bash docker/prepare-podman.sh | tail -3)"
#
# Idempotent; each step is skipped when already done:
# 1. podman, runc, debootstrap and podman-compose from Debian's packages, and the DNS
#    plugin of podman's container networks (containers reach each other by name);
# 2. podman's system containers.conf: runtime runc (crun fails on hybrid cgroups here) and
#    explicit default ulimits (podman's defaults are refused here);
# 3. the base image localhost/georep-base:bookworm, a minimal Debian bookworm made by
#    debootstrap from the Debian mirror apt uses (no image registry is needed), with
#    Python 3.11; built once and reused;
# 4. podman's Docker-compatible API on a unix socket ($GEOREP_PODMAN_SOCKET, default
#    /run/georep-podman.sock), started in the background when it does not answer.
# The last three lines printed are the exports (DOCKER_HOST and testcontainers' settings).
set -euo pipefail

base_image="${GEOREP_BASE_IMAGE:-localhost/georep-base:bookworm}"
socket="${GEOREP_PODMAN_SOCKET:-/run/georep-podman.sock}"
mirror="${GEOREP_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
log() { echo "prepare-podman: $*" >&2; }

if [ "$(id -u)" != 0 ]; then
    log "run as root (podman here runs rootful; apt-get and debootstrap need root)"
    exit 2
fi

missing=()
for tool in podman runc debootstrap podman-compose; do
    command -v "$tool" >/dev/null || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
    log "installing from Debian's packages: ${missing[*]}"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >&2
fi

# Containers find each other by name on a podman network only through a DNS plugin,
# which Debian's packages recommend but do not require: CNI's dnsname (podman 4.3 on
# bookworm uses CNI) or aardvark-dns with netavark. Without it a gateway container cannot
# resolve its cluster's name. Networks made before it was installed stay without DNS.
backend=$(podman info --format '{{.Host.NetworkBackend}}' 2>/dev/null || echo cni)
dns=()
if [ "$backend" = cni ] && [ ! -x /usr/lib/cni/dnsname ]; then
    dns+=(golang-github-containernetworking-plugin-dnsname)
elif [ "$backend" = netavark ] && [ ! -x /usr/lib/podman/aardvark-dns ]; then
    dns+=(aardvark-dns)
fi
if [ "${#dns[@]}" -gt 0 ]; then
    log "installing the container network's DNS from Debian's packages: ${dns[*]}"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${dns[@]}" >&2
fi

conf=/etc/containers/containers.conf
if ! grep -q 'georep: runtime' "$conf" 2>/dev/null; then
    log "writing $conf (runtime runc, default ulimits)"
    mkdir -p /etc/containers
    cat >>"$conf" <<'CONF'
# georep: runtime runc (crun fails on this kernel's hybrid cgroups) and explicit
# default ulimits (podman's defaults are refused on these machines).
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]

[engine]
runtime = "runc"
CONF
fi

if ! podman image exists "$base_image"; then
    started=$(date +%s)
    root=$(mktemp -d -t georep-base-XXXXXX)
    log "building $base_image with debootstrap from $mirror (once; reused afterwards)"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        bookworm "$root" "$mirror" >&2
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" -c . | podman import --change 'CMD ["/bin/bash"]' - "$base_image" >&2
    rm -rf "$root"
    log "base image built in $(($(date +%s) - started)) s"
fi

# A service started from a directory that has since been deleted (an earlier clone's
# .ci/run) still answers the ping but cannot start a container: conmon fails with
# "Failed to get working directory" and the API says "write child: broken pipe".
for pid in $(pgrep -f "podman system service .*unix://$socket" || true); do
    if [[ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" == *" (deleted)" ]]; then
        log "restarting podman's API (its working directory was deleted)"
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
done

if ! curl -sf --unix-socket "$socket" http://d/_ping >/dev/null 2>&1; then
    log "starting podman's API on unix://$socket"
    rm -f "$socket"
    # from /, so that the service never depends on the caller's directory
    (cd / && exec nohup podman system service --time=0 "unix://$socket" \
        </dev/null >/tmp/georep-podman-service.log 2>&1) &
    for _ in $(seq 1 50); do
        curl -sf --unix-socket "$socket" http://d/_ping >/dev/null 2>&1 && break
        sleep 0.2
    done
    curl -sf --unix-socket "$socket" http://d/_ping >/dev/null \
        || { log "podman's API did not answer; see /tmp/georep-podman-service.log"; exit 1; }
fi

echo "export DOCKER_HOST=unix://$socket"
echo "export TESTCONTAINERS_RYUK_DISABLED=true TESTCONTAINERS_CONNECTION_MODE=docker_host"
echo "export GEOREP_BASE_IMAGE=$base_image"
