# Helpers the cluster scripts share (sourced by hack/cluster.sh and hack/node/lib.sh).
# Each script defines log() before sourcing this.

# A free TCP port on 127.0.0.1.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_until SECONDS WHAT LOGDIR COMMAND...: runs COMMAND every 0.2 s until it succeeds; after
# SECONDS, says what it waited for, shows the tail of LOGDIR's logs and fails.
wait_until() {
  local deadline=$(($(date +%s) + $1)) what=$2 logs=$3
  shift 3
  until "$@" >/dev/null 2>&1; do
    if (($(date +%s) > deadline)); then
      log "timed out waiting for $what"
      tail -n 20 "$logs"/*.log >&2 || true
      return 1
    fi
    sleep 0.2
  done
}
