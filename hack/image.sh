#!/usr/bin/env bash
# Builds shmguard's image.
#   hack/image.sh TAG                    the Dockerfile, from source (compiles and tests in debian:12)
#   hack/image.sh TAG --prebuilt BINARY [--platform linux/arm64]
#                                        the Dockerfile's runtime stage around a binary built and
#                                        tested on this host already (hack/test.sh's image stage:
#                                        the same run compiled it once, no need for a third time);
#                                        with --platform, around the arm64 binary hack/cross.sh
#                                        cross-built (an image for that platform, in the same store)
#   hack/image.sh --index OUT NAME TAG...
#                                        one multi-arch image: an OCI image index named NAME over
#                                        the images TAG... (one per platform, e.g. the amd64 and
#                                        the arm64 one), written as an oci-archive to OUT (skopeo).
#                                        Docker's classic store cannot hold an index under one tag;
#                                        push it with `skopeo copy --all oci-archive:OUT:NAME
#                                        docker://REGISTRY/shmguard:VERSION`.
# From source it first makes the Dockerfile's base images when Docker has none (hack/base-images.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
usage="usage: hack/image.sh TAG [--prebuilt BINARY [--platform PLATFORM]] | --index OUT NAME TAG..."

# The images TAG... as one OCI layout: each copied from the Docker store (skopeo converts it to
# OCI media types; blobs they share are stored once), then an image index naming each manifest's
# platform, as the layout's one entry under NAME.
index() {  # OUT NAME TAG...
  local out=${1:?$usage} name=${2:?$usage} tag platform
  shift 2
  (($#)) || { echo "$usage" >&2; return 2; }
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  for tag in "$@"; do
    platform=$(docker image inspect -f '{{.Os}}/{{.Architecture}}' "$tag")
    skopeo copy -q "docker-daemon:$tag" "oci:$work/layout:${platform//\//-}" >/dev/null
    echo "${platform//\//-} $platform" >>"$work/platforms"
  done
  python3 - "$work/layout" "$name" "$work/platforms" <<'PY'
import hashlib, json, os, sys
layout, name, platforms = sys.argv[1:]
by_ref = dict(line.split() for line in open(platforms))
top = json.load(open(os.path.join(layout, "index.json")))
manifests = []
for m in top["manifests"]:
    os_, arch = by_ref[m["annotations"]["org.opencontainers.image.ref.name"]].split("/")
    platform = {"architecture": arch, "os": os_}
    if arch == "arm64":
        platform["variant"] = "v8"
    manifests.append({"mediaType": m["mediaType"], "digest": m["digest"], "size": m["size"],
                      "platform": platform})
blob = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                   "manifests": manifests}, indent=2).encode()
digest = hashlib.sha256(blob).hexdigest()
with open(os.path.join(layout, "blobs", "sha256", digest), "wb") as f:
    f.write(blob)
top["manifests"] = [{"mediaType": "application/vnd.oci.image.index.v1+json", "digest": "sha256:" + digest,
                     "size": len(blob), "annotations": {"org.opencontainers.image.ref.name": name}}]
with open(os.path.join(layout, "index.json"), "w") as f:
    json.dump(top, f)
PY
  tar -C "$work/layout" -cf "$out" .
  echo "$out: $name, an OCI image index over $(cut -d' ' -f2 "$work/platforms" | paste -sd' ')"
}

if [[ "${1:-}" == --index ]]; then
  shift
  index "$@"
  exit
fi
tag=${1:?$usage}
if [[ "${2:-}" != --prebuilt ]]; then
  "$root/hack/base-images.sh"
  docker build -q -t "$tag" "$root" >/dev/null
  exit 0
fi
bin=${3:?$usage}
platform=()
if [[ "${4:-}" == --platform ]]; then platform=(--platform "${5:?$usage}"); fi
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
"$root/hack/image-rootfs.sh" "$bin" "$ctx/rootfs"
# The runtime stage exactly as the Dockerfile writes it, with the tree taken from the context.
sed -n '/^FROM scratch AS runtime$/,$p' "$root/Dockerfile" |
  sed 's#^COPY --from=build /rootfs/ /$#COPY rootfs/ /#' >"$ctx/Dockerfile"
grep -qx 'COPY rootfs/ /' "$ctx/Dockerfile" || { echo "image.sh: the Dockerfile's runtime stage changed shape" >&2; exit 1; }
docker build -q "${platform[@]}" -t "$tag" "$ctx" >/dev/null
