#!/usr/bin/env bash
# Generates a CA and a serving certificate for local runs and tests.
# usage: hack/gen-certs.sh OUT_DIR [SERVICE] [NAMESPACE] [DAYS]
# Writes OUT_DIR/{ca.crt,ca.key,tls.crt,tls.key}; the serving certificate's SANs are the
# service's DNS names (<svc>, <svc>.<ns>, <svc>.<ns>.svc, <svc>.<ns>.svc.cluster.local), plus
# EXTRA_SANS (e.g. EXTRA_SANS=IP:127.0.0.1 for a webhook called by URL).
set -euo pipefail
out=${1:?usage: gen-certs.sh OUT_DIR [SERVICE] [NAMESPACE] [DAYS]}
svc=${2:-shmguard}
ns=${3:-shmguard}
days=${4:-365}
mkdir -p "$out"
cd "$out"
if [[ ! -f ca.key ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.crt \
    -days "$days" -subj "/CN=shmguard-local-ca" 2>/dev/null
fi
cat > san.cnf <<CNF
[req]
distinguished_name = dn
[dn]
[ext]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = DNS:${svc},DNS:${svc}.${ns},DNS:${svc}.${ns}.svc,DNS:${svc}.${ns}.svc.cluster.local${EXTRA_SANS:+,$EXTRA_SANS}
CNF
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout tls.key.new -out tls.csr \
  -subj "/CN=${svc}.${ns}.svc" 2>/dev/null
openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out tls.crt.new -days "$days" \
  -extfile san.cnf -extensions ext 2>/dev/null
mv tls.key.new tls.key
mv tls.crt.new tls.crt
rm -f tls.csr san.cnf
echo "wrote $out/{ca.crt,tls.crt,tls.key} for ${svc}.${ns}.svc"
