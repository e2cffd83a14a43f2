#!/usr/bin/env python3
"""llminfer vs llama.cpp, side by side on the same files and thread count.

Runs `build/llminfer bench` and the llama.cpp oracle's `bench` (llama-bench method) on each model,
interleaved (the order alternates every round), several rounds, and prints a markdown table of
the medians over rounds with the ratio llminfer / llama.cpp, the spread between rounds (how
noisy the shared machine was) and the CPU other processes used during the runs.

    bench/compare.py [-t 2] [-r 3] [--rounds 3] [-p 128,512] [-n 64] [--roofline] [--contend] MODEL.gguf...

--roofline builds ../shared/tools/machine-limits (gcc; on a CPU without AVX-512, where that does not
build, bench/read-bw.c) and measures the memory-read bandwidth with the same thread count before and
after the rounds (the best of both); the table then gives the decode
roofline (bandwidth / bytes of weights read per token: every tensor but a token embedding that is
not also the output matrix) and each engine's decode as a fraction of it.
--contend adds a decode run of each engine per round with a busy loop pinned to the last CPU (the
host application's thread on a shared machine): the table gives those tokens/s and each engine's
slowdown against its idle decode.

Needs ../shared/tools/llamacpp-oracle (node) beside the repository and `make` done.
Python 3 standard library only.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORACLE = os.path.join(os.path.dirname(ROOT), "shared", "tools", "llamacpp-oracle")
LIMITS = os.path.join(os.path.dirname(ROOT), "shared", "tools", "machine-limits")


def cpu_stat():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v), idle


def run_measured(cmd, cwd=None):
    """Runs cmd, returns (stdout, other_pct): CPU used by other processes meanwhile, in % of the machine."""
    t0, i0 = cpu_stat()
    r0 = os.times()
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    r1 = os.times()
    t1, i1 = cpu_stat()
    if p.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(cmd), p.stderr.strip()[-500:]))
    hz = os.sysconf("SC_CLK_TCK")
    total = (t1 - t0) / hz
    busy = ((t1 - i1) - (t0 - i0)) / hz
    mine = (r1.children_user - r0.children_user) + (r1.children_system - r0.children_system)
    other = 100.0 * max(0.0, busy - mine) / total if total > 0 else 0.0
    return p.stdout, other


def ours(model, a, prompts=None):
    cmd = [a.llminfer, "bench", "-m", model, "-t", str(a.threads), "-p", prompts or a.prompts,
           "-n", str(a.gen), "-r", str(a.reps), "--json"]
    out, other = run_measured(cmd)
    j = json.loads(out)
    res = {"load_ms": j["load_ms"], "rss_mb": j["peak_rss_mb"], "file_mb": j["file_mb"], "kv_mb": j["kv_mb"], "other": other}
    for t in j["tests"]:
        res[t["name"]] = t["median_tps"]
    return res


def llama(model, a, prompts=None, wait_idle=None):
    res = {"other": 0.0}
    others = []
    for i, p in enumerate(int(x) for x in (prompts or a.prompts).split(",")):
        gen = a.gen if i == 0 else 0
        cmd = ["node", "oracle.mjs", "bench", model, "--threads", str(a.threads), "--prompt-tokens", str(p),
               "--gen-tokens", str(gen), "--reps", str(a.reps),
               "--wait-idle", str(a.wait_idle if wait_idle is None else wait_idle)]
        out, other = run_measured(cmd, cwd=ORACLE)
        j = json.loads(out)
        others.append(j.get("cpu_other_processes_pct", other))
        res["pp%d" % p] = j["prefill"]["median_tps"]
        if gen:
            res["tg%d" % gen] = j["decode"]["median_tps"]
            res["load_ms"] = j["load_ms"]
            res["rss_mb"] = j["peak_rss_kib"] / 1024.0
    res["other"] = max(others)
    return res


def busy(fn):
    """fn() with a busy loop pinned to the last CPU meanwhile."""
    cpu = max(os.sched_getaffinity(0))
    loop = subprocess.Popen([sys.executable, "-c", "import os\nos.sched_setaffinity(0, {%d})\nwhile True: pass" % cpu])
    try:
        time.sleep(0.2)
        return fn()
    finally:
        loop.kill()
        loop.wait()


PROBE = ["machine-limits probe"]  # which probe measured the bandwidth


def read_bandwidth(threads):
    """Best memory-read GB/s of machine-limits' probe (huge pages, `threads` pinned threads)."""
    exe = os.path.join(ROOT, "build", "peak")
    if not os.path.exists(exe) and os.path.exists(os.path.join(ROOT, "build", "read-bw")):
        exe = os.path.join(ROOT, "build", "read-bw")  # (machine-limits' did not build here before)
        PROBE[0] = "bench/read-bw.c"
    elif not os.path.exists(exe):
        try:
            subprocess.run(["gcc", "-O2", "-march=native", "-mno-avx512f", "-mavxvnni", "-c",
                            os.path.join(LIMITS, "peak_avx2.c"), "-o", exe + "_avx2.o"], check=True,
                           stderr=subprocess.DEVNULL)
            subprocess.run(["gcc", "-O2", "-march=native", "-pthread", os.path.join(LIMITS, "peak.c"),
                            exe + "_avx2.o", "-o", exe, "-lm"], check=True, stderr=subprocess.DEVNULL)
        except subprocess.CalledProcessError:
            # machine-limits' probe is AVX-512 code: without it, ours (bench/read-bw.c), the same
            # measurement and output line
            exe = os.path.join(ROOT, "build", "read-bw")
            subprocess.run(["gcc", "-O2", "-march=native", "-pthread", os.path.join(ROOT, "bench", "read-bw.c"),
                            "-o", exe], check=True)
            PROBE[0] = "bench/read-bw.c"
    out = subprocess.run([exe, str(threads), "3"], env=dict(os.environ, PEAK_PROBE="1"), stdout=subprocess.PIPE,
                         text=True, check=True).stdout
    best = [float(l.split()[6]) for l in out.splitlines()
            if l.startswith("probe mem_read") and l.split()[3] == "%dT" % threads]
    return max(best) if best else None


