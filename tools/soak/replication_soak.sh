#!/bin/bash
# Builds the launcher and the counting worker, then runs the replication soak (about 11 minutes):
#   tools/soak/replication_soak.sh [--minutes 10] [--kill_every 30] [--seed N]
set -euo pipefail
cd "$(dirname "$0")/../.."
bazel build //tools:launch //tools/soak:counting_worker
exec python3 tools/soak/replication_soak.py --launch "$PWD/bazel-bin/tools/launch/launch" \
  --worker "$PWD/bazel-bin/tools/soak/counting_worker" "$@"
