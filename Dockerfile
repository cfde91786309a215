# shmguard container image.
# Build stage: Debian 12 with the -dev packages; builds and runs the test suite (the image build
# fails when a test fails), then gathers the binary and exactly the shared libraries `ldd` says it
# loads into /rootfs (hack/image-rootfs.sh). Runtime stage: that tree alone on an empty base,
# running as uid 65532: no shell, no package manager, nothing else to patch. (hack/image.sh
# --prebuilt makes the same runtime stage from a binary the host built: CI's image stage.)
# Multi-arch (linux/amd64, linux/arm64): the build stage compiles for the platform it runs on; the
# arm64 image is this runtime stage around the binary hack/cross.sh cross-compiles with Debian's
# cross toolchain and :arm64 packages (hack/image.sh TAG --prebuilt BINARY --platform linux/arm64),
# and `hack/image.sh --index` writes both as one OCI image index (docs/install.md "The image").

FROM debian:12 AS build
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update && apt-get install -y --no-install-recommends \
      g++ cmake ninja-build pkg-config libssl-dev nlohmann-json3-dev libyaml-dev libyaml-cpp-dev \
      libcli11-dev libcpp-httplib-dev libgtest-dev libgmock-dev libtcmalloc-minimal4 openssl \
      python3 python3-pytest python3-jsonpatch python3-yaml ca-certificates \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSHMGUARD_BUILD_BENCH=OFF \
    && cmake --build /build -j"$(nproc)" \
    && cd /build && ctest --output-on-failure -j"$(nproc)" -E 'e2e.test_pytorch|e2e.test_chart|e2e.test_hostile'
RUN hack/image-rootfs.sh /build/shmguard /rootfs

FROM scratch AS runtime
COPY --from=build /rootfs/ /
USER 65532:65532
# As a CLI: docker run --rm -v "$PWD:/work" IMAGE check -f k8s   (paths relative to the mount)
WORKDIR /work
EXPOSE 8443 9090
ENTRYPOINT ["/usr/local/bin/shmguard"]
CMD ["serve", "--tls-cert-file=/etc/shmguard/tls/tls.crt", "--tls-private-key-file=/etc/shmguard/tls/tls.key"]
