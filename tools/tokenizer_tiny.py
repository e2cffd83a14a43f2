#!/usr/bin/env python3
"""Writes tiny tokenizer.json files (tests/tokenizer/tiny-*/) that exercise the parts of the
tokenizer.json reader the real vocabularies in ../shared do not: a legacy Llama-2 style SentencePiece
BPE (Prepend + Replace normalizer, byte fallback, fuse_unk, Strip decoder, TemplateProcessing with BOS),
a Metaspace pre-tokenizer (prepend_scheme "first"), and a RoBERTa style byte-level BPE (ByteLevel with
add_prefix_space, RobertaProcessing, an lstrip added token); and two byte-level BPEs with the o200k
(gpt-4o, as tiktoken conversions write it: Split Removed + invert) and tekken (Mistral) split regexes,
whose merges are byte pairs of corpus.jsonl and cased-corpus.jsonl (this script writes the latter), so that
a wrong piece boundary changes the ids. Then the Hugging Face oracle tokenizes tests/tokenizer/tiny-corpus.jsonl
(tiny-spm, tiny-metaspace, tiny-roberta) or corpus.jsonl + cased-corpus.jsonl (tiny-o200k, tiny-tekken) with
each (tools/tokenizer_goldens does that).

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


REGEX_O200K = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
               r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
               r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
REGEX_TEKKEN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
                r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|"
                r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")


# Texts for the o200k / tekken classes: cased runs (Lu, Ll, Lt, Lm, Lo, marks), contractions, '/' after
# punctuation, single vs grouped digits.
CASED = [
    "HTTPServer XMLHttpRequest iPhone eBay McDonald's O'Reilly",
    "camelCaseWord PascalCaseWord snake_case_word SCREAMING_CASE kebab-case",
    "HELLO WORLD hello world Hello World hELLO wORLD",
    "ABCdef abcDEF AbC aBc ABC abc A a",
    "I'M YOU'RE WE'VE THEY'LL SHE'D IT'S Don'T can'T",
    "JOHN'S john's John's JOHN'S'S x's X'S",
    "\u01c5ungla \u01c4UNGLA \u01c6ungla \u01c8ubav \u01cbIVA",
    "\u1f88\u03b9 \u1f80 \u1f08\u0399 \u1fbc\u1fb3",
    "\u02b0\u02b1 a\u02b0b A\u02b0B \u02b0A \u02b0a",
    "\u3005\u3006 \u30fc\u30ab\u30bf \u4eba\u3005 Tokyo\u6771\u4eac",
    "stra\u00dfe STRASSE Stra\u00dfe \u1e9e",
    "\u03a3\u039f\u03a6\u0399\u0391 \u03c3\u03bf\u03c6\u03af\u03b1 \u03a3\u03bf\u03c6\u03af\u03b1 \u039f\u0394\u039f\u03a3",
    "\u0130stanbul ISTANBUL istanbul \u0131\u015f\u0131k I\u015eIK",
    "\u00c9T\u00c9 \u00e9t\u00e9 \u00c9t\u00e9 E\u0301TE\u0301 e\u0301te\u0301 E\u0301te\u0301",
    "A\u0301B\u0301c\u0301 a\u0301B\u0301 \u0301A \u0301a \u0301",
    "\U0001d400\U0001d401\U0001d41a\U0001d41b \U0001d434\U0001d44e",
    "path/to/file.txt a/b/c http://x.org/a/b/ ./../ //comment /* c */",
    "x = y / z; a /= b; c // d\n/\n//\n",
    "!!/\n ?/\r\n .../ ,,\n\n",
    "123456 1234567 12a34 a1234b \u0661\u0662\u0663\u0664 \uff11\uff12\uff13\uff14",
    "MyHTMLParser2Go getHTTPResponseCode parseJSON2XML",
    "\u0412\u0435\u043b\u0438\u043a\u0438\u0439 \u041d\u041e\u0412\u0413\u041e\u0420\u041e\u0414 \u043c\u043e\u0441\u041a\u0412\u0410",
    "\u0531\u0580\u0561\u0574 \u0531\u0550\u0531\u0544 \u10d0\u10d1 \u1c90\u1c91",
    "Z\u0335a\u0337L\u0338g\u0335O\u0336 \u00c5\u030a a\u030a\u030a",
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35 \u0645\u064e\u0631\u0652",
    "\u2160\u2161 \u2170\u2171 \u00bd \u2460 \u00b2",
    "a'b A'B 'S 's ' S '\u017f '\u017fT \u02bcs",
    "\tTab\tTAB\ttab \u00a0Nbsp \u3000Ideo \u2003Em",
    "Hello\u200dWorld HELLO\u200bWORLD \ufeffBOM",
    "\u01c5\u01c5\u01c5 \u01c5a\u01c5A A\u01c5 a\u01c5",
]


ADDED_TEXTS = {"<|endoftext|>", "<|im_start|>", "<think>"}


def bigram_byte_level(max_merges):
    """256 byte tokens + one merge per byte pair of cased-corpus.jsonl and per pair seen at least twice in
    corpus.jsonl, the rare pairs first (then by the pair's text). Learned without pre-tokenization, so they
    cross the pre-tokenizer's boundaries: nearly every boundary decides whether two bytes merge."""
    b2u = bytes_to_unicode()
    counts = {}
    for name, weight in (("corpus.jsonl", 1), ("cased-corpus.jsonl", 2)):
        for line in open(os.path.join(OUT, name), encoding="utf-8"):
            s = [b2u[b] for b in json.loads(line)["text"].encode("utf-8")[:2000]]
            for a, b in zip(s, s[1:]):
                counts[(a, b)] = counts.get((a, b), 0) + weight
    vocab = {}
    for b in range(256):
        vocab[b2u[b]] = len(vocab)
    merges = []
    for pair, n in sorted(counts.items(), key=lambda kv: (kv[1] > 2, kv[0])):
        if len(merges) >= max_merges:
            break
        if n < 2 or pair[0] + pair[1] in ADDED_TEXTS:
            continue
        merges.append(pair)
        vocab[pair[0] + pair[1]] = len(vocab)
    return vocab, merges


def tiktoken_style(vocab, merges, regex, behavior, invert):
    eot = len(vocab)
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [added(eot, "<|endoftext|>", True), added(eot + 1, "<|im_start|>", True),
                             added(eot + 2, "<think>", False)],
            "normalizer": None,
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": regex}, "behavior": behavior, "invert": invert},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
            "post_processor": None,
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": vocab, "merges": [" ".join(m) for m in merges]}}


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

    with open(os.path.join(OUT, "cased-corpus.jsonl"), "w", encoding="utf-8") as f:
        for i, t in enumerate(CASED):
            f.write(json.dumps({"id": "cased%d" % i, "text": t}, ensure_ascii=False) + "\n")
    # 4, 5. byte-level BPE with the o200k (tiktoken conversion: Removed + invert) and tekken split regexes
    vocab, merges = bigram_byte_level(1500)
    write("tiny-o200k", tiktoken_style(vocab, merges, REGEX_O200K, "Removed", True), {"eos_token": "<|endoftext|>"})
    write("tiny-tekken", tiktoken_style(vocab, merges, REGEX_TEKKEN, "Isolated", False), {"eos_token": "<|endoftext|>"})

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
