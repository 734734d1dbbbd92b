// stream-overlap.c - whether a core overlaps a decode kernel's K/V reads
// with its arithmetic when the rows come from DRAM (docs/perf/cpu.md,
// "What a flushed decode pays", session #29).
//
// Not part of tqc: a measuring probe. It walks 32768 rows of 100 bytes
// (turbo3_0 at head dim 256) of K and of V in tiles of 512 rows, as the
// fused decode kernel does: per tile, the K rows (two loads a row and
// DOTS_K vpdpbusd), optionally the V rows' two norms gathered, then four
// passes over the V row pairs (32 bytes of each row a pass and DOTS_V
// vpdpbusd), optionally prefetching the next tile's rows as the kernel
// does. Each case runs warm (the rows just read) and after reading
// 960 MiB (the rows in DRAM), best of 20, and prints the difference.
//
//   clang -O2 -march=native scripts/stream-overlap.c -o stream-overlap
//   ./stream-overlap PREFETCH GATHER DOTS_K DOTS_V     (e.g. 1 1 16 16)

#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kRowBytes = 100, kRows = 32768, kTile = 512 };

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static volatile long sink;

static void flush(const char *buffer, size_t bytes) {
  long s = 0;
  for (size_t i = 0; i < bytes; i += 64)
    s += buffer[i];
  sink = s;
}

static int prefetch, gather, dotsK, dotsV;

#define DOTS(x, n)                                                             \
  for (int w = 0; w < (n); w += 4) {                                           \
    a0 = _mm512_dpbusd_epi32(a0, x, q);                                        \
    a1 = _mm512_dpbusd_epi32(a1, q, x);                                        \
    a2 = _mm512_dpbusd_epi32(a2, x, q);                                        \
    a3 = _mm512_dpbusd_epi32(a3, q, x);                                        \
  }

__attribute__((noinline)) static __m512i run(const char *k, const char *v,
                                             short *scales) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  const __m512i q = _mm512_set1_epi8(3);
  const size_t next = (size_t)kTile * kRowBytes;
  for (size_t t = 0; t < kRows; t += kTile) {
    for (size_t r = t; r < t + kTile; ++r) {
      const char *p = k + r * kRowBytes;
      if (prefetch) {
        _mm_prefetch(p + next, _MM_HINT_T0);
        _mm_prefetch(p + next + kRowBytes - 1, _MM_HINT_T0);
      }
      __m512i x = _mm512_loadu_si512(p);
      __m512i y = _mm512_castsi256_si512(_mm256_loadu_si256((void *)(p + 64)));
      DOTS(x, dotsK / 2)
      DOTS(y, dotsK / 2)
    }
    if (gather)
      for (size_t r = t; r < t + kTile; ++r) {
        scales[2 * (r - t)] = *(const short *)(v + r * kRowBytes);
        scales[2 * (r - t) + 1] = *(const short *)(v + r * kRowBytes + 50);
      }
    for (int pass = 0; pass < 4; ++pass) {
      const int at = (pass / 2) * 50 + 2 + (pass % 2) * 16;
      for (size_t r = t; r < t + kTile; r += 2) {
        const char *p = v + r * kRowBytes;
        if (prefetch && pass == 0)
          for (int e = 0; e < 2; ++e) {
            _mm_prefetch(p + next + e * kRowBytes, _MM_HINT_T0);
            _mm_prefetch(p + next + e * kRowBytes + kRowBytes - 1, _MM_HINT_T0);
          }
        __m512i x = _mm512_castsi256_si512(_mm256_loadu_si256((void *)(p + at)));
        x = _mm512_inserti64x4(
            x, _mm256_loadu_si256((void *)(p + kRowBytes + at)), 1);
        x = _mm512_add_epi32(x, _mm512_set1_epi16(scales[2 * (r - t)]));
        DOTS(x, dotsV)
      }
    }
  }
  return _mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3));
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s PREFETCH GATHER DOTS_K DOTS_V\n", argv[0]);
    return 2;
  }
  prefetch = atoi(argv[1]);
  gather = atoi(argv[2]);
  dotsK = atoi(argv[3]);
  dotsV = atoi(argv[4]);
  const size_t flushBytes = (size_t)960 << 20;
  const size_t bytes = (size_t)kRows * kRowBytes + (1 << 20);
  char *flushBuffer = malloc(flushBytes), *k = malloc(bytes), *v = malloc(bytes);
  short *scales = malloc(4 * kTile);
  if (!flushBuffer || !k || !v || !scales) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  memset(flushBuffer, 1, flushBytes);
  memset(k, 2, bytes);
  memset(v, 2, bytes);
  double warm = 1e9, flushed = 1e9;
  for (int round = 0; round < 20; ++round) {
    double t = now();
    sink += _mm512_reduce_add_epi32(run(k, v, scales));
    t = now() - t;
    warm = t < warm ? t : warm;
    flush(flushBuffer, flushBytes);
    t = now();
    sink += _mm512_reduce_add_epi32(run(k, v, scales));
    t = now() - t;
    flushed = t < flushed ? t : flushed;
  }
  printf("prefetch %d gather %d dots %d/%d: warm %.3f ms, flushed %.3f ms "
         "(+%.0f%%)\n",
         prefetch, gather, dotsK, dotsV, warm * 1e3, flushed * 1e3,
         (flushed / warm - 1) * 100);
  return 0;
}
