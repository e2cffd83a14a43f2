// Generator of the malformed-file corpus (tests/corpus/malformed/) and of the fuzz seeds of the file
// readers (tests/fuzz/corpus/{gguf,safetensors,json}/). The committed files must equal what this
// produces (test_corpus.cpp checks it; `make corpus` rewrites them).
#pragma once
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "common.hpp"

namespace corpus {

using Bytes = std::vector<uint8_t>;

struct File {
  std::string path;  // relative to the folder the set belongs to
  Bytes bytes;
};

// A malformed model: `name` is a file or a directory directly under tests/corpus/malformed/;
// loading it must fail with a message that names it and contains `expect`.
struct Case {
  std::string name;
  std::string expect;
};

struct Set {
  std::vector<File> files;
  std::vector<Case> cases;
  void file(const std::string& path, Bytes b) { files.push_back({path, std::move(b)}); }
  void file(const std::string& path, const std::string& text) {
    files.push_back({path, Bytes(text.begin(), text.end())});
  }
  void add(const std::string& name, Bytes b, const std::string& expect) {
    file(name, std::move(b));
    cases.push_back({name, expect});
  }
  void add(const std::string& name, const std::string& text, const std::string& expect) {
    add(name, Bytes(text.begin(), text.end()), expect);
  }
};

inline Bytes le32(uint32_t v) {
  Bytes b(4);
  std::memcpy(b.data(), &v, 4);
  return b;
}
inline Bytes le64(uint64_t v) {
  Bytes b(8);
  std::memcpy(b.data(), &v, 8);
  return b;
}
inline Bytes gstr(const std::string& s) {
  Bytes b = le64(s.size());
  b.insert(b.end(), s.begin(), s.end());
  return b;
}
inline Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}
inline void patch32(Bytes& b, size_t at, uint32_t v) {
  std::memcpy(b.data() + at, &v, 4);
}
inline void patch64(Bytes& b, size_t at, uint64_t v) {
  std::memcpy(b.data() + at, &v, 8);
}
inline Bytes head(const Bytes& b, size_t n) {
  return Bytes(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
}

inline std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t k = 0; k < n; k++) v[k] = static_cast<float>(k % 17) * 0.125f - 1.0f;
  return v;
}

// ---- GGUF ----

// Valid metadata of a tiny llama (4-token SentencePiece-style vocabulary).
inline test::GgufWriter gguf_meta(float rms_eps = 1e-5f) {
  test::GgufWriter w;
  w.kv_str("general.architecture", "llama").kv_str("general.name", "corpus");
  w.kv_u32("llama.block_count", 1).kv_u32("llama.embedding_length", 32).kv_u32("llama.attention.head_count", 4);
  w.kv_u32("llama.attention.head_count_kv", 2).kv_u32("llama.context_length", 256);
  w.kv_u32("llama.feed_forward_length", 64).kv_f32("llama.attention.layer_norm_rms_epsilon", rms_eps);
  w.kv_str("tokenizer.ggml.model", "llama").kv_strs("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a"});
  w.kv_f32s("tokenizer.ggml.scores", {0, 0, 0, -1}).kv_i32s("tokenizer.ggml.token_type", {2, 3, 3, 1});
  w.kv_u32("tokenizer.ggml.bos_token_id", 1).kv_u32("tokenizer.ggml.eos_token_id", 2);
  return w;
}

inline Bytes q8_0_rows(size_t rows, size_t row_len) {
  Bytes b;
  for (size_t r = 0; r < rows; r++)
    for (size_t blk = 0; blk < row_len / 32; blk++) {
      b.push_back(0x00);
      b.push_back(0x2C);  // fp16 0.0625
      for (int k = 0; k < 32; k++)
        b.push_back(static_cast<uint8_t>(static_cast<int8_t>((k * 7 + static_cast<int>(r)) % 31 - 15)));
    }
  return b;
}

inline void gguf_tensors(test::GgufWriter& w) {
  w.tensor_f32("token_embd.weight", {32, 4}, ramp(128));
  w.tensor_f32("output_norm.weight", {32}, std::vector<float>(32, 1.0f));
  w.tensor("blk.0.attn_q.weight", {32, 32}, 8, q8_0_rows(32, 32));
}

inline Bytes gguf_base(test::GgufWriter::Layout* layout = nullptr, uint32_t version = 3) {
  test::GgufWriter w = gguf_meta();
  gguf_tensors(w);
  return w.build(version, 32, layout);
}

// The valid metadata plus one extra entry (and the valid tensors).
template <class F>
Bytes gguf_with_meta(F&& extra) {
  test::GgufWriter w = gguf_meta();
  extra(w);
  gguf_tensors(w);
  return w.build();
}

// The valid metadata and a tensor table written by `tensors`; `data_bytes` of zeros as data.
template <class F>
Bytes gguf_with_tensors(F&& tensors, size_t data_bytes = 256) {
  test::GgufWriter w = gguf_meta();
  tensors(w);
  Bytes b = w.build();
  b.resize(b.size() + data_bytes, 0);
  return b;
}

inline Bytes nested_array(int depth) {
  Bytes body = test::GgufWriter::array_body(0, 1, {7});
  for (int k = 0; k < depth - 1; k++) body = test::GgufWriter::array_body(9, 1, body);
  return body;
}

