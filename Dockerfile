# recoverd: build on Debian 12 with Debian's packages, run as a non-root user
# on a slim Debian 12 (mount the root file system read-only; the data
# directory is the only place it writes). The default target is the daemon;
# `--target kube` makes the recoverd-kube adapter's image.
FROM debian:12 AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      g++ meson ninja-build pkg-config cmake libcaf-dev libgrpc++-dev \
      protobuf-compiler-grpc libprotobuf-dev protobuf-compiler librocksdb-dev \
      libspdlog-dev doctest-dev libcli11-dev nlohmann-json3-dev libssl-dev \
      libcpp-httplib-dev libjemalloc-dev libtomlplusplus-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN meson setup /build --buildtype=release --prefix=/usr/local \
 && ninja -C /build recoverd recoverctl recoverd-sim tools/kube/recoverd_kube_pb2 \
 && meson install -C /build --no-rebuild --tags runtime --destdir /out

# The adapter: Python with Debian's Kubernetes and gRPC clients.
FROM debian:12-slim AS kube
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      python3 python3-kubernetes python3-grpcio python3-protobuf ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/usr/local/bin/recoverd-kube /usr/local/bin/
COPY --from=build /out/usr/local/share/recoverd/ /usr/local/share/recoverd/
USER 10001:10001
ENTRYPOINT ["/usr/local/bin/recoverd-kube"]

FROM debian:12-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libcaf-core0.17 libgrpc++1.51 libprotobuf32 librocksdb7.8 libspdlog1.10 \
      libcpp-httplib0.11 libjemalloc2 libtomlplusplus3 libssl3 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 recoverd \
 && useradd --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin recoverd \
 && mkdir -p /var/lib/recoverd && chown recoverd:recoverd /var/lib/recoverd
COPY --from=build /out/usr/local/bin/ /usr/local/bin/
USER 10001:10001
VOLUME /var/lib/recoverd
EXPOSE 8899 8898 8900
ENTRYPOINT ["/usr/local/bin/recoverd", "--data-dir", "/var/lib/recoverd"]
CMD ["--listen", "0.0.0.0:8899", "--control-listen", "0.0.0.0:8898", \
     "--http-listen", "0.0.0.0:8900", "--log-format", "json"]
