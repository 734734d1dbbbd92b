// RUN: tq-opt %s -split-input-file --tq-decompose-attention | FileCheck %s

// A padded head (96 -> 128) with a rotating K format and a plain V format:
// keys are gathered, un-rotated and sliced; values are only gathered.
// CHECK-LABEL: func @padded_asymmetric
// CHECK-SAME: (%[[Q:.*]]: tensor<1x4x96xf32>, %[[K:.*]]: !tq.cache<?x2x96, #tq.format<"polar3">>, %[[V:.*]]: !tq.cache<?x2x96, #tq.format<"q8_0">>)
// CHECK: %[[KG:.*]] = tq.gather %[[K]] : !tq.cache<?x2x96, #tq.format<"polar3">> -> tensor<?x2x128xf32>
// CHECK: %[[KR:.*]] = tq.rotate %[[KG]] {inverse, rotation = #rotation} : tensor<?x2x128xf32>
// CHECK: %[[KS:.*]] = tensor.extract_slice %[[KR]][0, 0, 0] [%{{.*}}, 2, 96] [1, 1, 1] : tensor<?x2x128xf32> to tensor<?x2x96xf32>
// CHECK: %[[S:.*]] = tq.qk %[[Q]], %[[KS]] : tensor<1x4x96xf32>, tensor<?x2x96xf32> -> tensor<1x4x?xf32>
// CHECK: %[[P:.*]] = tq.softmax %[[S]] {causal, scale = 0.102062076 : f32} : tensor<1x4x?xf32> -> tensor<1x4x?xf32>
// CHECK: %[[VG:.*]] = tq.gather %[[V]] : !tq.cache<?x2x96, #tq.format<"q8_0">> -> tensor<?x2x96xf32>
// CHECK-NOT: tq.rotate
// CHECK: %[[O:.*]] = tq.pv %[[P]], %[[VG]] : tensor<1x4x?xf32>, tensor<?x2x96xf32> -> tensor<1x4x96xf32>
// CHECK: return %[[O]]
func.func @padded_asymmetric(%q: tensor<1x4x96xf32>, %k: !tq.cache<?x2x96, #tq.format<"polar3">>, %v: !tq.cache<?x2x96, #tq.format<"q8_0">>) -> tensor<1x4x96xf32> {
  %o = tq.attention %q, %k, %v {causal} : tensor<1x4x96xf32>, !tq.cache<?x2x96, #tq.format<"polar3">>, !tq.cache<?x2x96, #tq.format<"q8_0">> -> tensor<1x4x96xf32>
  return %o : tensor<1x4x96xf32>
}

// -----

// Unpadded block-WHT formats need no slice; every option reaches the softmax.
// CHECK-LABEL: func @options
// CHECK: tq.gather %{{.*}} : !tq.cache<16x1x64, #tq.format<"tq3_0">> -> tensor<16x1x64xf32>
// CHECK-NEXT: tq.rotate %{{.*}} {inverse, rotation = #rotation} : tensor<16x1x64xf32>
// CHECK-NOT: tensor.extract_slice
// CHECK: tq.softmax %{{.*}} mask(%{{.*}} : tensor<3x16xf32>) {scale = 2.500000e-01 : f32, softcap = 3.000000e+01 : f32, window = 8 : i64}
// CHECK: tq.gather %{{.*}} : !tq.cache<16x1x64, #tq.format<"turbo4_0">> -> tensor<16x1x128xf32>
// CHECK: tq.rotate %{{.*}} {inverse, rotation = #rotation1} : tensor<16x1x128xf32>
// CHECK: tensor.extract_slice %{{.*}}[0, 0, 0] [16, 1, 64] [1, 1, 1]
// CHECK: tq.pv
func.func @options(%q: tensor<3x7x64xf32>, %k: !tq.cache<16x1x64, #tq.format<"tq3_0">>, %v: !tq.cache<16x1x64, #tq.format<"turbo4_0">>, %m: tensor<3x16xf32>) -> tensor<3x7x64xf32> {
  %o = tq.attention %q, %k, %v mask(%m : tensor<3x16xf32>) {scale = 0.25 : f32, window = 8, softcap = 30.0 : f32} : tensor<3x7x64xf32>, !tq.cache<16x1x64, #tq.format<"tq3_0">>, !tq.cache<16x1x64, #tq.format<"turbo4_0">> -> tensor<3x7x64xf32>
  return %o : tensor<3x7x64xf32>
}

