// tq-capture-kv: writes the K and V rows a model puts into its KV cache
// (post-RoPE K, V as cached) for chosen layers to .npy files, for quality
// work on real rows (tqc's tq-quant, python -m tqc.quality).
//
//   tq-capture-kv -m MODEL.gguf -f TEXT [-n TOKENS] [--layers 0,5|all]
//                 [-t THREADS] [--centres FILE.npy] -o DIR
//
// --centres writes the mean K row of every layer and KV head over the
// captured tokens, float32 [layers, kv_heads, head_dim]: the centres of
// the centred K cache types (turbo4_0c, ...; docs/llama.cpp.md).
//
// DIR/K_L<il>.npy and DIR/V_L<il>.npy hold float32 [tokens, kv_heads,
// head_dim], DIR/Q_L<il>.npy the queries [tokens, heads, head_dim] (as
// attention sees them, before the logit scale). Rows come from the graph's
// "Qcur-<il>" / "Kcur-<il>" / "Vcur-<il>" tensors
// (the last tensor of that name in a layer's graph is what the cache
// stores), read through the scheduler's eval callback.

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace {

[[noreturn]] void fail(const std::string &message) {
  std::fprintf(stderr, "tq-capture-kv: error: %s\n", message.c_str());
  std::exit(1);
}

/// Rows captured from one graph evaluation, per tensor name.
struct Capture {
  std::set<int> layers; // empty: all
  // name -> rows of the current batch ([tokens][heads][dim] floats), the
  // last tensor of the name winning.
  std::map<std::string, std::vector<float>> batch;
  std::map<std::string, std::pair<int64_t, int64_t>> shape; // heads, dim
  std::map<std::string, std::vector<float>> all;

  /// "Kcur-12" -> ('K', 12), or false (Q, K and V).
  static bool parse(const char *name, char &side, int &layer) {
    if (std::strncmp(name, "Kcur-", 5) && std::strncmp(name, "Vcur-", 5) &&
        std::strncmp(name, "Qcur-", 5))
      return false;
    char *end = nullptr;
    long l = std::strtol(name + 5, &end, 10);
    if (end == name + 5 || *end != '\0')
      return false;
    side = name[0];
    layer = int(l);
    return true;
  }

  bool wanted(const char *name) const {
    char side;
    int layer;
    return parse(name, side, layer) &&
           (layers.empty() || layers.count(layer));
  }

  void take(const ggml_tensor *t) {
    if (t->type != GGML_TYPE_F32)
      fail(std::string(t->name) + " is not f32");
    // [dim, heads, tokens] with any strides; the CPU backend's memory is
    // the host's.
    const int64_t dim = t->ne[0], heads = t->ne[1], tokens = t->ne[2];
    std::vector<float> rows(size_t(dim * heads * tokens));
    std::vector<char> host;
    const char *base = static_cast<const char *>(t->data);
    if (!ggml_backend_buffer_is_host(t->buffer)) {
      host.resize(ggml_nbytes(t));
      ggml_backend_tensor_get(t, host.data(), 0, host.size());
      base = host.data();
    }
    for (int64_t k = 0; k < tokens; ++k)
      for (int64_t h = 0; h < heads; ++h)
        std::memcpy(&rows[size_t((k * heads + h) * dim)],
                    base + k * t->nb[2] + h * t->nb[1], dim * sizeof(float));
    batch[t->name] = std::move(rows);
    shape[t->name] = {heads, dim};
  }

  void endBatch() {
    for (auto &[name, rows] : batch) {
      auto &dst = all[name];
      dst.insert(dst.end(), rows.begin(), rows.end());
    }
    batch.clear();
  }
};

bool evalCallback(ggml_tensor *t, bool ask, void *user) {
  auto *capture = static_cast<Capture *>(user);
  if (ask)
    return capture->wanted(t->name);
  if (capture->wanted(t->name))
    capture->take(t);
  return true;
}

void writeNpy(const std::string &path, const std::vector<float> &data,
              int64_t heads, int64_t dim) {
  const int64_t tokens = int64_t(data.size()) / (heads * dim);
  std::ostringstream header;
  header << "{'descr': '<f4', 'fortran_order': False, 'shape': (" << tokens
         << ", " << heads << ", " << dim << "), }";
  // (tokens is the leading dim: layers for a centres file.)
  std::string h = header.str();
  // Magic (6) + version (2) + length (2) + header, padded to 64 with '\n'.
  size_t total = 10 + h.size() + 1;
  h.append((64 - total % 64) % 64, ' ');
  h.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  if (!out)
    fail("cannot write " + path);
  out.write("\x93NUMPY\x01\x00", 8);
  uint16_t length = uint16_t(h.size());
  out.write(reinterpret_cast<const char *>(&length), 2);
  out.write(h.data(), std::streamsize(h.size()));
  out.write(reinterpret_cast<const char *>(data.data()),
            std::streamsize(data.size() * sizeof(float)));
  if (!out)
    fail("cannot write " + path);
}

} // namespace