inline void gguf_cases(Set& s) {
  test::GgufWriter::Layout lay;
  const Bytes base = gguf_base(&lay);
  // -- magic, version, header
  s.add("gguf-empty.gguf", Bytes(), "too small to be a GGUF file (0 bytes)");
  s.add("gguf-trunc-magic.gguf", head(base, 3), "too small to be a GGUF file (3 bytes)");
  {
    Bytes b = base;
    std::memcpy(b.data(), "GGML", 4);
    s.add("gguf-bad-magic.gguf", b, "not a GGUF file (magic 'GGML', expected 'GGUF')");
  }
  {
    Bytes b = base;
    b[0] = 0x89;
    s.add("gguf-binary-magic.gguf", b, "not a GGUF file (magic '\\x89GUF'");
  }
  for (uint32_t v : {0u, 1u, 4u, 0x03000000u}) {
    Bytes b = base;
    patch32(b, 4, v);
    std::string expect = v == 1             ? "GGUF version 1 is not supported"
                         : v == 0x03000000u ? "GGUF version 0x03000000: a big-endian file?"
                                            : "unsupported GGUF version " + std::to_string(v);
    s.add(v == 0x03000000u ? "gguf-version-big-endian.gguf" : "gguf-version-" + std::to_string(v) + ".gguf", b, expect);
  }
  // -- truncated at (and inside) each section
  s.add("gguf-trunc-version.gguf", head(base, 6), "truncated in the header (version) at offset 4");
  s.add("gguf-trunc-tensor-count.gguf", head(base, 12), "truncated in the header (tensor count)");
  s.add("gguf-trunc-metadata-count.gguf", head(base, 20), "truncated in the header (metadata count)");
  s.add("gguf-trunc-after-header.gguf", head(base, 24), "declares 3 tensors and 15 metadata entries, but only 0 bytes");
  s.add("gguf-trunc-first-key.gguf", head(base, lay.metadata + 12),
        "declares 3 tensors and 15 metadata entries, but only 12 bytes");
  s.add("gguf-trunc-in-tokens.gguf", head(base, lay.kv_ends[10] - 1),
        "metadata key 'tokenizer.ggml.tokens': array string length 1 runs past the end of the file");
  s.add("gguf-trunc-value.gguf", head(base, lay.kv_ends[14] - 2),
        "truncated in metadata key 'tokenizer.ggml.eos_token_id' (value)");
  s.add("gguf-trunc-after-metadata.gguf", head(base, lay.tensor_infos),
        "truncated in tensor info 1 of 3 (name) at offset " + std::to_string(lay.tensor_infos));
  s.add("gguf-trunc-tensor-dims.gguf", head(base, lay.tensor_infos + 8 + 17 + 4 + 3),
        "truncated in tensor 'token_embd.weight' (dimensions)");
  s.add("gguf-trunc-tensor-offset.gguf", head(base, lay.info_ends[2] - 4),
        "truncated in tensor 'blk.0.attn_q.weight' (offset)");
  s.add("gguf-trunc-at-data.gguf", head(base, lay.data),
        "tensor 'token_embd.weight' data [offset " + std::to_string(lay.data) + ", size 512 B] runs past the end");
  s.add("gguf-trunc-in-data.gguf", head(base, base.size() - 100), "tensor 'blk.0.attn_q.weight' data");
  // -- counts and lengths the file cannot hold
  {
    Bytes b = base;
    patch64(b, 8, 1ull << 40);
    s.add("gguf-absurd-tensor-count.gguf", b, "declares 1099511627776 tensors, more than LLMINFER_MAX_TENSORS");
  }
  {
    Bytes b = base;
    patch64(b, 16, 1ull << 19);
    s.add("gguf-absurd-metadata-count.gguf", b, "declares 3 tensors and 524288 metadata entries, but only");
  }
  {
    Bytes b = base;
    patch64(b, 16, ~0ull);
    s.add("gguf-metadata-count-max.gguf", b, "declares 18446744073709551615 metadata entries, more than");
  }
  s.add("gguf-key-length-past-eof.gguf", gguf_with_meta([](test::GgufWriter& w) { w.kv_raw(le64(1ull << 60)); }),
        "metadata entry 16 of 16: key length 1152921504606846976 runs past the end of the file");
  s.add("gguf-string-length-past-eof.gguf", gguf_with_meta([](test::GgufWriter& w) {
          w.kv_raw(cat({gstr("general.url"), le32(8), le64(1ull << 40)}));
        }),
        "metadata key 'general.url': string value length 1099511627776 runs past the end");
  s.add("gguf-array-length-overflow.gguf", gguf_with_meta([](test::GgufWriter& w) {
          w.kv_raw(cat({gstr("x.arr"), le32(9), le32(4), le64(1ull << 62)}));
        }),
        "metadata key 'x.arr': array of 4611686018427387904 u32 runs past the end");
  s.add("gguf-string-array-past-eof.gguf", gguf_with_meta([](test::GgufWriter& w) {
          w.kv_raw(cat({gstr("x.strs"), le32(9), le32(8), le64(1ull << 40)}));
        }),
        "metadata key 'x.strs': array of 1099511627776 strings runs past the end");
  s.add("gguf-array-nested-too-deep.gguf",
        gguf_with_meta([](test::GgufWriter& w) { w.kv_array("x.deep", nested_array(9)); }),
        "metadata key 'x.deep': arrays nested more than 8 deep");
  s.add("gguf-unknown-value-type.gguf", gguf_with_meta([](test::GgufWriter& w) {
          w.kv_raw(cat({gstr("x.what"), le32(13), le32(0)}));
        }),
        "metadata key 'x.what' has unknown value type 13");
  s.add("gguf-unknown-array-type.gguf", gguf_with_meta([](test::GgufWriter& w) {
          w.kv_raw(cat({gstr("x.arr"), le32(9), le32(77), le64(1)}));
        }),
        "metadata key 'x.arr': array has unknown element type 77");
  // -- keys
  s.add("gguf-empty-key.gguf", gguf_with_meta([](test::GgufWriter& w) { w.kv_u32("", 1); }),
        "metadata entry 16 of 16 has an empty key");
  s.add("gguf-key-invalid-utf8.gguf", gguf_with_meta([](test::GgufWriter& w) { w.kv_u32("general.\xC0\xAFx", 1); }),
        "metadata entry 16 of 16: key is not valid UTF-8 ('general.\\xC0\\xAFx')");
  s.add("gguf-duplicate-key.gguf", gguf_with_meta([](test::GgufWriter& w) { w.kv_str("general.name", "again"); }),
        "duplicate metadata key 'general.name'");
  // -- general.alignment
  s.add("gguf-alignment-u64.gguf", gguf_with_meta([](test::GgufWriter& w) { w.kv_u64("general.alignment", 32); }),
        "general.alignment has type u64, expected u32");
  s.add("gguf-alignment-zero.gguf", gguf_with_meta([](test::GgufWriter& w) { w.kv_u32("general.alignment", 0); }),
        "general.alignment 0 is not a power of two");
  s.add("gguf-alignment-48.gguf", gguf_with_meta([](test::GgufWriter& w) { w.kv_u32("general.alignment", 48); }),
        "general.alignment 48 is not a power of two");
  s.add("gguf-alignment-huge.gguf",
        gguf_with_meta([](test::GgufWriter& w) { w.kv_u32("general.alignment", 1u << 31); }),
        "the data section (offset 2147483648, alignment 2147483648) starts past the end of the file");
  // -- the tensor table
  s.add("gguf-n-dims-5.gguf", gguf_with_tensors([](test::GgufWriter& w) {
          w.tensor_info("t5", {2, 2, 2, 2, 2}, 0, 0);
        }),
        "tensor 't5' has 5 dimensions (at most 4)");
  {
    test::GgufWriter::Layout l;
    Bytes b = gguf_base(&l);
    patch32(b, l.tensor_infos + 8 + 17, 0xFFFFFFFFu);
    s.add("gguf-n-dims-max.gguf", b, "tensor 'token_embd.weight' has 4294967295 dimensions (at most 4)");
  }
  s.add("gguf-dim-negative.gguf", gguf_with_tensors([](test::GgufWriter& w) {
          w.tensor_info("neg", {4, ~0ull}, 0, 0);
        }),
        "tensor 'neg': dimension 1 is negative (-1)");
  s.add("gguf-dims-overflow.gguf", gguf_with_tensors([](test::GgufWriter& w) {
          w.tensor_info("big", {1ull << 32, 1ull << 32}, 0, 0);
        }),
        "tensor 'big': dimensions [4294967296, 4294967296, 1, 1] overflow");
  s.add("gguf-rows-overflow.gguf", gguf_with_tensors([](test::GgufWriter& w) {
          w.tensor_info("rows", {0, 1ull << 40, 1ull << 40}, 0, 0);
        }),
        "tensor 'rows': dimensions [0, 1099511627776, 1099511627776, 1] overflow");
  s.add("gguf-dims-overflow-before-zero.gguf",  // found by fuzz_gguf: ne0*ne1 overflows before the 0
        gguf_with_tensors([](test::GgufWriter& w) {
          w.tensor_info("z", {1ull << 40, 1ull << 32, 0}, 0, 0);
        }),
        "tensor 'z': dimensions [1099511627776, 4294967296, 0, 1] overflow");
  s.add("gguf-size-overflow.gguf",
        gguf_with_tensors([](test::GgufWriter& w) { w.tensor_info("f64s", {1ull << 62}, 28, 0); }),
        "tensor 'f64s': size overflows");
  s.add("gguf-type-unknown.gguf", gguf_with_tensors([](test::GgufWriter& w) { w.tensor_info("t", {32}, 99, 0); }),
        "tensor 't' has ggml type id 99, which is not a tensor type");
  s.add("gguf-type-removed.gguf", gguf_with_tensors([](test::GgufWriter& w) { w.tensor_info("t", {32}, 4, 0); }),
        "tensor 't' has ggml type id 4, which is not a tensor type");
  s.add("gguf-row-not-whole-blocks.gguf", gguf_with_tensors([](test::GgufWriter& w) {
          w.tensor_info("q", {33, 2}, 8, 0);
        }),
        "tensor 'q': row length 33 is not a multiple of the q8_0 block size 32");
  s.add("gguf-tensor-unaligned.gguf", gguf_with_tensors([](test::GgufWriter& w) { w.tensor_info("u", {8}, 0, 4); }),
        "tensor 'u' data offset 4 is not aligned to 32 bytes");
  s.add("gguf-tensors-overlap.gguf",
        gguf_with_tensors([](test::GgufWriter& w) { w.tensor_info("a", {16}, 0, 0).tensor_info("b", {16}, 0, 32); }),
        "tensors 'a' and 'b' overlap in the data section");
  s.add("gguf-tensor-past-eof.gguf", gguf_with_tensors([](test::GgufWriter& w) {
          w.tensor_info("far", {64, 64}, 0, 1u << 20);
        }),
        "tensor 'far' data [offset ");
  s.add("gguf-tensor-offset-overflow.gguf",
        gguf_with_tensors([](test::GgufWriter& w) { w.tensor_info("wrap", {8}, 0, ~0ull - 31); }),
        "tensor 'wrap' data [offset data section + 18446744073709551584, size 32 B] runs past the end");
  s.add("gguf-tensor-duplicate.gguf",
        gguf_with_tensors([](test::GgufWriter& w) { w.tensor_info("d", {8}, 0, 0).tensor_info("d", {8}, 0, 32); }),
        "duplicate tensor name 'd'");
  s.add("gguf-tensor-empty-name.gguf", gguf_with_tensors([](test::GgufWriter& w) { w.tensor_info("", {8}, 0, 0); }),
        "tensor info 1 of 1 has an empty name");
  s.add("gguf-tensor-name-invalid-utf8.gguf",
        gguf_with_tensors([](test::GgufWriter& w) { w.tensor_info("blk.\xED\xA0\x80.w", {8}, 0, 0); }),
        "tensor info 1 of 1: name is not valid UTF-8 ('blk.\\xED\\xA0\\x80.w')");
  // -- hyper-parameters the forward pass uses as floats must be finite (issue 16)
  {
    test::GgufWriter w = gguf_meta(INFINITY);
    gguf_tensors(w);
    s.add("gguf-rms-eps-infinite.gguf", w.build(),
          "metadata 'llama.attention.layer_norm_rms_epsilon' is inf; it must be a finite non-negative number");
  }
  s.add("gguf-rope-base-infinite.gguf",
        gguf_with_meta([](test::GgufWriter& w) { w.kv_f32("llama.rope.freq_base", INFINITY); }),
        "metadata 'llama.rope.freq_base' is inf; it must be a finite positive number");
  s.add("gguf-rope-base-nan.gguf", gguf_with_meta([](test::GgufWriter& w) { w.kv_f32("llama.rope.freq_base", NAN); }),
        "metadata 'llama.rope.freq_base' is nan; it must be a finite positive number");
  s.add("gguf-rope-factor-too-big.gguf",
        gguf_with_meta([](test::GgufWriter& w) { w.kv_f64("llama.rope.scaling.factor", 1e300); }),
        "metadata 'llama.rope.scaling.factor' is 1e+300; it must be a finite non-negative number");
  // -- well-formed GGUF, inconsistent vocabulary
  auto vocab = [](auto&& edit) {
    test::GgufWriter w;
    w.kv_str("general.architecture", "llama").kv_str("tokenizer.ggml.model", "llama");
    edit(w);
    gguf_tensors(w);
    return w.build();
  };
  s.add("gguf-vocab-tokens-not-strings.gguf", vocab([](test::GgufWriter& w) {
          w.kv_i32s("tokenizer.ggml.tokens", {1, 2, 3});
        }),
        "tokenizer.ggml.tokens is not an array of strings");
  s.add("gguf-vocab-scores-short.gguf", vocab([](test::GgufWriter& w) {
          w.kv_strs("tokenizer.ggml.tokens", {"a", "b", "c", "d"}).kv_f32s("tokenizer.ggml.scores", {0, 0, 0});
        }),
        "tokenizer.ggml.scores has 3 entries but the vocabulary has 4 tokens");
  s.add("gguf-vocab-types-not-numbers.gguf", vocab([](test::GgufWriter& w) {
          w.kv_strs("tokenizer.ggml.tokens", {"a", "b"}).kv_strs("tokenizer.ggml.token_type", {"1", "1"});
        }),
        "tokenizer.ggml.token_type is not a numeric array");
  s.add("gguf-vocab-merges-not-strings.gguf", vocab([](test::GgufWriter& w) {
          w.kv_strs("tokenizer.ggml.tokens", {"a", "b"}).kv_f32s("tokenizer.ggml.merges", {1});
        }),
        "tokenizer.ggml.merges is not an array of strings");
}

