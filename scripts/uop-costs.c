// uop-costs.c - what the CPU decode kernels' vector instructions cost on
// this core, alone and beside the dot products (docs/perf/cpu.md,
// "What binds the decode loops").
//
// Not part of tqc: a measuring probe. Each row times 12 independent zmm
// instructions per iteration (dependency-free: sources zmm20/zmm21,
// destinations rotating over zmm12-15 or k2/k3), alone and after 12
// independent `vpdpwssd` (which run two per cycle on Intel's ports 0/5
// and AMD's two FMA pipes). An instruction that adds half a cycle beside
// the dots is one uop on those ports; one that adds a cycle is two (or
// one on a single port the dots also need).
//
// Cycles assume the core runs `vpaddd` two per cycle; the GHz it implies
// is printed.
//
//   clang -O2 -march=native scripts/uop-costs.c -o uop-costs
//   ./uop-costs              (needs AVX-512F/BW/VNNI/VBMI/BITALG)

#include <stdio.h>
#include <time.h>

enum { kIterations = 30000000 };

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// One instruction with its operands, then the line break.
#define I(ins, ops) ins " " ops "\n\t"
// Twelve with a zmm destination rotating over zmm12-15.
#define D12(ins, src)                                                          \
  I(ins, src "%%zmm12") I(ins, src "%%zmm13") I(ins, src "%%zmm14")           \
  I(ins, src "%%zmm15") I(ins, src "%%zmm12") I(ins, src "%%zmm13")           \
  I(ins, src "%%zmm14") I(ins, src "%%zmm15") I(ins, src "%%zmm12")           \
  I(ins, src "%%zmm13") I(ins, src "%%zmm14") I(ins, src "%%zmm15")
// Twelve that also read their destination (accumulating, two-table or
// merge-masked): twelve destinations, so no chain crosses an iteration's
// instructions (`suffix`: a merge mask, or nothing).
#define A12(ins, src, suffix)                                                  \
  I(ins, src "%%zmm12" suffix) I(ins, src "%%zmm13" suffix)                   \
  I(ins, src "%%zmm14" suffix) I(ins, src "%%zmm15" suffix)                   \
  I(ins, src "%%zmm16" suffix) I(ins, src "%%zmm17" suffix)                   \
  I(ins, src "%%zmm18" suffix) I(ins, src "%%zmm19" suffix)                   \
  I(ins, src "%%zmm22" suffix) I(ins, src "%%zmm23" suffix)                   \
  I(ins, src "%%zmm24" suffix) I(ins, src "%%zmm25" suffix)
#define MASK "%{%%k1%}"
// Twelve with a mask destination (k2, k3).
#define K12(ins, src)                                                          \
  I(ins, src "%%k2") I(ins, src "%%k3") I(ins, src "%%k2") I(ins, src "%%k3") \
  I(ins, src "%%k2") I(ins, src "%%k3") I(ins, src "%%k2") I(ins, src "%%k3") \
  I(ins, src "%%k2") I(ins, src "%%k3") I(ins, src "%%k2") I(ins, src "%%k3")
// The twelve independent dot products (accumulators zmm0-11).
#define DOTS                                                                   \
  I("vpdpwssd", "%%zmm20, %%zmm21, %%zmm0")                                    \
  I("vpdpwssd", "%%zmm20, %%zmm21, %%zmm1")                                    \
  I("vpdpwssd", "%%zmm20, %%zmm21, %%zmm2")                                    \
  I("vpdpwssd", "%%zmm20, %%zmm21, %%zmm3")                                    \
  I("vpdpwssd", "%%zmm20, %%zmm21, %%zmm4")                                    \
  I("vpdpwssd", "%%zmm20, %%zmm21, %%zmm5")                                    \
  I("vpdpwssd", "%%zmm20, %%zmm21, %%zmm6")                                    \
  I("vpdpwssd", "%%zmm20, %%zmm21, %%zmm7")                                    \
  I("vpdpwssd", "%%zmm20, %%zmm21, %%zmm8")                                    \
  I("vpdpwssd", "%%zmm20, %%zmm21, %%zmm9")                                    \
  I("vpdpwssd", "%%zmm20, %%zmm21, %%zmm10")                                   \
  I("vpdpwssd", "%%zmm20, %%zmm21, %%zmm11")
