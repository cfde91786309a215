# shmguard container image.
# Build stage: Debian 12 with the -dev packages; builds and runs the test suite (the image build
# fails when a test fails). Runtime stage: debian-slim with only the shared libraries the binary
# needs (tests/chart/test_image.py checks the list against `ldd`), running as uid 65532.

FROM debian:12 AS build
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update && apt-get install -y --no-install-recommends \
      g++ cmake ninja-build pkg-config libssl-dev nlohmann-json3-dev libyaml-dev libcli11-dev \
      libgtest-dev libgmock-dev libbenchmark-dev libtcmalloc-minimal4 openssl \
      python3 python3-pytest python3-jsonpatch python3-yaml ca-certificates \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSHMGUARD_BUILD_BENCH=OFF \
    && cmake --build /build -j"$(nproc)" \
    && cd /build && ctest --output-on-failure -j"$(nproc)" -E 'e2e.test_pytorch|e2e.test_chart' \
    && strip /build/shmguard

FROM debian:12-slim AS runtime
# runtime-packages: libssl3 libyaml-0-2 libtcmalloc-minimal4 libstdc++6 libgcc-s1 libc6
RUN apt-get update && apt-get install -y --no-install-recommends \
      libssl3 libyaml-0-2 libtcmalloc-minimal4 \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*
COPY --from=build /build/shmguard /usr/local/bin/shmguard
USER 65532:65532
EXPOSE 8443 9090
ENTRYPOINT ["/usr/local/bin/shmguard"]
CMD ["serve", "--tls-cert-file=/etc/shmguard/tls/tls.crt", "--tls-private-key-file=/etc/shmguard/tls/tls.key"]
