# bench/common.sh: what the side-by-side benchmark scripts share. It is sourced, never run:
# the binaries' defaults and checks for what a script needs, the working tree's binary rebuilt
# when stale, a scratch directory whose nginx is stopped and
# which is removed on exit, a free loopback port, and the one-worker nginx answering "hello".

# What every script that sources this runs, unless the environment says otherwise (needs ROOT):
# the working tree's proxybench and Debian's nginx.
PB_DEFAULT=$ROOT/target/release/proxybench
PB=${PB:-$PB_DEFAULT}
NGINX=${NGINX:-/usr/sbin/nginx}
# The script's name in its messages.
PB_SCRIPT=$(basename "$0" .sh)

# Exits 2 with "SCRIPT: $2" when command $1 is missing.
pb_need() {
  command -v "$1" >/dev/null || { echo "$PB_SCRIPT: $2" >&2; exit 2; }
}

# Exits 2 when $NGINX is not there.
pb_need_nginx() {
  [ -x "$NGINX" ] || { echo "$PB_SCRIPT: nginx is not installed (apt-get install nginx)" >&2; exit 2; }
}

# Rebuilds $PB (release) when it is missing, or when it is the working tree's binary
# ($PB_DEFAULT) and a source is newer; a PB given by path is used as it is. Needs ROOT.
pb_ensure_built() {
  if [ ! -x "$PB" ] || { [ "$PB" = "${PB_DEFAULT:-}" ] &&
    [ -n "$(find "$ROOT/crates" -newer "$PB" -name '*.rs' -print -quit)" ]; }; then
    echo "building proxybench (release)..." >&2
    (cd "$ROOT" && cargo build --release -q -p proxybench)
  fi
}

# Other processes the script started (backends, agents), stopped on exit: add each with
# PB_PIDS+=("$!").
PB_PIDS=()