// ---- safetensors ----

inline std::string llama_config(const std::string& extra = "") {
  return "{\"model_type\": \"llama\", \"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 32, "
         "\"intermediate_size\": 64, \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
         "\"max_position_embeddings\": 256, \"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0, \"vocab_size\": 4, "
         "\"tie_word_embeddings\": true, \"bos_token_id\": 1, \"eos_token_id\": 2" +
         extra + "}\n";
}

inline test::SafetensorsWriter st_base_writer() {
  test::SafetensorsWriter w;
  w.metadata("format", "pt");
  w.tensor_f32("model.embed_tokens.weight", {4, 32}, ramp(128));
  w.tensor_f32("model.norm.weight", {32}, std::vector<float>(32, 1.0f));
  return w;
}
inline Bytes st_base() {
  return st_base_writer().build();
}

// A header with one tensor entry `entry` (the JSON object text) over `data_bytes` bytes of data.
inline Bytes st_one(const std::string& entry, size_t data_bytes = 64) {
  return test::SafetensorsWriter::image("{\"model.norm.weight\": " + entry + "}", Bytes(data_bytes, 0));
}

inline std::string deep_json(int depth) {
  return "{\"a\": " + std::string(static_cast<size_t>(depth), '[') + std::string(static_cast<size_t>(depth), ']') + "}";
}

