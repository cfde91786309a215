#!/usr/bin/env bash
# Gathers the image's whole filesystem into OUT: the shmguard binary (stripped), the kubectl plugin
# link, exactly the shared libraries `ldd` says it loads, a passwd/group naming uid 65532, /tmp and
# /work. The Dockerfile's build stage runs it on the binary it built; `hack/image.sh --prebuilt`
# runs it on the host's build (both Debian 12, so the libraries are the same packages). An arm64
# binary (hack/cross.sh) takes the host's multiarch :arm64 libraries, listed by the aarch64 loader
# itself through qemu-user's binfmt handler.
# usage: hack/image-rootfs.sh BINARY OUT
set -euo pipefail
bin=${1:?usage: image-rootfs.sh BINARY OUT}
out=${2:?usage: image-rootfs.sh BINARY OUT}
mkdir -p "$out/usr/local/bin" "$out/etc" "$out/tmp" "$out/work"
strip=strip list=(ldd)
if [[ "$(readelf -h "$bin" | awk -F: '/Machine:/ {gsub(/^ +/, "", $2); print $2}')" == AArch64 ]]; then
  strip=aarch64-linux-gnu-strip list=(/lib/ld-linux-aarch64.so.1 --list)
fi
"$strip" -o "$out/usr/local/bin/shmguard" "$bin"
ln -sf shmguard "$out/usr/local/bin/kubectl-shmguard"
"${list[@]}" "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | xargs -I{} cp --parents -L {} "$out/"
echo 'nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin' >"$out/etc/passwd"
echo 'nonroot:x:65532:' >"$out/etc/group"
chmod 1777 "$out/tmp"
