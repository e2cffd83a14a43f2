#!/usr/bin/env bash
# The server with real clients (make serve-test; CI step `serve`):
#   tests/server/run.sh [BUILD]      (BUILD holds llminfer and llminfer-serve; default build)
# Starts `llminfer serve` instances on free loopback ports with a small model (SERVE_MODEL, default
# the fixture synth-qwen3-tiny-q4_k_m.gguf, which has a chat template), then checks:
#   curl      health, models, errors in the OpenAI shape (400 malformed JSON / wrong types /
#             unsupported parameters, 401 without or with a wrong key, 404, 413 over --max-body),
#             streaming ends with `data: [DONE]`, 503 when every slot and the queue are full, and
#             a client that disconnects mid-stream frees its slot at once
#   openai    the official npm client (tests/server/openai, pinned by package-lock.json)
#   load      tests/server/load.py: 16 concurrent clients, bounded in count and time, requests/s,
#             p50/p99, zero failed or corrupted responses, every slot free at the end
#   nginx     two instances behind nginx (examples/nginx/nginx.conf with these ports), the load
#             test through it; both instances served requests
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
CLI=$BUILD/llminfer
FIX=${LLMINFER_FIXTURES:-${FIXTURES:-build/fixtures}}
MODEL=${SERVE_MODEL:-$FIX/synth-qwen3-tiny-q4_k_m.gguf}
[ -x "$BUILD/llminfer-serve" ] || { echo "run.sh: $BUILD/llminfer-serve is missing (make serve)"; exit 1; }
[ -f "$MODEL" ] || { echo "run.sh: no model at $MODEL (make fixtures, or SERVE_MODEL=FILE)"; exit 1; }
[ -d tests/server/openai/node_modules/openai ] || (cd tests/server/openai && npm ci --no-audit --no-fund >/dev/null)

