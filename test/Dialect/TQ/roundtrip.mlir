// RUN: tq-opt %s | tq-opt | FileCheck %s
// RUN: tq-opt %s --mlir-print-op-generic | tq-opt | FileCheck %s

// Rotations with sign vectors and codebooks print as aliases.
// CHECK-DAG: #[[CB:codebook[0-9]*]] = #tq.codebook<bits = 1, centroids = [-5.000000e-01, 5.000000e-01], thresholds = [0.000000e+00]>
// CHECK-DAG: #[[HAD:rotation[0-9]*]] = #tq.rotation<kind = hadamard, dim = 4, block = 4, signs1 = [1, -1, 1, 1]>
// CHECK-DAG: #[[TWO:rotation[0-9]*]] = #tq.rotation<kind = block_hadamard, dim = 8, block = 4, signs1 = [1, -1, 1, 1], signs2 = [-1, 1, 1, 1]>

// CHECK-LABEL: func @attributes
// CHECK-SAME: cb = #[[CB]]
// CHECK-SAME: fmt = #tq.format<"turbo3_0">
// CHECK-SAME: haar = #tq.rotation<kind = haar, dim = 80, seed = 7>
// CHECK-SAME: had = #[[HAD]]
// CHECK-SAME: id = #tq.rotation<kind = identity, dim = 64>
// CHECK-SAME: two = #[[TWO]]
func.func @attributes() attributes {
  fmt = #tq.format<"turbo3_0">,
  cb = #tq.codebook<bits = 1, centroids = [-0.5, 0.5], thresholds = [0.0]>,
  had = #tq.rotation<kind = hadamard, dim = 4, block = 4, signs1 = [1, -1, 1, 1]>,
  two = #tq.rotation<kind = block_hadamard, dim = 8, block = 4, signs1 = [1, -1, 1, 1], signs2 = [-1, 1, 1, 1]>,
  haar = #tq.rotation<kind = haar, dim = 80, seed = 7>,
  id = #tq.rotation<kind = identity, dim = 64>} {
  return
}

// CHECK-LABEL: func @cache_views
// CHECK: tq.from_bytes %{{.*}} : tensor<?x8x50xi8> -> !tq.cache<?x8x128, #tq.format<"turbo3_0">>
// CHECK: tq.to_bytes %{{.*}} : !tq.cache<?x8x128, #tq.format<"turbo3_0">> -> tensor<?x8x50xi8>
func.func @cache_views(%b: tensor<?x8x50xi8>) -> tensor<?x8x50xi8> {
  %c = tq.from_bytes %b : tensor<?x8x50xi8> -> !tq.cache<?x8x128, #tq.format<"turbo3_0">>
  %d = tq.to_bytes %c : !tq.cache<?x8x128, #tq.format<"turbo3_0">> -> tensor<?x8x50xi8>
  return %d : tensor<?x8x50xi8>
}

