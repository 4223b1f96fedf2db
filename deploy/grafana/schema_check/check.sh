#!/usr/bin/env bash
# Typechecks a Grafana dashboard JSON against @grafana/schema's Dashboard type.
# Usage: deploy/grafana/schema_check/check.sh [DASHBOARD.json [MODULES_DIR]]
#   DASHBOARD.json: default deploy/grafana/dashboards/cohort.json.
#   MODULES_DIR: a folder holding this folder's package.json, package-lock.json and their
#   node_modules (tools/install_deps.sh prepares /var/cache/cohort/grafana-schema-check for the
#   tests); default: this folder, where `npm ci` runs first if node_modules is missing.
# Exits non-zero if the file is not JSON or tsc reports an error (the status is then tsc's).
# The JSON is inlined as an object literal with `satisfies`, which keeps literal types and
# rejects unknown properties, so wrong types, bad enum values and misspelled keys all fail.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dashboard="$(realpath "${1:-$here/../dashboards/cohort.json}")"
modules="${2:-$here}"

if [[ ! -d "$modules/node_modules" ]]; then
  if [[ -n "${2:-}" ]]; then
    echo "no node_modules in $modules: run tools/install_deps.sh" >&2
    exit 1
  fi
  (cd "$modules" && npm ci --no-audit --no-fund --silent)
fi

# TypeScript would also accept what JSON does not (comments, trailing commas).
node -e 'JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))' "$dashboard"

# '@grafana/schema' resolves from the node_modules/ beside the generated file.
tmp="$(mktemp -d "${TEST_TMPDIR:-$modules}/.tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
ln -s "$(realpath "$modules/node_modules")" "$tmp/node_modules"
# The schema declares some fields as TypeScript string enums (color mode, thresholds mode, value
# mappings), which no literal satisfies; in JSON they hold the enum's value, so Json<> maps each
# string enum to the union of its values and leaves everything else as it is.
{
  cat <<'TS'
import type { Dashboard } from '@grafana/schema';
type Json<T> = T extends string ? `${T}`
  : T extends readonly (infer U)[] ? Json<U>[]
  : T extends object ? { [K in keyof T]: Json<T[K]> }
  : T;
TS
} > "$tmp/dashboard.ts"
header_lines="$(wc -l < "$tmp/dashboard.ts")"
{
  printf 'export const d = ('
  cat "$dashboard"
  printf ') satisfies Json<Dashboard>;\n'
} >> "$tmp/dashboard.ts"

version="$(node -p 'require(process.argv[1]).version' "$tmp/node_modules/@grafana/schema/package.json")"
echo "== tsc: $dashboard satisfies Dashboard (@grafana/schema $version)"
# Errors are reported against the dashboard file's own lines (pipefail keeps tsc's status).
"$tmp/node_modules/.bin/tsc" --noEmit --strict --skipLibCheck --module esnext --moduleResolution bundler \
    "$tmp/dashboard.ts" |
  DASHBOARD="$dashboard" OFFSET="$header_lines" \
    perl -pe 's{^\S*dashboard\.ts\((\d+),(\d+)\)}{"$ENV{DASHBOARD}(" . ($1 - $ENV{OFFSET}) . ",$2)"}e'
echo "== dashboard matches the schema"
