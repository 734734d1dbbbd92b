// amx-vector-overlap.c - whether AMX tile products run beside the vector
// ports' work or take from it (docs/perf/cpu.md, "AMX pair sums, tried",
// session #29).
//
// Not part of tqc: a measuring probe for CPUs with AMX-BF16 (Linux must
// grant the tile data: the probe asks with arch_prctl). Each iteration
// issues TDP tdpbf16ps on tiles of 4 rows (a decode's GQA group) and VEC
// independent vpermb (one uop each on ports 0/5, as the decode's lookups
// and unpacks); the time per iteration of each mix is printed. Were the
// tile products independent of the vector ports, a mix would take the
// longer of its two parts alone.
//
//   clang -O2 scripts/amx-vector-overlap.c -o amx-vector-overlap
//   ./amx-vector-overlap

#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { kArchReqXcompPerm = 0x1023, kXfeatureTileData = 18 };

struct TileConfig {
  uint8_t palette, start;
  uint8_t reserved[14];
  uint16_t bytesPerRow[16];
  uint8_t rows[16];
} __attribute__((packed));

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

__attribute__((aligned(64))) static uint16_t operand[16][32];
static volatile int sink;

__attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vbmi")))
static double nsPerIteration(long iterations, int tdp, int vec) {
  struct TileConfig config;
  memset(&config, 0, sizeof config);
  config.palette = 1;
  for (int t = 0; t < 6; ++t) {
    config.rows[t] = t == 5 ? 16 : 4; // sums 0-3, weights 4: 4 rows
    config.bytesPerRow[t] = 64;
  }
  _tile_loadconfig(&config);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  __m512i v[12];
  for (int i = 0; i < 12; ++i)
    v[i] = _mm512_set1_epi32(i);
  const __m512i index = _mm512_set1_epi8(1);
  double t = now();
  for (long i = 0; i < iterations; ++i) {
    if (tdp > 0)
      _tile_dpbf16ps(0, 4, 5);
    if (tdp > 1)
      _tile_dpbf16ps(1, 4, 5);
    if (tdp > 2)
      _tile_dpbf16ps(2, 4, 5);
    if (tdp > 3)
      _tile_dpbf16ps(3, 4, 5);
    for (int k = 0; k < vec; k += 12)
#pragma clang loop unroll(full)
      for (int j = 0; j < 12; ++j)
        v[j] = _mm512_permutexvar_epi8(index, v[j]);
  }
  t = now() - t;
  _tile_release();
  __m512i s = v[0];
  for (int i = 1; i < 12; ++i)
    s = _mm512_add_epi32(s, v[i]);
  sink = _mm512_reduce_add_epi32(s);
  return t / iterations * 1e9;
}

int main(void) {
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureTileData) != 0) {
    fprintf(stderr, "the kernel refused the AMX tile data\n");
    return 1;
  }
  for (int vec = 0; vec <= 96; vec += 48)
    for (int tdp = 0; tdp <= 4; tdp += 4)
      printf("%d tdpbf16ps (4-row tiles) + %2d vpermb: %.1f ns per iteration\n",
             tdp, vec, nsPerIteration(300000, tdp, vec));
  return 0;
}