#define CLOBBERS                                                               \
  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",      \
      "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16",   \
      "xmm17", "xmm18", "xmm19", "xmm22", "xmm23", "xmm24", "xmm25"

// ns per iteration of `body`, alone and after the dots.
#define MEASURE(name, body)                                                    \
  do {                                                                         \
    double t = now();                                                          \
    for (long i = 0; i < kIterations; ++i)                                     \
      __asm__ volatile(body ::: CLOBBERS);                                     \
    const double alone = (now() - t) / kIterations * 1e9;                      \
    t = now();                                                                 \
    for (long i = 0; i < kIterations; ++i)                                     \
      __asm__ volatile(DOTS body ::: CLOBBERS);                                \
    const double withDots = (now() - t) / kIterations * 1e9;                   \
    printf("| `%s` | %.2f | %.2f |\n", name, alone / 12 * ghz,                 \
           (withDots - dots) / 12 * ghz);                                      \
  } while (0)

int main(void) {
  double t = now();
  for (long i = 0; i < kIterations; ++i)
    __asm__ volatile(D12("vpaddd", "%%zmm20, %%zmm21, ") ::: CLOBBERS);
  // vpaddd zmm: two per cycle.
  const double ghz = 12 / 2.0 / ((now() - t) / kIterations * 1e9);
  t = now();
  for (long i = 0; i < kIterations; ++i)
    __asm__ volatile(DOTS ::: CLOBBERS);
  const double dots = (now() - t) / kIterations * 1e9;
  printf("~%.2f GHz (vpaddd at two per cycle); 12 vpdpwssd: %.2f cycles\n\n",
         ghz, dots * ghz);
  printf("| zmm instruction | alone, cycles each | added to the dots, "
         "cycles each |\n| --- | --- | --- |\n");
  MEASURE("vpaddd", D12("vpaddd", "%%zmm20, %%zmm21, "));
  MEASURE("vpternlogd", A12("vpternlogd", "$0xca, %%zmm20, %%zmm21, ", ""));
  MEASURE("vpdpbusd", A12("vpdpbusd", "%%zmm20, %%zmm21, ", ""));
  MEASURE("vfmadd231ps", A12("vfmadd231ps", "%%zmm20, %%zmm21, ", ""));
  MEASURE("vpermb", D12("vpermb", "%%zmm20, %%zmm21, "));
  MEASURE("vpermw", D12("vpermw", "%%zmm20, %%zmm21, "));
  MEASURE("vpermd", D12("vpermd", "%%zmm20, %%zmm21, "));
  MEASURE("vpshufb", D12("vpshufb", "%%zmm20, %%zmm21, "));
  MEASURE("vpunpcklbw", D12("vpunpcklbw", "%%zmm20, %%zmm21, "));
  MEASURE("vpmultishiftqb", D12("vpmultishiftqb", "%%zmm20, %%zmm21, "));
  MEASURE("vpsrlvw", D12("vpsrlvw", "%%zmm20, %%zmm21, "));
  MEASURE("vpsrlw $8", D12("vpsrlw", "$8, %%zmm21, "));
  MEASURE("vshufi64x2", D12("vshufi64x2", "$0x88, %%zmm20, %%zmm21, "));
  MEASURE("vinserti64x4", D12("vinserti64x4", "$1, %%ymm20, %%zmm21, "));
  MEASURE("vpermt2q", A12("vpermt2q", "%%zmm20, %%zmm21, ", ""));
  MEASURE("vpermt2b", A12("vpermt2b", "%%zmm20, %%zmm21, ", ""));
  MEASURE("vpmovzxbw", D12("vpmovzxbw", "%%ymm20, "));
  MEASURE("vcvtph2ps", D12("vcvtph2ps", "%%ymm20, "));
  MEASURE("vmovdqu8 {k}", A12("vmovdqu8", "%%zmm20, ", MASK));
  MEASURE("vpaddb {k}", A12("vpaddb", "%%zmm20, %%zmm21, ", MASK));
  MEASURE("vptestmb", K12("vptestmb", "%%zmm20, %%zmm21, "));
  MEASURE("vpshufbitqmb", K12("vpshufbitqmb", "%%zmm20, %%zmm21, "));
  return 0;
}
