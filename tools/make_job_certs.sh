#!/usr/bin/env bash
# Makes a job's TLS files: a CA of its own and a certificate per name, signed by it, as --tls_dir
# reads them (ca.pem, <name>.pem, <name>.key). Every certificate is valid for the job-wide name
# "cohort" (what the services check, whatever address a peer is reached at) and for its own name.
#   tools/make_job_certs.sh DIR NAME...        e.g. DIR scheduler shard worker
# Environment: COHORT_CERT_DAYS (default 30); COHORT_CERT_DATES="START END" (openssl ca dates,
# YYYYMMDDHHMMSSZ) to make certificates valid only then (tests make expired ones);
# COHORT_CERT_USAGE (default serverAuth,clientAuth), the extendedKeyUsage (tests make others).
# The CA's key stays in DIR/ca.key: keep it, or delete it once the certificates are made.
set -euo pipefail
dir=$1
shift
(($# > 0)) || { echo "usage: $0 DIR NAME..." >&2; exit 2; }
mkdir -p "$dir"
umask 077
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [[ ! -f $dir/ca.pem ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
    -subj "/CN=cohort job CA" -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
fi
touch "$work/index.txt"
echo 01 >"$work/serial"
cat >"$work/ca.cnf" <<CNF
[ca]
default_ca = job
[job]
database = $work/index.txt
serial = $work/serial
new_certs_dir = $work
certificate = $dir/ca.pem
private_key = $dir/ca.key
default_md = sha256
policy = any
unique_subject = no
copy_extensions = copy
[any]
commonName = supplied
CNF
for name in "$@"; do
  [[ $name =~ ^[A-Za-z0-9._-]+$ ]] || { echo "$0: name '$name': letters, digits, . _ - only" >&2; exit 2; }
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$name" \
    -addext "subjectAltName=DNS:cohort,DNS:$name" -addext "extendedKeyUsage=${COHORT_CERT_USAGE:-serverAuth,clientAuth}" \
    -keyout "$dir/$name.key" -out "$work/$name.csr" 2>/dev/null
  if [[ -n ${COHORT_CERT_DATES:-} ]]; then
    read -r start end <<<"$COHORT_CERT_DATES"
    dates=(-startdate "$start" -enddate "$end")
  else
    dates=(-days "${COHORT_CERT_DAYS:-30}")
  fi
  openssl ca -batch -config "$work/ca.cnf" "${dates[@]}" -notext -in "$work/$name.csr" \
    -out "$dir/$name.pem" 2>/dev/null
done
echo "make_job_certs: $dir: ca.pem and ${*/%/.pem}"
