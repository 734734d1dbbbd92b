// amx-score-probe.c - what a decode score by AMX int8 tile products would
// cost per 16-token step at Gemma 3's shape (head dim 256, 4 query heads
// per KV head, turbo3_0 keys: 100-byte rows, two 128-value blocks of a
// 2-bit and a 1-bit plane): docs/perf/cpu.md, session #30.
//
// Not part of tqc: a measuring probe for CPUs with AMX-INT8 and
// AVX512-VBMI (Linux must grant the tile data: the probe asks with
// arch_prctl). Per step, for each of 16 tokens and each 64-value chunk,
// the row-layout decode of the int8 path (one 16-byte read of the 2-bit
// plane spread by vpermq, vpmultishiftqb of both planes, a vpternlogd
// join, a vpermb level lookup) stored as a tile row; then per chunk a
// tile load and tdpbusd (A: 16 tokens x 64 level bytes, B: the query's 64
// bytes x 4 heads), two sum tiles (one per scale block) stored and read
// back as vectors, and the blocks' fp16 scales gathered by vpinsrw as the
// kernel does. Prints ns per step for the whole and for its parts, so the
// result can be set beside the vector score loop's measured time.
//
//   clang -O2 -march=native scripts/amx-score-probe.c -o amx-score-probe
//   ./amx-score-probe

#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { kArchReqXcompPerm = 0x1023, kXfeatureTileData = 18 };
enum { kTokens = 2048, kRow = 100, kStep = 16 };

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

static uint8_t rows[kTokens * kRow + 64];
__attribute__((aligned(64))) static uint8_t levelTile[2][4][kStep * 64];
__attribute__((aligned(64))) static int8_t query[4][16 * 16];
__attribute__((aligned(64))) static int32_t sums[2][kStep * 4];
__attribute__((aligned(64))) static float scores[4][kStep];
static volatile float sink;

enum Part { kAll, kDecodeOnly, kTilesOnly };

__attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vbmi,"
                      "avx512vl,avx512fp16,f16c"))) static double
