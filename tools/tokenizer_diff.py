#!/usr/bin/env python3
"""Differential test of llminfer's tokenizer against the Hugging Face oracle on random strings.

    tools/tokenizer_diff.py [--n 2000] [--seed 1] [--tokenizers qwen3,llama3_1,gemma3,smollm2] [--corpus F.jsonl]
    tools/tokenizer_diff.py --tokenizers llama2=DIR,...   # any tokenizer.json directory (oracle and llminfer)

Random texts are built from a pool of trap fragments (whitespace kinds, apostrophes and case folding,
digits of many scripts, combining marks and NFD, Hangul jamo, emoji with ZWJ, special-token texts,
U+2581, byte-token lookalikes). Each tokenizer's ids come from `node tok.mjs batch` and from
`build/llminfer tokenize --jsonl --special` on the matching model in ../shared/models; every
difference is printed. Not part of `make test` (it needs node and the oracle); exit 1 on a mismatch.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
ORACLE = os.environ.get("ORACLE", os.path.join(ROOT, "..", "shared", "tools", "tokenizer-oracle"))
MODELS = os.path.join(ROOT, "..", "shared", "models")
MODEL_OF = {
    "qwen3": "synth-qwen3-tiny-q8_0.gguf",
    "llama3_1": "synth-llama-tiny-q8_0.gguf",
    "gemma3": "synth-gemma3-tiny-q8_0.gguf",
    "smollm2": "hf/smollm2-tiny/hf-bf16",
    "smollm2-gguf": "synth-smollm2-tiny-q8_0.gguf",
}
FRAGMENTS = [
    " ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\n\n", " \n", "\u0085", "\u00a0", "\u3000", "\u200b", "\ufeff",
    "\u2028", "\u2003", "\u180e", "\x0b", "\x1c", "'", "'s", "'S", "'t", "'re", "'RE", "'ll", "'Ll", "'ve", "'m",
    "'d", "'\u017f", "\u2019s", "a", "b", "Z", "word", "Hello", "the", "\u00e9", "e\u0301", "\u0301", "\u0323",
    "\u0302", "\u1100", "\u1161", "\u11a8", "\uac00", "\ud55c", "\u4e2d", "\u65e5\u672c", "\u3042", "\u30ab",
    "\u0928", "\u093f", "\u094d", "\u0e2a", "\u0e31", "\u0627", "\u064e", "0", "1", "12", "123", "1234", "\u00bd",
    "\u00b2", "\u0661", "\uff11", "\u2167", "\U0001d7d9", ".", ",", "!", "?", "(", ")", "-", "_", "$", "%", "<",
    ">", "|", "/", "\\", "\"", "#", "@", "{", "}", "\U0001f600", "\U0001f44d\U0001f3fd", "\u200d", "\ufe0f",
    "\U0001f468\u200d\U0001f469", "\U0001f1fa\U0001f1f8", "<|im_start|>", "<|im_end|>", "<|endoftext|>",
    "<think>", "</think>", "<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>", "</s>", "<s>", "<b>", "<0x41>",
    "<|begin_of_text|>", "<|eot_id|>", "\u2581", "\u2581\u2581", "<unused1>", "\U00020000", "\U00031350",
    "\U00011f04", "\u0000", "\x1b", "\x7f", "\ue000", "\uf900", "\u212b", "\ufb01", "<|", "|>", "<", "im_start",
    # cased letters for the o200k / tekken classes: Lu, Ll, Lt, Lm, Lo runs and mixes
    "ABC", "aBc", "HTTPServer", "iPhone", "\u01c5", "\u1f88", "\u02b0", "\u3005", "\u00df", "\u03a3", "\u0130",
    "/", "//", "'S", "\u00c9T\u00c9", "\U0001d400",
]


def random_text(rng):
    k = rng.choice([1, 2, 3, 5, 8, 13, 21, 40])
    return "".join(rng.choice(FRAGMENTS) for _ in range(k))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tokenizers", default="qwen3,llama3_1,gemma3,smollm2,smollm2-gguf")
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "llminfer"))
    ap.add_argument("--corpus", help="a jsonl file of {id, text} to add to the random texts")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    cases = [{"id": "r%d" % i, "text": random_text(rng)} for i in range(a.n)]
    if a.corpus:
        cases += [{"id": "c" + str(c["id"]), "text": c["text"]} for c in map(json.loads, open(a.corpus, encoding="utf-8"))]
    bad_total = 0
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.jsonl")
        with open(corpus, "w", encoding="utf-8") as f:
            for c in cases:
                f.write(json.dumps(c, ensure_ascii=False) + "\n")
        for t in a.tokenizers.split(","):
            name, _, path = t.partition("=")
            oracle_tok = os.path.abspath(path) if path else t.replace("-gguf", "")
            model = os.path.abspath(path) if path else os.path.join(MODELS, MODEL_OF[t])
            t = name
            exp_path = os.path.join(tmp, "exp-%s.jsonl" % t)
            subprocess.run(["node", "tok.mjs", "batch", "--tokenizer", oracle_tok, "--corpus", corpus, "--out",
                            exp_path, "--quiet"], cwd=ORACLE, check=True)
            exp = [json.loads(l) for l in open(exp_path, encoding="utf-8")]
            res = {}
            for add in (False, True):
                args = [a.cli, "tokenize", "-m", model, "--jsonl", corpus, "--special"]
                if not add:
                    args.append("--no-bos")
                out = subprocess.run(args, capture_output=True, text=True, check=True)
                res[add] = {json.loads(l)["id"]: json.loads(l)["ids"] for l in out.stdout.splitlines()}
            bad = 0
            for e in exp:
                for add, key in ((False, "ids"), (True, "ids_add_special")):
                    if res[add][e["id"]] != e[key]:
                        bad += 1
                        if bad <= 10:
                            text = next(c["text"] for c in cases if c["id"] == e["id"])
                            print("%s %s %s: %s\n  expected %s\n  got      %s" % (
                                t, e["id"], key, json.dumps(text, ensure_ascii=False), e[key][:40],
                                res[add][e["id"]][:40]))
            print("%s: %d cases, %d mismatches" % (t, len(exp), bad))
            bad_total += bad
    sys.exit(1 if bad_total else 0)


if __name__ == "__main__":
    main()
