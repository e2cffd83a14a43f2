// The malformed-file corpus (tests/corpus/malformed/, written by corpus.hpp): every file is refused
// through load_description, Model::load and `llminfer info` with a message naming the file and the
// fault; the committed files (and the fuzz seeds) are exactly what the generator makes.
// Regenerate after changing corpus.hpp:  make corpus   (LLMINFER_REGEN_CORPUS=1 build/tests -tc='corpus:*')
#define LLMINFER_IMPLEMENTATION
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <set>

#include "corpus.hpp"

namespace {

std::string malformed_dir() {
  return test::source_dir() + "/tests/corpus/malformed";
}
std::string seeds_dir() {
  return test::source_dir() + "/tests/fuzz/corpus";
}
const char* kSeedReaders[] = {"gguf", "safetensors", "json"};  // seed folders this generator owns

bool regenerating() {
  const char* e = std::getenv("LLMINFER_REGEN_CORPUS");
  return e && *e && std::string(e) != "0";
}

// Every regular file under root/rel, as paths relative to root.
void walk(const std::string& root, const std::string& rel, std::vector<std::string>& out) {
  DIR* d = opendir((rel.empty() ? root : root + "/" + rel).c_str());
  if (!d) return;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    std::string r = rel.empty() ? name : rel + "/" + name;
    struct stat st;
    if (stat((root + "/" + r).c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode))
      walk(root, r, out);
    else
      out.push_back(r);
  }
  closedir(d);
}

void make_parents(const std::string& path) {
  for (size_t p = path.find('/', 1); p != std::string::npos; p = path.find('/', p + 1))
    mkdir(path.substr(0, p).c_str(), 0755);
}

// Compares the generated files with the folder `root` (or writes them when regenerating).
void sync(const std::string& root, const std::vector<corpus::File>& files) {
  if (regenerating()) {
    CHECK(std::system(("rm -rf " + test::quote(root)).c_str()) == 0);
    for (const auto& f : files) {
      make_parents(root + "/" + f.path);
      CHECK_MESSAGE(test::write_file(root + "/" + f.path, f.bytes), f.path);
    }
    MESSAGE("regenerated " << files.size() << " files in " << root);
  }
  std::vector<std::string> on_disk;
  walk(root, "", on_disk);
  std::set<std::string> expected;
  for (const auto& f : files) {
    expected.insert(f.path);
    std::vector<uint8_t> bytes;
    bool present = test::read_file(root + "/" + f.path, bytes);
    CHECK_MESSAGE(present, root << "/" << f.path << " is missing: run `make corpus` and commit");
    if (present)
      CHECK_MESSAGE(bytes == f.bytes, root << "/" << f.path << " differs from the generator: run `make corpus`");
  }
  for (const auto& p : on_disk)
    CHECK_MESSAGE(expected.count(p),
                  root << "/" << p << " is not made by the generator: remove it or run `make corpus`");
}

}  // namespace

TEST_CASE("corpus: the committed malformed files and fuzz seeds are what the generator makes") {
  corpus::Set s = corpus::malformed();
  CHECK(s.cases.size() >= 40);
  std::set<std::string> names;
  for (const auto& c : s.cases) CHECK_MESSAGE(names.insert(c.name).second, "two cases named " << c.name);
  sync(malformed_dir(), s.files);
  std::vector<corpus::File> seeds = corpus::fuzz_seeds();
  for (const char* reader : kSeedReaders) {
    std::vector<corpus::File> mine;
    for (const auto& f : seeds)
      if (f.path.rfind(std::string(reader) + "/", 0) == 0)
        mine.push_back({f.path.substr(std::strlen(reader) + 1), f.bytes});
    CHECK(!mine.empty());
    sync(seeds_dir() + "/" + reader, mine);
  }
}