inline void safetensors_cases(Set& s) {
  s.file("config.json", llama_config());  // beside the .safetensors files below (a valid one)
  const Bytes base = st_base();
  s.add("st-too-small.safetensors", le32(16), "too small to be a safetensors file (4 bytes)");
  s.add("st-header-only-length.safetensors", le64(16), "header length 16 runs past the end of the file (8 B)");
  {
    Bytes b = base;
    patch64(b, 0, 1ull << 62);
    s.add("st-header-length-huge.safetensors", b, "header length 4611686018427387904 is larger than the 100 MiB limit");
  }
  {
    Bytes b = base;
    patch64(b, 0, b.size());
    s.add("st-header-length-past-eof.safetensors", b, "runs past the end of the file");
  }
  s.add("st-trunc-header.safetensors", head(base, 40), "runs past the end of the file");
  s.add("st-trunc-data.safetensors", head(base, base.size() - 10), "tensor 'model.norm.weight' data [offset ");
  s.add("st-header-not-object.safetensors", test::SafetensorsWriter::image("[1, 2]", {}),
        "the header is not a JSON object");
  s.add("st-header-bad-json.safetensors", test::SafetensorsWriter::image("{\"a\": {\"dtype\": }", {}),
        "header: invalid JSON at line 1, column 17");
  s.add("st-header-invalid-utf8.safetensors", test::SafetensorsWriter::image("{\"w\xFF\": 1}", {}),
        "invalid UTF-8 in a string");
  s.add("st-header-deep.safetensors", test::SafetensorsWriter::image(deep_json(100000), {}), "nested too deeply");
  s.add("st-entry-not-object.safetensors", st_one("[1]"), "tensor 'model.norm.weight': entry is not an object");
  s.add("st-missing-dtype.safetensors", st_one("{\"shape\": [16], \"data_offsets\": [0, 64]}"),
        "tensor 'model.norm.weight': missing dtype");
  s.add("st-unknown-dtype.safetensors", st_one("{\"dtype\": \"F7\", \"shape\": [16], \"data_offsets\": [0, 64]}"),
        "tensor 'model.norm.weight': unknown dtype 'F7'");
  s.add("st-missing-shape.safetensors", st_one("{\"dtype\": \"F32\", \"data_offsets\": [0, 64]}"),
        "tensor 'model.norm.weight': missing shape");
  s.add("st-shape-negative.safetensors", st_one("{\"dtype\": \"F32\", \"shape\": [-16], \"data_offsets\": [0, 64]}"),
        "shape holds a non-integer or negative value");
  s.add("st-shape-fraction.safetensors", st_one("{\"dtype\": \"F32\", \"shape\": [16.5], \"data_offsets\": [0, 64]}"),
        "shape holds a non-integer or negative value");
  s.add("st-shape-overflow.safetensors",
        st_one("{\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], \"data_offsets\": [0, 64]}"),
        "tensor 'model.norm.weight': shape overflows");
  s.add("st-shape-overflow-after-zero.safetensors",
        st_one("{\"dtype\": \"F32\", \"shape\": [0, 4294967296, 4294967296], \"data_offsets\": [0, 0]}"),
        "tensor 'model.norm.weight': shape overflows");
  s.add("st-shape-9-dims.safetensors",
        st_one("{\"dtype\": \"U8\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 1]}"),
        "tensor 'model.norm.weight': 9 dimensions (at most 8)");
  s.add("st-shape-5-dims.safetensors", st_one("{\"dtype\": \"U8\", \"shape\": [1,1,1,1,2], \"data_offsets\": [0, 2]}"),
        "tensor 'model.norm.weight' has 5 dimensions (at most 4)");
  s.add("st-offsets-reversed.safetensors", st_one("{\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [64, 0]}"),
        "data_offsets must be [begin, end] with 0 <= begin <= end");
  s.add("st-offsets-one-number.safetensors", st_one("{\"dtype\": \"F32\", \"shape\": [16], \"data_offsets\": [0]}"),
        "data_offsets must be [begin, end]");
  s.add("st-offsets-lie-size.safetensors", st_one("{\"dtype\": \"F32\", \"shape\": [16], \"data_offsets\": [0, 32]}"),
        "data_offsets span 32 bytes but the shape and dtype need 64");
  s.add("st-offsets-past-eof.safetensors",
        st_one("{\"dtype\": \"F32\", \"shape\": [16], \"data_offsets\": [4096, 4160]}"),
        "tensor 'model.norm.weight' data [offset ");
  s.add("st-offsets-huge.safetensors",
        st_one("{\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [9223372036854775806, 9223372036854775807]}"),
        "runs past the end of the file");
  s.add("st-overlap.safetensors",
        test::SafetensorsWriter::image(
            "{\"model.norm.weight\": {\"dtype\": \"F32\", \"shape\": [16], \"data_offsets\": "
            "[0, 64]}, \"model.embed_tokens.weight\": {\"dtype\": \"F32\", \"shape\": [1, 16], "
            "\"data_offsets\": [32, 96]}}",
            Bytes(96, 0)),
        "overlap");
  s.add(
      "st-duplicate-tensor.safetensors",
      test::SafetensorsWriter::image("{\"model.norm.weight\": {\"dtype\": \"F32\", \"shape\": [16], \"data_offsets\": "
                                     "[0, 64]}, \"model.norm.weight\": {\"dtype\": \"F32\", \"shape\": [16], "
                                     "\"data_offsets\": [64, 128]}}",
                                     Bytes(128, 0)),
      "tensor 'model.norm.weight' is listed twice");
  s.add(
      "st-duplicate-after-prefix.safetensors",
      test::SafetensorsWriter::image("{\"model.norm.weight\": {\"dtype\": \"F32\", \"shape\": [16], \"data_offsets\": "
                                     "[0, 64]}, \"norm.weight\": {\"dtype\": \"F32\", \"shape\": [16], "
                                     "\"data_offsets\": [64, 128]}}",
                                     Bytes(128, 0)),
      "appears twice");
  s.add("st-metadata-not-string.safetensors", test::SafetensorsWriter::image("{\"__metadata__\": {\"format\": 1}}", {}),
        "__metadata__ value of 'format' is not a string");
  s.add("st-metadata-not-object.safetensors", test::SafetensorsWriter::image("{\"__metadata__\": \"pt\"}", {}),
        "__metadata__ is not an object");
}

