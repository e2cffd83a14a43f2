#!/usr/bin/env python3
"""Writes tests/tokenizer/corpus.jsonl: the tokenizer test corpus (deterministic; edit here, not there).

Each case is {"id": ..., "text": ...}. The goldens beside it come from the Hugging Face oracle
(tools/tokenizer_goldens). Cases are grouped by the trap they exercise; ids are unique.
"""
import json
import os
import sys

C = []


def case(cid, text):
    assert all(c["id"] != cid for c in C), cid
    C.append({"id": cid, "text": text})


# --- whitespace ---
for cid, t in [("empty", ""), ("space", " "), ("space2", "  "), ("space3", "   "), ("tab", "\t"), ("nl", "\n"),
               ("nl2", "\n\n"), ("crlf", "\r\n"), ("cr", "\r"), ("space-nl", " \n"), ("nl-space", "\n "),
               ("tab3", "\t\t\t"), ("space4", "    "), ("space16", " " * 16), ("space33", " " * 33),
               ("ws-mix", " \t \n \r\n "), ("ideographic-space", "\u3000"), ("ideo-between", "a\u3000b"),
               ("nel", "\u0085"), ("nel-between", "a\u0085b"), ("nel-spaced", "a \u0085 b"),
               ("bom", "\ufeffBOM text"), ("zwsp", "zero\u200bwidth"), ("zwsp-space", "a\u200b b"),
               ("nbsp", "\u00a0nbsp\u00a0x"), ("line-para-sep", "\u2028line\u2029para"), ("ogham", "\u1680ogham"),
               ("mongolian-vs", "a\u180eb"), ("info-seps", "\x1c\x1d\x1e\x1f seps"), ("vt-ff", "\x0b\x0c vt ff"),
               ("trailing", "word   "), ("leading", "   word"), ("a2b", "a  b"), ("a3b", "a   b"), ("a4b", "a    b"),
               ("a-nl-b", "a \n b"), ("spaces-before-nl", "foo   \nbar"), ("nl4", "x\n\n\n\ny"),
               ("crlf-lines", "line1\r\nline2\r\n\r\n"), ("ws-block", "   \n\n   "), ("punct-crlf", ".\r\n\r\n"),
               ("end-dot-nl", "end.\n\n"), ("paren-nl-tabs", ")\n\t\tx"), ("nl40", "\n" * 40), ("tab40", "\t" * 40),
               ("nl-tab-mix", "\n\t\n\t\n"), ("space-tab-word", " \tword"), ("tab-word", "\tword"),
               ("em-space-word", "\u2003word"), ("nbsp-word", "\u00a0word"), ("space500", " " * 500 + "x"),
               ("nl200", "\n" * 200), ("spaces-then-punct", "a   !!"), ("space-punct-nl", " ?!\n\nz")]:
    case(cid, t)

# --- code ---
case("python", "def main():\n\tfor i in range(3):\n\t\tprint(i)  # two spaces\n\treturn None\n")
case("cpp", "int main() {\n    int   x   =    1;      // aligned\n    return x;\n}\n")
case("json", '{"name": "llminfer", "ids": [1, 2, 3], "ok": true, "nested": {"a": null}}')
case("html", '<div class="x"><b>bold</b> <i>it</i></div>\n<table><tr><td>x</td></tr></table>')
case("makefile", "all: build\n\tg++ -O2 -o app main.cpp\n\n.PHONY: all\n")
case("shell", 'for f in *.txt; do echo "$HOME/$f" | tr a-z A-Z; done 2>&1 >/dev/null')
case("regex", r"^(?:[a-z0-9!#$%&'*+/=?^_`{|}~-]+)@\d{1,3}\.\w+$")
case("url", "https://example.com/path/to/page?query=1&x=y#frag and mailto:someone@example.org")
case("windows-path", "C:\\Users\\Admin\\Documents\\file (1).txt")
case("markdown", "| col1 | col2 |\n|------|------|\n| **a** | `b` |\n\n- item\n  - nested\n")
case("long-indent", " " * 80 + "x = 1\n" + "\t" * 12 + "y")
case("code-comment-spaces", "    return x;  // comment    \n")
case("rust", "fn main() -> Result<(), Box<dyn Error>> {\n    let v: Vec<u8> = vec![0xFF; 16];\n    Ok(())\n}")
case("sql", "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;")
case("latex", r"\frac{\partial f}{\partial x} = \sum_{i=1}^{n} \alpha_i x^{2}")
case("operators", "a+=b; c<<=2; d->e; f::g; h?.i ?? j; k => l; m != n; o === p")

