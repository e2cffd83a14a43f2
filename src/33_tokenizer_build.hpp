// ==== Tokenizer construction: from a GGUF vocabulary or from a Hugging Face tokenizer.json ====
// GGUF (tokenizer.ggml.*): "gpt2" = byte-level BPE with merges, the pre-tokenizer named by
// tokenizer.ggml.pre; "llama" = SentencePiece BPE (scores, byte fallback, U+2581 for spaces, dummy prefix
// per tokenizer.ggml.add_space_prefix). tokenizer.json: the normalizer, pre_tokenizer, model, decoder and
// post_processor sections are read and mapped onto the same machinery; anything outside what is
// implemented is a clear `unsupported` error rather than a silently different tokenization.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// Token texts that end a generation turn (llama.cpp's list; Hugging Face generation_config files list
// the same tokens as eos_token_id). `</s>` is not here: gemma uses it as an ordinary HTML tag.
inline bool is_known_eog_text(std::string_view t) {
  static const char* const k[] = {
      "<|eot_id|>",
      "<|im_end|>",
      "<|end|>",
      "<|return|>",
      "<|call|>",
      "<end_of_turn>",
      "<|endoftext|>",
      "<|eom_id|>",
      "<EOT>",
      "_<EOT>",
      "<|end_of_text|>",
      "<end_of_utterance>",
      "<eos>",
      ("<\xEF\xBD\x9C"
       "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"),  // DeepSeek
  };
  for (const char* s : k)
    if (t == s) return true;
  return false;
}