def weight_bytes_per_token(model, a):
    """Bytes of weights a decode step reads: every tensor but a token embedding that has its own
    output matrix (then only one row of it is read)."""
    out = subprocess.run([a.llminfer, "info", model, "--json", "--all"], stdout=subprocess.PIPE, text=True, check=True)
    t = json.loads(out.stdout)["tensors"]
    names = {x["name"] for x in t}
    return sum(x["bytes"] for x in t if not (x["name"] == "token_embd.weight" and "output.weight" in names))


def fmt(v, digits=1):
    return "-" if v is None else ("%.*f" % (digits, v))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-r", "--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-p", "--prompts", default="128,512")
    ap.add_argument("-n", "--gen", type=int, default=64)
    ap.add_argument("--wait-idle", type=int, default=30, help="seconds the oracle waits for an idle machine")
    ap.add_argument("--json", help="also write every raw result here")
    ap.add_argument("--llminfer", default=os.path.join(ROOT, "build", "llminfer"), help="the llminfer binary")
    ap.add_argument("--roofline", action="store_true", help="measure the memory-read bandwidth: decode roofline")
    ap.add_argument("--contend", action="store_true", help="also decode with a busy loop pinned to the last CPU")
    a = ap.parse_args()
    tests = ["pp%s" % p for p in a.prompts.split(",")] + ["tg%d" % a.gen]
    tg = "tg%d" % a.gen
    raw = {m: {"ours": [], "llama": [], "ours_busy": [], "llama_busy": []} for m in a.models}
    bw = [read_bandwidth(a.threads)] if a.roofline else []
    for r in range(a.rounds):
        for m in a.models:
            runs = [("ours", lambda: ours(m, a)), ("llama", lambda: llama(m, a))]
            if a.contend:  # decode only (the shortest prompt), no waiting for an idle machine
                runs += [("ours_busy", lambda: busy(lambda: ours(m, a, "1"))),
                         ("llama_busy", lambda: busy(lambda: llama(m, a, "1", 0)))]
            for name, fn in (runs if r % 2 == 0 else runs[::-1]):
                t = time.time()
                res = fn()
                raw[m][name].append(res)
                print("round %d %-50s %-10s %s (%.0f s)" % (r + 1, os.path.basename(m), name,
                      " ".join("%s=%.1f" % (k, res.get(k, 0)) for k in tests + ["other"] if k in res), time.time() - t),
                      file=sys.stderr, flush=True)
    if a.roofline:
        bw.append(read_bandwidth(a.threads))
        print("memory read, %d threads: %s GB/s (before, after the rounds)" % (a.threads, bw), file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(raw, bandwidth_gbs=bw), f, indent=1)

    def med(m, who, key):
        v = [x[key] for x in raw[m][who] if x.get(key) is not None]
        return statistics.median(v) if v else None

    def spread(m, who, key):
        v = [x[key] for x in raw[m][who] if x.get(key)]
        return 100.0 * (max(v) - min(v)) / statistics.median(v) if len(v) > 1 else 0.0

    head = "| model | file MiB |"
    sep = "| --- | ---: |"
    for t in tests:
        head += " %s llminfer | %s llama.cpp | ratio |" % (t, t)
        sep += " ---: | ---: | ---: |"
    if a.contend:
        head += " %s busy llminfer | %s busy llama.cpp | slowdown llminfer | slowdown llama.cpp |" % (tg, tg)
        sep += " ---: | ---: | ---: | ---: |"
    if a.roofline:
        head += " weights MB / token | %s roofline | llminfer / roofline | llama.cpp / roofline |" % tg
        sep += " ---: | ---: | ---: | ---: |"
    head += " peak RSS llminfer / llama.cpp MiB | RSS / (file + KV) | load ms llminfer / llama.cpp | spread % (llminfer, llama.cpp) | other CPU % |"
    sep += " ---: | ---: | ---: | ---: | ---: |"
    print("threads %d, %d rounds x %d reps, medians of round medians (tokens/s)" % (a.threads, a.rounds, a.reps))
    if a.roofline:
        print("memory read with %d threads (%s, before and after the rounds): %s GB/s; roofline "
              "from the best" % (a.threads, PROBE[0], " / ".join("%.1f" % b for b in bw if b)))
    print()
    print(head)
    print(sep)
    for m in a.models:
        fm = med(m, "ours", "file_mb")
        row = "| %s | %s |" % (os.path.basename(m).replace(".gguf", ""), fmt(fm, 0))
        spreads = []
        for t in tests:
            o, l = med(m, "ours", t), med(m, "llama", t)
            row += " %s | %s | **%s** |" % (fmt(o), fmt(l), fmt(o / l if o and l else None, 2))
            spreads.append("%.0f/%.0f" % (spread(m, "ours", t), spread(m, "llama", t)))
        if a.contend:
            ob, lb = med(m, "ours_busy", tg), med(m, "llama_busy", tg)
            o, l = med(m, "ours", tg), med(m, "llama", tg)
            row += " %s | %s | %s | %s |" % (fmt(ob), fmt(lb), fmt(o / ob if o and ob else None, 2),
                                            fmt(l / lb if l and lb else None, 2))
        if a.roofline:
            wb = weight_bytes_per_token(m, a)
            roof = max(b for b in bw if b) * 1e9 / wb if any(bw) else None
            o, l = med(m, "ours", tg), med(m, "llama", tg)
            row += " %.0f | %s | %s | %s |" % (wb / 1e6, fmt(roof), fmt(o / roof if o and roof else None, 2),
                                              fmt(l / roof if l and roof else None, 2))
        ro, rl, kv = med(m, "ours", "rss_mb"), med(m, "llama", "rss_mb"), med(m, "ours", "kv_mb")
        row += " %s / %s | %s |" % (fmt(ro, 0), fmt(rl, 0), fmt(ro / (fm + kv) if ro and fm else None, 2))
        row += " %s / %s |" % (fmt(med(m, "ours", "load_ms"), 0), fmt(med(m, "llama", "load_ms"), 0))
        other = max([x["other"] for x in raw[m]["ours"] + raw[m]["llama"]])  # not the busy runs: that is their point
        row += " %s | %.0f |" % (" ".join(spreads), other)
        print(row)


if __name__ == "__main__":
    main()
