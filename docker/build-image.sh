#!/usr/bin/env bash
# Build the georep image: wheels of georep and its runtime dependencies into
# docker/.build/wheels (with this checkout's .venv pip), then the image from
# docker/Dockerfile.
#
#   bash docker/build-image.sh                      # podman, base localhost/georep-base:bookworm
#   ENGINE=docker BASE_IMAGE=python:3.11-slim bash docker/build-image.sh
#
# ENGINE (podman or docker), BASE_IMAGE (default: $GEOREP_BASE_IMAGE, else the
# debootstrap base made by prepare-podman.sh) and IMAGE (default localhost/georep:dev).
set -euo pipefail
cd "$(dirname "$0")/.."
engine="${ENGINE:-podman}"
base="${BASE_IMAGE:-${GEOREP_BASE_IMAGE:-localhost/georep-base:bookworm}}"
image="${IMAGE:-localhost/georep:dev}"
python="${PYTHON:-.venv/bin/python}"
context=docker/.build
started=$(date +%s)

rm -rf "$context"
mkdir -p "$context/wheels"
"$python" -m pip wheel --quiet --wheel-dir "$context/wheels" . >&2
cp docker/Dockerfile "$context/Dockerfile"
format=(); [ "$engine" = podman ] && format=(--format docker)  # OCI images drop HEALTHCHECK
"$engine" build --quiet "${format[@]}" --build-arg "BASE_IMAGE=$base" -t "$image" "$context" >&2
echo "built $image on $base in $(($(date +%s) - started)) s" >&2
"$engine" image inspect "$image" --format '{{.Size}}' | awk '{printf "image size: %.0f MB\n", $1/1e6}' >&2
echo "$image"