// The split regexes of tokenizer.json files that have a hand-written scanner.
constexpr std::string_view kRegexLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kRegexQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kRegexQwen35 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kRegexO200k =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kRegexTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kRegexGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct TokenizerBuilder {
  Tokenizer t;
  std::string where;                                        // file name for messages
  std::vector<bool> merge_vocab;                            // tokens that BPE may produce (the model vocabulary)
  std::vector<std::pair<std::string, int32_t>> extra_trie;  // additional trie keys
  std::vector<size_t> spaced_user_defined;                  // SentencePiece user-defined tokens stored with spaces

  Error bad(const std::string& what) const { return make_error(Errc::bad_format, where + ": " + what); }
  Error unsupported(const std::string& what) const { return make_error(Errc::unsupported, where + ": " + what); }

  static PreStage stage(PreStage::Kind k) {
    PreStage s;
    s.kind = k;
    return s;
  }

  // ---- GGUF ----
  // Pre-tokenizer of a byte-level BPE vocabulary, by its llama.cpp name.
  Result<void> gguf_pre(const std::string& pre, bool& ignore_merges, bool& add_bos, bool& nfc) {
    auto in = [&](std::initializer_list<const char*> names) {
      for (const char* n : names)
        if (pre == n) return true;
      return false;
    };
    using K = PreStage::Kind;
    if (in({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
            "jina-v5-nano"})) {
      t.pre_.push_back(stage(K::llama3));
      ignore_merges = true;
      add_bos = true;
    } else if (in({"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"})) {
      t.pre_.push_back(stage(K::o200k));
    } else if (pre == "tekken") {
      PreStage s = stage(K::o200k);
      s.digit_max = 1;
      s.contractions = false;
      t.pre_.push_back(s);
      ignore_merges = true;
      add_bos = true;
    } else if (in({"dbrx", "smaug-bpe", "glm4", "chatglm-bpe"})) {
      t.pre_.push_back(stage(K::llama3));
    } else if (in({"qwen2", "deepseek-r1-qwen", "qwen35", "kormo", "f2llmv2", "stablelm2", "megrez", "hunyuan",
                   "solar-open", "grok-2"})) {
      PreStage s = stage(K::llama3);
      s.digit_max = 1;
      s.marks_in_words = pre == "qwen35";
      t.pre_.push_back(s);
      // Qwen2/2.5/3's tokenizer.json normalizes to NFC (llama.cpp does not; Hugging Face does). Qwen3.5's
      // does not (llama.cpp's qwen35 test vectors, made with Hugging Face, keep NFD text decomposed).
      nfc = pre == "qwen2";
    } else if (in({"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
                   "modern-bert", "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4", "jina-v1-en",
                   "jina-v2-code", "roberta-bpe"})) {
      t.pre_.push_back(stage(K::gpt2));
    } else if (in({"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"})) {
      t.pre_.push_back(stage(K::digits));
      t.pre_.push_back(stage(K::gpt2));
    } else if (pre.empty() || pre == "default") {
      // llama.cpp's fallback for byte-level vocabularies without a pre-tokenizer name
      t.pre_.push_back(stage(K::punct_runs));
      t.pre_.push_back(stage(K::gpt2));
      t.pre_.push_back(stage(K::number_runs));
      t.pre_.push_back(stage(K::ascii_digit3));
    } else {
      return unsupported("pre-tokenizer '" + printable(pre) +
                         "' (tokenizer.ggml.pre) is not supported; supported: llama-bpe and the llama-3 family, "
                         "qwen2, qwen35, gpt-4o/llama4, tekken, gpt-2 style, smollm/starcoder style, default");
    }
    return {};
  }

  Result<void> from_gguf(const ModelDesc& desc) {
    const VocabData& v = desc.vocab;
    where = desc.path;
    if (v.tokens.empty()) return unsupported("the file has no vocabulary (tokenizer.ggml.tokens)");
    if (v.tokens.size() >= (1u << 30)) return bad("the vocabulary is too large");
    size_t n = v.tokens.size();
    t.text_ = v.tokens;
    t.type_.assign(n, tok_normal);
    if (!v.types.empty()) {
      if (v.types.size() != n) return bad("tokenizer.ggml.token_type does not match the vocabulary size");
      for (size_t i = 0; i < n; i++) t.type_[i] = (v.types[i] >= 0 && v.types[i] <= 6) ? uint8_t(v.types[i]) : 0;
    }
    for (size_t i = 0; i < n; i++)  // as llama.cpp: an empty string is not a usable token text
      if (t.text_[i].empty()) t.text_[i] = "[EMPTY_" + std::to_string(i) + "]";
    bool add_bos = false, add_eos = false;
    if (v.model == "gpt2") {
      bool ignore_merges = false, nfc = false;
      if (auto r = gguf_pre(v.pre, ignore_merges, add_bos, nfc); !r) return r.error();
      t.byte_level_ = true;
      t.merge_mode_ = Tokenizer::Merge::by_rank;
      t.ignore_merges_ = ignore_merges;
      if (nfc) t.norm_.push_back(NormOp{NormOp::Kind::nfc, {}, {}, false});
      merge_vocab.assign(n, false);
      for (size_t i = 0; i < n; i++) merge_vocab[i] = t.type_[i] == tok_normal || t.type_[i] == tok_undefined;
      if (v.merges.empty()) return bad("a byte-level BPE vocabulary (gpt2) without tokenizer.ggml.merges");
      if (auto r = build_byte_level(v.merges, /*strict=*/false); !r) return r.error();
      for (size_t i = 0; i < n; i++) set_bytes_byte_level(i);
      t.unk_ = v.unk;
    } else if (v.model == "llama") {
      // SentencePiece BPE; llama.cpp's defaults where the metadata is silent
      t.byte_level_ = false;
      t.merge_mode_ = Tokenizer::Merge::by_score;
      t.byte_fallback_ = true;
      add_bos = true;
      bool prefix = v.add_space_prefix.value_or(true);
      t.norm_.push_back(NormOp{NormOp::Kind::replace, " ", "\xE2\x96\x81", false});
      if (prefix) t.norm_.push_back(NormOp{NormOp::Kind::prepend, {}, "\xE2\x96\x81", false});
      t.strip_spaces_ = prefix ? 1 : 0;
      std::vector<float> scores = v.scores;
      if (scores.size() != n) scores.assign(n, 0.0f);
      // merge priority: higher score first, equal scores equal priority (then leftmost)
      std::vector<int32_t> order(n);
      for (size_t i = 0; i < n; i++) order[i] = int32_t(i);
      std::stable_sort(order.begin(), order.end(),
                       [&](int32_t a, int32_t b) { return scores[size_t(a)] > scores[size_t(b)]; });
      t.score_prio_.assign(n, 0);
      int32_t prio = 0;
      for (size_t k = 0; k < n; k++) {
        if (k > 0 && scores[size_t(order[k])] != scores[size_t(order[k - 1])]) prio++;
        t.score_prio_[size_t(order[k])] = prio;
      }
      size_t bytes = 0;
      for (const auto& s : t.text_) bytes += s.size();
      t.index_.reserve(n, bytes);
      for (size_t i = 0; i < n; i++) t.index_.add(t.text_[i], int32_t(i));  // as llama.cpp: every token
      t.byte_tok_.fill(-1);
      for (int b = 0; b < 256; b++) {
        int32_t id = t.index_.find(strf("<0x%02X>", b));
        if (id < 0) id = t.index_.find(std::string(1, char(b)));
        t.byte_tok_[size_t(b)] = id;
      }
      for (size_t i = 0; i < n; i++) set_bytes_spm(i, /*replace_marks=*/true, /*byte_tokens=*/true);
      t.unk_ = v.unk >= 0 ? v.unk : (n > 0 ? 0 : -1);
      // convert_hf_to_gguf stores user-defined pieces (gemma's runs of U+2581) with spaces. llama.cpp matches
      // those on the raw text, so raw spaces never reach the merges; SentencePiece and Hugging Face match the
      // U+2581 spelling: literally in the raw text (an added token), and after spaces became U+2581 (by the
      // merges, which rank these runs first). Both are reproduced: the raw pass and a pass over the
      // normalized segment use the U+2581 spelling.
      for (size_t i = 0; i < n; i++)
        if (t.type_[i] == tok_user_defined && t.text_[i].find(' ') != std::string::npos) {
          std::string marked;
          for (char c : t.text_[i]) marked += c == ' ' ? std::string("\xE2\x96\x81") : std::string(1, c);
          extra_trie.emplace_back(marked, int32_t(i));
          t.norm_trie_.add(marked, int32_t(i));
          spaced_user_defined.push_back(i);
        }
    } else {
      return unsupported("tokenizer model '" + printable(v.model) +
                         "' (tokenizer.ggml.model) is not supported; supported: gpt2 (byte-level BPE), llama "
                         "(SentencePiece BPE)");
    }
    // special tokens and BOS/EOS
    auto valid = [&](int32_t id) { return id >= 0 && size_t(id) < n ? id : -1; };
    t.bos_ = valid(v.bos);
    t.eos_ = valid(v.eos);
    if (v.model == "llama") {  // llama.cpp's SentencePiece defaults
      if (!desc.find_meta("tokenizer.ggml.bos_token_id")) t.bos_ = valid(1);
      if (!desc.find_meta("tokenizer.ggml.eos_token_id")) t.eos_ = valid(2);
    }
    add_bos = v.add_bos.value_or(add_bos);
    add_eos = v.add_eos.value_or(add_eos);
    if (add_bos && t.bos_ >= 0) t.prefix_.push_back(t.bos_);
    if (add_eos && t.eos_ >= 0) t.suffix_.push_back(t.eos_);
    t.flags_.assign(n, 0);
    for (size_t i = 0; i < n; i++) {
      uint8_t ty = t.type_[i];
      if (ty == tok_control || ty == tok_unknown) t.flags_[i] |= Tokenizer::kSpecial;
      if (ty == tok_control || ty == tok_unknown || ty == tok_user_defined) t.flags_[i] |= Tokenizer::kMatchable;
    }
    for (size_t i : spaced_user_defined) t.flags_[i] &= uint8_t(~Tokenizer::kMatchable);  // U+2581 spelling only
    std::vector<int32_t> eog;
    for (int32_t id : {t.eos_, valid(v.eot), valid(v.eom)})
      if (id >= 0) eog.push_back(id);
    finish(eog);
    t.summary_ = strf("%s, %s%s, %zu tokens", v.model == "gpt2" ? "byte-level BPE" : "SentencePiece BPE",
                      v.model == "gpt2" ? "pre-tokenizer " : "",
                      v.model == "gpt2" ? (v.pre.empty() ? "default" : v.pre.c_str()) : "scores + byte fallback", n);
    return {};
  }

  // ---- shared pieces ----
  // Byte-level: merge-space strings are raw bytes; merges "a b" name vocabulary strings.
  Result<void> build_byte_level(const std::vector<std::string>& merges, bool strict) {
    size_t n = t.text_.size();
    size_t bytes = 0;
    for (const auto& s : t.text_) bytes += s.size();
    t.index_.reserve(n, bytes);
    std::string raw;
    for (size_t i = 0; i < n; i++)
      if (merge_vocab[i] && gpt2_unmap(t.text_[i], raw)) t.index_.add(raw, int32_t(i));
    t.byte_tok_.fill(-1);
    for (int b = 0; b < 256; b++) t.byte_tok_[size_t(b)] = t.index_.find(std::string(1, char(b)));
    return add_merges(merges, /*byte_level=*/true, strict);
  }

  // merges: "a b" (split at the first space after the first byte, as llama.cpp), ranked by position
  Result<void> add_merges(const std::vector<std::string>& merges, bool byte_level, bool strict) {
    t.merges_.reserve(merges.size());
    std::string a, b, joined;
    for (size_t r = 0; r < merges.size(); r++) {
      const std::string& m = merges[r];
      size_t sp = m.find(' ', 1);
      bool ok = sp != std::string::npos;
      if (ok && byte_level) {
        ok = gpt2_unmap(std::string_view(m).substr(0, sp), a) && gpt2_unmap(std::string_view(m).substr(sp + 1), b);
      } else if (ok) {
        a.assign(m, 0, sp);
        b.assign(m, sp + 1, std::string::npos);
      }
      int32_t ia = -1, ib = -1, im = -1;
      if (ok) {
        joined.assign(a);
        joined.append(b);
        ia = t.index_.find(a);
        ib = t.index_.find(b);
        im = t.index_.find(joined);
      }
      if (ia < 0 || ib < 0 || im < 0) {
        if (strict)
          return bad(
              strf("merge %zu ('%s') is not two vocabulary tokens separated by a space", r, printable(m).c_str()));
        continue;  // llama.cpp ignores such merges too
      }
      t.merges_.add(ia, ib, int32_t(r), im);
    }
    return {};
  }

  // Decoded bytes of a byte-level token: its GPT-2-mapped characters as bytes, or (when a character is
  // outside the mapping, e.g. an added token with a raw space) its text as it is.
  void set_bytes_byte_level(size_t i) {
    if (t.bytes_off_.empty()) t.bytes_off_.push_back(0);
    if (t.type_[i] != tok_unused) {
      std::string raw;
      if (gpt2_unmap(t.text_[i], raw))
        t.bytes_arena_ += raw;
      else
        t.bytes_arena_ += t.text_[i];
    }
    t.bytes_off_.push_back(uint32_t(t.bytes_arena_.size()));
  }

  // SentencePiece: U+2581 -> space, <0xXX> byte tokens -> that byte.
  void set_bytes_spm(size_t i, bool replace_marks, bool byte_tokens) {
    if (t.bytes_off_.empty()) t.bytes_off_.push_back(0);
    const std::string& s = t.text_[i];
    unsigned hex = 0;
    if (t.type_[i] == tok_unused) {
      // nothing
    } else if (byte_tokens && s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>' &&
               std::from_chars(s.data() + 3, s.data() + 5, hex, 16).ptr == s.data() + 5) {
      t.bytes_arena_ += char(hex);
    } else if (replace_marks) {
      for (size_t k = 0; k < s.size(); k++) {
        if (s.compare(k, 3, "\xE2\x96\x81") == 0) {
          t.bytes_arena_ += ' ';
          k += 2;
        } else {
          t.bytes_arena_ += s[k];
        }
      }
    } else {
      t.bytes_arena_ += s;
    }
    t.bytes_off_.push_back(uint32_t(t.bytes_arena_.size()));
  }

  // Trie of matchable tokens, EOG set, summary.
  void finish(std::vector<int32_t> eog) {
    size_t n = t.text_.size();
    for (size_t i = 0; i < n; i++)
      if (t.flags_[i] & Tokenizer::kMatchable) t.trie_.add(t.text_[i], int32_t(i));
    for (const auto& [text, id] : extra_trie) t.trie_.add(text, id);
    for (size_t i = 0; i < n; i++)
      if (t.type_[i] != tok_normal && t.type_[i] != tok_unused && t.type_[i] != tok_byte &&
          is_known_eog_text(t.text_[i]))
        eog.push_back(int32_t(i));
    std::sort(eog.begin(), eog.end());
    eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
    t.eog_ = eog;
    for (int32_t id : eog) t.flags_[size_t(id)] |= Tokenizer::kEog;
    for (size_t k = 0; k < t.pre_.size(); k++) {
      std::vector<uint32_t> cps;
      const std::string& lit = t.pre_[k].literal_text;
      for (size_t i = 0; i < lit.size();) cps.push_back(utf8_next(lit, i));
      t.pre_literals_.push_back(std::move(cps));
    }
  }

  // ---- tokenizer.json ----
  static int32_t json_id(const Json& j) { return (j.is_int && j.i >= 0 && j.i < (1 << 30)) ? int32_t(j.i) : -1; }

  Result<void> json_normalizer(const Json& j) {
    if (j.is_null()) return {};
    std::string_view type = j["type"].as_string();
    if (type == "Sequence") {
      for (const Json& sub : j["normalizers"].items)
        if (auto r = json_normalizer(sub); !r) return r;
      return {};
    }
    if (type == "NFC") {
      t.norm_.push_back(NormOp{NormOp::Kind::nfc, {}, {}, false});
      return {};
    }
    if (type == "Replace") {
      const Json& pat = j["pattern"];
      if (!pat["String"].is_string()) return unsupported("normalizer Replace with a regex pattern is not supported");
      t.norm_.push_back(NormOp{NormOp::Kind::replace, pat["String"].str, std::string(j["content"].as_string()), false});
      return {};
    }
    if (type == "Prepend") {
      t.norm_.push_back(NormOp{NormOp::Kind::prepend, {}, std::string(j["prepend"].as_string()), false});
      return {};
    }
    return unsupported("normalizer '" + printable(type) +
                       "' is not supported (supported: NFC, Replace, Prepend, Sequence)");
  }

  Result<void> json_pre(const Json& j, bool& byte_level, bool& first) {
    if (j.is_null()) return {};
    std::string_view type = j["type"].as_string();
    using K = PreStage::Kind;
    if (type == "Sequence") {
      for (const Json& sub : j["pretokenizers"].items)
        if (auto r = json_pre(sub, byte_level, first); !r) return r;
      return {};
    }
    bool was_first = first;
    first = false;
    if (type == "ByteLevel") {
      byte_level = true;
      if (j["add_prefix_space"].as_bool(false)) {
        if (!was_first) return unsupported("ByteLevel(add_prefix_space) after another pre-tokenizer is not supported");
        t.norm_.push_back(NormOp{NormOp::Kind::prepend_if_not, {}, " ", false});
      }
      if (j["use_regex"].as_bool(true)) t.pre_.push_back(stage(K::gpt2));
      return {};
    }
    if (type == "Digits") {
      PreStage s = stage(K::digits);
      s.individual = j["individual_digits"].as_bool(false);
      t.pre_.push_back(s);
      return {};
    }
    if (type == "Metaspace") {
      if (!was_first) return unsupported("Metaspace after another pre-tokenizer is not supported");
      std::string repl(j["replacement"].as_string("\xE2\x96\x81"));
      std::string_view scheme = j["prepend_scheme"].as_string(j["add_prefix_space"].as_bool(true) ? "always" : "never");
      t.norm_.push_back(NormOp{NormOp::Kind::replace, " ", repl, false});
      if (scheme != "never") t.norm_.push_back(NormOp{NormOp::Kind::prepend_if_not, {}, repl, scheme == "first"});
      if (j["split"].as_bool(true)) {
        PreStage s = stage(K::literal);
        s.literal_text = repl;
        s.behavior = PreStage::Behavior::merged_with_next;
        t.pre_.push_back(s);
      }
      return {};
    }
    if (type == "Split") {
      bool invert = j["invert"].as_bool(false);
      std::string_view beh = j["behavior"].as_string("Isolated");
      const Json& pat = j["pattern"];
      if (pat["Regex"].is_string()) {
        std::string_view re = pat["Regex"].str;
        // The scanned patterns match every character, so the pieces are exactly the matches: Isolated keeps
        // matches and (empty) gaps either way round, and Removed with invert (tiktoken conversions) drops the
        // empty gaps.
        if (!(beh == "Isolated" || (beh == "Removed" && invert)))
          return unsupported("regex Split with behavior '" + printable(beh) + "'" + (invert ? " and invert" : "") +
                             " is not supported");
        PreStage s = stage(K::llama3);
        if (re == kRegexLlama3) {
          s.digit_max = 3;
        } else if (re == kRegexQwen2) {
          s.digit_max = 1;
        } else if (re == kRegexQwen35) {
          s.digit_max = 1;
          s.marks_in_words = true;
        } else if (re == kRegexGpt2) {
          s = stage(K::gpt2);
        } else if (re == kRegexO200k) {
          s = stage(K::o200k);
        } else if (re == kRegexTekken) {
          s = stage(K::o200k);
          s.digit_max = 1;
          s.contractions = false;
        } else {
          return unsupported(
              "pre-tokenizer regex '" + printable(re, 200) +
              "' has no scanner (supported: the llama-3, qwen2, qwen3.5, o200k, tekken and gpt-2 patterns)");
        }
        t.pre_.push_back(s);
        return {};
      }
      if (pat["String"].is_string()) {
        if (invert) return unsupported("a string Split with invert: true is not supported");
        PreStage s = stage(K::literal);
        s.literal_text = pat["String"].str;
        if (beh == "Removed")
          s.behavior = PreStage::Behavior::removed;
        else if (beh == "Isolated")
          s.behavior = PreStage::Behavior::isolated;
        else if (beh == "MergedWithPrevious")
          s.behavior = PreStage::Behavior::merged_with_previous;
        else if (beh == "MergedWithNext")
          s.behavior = PreStage::Behavior::merged_with_next;
        else if (beh == "Contiguous")
          s.behavior = PreStage::Behavior::contiguous;
        else
          return unsupported("Split behavior '" + printable(beh) + "' is not supported");
        t.pre_.push_back(s);
        return {};
      }
      return bad("Split pre-tokenizer without a String or Regex pattern");
    }
    return unsupported("pre-tokenizer '" + printable(type) +
                       "' is not supported (supported: ByteLevel, Split, Digits, Metaspace, Sequence)");
  }

  // post_processor -> ids around the text (TemplateProcessing "single", Roberta/Bert cls/sep).
  Result<void> json_post(const Json& j, const std::function<int32_t(std::string_view)>& lookup) {
    if (j.is_null()) return {};
    std::string_view type = j["type"].as_string();
    if (type == "Sequence") {
      for (const Json& sub : j["processors"].items)
        if (auto r = json_post(sub, lookup); !r) return r;
      return {};
    }
    if (type == "ByteLevel") return {};
    if (type == "TemplateProcessing") {
      bool after = false;
      t.prefix_.clear();
      t.suffix_.clear();
      for (const Json& piece : j["single"].items) {
        if (piece.find("Sequence")) {
          after = true;
          continue;
        }
        const Json& sp = piece["SpecialToken"];
        std::string_view name = sp["id"].as_string();
        const Json& def = j["special_tokens"][name];
        std::vector<int32_t> ids;
        for (const Json& id : def["ids"].items) {
          int32_t v = json_id(id);
          if (v < 0 || size_t(v) >= t.text_.size())
            return bad("post_processor special token '" + printable(name) + "' has an invalid id");
          ids.push_back(v);
        }
        if (!def.is_object()) {
          int32_t v = lookup(name);
          if (v < 0) return bad("post_processor names an unknown special token '" + printable(name) + "'");
          ids.push_back(v);
        }
        auto& dst = after ? t.suffix_ : t.prefix_;
        dst.insert(dst.end(), ids.begin(), ids.end());
      }
      return {};
    }
    if (type == "RobertaProcessing" || type == "BertProcessing") {
      int32_t cls = json_id(j["cls"][1]), sep = json_id(j["sep"][1]);
      if (cls < 0 || sep < 0 || size_t(cls) >= t.text_.size() || size_t(sep) >= t.text_.size())
        return bad("post_processor cls/sep ids are invalid");
      t.prefix_ = {cls};
      t.suffix_ = {sep};
      return {};
    }
    return unsupported("post_processor '" + printable(type) + "' is not supported");
  }

  // decoder -> byte mapping and leading-space strip
  Result<void> json_decoder(const Json& j, bool& replace_marks, bool& byte_fallback, bool& byte_level) {
    if (j.is_null()) return {};
    std::string_view type = j["type"].as_string();
    if (type == "Sequence") {
      for (const Json& sub : j["decoders"].items)
        if (auto r = json_decoder(sub, replace_marks, byte_fallback, byte_level); !r) return r;
      return {};
    }
    if (type == "ByteLevel") {
      byte_level = true;
      return {};
    }
    if (type == "Replace") {
      if (j["pattern"]["String"].as_string() == "\xE2\x96\x81" && j["content"].as_string() == " ") {
        replace_marks = true;
        return {};
      }
      return unsupported("decoder Replace other than U+2581 -> space is not supported");
    }
    if (type == "ByteFallback") {
      byte_fallback = true;
      return {};
    }
    if (type == "Fuse") return {};
    if (type == "Strip") {
      if (j["content"].as_string() != " " || j["stop"].as_int(0) != 0)
        return unsupported("decoder Strip other than leading spaces is not supported");
      t.strip_spaces_ += static_cast<int>(std::clamp<int64_t>(j["start"].as_int(0), 0, 64));
      return {};
    }
    if (type == "Metaspace") {
      replace_marks = true;
      std::string_view scheme = j["prepend_scheme"].as_string(j["add_prefix_space"].as_bool(true) ? "always" : "never");
      if (scheme != "never") t.strip_spaces_ += 1;
      return {};
    }
    return unsupported("decoder '" + printable(type) + "' is not supported");
  }

  Result<void> from_json(const ModelDesc& desc) {
    where = desc.path + "/tokenizer.json";
    const Json& tj = desc.tokenizer_json;
    const Json& model = tj["model"];
    if (!model.is_object()) return bad("no \"model\" object");
    std::string_view mtype = model["type"].as_string("BPE");
    if (mtype != "BPE") return unsupported("tokenizer model '" + printable(mtype) + "' is not supported (only BPE)");
    if (!model["continuing_subword_prefix"].as_string().empty() || !model["end_of_word_suffix"].as_string().empty())
      return unsupported("BPE with continuing_subword_prefix / end_of_word_suffix is not supported");
    const Json& vocab = model["vocab"];
    if (!vocab.is_object()) return bad("model.vocab is not an object");
    const Json& added = tj["added_tokens"];
    int64_t max_id = -1;
    for (const auto& [tok, id] : vocab.members) {
      if (json_id(id) < 0) return bad(strf("token '%s' has an invalid id", printable(tok).c_str()));
      max_id = std::max<int64_t>(max_id, id.i);
    }
    for (const Json& a : added.items) {
      if (json_id(a["id"]) < 0 || !a["content"].is_string()) return bad("an added token has an invalid id or content");
      max_id = std::max<int64_t>(max_id, a["id"].i);
    }
    if (max_id < 0) return bad("the vocabulary is empty");
    size_t n = size_t(max_id + 1);
    t.text_.assign(n, std::string());
    t.type_.assign(n, tok_unused);
    merge_vocab.assign(n, false);
    t.byte_fallback_ = model["byte_fallback"].as_bool(false);
    for (const auto& [tok, id] : vocab.members) {
      auto k = size_t(id.i);
      t.text_[k] = tok;
      bool is_byte = t.byte_fallback_ && tok.size() == 6 && tok.compare(0, 3, "<0x") == 0 && tok[5] == '>';
      t.type_[k] = is_byte ? tok_byte : tok_normal;
      merge_vocab[k] = true;
    }
    t.flags_.assign(n, 0);
    for (const Json& a : added.items) {
      auto k = size_t(a["id"].i);
      t.text_[k] = a["content"].str;
      bool special = a["special"].as_bool(false);
      t.type_[k] = special ? tok_control : tok_user_defined;
      t.flags_[k] = uint8_t((special ? Tokenizer::kSpecial : 0) | Tokenizer::kMatchable |
                            (a["lstrip"].as_bool(false) ? Tokenizer::kLstrip : 0) |
                            (a["rstrip"].as_bool(false) ? Tokenizer::kRstrip : 0));
    }
    // pipeline
    if (auto r = json_normalizer(tj["normalizer"]); !r) return r.error();
    bool byte_level = false, first = true;
    if (auto r = json_pre(tj["pre_tokenizer"], byte_level, first); !r) return r.error();
    bool replace_marks = false, dec_byte_fallback = false, dec_byte_level = false;
    if (auto r = json_decoder(tj["decoder"], replace_marks, dec_byte_fallback, dec_byte_level); !r) return r.error();
    byte_level = byte_level || dec_byte_level;
    t.byte_level_ = byte_level;
    t.merge_mode_ = Tokenizer::Merge::by_rank;
    t.ignore_merges_ = model["ignore_merges"].as_bool(false);
    t.fuse_unk_ = model["fuse_unk"].as_bool(false);
    // merges: "a b" strings or ["a", "b"] pairs
    std::vector<std::string> merges;
    merges.reserve(model["merges"].items.size());
    for (const Json& m : model["merges"].items) {
      if (m.is_string())
        merges.push_back(m.str);
      else if (m.is_array() && m.items.size() == 2 && m.items[0].is_string() && m.items[1].is_string())
        merges.push_back(m.items[0].str + " " + m.items[1].str);
      else
        return bad("model.merges holds an entry that is neither \"a b\" nor [\"a\", \"b\"]");
    }
    if (byte_level) {
      if (auto r = build_byte_level(merges, /*strict=*/true); !r) return r.error();
      for (size_t i = 0; i < n; i++) set_bytes_byte_level(i);
    } else {
      size_t bytes = 0;
      for (const auto& s : t.text_) bytes += s.size();
      t.index_.reserve(n, bytes);
      for (size_t i = 0; i < n; i++)
        if (merge_vocab[i]) t.index_.add(t.text_[i], int32_t(i));
      if (auto r = add_merges(merges, /*byte_level=*/false, /*strict=*/true); !r) return r.error();
      t.byte_tok_.fill(-1);
      for (int b = 0; b < 256; b++) t.byte_tok_[size_t(b)] = t.index_.find(strf("<0x%02X>", b));
      for (size_t i = 0; i < n; i++) set_bytes_spm(i, replace_marks, dec_byte_fallback);
    }
    auto lookup = [&](std::string_view s) -> int32_t {
      if (s.empty()) return -1;
      for (const Json& a : added.items)
        if (a["content"].as_string() == s) return json_id(a["id"]);
      if (const Json* id = vocab.find(s)) return json_id(*id);
      return -1;
    };
    std::string_view unk = model["unk_token"].as_string();
    t.unk_ = lookup(unk);
    if (auto r = json_post(tj["post_processor"], lookup); !r) return r.error();
    // bos / eos named by tokenizer_config.json (else by config.json / generation_config.json ids)
    const Json& tc = desc.tokenizer_config;
    auto config_token = [&](const char* key) {
      const Json& e = tc[key];
      return lookup(e.is_object() ? e["content"].as_string() : e.as_string());
    };
    auto valid = [&](int64_t id) { return id >= 0 && size_t(id) < n ? int32_t(id) : -1; };
    t.bos_ = config_token("bos_token");
    t.eos_ = config_token("eos_token");
    if (t.bos_ < 0)
      t.bos_ = valid(desc.generation_config["bos_token_id"].as_int(desc.config["bos_token_id"].as_int(-1)));
    std::vector<int32_t> eog;
    const Json& gen_eos = desc.generation_config["eos_token_id"];
    if (gen_eos.is_array()) {
      for (const Json& e : gen_eos.items)
        if (valid(e.as_int(-1)) >= 0) eog.push_back(valid(e.as_int(-1)));
    } else if (valid(gen_eos.as_int(-1)) >= 0) {
      eog.push_back(valid(gen_eos.as_int(-1)));
    }
    if (t.eos_ < 0) {
      const Json& ce = desc.config["eos_token_id"];
      t.eos_ = ce.is_array() ? valid(ce[0].as_int(-1)) : valid(ce.as_int(-1));
      if (t.eos_ < 0 && !eog.empty()) t.eos_ = eog[0];
    }
    if (t.eos_ >= 0) eog.push_back(t.eos_);
    for (size_t i = 0; i < n; i++)
      if (t.text_[i].empty() && t.type_[i] == tok_unused) t.text_[i] = "[PAD" + std::to_string(i) + "]";
    finish(eog);
    t.summary_ = strf("%s BPE from tokenizer.json, %zu tokens", byte_level ? "byte-level" : "SentencePiece-style", n);
    return {};
  }
};

