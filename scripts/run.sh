#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs recoverd with its
# embedded defaults (127.0.0.1:8899, ./recoverd-data) until Ctrl-C. Extra
# arguments go to recoverd (see ./build/recoverd --help).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec ./build/recoverd "$@"
