#!/usr/bin/env bash
# Checks the Prometheus config, the rule files and the rules' unit tests with promtool.
# Usage: deploy/prometheus/check.sh (from any directory).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

echo "== promtool check config prometheus.yml"
# Syntax only: tls/ca.pem and tls/token are the operator's, absent until a TLS job is scraped.
promtool check config --syntax-only prometheus.yml
echo "== promtool check rules cohort_rules.yml cohort_alerts.yml"
promtool check rules cohort_rules.yml cohort_alerts.yml
echo "== promtool test rules tests/*.yml"
promtool test rules tests/*.yml
echo "== all Prometheus checks passed"