int main(int argc, char **argv) {
  std::string model, text, outDir, layers = "all", centres;
  int tokens = 4096, threads = 2;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        fail(a + " needs a value");
      return argv[++i];
    };
    if (a == "-m")
      model = value();
    else if (a == "-f")
      text = value();
    else if (a == "-o")
      outDir = value();
    else if (a == "-n")
      tokens = std::atoi(value().c_str());
    else if (a == "-t")
      threads = std::atoi(value().c_str());
    else if (a == "--layers")
      layers = value();
    else if (a == "--centres")
      centres = value();
    else
      fail("unknown option '" + a +
           "' (usage: -m MODEL -f TEXT -o DIR [-n TOKENS] [-t THREADS] "
           "[--layers 0,5|all] [--centres FILE.npy])");
  }
  if (model.empty() || text.empty() || outDir.empty())
    fail("-m, -f and -o are required");
  if (tokens <= 0 || threads <= 0)
    fail("-n and -t must be positive");

  Capture capture;
  if (layers != "all") {
    std::stringstream list(layers);
    std::string item;
    while (std::getline(list, item, ','))
      capture.layers.insert(std::atoi(item.c_str()));
  }

  std::ifstream in(text);
  if (!in)
    fail("cannot read " + text);
  std::string content((std::istreambuf_iterator<char>(in)),
                      std::istreambuf_iterator<char>());

  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model *m = llama_model_load_from_file(model.c_str(), mp);
  if (!m)
    fail("cannot load " + model);
  const llama_vocab *vocab = llama_model_get_vocab(m);
  std::vector<llama_token> ids(content.size() + 16);
  int n = llama_tokenize(vocab, content.c_str(), int32_t(content.size()),
                         ids.data(), int32_t(ids.size()), true, false);
  if (n < 0)
    fail("tokenization failed");
  ids.resize(size_t(std::min(n, tokens)));

  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = uint32_t(ids.size()) + 16;
  cp.n_batch = 512;
  cp.n_ubatch = 512;
  cp.n_threads = cp.n_threads_batch = threads;
  cp.cb_eval = evalCallback;
  cp.cb_eval_user_data = &capture;
  llama_context *ctx = llama_init_from_model(m, cp);
  if (!ctx)
    fail("cannot create a context");
  for (size_t start = 0; start < ids.size(); start += 512) {
    int32_t count = int32_t(std::min<size_t>(512, ids.size() - start));
    llama_batch batch = llama_batch_get_one(ids.data() + start, count);
    if (llama_decode(ctx, batch) != 0)
      fail("llama_decode failed at token " + std::to_string(start));
    capture.endBatch();
    std::fprintf(stderr, "tq-capture-kv: %zu / %zu tokens\n",
                 start + size_t(count), ids.size());
  }
  for (const auto &[name, rows] : capture.all) {
    char side;
    int layer;
    Capture::parse(name.c_str(), side, layer);
    auto [heads, dim] = capture.shape[name];
    std::string path = outDir + "/" + side + "_L" + std::to_string(layer) +
                       ".npy";
    writeNpy(path, rows, heads, dim);
    std::fprintf(stderr, "tq-capture-kv: wrote %s (%zu rows of %lld x %lld)\n",
                 path.c_str(), rows.size() / size_t(heads * dim),
                 (long long)heads, (long long)dim);
  }
  if (!centres.empty()) {
    if (layers != "all")
      fail("--centres needs every layer (drop --layers)");
    const int32_t nLayer = llama_model_n_layer(m);
    std::vector<float> means;
    int64_t heads = 0, dim = 0;
    for (int32_t l = 0; l < nLayer; ++l) {
      std::string name = "Kcur-" + std::to_string(l);
      auto it = capture.all.find(name);
      if (it == capture.all.end())
        fail("no K rows of layer " + std::to_string(l));
      std::tie(heads, dim) = capture.shape[name];
      const size_t rows = it->second.size() / size_t(heads * dim);
      std::vector<double> sum(size_t(heads * dim), 0.0);
      for (size_t r = 0; r < rows; ++r)
        for (size_t i = 0; i < sum.size(); ++i)
          sum[i] += it->second[r * sum.size() + i];
      for (double v : sum)
        means.push_back(float(v / double(rows)));
    }
    writeNpy(centres, means, heads, dim);
    std::fprintf(stderr, "tq-capture-kv: wrote %s (%d layers x %lld x %lld)\n",
                 centres.c_str(), nLayer, (long long)heads, (long long)dim);
  }
  llama_free(ctx);
  llama_model_free(m);
  llama_backend_free();
  return 0;
}
