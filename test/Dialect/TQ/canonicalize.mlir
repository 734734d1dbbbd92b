// RUN: tq-opt %s -split-input-file --canonicalize | FileCheck %s

#r = #tq.rotation<kind = hadamard, dim = 4, block = 4, signs1 = [1, -1, 1, 1]>
#s = #tq.rotation<kind = hadamard, dim = 4, block = 4, signs1 = [1, 1, 1, -1]>

// R^T R = I and R R^T = I.
// CHECK-LABEL: func @cancel
// CHECK-NEXT: return %arg0, %arg0
func.func @cancel(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %a = tq.rotate %x {rotation = #r} : tensor<2x4xf32>
  %b = tq.rotate %a {rotation = #r, inverse} : tensor<2x4xf32>
  %c = tq.rotate %x {rotation = #r, inverse} : tensor<2x4xf32>
  %d = tq.rotate %c {rotation = #r} : tensor<2x4xf32>
  return %b, %d : tensor<2x4xf32>, tensor<2x4xf32>
}

// Negative: different rotations, or the same direction twice, do not cancel.
// CHECK-LABEL: func @keep
// CHECK-COUNT-4: tq.rotate
func.func @keep(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %a = tq.rotate %x {rotation = #r} : tensor<2x4xf32>
  %b = tq.rotate %a {rotation = #s, inverse} : tensor<2x4xf32>
  %c = tq.rotate %x {rotation = #r} : tensor<2x4xf32>
  %d = tq.rotate %c {rotation = #r} : tensor<2x4xf32>
  return %b, %d : tensor<2x4xf32>, tensor<2x4xf32>
}

// The identity rotation folds away.
// CHECK-LABEL: func @identity
// CHECK-NEXT: return %arg0
func.func @identity(%x: tensor<3x64xf32>) -> tensor<3x64xf32> {
  %a = tq.rotate %x {rotation = #tq.rotation<kind = identity, dim = 64>} : tensor<3x64xf32>
  return %a : tensor<3x64xf32>
}

// -----

// from_bytes and to_bytes are inverse views.
// CHECK-LABEL: func @views
// CHECK-NEXT: return %arg0, %arg1
func.func @views(%b: tensor<?x2x34xi8>, %c: !tq.cache<?x2x128, #tq.format<"turbo2_0">>) -> (tensor<?x2x34xi8>, !tq.cache<?x2x128, #tq.format<"turbo2_0">>) {
  %0 = tq.from_bytes %b : tensor<?x2x34xi8> -> !tq.cache<?x2x128, #tq.format<"turbo2_0">>
  %1 = tq.to_bytes %0 : !tq.cache<?x2x128, #tq.format<"turbo2_0">> -> tensor<?x2x34xi8>
  %2 = tq.to_bytes %c : !tq.cache<?x2x128, #tq.format<"turbo2_0">> -> tensor<?x2x34xi8>
  %3 = tq.from_bytes %2 : tensor<?x2x34xi8> -> !tq.cache<?x2x128, #tq.format<"turbo2_0">>
  return %1, %3 : tensor<?x2x34xi8>, !tq.cache<?x2x128, #tq.format<"turbo2_0">>
}
