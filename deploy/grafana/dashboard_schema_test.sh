#!/usr/bin/env bash
# The dashboard passes @grafana/schema's type check, and the check rejects a broken copy (a
# number where the schema wants a string), so a pass means something.
# Usage: dashboard_schema_test.sh CHECK_SH DASHBOARD_JSON MODULES_DIR
set -euo pipefail
check=$1 dashboard=$2 modules=$3

"$check" "$dashboard" "$modules"

broken="$TEST_TMPDIR/broken.json"
node -e '
  const fs = require("fs");
  const d = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
  d.refresh = 5;
  fs.writeFileSync(process.argv[2], JSON.stringify(d, null, 2));
' "$dashboard" "$broken"
if "$check" "$broken" "$modules" > "$TEST_TMPDIR/broken.out" 2>&1; then
  echo "FAIL: the schema check accepted a dashboard with \"refresh\": 5" >&2
  exit 1
fi
grep -q "TS2322" "$TEST_TMPDIR/broken.out" || { cat "$TEST_TMPDIR/broken.out"; exit 1; }
echo "PASS: the dashboard matches the schema; a broken copy does not"
