#!/usr/bin/env python3
"""Writes three tiny tokenizer.json files (tests/tokenizer/tiny-*/) that exercise the parts of the
tokenizer.json reader the real vocabularies in ../shared do not: a legacy Llama-2 style SentencePiece
BPE (Prepend + Replace normalizer, byte fallback, fuse_unk, Strip decoder, TemplateProcessing with BOS),
a Metaspace pre-tokenizer (prepend_scheme "first"), and a RoBERTa style byte-level BPE (ByteLevel with
add_prefix_space, RobertaProcessing, an lstrip added token). Then the Hugging Face oracle tokenizes
tests/tokenizer/tiny-corpus.jsonl with each (tools/tokenizer_goldens does that too).

    tools/tokenizer_tiny.py
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
OUT = os.path.join(ROOT, "tests", "tokenizer")
M = "\u2581"
WORDS = ["the", "and", "to", "of", "hello", "world", "token", "izer", "ing", "er", "on", "in", "is", "it", "at",
         "caf\u00e9", "\u00fcber", "na\u00efve", "12", "123", "!!", "...", "  ", "\n\n"]


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + \
        list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def learn(vocab, merges, word):
    """Merges that build `word` left to right; intermediate pieces enter the vocabulary."""
    cur = word[0]
    for ch in word[1:]:
        for piece in (cur, ch):
            if piece not in vocab:
                vocab[piece] = len(vocab)
        nxt = cur + ch
        if [cur, ch] not in merges:
            merges.append([cur, ch])
        if nxt not in vocab:
            vocab[nxt] = len(vocab)
        cur = nxt


def added(i, content, special, lstrip=False, rstrip=False):
    return {"id": i, "content": content, "single_word": False, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": False, "special": special}


def spm(prepend_scheme=None):
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for ch in M + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?'-()\n":
        if ch not in vocab:
            vocab[ch] = len(vocab)
    merges = []
    for w in WORDS:
        learn(vocab, merges, M + w.replace(" ", M))
        learn(vocab, merges, w.replace(" ", M))
    sep_id = len(vocab)
    vocab["<sep>"] = sep_id
    return vocab, merges, sep_id


def write(name, tj, tc):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tc, f, ensure_ascii=False)


def main():
    # 1. Llama-2 legacy style
    vocab, merges, sep = spm()
    tj = {"version": "1.0", "truncation": None, "padding": None,
          "added_tokens": [added(0, "<unk>", True), added(1, "<s>", True), added(2, "</s>", True),
                           added(sep, "<sep>", False, rstrip=True)],
          "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": M},
                                                              {"type": "Replace", "pattern": {"String": " "},
                                                               "content": M}]},
          "pre_tokenizer": None,
          "post_processor": {"type": "TemplateProcessing",
                             "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                        {"Sequence": {"id": "A", "type_id": 0}}],
                             "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}},
                                      {"Sequence": {"id": "B", "type_id": 1}}],
                             "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
          "decoder": {"type": "Sequence", "decoders": [
              {"type": "Replace", "pattern": {"String": M}, "content": " "}, {"type": "ByteFallback"},
              {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
          "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                    "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                    "vocab": vocab, "merges": merges}}
    write("tiny-spm", tj, {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"})

    # 2. Metaspace pre-tokenizer, prepend_scheme "first"
    vocab, merges, sep = spm()
    tj2 = dict(tj)
    tj2["added_tokens"] = [added(0, "<unk>", True), added(1, "<s>", True), added(2, "</s>", True),
                           added(sep, "<sep>", False, lstrip=True)]
    tj2["normalizer"] = None
    tj2["pre_tokenizer"] = {"type": "Metaspace", "replacement": M, "prepend_scheme": "first", "split": True}
    tj2["post_processor"] = None
    tj2["decoder"] = {"type": "Metaspace", "replacement": M, "prepend_scheme": "first", "split": True}
    tj2["model"] = dict(tj["model"], vocab=vocab, merges=merges, fuse_unk=False)
    write("tiny-metaspace", tj2, {"eos_token": "</s>"})

    # 3. RoBERTa style byte-level BPE
    b2u = bytes_to_unicode()
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for b in range(256):
        vocab[b2u[b]] = len(vocab)
    merges = []
    for w in WORDS:
        mapped = "".join(b2u[b] for b in (" " + w).encode("utf-8"))
        learn(vocab, merges, mapped)
        learn(vocab, merges, "".join(b2u[b] for b in w.encode("utf-8")))
    mask = len(vocab)
    vocab["<mask>"] = mask
    tj3 = {"version": "1.0", "truncation": None, "padding": None,
           "added_tokens": [added(0, "<s>", True), added(1, "<pad>", True), added(2, "</s>", True),
                            added(3, "<unk>", True), added(mask, "<mask>", True, lstrip=True)],
           "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
           "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0],
                              "trim_offsets": True, "add_prefix_space": True},
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                     "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                     "vocab": vocab, "merges": [" ".join(m) for m in merges]}}
    write("tiny-roberta", tj3, {"bos_token": "<s>", "eos_token": "</s>"})

    texts = ["", " ", "hello world", " hello  world ", "the token izer", "caf\u00e9 \u00fcber na\u00efve",
             "The And TO", "12 123 1234", "wow!!... ok", "a\n\nb", "tab\there", "  leading", "trailing  ",
             "emoji \U0001f600 and \u4e2d\u6587", "\U00020000", "<s>hello</s>", "x<sep>  y", "x  <sep>y",
             "<mask> is", "a <mask>  b", "\u2581hello", "\u2581\u2581", "unknown \u00a7 char", "\r\n", "'s 'RE",
             "it's ~ ^ |", "mixed<unk>text", "\u00e9\u00e9\u00e9", "the the the", "\n", "x" * 50]
    with open(os.path.join(OUT, "tiny-corpus.jsonl"), "w", encoding="utf-8") as f:
        for i, t in enumerate(texts):
            f.write(json.dumps({"id": "t%d" % i, "text": t}, ensure_ascii=False) + "\n")
    print("wrote tests/tokenizer/tiny-*/ and tiny-corpus.jsonl")


if __name__ == "__main__":
    main()
