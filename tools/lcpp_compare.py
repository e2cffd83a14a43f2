#!/usr/bin/env python3
"""Compares llminfer's tokenization with llama.cpp's (the oracle's prebuilt library, through
build/lcpp_tokenize, see bench/build_lcpp_tokenize.sh) on a corpus, for every small GGUF model.

    tools/lcpp_compare.py [--corpus tests/tokenizer/corpus.jsonl] [--models a.gguf,b.gguf] [--show N]
                          [--write-goldens tests/tokenizer]

Modes: parse_special on/off x add_special on/off. Every difference is printed with both id lists;
`--write-goldens DIR` records them in DIR/lcpp-diffs.jsonl ({"model","id","special","add","llama_cpp",
"llminfer"}) and, in DIR/lcpp-agree.json, a hash of llama.cpp's ids over all cases where both agree, so that
the test suite can assert that llminfer differs from llama.cpp exactly there and agrees everywhere else.
Where they differ, Hugging Face is the reference: tests/tokenizer/expected-*.jsonl (made by the HF
oracle) is checked for the same texts by the doctest suite.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
MODELS = os.path.join(ROOT, "..", "shared", "models")
DEFAULT_MODELS = ["synth-qwen3-tiny-q8_0.gguf", "synth-qwen2-tiny-q8_0.gguf", "synth-llama-tiny-q8_0.gguf",
                  "synth-gemma3-tiny-q8_0.gguf", "synth-smollm2-tiny-q8_0.gguf", "stories260K.gguf"]
BINS = os.path.join(ROOT, "..", "shared", "tools", "llamacpp-oracle", "node_modules", "@node-llama-cpp", "linux-x64",
                    "bins", "linux-x64")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=os.path.join(ROOT, "tests", "tokenizer", "corpus.jsonl"))
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    ap.add_argument("--show", type=int, default=5)
    ap.add_argument("--write-goldens", metavar="DIR",
                    help="write DIR/lcpp-diffs.jsonl and DIR/lcpp-agree.json (hashes of llama.cpp's ids where equal)")
    a = ap.parse_args()
    lcpp = subprocess.run([os.path.join(ROOT, "bench", "build_lcpp_tokenize.sh")], capture_output=True, text=True,
                          check=True).stdout.strip()
    cli = os.path.join(ROOT, "build", "llminfer")
    cases = [json.loads(l) for l in open(a.corpus, encoding="utf-8")]
    diffs = []
    agree = {}
    with tempfile.TemporaryDirectory() as tmp:
        rec = os.path.join(tmp, "records.bin")
        with open(rec, "wb") as f:
            for c in cases:
                b = c["text"].encode("utf-8")
                f.write(b"%d\n" % len(b) + b)
        for model in a.models.split(","):
            path = os.path.join(MODELS, model)
            for special in (True, False):
                for add in (True, False):
                    flags = (["--special"] if special else []) + ([] if add else ["--no-bos"])
                    env = dict(os.environ, LCPP_BINS=BINS)
                    ref = subprocess.run([lcpp, "batch", path, rec] + flags, capture_output=True, text=True,
                                         check=True, env=env).stdout.split("\n")
                    out = subprocess.run([cli, "tokenize", "-m", path, "--jsonl", a.corpus] + flags,
                                         capture_output=True, text=True, check=True).stdout.splitlines()
                    got = {json.loads(l)["id"]: json.loads(l)["ids"] for l in out}
                    n_bad = 0
                    h = 0xcbf29ce484222325
                    for k, c in enumerate(cases):
                        r = [int(x) for x in ref[k].split()]
                        g = got[c["id"]]
                        if r == g:
                            for byte in ("%s:%s\n" % (c["id"], " ".join(map(str, r)))).encode():
                                h = ((h ^ byte) * 0x100000001b3) & 0xffffffffffffffff
                        if r != g:
                            n_bad += 1
                            diffs.append({"model": model, "id": c["id"], "special": special, "add": add,
                                          "llama_cpp": r, "llminfer": g})
                            if n_bad <= a.show:
                                print("  %s special=%d add=%d %s %s\n    llama.cpp %s\n    llminfer  %s" % (
                                    model, special, add, c["id"], json.dumps(c["text"], ensure_ascii=False)[:70],
                                    r[:24], g[:24]))
                    print("%-34s special=%d add=%d: %d/%d equal" % (model, special, add, len(cases) - n_bad,
                                                                    len(cases)))
                    agree.setdefault(model, {})["special=%d,add=%d" % (special, add)] = "%016x" % h
    if a.write_goldens:
        with open(os.path.join(a.write_goldens, "lcpp-diffs.jsonl"), "w", encoding="utf-8") as f:
            for d in diffs:
                f.write(json.dumps(d, separators=(",", ":")) + "\n")
        with open(os.path.join(a.write_goldens, "lcpp-agree.json"), "w", encoding="utf-8") as f:
            json.dump({"hash": "FNV-1a 64 over '<id>:<ids space-separated>\\n' of every case where the ids agree, "
                               "in corpus order", "models": agree}, f, indent=1)
            f.write("\n")
        print("%s: %d differences" % (a.write_goldens, len(diffs)))


if __name__ == "__main__":
    main()