// A description holding only the tokenizer files of a directory (tokenizer.json, tokenizer_config.json,
// generation_config.json, config.json when present): lets `tokenize` work on a tokenizer-only folder.
inline Result<std::shared_ptr<ModelDesc>> tokenizer_description(const std::string& dir) {
  auto m = std::make_shared<ModelDesc>();
  m->path = dir;
  m->format = FileFormat::tokenizer_json;
  m->name = base_name(dir);
  if (!file_exists(path_join(dir, "tokenizer.json")))
    return make_error(Errc::io, dir + ": no tokenizer.json in this directory");
  for (auto [file, slot] : {std::pair<const char*, Json*>{"tokenizer.json", &m->tokenizer_json},
                            {"tokenizer_config.json", &m->tokenizer_config},
                            {"generation_config.json", &m->generation_config},
                            {"config.json", &m->config}}) {
    std::string p = path_join(dir, file);
    auto text = read_optional_file(p);
    if (!text) return text.error();
    if (!*text) continue;
    auto j = json_parse(**text, p);
    if (!j) return j.error();
    if (!j->is_object()) return make_error(Errc::bad_format, p + ": not a JSON object");
    *slot = std::move(*j);
  }
  return m;
}

inline Result<std::shared_ptr<const Tokenizer>> Tokenizer::build(const ModelDesc& desc) {
  TokenizerBuilder b;
  if (desc.tokenizer_json.is_object()) {
    if (auto r = b.from_json(desc); !r) return r.error();
  } else if (desc.format == FileFormat::gguf) {
    if (auto r = b.from_gguf(desc); !r) return r.error();
  } else {
    return make_error(Errc::unsupported, desc.path + ": no tokenizer (no tokenizer.json beside the weights)");
  }
  return std::shared_ptr<const Tokenizer>(std::make_shared<Tokenizer>(std::move(b.t)));
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
