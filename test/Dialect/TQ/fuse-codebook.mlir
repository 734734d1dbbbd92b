// RUN: tq-opt %s -split-input-file --tq-fuse-codebook | FileCheck %s --check-prefixes=CHECK,SELECT
// RUN: tq-opt %s -split-input-file --tq-fuse-codebook=lookup=lut | FileCheck %s --check-prefixes=CHECK,LUT
// RUN: tq-opt %s -split-input-file --tq-fuse-codebook=lookup=tile | FileCheck %s --check-prefixes=CHECK,TILE
// RUN: not tq-opt %s --tq-fuse-codebook=lookup=fast 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: for the --lookup option: Cannot find option named 'fast'!

// CHECK-LABEL: func @fuse
// CHECK-NOT: tq.gather
// SELECT: %[[S:.*]] = tq.score %arg0, %arg1 : tensor<1x8x128xf32>, !tq.cache<?x2x128, #tq.format<"turbo3_0">> -> tensor<1x8x?xf32>
// LUT: %[[S:.*]] = tq.score %arg0, %arg1 {lookup = #tq.lookup<lut>} : tensor<1x8x128xf32>, !tq.cache<?x2x128, #tq.format<"turbo3_0">> -> tensor<1x8x?xf32>
// SELECT: tq.accumulate %[[S]], %arg2 : tensor<1x8x?xf32>, !tq.cache<?x2x128, #tq.format<"tqprod4">> -> tensor<1x8x128xf32>
// LUT: tq.accumulate %[[S]], %arg2 {lookup = #tq.lookup<lut>} : tensor<1x8x?xf32>, !tq.cache<?x2x128, #tq.format<"tqprod4">> -> tensor<1x8x128xf32>
// TILE: %[[S:.*]] = tq.score %arg0, %arg1 {lookup = #tq.lookup<tile>}
// TILE: tq.accumulate %[[S]], %arg2 {lookup = #tq.lookup<tile>}
func.func @fuse(%qr: tensor<1x8x128xf32>, %k: !tq.cache<?x2x128, #tq.format<"turbo3_0">>, %v: !tq.cache<?x2x128, #tq.format<"tqprod4">>) -> tensor<1x8x128xf32> {
  %kg = tq.gather %k : !tq.cache<?x2x128, #tq.format<"turbo3_0">> -> tensor<?x2x128xf32>
  %s = tq.qk %qr, %kg : tensor<1x8x128xf32>, tensor<?x2x128xf32> -> tensor<1x8x?xf32>
  %vg = tq.gather %v : !tq.cache<?x2x128, #tq.format<"tqprod4">> -> tensor<?x2x128xf32>
  %o = tq.pv %s, %vg : tensor<1x8x?xf32>, tensor<?x2x128xf32> -> tensor<1x8x128xf32>
  return %o : tensor<1x8x128xf32>
}

// -----

// Negative: keys still un-rotated (hoisting has not run), so qk reads dense
// rows, not a gather; there is nothing to fuse.
// CHECK-LABEL: func @not_hoisted
// CHECK: tq.gather
// CHECK: tq.rotate
// CHECK: tq.qk
// CHECK-NOT: tq.score
func.func @not_hoisted(%q: tensor<1x2x32xf32>, %k: !tq.cache<4x1x32, #tq.format<"tq3_0">>) -> tensor<1x2x4xf32> {
  %kg = tq.gather %k : !tq.cache<4x1x32, #tq.format<"tq3_0">> -> tensor<4x1x32xf32>
  %kr = tq.rotate %kg {rotation = #tq.rotation<kind = block_hadamard, dim = 32, block = 32, signs1 = [1, -1, 1, 1, -1, -1, 1, -1, 1, 1, -1, 1, -1, 1, -1, -1, 1, -1, -1, 1, 1, -1, 1, -1, -1, 1, 1, 1, -1, -1, 1, -1]>, inverse} : tensor<4x1x32xf32>
  %s = tq.qk %q, %kr : tensor<1x2x32xf32>, tensor<4x1x32xf32> -> tensor<1x2x4xf32>
  return %s : tensor<1x2x4xf32>
}

// -----

// Negative: the values are dense rows, not a tq.gather, so tq.pv stays;
// the keys, gathered, are still scored by lookup.
// CHECK-LABEL: func @dense_values
// CHECK: %[[S:.*]] = tq.score %arg0, %arg1
// CHECK-NOT: tq.accumulate
// CHECK: tq.pv %[[S]], %arg2 : tensor<1x2x64xf32>, tensor<64x1x64xf32> -> tensor<1x2x64xf32>
func.func @dense_values(%q: tensor<1x2x64xf32>, %k: !tq.cache<64x1x64, #tq.format<"polar4">>, %v: tensor<64x1x64xf32>) -> tensor<1x2x64xf32> {
  %kg = tq.gather %k : !tq.cache<64x1x64, #tq.format<"polar4">> -> tensor<64x1x64xf32>
  %s = tq.qk %q, %kg : tensor<1x2x64xf32>, tensor<64x1x64xf32> -> tensor<1x2x64xf32>
  %o = tq.pv %s, %v : tensor<1x2x64xf32>, tensor<64x1x64xf32> -> tensor<1x2x64xf32>
  return %o : tensor<1x2x64xf32>
}

// -----

// Negative: a cast between the gather and the product hides the gather;
// only a direct tq.gather operand is fused.
// CHECK-LABEL: func @cast_keys
// CHECK: tq.gather
// CHECK: tensor.cast
// CHECK: tq.qk
// CHECK-NOT: tq.score
func.func @cast_keys(%q: tensor<1x2x64xf32>, %k: !tq.cache<8x1x64, #tq.format<"polar4">>) -> tensor<1x2x?xf32> {
  %kg = tq.gather %k : !tq.cache<8x1x64, #tq.format<"polar4">> -> tensor<8x1x64xf32>
  %kc = tensor.cast %kg : tensor<8x1x64xf32> to tensor<?x1x64xf32>
  %s = tq.qk %q, %kc : tensor<1x2x64xf32>, tensor<?x1x64xf32> -> tensor<1x2x?xf32>
  return %s : tensor<1x2x?xf32>
}

// -----

// A gather with another user is fused into the product and kept for that
// user.
// CHECK-LABEL: func @shared_gather
// CHECK: %[[G:.*]] = tq.gather %arg1
// CHECK: %[[S:.*]] = tq.score %arg0, %arg1
// CHECK: return %[[S]], %[[G]]
func.func @shared_gather(%q: tensor<1x2x64xf32>, %k: !tq.cache<8x1x64, #tq.format<"q8_0">>) -> (tensor<1x2x8xf32>, tensor<8x1x64xf32>) {
  %kg = tq.gather %k : !tq.cache<8x1x64, #tq.format<"q8_0">> -> tensor<8x1x64xf32>
  %s = tq.qk %q, %kg : tensor<1x2x64xf32>, tensor<8x1x64xf32> -> tensor<1x2x8xf32>
  return %s, %kg : tensor<1x2x8xf32>, tensor<8x1x64xf32>
}
