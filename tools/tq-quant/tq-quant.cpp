//===- tq-quant.cpp - Encode, decode and measure KV block formats ---------===//
//
// A command-line front end to lib/Quant:
//   tq-quant encode  --format F --dim D IN.f32 OUT.bin
//   tq-quant decode  --format F --dim D [--rotated] IN.bin OUT.f32
//   tq-quant stats   --format F --dim D [--queries N] IN.f32
//   tq-quant formats [--dim D]
//   tq-quant demo    [--rows N] [--dim D]
// Errors print one line on stderr, exit with status 1, and leave no output
// file behind (outputs are written to a temporary name and renamed).
//
//===----------------------------------------------------------------------===//

#include "tq/Quant/Format.h"
#include "tq/Quant/Npy.h"
#include "tq/Quant/Stats.h"
#include "tq/Version.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

using namespace tq::quant;

namespace {

constexpr const char *kUsage =
    R"(usage: tq-quant <command> [options] [files]

commands:
  encode  --format F --dim D IN.f32 OUT.bin
          IN holds rows of D little-endian float32 values; each row becomes
          its blocks (zero-padded to the format's block) and rows are
          concatenated in order.
  decode  --format F --dim D [--rotated] IN.bin OUT.f32
          The inverse of encode. --rotated writes the rotated-domain values
          (centroid * scale, padded dim per row) instead of the original.
  stats   --format F --dim D [--queries N] IN.f32
          Bits/value, compression vs f16, MSE, relative error, cosine and
          inner-product bias against N random Gaussian queries (default 64).
  formats [--dim D]
          The table of every format at head dim D (default 128).
  demo    [--rows N] [--dim D]
          Encodes the built-in K/V sample (Gaussian with outlier channels,
          default 256 rows of 128) with every format and prints the table.
  sample  --rows N --dim D [--seed S] OUT.f32
          Writes the built-in sample (seed S, default 20260525) as float32.

Errors print one line on stderr and exit with status 1.
)";

struct Args {
  std::string command;
  std::map<std::string, std::string> options;
  std::vector<std::string> positional;
  bool rotated = false;
};

[[noreturn]] void fail(const std::string &message) {
  std::fprintf(stderr, "tq-quant: error: %s\n", message.c_str());
  std::exit(1);
}

Args parseArgs(int argc, char **argv) {
  Args args;
  if (argc < 2)
    fail("missing command (try 'tq-quant --help')");
  args.command = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--rotated") {
      args.rotated = true;
    } else if (a.rfind("--", 0) == 0) {
      std::string key = a.substr(2), value;
      if (size_t eq = key.find('='); eq != std::string::npos) {
        value = key.substr(eq + 1);
        key = key.substr(0, eq);
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        fail("option --" + key + " needs a value");
      }
      if (key != "format" && key != "dim" && key != "queries" && key != "rows" &&
          key != "seed")
        fail("unknown option --" + key);
      args.options[key] = value;
    } else {
      args.positional.push_back(a);
    }
  }
  return args;
}

unsigned parseCount(const Args &args, const std::string &key,
                    unsigned fallback, bool required) {
  auto it = args.options.find(key);
  if (it == args.options.end()) {
    if (required)
      fail("missing --" + key);
    return fallback;
  }
  const std::string &s = it->second;
  char *end = nullptr;
  errno = 0;
  unsigned long v = std::strtoul(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno != 0 || v == 0 || v > 1000000 ||
      s[0] == '-')
    fail("--" + key + " must be an integer from 1 to 1000000, got '" + s +
         "'");
  return unsigned(v);
}

Format getFormat(const Args &args) {
  auto it = args.options.find("format");
  if (it == args.options.end())
    fail("missing --format (see 'tq-quant formats')");
  unsigned dim = parseCount(args, "dim", 0, true);
  Result<Format> f = Format::get(it->second, dim);
  if (!f)
    fail(f.status().message());
  return *f;
}

void expectPositional(const Args &args, size_t n, const char *what) {
  if (args.positional.size() != n)
    fail("'" + args.command + "' takes " + what + ", got " +
         std::to_string(args.positional.size()) + " file argument(s)");
}

std::vector<uint8_t> readFile(const std::string &path) {
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    fail("cannot open '" + path + "': " + std::strerror(errno));
  std::vector<uint8_t> data;
  uint8_t buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
    data.insert(data.end(), buf, buf + n);
  bool bad = std::ferror(f);
  std::fclose(f);
  if (bad)
    fail("cannot read '" + path + "'");
  return data;
}

