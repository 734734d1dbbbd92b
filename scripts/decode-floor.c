// decode-floor.c - how much a 3-bit row decode costs next to the
// multiply-adds it feeds, on one x86 core with AVX-512 (docs/perf/cpu.md).
//
// Not part of tqc: a measuring probe for the CPU decode kernels' two inner
// loops, with data in L1 so the numbers are the core's, not memory's. Rows
// are turbo3_0-like: 128 values as a 2-bit low plane (bytes 2..33, four
// fields a byte) and a 1-bit top plane (bytes 34..49), an 8-entry codebook.
//
// - Weighted sum (per token and half row): four 16-value chunks decoded,
//   16 multiply-adds into 4 heads x 4 chunks of accumulators.
// - Scores (per token): eight chunks decoded, 32 multiply-adds into the
//   (token, head) accumulators of a 4-token step, chunk-major across the
//   step's tokens as the kernels interleave them, and one shuffle tree
//   reducing the step's 16 dot products to a vector.
//
// Every decoder is checked against a scalar decode before timing.
//
//   clang -O3 -march=native scripts/decode-floor.c -o decode-floor
//   ./decode-floor           (needs AVX-512F/BW/VBMI)

#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

enum {
  kRows = 512,
  kRowBytes = 56,
  kHeads = 4,
  kChunks = 4, // per weighted-sum row (half a row)
  kRowChunks = 8,
  kStepTokens = 4
};

static uint8_t bytes[kRows * kRowBytes + 64] __attribute__((aligned(64)));
static float weights[kRows * kHeads];
static float query[kHeads * kRowChunks * 16] __attribute__((aligned(64)));

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// Chunk c (values 16c .. 16c + 15) has its low fields in the 32-bit word
// at byte 2 + 4c and its top bits in the two bytes at 34 + 2c.
static inline uint32_t wordAt(const uint8_t *p) {
  uint32_t w;
  __builtin_memcpy(&w, p, 4);
  return w;
}

static const float kCodebook[16] = {-2, -1, -.5f, -.1f, .1f, .5f, 1, 2,
                                    -2, -1, -.5f, -.1f, .1f, .5f, 1, 2};

static float decodeScalar(const uint8_t *row, int value) {
  int low = (row[2 + value / 4] >> (2 * (value % 4))) & 3;
  int top = (row[34 + value / 8] >> (value % 8)) & 1;
  return kCodebook[low | top << 2];
}

// As the kernels decode: broadcast words, per-lane shifts, a mask and a
// bit-select merging the planes, one vpermps. The top word is read one
// byte early so every lane's shift is a right shift.
static inline __m512 decodeShifts(const uint8_t *row, int c) {
  const __m512i lowShift = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16,
                                             18, 20, 22, 24, 26, 28, 30);
  const __m512i topShift = _mm512_setr_epi32(6, 7, 8, 9, 10, 11, 12, 13, 14,
                                             15, 16, 17, 18, 19, 20, 21);
  __m512i low = _mm512_srlv_epi32(
      _mm512_set1_epi32(wordAt(row + 2 + 4 * c)), lowShift);
  __m512i top = _mm512_and_si512(
      _mm512_srlv_epi32(_mm512_set1_epi32(wordAt(row + 33 + 2 * c)),
                        topShift),
      _mm512_set1_epi32(4));
  // top | (low & 3)
  __m512i index = _mm512_ternarylogic_epi32(top, low, _mm512_set1_epi32(3),
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
  __m512i low = _mm512_srlv_epi32(
      _mm512_set1_epi32(wordAt(row + 2 + 4 * c)), lowShift);
  uint16_t top;
  __builtin_memcpy(&top, row + 34 + 2 * c, 2);
  return _mm512_mask_permutexvar_ps(_mm512_permutexvar_ps(low, lower), top,
                                    low, upper);
}