// CHECK-LABEL: func @encode_decode
// CHECK: tq.quantize %{{.*}} : tensor<16x2x80xf32> -> !tq.cache<16x2x80, #tq.format<"polar3">>
// CHECK: tq.gather %{{.*}} : !tq.cache<16x2x80, #tq.format<"polar3">> -> tensor<16x2x128xf32>
// CHECK: tq.rotate %{{.*}} {inverse, rotation = #tq.rotation<kind = haar, dim = 128, seed = 3>} : tensor<16x2x128xf32>
func.func @encode_decode(%x: tensor<16x2x80xf32>) -> tensor<16x2x128xf32> {
  %c = tq.quantize %x : tensor<16x2x80xf32> -> !tq.cache<16x2x80, #tq.format<"polar3">>
  %g = tq.gather %c : !tq.cache<16x2x80, #tq.format<"polar3">> -> tensor<16x2x128xf32>
  %r = tq.rotate %g {rotation = #tq.rotation<kind = haar, dim = 128, seed = 3>, inverse} : tensor<16x2x128xf32>
  return %r : tensor<16x2x128xf32>
}

// CHECK-LABEL: func @steps
// CHECK: tq.qk %{{.*}}, %{{.*}} : tensor<1x8x64xf32>, tensor<?x2x64xf32> -> tensor<1x8x?xf32>
// CHECK: tq.softmax %{{.*}} mask(%{{.*}} : tensor<1x?xf32>) {causal, scale = 1.250000e-01 : f32, softcap = 3.000000e+01 : f32, window = 128 : i64} : tensor<1x8x?xf32> -> tensor<1x8x?xf32>
// CHECK: tq.pv %{{.*}}, %{{.*}} : tensor<1x8x?xf32>, tensor<?x2x64xf32> -> tensor<1x8x64xf32>
func.func @steps(%q: tensor<1x8x64xf32>, %k: tensor<?x2x64xf32>, %v: tensor<?x2x64xf32>, %m: tensor<1x?xf32>) -> tensor<1x8x64xf32> {
  %s = tq.qk %q, %k : tensor<1x8x64xf32>, tensor<?x2x64xf32> -> tensor<1x8x?xf32>
  %p = tq.softmax %s mask(%m : tensor<1x?xf32>) {scale = 0.125 : f32, causal, window = 128, softcap = 30.0 : f32} : tensor<1x8x?xf32> -> tensor<1x8x?xf32>
  %o = tq.pv %p, %v : tensor<1x8x?xf32>, tensor<?x2x64xf32> -> tensor<1x8x64xf32>
  return %o : tensor<1x8x64xf32>
}

// CHECK-LABEL: func @fused
// CHECK: tq.score %{{.*}}, %{{.*}} {lookup = #tq.lookup<lut>} : tensor<1x8x128xf32>, !tq.cache<?x2x128, #tq.format<"tqprod3">> -> tensor<1x8x?xf32>
// CHECK: tq.accumulate %{{.*}}, %{{.*}} : tensor<1x8x?xf32>, !tq.cache<?x2x128, #tq.format<"q8_0">> -> tensor<1x8x128xf32>
func.func @fused(%q: tensor<1x8x128xf32>, %k: !tq.cache<?x2x128, #tq.format<"tqprod3">>, %v: !tq.cache<?x2x128, #tq.format<"q8_0">>) -> tensor<1x8x128xf32> {
  %s = tq.score %q, %k {lookup = #tq.lookup<lut>} : tensor<1x8x128xf32>, !tq.cache<?x2x128, #tq.format<"tqprod3">> -> tensor<1x8x?xf32>
  %a = tq.accumulate %s, %v : tensor<1x8x?xf32>, !tq.cache<?x2x128, #tq.format<"q8_0">> -> tensor<1x8x128xf32>
  return %a : tensor<1x8x128xf32>
}

// CHECK-LABEL: func @attention
// CHECK: tq.attention %{{.*}}, %{{.*}}, %{{.*}} {causal} : tensor<4x32x128xf32>, !tq.cache<?x8x128, #tq.format<"turbo3_0">>, !tq.cache<?x8x128, #tq.format<"turbo2_0">> -> tensor<4x32x128xf32>
// CHECK: tq.attention %{{.*}}, %{{.*}}, %{{.*}} mask(%{{.*}} : tensor<1x?xf32>) {scale = 5.000000e-01 : f32, softcap = 5.000000e+01 : f32, window = 4 : i64} : tensor<1x7x96xf32>
func.func @attention(%q: tensor<4x32x128xf32>, %k: !tq.cache<?x8x128, #tq.format<"turbo3_0">>, %v: !tq.cache<?x8x128, #tq.format<"turbo2_0">>,
                     %q2: tensor<1x7x96xf32>, %k2: !tq.cache<?x1x96, #tq.format<"tq3_0">>, %v2: !tq.cache<?x1x96, #tq.format<"haar4">>, %m: tensor<1x?xf32>) -> (tensor<4x32x128xf32>, tensor<1x7x96xf32>) {
  %o = tq.attention %q, %k, %v {causal} : tensor<4x32x128xf32>, !tq.cache<?x8x128, #tq.format<"turbo3_0">>, !tq.cache<?x8x128, #tq.format<"turbo2_0">> -> tensor<4x32x128xf32>
  %o2 = tq.attention %q2, %k2, %v2 mask(%m : tensor<1x?xf32>) {scale = 0.5 : f32, window = 4, softcap = 50.0 : f32} : tensor<1x7x96xf32>, !tq.cache<?x1x96, #tq.format<"tq3_0">>, !tq.cache<?x1x96, #tq.format<"haar4">> -> tensor<1x7x96xf32>
  return %o, %o2 : tensor<4x32x128xf32>, tensor<1x7x96xf32>
}

// CHECK-LABEL: func @flash
// CHECK: %[[N:.*]] = tq.num_tokens %arg1 : !tq.cache<?x2x128, #tq.format<"turbo3_0">>
// CHECK: tq.slice_tokens %arg1[%arg5, %[[N]]] : !tq.cache<?x2x128, #tq.format<"turbo3_0">> -> !tq.cache<?x2x128, #tq.format<"turbo3_0">>
// CHECK: tq.online_softmax %arg2, %arg3, %arg4, %arg5, %[[N]] mask(%arg6 : tensor<1x?xf32>) {causal, scale = 1.250000e-01 : f32} : tensor<1x4x?xf32>, tensor<1x4xf32> -> tensor<1x4x?xf32>
// CHECK: tq.merge_tile %arg0, %{{.*}}, %arg0 : tensor<1x4x128xf32>, tensor<1x4xf32>
// CHECK: tq.normalize %{{.*}}, %{{.*}} : tensor<1x4x128xf32>, tensor<1x4xf32>
// CHECK: tq.combine %arg7, %arg7, %arg8 : tensor<3x1x4xf32>, tensor<3x1x4x128xf32> -> tensor<1x4x128xf32>
func.func @flash(%acc: tensor<1x4x128xf32>, %k: !tq.cache<?x2x128, #tq.format<"turbo3_0">>, %s: tensor<1x4x?xf32>,
                 %m: tensor<1x4xf32>, %l: tensor<1x4xf32>, %t0: index, %mask: tensor<1x?xf32>,
                 %pm: tensor<3x1x4xf32>, %pacc: tensor<3x1x4x128xf32>) -> tensor<1x4x128xf32> {
  %n = tq.num_tokens %k : !tq.cache<?x2x128, #tq.format<"turbo3_0">>
  %kt = tq.slice_tokens %k[%t0, %n] : !tq.cache<?x2x128, #tq.format<"turbo3_0">> -> !tq.cache<?x2x128, #tq.format<"turbo3_0">>
  %p, %m1, %l1, %c = tq.online_softmax %s, %m, %l, %t0, %n mask(%mask : tensor<1x?xf32>) {scale = 0.125 : f32, causal} : tensor<1x4x?xf32>, tensor<1x4xf32> -> tensor<1x4x?xf32>
  %a = tq.merge_tile %acc, %c, %acc : tensor<1x4x128xf32>, tensor<1x4xf32>
  %o = tq.normalize %a, %l1 : tensor<1x4x128xf32>, tensor<1x4xf32>
  %x = tq.combine %pm, %pm, %pacc : tensor<3x1x4xf32>, tensor<3x1x4x128xf32> -> tensor<1x4x128xf32>
  return %o : tensor<1x4x128xf32>
}

// CHECK-LABEL: func @paged
// CHECK: tq.from_pages %arg0[%arg1], %arg2 : tensor<?x16x8x50xi8>, tensor<?xi32> -> !tq.cache<?x8x128, #tq.format<"turbo3_0">>
func.func @paged(%pool: tensor<?x16x8x50xi8>, %table: tensor<?xi32>, %n: index) -> !tq.cache<?x8x128, #tq.format<"turbo3_0">> {
  %k = tq.from_pages %pool[%table], %n : tensor<?x16x8x50xi8>, tensor<?xi32> -> !tq.cache<?x8x128, #tq.format<"turbo3_0">>
  return %k : !tq.cache<?x8x128, #tq.format<"turbo3_0">>
}

// Engine-grade options: an f16 mask as llama.cpp stores it, ALiBi slopes
// and attention sinks, one per query head.
// CHECK-LABEL: func @engine_options
// CHECK: tq.attention %{{.*}}, %{{.*}}, %{{.*}} mask(%{{.*}} : tensor<7x?xf16>) slopes(%{{.*}} : tensor<8xf32>) sinks(%{{.*}} : tensor<8xf32>) {scale = 1.000000e+00 : f32} : tensor<7x8x64xf32>
// CHECK: tq.attention %{{.*}}, %{{.*}}, %{{.*}} sinks(%{{.*}} : tensor<8xf32>) : tensor<7x8x64xf32>
// CHECK: tq.softmax %{{.*}} mask(%{{.*}} : tensor<7x?xf16>) slopes(%{{.*}} : tensor<8xf32>) sinks(%{{.*}} : tensor<8xf32>) {scale = 1.000000e+00 : f32} : tensor<7x8x?xf32>
// CHECK: tq.online_softmax %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} mask(%{{.*}} : tensor<7x?xf16>) slopes(%{{.*}} : tensor<8xf32>) {scale = 1.000000e+00 : f32}
func.func @engine_options(%q: tensor<7x8x64xf32>, %k: !tq.cache<?x2x64, #tq.format<"turbo3_0">>, %v: !tq.cache<?x2x64, #tq.format<"q8_0">>,
                          %m: tensor<7x?xf16>, %slopes: tensor<8xf32>, %sinks: tensor<8xf32>, %s: tensor<7x8x?xf32>,
                          %max: tensor<7x8xf32>, %t0: index, %n: index) {
  %o = tq.attention %q, %k, %v mask(%m : tensor<7x?xf16>) slopes(%slopes : tensor<8xf32>) sinks(%sinks : tensor<8xf32>) {scale = 1.0 : f32} : tensor<7x8x64xf32>, !tq.cache<?x2x64, #tq.format<"turbo3_0">>, !tq.cache<?x2x64, #tq.format<"q8_0">> -> tensor<7x8x64xf32>
  %o2 = tq.attention %q, %k, %v sinks(%sinks : tensor<8xf32>) : tensor<7x8x64xf32>, !tq.cache<?x2x64, #tq.format<"turbo3_0">>, !tq.cache<?x2x64, #tq.format<"q8_0">> -> tensor<7x8x64xf32>
  %p = tq.softmax %s mask(%m : tensor<7x?xf16>) slopes(%slopes : tensor<8xf32>) sinks(%sinks : tensor<8xf32>) {scale = 1.0 : f32} : tensor<7x8x?xf32> -> tensor<7x8x?xf32>
  %p2, %m1, %l1, %c = tq.online_softmax %s, %max, %max, %t0, %n mask(%m : tensor<7x?xf16>) slopes(%slopes : tensor<8xf32>) {scale = 1.0 : f32} : tensor<7x8x?xf32>, tensor<7x8xf32> -> tensor<7x8x?xf32>
  return
}

// K and V head dims differ (DeepSeek's MLA: 576 and 512); the result has V's.
// CHECK-LABEL: func @mla
// CHECK: tq.attention %{{.*}}, %{{.*}}, %{{.*}} : tensor<1x16x576xf32>, !tq.cache<?x1x576, #tq.format<"q8_0">>, !tq.cache<?x1x512, #tq.format<"turbo3_0">> -> tensor<1x16x512xf32>
func.func @mla(%q: tensor<1x16x576xf32>, %k: !tq.cache<?x1x576, #tq.format<"q8_0">>, %v: !tq.cache<?x1x512, #tq.format<"turbo3_0">>) -> tensor<1x16x512xf32> {
  %o = tq.attention %q, %k, %v : tensor<1x16x576xf32>, !tq.cache<?x1x576, #tq.format<"q8_0">>, !tq.cache<?x1x512, #tq.format<"turbo3_0">> -> tensor<1x16x512xf32>
  return %o : tensor<1x16x512xf32>
}

// The optional log-sum-exp results.
// CHECK-LABEL: func @lse
// CHECK: %{{.*}}, %{{.*}} = tq.attention %{{.*}}, %{{.*}}, %{{.*}} : tensor<1x4x64xf32>, !tq.cache<?x1x64, #tq.format<"turbo3_0">>, !tq.cache<?x1x64, #tq.format<"polar4">> -> tensor<1x4x64xf32>, tensor<1x4xf32>
// CHECK: %{{.*}}, %{{.*}} = tq.softmax %{{.*}} {scale = 1.250000e-01 : f32} : tensor<1x4x?xf32> -> tensor<1x4x?xf32>, tensor<1x4xf32>
func.func @lse(%q: tensor<1x4x64xf32>, %k: !tq.cache<?x1x64, #tq.format<"turbo3_0">>, %v: !tq.cache<?x1x64, #tq.format<"polar4">>, %s: tensor<1x4x?xf32>) -> (tensor<1x4x64xf32>, tensor<1x4xf32>, tensor<1x4x?xf32>, tensor<1x4xf32>) {
  %o, %l = tq.attention %q, %k, %v : tensor<1x4x64xf32>, !tq.cache<?x1x64, #tq.format<"turbo3_0">>, !tq.cache<?x1x64, #tq.format<"polar4">> -> tensor<1x4x64xf32>, tensor<1x4xf32>
  %p, %pl = tq.softmax %s {scale = 0.125 : f32} : tensor<1x4x?xf32> -> tensor<1x4x?xf32>, tensor<1x4xf32>
  return %o, %l, %p, %pl : tensor<1x4x64xf32>, tensor<1x4xf32>, tensor<1x4x?xf32>, tensor<1x4xf32>
}