// ---- model directories ----

inline Bytes mlx_weight_words(size_t rows, size_t words) {
  Bytes b(rows * words * 4);
  for (size_t k = 0; k < b.size(); k++) b[k] = static_cast<uint8_t>(k * 37 + 11);
  return b;
}

// An MLX checkpoint of the corpus llama: the embedding quantized (rows 4, 32 inputs: `words` uint32
// per row, `groups` bf16 scales/biases per row), the norm in bf16.
inline Bytes mlx_safetensors(size_t words, size_t groups, bool with_biases = true) {
  test::SafetensorsWriter w;
  w.metadata("format", "mlx");
  Bytes aux(4 * groups * 2, 0);
  for (size_t k = 1; k < aux.size(); k += 2) aux[k] = 0x3C;  // bf16 ~0.0117
  if (with_biases) w.tensor("model.embed_tokens.biases", "BF16", {4, static_cast<int64_t>(groups)}, aux);
  w.tensor("model.embed_tokens.scales", "BF16", {4, static_cast<int64_t>(groups)}, aux);
  w.tensor("model.embed_tokens.weight", "U32", {4, static_cast<int64_t>(words)}, mlx_weight_words(4, words));
  w.tensor("model.norm.weight", "BF16", {32}, Bytes(64, 0x3F));
  return w.build();
}

