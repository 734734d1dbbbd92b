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

// -----

#r = #tq.rotation<kind = haar, dim = 8, seed = 1>

// Negative: rotate(rotate(x, R), R) is R R x, not x: two rotations in the
// same direction never cancel.
// CHECK-LABEL: func @same_direction
// CHECK: %[[A:.*]] = tq.rotate %arg0 {inverse, rotation = #tq.rotation<kind = haar, dim = 8, seed = 1>}
// CHECK: %[[B:.*]] = tq.rotate %[[A]] {inverse, rotation = #tq.rotation<kind = haar, dim = 8, seed = 1>}
// CHECK: return %[[B]]
func.func @same_direction(%x: tensor<3x8xf32>) -> tensor<3x8xf32> {
  %a = tq.rotate %x {rotation = #r, inverse} : tensor<3x8xf32>
  %b = tq.rotate %a {rotation = #r, inverse} : tensor<3x8xf32>
  return %b : tensor<3x8xf32>
}

// -----

// Negative: S^T R is not the identity when S != R (here two Haar draws
// from different seeds).
// CHECK-LABEL: func @different_rotations
// CHECK: %[[A:.*]] = tq.rotate %arg0 {rotation = #tq.rotation<kind = haar, dim = 8, seed = 1>}
// CHECK: %[[B:.*]] = tq.rotate %[[A]] {inverse, rotation = #tq.rotation<kind = haar, dim = 8, seed = 2>}
// CHECK: return %[[B]]
func.func @different_rotations(%x: tensor<3x8xf32>) -> tensor<3x8xf32> {
  %a = tq.rotate %x {rotation = #tq.rotation<kind = haar, dim = 8, seed = 1>} : tensor<3x8xf32>
  %b = tq.rotate %a {rotation = #tq.rotation<kind = haar, dim = 8, seed = 2>, inverse} : tensor<3x8xf32>
  return %b : tensor<3x8xf32>
}

// -----

#r = #tq.rotation<kind = block_hadamard, dim = 8, block = 4, signs1 = [1, -1, 1, 1], signs2 = [1, 1, -1, 1]>

// A rotation used elsewhere stays for that use; its inverse's users read
// the original operand.
// CHECK-LABEL: func @shared_inner
// CHECK: %[[A:.*]] = tq.rotate %arg0 {rotation = #rotation} : tensor<2x8xf32>
// CHECK-NOT: tq.rotate
// CHECK: return %arg0, %[[A]]
func.func @shared_inner(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %a = tq.rotate %x {rotation = #r} : tensor<2x8xf32>
  %b = tq.rotate %a {rotation = #r, inverse} : tensor<2x8xf32>
  return %b, %a : tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

#r = #tq.rotation<kind = hadamard, dim = 4, block = 4, signs1 = [1, -1, 1, 1]>

// R (R^T (R x)) = R x: the inner pair cancels, one rotation remains.
// CHECK-LABEL: func @chain
// CHECK-NEXT: %[[A:.*]] = tq.rotate %arg0 {rotation = #rotation} : tensor<1x2x4xf32>
// CHECK-NEXT: return %[[A]]
func.func @chain(%x: tensor<1x2x4xf32>) -> tensor<1x2x4xf32> {
  %a = tq.rotate %x {rotation = #r} : tensor<1x2x4xf32>
  %b = tq.rotate %a {rotation = #r, inverse} : tensor<1x2x4xf32>
  %c = tq.rotate %b {rotation = #r} : tensor<1x2x4xf32>
  return %c : tensor<1x2x4xf32>
}

// -----

// The inverse identity rotation folds away too.
// CHECK-LABEL: func @identity_inverse
// CHECK-NEXT: return %arg0
func.func @identity_inverse(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %a = tq.rotate %x {rotation = #tq.rotation<kind = identity, dim = 16>, inverse} : tensor<?x16xf32>
  return %a : tensor<?x16xf32>
}

// -----

// Negative: turbo2_0 rows at head dim 128 and q8_0 rows at 32 are both 34
// bytes; reading one cache's bytes as the other format is a
// reinterpretation, not a round trip, and must stay.
// CHECK-LABEL: func @reinterpret
// CHECK: %[[B:.*]] = tq.to_bytes %arg0
// CHECK: %[[C:.*]] = tq.from_bytes %[[B]] : tensor<?x2x34xi8> -> !tq.cache<?x2x32, #tq.format<"q8_0">>
// CHECK: return %[[C]]
func.func @reinterpret(%c: !tq.cache<?x2x128, #tq.format<"turbo2_0">>) -> !tq.cache<?x2x32, #tq.format<"q8_0">> {
  %b = tq.to_bytes %c : !tq.cache<?x2x128, #tq.format<"turbo2_0">> -> tensor<?x2x34xi8>
  %d = tq.from_bytes %b : tensor<?x2x34xi8> -> !tq.cache<?x2x32, #tq.format<"q8_0">>
  return %d : !tq.cache<?x2x32, #tq.format<"q8_0">>
}

// -----

// Negative: the round trips change a static token count into a dynamic
// one (or back); folding would change the value's type.
// CHECK-LABEL: func @retyped
// CHECK: %[[B:.*]] = tq.to_bytes %arg0 : !tq.cache<8x2x128, #tq.format<"turbo2_0">> -> tensor<?x2x34xi8>
// CHECK: %[[C:.*]] = tq.from_bytes %[[B]] : tensor<?x2x34xi8> -> !tq.cache<?x2x128, #tq.format<"turbo2_0">>
// CHECK: %[[D:.*]] = tq.from_bytes %arg1 : tensor<8x2x34xi8> -> !tq.cache<?x2x128, #tq.format<"turbo2_0">>
// CHECK: %[[E:.*]] = tq.to_bytes %[[D]] : !tq.cache<?x2x128, #tq.format<"turbo2_0">> -> tensor<?x2x34xi8>
// CHECK: return %[[C]], %[[E]]
func.func @retyped(%c: !tq.cache<8x2x128, #tq.format<"turbo2_0">>, %b: tensor<8x2x34xi8>) -> (!tq.cache<?x2x128, #tq.format<"turbo2_0">>, tensor<?x2x34xi8>) {
  %0 = tq.to_bytes %c : !tq.cache<8x2x128, #tq.format<"turbo2_0">> -> tensor<?x2x34xi8>
  %1 = tq.from_bytes %0 : tensor<?x2x34xi8> -> !tq.cache<?x2x128, #tq.format<"turbo2_0">>
  %2 = tq.from_bytes %b : tensor<8x2x34xi8> -> !tq.cache<?x2x128, #tq.format<"turbo2_0">>
  %3 = tq.to_bytes %2 : !tq.cache<?x2x128, #tq.format<"turbo2_0">> -> tensor<?x2x34xi8>
  return %1, %3 : !tq.cache<?x2x128, #tq.format<"turbo2_0">>, tensor<?x2x34xi8>
}

// -----

// Every tq op is pure: unused results are erased.
// CHECK-LABEL: func @dead
// CHECK-NEXT: return
func.func @dead(%q: tensor<1x2x64xf32>, %k: !tq.cache<?x1x64, #tq.format<"q8_0">>, %x: tensor<4x64xf32>) {
  %o = tq.attention %q, %k, %k : tensor<1x2x64xf32>, !tq.cache<?x1x64, #tq.format<"q8_0">>, !tq.cache<?x1x64, #tq.format<"q8_0">> -> tensor<1x2x64xf32>
  %g = tq.gather %k : !tq.cache<?x1x64, #tq.format<"q8_0">> -> tensor<?x1x64xf32>
  %n = tq.num_tokens %k : !tq.cache<?x1x64, #tq.format<"q8_0">>
  %r = tq.rotate %x {rotation = #tq.rotation<kind = haar, dim = 64, seed = 4>} : tensor<4x64xf32>
  return
}
