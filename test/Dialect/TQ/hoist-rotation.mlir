// RUN: tq-opt %s -split-input-file --tq-hoist-rotation -verify-diagnostics | FileCheck %s

#r = #tq.rotation<kind = hadamard, dim = 4, block = 4, signs1 = [1, -1, 1, 1], signs2 = [1, 1, -1, 1]>

// Keys: <q, slice(R^T g)> becomes <R pad(q), g>; values: sum p slice(R^T g)
// becomes slice(R^T sum p g). The rotations now act on 1x2 query and output
// rows instead of 5x1 cache rows.
// CHECK-LABEL: func @padded
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x3xf32>, %[[K:.*]]: tensor<5x1x4xf32>, %[[V:.*]]: tensor<5x1x4xf32>)
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[QP:.*]] = tensor.pad %[[Q]] low[0, 0, 0] high[0, 0, 1]
// CHECK: tensor.yield %[[ZERO]]
// CHECK: %[[QR:.*]] = tq.rotate %[[QP]] {rotation = #rotation} : tensor<1x2x4xf32>
// CHECK: %[[S:.*]] = tq.qk %[[QR]], %[[K]] : tensor<1x2x4xf32>, tensor<5x1x4xf32> -> tensor<1x2x5xf32>
// CHECK: %[[P:.*]] = tq.softmax %[[S]]
// CHECK: %[[A:.*]] = tq.pv %[[P]], %[[V]] : tensor<1x2x5xf32>, tensor<5x1x4xf32> -> tensor<1x2x4xf32>
// CHECK: %[[AR:.*]] = tq.rotate %[[A]] {inverse, rotation = #rotation} : tensor<1x2x4xf32>
// CHECK: %[[O:.*]] = tensor.extract_slice %[[AR]][0, 0, 0] [1, 2, 3] [1, 1, 1] : tensor<1x2x4xf32> to tensor<1x2x3xf32>
// CHECK: return %[[O]]
func.func @padded(%q: tensor<1x2x3xf32>, %kg: tensor<5x1x4xf32>, %vg: tensor<5x1x4xf32>) -> tensor<1x2x3xf32> {
  %kr = tq.rotate %kg {rotation = #r, inverse} : tensor<5x1x4xf32>
  %k = tensor.extract_slice %kr[0, 0, 0] [5, 1, 3] [1, 1, 1] : tensor<5x1x4xf32> to tensor<5x1x3xf32>
  %s = tq.qk %q, %k : tensor<1x2x3xf32>, tensor<5x1x3xf32> -> tensor<1x2x5xf32>
  %p = tq.softmax %s {scale = 1.0 : f32} : tensor<1x2x5xf32> -> tensor<1x2x5xf32>
  %vr = tq.rotate %vg {rotation = #r, inverse} : tensor<5x1x4xf32>
  %v = tensor.extract_slice %vr[0, 0, 0] [5, 1, 3] [1, 1, 1] : tensor<5x1x4xf32> to tensor<5x1x3xf32>
  %o = tq.pv %p, %v : tensor<1x2x5xf32>, tensor<5x1x3xf32> -> tensor<1x2x3xf32>
  return %o : tensor<1x2x3xf32>
}

// -----

// A forward rotation on the key side becomes an inverse one on the query;
// dynamic token counts and dense Haar rotations hoist the same way.
// CHECK-LABEL: func @forward_haar_dynamic
// CHECK: %[[QR:.*]] = tq.rotate %arg0 {inverse, rotation = #tq.rotation<kind = haar, dim = 8, seed = 5>} : tensor<2x4x8xf32>
// CHECK: tq.qk %[[QR]], %arg1 : tensor<2x4x8xf32>, tensor<?x2x8xf32> -> tensor<2x4x?xf32>
func.func @forward_haar_dynamic(%q: tensor<2x4x8xf32>, %kg: tensor<?x2x8xf32>) -> tensor<2x4x?xf32> {
  %kr = tq.rotate %kg {rotation = #tq.rotation<kind = haar, dim = 8, seed = 5>} : tensor<?x2x8xf32>
  %s = tq.qk %q, %kr : tensor<2x4x8xf32>, tensor<?x2x8xf32> -> tensor<2x4x?xf32>
  return %s : tensor<2x4x?xf32>
}

// -----

#r = #tq.rotation<kind = hadamard, dim = 4, block = 4, signs1 = [1, -1, 1, 1]>

// Negative: the slice keeps entries 1..3 of each rotated row, not the
// leading ones, so the dropped entry is not zero padding and
// <q, slice(x)> != <pad(q), x>. The rotation must stay.
// CHECK-LABEL: func @offset_slice
// CHECK: tq.rotate %arg1 {inverse, rotation = #rotation} : tensor<5x1x4xf32>
// CHECK: tq.qk %arg0, %{{.*}} : tensor<1x2x3xf32>, tensor<5x1x3xf32>
func.func @offset_slice(%q: tensor<1x2x3xf32>, %kg: tensor<5x1x4xf32>) -> tensor<1x2x5xf32> {
  %kr = tq.rotate %kg {rotation = #r, inverse} : tensor<5x1x4xf32>
  %k = tensor.extract_slice %kr[0, 0, 1] [5, 1, 3] [1, 1, 1] : tensor<5x1x4xf32> to tensor<5x1x3xf32>
  // expected-remark @+1 {{rotation not hoisted: the slice of the rotated rows does not start at 0 in dimension 2, so the dropped entries are not the zero padding}}
  %s = tq.qk %q, %k : tensor<1x2x3xf32>, tensor<5x1x3xf32> -> tensor<1x2x5xf32>
  return %s : tensor<1x2x5xf32>
}

// -----

#r = #tq.rotation<kind = hadamard, dim = 4, block = 4, signs1 = [1, -1, 1, 1]>

// Negative: the slice drops tokens as well as padding. The pattern only
// peels the slice of a zero-padded head; anything else stays as written.
// CHECK-LABEL: func @token_slice
// CHECK: tq.rotate %arg1 {inverse, rotation = #rotation} : tensor<5x1x4xf32>
// CHECK: tq.pv %arg0, %{{.*}} : tensor<1x2x4xf32>, tensor<4x1x3xf32>
func.func @token_slice(%p: tensor<1x2x4xf32>, %vg: tensor<5x1x4xf32>) -> tensor<1x2x3xf32> {
  %vr = tq.rotate %vg {rotation = #r, inverse} : tensor<5x1x4xf32>
  %v = tensor.extract_slice %vr[0, 0, 0] [4, 1, 3] [1, 1, 1] : tensor<5x1x4xf32> to tensor<4x1x3xf32>
  // expected-remark @+1 {{rotation not hoisted: the slice drops tokens, not only padding}}
  %o = tq.pv %p, %v : tensor<1x2x4xf32>, tensor<4x1x3xf32> -> tensor<1x2x3xf32>
  return %o : tensor<1x2x3xf32>
}

// -----

// Negative: no rotation feeds the keys; nothing to do and nothing to say.
// CHECK-LABEL: func @plain
// CHECK-NOT: tq.rotate
// CHECK: tq.qk %arg0, %arg1
func.func @plain(%q: tensor<1x2x4xf32>, %k: tensor<5x1x4xf32>) -> tensor<1x2x5xf32> {
  %s = tq.qk %q, %k : tensor<1x2x4xf32>, tensor<5x1x4xf32> -> tensor<1x2x5xf32>
  return %s : tensor<1x2x5xf32>
}

// -----

// Negative: no rotation feeds the values either; again nothing to say.
// CHECK-LABEL: func @plain_values
// CHECK-NEXT: %[[O:.*]] = tq.pv %arg0, %arg1
// CHECK-NEXT: return %[[O]]
func.func @plain_values(%p: tensor<1x2x5xf32>, %v: tensor<5x1x4xf32>) -> tensor<1x2x4xf32> {
  %o = tq.pv %p, %v : tensor<1x2x5xf32>, tensor<5x1x4xf32> -> tensor<1x2x4xf32>
  return %o : tensor<1x2x4xf32>
}

// -----

#r = #tq.rotation<kind = hadamard, dim = 4, block = 4, signs1 = [1, -1, 1, 1]>

// A value-side rotation without a slice moves to the output in the same
// direction (forward here); the output needs no slice.
// CHECK-LABEL: func @forward_values
// CHECK-NEXT: %[[A:.*]] = tq.pv %arg0, %arg1 : tensor<1x2x5xf32>, tensor<5x1x4xf32> -> tensor<1x2x4xf32>
// CHECK-NEXT: %[[O:.*]] = tq.rotate %[[A]] {rotation = #rotation} : tensor<1x2x4xf32>
// CHECK-NEXT: return %[[O]]
func.func @forward_values(%p: tensor<1x2x5xf32>, %vg: tensor<5x1x4xf32>) -> tensor<1x2x4xf32> {
  %vr = tq.rotate %vg {rotation = #r} : tensor<5x1x4xf32>
  %o = tq.pv %p, %vr : tensor<1x2x5xf32>, tensor<5x1x4xf32> -> tensor<1x2x4xf32>
  return %o : tensor<1x2x4xf32>
}

// -----

#r = #tq.rotation<kind = hadamard, dim = 4, block = 4, signs1 = [1, -1, 1, 1]>

// A slice of all tokens of a dynamic cache (its size a tensor.dim of the
// rotated rows) only drops padding and is peeled like a static one.
// CHECK-LABEL: func @dynamic_tokens
// CHECK: %[[QP:.*]] = tensor.pad %arg0 low[0, 0, 0] high[0, 0, 1]
// CHECK: %[[QR:.*]] = tq.rotate %[[QP]] {rotation = #rotation} : tensor<1x2x4xf32>
// CHECK: tq.qk %[[QR]], %arg1 : tensor<1x2x4xf32>, tensor<?x1x4xf32> -> tensor<1x2x?xf32>
// CHECK-NOT: tensor.extract_slice
func.func @dynamic_tokens(%q: tensor<1x2x3xf32>, %kg: tensor<?x1x4xf32>) -> tensor<1x2x?xf32> {
  %c0 = arith.constant 0 : index
  %kr = tq.rotate %kg {rotation = #r, inverse} : tensor<?x1x4xf32>
  %n = tensor.dim %kr, %c0 : tensor<?x1x4xf32>
  %k = tensor.extract_slice %kr[0, 0, 0] [%n, 1, 3] [1, 1, 1] : tensor<?x1x4xf32> to tensor<?x1x3xf32>
  %s = tq.qk %q, %k : tensor<1x2x3xf32>, tensor<?x1x3xf32> -> tensor<1x2x?xf32>
  return %s : tensor<1x2x?xf32>
}

// -----

#r = #tq.rotation<kind = hadamard, dim = 4, block = 4, signs1 = [1, -1, 1, 1]>

// Negative: a dynamic token count that is not the rotated rows' own (an
// argument, or the size of another tensor) may drop tokens.
// CHECK-LABEL: func @unknown_token_count
// CHECK: tq.rotate %arg1 {inverse, rotation = #rotation} : tensor<?x1x4xf32>
// CHECK: tq.qk %arg0, %{{.*}} : tensor<1x2x3xf32>, tensor<?x1x3xf32>
// CHECK: tq.qk %arg0, %{{.*}} : tensor<1x2x3xf32>, tensor<?x1x3xf32>
// CHECK-NOT: tq.rotate
func.func @unknown_token_count(%q: tensor<1x2x3xf32>, %kg: tensor<?x1x4xf32>, %n: index, %other: tensor<?x1x4xf32>) -> (tensor<1x2x?xf32>, tensor<1x2x?xf32>) {
  %c0 = arith.constant 0 : index
  %kr = tq.rotate %kg {rotation = #r, inverse} : tensor<?x1x4xf32>
  %k = tensor.extract_slice %kr[0, 0, 0] [%n, 1, 3] [1, 1, 1] : tensor<?x1x4xf32> to tensor<?x1x3xf32>
  // expected-remark @+1 {{rotation not hoisted: the slice drops tokens, not only padding}}
  %s = tq.qk %q, %k : tensor<1x2x3xf32>, tensor<?x1x3xf32> -> tensor<1x2x?xf32>
  %m = tensor.dim %other, %c0 : tensor<?x1x4xf32>
  %k2 = tensor.extract_slice %kr[0, 0, 0] [%m, 1, 3] [1, 1, 1] : tensor<?x1x4xf32> to tensor<?x1x3xf32>
  // expected-remark @+1 {{rotation not hoisted: the slice drops tokens, not only padding}}
  %s2 = tq.qk %q, %k2 : tensor<1x2x3xf32>, tensor<?x1x3xf32> -> tensor<1x2x?xf32>
  return %s, %s2 : tensor<1x2x?xf32>, tensor<1x2x?xf32>
}

// -----

#r = #tq.rotation<kind = hadamard, dim = 4, block = 4, signs1 = [1, -1, 1, 1]>

// Negative: the slice keeps one of two kv heads; the other head's rows
// are not padding.
// CHECK-LABEL: func @head_slice
// CHECK: tq.rotate %arg1 {inverse, rotation = #rotation} : tensor<5x2x4xf32>
// CHECK: tq.pv %arg0, %{{.*}} : tensor<1x2x5xf32>, tensor<5x1x3xf32>
func.func @head_slice(%p: tensor<1x2x5xf32>, %vg: tensor<5x2x4xf32>) -> tensor<1x2x3xf32> {
  %vr = tq.rotate %vg {rotation = #r, inverse} : tensor<5x2x4xf32>
  %v = tensor.extract_slice %vr[0, 0, 0] [5, 1, 3] [1, 1, 1] : tensor<5x2x4xf32> to tensor<5x1x3xf32>
  // expected-remark @+1 {{rotation not hoisted: the slice drops kv heads, not only padding}}
  %o = tq.pv %p, %v : tensor<1x2x5xf32>, tensor<5x1x3xf32> -> tensor<1x2x3xf32>
  return %o : tensor<1x2x3xf32>
}

// -----

#r = #tq.rotation<kind = hadamard, dim = 4, block = 4, signs1 = [1, -1, 1, 1]>

// Negative: a slice starting at token 1 drops a token, not padding.
// CHECK-LABEL: func @token_offset
// CHECK: tq.rotate %arg1 {inverse, rotation = #rotation} : tensor<5x1x4xf32>
// CHECK: tq.qk %arg0, %{{.*}} : tensor<1x2x4xf32>, tensor<4x1x4xf32>
func.func @token_offset(%q: tensor<1x2x4xf32>, %kg: tensor<5x1x4xf32>) -> tensor<1x2x4xf32> {
  %kr = tq.rotate %kg {rotation = #r, inverse} : tensor<5x1x4xf32>
  %k = tensor.extract_slice %kr[1, 0, 0] [4, 1, 4] [1, 1, 1] : tensor<5x1x4xf32> to tensor<4x1x4xf32>
  // expected-remark @+1 {{rotation not hoisted: the slice of the rotated rows does not start at 0 in dimension 0, so the dropped entries are not the zero padding}}
  %s = tq.qk %q, %k : tensor<1x2x4xf32>, tensor<4x1x4xf32> -> tensor<1x2x4xf32>
  return %s : tensor<1x2x4xf32>
}

// -----

#r = #tq.rotation<kind = hadamard, dim = 4, block = 4, signs1 = [1, -1, 1, 1]>

// Negative: every other entry of each row (stride 2) is not a prefix, so
// the dropped entries are not the padding.
// CHECK-LABEL: func @strided_slice
// CHECK: tq.rotate %arg1 {inverse, rotation = #rotation} : tensor<5x1x4xf32>
// CHECK: tq.qk %arg0, %{{.*}} : tensor<1x2x2xf32>, tensor<5x1x2xf32>
func.func @strided_slice(%q: tensor<1x2x2xf32>, %kg: tensor<5x1x4xf32>) -> tensor<1x2x5xf32> {
  %kr = tq.rotate %kg {rotation = #r, inverse} : tensor<5x1x4xf32>
  %k = tensor.extract_slice %kr[0, 0, 0] [5, 1, 2] [1, 1, 2] : tensor<5x1x4xf32> to tensor<5x1x2xf32>
  // expected-remark @+1 {{rotation not hoisted: the slice of the rotated rows is strided in dimension 2}}
  %s = tq.qk %q, %k : tensor<1x2x2xf32>, tensor<5x1x2xf32> -> tensor<1x2x5xf32>
  return %s : tensor<1x2x5xf32>
}

// -----

#r = #tq.rotation<kind = hadamard, dim = 4, block = 4, signs1 = [1, -1, 1, 1]>

// Negative: the rows were rotated in another shape and reshaped by a
// rank-reducing slice; the pattern only peels rank-3 padding slices.
// CHECK-LABEL: func @rank_reducing_slice
// CHECK: tq.rotate %arg1 {inverse, rotation = #rotation} : tensor<5x1x1x4xf32>
// CHECK: tq.qk %arg0, %{{.*}} : tensor<1x2x4xf32>, tensor<5x1x4xf32>
func.func @rank_reducing_slice(%q: tensor<1x2x4xf32>, %kg: tensor<5x1x1x4xf32>) -> tensor<1x2x5xf32> {
  %kr = tq.rotate %kg {rotation = #r, inverse} : tensor<5x1x1x4xf32>
  %k = tensor.extract_slice %kr[0, 0, 0, 0] [5, 1, 1, 4] [1, 1, 1, 1] : tensor<5x1x1x4xf32> to tensor<5x1x4xf32>
  // expected-remark @+1 {{rotation not hoisted: the rotated rows are reshaped by a rank-changing slice}}
  %s = tq.qk %q, %k : tensor<1x2x4xf32>, tensor<5x1x4xf32> -> tensor<1x2x5xf32>
  return %s : tensor<1x2x5xf32>
}

// -----

#r = #tq.rotation<kind = haar, dim = 8, seed = 2>

// One rotated tensor used as both keys and values: each use hoists on its
// own side, and the K/V-side rotation, left without users, is erased.
// CHECK-LABEL: func @keys_and_values
// CHECK-NOT: tq.rotate %arg1
// CHECK: %[[QR:.*]] = tq.rotate %arg0 {rotation = #tq.rotation<kind = haar, dim = 8, seed = 2>} : tensor<1x2x8xf32>
// CHECK: %[[S:.*]] = tq.qk %[[QR]], %arg1
// CHECK: %[[P:.*]] = tq.softmax %[[S]]
// CHECK: %[[A:.*]] = tq.pv %[[P]], %arg1
// CHECK: %[[O:.*]] = tq.rotate %[[A]] {inverse, rotation = #tq.rotation<kind = haar, dim = 8, seed = 2>} : tensor<1x2x8xf32>
// CHECK-NEXT: return %[[O]]
func.func @keys_and_values(%q: tensor<1x2x8xf32>, %g: tensor<6x1x8xf32>) -> tensor<1x2x8xf32> {
  %kv = tq.rotate %g {rotation = #r, inverse} : tensor<6x1x8xf32>
  %s = tq.qk %q, %kv : tensor<1x2x8xf32>, tensor<6x1x8xf32> -> tensor<1x2x6xf32>
  %p = tq.softmax %s {scale = 1.0 : f32} : tensor<1x2x6xf32> -> tensor<1x2x6xf32>
  %o = tq.pv %p, %kv : tensor<1x2x6xf32>, tensor<6x1x8xf32> -> tensor<1x2x8xf32>
  return %o : tensor<1x2x8xf32>
}

// -----

#r = #tq.rotation<kind = hadamard, dim = 4, block = 4, signs1 = [1, -1, 1, 1]>

// A query whose head dim is dynamic must still match the keys' static head
// dim (3) at run time (qk's contract), so the query is cast to it and
// padded by the static 4 - 3. (The pass used to pad by 4 minus the
// dynamic-size sentinel: a huge negative padding.)
// CHECK-LABEL: func @dynamic_query_head_dim
// CHECK: %[[QC:.*]] = tensor.cast %arg0 : tensor<1x2x?xf32> to tensor<1x2x3xf32>
// CHECK: %[[QP:.*]] = tensor.pad %[[QC]] low[0, 0, 0] high[0, 0, 1]
// CHECK: } : tensor<1x2x3xf32> to tensor<1x2x4xf32>
// CHECK: %[[QR:.*]] = tq.rotate %[[QP]] {rotation = #rotation} : tensor<1x2x4xf32>
// CHECK: tq.qk %[[QR]], %arg1 : tensor<1x2x4xf32>, tensor<5x1x4xf32> -> tensor<1x2x5xf32>
func.func @dynamic_query_head_dim(%q: tensor<1x2x?xf32>, %kg: tensor<5x1x4xf32>) -> tensor<1x2x5xf32> {
  %kr = tq.rotate %kg {rotation = #r, inverse} : tensor<5x1x4xf32>
  %k = tensor.extract_slice %kr[0, 0, 0] [5, 1, 3] [1, 1, 1] : tensor<5x1x4xf32> to tensor<5x1x3xf32>
  %s = tq.qk %q, %k : tensor<1x2x?xf32>, tensor<5x1x3xf32> -> tensor<1x2x5xf32>
  return %s : tensor<1x2x5xf32>
}

// -----

#r = #tq.rotation<kind = hadamard, dim = 4, block = 4, signs1 = [1, -1, 1, 1]>

// Neither operand knows the head dim: the padding is computed from the
// query's own size (4 - dim(q, 2), never negative since the keys' slice of
// the 4-wide rotated rows is in bounds), and the padded query is 4 wide.
// CHECK-LABEL: func @dynamic_head_dims
// CHECK-DAG: %[[C4:.*]] = arith.constant 4 : index
// CHECK-DAG: %[[C2:.*]] = arith.constant 2 : index
// CHECK: %[[D:.*]] = tensor.dim %arg0, %[[C2]] : tensor<1x2x?xf32>
// CHECK: %[[H:.*]] = arith.subi %[[C4]], %[[D]] : index
// CHECK: %[[QP:.*]] = tensor.pad %arg0 low[0, 0, 0] high[0, 0, %[[H]]]
// CHECK: } : tensor<1x2x?xf32> to tensor<1x2x4xf32>
// CHECK: %[[QR:.*]] = tq.rotate %[[QP]] {rotation = #rotation} : tensor<1x2x4xf32>
// CHECK: tq.qk %[[QR]], %arg1 : tensor<1x2x4xf32>, tensor<5x1x4xf32> -> tensor<1x2x5xf32>
func.func @dynamic_head_dims(%q: tensor<1x2x?xf32>, %kg: tensor<5x1x4xf32>, %n: index) -> tensor<1x2x5xf32> {
  %kr = tq.rotate %kg {rotation = #r, inverse} : tensor<5x1x4xf32>
  %k = tensor.extract_slice %kr[0, 0, 0] [5, 1, %n] [1, 1, 1] : tensor<5x1x4xf32> to tensor<5x1x?xf32>
  %s = tq.qk %q, %k : tensor<1x2x?xf32>, tensor<5x1x?xf32> -> tensor<1x2x5xf32>
  return %s : tensor<1x2x5xf32>
}

// -----

#r = #tq.rotation<kind = hadamard, dim = 4, block = 4, signs1 = [1, -1, 1, 1]>

// A pv result with a dynamic head dim: the output keeps the entries the
// values' slice kept (its static size 3), then is cast to the result type.
// (The pass used to build the slice from the result type's sizes, putting
// the dynamic-size sentinel among the static sizes: invalid IR.)
// CHECK-LABEL: func @dynamic_value_result
// CHECK: %[[A:.*]] = tq.pv %arg0, %arg1 : tensor<1x2x5xf32>, tensor<5x1x4xf32> -> tensor<1x2x4xf32>
// CHECK: %[[AR:.*]] = tq.rotate %[[A]] {inverse, rotation = #rotation} : tensor<1x2x4xf32>
// CHECK: %[[S:.*]] = tensor.extract_slice %[[AR]][0, 0, 0] [1, 2, 3] [1, 1, 1] : tensor<1x2x4xf32> to tensor<1x2x3xf32>
// CHECK: %[[O:.*]] = tensor.cast %[[S]] : tensor<1x2x3xf32> to tensor<1x2x?xf32>
// CHECK: return %[[O]]
func.func @dynamic_value_result(%p: tensor<1x2x5xf32>, %vg: tensor<5x1x4xf32>) -> tensor<1x2x?xf32> {
  %vr = tq.rotate %vg {rotation = #r, inverse} : tensor<5x1x4xf32>
  %v = tensor.extract_slice %vr[0, 0, 0] [5, 1, 3] [1, 1, 1] : tensor<5x1x4xf32> to tensor<5x1x3xf32>
  %o = tq.pv %p, %v : tensor<1x2x5xf32>, tensor<5x1x3xf32> -> tensor<1x2x?xf32>
  return %o : tensor<1x2x?xf32>
}

// -----

#r = #tq.rotation<kind = hadamard, dim = 4, block = 4, signs1 = [1, -1, 1, 1]>

// Dynamic query heads and a dynamic head dim kept by the values' slice:
// the output slice takes the heads from the rotated output (tensor.dim)
// and the head dim from the original slice's %n.
// CHECK-LABEL: func @dynamic_value_dims
// CHECK-SAME: %[[N:[a-z0-9]+]]: index
// CHECK: %[[A:.*]] = tq.pv %arg0, %arg1 : tensor<1x?x5xf32>, tensor<5x1x4xf32> -> tensor<1x?x4xf32>
// CHECK: %[[AR:.*]] = tq.rotate %[[A]] {inverse, rotation = #rotation} : tensor<1x?x4xf32>
// CHECK: %[[H:.*]] = tensor.dim %[[AR]], %{{.*}} : tensor<1x?x4xf32>
// CHECK: %[[O:.*]] = tensor.extract_slice %[[AR]][0, 0, 0] [1, %[[H]], %[[N]]] [1, 1, 1] : tensor<1x?x4xf32> to tensor<1x?x?xf32>
// CHECK: return %[[O]]
func.func @dynamic_value_dims(%p: tensor<1x?x5xf32>, %vg: tensor<5x1x4xf32>, %n: index) -> tensor<1x?x?xf32> {
  %vr = tq.rotate %vg {rotation = #r, inverse} : tensor<5x1x4xf32>
  %v = tensor.extract_slice %vr[0, 0, 0] [5, 1, %n] [1, 1, 1] : tensor<5x1x4xf32> to tensor<5x1x?xf32>
  %o = tq.pv %p, %v : tensor<1x?x5xf32>, tensor<5x1x?xf32> -> tensor<1x?x?xf32>
  return %o : tensor<1x?x?xf32>
}

// -----

#r = #tq.rotation<kind = hadamard, dim = 4, block = 4, signs1 = [1, -1, 1, 1]>

// Values without a slice and a less static result: the 4-wide output is
// only cast, never sliced.
// CHECK-LABEL: func @dynamic_value_result_unsliced
// CHECK: %[[AR:.*]] = tq.rotate %{{.*}} {inverse, rotation = #rotation} : tensor<1x2x4xf32>
// CHECK-NOT: tensor.extract_slice
// CHECK: %[[O:.*]] = tensor.cast %[[AR]] : tensor<1x2x4xf32> to tensor<1x2x?xf32>
// CHECK: return %[[O]]
func.func @dynamic_value_result_unsliced(%p: tensor<1x2x5xf32>, %vg: tensor<5x1x4xf32>) -> tensor<1x2x?xf32> {
  %vr = tq.rotate %vg {rotation = #r, inverse} : tensor<5x1x4xf32>
  %o = tq.pv %p, %vr : tensor<1x2x5xf32>, tensor<5x1x4xf32> -> tensor<1x2x?xf32>
  return %o : tensor<1x2x?xf32>
}

// -----

#r = #tq.rotation<kind = hadamard, dim = 4, block = 4, signs1 = [1, -1, 1, 1]>

// Negative: the rotated keys reach qk through a tensor.cast. The pass only
// looks through the rotation and the slice of its padding, so the rotation
// stays on every cached row, and the remark says so (it used to be left
// without one). Canonicalize folds such casts first in tq-fusion.
// CHECK-LABEL: func @cast_keys
// CHECK: %[[KR:.*]] = tq.rotate %arg1 {inverse, rotation = #rotation} : tensor<?x1x4xf32>
// CHECK: %[[K:.*]] = tensor.cast %[[KR]]
// CHECK: tq.qk %arg0, %[[K]] : tensor<1x2x4xf32>, tensor<5x1x4xf32>
func.func @cast_keys(%q: tensor<1x2x4xf32>, %kg: tensor<?x1x4xf32>) -> tensor<1x2x5xf32> {
  %kr = tq.rotate %kg {rotation = #r, inverse} : tensor<?x1x4xf32>
  %k = tensor.cast %kr : tensor<?x1x4xf32> to tensor<5x1x4xf32>
  // expected-remark @+1 {{rotation not hoisted: the rotated rows reach the operand through 'tensor.cast'; only a tq.rotate and a zero-offset, unit-stride tensor.extract_slice of it are looked through}}
  %s = tq.qk %q, %k : tensor<1x2x4xf32>, tensor<5x1x4xf32> -> tensor<1x2x5xf32>
  return %s : tensor<1x2x5xf32>
}

// -----

#r = #tq.rotation<kind = hadamard, dim = 4, block = 4, signs1 = [1, -1, 1, 1]>

// Negative: the same on the value side, behind the padding slice: a cast
// between the rotation and the slice also hides the rotation.
// CHECK-LABEL: func @cast_values
// CHECK: tq.rotate %arg1 {inverse, rotation = #rotation} : tensor<5x1x4xf32>
// CHECK: tq.pv %arg0, %{{.*}} : tensor<1x2x5xf32>, tensor<?x1x3xf32>
func.func @cast_values(%p: tensor<1x2x5xf32>, %vg: tensor<5x1x4xf32>) -> tensor<1x2x3xf32> {
  %vr = tq.rotate %vg {rotation = #r, inverse} : tensor<5x1x4xf32>
  %vc = tensor.cast %vr : tensor<5x1x4xf32> to tensor<?x1x4xf32>
  %c0 = arith.constant 0 : index
  %n = tensor.dim %vc, %c0 : tensor<?x1x4xf32>
  %v = tensor.extract_slice %vc[0, 0, 0] [%n, 1, 3] [1, 1, 1] : tensor<?x1x4xf32> to tensor<?x1x3xf32>
  // expected-remark @+1 {{rotation not hoisted: the rotated rows reach the operand through 'tensor.cast'}}
  %o = tq.pv %p, %v : tensor<1x2x5xf32>, tensor<?x1x3xf32> -> tensor<1x2x3xf32>
  return %o : tensor<1x2x3xf32>
}
