// lib/Quant from an installed tqc, without LLVM: every format encodes and
// decodes a row of head dim 64.
#include "tq/Quant/Format.h"

#include <cstdio>
#include <vector>

int main() {
  unsigned formats = 0;
  for (const tq::quant::FormatInfo &info : tq::quant::allFormats()) {
    auto format = tq::quant::Format::get(info.name, 64);
    if (!format) {
      std::fprintf(stderr, "%s: %s\n", info.name,
                   format.status().message().c_str());
      return 1;
    }
    std::vector<float> x(64, 0.5f), y(64);
    x[3] = -2.0f;
    std::vector<uint8_t> bytes(format->rowBytes());
    if (!format->encodeRow(x, bytes).ok() || !format->decodeRow(bytes, y).ok())
      return 1;
    ++formats;
  }
  std::printf("quant: %u formats round-tripped\n", formats);
  return formats > 5 ? 0 : 1;
}