/// Writes via a temporary file in the same directory, renamed into place
/// only when everything was written.
void writeFileAtomically(const std::string &path, const void *data,
                         size_t size) {
  std::string tmp = path + ".tmp-tq-quant";
  FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    fail("cannot create '" + path + "': " + std::strerror(errno));
  bool ok = std::fwrite(data, 1, size, f) == size;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail("cannot write '" + path + "'");
  }
}

/// Rows of `dim` floats: raw float32, or an .npy whose last dimension is
/// `dim` (any number of leading dimensions: rows, or tokens x heads).
std::vector<float> readRows(const std::string &path, unsigned dim) {
  std::vector<uint8_t> bytes = readFile(path);
  if (isNpy(bytes)) {
    Result<NpyArray> array = parseNpy(bytes);
    if (!array)
      fail("'" + path + "': " + array.status().message());
    if (array->shape.empty() || array->shape.back() != dim)
      fail("'" + path + "' has shape " + describeShape(array->shape) +
           ", whose last dimension is not --dim " + std::to_string(dim));
    if (array->values.empty())
      fail("'" + path + "' has no rows");
    return std::move(array->values);
  }
  size_t rowBytes = size_t(dim) * sizeof(float);
  if (bytes.empty())
    fail("'" + path + "' is empty");
  if (bytes.size() % rowBytes != 0)
    fail("'" + path + "' has " + std::to_string(bytes.size()) +
         " bytes, not a whole number of rows of " + std::to_string(dim) +
         " float32 (" + std::to_string(rowBytes) + " bytes)");
  std::vector<float> rows(bytes.size() / sizeof(float));
  std::memcpy(rows.data(), bytes.data(), bytes.size());
  return rows;
}

/// Writes decoded rows of `width` floats: an .npy of shape (rows, width)
/// where the path ends in .npy, raw float32 otherwise.
void writeRows(const std::string &path, const std::vector<float> &rows,
               size_t width) {
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0) {
    const size_t shape[] = {rows.size() / width, width};
    std::vector<uint8_t> npy = writeNpy(shape, rows);
    writeFileAtomically(path, npy.data(), npy.size());
    return;
  }
  writeFileAtomically(path, rows.data(), rows.size() * sizeof(float));
}

void reportSaturation(size_t saturated) {
  if (saturated)
    std::fprintf(stderr,
                 "tq-quant: warning: %zu block(s) saturated: a norm or scale "
                 "exceeded its range and was clamped to the largest finite "
                 "value\n",
                 saturated);
}

int runEncode(const Args &args) {
  Format format = getFormat(args);
  expectPositional(args, 2, "IN.f32 OUT.bin");
  std::vector<float> rows = readRows(args.positional[0], format.headDim());
  const size_t numRows = rows.size() / format.headDim();
  std::vector<uint8_t> out(numRows * format.rowBytes());
  EncodeStats stats;
  for (size_t r = 0; r < numRows; ++r) {
    Status s = format.encodeRow(
        std::span<const float>(rows).subspan(r * format.headDim(),
                                             format.headDim()),
        std::span<uint8_t>(out).subspan(r * format.rowBytes(),
                                        format.rowBytes()),
        &stats);
    if (!s)
      fail("'" + args.positional[0] + "': row " + std::to_string(r) + ": " +
           s.message());
  }
  writeFileAtomically(args.positional[1], out.data(), out.size());
  reportSaturation(stats.saturatedBlocks);
  return 0;
}

int runDecode(const Args &args) {
  Format format = getFormat(args);
  expectPositional(args, 2, "IN.bin OUT.f32");
  std::vector<uint8_t> in = readFile(args.positional[0]);
  if (in.empty())
    fail("'" + args.positional[0] + "' is empty");
  if (isNpy(in))
    fail("'" + args.positional[0] +
         "' is an .npy file; decode takes the packed rows 'encode' wrote");
  if (in.size() % format.rowBytes() != 0)
    fail("'" + args.positional[0] + "' has " + std::to_string(in.size()) +
         " bytes, not a whole number of " + format.name() + " rows of dim " +
         std::to_string(format.headDim()) + " (" +
         std::to_string(format.rowBytes()) + " bytes)");
  const size_t numRows = in.size() / format.rowBytes();
  const Domain domain = args.rotated ? Domain::Rotated : Domain::Original;
  const size_t width = args.rotated ? format.paddedDim() : format.headDim();
  std::vector<float> out(numRows * width);
  for (size_t r = 0; r < numRows; ++r) {
    Status s = format.decodeRow(
        std::span<const uint8_t>(in).subspan(r * format.rowBytes(),
                                             format.rowBytes()),
        std::span<float>(out).subspan(r * width, width), domain);
    if (!s)
      fail("row " + std::to_string(r) + ": " + s.message());
  }
  writeRows(args.positional[1], out, width);
  return 0;
}