TMP=$(mktemp -d /tmp/llminfer-serve-test-XXXXXX)
PIDS=()
NGINX_UP=0
cleanup() {
  local p
  if [ $NGINX_UP = 1 ]; then nginx -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -s stop 2>/dev/null || true; fi
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
fail() { echo "FAIL: $*"; exit 1; }
# wait_health PORT: until /health answers (30 s)
wait_health() {
  local i
  for i in $(seq 300); do
    curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  fail "the server on port $1 did not come up"
}
start() {  # start NAME PORT ARGS...: a server in the background, its log in $TMP/NAME.log
  local name=$1 port=$2
  shift 2
  "$CLI" serve -m "$MODEL" --port "$port" -t 1 -c 512 "$@" >"$TMP/$name.log" 2>&1 &
  PIDS+=($!)
  wait_health "$port"
}
# status METHOD URL [BODY] [curl args]: prints the HTTP status, the body into $TMP/body
status() {
  local m=$1 u=$2 b=${3:-}
  shift 3 || shift $#
  if [ -n "$b" ]; then curl -s -o "$TMP/body" -w '%{http_code}' -X "$m" "$u" -H 'Content-Type: application/json' --data-binary "$b" "$@"
  else curl -s -o "$TMP/body" -w '%{http_code}' -X "$m" "$u" "$@"; fi
}
json() { python3 -c "import json,sys; d=json.load(open('$TMP/body')); print($1)"; }
expect() {  # expect CODE WHAT METHOD URL [BODY] [curl args]: the status and an OpenAI-shaped error
  local code=$1 what=$2
  shift 2
  local got
  got=$(status "$@")
  [ "$got" = "$code" ] || fail "$what: HTTP $got, expected $code: $(head -c 300 "$TMP/body")"
  if [ "$code" -ge 400 ]; then
    json 'd["error"]["message"]' >/dev/null 2>&1 || fail "$what: not an OpenAI error body: $(head -c 300 "$TMP/body")"
    echo "  $code $what: $(json 'd["error"]["message"]')"
  fi
}

T0=$SECONDS
PA=$(free_port); PB=$(free_port); PC=$(free_port)
KEY=test-key-$RANDOM$RANDOM
start a "$PA" --parallel 4 --queue 16 --max-body 65536
start b "$PB" --parallel 2 --api-key "$KEY"
start c "$PC" --parallel 1 --queue 0
A=http://127.0.0.1:$PA
echo "== curl ($MODEL; servers on $PA, $PB (with an API key), $PC (1 slot, no queue))"
expect 200 "health" GET "$A/health"
[ "$(json 'd["slots_idle"]')" = 4 ] || fail "4 idle slots expected"
expect 200 "models" GET "$A/v1/models"
[ "$(json 'd["object"]')" = list ] || fail "models: object list"
CHAT='{"messages":[{"role":"user","content":"Hello there"}],"max_tokens":6,"seed":3}'
expect 200 "chat" POST "$A/v1/chat/completions" "$CHAT"
[ "$(json 'd["usage"]["completion_tokens"]')" = 6 ] || fail "chat: 6 completion tokens"
[ "$(json 'd["choices"][0]["finish_reason"]')" = length ] || fail "chat: finish_reason length"
expect 200 "completions" POST "$A/v1/completions" '{"prompt":"Once upon a time","max_tokens":4}'
expect 400 "malformed JSON" POST "$A/v1/chat/completions" '{"messages": [}'
expect 400 "wrong type" POST "$A/v1/chat/completions" '{"messages":[{"role":"user","content":"x"}],"max_tokens":"many"}'
expect 400 "messages missing" POST "$A/v1/chat/completions" '{"max_tokens":3}'
expect 400 "not an object" POST "$A/v1/chat/completions" '[1,2,3]'
expect 400 "unsupported parameter" POST "$A/v1/chat/completions" '{"messages":[{"role":"user","content":"x"}],"frequency_penalty":1}'
expect 400 "seed of the wrong type" POST "$A/v1/completions" '{"prompt":"x","seed":"abc"}'
expect 404 "unknown path" GET "$A/v1/nothing"
python3 -c 'import json; print(json.dumps({"prompt": "x" * 100000}))' > "$TMP/big.json"
expect 413 "body over --max-body" POST "$A/v1/completions" "@$TMP/big.json"
B=http://127.0.0.1:$PB
expect 401 "no API key" GET "$B/v1/models"
expect 401 "wrong API key" POST "$B/v1/chat/completions" "$CHAT" -H "Authorization: Bearer nope"
expect 200 "right API key" POST "$B/v1/chat/completions" "$CHAT" -H "Authorization: Bearer $KEY"
expect 200 "health needs no key" GET "$B/health"
curl -sN "$A/v1/chat/completions" -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":5,"stream":true}' >"$TMP/sse"
[ "$(grep -c '^data: ' "$TMP/sse")" -ge 6 ] || fail "stream: too few events: $(cat "$TMP/sse")"
[ "$(grep '^data: ' "$TMP/sse" | tail -1)" = "data: [DONE]" ] || fail "stream: the last event is not [DONE]"
echo "  200 stream: $(grep -c '^data: ' "$TMP/sse") events, the last one data: [DONE]"
# 503: the one slot streams a long generation and there is no queue; the client then disconnects
# mid-stream, which must free the slot at once
C=http://127.0.0.1:$PC
curl -sN "$C/v1/chat/completions" -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":100000,"stream":true}' \
  >"$TMP/long" &
LONG=$!
for i in $(seq 100); do [ -s "$TMP/long" ] && break; sleep 0.1; done
expect 503 "every slot busy, no queue" POST "$C/v1/chat/completions" "$CHAT"
kill $LONG; wait $LONG 2>/dev/null || true
freed=0
for i in $(seq 30); do
  status GET "$C/health" >/dev/null
  if [ "$(json 'd["slots_processing"]')" = 0 ]; then freed=1; break; fi
  sleep 0.1
done
[ $freed = 1 ] || fail "a client that disconnected mid-stream still holds its slot after 3 s"
echo "  a client disconnecting mid-stream freed its slot within $((i * 100)) ms"
expect 200 "the freed slot serves again" POST "$C/v1/chat/completions" "$CHAT"
echo "curl: $((SECONDS - T0)) s"

T1=$SECONDS
echo "== openai npm client ($(node -p 'require("./tests/server/openai/node_modules/openai/package.json").version'))"
node tests/server/openai/test.mjs "$A/v1" "$B/v1" "$KEY"
echo "openai: $((SECONDS - T1)) s"

T1=$SECONDS
echo "== load test (16 clients, at most 160 requests and 60 s) on one server"
python3 tests/server/load.py "$A" --clients 16 --requests 160 --max-seconds 60
echo "load: $((SECONDS - T1)) s"

T1=$SECONDS
PN=$(free_port)
echo "== nginx ($(nginx -v 2>&1 | sed 's/.*: //')) on $PN in front of the servers on $PA and $PB"
mkdir -p "$TMP/nginx"
sed -e "s/127.0.0.1:8080/127.0.0.1:$PN/; s/127.0.0.1:8081/127.0.0.1:$PA/; s/127.0.0.1:8082/127.0.0.1:$PB/" \
  examples/nginx/nginx.conf >"$TMP/nginx/nginx.conf"
grep -q "127.0.0.1:$PB" "$TMP/nginx/nginx.conf" || fail "the nginx config did not take the ports"
before_a=$(curl -s "$A/health" | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests_served"])')
before_b=$(curl -s "$B/health" | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests_served"])')
nginx -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf"
NGINX_UP=1
wait_health "$PN"
python3 tests/server/load.py "http://127.0.0.1:$PN" --clients 16 --requests 160 --max-seconds 60 --api-key "$KEY" \
  --health "$A" --health "$B"
after_a=$(curl -s "$A/health" | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests_served"])')
after_b=$(curl -s "$B/health" | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests_served"])')
echo "  through nginx: $((after_a - before_a)) requests on $PA, $((after_b - before_b)) on $PB"
[ $((after_a - before_a)) -gt 0 ] && [ $((after_b - before_b)) -gt 0 ] || fail "nginx did not use both instances"
echo "nginx: $((SECONDS - T1)) s"
echo "server tests passed in $((SECONDS - T0)) s"