// -----

// Nothing else is touched.
// CHECK-LABEL: func @no_attention
// CHECK-NEXT: tq.qk
// CHECK-NEXT: return
func.func @no_attention(%q: tensor<1x2x8xf32>, %k: tensor<4x2x8xf32>) -> tensor<1x2x4xf32> {
  %s = tq.qk %q, %k : tensor<1x2x8xf32>, tensor<4x2x8xf32> -> tensor<1x2x4xf32>
  return %s : tensor<1x2x4xf32>
}

// -----

// The engine options reach the softmax unchanged.
// CHECK-LABEL: func @engine_options
// CHECK: tq.softmax %{{.*}} mask(%arg3 : tensor<1x?xf16>) slopes(%arg4 : tensor<4xf32>) sinks(%arg5 : tensor<4xf32>) {scale = 1.250000e-01 : f32}
func.func @engine_options(%q: tensor<1x4x64xf32>, %k: !tq.cache<?x1x64, #tq.format<"turbo3_0">>, %v: !tq.cache<?x1x64, #tq.format<"turbo3_0">>, %m: tensor<1x?xf16>, %slopes: tensor<4xf32>, %sinks: tensor<4xf32>) -> tensor<1x4x64xf32> {
  %o = tq.attention %q, %k, %v mask(%m : tensor<1x?xf16>) slopes(%slopes : tensor<4xf32>) sinks(%sinks : tensor<4xf32>) : tensor<1x4x64xf32>, !tq.cache<?x1x64, #tq.format<"turbo3_0">>, !tq.cache<?x1x64, #tq.format<"turbo3_0">> -> tensor<1x4x64xf32>
  return %o : tensor<1x4x64xf32>
}

// -----

// The attention's lse is its softmax's: the same denominators.
// CHECK-LABEL: func @lse
// CHECK: %[[S:.*]] = tq.qk
// CHECK: %[[P:.*]], %[[L:.*]] = tq.softmax %[[S]] {scale = 1.250000e-01 : f32} : tensor<1x4x?xf32> -> tensor<1x4x?xf32>, tensor<1x4xf32>
// CHECK: %[[O:.*]] = tq.pv %[[P]]
// CHECK: return %[[O]], %[[L]]
func.func @lse(%q: tensor<1x4x64xf32>, %k: !tq.cache<?x1x64, #tq.format<"q8_0">>, %v: !tq.cache<?x1x64, #tq.format<"q8_0">>) -> (tensor<1x4x64xf32>, tensor<1x4xf32>) {
  %o, %l = tq.attention %q, %k, %v : tensor<1x4x64xf32>, !tq.cache<?x1x64, #tq.format<"q8_0">>, !tq.cache<?x1x64, #tq.format<"q8_0">> -> tensor<1x4x64xf32>, tensor<1x4xf32>
  return %o, %l : tensor<1x4x64xf32>, tensor<1x4xf32>
}

// -----

// K and V with different head dims (DeepSeek's MLA: 576 and 512): the
// keys keep the query's head dim, the values give the result's. Neither
// is padded: no slice. The default scale is 1/sqrt(576).
// CHECK-LABEL: func @mla
// CHECK-SAME: (%[[Q:.*]]: tensor<1x16x576xf32>, %[[K:.*]]: !tq.cache<?x1x576, #tq.format<"q8_0">>, %[[V:.*]]: !tq.cache<?x1x512, #tq.format<"turbo3_0">>)
// CHECK: %[[KG:.*]] = tq.gather %[[K]] : !tq.cache<?x1x576, #tq.format<"q8_0">> -> tensor<?x1x576xf32>
// CHECK-NEXT: %[[S:.*]] = tq.qk %[[Q]], %[[KG]] : tensor<1x16x576xf32>, tensor<?x1x576xf32> -> tensor<1x16x?xf32>
// CHECK-NEXT: %[[P:.*]] = tq.softmax %[[S]] {scale = 0.0416666679 : f32}
// CHECK-NEXT: %[[VG:.*]] = tq.gather %[[V]] : !tq.cache<?x1x512, #tq.format<"turbo3_0">> -> tensor<?x1x512xf32>
// CHECK-NEXT: %[[VR:.*]] = tq.rotate %[[VG]] {inverse, rotation = #rotation} : tensor<?x1x512xf32>
// CHECK-NEXT: %[[O:.*]] = tq.pv %[[P]], %[[VR]] : tensor<1x16x?xf32>, tensor<?x1x512xf32> -> tensor<1x16x512xf32>
// CHECK-NEXT: return %[[O]]
func.func @mla(%q: tensor<1x16x576xf32>, %k: !tq.cache<?x1x576, #tq.format<"q8_0">>, %v: !tq.cache<?x1x512, #tq.format<"turbo3_0">>) -> tensor<1x16x512xf32> {
  %o = tq.attention %q, %k, %v : tensor<1x16x576xf32>, !tq.cache<?x1x576, #tq.format<"q8_0">>, !tq.cache<?x1x512, #tq.format<"turbo3_0">> -> tensor<1x16x512xf32>
  return %o : tensor<1x16x512xf32>
}

