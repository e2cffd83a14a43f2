#!/usr/bin/env python3
"""Load test of an OpenAI-compatible server (llminfer serve), from a second process on loopback.

    python3 tests/server/load.py URL [--clients 16] [--requests 160] [--max-seconds 60] [--health URL ...]

CLIENTS threads send REQUESTS chat completions in all (a mix of plain and streaming, bounded in
count and in time). Each request is one of a few (prompt, seed) variants whose answer was fetched
once before the load, one at a time: under load every answer must be exactly that text (sampling
with a seed is deterministic, and batched decoding gives each sequence the tokens it gets alone),
so a response mixed up with another request's, cut short or malformed counts as corrupted.
Reports requests/s, p50/p99 latency, failures; exits 1 on any failed or corrupted response, or when
a /health (of URL, or each --health URL: the servers behind a load balancer) does not show every
slot free at the end. Standard library only.
"""
import argparse
import http.client
import json
import sys
import threading
import time
import urllib.parse

ap = argparse.ArgumentParser()
ap.add_argument("url")
ap.add_argument("--clients", type=int, default=16)
ap.add_argument("--requests", type=int, default=160)
ap.add_argument("--max-seconds", type=float, default=60)
ap.add_argument("--max-tokens", type=int, default=12)
ap.add_argument("--health", action="append", default=[])
ap.add_argument("--api-key", default="")
args = ap.parse_args()

base = urllib.parse.urlparse(args.url)
PROMPTS = ["Tell me a story.", "What is the capital of France?", "Write a haiku about rain.", "Count to five.",
           "Describe a cat.", "Why is the sky blue?"]
VARIANTS = [(p, seed) for p in PROMPTS for seed in (1, 2)]


def conn_for(url):
    u = urllib.parse.urlparse(url)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=120)


def post(conn, body, stream):
    headers = {"Content-Type": "application/json"}
    if args.api_key:
        headers["Authorization"] = "Bearer " + args.api_key
    conn.request("POST", "/v1/chat/completions", json.dumps(body), headers)
    r = conn.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {data[:200]!r}")
    if not stream:
        j = json.loads(data)
        return j["choices"][0]["message"]["content"], j["choices"][0]["finish_reason"], j["usage"]["completion_tokens"]
    # server-sent events: deltas, a finish_reason, then [DONE] last
    text, finish, done = "", None, False
    for block in data.decode().split("\n\n"):
        if not block.strip():
            continue
        if not block.startswith("data: "):
            raise RuntimeError(f"not an SSE data line: {block[:80]!r}")
        payload = block[6:]
        if done:
            raise RuntimeError("data after [DONE]")
        if payload == "[DONE]":
            done = True
            continue
        j = json.loads(payload)
        if "error" in j:
            raise RuntimeError(f"error event: {j['error']}")
        for c in j["choices"]:
            text += c["delta"].get("content", "")
            if c["finish_reason"]:
                finish = c["finish_reason"]
    if not done:
        raise RuntimeError("the stream did not end with [DONE]")
    return text, finish, None


def request_body(variant, stream):
    prompt, seed = variant
    return {"model": "x", "messages": [{"role": "user", "content": prompt}], "max_tokens": args.max_tokens,
            "temperature": 0.8, "top_p": 0.95, "seed": seed, "stream": stream}


# the expected answers, one request at a time
expected = {}
c = conn_for(args.url)
for v in VARIANTS:
    expected[v] = post(c, request_body(v, False), False)[0]
c.close()
if len(set(expected.values())) < 2:
    print("load: the variants' answers are all the same text: the corruption check would be blind")
    sys.exit(1)

latencies, failures, corrupted = [], [], []
lock = threading.Lock()
next_req = [0]
deadline = time.monotonic() + args.max_seconds


def client(k):
    conn = conn_for(args.url)
    while True:
        with lock:
            i = next_req[0]
            if i >= args.requests or time.monotonic() > deadline:
                break
            next_req[0] += 1
        v = VARIANTS[(i * 7 + k) % len(VARIANTS)]
        stream = i % 3 == 0
        t0 = time.monotonic()
        try:
            text, finish, n = post(conn, request_body(v, stream), stream)
            dt = time.monotonic() - t0
            with lock:
                latencies.append(dt)
                if text != expected[v] or finish not in ("stop", "length") or (n is not None and n > args.max_tokens):
                    corrupted.append((i, v, text, expected[v]))
        except Exception as e:  # noqa: BLE001 (any failure counts)
            with lock:
                failures.append((i, repr(e)))
            conn.close()
            conn = conn_for(args.url)
    conn.close()


t0 = time.monotonic()
threads = [threading.Thread(target=client, args=(k,)) for k in range(args.clients)]
for t in threads:
    t.start()
for t in threads:
    t.join()
wall = time.monotonic() - t0

lat = sorted(latencies)


def pct(p):
    return lat[min(len(lat) - 1, int(p / 100.0 * len(lat)))] * 1000 if lat else 0


done = len(latencies) + len(failures)
print(f"load: {args.clients} clients, {done} requests in {wall:.1f} s: {len(latencies) / wall:.1f} requests/s, "
      f"p50 {pct(50):.0f} ms, p99 {pct(99):.0f} ms, {len(failures)} failed, {len(corrupted)} corrupted")
for f in failures[:5]:
    print("  failed:", f)
for c in corrupted[:5]:
    print("  corrupted:", c)
ok = not failures and not corrupted and done >= min(args.requests, 1)
# every slot free at the end (a request that finished frees its slot before its last bytes go out:
# poll briefly)
for h in (args.health or [args.url]):
    free = False
    for _ in range(50):
        cc = conn_for(h)
        cc.request("GET", "/health")
        j = json.loads(cc.getresponse().read())
        cc.close()
        if j.get("slots_processing") == 0 and j.get("queue") == 0:
            free = True
            break
        time.sleep(0.1)
    print(f"load: {h}/health at the end: {json.dumps(j)}")
    ok = ok and free
sys.exit(0 if ok else 1)