TEST_CASE("corpus: every malformed file is refused by load_description and Model::load, naming file and fault") {
  for (const auto& c : corpus::malformed().cases) {
    const std::string path = malformed_dir() + "/" + c.name;
    auto d = llminfer::detail::load_description(path);
    CHECK_MESSAGE(!d, c.name << " was accepted");
    if (d) continue;
    const std::string& msg = d.error().message;
    CHECK_MESSAGE(msg.find(c.name) != std::string::npos, c.name << ": the message does not name the file: " << msg);
    CHECK_MESSAGE(msg.find(c.expect) != std::string::npos, c.name << ": expected \"" << c.expect << "\" in: " << msg);
    CHECK(d.error().code != llminfer::Errc::ok);
    auto m = llminfer::Model::load(path);
    CHECK_MESSAGE(!m, c.name << " was accepted by Model::load");
    if (!m) CHECK(m.error().message == msg);
  }
}

TEST_CASE("corpus: `llminfer info` exits with status 2 and says what is wrong, for every malformed file") {
  size_t k = 0;
  for (const auto& c : corpus::malformed().cases) {
    const std::string path = malformed_dir() + "/" + c.name;
    const char* flags = k++ % 2 ? " --json --all" : "";  // errors go to stderr whatever the output mode
    test::CliResult r = test::run_cli("info " + test::quote(path) + flags, true);
    CHECK_MESSAGE(r.status == 2, c.name << ": exit status " << r.status);
    CHECK_MESSAGE(r.out.find("error: ") == 0, c.name << ": " << r.out);
    CHECK_MESSAGE(r.out.find(c.expect) != std::string::npos,
                  c.name << ": expected \"" << c.expect << "\" in: " << r.out);
  }
}

TEST_CASE("corpus: the fuzz seeds are valid inputs of their readers") {
  using namespace llminfer::detail;
  for (const auto& f : corpus::fuzz_seeds()) {
    if (f.path.rfind("gguf/", 0) == 0) {
      auto m = gguf_description(f.bytes.data(), f.bytes.size(), f.path);
      CHECK_MESSAGE(m.ok(), f.path << ": " << (m ? std::string() : m.error().message));
    } else if (f.path.rfind("safetensors/", 0) == 0) {
      auto st = safetensors_parse(f.bytes.data(), f.bytes.size(), f.path);
      CHECK_MESSAGE(st.ok(), f.path << ": " << (st ? std::string() : st.error().message));
    } else {
      auto j = json_parse(std::string_view(reinterpret_cast<const char*>(f.bytes.data()), f.bytes.size()), f.path);
      CHECK_MESSAGE(j.ok(), f.path << ": " << (j ? std::string() : j.error().message));
    }
  }
}

TEST_CASE("corpus: the valid models the malformed ones are cut from load") {
  using namespace llminfer::detail;
  corpus::Bytes g = corpus::gguf_base();
  auto m = gguf_description(g.data(), g.size(), "base.gguf");
  REQUIRE_MESSAGE(m.ok(), (m ? std::string() : m.error().message));
  CHECK((*m)->tensors.size() == 3);
  CHECK((*m)->vocab.tokens.size() == 4);
  CHECK((*m)->hp.n_embd == 32);
  HfSources src;
  src.dir = "corpus";
  src.config_text = corpus::llama_config();
  corpus::Bytes st = corpus::st_base();
  auto d = safetensors_description("corpus", src, {StImage{"corpus/model.safetensors", st.data(), st.size()}});
  REQUIRE_MESSAGE(d.ok(), (d ? std::string() : d.error().message));
  CHECK((*d)->find("token_embd.weight"));
  CHECK((*d)->find("output_norm.weight"));
  src.config_text = corpus::mlx_config(32, 4);
  corpus::Bytes mlx = corpus::mlx_safetensors(4, 1);
  auto q = safetensors_description("corpus", src, {StImage{"corpus/model.safetensors", mlx.data(), mlx.size()}});
  REQUIRE_MESSAGE(q.ok(), (q ? std::string() : q.error().message));
  const TensorView* e = (*q)->find("token_embd.weight");
  REQUIRE(e);
  CHECK(e->type == DType::mlx_q4);
  CHECK(e->ne[0] == 32);
  CHECK(e->ne[1] == 4);
}
