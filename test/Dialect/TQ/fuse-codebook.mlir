// RUN: tq-opt %s -split-input-file --tq-fuse-codebook | FileCheck %s --check-prefixes=CHECK,SELECT
// RUN: tq-opt %s -split-input-file --tq-fuse-codebook=lookup=lut | FileCheck %s --check-prefixes=CHECK,LUT

// CHECK-LABEL: func @fuse
// CHECK-NOT: tq.gather
// SELECT: %[[S:.*]] = tq.score %arg0, %arg1 : tensor<1x8x128xf32>, !tq.cache<?x2x128, #tq.format<"turbo3_0">> -> tensor<1x8x?xf32>
// LUT: %[[S:.*]] = tq.score %arg0, %arg1 {lookup = #tq.lookup<lut>} : tensor<1x8x128xf32>, !tq.cache<?x2x128, #tq.format<"turbo3_0">> -> tensor<1x8x?xf32>
// SELECT: tq.accumulate %[[S]], %arg2 : tensor<1x8x?xf32>, !tq.cache<?x2x128, #tq.format<"tqprod4">> -> tensor<1x8x128xf32>
// LUT: tq.accumulate %[[S]], %arg2 {lookup = #tq.lookup<lut>} : tensor<1x8x?xf32>, !tq.cache<?x2x128, #tq.format<"tqprod4">> -> tensor<1x8x128xf32>
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
