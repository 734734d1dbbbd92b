// tq-lower-to-loops{score-dot=i8}: the fused score by int8 dot products.
// The query is quantised once per call (outside the token loop): its
// lanes put in the keys' code order, max |q| / 127 per query row and
// head, 128 * sum q8 for the unsigned levels' offset. Each 64-value chunk
// of a key row is decoded to codebook indices as bytes, looked up as
// unsigned level bytes (tq.byte_lookup) and multiplied into i32 lanes
// (tq.byte_dot); formats it does not apply to keep the f32 score.

// RUN: tq-opt %s -split-input-file --tq-lower-to-loops="score-dot=i8" | FileCheck %s
// RUN: tq-opt %s -split-input-file --tq-lower-to-loops | FileCheck %s --check-prefix=F32
// RUN: not tq-opt %s -split-input-file --tq-lower-to-loops="score-dot=i4" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: tq-opt %s -split-input-file --tq-lower-to-loops="score-dot=i8 narrow-levels=true" | FileCheck %s --check-prefix=NARROW

// BAD: tq-lower-to-loops: score-dot must be f32 or i8, got 'i4'

// turbo3_0 at 128: one fp16 norm per row, a 2-bit and a 1-bit plane; 3-bit
// Lloyd-Max levels as bytes round(C / (max |C| / 127)) + 128.
// CHECK-LABEL: func @turbo3
// CHECK: math.roundeven %{{.*}} : vector<128xf32>
// CHECK: arith.trunci %{{.*}} : vector<128xi32> to vector<128xi8>
// CHECK: scf.for
// Two chunks of 64 bytes per row, two heads: 4 byte products per row.
// CHECK-COUNT-2: tq.byte_lookup %{{.*}} [{{.*}}] : vector<64xi8>
// CHECK: tq.byte_dot %{{.*}} : vector<64xi8> -> vector<16xi32>
// CHECK: arith.subi %{{.*}} : vector<8xi32>
// CHECK: arith.sitofp %{{.*}} : vector<8xi32> to vector<8xf32>
// narrow-levels: 7-bit levels round(C / (max |C| / 63)) + 64, all below
// 128 (turbo3's Lloyd-Max levels ±0.245, ±0.756, ±1.344, ±2.152 give
// 1..127); the offset is 64 * sum q8; the byte products are `narrow`.
// NARROW-LABEL: func @turbo3
// NARROW: arith.constant 64 : i32
// NARROW: tq.byte_lookup %{{.*}} [1, 25, 42, 57, 71, 86, 103, 127] : vector<64xi8>
// NARROW: tq.byte_dot %{{.*}} {narrow} : vector<64xi8> -> vector<16xi32>
// F32-LABEL: func @turbo3
// F32-NOT: tq.byte_dot
// F32: vector.fma
func.func @turbo3(%q: tensor<1x2x128xf32>, %kb: tensor<5x1x50xi8>) -> tensor<1x2x5xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x50xi8> -> !tq.cache<5x1x128, #tq.format<"turbo3_0">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<1x2x128xf32>, !tq.cache<5x1x128, #tq.format<"turbo3_0">> -> tensor<1x2x5xf32>
  return %s : tensor<1x2x5xf32>
}

// -----

// polar4: nibbles, lanes by nibble (low nibbles of 64 bytes, then the
// high ones): one read, a shift for the high nibbles, a mask.
// CHECK-LABEL: func @polar4
// CHECK: vector.transfer_read %{{.*}} : tensor<?x?x1x{{[0-9]+}}xi8>, vector<64xi8>
// CHECK: tq.byte_lookup
// CHECK: tq.byte_dot
func.func @polar4(%q: tensor<1x2x128xf32>, %kb: tensor<5x1x66xi8>) -> tensor<1x2x5xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x66xi8> -> !tq.cache<5x1x128, #tq.format<"polar4">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<1x2x128xf32>, !tq.cache<5x1x128, #tq.format<"polar4">> -> tensor<1x2x5xf32>
  return %s : tensor<1x2x5xf32>
}

// -----

// Rows of several scale blocks (turbo3_0 at 256: a norm per 128 values):
// 128 * sum q8 per block, a chain per (head, row, block) — four chunks of
// 64, two per block —, each block's sum times its own scale, the blocks'
// lanes added.
// CHECK-LABEL: func @two_blocks
// CHECK: tensor.empty() : tensor<1x4x2xi32>
// CHECK: arith.select %{{.*}} : vector<256xi1>, vector<256xi32>
// CHECK: scf.for
// CHECK-COUNT-32: tq.byte_dot
// CHECK-NOT: tq.byte_dot
// CHECK: arith.subi %{{.*}} : vector<16xi32>
// CHECK: arith.sitofp %{{.*}} : vector<16xi32> to vector<16xf32>
// CHECK: vector.shuffle %{{.*}} [0, 2, 4, 6, 8, 10, 12, 14] : vector<16xf32>, vector<16xf32>
// CHECK: vector.shuffle %{{.*}} [1, 3, 5, 7, 9, 11, 13, 15] : vector<16xf32>, vector<16xf32>
// CHECK: arith.addf %{{.*}} : vector<8xf32>
func.func @two_blocks(%q: tensor<1x4x256xf32>, %kb: tensor<5x1x100xi8>) -> tensor<1x4x5xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x100xi8> -> !tq.cache<5x1x256, #tq.format<"turbo3_0">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<1x4x256xf32>, !tq.cache<5x1x256, #tq.format<"turbo3_0">> -> tensor<1x4x5xf32>
  return %s : tensor<1x4x5xf32>
}

// -----

// tqprod carries a QJL residual whose signs are no codebook levels: it
// keeps the f32 score.
// CHECK-LABEL: func @qjl_residual
// CHECK-NOT: tq.byte_dot
// CHECK: vector.fma
func.func @qjl_residual(%q: tensor<1x2x256xf32>, %kb: tensor<5x1x100xi8>) -> tensor<1x2x5xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x100xi8> -> !tq.cache<5x1x256, #tq.format<"tqprod3">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<1x2x256xf32>, !tq.cache<5x1x256, #tq.format<"tqprod3">> -> tensor<1x2x5xf32>
  return %s : tensor<1x2x5xf32>
}

// -----

// tq3_0's 32-value blocks keep the f32 score by row lanes, with several
// query rows too (a chain, a sum and a scale per 32 values: slower than
// f32); one query row takes it by token lanes (score-lanes.mlir).
// CHECK-LABEL: func @short_blocks
// CHECK-NOT: tq.byte_dot
// CHECK: vector.fma
func.func @short_blocks(%q: tensor<3x2x128xf32>, %kb: tensor<5x1x56xi8>) -> tensor<3x2x5xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x56xi8> -> !tq.cache<5x1x128, #tq.format<"tq3_0">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<3x2x128xf32>, !tq.cache<5x1x128, #tq.format<"tq3_0">> -> tensor<3x2x5xf32>
  return %s : tensor<3x2x5xf32>
}