void printQualityHeader() {
  std::printf("%-13s %9s %8s %12s %9s %9s %10s %9s\n", "format", "bits/val",
              "x vs f16", "mse", "rel.err", "cosine", "ip.bias", "ip.rmse");
}

void printQualityRow(const std::string &name, const QualityReport &r) {
  std::printf("%-13s %9.3f %8.2f %12.5g %9.5f %9.6f %+10.5f %9.5f\n",
              name.c_str(), r.bitsPerValue, r.compressionVsF16, r.mse,
              r.relError, r.cosine, r.ipBias, r.ipRelRmse);
}

int runStats(const Args &args) {
  Format format = getFormat(args);
  expectPositional(args, 1, "IN.f32");
  unsigned queries = parseCount(args, "queries", 64, false);
  std::vector<float> rows = readRows(args.positional[0], format.headDim());
  Result<QualityReport> r = measureQuality(format, rows, queries);
  if (!r)
    fail("'" + args.positional[0] + "': " + r.status().message());
  std::printf("%zu rows of dim %u (padded %u), %zu bytes per row\n", r->rows,
              format.headDim(), format.paddedDim(), format.rowBytes());
  printQualityHeader();
  printQualityRow(format.name(), *r);
  std::printf("ip.bias standard error: %.5f (bias and rmse in units of the "
              "RMS exact score)\n",
              r->ipBiasStdErr);
  reportSaturation(r->saturatedBlocks);
  return 0;
}

int runFormats(const Args &args) {
  expectPositional(args, 0, "no files");
  unsigned dim = parseCount(args, "dim", 128, false);
  std::printf("formats at head dim %u:\n", dim);
  std::printf("%-13s %6s %6s %9s %9s  %s\n", "format", "block", "bytes",
              "row bytes", "bits/val", "description");
  for (const FormatInfo &info : allFormats()) {
    Result<Format> f = Format::get(info.name, dim);
    if (!f) {
      std::printf("%-13s  (not available at dim %u: %s)\n", info.name, dim,
                  f.status().message().c_str());
      continue;
    }
    std::printf("%-13s %6u %6u %9zu %9.3f  %s\n", info.name, f->blockLen(),
                f->bytesPerBlock(), f->rowBytes(), f->bitsPerValue(),
                info.summary);
  }
  return 0;
}

int runSample(const Args &args) {
  expectPositional(args, 1, "OUT.f32");
  unsigned rows = parseCount(args, "rows", 0, true);
  unsigned dim = parseCount(args, "dim", 0, true);
  unsigned seed = parseCount(args, "seed", 20260525, false);
  std::vector<float> sample = makeOutlierSample(rows, dim, seed);
  writeFileAtomically(args.positional[0], sample.data(),
                      sample.size() * sizeof(float));
  return 0;
}

int runDemo(const Args &args) {
  expectPositional(args, 0, "no files");
  unsigned rows = parseCount(args, "rows", 256, false);
  unsigned dim = parseCount(args, "dim", 128, false);
  std::vector<float> sample = makeOutlierSample(rows, dim);
  std::printf("built-in K/V sample: %u rows x %u, N(0,1) with outlier "
              "channels (x12, x25, x-18, x40)\n",
              rows, dim);
  printQualityHeader();
  for (const FormatInfo &info : allFormats()) {
    Result<Format> f = Format::get(info.name, dim);
    if (!f)
      fail(f.status().message());
    Result<QualityReport> r = measureQuality(*f, sample);
    if (!r)
      fail(std::string(info.name) + ": " + r.status().message());
    printQualityRow(info.name, *r);
  }
  std::printf("(ip.bias, ip.rmse: error of <q, k_hat> over 64 Gaussian "
              "queries, in units of the RMS exact score)\n");
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("tq-quant (tqc %s (git %s))\n", TQC_VERSION,
                TQC_GIT_REVISION);
    return 0;
  }
  if (argc >= 2 && (std::strcmp(argv[1], "--help") == 0 ||
                    std::strcmp(argv[1], "-h") == 0 ||
                    std::strcmp(argv[1], "help") == 0)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  Args args = parseArgs(argc, argv);
  if (args.rotated && args.command != "decode")
    fail("--rotated only applies to 'decode'");
  if (args.command == "encode")
    return runEncode(args);
  if (args.command == "decode")
    return runDecode(args);
  if (args.command == "stats")
    return runStats(args);
  if (args.command == "formats")
    return runFormats(args);
  if (args.command == "demo")
    return runDemo(args);
  if (args.command == "sample")
    return runSample(args);
  fail("unknown command '" + args.command + "' (try 'tq-quant --help')");
}
