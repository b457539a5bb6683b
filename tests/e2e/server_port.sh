# Sourced by the server's shell tests. listened_port LOG: waits up to 10 s
# for a topk-server started with --listen=127.0.0.1:0 to log its port, and
# prints it; on failure prints the log to stderr and returns 1.
listened_port() {
  local log=$1 port=""
  for _ in $(seq 100); do
    port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$log" | cut -d: -f2 || true)
    [ -n "$port" ] && { echo "$port"; return 0; }
    sleep 0.1
  done
  cat "$log" >&2
  return 1
}
