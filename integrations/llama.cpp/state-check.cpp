// state-check: llama.cpp's sequence state save/restore round-trips a KV
// cache of tqc types.
//
//   state-check -m MODEL.gguf -f TEXT [-ctk TYPE] [-ctv TYPE] [-n TOKENS]
//               [-t THREADS] -o DIR
//
// With a context whose cache is TYPE (default turbo3_0 for K and V, flash
// attention on):
//   1. decode the first TOKENS (default 200) tokens of TEXT as sequence 0;
//   2. save sequence 0's state with llama_state_seq_get_data and with
//      llama_state_seq_save_file (DIR/seq0.state);
//   3. decode the next token of TEXT -> logits A;
//   4. llama_memory_clear, decode that token alone -> logits C, which must
//      differ from A (the cache is what A depends on: the test is not
//      vacuous);
//   5. llama_memory_clear, llama_state_seq_set_data, decode the token ->
//      logits B == A bit for bit (the same cache bytes, cells, batch and
//      threads: the same arithmetic);
//   6. llama_memory_clear, llama_state_seq_load_file (the prompt tokens
//      must come back too), decode the token -> logits == A bit for bit.
// Then the same prompt with an f16 cache, to compare state sizes: the
// state holds the cache's rows as stored, so a tqc state must be smaller
// than the f16 one by about the row-size ratio (it must be below 1/2).
#include "ggml.h"
#include "llama.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

int failures = 0;

[[noreturn]] void fail(const std::string &message) {
  std::fprintf(stderr, "state-check: error: %s\n", message.c_str());
  std::exit(1);
}

void check(bool ok, const std::string &what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  failures += !ok;
}

ggml_type typeByName(const std::string &name) {
  for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
    const char *n = ggml_type_name(ggml_type(t));
    if (n && name == n)
      return ggml_type(t);
  }
  fail("unknown cache type '" + name + "'");
}

struct Run {
  llama_context *ctx = nullptr;
  int nVocab = 0;

  Run(llama_model *model, ggml_type k, ggml_type v, int threads, int nCtx) {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = uint32_t(nCtx);
    cp.n_batch = 512;
    cp.n_ubatch = 512;
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = threads;
    cp.type_k = k;
    cp.type_v = v;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
    ctx = llama_init_from_model(model, cp);
    if (!ctx)
      fail(std::string("cannot create a context with a ") + ggml_type_name(k) +
           "/" + ggml_type_name(v) + " cache");
    nVocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  }
  ~Run() { llama_free(ctx); }

  /// Decodes tokens at positions p0.. of sequence 0; logits of the last.
  std::vector<float> decode(const llama_token *tokens, int n, int p0) {
    llama_batch batch = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; ++i) {
      batch.token[i] = tokens[i];
      batch.pos[i] = p0 + i;
      batch.n_seq_id[i] = 1;
      batch.seq_id[i][0] = 0;
      batch.logits[i] = i == n - 1;
    }
    batch.n_tokens = n;
    if (llama_decode(ctx, batch) != 0)
      fail("llama_decode failed");
    llama_batch_free(batch);
    const float *l = llama_get_logits_ith(ctx, -1);
    if (!l)
      fail("no logits");
    return std::vector<float>(l, l + nVocab);
  }

  void clear() { llama_memory_clear(llama_get_memory(ctx), true); }
};

/// Largest |a - b|; 0 only when bit-identical (or equal as floats).
double maxDiff(const std::vector<float> &a, const std::vector<float> &b) {
  double m = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(double(a[i]) - double(b[i]));
    if (!(d <= m))
      m = std::isnan(d) ? INFINITY : d;
  }
  return m;
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

} // namespace

