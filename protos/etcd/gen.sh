#!/usr/bin/env bash
# Compiles the etcd v3 API protos that Debian ships (golang-etcd-server-dev,
# with imports from golang-github-gogo-protobuf-dev and
# golang-github-gogo-googleapis-dev) into C++, unmodified.
#
# protoc names its outputs after the import paths ("etcd/mvcc/mvccpb/kv.pb.h"),
# and the generated files include each other by those paths, so the tree is
# kept as protoc writes it under OUTDIR. Meson wants flat outputs: each
# generated .cc is also reached through a flat one-line wrapper, and the
# header the client uses through a flat forwarding header.
#
# usage: gen.sh PROTOC GRPC_PLUGIN GOCODE_SRC OUTDIR
set -euo pipefail
protoc=$1
plugin=$2
src=$3
out=$4

protos=(
  etcd/etcdserver/etcdserverpb/rpc.proto
  etcd/mvcc/mvccpb/kv.proto
  etcd/auth/authpb/auth.proto
  gogoproto/gogo.proto
  google/api/annotations.proto
  google/api/http.proto
)
for p in "${protos[@]}"; do
  dir=$src/go.etcd.io
  case $p in
    gogoproto/*) dir=$src/github.com/gogo/protobuf ;;
    google/*) dir=$src/github.com/gogo/googleapis ;;
  esac
  if [[ ! -f $dir/$p ]]; then
    echo "gen.sh: $dir/$p is missing: install golang-etcd-server-dev," \
         "golang-github-gogo-protobuf-dev and golang-github-gogo-googleapis-dev" \
         "(scripts/setup.sh does)" >&2
    exit 1
  fi
done

"$protoc" -I"$src/go.etcd.io" -I"$src/github.com/gogo/protobuf" \
  -I"$src/github.com/gogo/googleapis" \
  --cpp_out="$out" --grpc_out="$out" --plugin=protoc-gen-grpc="$plugin" \
  "${protos[@]}"

write() {
  printf '%s\n' "$2" > "$1"
}
for p in "${protos[@]}"; do
  base=${p%.proto}
  flat=etcd_$(basename "$base")
  write "$out/$flat.pb.cc" "#include \"$base.pb.cc\""
done
write "$out/etcd_rpc.grpc.pb.cc" \
  "#include \"etcd/etcdserver/etcdserverpb/rpc.grpc.pb.cc\""
write "$out/etcd_rpc.grpc.pb.h" \
  "#pragma once
#include \"etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h\""
