#!/usr/bin/env bash
# Installs the Debian 12 packages recoverd needs, only when some are missing.
# Safe to run repeatedly: with everything present it costs one dpkg query.
set -euo pipefail

packages=(
  g++ meson ninja-build pkg-config cmake
  libcaf-dev libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  librocksdb-dev libspdlog-dev doctest-dev libcli11-dev nlohmann-json3-dev
  libssl-dev libcpp-httplib-dev libjemalloc-dev libtomlplusplus-dev openssl
  python3 python3-yaml python3-kubernetes python3-grpcio python3-protobuf
  prometheus
  chromium python3-websocket
  # The etcd store (issue #14): etcd's v3 protos and their imports, compiled
  # into C++ stubs at build time; etcd itself for its tests and benchmark.
  golang-etcd-server-dev golang-github-gogo-protobuf-dev
  golang-github-gogo-googleapis-dev etcd-server etcd-client
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
