#!/usr/bin/env bash
# Builds shmguard's image.
#   hack/image.sh TAG                    the Dockerfile, from source (compiles and tests in debian:12)
#   hack/image.sh TAG --prebuilt BINARY  the Dockerfile's runtime stage around a binary built and
#                                        tested on this host already (hack/test.sh's image stage:
#                                        the same run compiled it once, no need for a third time)
# From source it first makes the Dockerfile's base images when Docker has none (hack/base-images.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tag=${1:?usage: hack/image.sh TAG [--prebuilt BINARY]}
if [[ "${2:-}" != --prebuilt ]]; then
  "$root/hack/base-images.sh"
  docker build -q -t "$tag" "$root" >/dev/null
  exit 0
fi
bin=${3:?usage: hack/image.sh TAG --prebuilt BINARY}
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
"$root/hack/image-rootfs.sh" "$bin" "$ctx/rootfs"
# The runtime stage exactly as the Dockerfile writes it, with the tree taken from the context.
sed -n '/^FROM scratch AS runtime$/,$p' "$root/Dockerfile" |
  sed 's#^COPY --from=build /rootfs/ /$#COPY rootfs/ /#' >"$ctx/Dockerfile"
grep -qx 'COPY rootfs/ /' "$ctx/Dockerfile" || { echo "image.sh: the Dockerfile's runtime stage changed shape" >&2; exit 1; }
docker build -q -t "$tag" "$ctx" >/dev/null