// AVX-512 VBMI: each lane's low byte picks its bits from a broadcast
// 64-bit word.
static inline __m512 decodeMultishift(const uint8_t *row, int c) {
  uint64_t lowQ, topQ;
  __builtin_memcpy(&lowQ, row + 2 + 4 * c, 8);
  __builtin_memcpy(&topQ, row + 32 + 2 * c, 8);
  // Lane l: bits 2l.. of the low word; bits 14 + l.. of the top word
  // (its bit l lands at bit 2).
  const __m512i lowCtl = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16,
                                           18, 20, 22, 24, 26, 28, 30);
  const __m512i topCtl = _mm512_setr_epi32(14, 15, 16, 17, 18, 19, 20, 21,
                                           22, 23, 24, 25, 26, 27, 28, 29);
  __m512i low = _mm512_multishift_epi64_epi8(lowCtl,
                                             _mm512_set1_epi64(lowQ));
  __m512i top = _mm512_multishift_epi64_epi8(topCtl,
                                             _mm512_set1_epi64(topQ));
  // bit 2 from top, the rest from low
  __m512i index = _mm512_ternarylogic_epi32(low, top, _mm512_set1_epi32(4),
                                            0xd8);
  return _mm512_permutexvar_ps(index, _mm512_loadu_ps(kCodebook));
}

// Four chunks at once (a half row, h = 0 or 1): the 64 indices as bytes,
// lane i's byte r holding value 16r + i's, then one vpermps per chunk on
// the index shifted down by 8r (vpermps reads the low 4 bits only; bit 3
// is left over from the low plane, hence the table repeated twice).
static const int8_t kWideShuffle[64] = {
    0, 4, 8, 12, 0, 4, 8, 12, 0, 4, 8, 12, 0, 4, 8, 12,
    1, 5, 9, 13, 1, 5, 9, 13, 1, 5, 9, 13, 1, 5, 9, 13,
    2, 6, 10, 14, 2, 6, 10, 14, 2, 6, 10, 14, 2, 6, 10, 14,
    3, 7, 11, 15, 3, 7, 11, 15, 3, 7, 11, 15, 3, 7, 11, 15};
// Byte 4i + r: the bit offsets of value 16r + i's fields in the shuffled
// low plane's qword and in the top plane's qword (its bit at bit 2).
static const int8_t kWideLowCtl[64] = {
    0, 8, 16, 24, 2, 10, 18, 26, 4, 12, 20, 28, 6, 14, 22, 30, 0, 8, 16, 24,
    2, 10, 18, 26, 4, 12, 20, 28, 6, 14, 22, 30, 0, 8, 16, 24, 2, 10, 18, 26,
    4, 12, 20, 28, 6, 14, 22, 30, 0, 8, 16, 24, 2, 10, 18, 26, 4, 12, 20, 28,
    6, 14, 22, 30};
static const int8_t kWideTopCtl[64] = {
    62, 14, 30, 46, 63, 15, 31, 47, 0, 16, 32, 48, 1, 17, 33, 49, 2, 18, 34,
    50, 3, 19, 35, 51, 4, 20, 36, 52, 5, 21, 37, 53, 6, 22, 38, 54, 7, 23,
    39, 55, 8, 24, 40, 56, 9, 25, 41, 57, 10, 26, 42, 58, 11, 27, 43, 59, 12,
    28, 44, 60, 13, 29, 45, 61};

static inline void decodeWide(const uint8_t *row, int h, __m512 v[4]) {
  __m512i qs = _mm512_broadcast_i32x4(
      _mm_loadu_si128((const __m128i *)(row + 2 + 16 * h)));
  uint64_t topQ;
  __builtin_memcpy(&topQ, row + 34 + 8 * h, 8);
  __m512i data = _mm512_shuffle_epi8(qs, _mm512_loadu_si512(kWideShuffle));
  __m512i low =
      _mm512_multishift_epi64_epi8(_mm512_loadu_si512(kWideLowCtl), data);
  __m512i top = _mm512_multishift_epi64_epi8(_mm512_loadu_si512(kWideTopCtl),
                                             _mm512_set1_epi64(topQ));
  // bit 2 of each byte from top, the rest from low
  __m512i index = _mm512_ternarylogic_epi32(low, top, _mm512_set1_epi8(4),
                                            0xd8);
  __m512 table = _mm512_loadu_ps(kCodebook);
  v[0] = _mm512_permutexvar_ps(index, table);
  v[1] = _mm512_permutexvar_ps(_mm512_srli_epi32(index, 8), table);
  v[2] = _mm512_permutexvar_ps(_mm512_srli_epi32(index, 16), table);
  v[3] = _mm512_permutexvar_ps(_mm512_srli_epi32(index, 24), table);
}