# Stops the nginx the script started (NGINX_PID) and every process in PB_PIDS (TERM, then KILL
# what is left a moment later), and removes WORK.
pb_cleanup() {
  if [ -n "${NGINX_PID:-}" ]; then
    kill -TERM "$NGINX_PID" 2>/dev/null || true
    wait "$NGINX_PID" 2>/dev/null || true
  fi
  if [ ${#PB_PIDS[@]} -gt 0 ]; then
    for p in "${PB_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    sleep 0.2
    for p in "${PB_PIDS[@]}"; do
      kill -KILL "$p" 2>/dev/null || true
      wait "$p" 2>/dev/null || true
    done
  fi
  rm -rf "$WORK"
}

# Makes WORK, a scratch directory named after $1, and arms the exit trap: nginx stopped, WORK
# removed, on any exit (Ctrl-C and TERM exit 130).
pb_workdir() {
  WORK=$(mktemp -d "/tmp/pb-$1.XXXXXX")
  NGINX_PID=
  trap pb_cleanup EXIT
  trap 'exit 130' INT TERM
}

# The first loopback port from $1 on that nothing listens on (a connect to it fails).
pb_port_from() {
  local p=$1
  while (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; do p=$((p + 1)); done
  echo "$p"
}

# Waits (at most 5 s) until 127.0.0.1:$1 accepts; exits 1 saying so when it never does.
pb_wait_port() {
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "$PB_SCRIPT: nothing listens on port $1" >&2
  exit 1
}

# User plus system CPU ticks of process $1 so far (/proc/PID/stat; getconf CLK_TCK per second).
pb_cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# A loopback port that was free a moment ago.
pb_free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Writes $WORK/nginx.conf: one worker on 127.0.0.1:$1 answering 200 "hello" to every path,
# keep-alive without a request limit. $2: the events block (default `worker_connections 4096;`),
# $3: more main-context lines, $4: more listen parameters.
pb_hello_nginx_conf() {
  local user=""
  [ "$(id -u)" = 0 ] && user="user root;"
  cat >"$WORK/nginx.conf" <<EOF
$user
worker_processes 1;
${3:-}
pid $WORK/nginx.pid;
error_log $WORK/error.log warn;
events { ${2:-worker_connections 4096;} }
http {
  access_log off;
  keepalive_requests 1000000000;
  keepalive_timeout 300s;
  client_body_temp_path $WORK/body;
  server {
    listen 127.0.0.1:$1${4:+ $4};
    location / { return 200 "hello\n"; }
  }
}
EOF
}

# Starts $NGINX on $WORK/nginx.conf in the foreground of a background job, behind the command
# words given (a pin, a priority; none is fine), as NGINX_PID, and waits (at most 5 s) until
# 127.0.0.1:$PORT accepts.
pb_start_nginx() {
  "$@" "$NGINX" -p "$WORK" -c "$WORK/nginx.conf" -e "$WORK/error.log" -g "daemon off;" &
  NGINX_PID=$!
  for _ in $(seq 100); do
    if (exec 3<>/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null; then break; fi
    sleep 0.05
  done
}

# Sets the array `prio` from PRIO: `auto` (the default) runs the measured processes under
# SCHED_RR 10 when root, so unrelated work on a shared machine does not preempt them; empty runs
# them as they are; anything else is the command words to use.
pb_prio() {
  PRIO=${PRIO-auto}
  if [ "$PRIO" = auto ]; then
    PRIO=""
    [ "$(id -u)" = 0 ] && command -v chrt >/dev/null && PRIO="chrt -r 10"
  fi
  read -r -a prio <<<"$PRIO"
}

# The peer nginx of the client benchmarks (vs-wrk, vs-h2load): one worker pinned to
# $SERVER_CPU answering "hello" on 127.0.0.1:$PORT and, with a throwaway certificate, on
# $TLS_PORT (each listen with the parameters in $1, `http2` or none), `/cipher` logging what
# each client negotiated to $WORK/cipher.log, and stub_status on $STUB_PORT (the server's own
# count of requests). SSL_CIPHERS=... makes nginx choose the cipher (the same for every client)
# instead of following the client's order (nginx's default). Sets PORT, TLS_PORT, STUB_PORT,
# NGINX_PID and WORKER (the worker's pid, whose CPU time the measurements read).
pb_peer_nginx() {
  local params=${1:+ $1} user="" ciphers=""
  PORT=${PORT:-$(pb_free_port)}
  TLS_PORT=${TLS_PORT:-$(pb_free_port)}
  STUB_PORT=${STUB_PORT:-$(pb_free_port)}
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/key.pem" -out "$WORK/cert.pem" -days 2 \
    -subj /CN=127.0.0.1 -addext "subjectAltName=IP:127.0.0.1" 2>/dev/null
  [ "$(id -u)" = 0 ] && user="user root;"
  [ -n "${SSL_CIPHERS:-}" ] && ciphers="ssl_ciphers $SSL_CIPHERS; ssl_prefer_server_ciphers on;"
  cat >"$WORK/nginx.conf" <<CONF
$user
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000000;
  keepalive_timeout 300s;
  log_format cipher '\$ssl_protocol \$ssl_cipher';
  client_body_temp_path $WORK/body;
  server {
    listen 127.0.0.1:$PORT$params;
    listen 127.0.0.1:$TLS_PORT ssl$params;
    ssl_certificate $WORK/cert.pem;
    ssl_certificate_key $WORK/key.pem;
    $ciphers
    location / { return 200 "hello\n"; }
    location = /cipher { access_log $WORK/cipher.log cipher; return 200 "hello\n"; }
  }
  # The server's own count of requests (stub_status), read before and after each run.
  server {
    listen 127.0.0.1:$STUB_PORT;
    location = /stub { stub_status; }
  }
}
CONF
  pb_start_nginx taskset -c "$SERVER_CPU" "${prio[@]}"
  WORKER=$(pgrep -P "$NGINX_PID" | head -1)
}

# Runs one client (the command words given) pinned to $CLIENT_CPU under `prio` against the peer
# nginx, and prints what bench/measure.py measured of it.
pb_measure() {
  python3 "$ROOT/bench/measure.py" "$WORKER" "$STUB_PORT" taskset -c "$CLIENT_CPU" "${prio[@]}" "$@"
}