int main(int argc, char **argv) {
  std::string model, text, outDir, kName = "turbo3_0", vName = "turbo3_0";
  int nPrompt = 200, threads = 2;
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
    else if (a == "-ctk")
      kName = value();
    else if (a == "-ctv")
      vName = value();
    else if (a == "-n")
      nPrompt = std::atoi(value().c_str());
    else if (a == "-t")
      threads = std::atoi(value().c_str());
    else
      fail("unknown option '" + a +
           "' (usage: -m MODEL -f TEXT -o DIR [-ctk T] [-ctv T] [-n TOKENS] "
           "[-t THREADS])");
  }
  if (model.empty() || text.empty() || outDir.empty())
    fail("-m, -f and -o are required");
  if (nPrompt < 2 || threads < 1)
    fail("-n must be at least 2 and -t positive");

  std::ifstream in(text);
  if (!in)
    fail("cannot read " + text);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string content = ss.str().substr(0, size_t(nPrompt) * 16);

  llama_backend_init();
  llama_log_set([](ggml_log_level level, const char *msg, void *) {
    if (level == GGML_LOG_LEVEL_ERROR)
      std::fputs(msg, stderr);
  }, nullptr);
  llama_model_params mp = llama_model_default_params();
  llama_model *m = llama_model_load_from_file(model.c_str(), mp);
  if (!m)
    fail("cannot load " + model);
  const llama_vocab *vocab = llama_model_get_vocab(m);
  std::vector<llama_token> ids(content.size() + 16);
  const int n = llama_tokenize(vocab, content.c_str(), int32_t(content.size()),
                               ids.data(), int32_t(ids.size()), true, false);
  if (n < nPrompt + 1)
    fail("the text has fewer than " + std::to_string(nPrompt + 1) + " tokens");
  const llama_token next = ids[size_t(nPrompt)];
  ids.resize(size_t(nPrompt));
  const ggml_type kType = typeByName(kName), vType = typeByName(vName);
  const int nCtx = 1024;

  std::printf("state-check: K %s V %s, %d prompt tokens, %d threads\n",
              kName.c_str(), vName.c_str(), nPrompt, threads);
  size_t stateSize = 0;
  {
    Run run(m, kType, vType, threads, nCtx);
    run.decode(ids.data(), nPrompt, 0);

    stateSize = llama_state_seq_get_size(run.ctx, 0);
    std::vector<uint8_t> state(stateSize);
    const size_t got = llama_state_seq_get_data(run.ctx, state.data(),
                                                state.size(), 0);
    check(got == stateSize && stateSize > 0,
          "llama_state_seq_get_data wrote " + std::to_string(got) + " of " +
              std::to_string(stateSize) + " bytes");
    const std::string path = outDir + "/seq0.state";
    const size_t saved =
        llama_state_seq_save_file(run.ctx, path.c_str(), 0, ids.data(), ids.size());
    check(saved > 0, "llama_state_seq_save_file wrote " + path + " (" +
                         std::to_string(saved) + " bytes)");

    const std::vector<float> a = run.decode(&next, 1, nPrompt);
    bool finite = true;
    for (float x : a)
      finite &= std::isfinite(x);
    check(finite, "logits of the next token are finite");

    run.clear();
    const std::vector<float> c = run.decode(&next, 1, nPrompt);
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "without the cache the logits differ (max |diff| %.3g): "
                  "they depend on the cache",
                  maxDiff(a, c));
    check(maxDiff(a, c) > 1e-3, buf);

    run.clear();
    const size_t read = llama_state_seq_set_data(run.ctx, state.data(),
                                                 state.size(), 0);
    check(read == stateSize, "llama_state_seq_set_data read " +
                                 std::to_string(read) + " bytes");
    const std::vector<float> b = run.decode(&next, 1, nPrompt);
    std::snprintf(buf, sizeof buf,
                  "after llama_state_seq_set_data the logits are bit-identical "
                  "(max |diff| %.3g)",
                  maxDiff(a, b));
    check(sameBits(a, b), buf);

    run.clear();
    std::vector<llama_token> tokensOut(size_t(nPrompt) + 8);
    size_t nOut = 0;
    const size_t loaded = llama_state_seq_load_file(
        run.ctx, path.c_str(), 0, tokensOut.data(), tokensOut.size(), &nOut);
    tokensOut.resize(nOut);
    check(loaded > 0 && tokensOut == ids,
          "llama_state_seq_load_file read the state and the " +
              std::to_string(nOut) + " prompt tokens");
    const std::vector<float> f = run.decode(&next, 1, nPrompt);
    std::snprintf(buf, sizeof buf,
                  "after llama_state_seq_load_file the logits are "
                  "bit-identical (max |diff| %.3g)",
                  maxDiff(a, f));
    check(sameBits(a, f), buf);
  }
  {
    Run run(m, GGML_TYPE_F16, GGML_TYPE_F16, threads, nCtx);
    run.decode(ids.data(), nPrompt, 0);
    const size_t f16Size = llama_state_seq_get_size(run.ctx, 0);
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "the %s/%s state (%zu bytes) is %.3f of the f16 state (%zu "
                  "bytes): it holds the compressed rows",
                  kName.c_str(), vName.c_str(), stateSize,
                  double(stateSize) / double(f16Size), f16Size);
    check(2 * stateSize < f16Size, buf);
  }
  llama_model_free(m);
  llama_backend_free();
  std::printf("%d failed\n", failures);
  return failures ? 1 : 0;
}