inline std::string mlx_config(int group, int bits, const std::string& extra = "") {
  std::string q = "{\"group_size\": " + std::to_string(group) + ", \"bits\": " + std::to_string(bits) + extra + "}";
  return llama_config(", \"quantization\": " + q + ", \"quantization_config\": " + q);
}

inline std::string index_json(const std::vector<std::pair<std::string, std::string>>& map) {
  std::string s = "{\"metadata\": {\"total_size\": 0}, \"weight_map\": {";
  for (size_t k = 0; k < map.size(); k++)
    s += (k ? ", " : "") + llminfer::detail::json_quote(map[k].first) + ": " +
         llminfer::detail::json_quote(map[k].second);
  return s + "}}";
}

inline void directory_cases(Set& s) {
  auto dir = [&](const std::string& name, const std::vector<std::pair<std::string, Bytes>>& files,
                 const std::string& expect) {
    for (const auto& [f, b] : files) s.file(name + "/" + f, b);
    s.cases.push_back({name, expect});
  };
  auto text = [](const std::string& t) { return Bytes(t.begin(), t.end()); };
  const Bytes st = st_base();
  const Bytes cfg = text(llama_config());
  dir("dir-no-config.dir", {{"model.safetensors", st}}, "no config.json beside the safetensors weights");
  dir("dir-no-weights.dir", {{"config.json", cfg}},
      "no model.safetensors, model.safetensors.index.json or *.safetensors");
  dir("dir-config-deep.dir", {{"config.json", text(deep_json(100000))}, {"model.safetensors", st}},
      "config.json: invalid JSON at line 1, column 518: nested too deeply");
  dir("dir-config-not-object.dir", {{"config.json", text("[\"llama\"]")}, {"model.safetensors", st}},
      "config.json: not a JSON object");
  dir("dir-config-truncated.dir", {{"config.json", text("{\"model_type\": \"lla")}, {"model.safetensors", st}},
      "config.json: invalid JSON at line 1, column 20: unterminated string");
  dir("dir-model-type-unknown.dir",
      {{"config.json", text("{\"model_type\": \"gpt_neox\", \"hidden_size\": 32}")}, {"model.safetensors", st}},
      "config.json model_type 'gpt_neox' is not a supported architecture");
  dir("dir-untied-no-lm-head.dir",
      {{"config.json", text(llama_config(", \"tie_word_embeddings\": false"))}, {"model.safetensors", st}},
      "config.json says the embeddings are not tied, but lm_head.weight is missing");
  dir("dir-generation-config-bad.dir",
      {{"config.json", cfg}, {"generation_config.json", text("{\"eos_token_id\": [2,}")}, {"model.safetensors", st}},
      "generation_config.json: invalid JSON at line 1, column 21");
  dir("dir-chat-template-json-bad.dir",
      {{"config.json", cfg}, {"chat_template.json", text("{\"template\": \"x\"}")}, {"model.safetensors", st}},
      "chat_template.json: no \"chat_template\" string");
  // tokenizer.json
  dir("dir-tokenizer-huge-id.dir",
      {{"config.json", cfg},
       {"tokenizer.json",
        text("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 16000000}, \"merges\": []}}")},
       {"model.safetensors", st}},
      "tokenizer.json: token 'b' has id 16000000, far beyond the 2 entries of the vocabulary");
  dir("dir-tokenizer-unigram.dir",
      {{"config.json", cfg},
       {"tokenizer.json", text("{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}")},
       {"model.safetensors", st}},
      "tokenizer.json: tokenizer model type 'Unigram' is not supported (only BPE)");
  dir("dir-tokenizer-bad-merge.dir",
      {{"config.json", cfg},
       {"tokenizer.json", text("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [[\"a\"]]}}")},
       {"model.safetensors", st}},
      "tokenizer.json: model.merges holds an entry that is neither");
  // sharded models
  test::SafetensorsWriter s1, s2;
  s1.tensor_f32("model.embed_tokens.weight", {4, 32}, ramp(128));
  s2.tensor_f32("model.norm.weight", {32}, std::vector<float>(32, 1.0f));
  const std::string n1 = "model-00001-of-00002.safetensors", n2 = "model-00002-of-00002.safetensors";
  dir("dir-index-missing-shard.dir",
      {{"config.json", cfg},
       {"model.safetensors.index.json",
        text(index_json({{"model.embed_tokens.weight", n1}, {"model.norm.weight", n2}}))},
       {n1, s1.build()}},
      "model.safetensors.index.json: shard model-00002-of-00002.safetensors is missing");
  dir("dir-index-lies.dir",
      {{"config.json", cfg},
       {"model.safetensors.index.json",
        text(index_json({{"model.embed_tokens.weight", n1}, {"model.norm.weight", n1}}))},
       {n1, s1.build()},
       {n2, s2.build()}},
      "model.safetensors.index.json: tensor 'model.norm.weight' is not in model-00001-of-00002.safetensors");
  dir("dir-index-unlisted.dir",
      {{"config.json", cfg},
       {"model.safetensors.index.json", text(index_json({{"model.embed_tokens.weight", n1}}))},
       {n1, st}},
      "holds tensor 'model.norm.weight', which the index does not list");
  dir("dir-index-traversal.dir",
      {{"config.json", cfg},
       {"model.safetensors.index.json", text(index_json({{"model.norm.weight", "../st-overlap.safetensors"}}))}},
      "tensor 'model.norm.weight' maps to an invalid file name");
  dir("dir-index-empty.dir",
      {{"config.json", cfg}, {"model.safetensors.index.json", text(index_json({}))}, {n1, s1.build()}},
      "model.safetensors.index.json: the weight_map is empty");
  dir("dir-index-shard-truncated.dir",
      {{"config.json", cfg},
       {"model.safetensors.index.json",
        text(index_json({{"model.embed_tokens.weight", n1}, {"model.norm.weight", n2}}))},
       {n1, s1.build()},
       {n2, head(s2.build(), 40)}},
      "model-00002-of-00002.safetensors: header length");
  // MLX quantized checkpoints
  dir("dir-mlx-bits-mismatch.dir",
      {{"config.json", text(mlx_config(32, 8))}, {"model.safetensors", mlx_safetensors(4, 1)}},
      "MLX tensor 'model.embed_tokens.weight': 4 words of 32 bits do not hold 1 groups of 32 8-bit values");
  dir("dir-mlx-no-biases.dir",
      {{"config.json", text(mlx_config(32, 4))}, {"model.safetensors", mlx_safetensors(4, 1, false)}},
      "MLX tensor 'model.embed_tokens.weight' has scales but no biases");
  dir("dir-mlx-3-bit.dir", {{"config.json", text(mlx_config(32, 3))}, {"model.safetensors", mlx_safetensors(3, 1)}},
      "MLX tensor 'model.embed_tokens.weight' is 3-bit; only 4- and 8-bit affine quantization is supported");
  dir("dir-mlx-mode-mxfp4.dir",
      {{"config.json", text(mlx_config(32, 4, ", \"mode\": \"mxfp4\""))}, {"model.safetensors", mlx_safetensors(4, 1)}},
      "MLX tensor 'model.embed_tokens.weight' uses quantization mode 'mxfp4' (only affine)");
  dir("dir-mlx-group-48.dir", {{"config.json", text(mlx_config(48, 4))}, {"model.safetensors", mlx_safetensors(4, 1)}},
      "config.json: quantization group_size must be 32, 64 or 128");
  dir("dir-mlx-scales-shape.dir",
      {{"config.json", text(mlx_config(32, 4))},
       {"model.safetensors",
        [] {
          test::SafetensorsWriter w;
          w.tensor("model.embed_tokens.biases", "BF16", {4, 1}, Bytes(8, 0));
          w.tensor("model.embed_tokens.scales", "F16", {4, 1}, Bytes(8, 0));
          w.tensor("model.embed_tokens.weight", "U32", {4, 4}, mlx_weight_words(4, 4));
          return w.build();
        }()}},
      "MLX tensor 'model.embed_tokens.weight': scales/biases do not match the weight");
}

