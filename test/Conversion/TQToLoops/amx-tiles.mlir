// tq-lower-to-loops{amx-tiles}: with several query rows (prefill) the
// fused score and weighted sum as AMX-BF16 tile products. A kv head's
// query rows are packed as bf16 (16 rows a tile, the last one repeated),
// the keys decoded eight rows a step, their bf16 pairs transposed 8 x 8
// by shuffles into VNNI pairs (32 bytes a store), the values a token pair
// a step (two rows interleaved); each 16 x 16 f32 tile is a chain of
// tdpbf16ps (amx.tile_mulf), stored beside the row block's others in a
// stack slot and read back as rows. One query row, a QJL residual, a
// format without a codebook (q8_0, f16: bf16 operands would be a large
// share of their small error) or a padded dim that is not a multiple of
// 32 keep the vector products.

// RUN: tq-opt %s -split-input-file --tq-lower-to-loops="amx-tiles=true" | FileCheck %s
// RUN: tq-opt %s -split-input-file --tq-lower-to-loops | FileCheck %s --check-prefix=OFF
// RUN: not tq-opt %s --tq-lower-to-loops="amx-tiles=maybe" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: for the --amx-tiles option: '{{.*}}maybe' is invalid

// OFF-NOT: amx.

// The score: queries (packed once, before any loop), keys as pairs, four
// 32-value steps of d128 per tile, the tiles side by side in the frame's
// stack slot.
// CHECK-LABEL: func @score_rows
// CHECK: %[[SLOT:.*]] = memref.alloca() : memref<16x128xf32>
// CHECK: arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// CHECK: vector.shuffle %{{.*}} : vector<8xi32>, vector<8xi32>
// CHECK: vector.shuffle %{{.*}} : vector<16xi32>, vector<16xi32>
// CHECK: vector.shuffle %{{.*}} : vector<32xi32>, vector<32xi32>
// CHECK: %[[Q:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<2x?x128xbf16>
// CHECK: %[[K:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<2x64x?xbf16>
// CHECK: amx.tile_zero : !amx.tile<16x16xf32>
// CHECK-COUNT-4: amx.tile_mulf
// CHECK: amx.tile_store %[[SLOT]]
// CHECK: vector.load %[[SLOT]]
func.func @score_rows(%q: tensor<?x8x128xf32>, %kb: tensor<?x2x50xi8>) -> tensor<?x8x?xf32> {
  %k = tq.from_bytes %kb : tensor<?x2x50xi8> -> !tq.cache<?x2x128, #tq.format<"turbo3_0">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<?x8x128xf32>, !tq.cache<?x2x128, #tq.format<"turbo3_0">> -> tensor<?x8x?xf32>
  return %s : tensor<?x8x?xf32>
}

// -----

// The weighted sum: weights packed per call, values as interleaved token
// pairs (past the last pair, zeros), the tile's sum over the token tiles
// carried by the loop as a tile.
// CHECK-LABEL: func @accumulate_rows
// CHECK: vector.interleave %{{.*}}, %{{.*}} : vector<16xf32> -> vector<32xf32>
// CHECK: arith.truncf %{{.*}} : vector<32xf32> to vector<32xbf16>
// CHECK: bufferization.to_buffer %{{.*}} read_only : tensor<2x?x256xbf16>
// CHECK: scf.for {{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (!amx.tile<16x16xf32>)
// CHECK: amx.tile_mulf %{{.*}}, %{{.*}}, %[[ACC]]
func.func @accumulate_rows(%p: tensor<3x8x?xf32>, %vb: tensor<?x2x50xi8>) -> tensor<3x8x128xf32> {
  %v = tq.from_bytes %vb : tensor<?x2x50xi8> -> !tq.cache<?x2x128, #tq.format<"turbo3_0">>
  %a = tq.accumulate %p, %v {lookup = #tq.lookup<tile>} : tensor<3x8x?xf32>, !tq.cache<?x2x128, #tq.format<"turbo3_0">> -> tensor<3x8x128xf32>
  return %a : tensor<3x8x128xf32>
}

// -----

// One query row (decode): a 16-row tile would be 1/16 used; the vector
// products stay.
// CHECK-LABEL: func @one_row
// CHECK-NOT: amx.
// CHECK: return
func.func @one_row(%q: tensor<1x8x128xf32>, %kb: tensor<?x2x50xi8>) -> tensor<1x8x?xf32> {
  %k = tq.from_bytes %kb : tensor<?x2x50xi8> -> !tq.cache<?x2x128, #tq.format<"turbo3_0">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<1x8x128xf32>, !tq.cache<?x2x128, #tq.format<"turbo3_0">> -> tensor<1x8x?xf32>
  return %s : tensor<1x8x?xf32>
}

// -----

// A QJL residual (tqprod): its signs are summed beside the values and
// projected once per call; the tiles do not carry them.
// CHECK-LABEL: func @qjl_residual
// CHECK-NOT: amx.
// CHECK: return
func.func @qjl_residual(%p: tensor<3x2x5xf32>, %vb: tensor<5x1x100xi8>) -> tensor<3x2x256xf32> {
  %v = tq.from_bytes %vb : tensor<5x1x100xi8> -> !tq.cache<5x1x256, #tq.format<"tqprod3">>
  %a = tq.accumulate %p, %v {lookup = #tq.lookup<tile>} : tensor<3x2x5xf32>, !tq.cache<5x1x256, #tq.format<"tqprod3">> -> tensor<3x2x256xf32>
  return %a : tensor<3x2x256xf32>
}

// -----

// f16 keys (no codebook; here also a padded dim of 80, two and a half
// 32-value tile columns).
// CHECK-LABEL: func @f16_keys
// CHECK-NOT: amx.
// CHECK: return
func.func @f16_keys(%q: tensor<3x2x80xf32>, %kb: tensor<5x1x160xi8>) -> tensor<3x2x5xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x160xi8> -> !tq.cache<5x1x80, #tq.format<"f16">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<3x2x80xf32>, !tq.cache<5x1x80, #tq.format<"f16">> -> tensor<3x2x5xf32>
  return %s : tensor<3x2x5xf32>
}