nsPerStep(long steps, enum Part part, int lag) {
  struct TileConfig config;
  memset(&config, 0, sizeof config);
  config.palette = 1;
  // 0, 1: sums of blocks 0 and 1 (16 tokens x 4 heads of i32);
  // 2, 3: level bytes (16 tokens x 64); 4-7: the query chunks (16 rows of
  // 4 heads x 4 bytes: 64 values).
  for (int t = 0; t < 8; ++t) {
    config.rows[t] = 16;
    config.bytesPerRow[t] = t < 2 ? 16 : t < 4 ? 64 : 16;
  }
  _tile_loadconfig(&config);
  _tile_loadd(4, query[0], 16);
  _tile_loadd(5, query[1], 16);
  _tile_loadd(6, query[2], 16);
  _tile_loadd(7, query[3], 16);
  const __m512i spread = _mm512_set_epi64(1, 1, 1, 1, 0, 0, 0, 0);
  const __m512i fieldsLow = _mm512_set1_epi64(0x0e0c0a0806040200LL);
  const __m512i fieldsHigh = _mm512_set1_epi64(0x0504030201007f7eLL);
  const __m512i lowMask = _mm512_set1_epi8(3);
  const __m512i table = _mm512_set1_epi64(0x8070605040302010LL);
  double t0 = now();
  long token = 0;
  for (long s = 0; s < steps; ++s) {
    const uint8_t *step = rows + token * kRow;
    uint8_t(*tile)[kStep * 64] = levelTile[s & 1];
    // lag 1: the tiles take the step before's levels (the other buffer)
    // before this step's decode, so no tile load waits for the stores just
    // made; lag 0: this step's, after its decode.
    uint8_t(*ready)[kStep * 64] = levelTile[(s + lag) & 1];
    for (int phase = 0; phase < 2; ++phase) {
      if (phase == (lag ? 0 : 1)) {
        if (part != kDecodeOnly) {
          _tile_zero(0);
          _tile_zero(1);
          _tile_loadd(2, ready[0], 64);
          _tile_dpbusd(0, 2, 4);
          _tile_loadd(3, ready[1], 64);
          _tile_dpbusd(0, 3, 5);
          _tile_loadd(2, ready[2], 64);
          _tile_dpbusd(1, 2, 6);
          _tile_loadd(3, ready[3], 64);
          _tile_dpbusd(1, 3, 7);
          _tile_stored(0, sums[0], 16);
          _tile_stored(1, sums[1], 16);
          // Sums as heads x 16 tokens: each 64-byte line holds 4 tokens x 4
          // heads; a head's 16 tokens by two rounds of two-source permutes.
          for (int b = 0; b < 2; ++b) {
            __m512i r0 = _mm512_load_si512(sums[b]),
                    r1 = _mm512_load_si512(sums[b] + 16),
                    r2 = _mm512_load_si512(sums[b] + 32),
                    r3 = _mm512_load_si512(sums[b] + 48);
            for (int h = 0; h < 4; ++h) {
              const __m512i pick = _mm512_set_epi32(
                  28 + h, 24 + h, 20 + h, 16 + h, 12 + h, 8 + h, 4 + h, h,
                  28 + h, 24 + h, 20 + h, 16 + h, 12 + h, 8 + h, 4 + h, h);
              __m512i ab = _mm512_permutex2var_epi32(r0, pick, r1);
              __m512i cd = _mm512_permutex2var_epi32(r2, pick, r3);
              __m512i all = _mm512_shuffle_i64x2(ab, cd, 0x44);
              _mm512_store_ps(scores[h],
                              _mm512_add_ps(_mm512_load_ps(scores[h]),
                                            _mm512_cvtepi32_ps(all)));
            }
          }
        }
      } else {
        if (part != kTilesOnly) {
          for (int t = 0; t < kStep; ++t) {
            const uint8_t *row = step + t * kRow;
            _mm_prefetch((const char *)row + 32 * kRow * kStep, _MM_HINT_T0);
            for (int c = 0; c < 4; ++c) {
              const uint8_t *block = row + 50 * (c / 2);
              __m512i qs = _mm512_castsi128_si512(
                  _mm_loadu_si128((const __m128i *)(block + 2 + 16 * (c % 2))));
              __m512i low = _mm512_multishift_epi64_epi8(
                  fieldsLow, _mm512_permutexvar_epi64(spread, qs));
              uint64_t signs;
              memcpy(&signs, block + 34 + 8 * (c % 2), 8);
              __m512i high = _mm512_multishift_epi64_epi8(
                  fieldsHigh, _mm512_set1_epi64((long long)signs));
              __m512i index =
                  _mm512_ternarylogic_epi32(low, high, lowMask, 0xd8);
              _mm512_store_si512(tile[c] + t * 64,
                                 _mm512_permutexvar_epi8(index, table));
            }
          }
          // The blocks' fp16 scales, one insert per token and block.
          for (int b = 0; b < 2; ++b) {
            __m128i lo = _mm_setzero_si128(), hi = _mm_setzero_si128();
#define TQ_INSERT(t)                                                           \
  lo = _mm_insert_epi16(lo, *(const uint16_t *)(step + (t)*kRow + 50 * b), t); \
  hi = _mm_insert_epi16(                                                       \
      hi, *(const uint16_t *)(step + ((t) + 8) * kRow + 50 * b), t)
            TQ_INSERT(0);
            TQ_INSERT(1);
            TQ_INSERT(2);
            TQ_INSERT(3);
            TQ_INSERT(4);
            TQ_INSERT(5);
            TQ_INSERT(6);
            TQ_INSERT(7);
#undef TQ_INSERT
            __m256i bits =
                _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
            __m512 scale = _mm512_cvtph_ps(bits);
            for (int h = 0; h < 4; ++h)
              _mm512_store_ps(scores[h],
                              _mm512_add_ps(_mm512_load_ps(scores[h]), scale));
          }
        }
      }
    }
    token += kStep;
    if (token + kStep > kTokens - 32 * kStep)
      token = 0;
  }
  double t = now() - t0;
  _tile_release();
  float total = 0;
  for (int h = 0; h < 4; ++h)
    for (int i = 0; i < kStep; ++i)
      total += scores[h][i];
  sink = total;
  return t / steps * 1e9;
}

int main(void) {
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureTileData) != 0) {
    fprintf(stderr, "the kernel refused the AMX tile data\n");
    return 1;
  }
  srand(1);
  for (size_t i = 0; i < sizeof rows; ++i)
    rows[i] = (uint8_t)rand();
  for (int c = 0; c < 4; ++c)
    for (int i = 0; i < 256; ++i)
      query[c][i] = (int8_t)rand();
  const char *names[] = {"decode + tiles", "decode alone", "tiles alone"};
  for (int round = 0; round < 3; ++round)
    for (int lag = 0; lag < 2; ++lag)
      for (int p = 0; p < 3; ++p)
        printf("lag %d  %-15s %.1f ns per 16-token step\n", lag, names[p],
               nsPerStep(200000, (enum Part)p, lag));
  return 0;
}