# --- digits ---
for cid, t in [("digits10", "1234567890"), ("digit-groups", "123 4567 89012"), ("pi", "3.14159"),
               ("thousands", "1,000,000"), ("negative", "-42"), ("hex", "0x1F 0XdeadBEEF"),
               ("iso-date", "2025-03-07T12:34:56Z"), ("arabic-indic", "\u0660\u0661\u0662\u0663\u0664\u0665\u0666"),
               ("fullwidth-digits", "\uff11\uff12\uff13"), ("superscripts", "x\u00b2 y\u00b3 z\u00b9"),
               ("fractions", "\u00bd \u00bc\u00be"), ("roman", "\u2177 \u216b"),
               ("math-digits", "\U0001d7d9\U0001d7da\U0001d7db"), ("devanagari-digits", "\u0967\u0968\u0969"),
               ("thai-digits", "\u0e51\u0e52\u0e53"), ("mixed-alnum", "12abc34 a1b2c3"), ("space-digit", " 1"),
               ("space2-digits", "  12"), ("spaced-digits", "1 2 3"), ("money", "$100.00 and 10% off"),
               ("sci", "1e-10 6.02e23"), ("version", "v1.2.3-rc4"), ("digits30", "1234567890" * 3),
               ("digits300", "1234567890" * 30), ("circled", "\u2460\u2461 \u2474"), ("digit-letter-mix", "x1y22z333")]:
    case(cid, t)

# --- contractions (case folding) ---
for cid, t in [("contr-lower", "I'm you're we've they'll she'd it's can't don't"),
               ("contr-upper", "I'M YOU'RE WE'VE THEY'LL SHE'D IT'S"), ("contr-bare", "'s 't 're 've 'm 'll 'd"),
               ("contr-names", "O'Neil's rock'n'roll"), ("long-s", "'\u017ft"), ("long-s-word", "x'\u017ftop"),
               ("long-s-upper", "'\u017fT"), ("curly-apostrophe", "it\u2019s John\u2019s"),
               ("double-quote-apos", "''quoted''"), ("contr-chain", "'S'T'RE'LL"), ("apos-double", "it''s"),
               ("rock-n-roll", "rock 'n' roll"), ("apos-only", "'"), ("apos2", "''"), ("dz-digraph", "\u01c5'LL"),
               ("kelvin", "'\u212aelvin"), ("contr-mixed", "You'Re They'lL"), ("apos-space", "' s 't")]:
    case(cid, t)

