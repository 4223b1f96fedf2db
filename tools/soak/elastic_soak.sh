#!/bin/bash
# Builds the launcher and the counting worker, then runs the elastic soak (about 12 minutes):
#   tools/soak/elastic_soak.sh [--minutes 10]
set -euo pipefail
cd "$(dirname "$0")/../.."
bazel build //tools:launch //tools/soak:counting_worker
exec python3 tools/soak/elastic_soak.py --launch "$PWD/bazel-bin/tools/launch/launch" \
  --worker "$PWD/bazel-bin/tools/soak/counting_worker" "$@"