// No decode: one broadcast per chunk (the FMA bound).
static inline __m512 decodeNone(const uint8_t *row, int c) {
  return _mm512_set1_ps((float)row[c]);
}

#define PER_CHUNK(decode)                                                    \
  for (int c = 0; c < kChunks; ++c)                                          \
    v[c] = decode(row, c);
#define WIDE(decode) decodeWide(row, 0, v);

#define DEFINE_SUM_LOOP(name, DECODE_ROW, decode)                            \
  __attribute__((noinline)) static void name(float *out) {                 \
    __m512 acc[kHeads * kChunks];                                          \
    for (int i = 0; i < kHeads * kChunks; ++i)                             \
      acc[i] = _mm512_setzero_ps();                                        \
    for (int r = 0; r < kRows; ++r) {                                      \
      const uint8_t *row = bytes + r * kRowBytes;                          \
      __m512 v[kChunks];                                                   \
      DECODE_ROW(decode)                                                   \
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

DEFINE_SUM_LOOP(sumNone, PER_CHUNK, decodeNone)
DEFINE_SUM_LOOP(sumShifts, PER_CHUNK, decodeShifts)
DEFINE_SUM_LOOP(sumMask, PER_CHUNK, decodeMask)
DEFINE_SUM_LOOP(sumMultishift, PER_CHUNK, decodeMultishift)
DEFINE_SUM_LOOP(sumWide, WIDE, decodeWide)

// Sums each of 16 vectors' lanes: lane k of the result is the sum of
// a[k]'s lanes (up to the order of the lanes, which the kernels fix).
static inline __m512 reduce16(__m512 a[16]) {
  for (int w = 8; w >= 1; w /= 2)
    for (int i = 0; i < w; ++i) {
      __m512 x = a[i], y = a[i + w], lo, hi;
      if (w == 8) {
        lo = _mm512_shuffle_f32x4(x, y, 0x44);
        hi = _mm512_shuffle_f32x4(x, y, 0xee);
      } else if (w == 4) {
        lo = _mm512_shuffle_f32x4(x, y, 0x88);
        hi = _mm512_shuffle_f32x4(x, y, 0xdd);
      } else if (w == 2) {
        lo = _mm512_unpacklo_ps(x, y);
        hi = _mm512_unpackhi_ps(x, y);
      } else {
        __m512d xd = _mm512_castps_pd(x), yd = _mm512_castps_pd(y);
        lo = _mm512_castpd_ps(_mm512_unpacklo_pd(xd, yd));
        hi = _mm512_castpd_ps(_mm512_unpackhi_pd(xd, yd));
      }
      a[i] = _mm512_add_ps(lo, hi);
    }
  return a[0];
}

#define DEFINE_SCORE_LOOP(name, decode)                                      \
  __attribute__((noinline)) static void name(float *out) {                 \
    __m512 total = _mm512_setzero_ps();                                    \
    for (int r = 0; r + kStepTokens <= kRows; r += kStepTokens) {          \
      __m512 acc[kStepTokens * kHeads];                                    \
      for (int i = 0; i < kStepTokens * kHeads; ++i)                       \
        acc[i] = _mm512_setzero_ps();                                      \
      for (int c = 0; c < kRowChunks; ++c) {                               \
        __m512 q[kHeads];                                                  \
        for (int h = 0; h < kHeads; ++h)                                   \
          q[h] = _mm512_load_ps(query + (h * kRowChunks + c) * 16);        \
        for (int t = 0; t < kStepTokens; ++t) {                            \
          __m512 v = decode(bytes + (r + t) * kRowBytes, c);               \
          for (int h = 0; h < kHeads; ++h)                                 \
            acc[t * kHeads + h] =                                          \
                _mm512_fmadd_ps(q[h], v, acc[t * kHeads + h]);             \
        }                                                                  \
      }                                                                    \
      total = _mm512_add_ps(total, reduce16(acc));                         \
    }                                                                      \
    _mm512_storeu_ps(out, total);                                          \
  }

DEFINE_SCORE_LOOP(scoreNone, decodeNone)
DEFINE_SCORE_LOOP(scoreShifts, decodeShifts)
DEFINE_SCORE_LOOP(scoreMask, decodeMask)

// Every vector decoder against the scalar decode, over every row.
static int countMismatches(void) {
  int bad = 0;
  for (int r = 0; r < kRows; ++r) {
    const uint8_t *row = bytes + r * kRowBytes;
    for (int h = 0; h < 2; ++h) {
      __m512 wide[4];
      decodeWide(row, h, wide);
      for (int k = 0; k < 4; ++k) {
        int c = 4 * h + k;
        float got[4][16];
        _mm512_storeu_ps(got[0], decodeShifts(row, c));
        _mm512_storeu_ps(got[1], decodeMask(row, c));
        _mm512_storeu_ps(got[2], decodeMultishift(row, c));
        _mm512_storeu_ps(got[3], wide[k]);
        for (int d = 0; d < 4; ++d)
          for (int l = 0; l < 16; ++l)
            bad += got[d][l] != decodeScalar(row, 16 * c + l);
      }
    }
  }
  return bad;
}

typedef struct {
  const char *name;
  void (*run)(float *);
  int perRow; // rows (tokens) a call covers
} Loop;

static void timeLoops(const char *title, const char *unit,
                      const Loop *loops, int n) {
  printf("%s\n", title);
  float out[kHeads * kChunks * 16];
  for (int k = 0; k < n; ++k) {
    double best = 1e30;
    for (int round = 0; round < 20; ++round) {
      double t = seconds();
      for (int i = 0; i < 200; ++i)
        loops[k].run(out);
      t = seconds() - t;
      best = t < best ? t : best;
    }
    printf("  %-40s %6.2f ns per %s (checksum %g)\n", loops[k].name,
           best / 200 / loops[k].perRow * 1e9, unit, (double)out[5]);
  }
}

int main(void) {
  for (int i = 0; i < kRows * kRowBytes; ++i)
    bytes[i] = (uint8_t)(i * 37 + (i >> 5));
  for (int i = 0; i < kRows * kHeads; ++i)
    weights[i] = 1e-3f * (float)(i % 97);
  for (int i = 0; i < kHeads * kRowChunks * 16; ++i)
    query[i] = 1e-2f * (float)(i % 89);
  int bad = countMismatches();
  if (bad) {
    printf("decoders disagree with the scalar decode in %d values\n", bad);
    return 1;
  }
  const Loop sums[] = {
      {"multiply-adds only (FMA bound)", sumNone, kRows},
      {"shifts + bit-select + vpermps", sumShifts, kRows},
      {"top bit as mask register", sumMask, kRows},
      {"vpmultishiftqb per chunk", sumMultishift, kRows},
      {"64 byte indices, vpermps per chunk", sumWide, kRows}};
  const Loop scores[] = {
      {"multiply-adds + sum tree (no decode)", scoreNone, kRows},
      {"shifts + bit-select + vpermps", scoreShifts, kRows},
      {"top bit as mask register", scoreMask, kRows}};
  timeLoops("weighted sum (4 heads, half a row)", "half row", sums,
            sizeof sums / sizeof sums[0]);
  timeLoops("scores (4 heads, a row, 4-token steps)", "token", scores,
            sizeof scores / sizeof scores[0]);
  return 0;
}
