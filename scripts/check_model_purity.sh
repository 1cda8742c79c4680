#!/usr/bin/env bash
# Fails when a file of the pure model (actors/model/) includes a header of
# the actor framework, the storage engine or gRPC (design §1: the layers are
# services -> actors -> storage -> actors/model). Writes a stamp on success.
set -euo pipefail
dir="$1"
stamp="$2"
if hits=$(grep -rnE '#[[:space:]]*include[[:space:]]*[<"](caf/|rocksdb/|grpc|grpcpp/|google/protobuf/|spdlog/|actors/[a-z_]+\.hpp|storage/|services/)' \
            --include='*.hpp' --include='*.cpp' "$dir"); then
  echo "actors/model must stay pure; these includes break the layering:" >&2
  echo "$hits" >&2
  exit 1
fi
touch "$stamp"
