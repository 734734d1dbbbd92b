// decode-floor.c - how much a 3-bit row decode costs next to the
// multiply-adds it feeds, on one x86 core with AVX-512 (docs/perf/cpu.md).
//
// Not part of tqc: a measuring probe for the CPU decode kernels' weighted
// sum. One "row" is what the kernel's loop does per token and half row:
// four 16-value chunks of a turbo3_0-like row decoded (2-bit low plane,
// 1-bit top plane, an 8-entry codebook) and 16 multiply-adds into 4 heads
// x 4 chunks of accumulators. Data stay in L1, so the numbers are the
// core's, not memory's.
//
//   clang -O3 -march=native scripts/decode-floor.c -o decode-floor
//   ./decode-floor           (needs AVX-512F/BW/VBMI)

#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

enum { kRows = 512, kRowBytes = 56, kHeads = 4, kChunks = 4 };

static uint8_t bytes[kRows * kRowBytes + 64] __attribute__((aligned(64)));
static float weights[kRows * kHeads];

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// The low plane's 16 two-bit fields of chunk c are one 32-bit word at
// byte 2 + 4c, the top plane's 16 bits two bytes at 34 + 2c.
static inline uint32_t lowWord(const uint8_t *row, int c) {
  uint32_t w;
  __builtin_memcpy(&w, row + 2 + 4 * c, 4);
  return w;
}
static inline uint16_t topBits(const uint8_t *row, int c) {
  uint16_t w;
  __builtin_memcpy(&w, row + 34 + 2 * c, 2);
  return w;
}

static const float kCodebook[16] = {-2, -1, -.5f, -.1f, .1f, .5f, 1, 2,
                                    -2, -1, -.5f, -.1f, .1f, .5f, 1, 2};

typedef __m512 (*DecodeFn)(const uint8_t *row, int c);

// As the kernels decode: broadcast words, per-lane shifts, a mask and a
// bit-select merging the planes, one vpermps.
static inline __m512 decodeShifts(const uint8_t *row, int c) {
  const __m512i lowShift = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16,
                                             18, 20, 22, 24, 26, 28, 30);
  const __m512i topShift = _mm512_setr_epi32(0, 0, 0, 1, 2, 3, 4, 5, 6, 7,
                                             8, 9, 10, 11, 12, 13);
  __m512i low = _mm512_srlv_epi32(_mm512_set1_epi32(lowWord(row, c)),
                                  lowShift);
  uint32_t topWord; // (read as a word, as the kernels do)
  __builtin_memcpy(&topWord, row + 34 + 2 * c, 4);
  __m512i top = _mm512_and_si512(
      _mm512_srlv_epi32(_mm512_set1_epi32(topWord), topShift),
      _mm512_set1_epi32(4));
  __m512i index = _mm512_ternarylogic_epi32(low, top, _mm512_set1_epi32(3),
                                            0xf8);
  return _mm512_permutexvar_ps(index, _mm512_loadu_ps(kCodebook));
}

// The top bit as a mask register: two half-table permutes, one masked.
static inline __m512 decodeMask(const uint8_t *row, int c) {
  const __m512i lowShift = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16,
                                             18, 20, 22, 24, 26, 28, 30);
  const __m512 lower = _mm512_setr_ps(-2, -1, -.5f, -.1f, -2, -1, -.5f, -.1f,
                                      -2, -1, -.5f, -.1f, -2, -1, -.5f, -.1f);
  const __m512 upper = _mm512_setr_ps(.1f, .5f, 1, 2, .1f, .5f, 1, 2, .1f,
                                      .5f, 1, 2, .1f, .5f, 1, 2);
  __m512i low = _mm512_srlv_epi32(_mm512_set1_epi32(lowWord(row, c)),
                                  lowShift);
  return _mm512_mask_permutexvar_ps(_mm512_permutexvar_ps(low, lower),
                                    topBits(row, c), low, upper);
}

// AVX-512 VBMI: each byte picks its bits from a broadcast 64-bit word.
static inline __m512 decodeMultishift(const uint8_t *row, int c) {
  uint64_t lowQ, topQ;
  __builtin_memcpy(&lowQ, row + 2 + 4 * c, 8);
  __builtin_memcpy(&topQ, row + 30 + 2 * c, 8);
  // Lane l's low byte: bits 2l.. of the low word; bits 30 + l.. of the
  // top word (its bit l lands at bit 2).
  __m512i lowCtl = _mm512_set1_epi32(0x18100800);
  __m512i topCtl = _mm512_set1_epi32(0x1e16);
  __m512i low = _mm512_multishift_epi64_epi8(lowCtl,
                                             _mm512_set1_epi64(lowQ));
  __m512i top = _mm512_multishift_epi64_epi8(topCtl,
                                             _mm512_set1_epi64(topQ));
  __m512i index = _mm512_ternarylogic_epi32(top, low, _mm512_set1_epi32(3),
                                            0xe4);
  return _mm512_permutexvar_ps(index, _mm512_loadu_ps(kCodebook));
}

// No decode: one broadcast per chunk (the FMA bound).
static inline __m512 decodeNone(const uint8_t *row, int c) {
  return _mm512_set1_ps((float)row[c]);
}

#define DEFINE_LOOP(name, decode)                                            \
  __attribute__((noinline)) static void name(float *out) {                 \
    __m512 acc[kHeads * kChunks];                                          \
    for (int i = 0; i < kHeads * kChunks; ++i)                             \
      acc[i] = _mm512_setzero_ps();                                        \
    for (int r = 0; r < kRows; ++r) {                                      \
      const uint8_t *row = bytes + r * kRowBytes;                          \
      __m512 v[kChunks];                                                   \
      for (int c = 0; c < kChunks; ++c)                                    \
        v[c] = decode(row, c);                                             \
      for (int h = 0; h < kHeads; ++h) {                                   \
        __m512 w = _mm512_set1_ps(weights[r * kHeads + h]);                \
        for (int c = 0; c < kChunks; ++c)                                  \
          acc[h * kChunks + c] =                                           \
              _mm512_fmadd_ps(w, v[c], acc[h * kChunks + c]);              \
      }                                                                    \
    }                                                                      \
    for (int i = 0; i < kHeads * kChunks; ++i)                             \
      _mm512_storeu_ps(out + 16 * i, acc[i]);                              \
  }

DEFINE_LOOP(loopShifts, decodeShifts)
DEFINE_LOOP(loopMask, decodeMask)
DEFINE_LOOP(loopMultishift, decodeMultishift)
DEFINE_LOOP(loopNone, decodeNone)

int main(void) {
  for (int i = 0; i < kRows * kRowBytes; ++i)
    bytes[i] = (uint8_t)(i * 37);
  for (int i = 0; i < kRows * kHeads; ++i)
    weights[i] = 1e-3f * (float)(i % 97);
  struct {
    const char *name;
    void (*run)(float *);
  } loops[] = {{"multiply-adds only (FMA bound)", loopNone},
               {"shifts + bit-select + vpermps", loopShifts},
               {"top bit as mask register", loopMask},
               {"vpmultishiftqb", loopMultishift}};
  float out[kHeads * kChunks * 16];
  for (unsigned k = 0; k < sizeof loops / sizeof loops[0]; ++k) {
    double best = 1e30;
    for (int round = 0; round < 20; ++round) {
      double t = seconds();
      for (int i = 0; i < 200; ++i)
        loops[k].run(out);
      t = seconds() - t;
      best = t < best ? t : best;
    }
    printf("%-34s %6.2f ns per row (checksum %g)\n", loops[k].name,
           best / 200 / kRows * 1e9, (double)out[5]);
  }
  return 0;
}