inline Set malformed() {
  Set s;
  gguf_cases(s);
  safetensors_cases(s);
  directory_cases(s);
  return s;
}

// ---- fuzz seeds: small valid inputs of each reader (tests/fuzz/corpus/<reader>/) ----
inline std::vector<File> fuzz_seeds() {
  std::vector<File> out;
  auto add = [&](const std::string& path, Bytes b) { out.push_back({path, std::move(b)}); };
  auto text = [](const std::string& t) { return Bytes(t.begin(), t.end()); };
  add("gguf/base-v3.gguf", gguf_base());
  add("gguf/base-v2.gguf", gguf_base(nullptr, 2));
  {
    test::GgufWriter w;
    uint8_t u8v = 1;
    int16_t i16v = -2;
    w.kv_scalar("a.u8", 0, &u8v, 1).kv_scalar("a.i16", 3, &i16v, 2).kv_u64("a.u64", 3).kv_i64("a.i64", -4);
    w.kv_f64("a.f64", 0.5).kv_bool("a.bool", false).kv_u32("general.alignment", 16);
    w.kv_array("a.nested", nested_array(3)).kv_strs("a.strs", {"x", "yz"});
    w.tensor_f32("s", {}, {2.0f}).tensor("h", {4, 1, 1, 2}, 1, Bytes(16, 0x3C)).tensor("b", {4}, 30, Bytes(8, 0x3F));
    add("gguf/all-types.gguf", w.build(3, 16));
  }
  {  // the shapes of issue 16: a layer count that would compile 517 million steps with a long
     // tensor-free definition, and a file holding more layers than it declares
    test::GgufWriter w;
    w.kv_str("general.architecture", "hostile")
        .kv_u32("hostile.block_count", 65536)
        .kv_u32("hostile.embedding_length", 8);
    w.tensor_f32("token_embd.weight", {8, 4}, ramp(32));
    add("gguf/block-count-65536.gguf", w.build());
    test::GgufWriter v = gguf_meta();
    gguf_tensors(v);
    v.tensor_f32("blk.1.attn_norm.weight", {32}, ramp(32));
    add("gguf/extra-layer.gguf", v.build());
  }
  add("safetensors/base.safetensors", st_base());
  add("safetensors/mlx-4bit.safetensors", mlx_safetensors(4, 1));
  {
    test::SafetensorsWriter w;
    w.tensor("model.layers.0.input_layernorm.weight", "BF16", {8}, Bytes(16, 0x3F));
    w.tensor("lm_head.weight", "F16", {2, 8}, Bytes(32, 0x3C));
    w.tensor("model.layers.0.self_attn.q_proj.weight", "I8", {8, 8}, Bytes(64, 1));
    w.tensor("x.u16", "U16", {2}, Bytes(4, 0)).tensor("x.bool", "BOOL", {3}, Bytes{1, 0, 1});
    w.tensor("x.f64", "F64", {}, Bytes(8, 0)).tensor("x.i64", "I64", {1}, Bytes(8, 0));
    add("safetensors/types.safetensors", w.build());
  }
  add("json/config.json", text(mlx_config(64, 4)));
  add("json/tokenizer.json",
      text("{\"version\": \"1.0\", \"added_tokens\": [{\"id\": 3, \"content\": \"<|end|>\", \"special\": true}], "
           "\"normalizer\": null, \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false}, "
           "\"decoder\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", \"byte_fallback\": false, "
           "\"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [\"a b\", [\"ab\", \"b\"]]}}"));
  add("json/escapes.json",
      text("[\"\\u00e9\\ud83d\\ude00\\ud800\", \"\\\"\\\\\\/\\b\\f\\n\\r\\t\", \"\xE2\x96\x81x\", -0.0, 1e308, 1e-400, "
           "9223372036854775807, -9223372036854775808, 18446744073709551616, 0.1, true, false, null, {}, [[]]]"));
  return out;
}

}  // namespace corpus
