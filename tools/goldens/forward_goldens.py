#!/usr/bin/python3
"""Regenerates the forward-pass goldens (tests/goldens/forward/*.json) from the llama.cpp oracle.

For every model of MODELS and every prompt of PROMPTS it records what llama.cpp computes on the
same file:
  * the prompt ids: `oracle.mjs tokenize MODEL --text PROMPT` (BOS as the model asks);
  * per prompt position: argmax, logsumexp, the top 10 (id, logit) and the logits of a fixed sample
    of SAMPLE ids, from `oracle.mjs logits MODEL --ids ... --all --precise --threads 1 --out F.f32` (raw
    float32 logits, f32 KV cache, no flash attention: the tightest reference);
  * 64 greedy ids: `oracle.mjs generate MODEL --ids ... --n 64 --ignore-eos --precise --threads 1 --out S.f32`,
    and for each step the runner-up id and its margin (best logit - second best) from the logits
    the token was chosen from ("greedy_runner_up"), to tell a real divergence from a tie.
Usage (from the repository root, with ../shared beside it and the fixtures built by `make fixtures`):
    /usr/bin/python3 tools/goldens/forward_goldens.py [--only NAME_SUBSTRING] [--fixtures build/fixtures]
On a CPU with AVX2 but no AVX-512 (ggml then loads its AVX2 CPU variant, whose float order differs
for some ops), the AVX2 goldens:
    /usr/bin/python3 tools/goldens/forward_goldens.py --out tests/goldens/forward/avx2 \
        --only-differing-from tests/goldens/forward
and the same on an AVX-512 CPU with `--cpu-variant haswell` (ggml restricted to its AVX2 variant).
Needs numpy and node (the oracle in ../shared/tools/llamacpp-oracle). Deterministic: a rerun
writes the same files.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SHARED = os.environ.get("LLMINFER_SHARED") or os.path.normpath(os.path.join(ROOT, "..", "shared"))
# The llama.cpp oracle (llamacpp-oracle, installed with its install.sh): $LLMINFER_LCPP_ORACLE or
# ../shared/tools/llamacpp-oracle.
ORACLE = os.environ.get("LLMINFER_LCPP_ORACLE") or os.path.join(SHARED, "tools", "llamacpp-oracle")
OUT = os.path.join(ROOT, "tests", "goldens", "forward")
THIRD_PARTY = os.path.join(ROOT, "third_party", "stories260K")
# --precise: f32 KV cache, no flash attention. --no-repack: weights stay in ggml's plain CPU buffer
# (on an AMX CPU ggml would repack F16/Q8_0/K-quant weights into its AMX buffer, which sums in
# another order for batches of 2 or more): the same plain kernels on every x86 CPU.
EXACT = ["--precise", "--no-repack"]
SAMPLE = 256     # logits kept per position for the Pearson correlation (see README.md here)
N_GREEDY = 64

# (name, where, weight type): "shared:" = ../shared/models, "fixtures:" = `make fixtures` output.
MODELS = [
    ("stories260K", "third_party:stories260K.gguf", "f32"),
    ("stories260K-q8_0", "third_party:stories260K-q8_0.gguf", "q8_0"),
    ("synth-llama-tiny-f32", "fixtures:synth-llama-tiny-f32.gguf", "f32"),
    ("synth-llama-tiny-f16", "fixtures:synth-llama-tiny-f16.gguf", "f16"),
    ("synth-llama-tiny-bf16", "fixtures:synth-llama-tiny-bf16.gguf", "bf16"),
    ("synth-llama-tiny-q8_0", "fixtures:synth-llama-tiny-q8_0.gguf", "q8_0"),
    ("synth-smollm2-tiny-f32", "fixtures:synth-smollm2-tiny-f32.gguf", "f32"),
    ("synth-smollm2-tiny-f16", "fixtures:synth-smollm2-tiny-f16.gguf", "f16"),
    ("synth-smollm2-tiny-bf16", "fixtures:synth-smollm2-tiny-bf16.gguf", "bf16"),
    ("synth-smollm2-tiny-q8_0", "fixtures:synth-smollm2-tiny-q8_0.gguf", "q8_0"),
    ("synth-smollm2-tiny-q4_k_m", "fixtures:synth-smollm2-tiny-q4_k_m.gguf", "q4_k_m"),
    ("synth-qwen2-tiny-f32", "fixtures:synth-qwen2-tiny-f32.gguf", "f32"),
    ("synth-qwen2-tiny-f16", "fixtures:synth-qwen2-tiny-f16.gguf", "f16"),
    ("synth-qwen2-tiny-bf16", "fixtures:synth-qwen2-tiny-bf16.gguf", "bf16"),
    ("synth-qwen2-tiny-q8_0", "fixtures:synth-qwen2-tiny-q8_0.gguf", "q8_0"),
    ("synth-qwen3-tiny-f32", "fixtures:synth-qwen3-tiny-f32.gguf", "f32"),
    ("synth-qwen3-tiny-f16", "fixtures:synth-qwen3-tiny-f16.gguf", "f16"),
    ("synth-qwen3-tiny-bf16", "fixtures:synth-qwen3-tiny-bf16.gguf", "bf16"),
    ("synth-qwen3-tiny-q8_0", "fixtures:synth-qwen3-tiny-q8_0.gguf", "q8_0"),
    ("synth-qwen3-tiny-q4_k_m", "fixtures:synth-qwen3-tiny-q4_k_m.gguf", "q4_k_m"),
    ("synth-gemma3-tiny-f32", "fixtures:synth-gemma3-tiny-f32.gguf", "f32"),
    ("synth-gemma3-tiny-softcap-f32", "fixtures:synth-gemma3-tiny-softcap-f32.gguf", "f32"),
    ("synth-gemma3-tiny-f16", "fixtures:synth-gemma3-tiny-f16.gguf", "f16"),
    ("synth-gemma3-tiny-bf16", "fixtures:synth-gemma3-tiny-bf16.gguf", "bf16"),
    ("synth-gemma3-tiny-q8_0", "fixtures:synth-gemma3-tiny-q8_0.gguf", "q8_0"),
    ("synth-gemma3-tiny-q4_k_m", "fixtures:synth-gemma3-tiny-q4_k_m.gguf", "q4_k_m"),
    # the architectures of issue 13 (F32; 8-token sliding windows, crossed by every prompt)
    ("synth-phi3-tiny-f32", "fixtures:synth-phi3-tiny-f32.gguf", "f32"),
    ("synth-starcoder2-tiny-f32", "fixtures:synth-starcoder2-tiny-f32.gguf", "f32"),
    ("synth-stablelm-tiny-f32", "fixtures:synth-stablelm-tiny-f32.gguf", "f32"),
    ("synth-smollm3-tiny-f32", "fixtures:synth-smollm3-tiny-f32.gguf", "f32"),
    ("synth-gemma2-tiny-f32", "fixtures:synth-gemma2-tiny-f32.gguf", "f32"),
    ("synth-olmo2-tiny-f32", "fixtures:synth-olmo2-tiny-f32.gguf", "f32"),
    ("synth-olmo2-swa-tiny-f32", "fixtures:synth-olmo2-swa-tiny-f32.gguf", "f32"),
    # Gemma 3n's text part (issue 19): 25 layers, 5 of them sharing KV caches, a 16-token window;
    # its 512-id tokenizer makes the prompts 26, 29 and 59 tokens
    ("synth-gemma3n-mini-f32", "fixtures:synth-gemma3n-mini-f32.gguf", "f32"),
    ("synth-gemma3n-mini-f16", "fixtures:synth-gemma3n-mini-f16.gguf", "f16"),
    ("synth-gemma3n-mini-bf16", "fixtures:synth-gemma3n-mini-bf16.gguf", "bf16"),
    ("synth-gemma3n-mini-q8_0", "fixtures:synth-gemma3n-mini-q8_0.gguf", "q8_0"),
    ("synth-gemma3n-mini-q4_k_m", "fixtures:synth-gemma3n-mini-q4_k_m.gguf", "q4_k_m"),
]

# Three prompts: short prose, a factual pattern, and code long enough (> 16 tokens) to cross
# gemma3-tiny's 16-token sliding window during the prompt itself.
PROMPTS = [
    "Once upon a time, there was a little robot who",
    "The capital of France is Paris. The capital of Germany is",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
]


CPU_VARIANT = None  # --cpu-variant: run the oracle through lcpp_cpu_variant.mjs with that ggml CPU variant


def oracle(*args):
    cmd = ["node", "oracle.mjs", *args]
    if CPU_VARIANT:
        cmd = ["node", os.path.join(os.path.dirname(os.path.abspath(__file__)), "lcpp_cpu_variant.mjs"), CPU_VARIANT,
               *args]
    r = subprocess.run(cmd, cwd=ORACLE, capture_output=True, text=True, env=dict(os.environ, LLMINFER_LCPP_ORACLE=ORACLE))
    if r.returncode != 0:
        sys.exit("oracle %s failed: %s %s" % (" ".join(args), r.stdout[-2000:], r.stderr[-2000:]))
    return json.loads(r.stdout)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def resolve(where, fixtures):
    kind, rel = where.split(":", 1)
    if kind == "shared":
        return os.path.join(SHARED, "models", rel)
    if kind == "third_party":
        return os.path.join(THIRD_PARTY, rel)
    return os.path.join(fixtures, rel)


def top10(row):
    # ties -> lower id (as llama.cpp's sampler and the tests)
    order = np.lexsort((np.arange(row.size), -row.astype(np.float64)))[:10]
    return [[int(i), float(row[i])] for i in order]


def logsumexp(row):
    m = float(row.max())
    return m + float(np.log(np.exp(row.astype(np.float64) - m).sum()))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", action="append", help="only the models whose name contains this (repeatable)")
    ap.add_argument("--fixtures", default=os.path.join(ROOT, "build", "fixtures"))
    ap.add_argument("--out", default=OUT, help="where the .json files go (default tests/goldens/forward)")
    ap.add_argument("--only-differing-from", metavar="DIR",
                    help="write a model's file only when its logits or greedy tokens differ from DIR/NAME.json "
                         "(the goldens of another CPU variant of llama.cpp: tests/goldens/forward/avx2/)")
    ap.add_argument("--cpu-variant", metavar="NAME",
                    help="make ggml load only its CPU variant NAME (libggml-cpu-NAME.so of the prebuilt llama.cpp, "
                         "e.g. haswell = AVX2) through tools/goldens/lcpp_cpu_variant.mjs: the AVX2 goldens on an "
                         "AVX-512 machine")
    a = ap.parse_args()
    global CPU_VARIANT
    CPU_VARIANT = a.cpu_variant
    out_dir = a.out
    v = oracle("version")
    version = v["llama_cpp_build"]
    # the CPU features of the ggml CPU variant that ran (ggml loads the best one for this CPU; its
    # float order follows them: see tests/goldens/forward/README.md)
    cpu = v.get("native", {}).get("system_info", "").strip()
    os.makedirs(out_dir, exist_ok=True)
    for name, where, wtype in MODELS:
        if a.only and not any(o in name for o in a.only):
            continue
        path = resolve(where, a.fixtures)
        info = oracle("info", path)
        n_vocab = int(info["n_vocab"])
        rng = np.random.Generator(np.random.PCG64(20240))
        sample = sorted(int(x) for x in rng.choice(n_vocab, size=min(SAMPLE, n_vocab), replace=False))
        prompts = []
        for text in PROMPTS:
            ids = oracle("tokenize", path, "--text", text)["ids"]
            idarg = ",".join(str(i) for i in ids)
            with tempfile.TemporaryDirectory() as td:
                out = os.path.join(td, "l.f32")
                oracle("logits", path, "--ids", idarg, "--all", *EXACT, "--threads", "1", "--out", out)
                lg = np.fromfile(out, "<f4").reshape(-1, n_vocab)
            assert lg.shape[0] == len(ids)
            positions = []
            for p in range(len(ids)):
                row = lg[p]
                positions.append({"argmax": int(np.argmax(row)), "logsumexp": round(logsumexp(row), 6),
                                  "top": [[i, float("%.7g" % v)] for i, v in top10(row)],
                                  "sample": [float("%.7g" % row[i]) for i in sample]})
            with tempfile.TemporaryDirectory() as td:
                out = os.path.join(td, "s.f32")
                g = oracle("generate", path, "--ids", idarg, "--n", str(N_GREEDY), "--ignore-eos", *EXACT,
                           "--threads", "1", "--out", out)
                steps = np.fromfile(out, "<f4").reshape(-1, n_vocab)
            assert steps.shape[0] == len(g["ids"]) == N_GREEDY
            runner_up = []
            for k, row in enumerate(steps):
                t = top10(row)
                assert t[0][0] == g["ids"][k]
                runner_up.append([t[1][0], float("%.7g" % (t[0][1] - t[1][1]))])
            prompts.append({"text": text, "ids": ids, "positions": positions, "greedy": g["ids"],
                            "greedy_runner_up": runner_up})
        doc = {
            "model": where, "name": name, "weights": wtype, "sha256": sha256(path), "n_vocab": n_vocab,
            "oracle": version, "cpu": cpu,
            "commands": {
                "ids": "node oracle.mjs tokenize MODEL --text PROMPT",
                "positions": "node oracle.mjs logits MODEL --ids IDS --all --precise --no-repack --threads 1 --out F.f32",
                "greedy": "node oracle.mjs generate MODEL --ids IDS --n 64 --ignore-eos --precise --no-repack --threads 1 --out S.f32",
                "script": "/usr/bin/python3 tools/goldens/forward_goldens.py",
            },
            "sample_ids": sample, "prompts": prompts,
        }
        if a.only_differing_from:
            other = os.path.join(a.only_differing_from, name + ".json")
            if os.path.exists(other):
                with open(other) as f:
                    o = json.load(f)
                keys = ("ids", "positions", "greedy", "greedy_runner_up")
                if o.get("sha256") == doc["sha256"] and o.get("sample_ids") == sample and \
                        [[p[k] for k in keys] for p in o["prompts"]] == [[p[k] for k in keys] for p in prompts]:
                    print("%s: the same as %s, not written" % (name, other), flush=True)
                    continue
        dst = os.path.join(out_dir, name + ".json")
        with open(dst, "w") as f:
            json.dump(doc, f, separators=(",", ":"))
            f.write("\n")
        print("wrote %s (%d bytes)" % (dst, os.path.getsize(dst)), flush=True)


if __name__ == "__main__":
    main()