# --- languages and scripts ---
for cid, t in [
        ("english", "The quick brown fox jumps over the lazy dog."),
        ("german", "Gr\u00f6\u00dfenma\u00dfst\u00e4be f\u00fcr \u00dcberm\u00e4\u00dfigkeit"),
        ("french", "L'\u00e9t\u00e9 o\u00f9 l'on s'\u00e9tait rencontr\u00e9s, c'\u00e9tait g\u00e9nial !"),
        ("spanish", "\u00bfD\u00f3nde est\u00e1 el ba\u00f1o? \u00a1Aqu\u00ed!"),
        ("turkish", "\u0130stanbul'da \u0131\u011fd\u0131r \u015f\u00f6yle"),
        ("vietnamese", "Ti\u1ebfng Vi\u1ec7t c\u00f3 nhi\u1ec1u d\u1ea5u thanh \u0111i\u1ec7u: vi\u1ec7c, ng\u01b0\u1eddi"),
        ("polish", "Za\u017c\u00f3\u0142\u0107 g\u0119\u015bl\u0105 ja\u017a\u0144"),
        ("greek", "\u039a\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1 \u03ba\u03cc\u03c3\u03bc\u03b5"),
        ("russian", "\u041f\u0440\u0438\u0432\u0435\u0442, \u043a\u0430\u043a \u0434\u0435\u043b\u0430? \u0421\u044a\u0435\u0448\u044c"),
        ("ukrainian", "\u041f\u0440\u0438\u0432\u0456\u0442, \u0457\u0436\u0430\u043a \u0490\u0430\u043d\u043e\u043a"),
        ("arabic", "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645\u060c \u0643\u064a\u0641 \u062d\u0627\u0644\u0643\u061f"),
        ("arabic-harakat", "\u0645\u064e\u0631\u0652\u062d\u064e\u0628\u064b\u0627"),
        ("hebrew", "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd"),
        ("hebrew-niqqud", "\u05e9\u05b8\u05c1\u05dc\u05d5\u05b9\u05dd"),
        ("persian", "\u0633\u0644\u0627\u0645 \u062f\u0646\u06cc\u0627\u060c \u0627\u06cc\u0646 \u06cc\u06a9 \u0622\u0632\u0645\u0627\u06cc\u0634 \u0627\u0633\u062a"),
        ("hindi", "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e \u0939\u093f\u0928\u094d\u0926\u0940"),
        ("bengali", "\u0986\u09ae\u09be\u09b0 \u09b8\u09cb\u09a8\u09be\u09b0 \u09ac\u09be\u0982\u09b2\u09be"),
        ("tamil", "\u0bb5\u0ba3\u0b95\u0bcd\u0b95\u0bae\u0bcd \u0b89\u0bb2\u0b95\u0bae\u0bcd"),
        ("telugu", "\u0c39\u0c32\u0c4b \u0c2a\u0c4d\u0c30\u0c2a\u0c02\u0c1a\u0c02"),
        ("thai", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e0a\u0e32\u0e27\u0e42\u0e25\u0e01 \u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22"),
        ("lao", "\u0eaa\u0eb0\u0e9a\u0eb2\u0e8d\u0e94\u0eb5"),
        ("khmer", "\u179f\u17bd\u179f\u17d2\u178f\u17b8\u1796\u17b7\u1797\u1796\u179b\u17c4\u1780"),
        ("burmese", "\u1019\u1004\u103a\u1039\u1002\u101c\u102c\u1015\u102b"),
        ("tibetan", "\u0f56\u0f7c\u0f51\u0f0b\u0f66\u0f90\u0f51\u0f0b"),
        ("georgian", "\u10d2\u10d0\u10db\u10d0\u10e0\u10ef\u10dd\u10d1\u10d0"),
        ("armenian", "\u0532\u0561\u0580\u0565\u0582 \u0561\u0577\u056d\u0561\u0580\u0570"),
        ("amharic", "\u1230\u120b\u121d \u120d\u12d1\u120d"),
        ("chinese", "\u4f60\u597d\uff0c\u4e16\u754c\uff01\u8fd9\u662f\u4e00\u4e2a\u6d4b\u8bd5\u3002"),
        ("chinese-trad", "\u81fa\u7063\u7684\u7e41\u9ad4\u4e2d\u6587"),
        ("japanese-mixed", "\u6771\u4eac\u30bf\u30ef\u30fc\u306fTokyo Tower\u3067\u3059\u3002\u30ab\u30bf\u30ab\u30ca\u3068\u3072\u3089\u304c\u306a"),
        ("korean", "\uc548\ub155\ud558\uc138\uc694 \uc138\uacc4! \ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8"),
        ("hangul-jamo", "\u1100\u1161\u11a8 \u1112\u1161\u11ab"),
        ("yoruba", "\u1eb8 k\u00fa \u00e0\u00e1r\u1ecd\u0300"),
        ("inuktitut", "\u1403\u14c4\u1483\u144e\u1450\u1466"),
        ("cherokee", "\u13e3\u13b3\u13a9"),
        ("sinhala", "\u0dc3\u0dd2\u0d82\u0dc4\u0dbd"),
        ("gujarati", "\u0a97\u0ac1\u0a9c\u0ab0\u0abe\u0aa4\u0ac0"),
        ("gurmukhi", "\u0a2a\u0a70\u0a1c\u0a3e\u0a2c\u0a40"),
        ("kannada", "\u0c95\u0ca8\u0ccd\u0ca8\u0ca1"),
        ("malayalam", "\u0d2e\u0d32\u0d2f\u0d3e\u0d33\u0d02"),
        ("syriac", "\u0720\u072b\u0722\u0710"),
        ("thaana", "\u078b\u07a8\u0788\u07ac\u0780\u07a8"),
        ("nko", "\u07d2\u07de\u07cf"),
        ("javanese", "\ua9a7\ua9b1\ua997\ua9ae"),
        ("kawi", "\U00011f04\U00011f05\U00011f00 \U00011f12"),
        ("nag-mundari", "\U0001e4d0\U0001e4d1\U0001e4d2"),
        ("cjk-ext-b", "\U00020000\U00020001\U0002a6a5"),
        ("cjk-ext-h", "\U00031350\U00031351"),
        ("unicode-15-1", "\u2ffc\u31ef\U0002ebf0"),
        ("cuneiform", "\U00012000\U00012001"),
        ("hieroglyphs", "\U00013000\U00013001"),
        ("gothic", "\U00010330\U00010331"),
        ("deseret", "\U00010400\U00010428"),
        ("math-alnum", "\U0001d400\U0001d401\U0001d402 \U0001d465\U0001d466"),
        ("fullwidth", "\uff21\uff22\uff23\u3000\uff41\uff42\uff43"),
        ("halfwidth-kana", "\uff76\uff80\uff76\uff85"),
        ("zalgo", "Z\u0334\u0321\u031ba\u0337l\u0338g\u0335o\u0336"),
        ("mixed-scripts", "Hello \u041f\u0440\u0438\u0432\u0435\u0442 \u4f60\u597d \u0645\u0631\u062d\u0628\u0627 \u05e9\u05dc\u05d5\u05dd"),
]:
    case(cid, t)

# --- normalization (NFD input, compatibility characters) ---
for cid, t in [("nfd-cafe", "cafe\u0301"), ("nfd-greek", "\u03b1\u0301\u03b5\u0301"),
               ("nfd-vietnamese", "Vie\u0323\u0302t Nam"), ("nfd-korean", "\u1112\u1161\u11ab\u1100\u116e\u11a8"),
               ("nfd-mixed", "e\u0301 \u00e9 e\u0301\u0301 \u00e9\u0301"), ("angstrom", "\u212b \u2126"),
               ("cjk-compat", "\uf900\uf901\uf902"), ("ligatures", "\ufb01 \ufb02 \ufb00"),
               ("combining-start", "\u0301abc"), ("combining-only", "\u0301\u0302"),
               ("combining-stack", "e\u0301\u0302\u0303\u0304\u0305"), ("reorder", "a\u0323\u0307 a\u0307\u0323"),
               ("jamo-lv-t", "\uac00\u11a8")]:
    case(cid, t)

# --- emoji ---
for cid, t in [("thumbs-skin", "\U0001f44d\U0001f3fd"), ("family", "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 family"),
               ("rainbow-flag", "\U0001f3f3\ufe0f\u200d\U0001f308 flag"), ("flags", "\U0001f1fa\U0001f1f8\U0001f1ef\U0001f1f5\U0001f1ea\U0001f1fa"),
               ("heart-vs", "\u2764\ufe0f"), ("check", "\u2705 done"), ("smileys", "\U0001f642\U0001f643\U0001f600\U0001f603"),
               ("keycaps", "keycap 1\ufe0f\u20e3 #\ufe0f\u20e3"), ("emoji-14", "\U0001faf0\U0001faf6"),
               ("astronaut", "\U0001f9d1\U0001f3ff\u200d\U0001f680"), ("zwj-alone", "emoji\u200dzwj"),
               ("symbols", "\u00a9\u00ae\u2122 \u2603\u2605\u2660"), ("emoji-in-word", "text\U0001f600text"),
               ("emoji-run", "\U0001f600" * 5)]:
    case(cid, t)

# --- special and added tokens inside text ---
for cid, t in [
        ("chatml", "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"),
        ("think", "<think>\nreasoning\n</think>\n\nanswer"),
        ("endoftext", "<|endoftext|>"), ("endoftext-inside", "text<|endoftext|>more"),
        ("space-before-special", " <|im_start|>"), ("space-after-special", "<|im_start|> "),
        ("partial-special", "<|im_start"), ("upper-special", "<|IM_START|>"), ("special-twice", "<|im_end|><|im_end|>"),
        ("llama-header", "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"),
        ("llama-reserved", "<|reserved_special_token_5|>"),
        ("gemma-turns", "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"),
        ("bos-text", "<bos>"), ("pad-eos-unk", "<pad><eos><unk>"), ("s-tags", "</s><s>"),
        ("html-tags", "<b>bold</b> <i>it</i> <table><tr><td>x</td></tr></table> <h1>T</h1> <code>c</code>"),
        ("byte-token-text", "<0x41><0x0A>"), ("unused-text", "<unused0>"), ("marks-literal", "\u2581\u2581\u2581 literal marks"),
        ("mark-one", "\u2581"), ("mark-between", "a\u2581b"), ("marks35", "\u2581" * 35),
        ("fim", "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>"),
        ("tool-call", "<tool_call>\n{\"name\": \"x\"}\n</tool_call>"), ("python-tag", "<|python_tag|>"),
        ("image-token", "<start_of_image>"), ("special-adjacent", "<|im_start|><|im_start|>"),
        ("special-in-word", "a<|im_start|>b"), ("special-spaces", "  <|endoftext|>  x"),
        ("im-start-nl", "<|im_start|>\n\n"), ("special-then-digits", "<|im_end|>123"),
        ("gemma-newlines-tags", "<start_of_turn>\n\n\n<end_of_turn>\t\t"),
]:
    case(cid, t)

# --- long words (merge loop) ---
case("supercali", "supercalifragilisticexpialidocious")
case("pneumono", "pneumonoultramicroscopicsilicovolcanoconiosis")
case("a1000", "a" * 1000)
case("ab500", "ab" * 500)
letters = "".join("abcdefghijklmnopqrstuvwxyz"[(i * 7 + i // 26) % 26] for i in range(3000))
case("letters3000", letters)
case("x3000", "x" * 3000)
case("nihon300", "\u65e5\u672c" * 300)
case("hyphen-word", "-".join(["state", "of", "the", "art"] * 20))
case("german-compound", "Donaudampfschifffahrtselektrizit\u00e4tenhauptbetriebswerkbauunterbeamtengesellschaft")

# --- control characters and odd code points ---
for cid, t in [("nul", "\u0000"), ("ansi", "\u0001\u0007\u001b[31mred\u001b[0m"), ("del", "\u007f"),
               ("c1", "\u0080\u009f"), ("private-use", "\ue000\uf8ff"), ("nonchars", "\ufdd0\uffff"),
               ("max-cp", "\U0010ffff"), ("replacement", "\ufffd"), ("bidi", "\u200eab\u200f\u202a"),
               ("soft-hyphen", "co\u00adop"), ("word-joiner", "a\u2060b"), ("tag-chars", "\U000e0041\U000e007f"),
               ("unassigned", "\u0378\u0379"), ("unicode-16", "\u1c89\U0001ccd6")]:
    case(cid, t)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "tests", "tokenizer", "corpus.jsonl")
    with open(out, "w", encoding="utf-8") as f:
        for c in C:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    print("%s: %d cases" % (out, len(C)))


if __name__ == "__main__":
    main()