// -----

// A dense Haar rotation (haar4) un-rotates the keys the same way; a padded
// dynamic-token cache is sliced to tensor.dim rows.
// CHECK-LABEL: func @haar_dynamic_slice
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK: %[[KG:.*]] = tq.gather %arg1 : !tq.cache<?x1x96, #tq.format<"haar4">> -> tensor<?x1x96xf32>
// CHECK: tq.rotate %[[KG]] {inverse, rotation = #tq.rotation<kind = haar, dim = 96, seed = {{[0-9]+}}>} : tensor<?x1x96xf32>
// CHECK: %[[VG:.*]] = tq.gather %arg2 : !tq.cache<?x1x80, #tq.format<"polar4">> -> tensor<?x1x128xf32>
// CHECK: %[[VR:.*]] = tq.rotate %[[VG]] {inverse, rotation = #rotation} : tensor<?x1x128xf32>
// CHECK: %[[N:.*]] = tensor.dim %[[VR]], %[[C0]] : tensor<?x1x128xf32>
// CHECK: %[[VS:.*]] = tensor.extract_slice %[[VR]][0, 0, 0] [%[[N]], 1, 80] [1, 1, 1] : tensor<?x1x128xf32> to tensor<?x1x80xf32>
// CHECK: tq.pv %{{.*}}, %[[VS]] : tensor<2x2x?xf32>, tensor<?x1x80xf32> -> tensor<2x2x80xf32>
func.func @haar_dynamic_slice(%q: tensor<2x2x96xf32>, %k: !tq.cache<?x1x96, #tq.format<"haar4">>, %v: !tq.cache<?x1x80, #tq.format<"polar4">>) -> tensor<2x2x80xf32> {
  %o = tq.attention %q, %k, %v : tensor<2x2x96xf32>, !tq.cache<?x1x96, #tq.format<"haar4">>, !tq.cache<?x1x80, #tq.format<"polar4">> -> tensor<2x2x80xf32>
  return %o : tensor<2x2x80xf32>
}

// -----

// Every tq.attention is decomposed, each with its own options.
// CHECK-LABEL: func @two
// CHECK-NOT: tq.attention
// CHECK: tq.softmax %{{.*}} {causal, scale = 1.250000e-01 : f32}
// CHECK: tq.softmax %{{.*}} {scale = 1.000000e+00 : f32, window = 2 : i64}
// CHECK-NOT: tq.attention
func.func @two(%q: tensor<1x2x64xf32>, %k: !tq.cache<?x1x64, #tq.format<"q8_0">>) -> (tensor<1x2x64xf32>, tensor<1x2x64xf32>) {
  %a = tq.attention %q, %k, %k {causal} : tensor<1x2x64xf32>, !tq.cache<?x1x64, #tq.format<"q8_0">>, !tq.cache<?x1x64, #tq.format<"q8_0">> -> tensor<1x2x64xf32>
  %b = tq.attention %q, %k, %k {scale = 1.0 : f32, window = 2} : tensor<1x2x64xf32>, !tq.cache<?x1x64, #tq.format<"q8_0">>, !tq.cache<?x1x64, #tq.format<"q8_0">> -> tensor<1x2x64xf32>
  return %a, %b : tensor<1x2x64xf32>, tensor<1x2x64xf32>
}
