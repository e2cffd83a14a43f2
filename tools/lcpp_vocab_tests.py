#!/usr/bin/env python3
"""Runs llama.cpp's tokenizer test vectors (ggml-vocab-*.gguf with .inp/.out) through llminfer.

    tools/lcpp_vocab_tests.py [--dir /tmp/lcpp-src/src/models] [--cli build/llminfer] [-v]

Each .inp holds texts separated by "\\n__ggml_vocab_test__\\n", each .out the expected ids (one line per
text), made by llama.cpp's tests/test-tokenizer-0 (add_special = false, parse_special = false). The vocab
GGUFs are 0.7-16 MB each and are not committed; they come with the llama.cpp sources of the same release
as the oracle (/tmp/lcpp-src here, or the oracle's `.build/vocab-tests/models/` after `node selftest.mjs`).
Vocabularies of a tokenizer type llminfer does not implement (WordPiece/bert, Unigram/t5, gemma4, and
byte-level pre-tokenizers other than those in src/33_tokenizer_build.hpp) are listed as unsupported:
llminfer must refuse them with an error, never tokenize them differently. Exit 1 on any mismatch.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/tmp/lcpp-src/src/models")
    ap.add_argument("--cli", default=os.path.join(HERE, "..", "build", "llminfer"))
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    files = sorted(glob.glob(os.path.join(a.dir, "ggml-vocab-*.gguf")))
    if not files:
        sys.exit("no ggml-vocab-*.gguf in %s" % a.dir)
    total_bad = 0
    for gguf in files:
        name = os.path.basename(gguf)
        inp, outp = gguf + ".inp", gguf + ".out"
        if not (os.path.exists(inp) and os.path.exists(outp)):
            print("%-32s no test vectors" % name)
            continue
        raw = open(inp, "rb").read().decode("utf-8")
        texts = raw.split("\n__ggml_vocab_test__\n")
        # the file ends with the separator's last line break missing or present: as test-tokenizer-0
        expected = [[int(x) for x in l.split()] for l in open(outp, encoding="utf-8").read().split("\n")]
        expected = expected[:len(texts)]
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
            for i, t in enumerate(texts):
                f.write(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n")
            corpus = f.name
        r = subprocess.run([a.cli, "tokenize", "-m", gguf, "--jsonl", corpus, "--no-bos"], capture_output=True, text=True)
        os.unlink(corpus)
        if r.returncode != 0:
            msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "exit %d" % r.returncode
            status = "unsupported" if r.returncode == 2 and "not supported" in msg else "ERROR"
            if status == "ERROR":
                total_bad += 1
            print("%-32s %s: %s" % (name, status, msg[:150]))
            continue
        got = [json.loads(l)["ids"] for l in r.stdout.splitlines()]
        bad = 0
        for i, (t, e, g) in enumerate(zip(texts, expected, got)):
            if e != g:
                bad += 1
                if a.verbose or bad <= 3:
                    print("  %s #%d %s\n    expected %s\n    got      %s" % (name, i, json.dumps(t, ensure_ascii=False)[:100], e[:30], g[:30]))
        total_bad += bad
        print("%-32s %3d/%d exact" % (name, len(texts) - bad, len(texts)))
    sys.exit(1 if total_bad else 0)


if __name__ == "__main__":
    main()
