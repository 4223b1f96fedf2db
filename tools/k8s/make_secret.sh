#!/usr/bin/env bash
# Prints the Secret cohort-tls a Kubernetes job reads (deploy/k8s): a CA of the job's own, a
# certificate per role (tools/make_job_certs.sh) and a job token. Keep it out of version control:
#   tools/k8s/make_secret.sh | kubectl apply -f -
#   tools/k8s/make_secret.sh --dir DIR      also keep the files in DIR (the CA's key among them)
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=""
while (($#)); do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    *) echo "usage: $0 [--dir DIR]" >&2; exit 2 ;;
  esac
done
if [[ -z $dir ]]; then
  dir="$(mktemp -d)"
  trap 'rm -rf "$dir"' EXIT
  # The files go with this script: say what is made, not where.
  tools/make_job_certs.sh "$dir" scheduler shard worker >/dev/null
  echo "make_secret: the Secret cohort-tls: the job's CA, a certificate per role and a token" \
    "(the CA's key is not kept; --dir DIR keeps the files)" >&2
else
  tools/make_job_certs.sh "$dir" scheduler shard worker >&2
fi
(umask 077 && openssl rand -hex 32 > "$dir/token")
# The Secret holds what the roles read, never the CA's key.
files=(ca.pem scheduler.pem scheduler.key shard.pem shard.key worker.pem worker.key token)
cat <<EOF
apiVersion: v1
kind: Secret
metadata:
  name: cohort-tls
  labels:
    app.kubernetes.io/part-of: cohort
type: Opaque
data:
EOF
for f in "${files[@]}"; do
  printf '  %s: %s\n' "$f" "$(base64 -w0 < "$dir/$f")"
done
