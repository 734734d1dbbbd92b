// RUN: tq-opt %s | tq-opt | FileCheck %s
// RUN: tq-opt %s --mlir-print-op-generic | tq-opt | FileCheck %s

// Rotations with sign vectors and codebooks print as aliases.
// CHECK-DAG: #[[CB:codebook[0-9]*]] = #tq.codebook<bits = 1, centroids = [-5.000000e-01, 5.000000e-01], thresholds = [0.000000e+00]>
// CHECK-DAG: #[[HAD:rotation[0-9]*]] = #tq.rotation<kind = hadamard, dim = 4, block = 4, signs1 = [1, -1, 1, 1]>
// CHECK-DAG: #[[TWO:rotation[0-9]*]] = #tq.rotation<kind = block_hadamard, dim = 8, block = 4, signs1 = [1, -1, 1, 1], signs2 = [-1, 1, 1, 1]>
// CHECK-DAG: #[[BLOCK1:rotation[0-9]*]] = #tq.rotation<kind = block_hadamard, dim = 8, block = 2, signs1 = [1, -1]>
// CHECK-DAG: #[[HAD2:rotation[0-9]*]] = #tq.rotation<kind = hadamard, dim = 2, block = 2, signs1 = [1, -1], signs2 = [-1, -1]>

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

// Parameters at their defaults are not printed (block, seed); an
// identity or Haar rotation has no sign vector and prints inline (the
// largest dim and seed survive the round trip). A Hadamard or block
// Hadamard has one or two sign vectors. The lookup attribute has three
// values.
// CHECK-LABEL: func @attribute_defaults
// CHECK-SAME: block1 = #[[BLOCK1]]
// CHECK-SAME: haar0 = #tq.rotation<kind = haar, dim = 8>,
// CHECK-SAME: haarmax = #tq.rotation<kind = haar, dim = 4096, seed = 18446744073709551615>,
// CHECK-SAME: hadamard2 = #[[HAD2]],
// CHECK-SAME: id0 = #tq.rotation<kind = identity, dim = 8>,
// CHECK-SAME: lut = #tq.lookup<lut>
// CHECK-SAME: select = #tq.lookup<select>
// CHECK-SAME: tile = #tq.lookup<tile>
func.func @attribute_defaults() attributes {
  block1 = #tq.rotation<kind = block_hadamard, dim = 8, block = 2, signs1 = [1, -1]>,
  haar0 = #tq.rotation<kind = haar, dim = 8, seed = 0>,
  haarmax = #tq.rotation<kind = haar, dim = 4096, seed = 18446744073709551615>,
  hadamard2 = #tq.rotation<kind = hadamard, dim = 2, block = 2, signs1 = [1, -1], signs2 = [-1, -1]>,
  id0 = #tq.rotation<kind = identity, dim = 8, block = 0, seed = 0>,
  select = #tq.lookup<select>, lut = #tq.lookup<lut>, tile = #tq.lookup<tile>} {
  return
}

// With the caches of the other functions, each of the library's fifteen
// formats round-trips as a cache format.
// CHECK-LABEL: func @formats
// CHECK-SAME: !tq.cache<4x1x64, #tq.format<"tq3_0">>
// CHECK-SAME: !tq.cache<4x1x64, #tq.format<"tq3_0_legacy">>
// CHECK-SAME: !tq.cache<4x1x64, #tq.format<"turbo2_0">>
// CHECK-SAME: !tq.cache<4x1x64, #tq.format<"turbo4_0">>
// CHECK-SAME: !tq.cache<4x1x64, #tq.format<"polar1">>
// CHECK-SAME: !tq.cache<4x1x64, #tq.format<"polar2">>
// CHECK-SAME: !tq.cache<4x1x64, #tq.format<"tqprod2">>
// CHECK-SAME: !tq.cache<4x1x64, #tq.format<"tqprod4">>
// CHECK-SAME: !tq.cache<4x1x64, #tq.format<"f16">>
func.func @formats(%a: !tq.cache<4x1x64, #tq.format<"tq3_0">>, %b: !tq.cache<4x1x64, #tq.format<"tq3_0_legacy">>,
                   %c: !tq.cache<4x1x64, #tq.format<"turbo2_0">>, %d: !tq.cache<4x1x64, #tq.format<"turbo4_0">>,
                   %e: !tq.cache<4x1x64, #tq.format<"polar1">>, %e2: !tq.cache<4x1x64, #tq.format<"polar2">>,
                   %f: !tq.cache<4x1x64, #tq.format<"tqprod2">>,
                   %g: !tq.cache<4x1x64, #tq.format<"tqprod4">>, %h: !tq.cache<4x1x64, #tq.format<"f16">>) {
  return
}

// A forward rotation prints without `inverse`; rotations act on the last
// dim of any rank.
// CHECK-LABEL: func @rotate_forms
// CHECK: tq.rotate %{{.*}} {rotation = #tq.rotation<kind = identity, dim = 4>} : tensor<4xf32>
// CHECK: tq.rotate %{{.*}} {rotation = #tq.rotation<kind = haar, dim = 4, seed = 9>} : tensor<2x3x1x4xf32>
// CHECK: tq.rotate %{{.*}} {inverse, rotation = #tq.rotation<kind = haar, dim = 4, seed = 9>} : tensor<?x4xf32>
func.func @rotate_forms(%a: tensor<4xf32>, %b: tensor<2x3x1x4xf32>, %c: tensor<?x4xf32>) {
  %0 = tq.rotate %a {rotation = #tq.rotation<kind = identity, dim = 4>} : tensor<4xf32>
  %1 = tq.rotate %b {rotation = #tq.rotation<kind = haar, dim = 4, seed = 9>} : tensor<2x3x1x4xf32>
  %2 = tq.rotate %c {rotation = #tq.rotation<kind = haar, dim = 4, seed = 9>, inverse} : tensor<?x4xf32>
  return
}

// The default lookup (select) is not printed; the others are.
// CHECK-LABEL: func @lookups
// CHECK: tq.score %{{.*}}, %{{.*}} : tensor<2x4x64xf32>, !tq.cache<8x2x64, #tq.format<"polar3">> -> tensor<2x4x8xf32>
// CHECK: tq.score %{{.*}}, %{{.*}} {lookup = #tq.lookup<tile>} : tensor<2x4x64xf32>
// CHECK: tq.accumulate %{{.*}}, %{{.*}} : tensor<2x4x8xf32>, !tq.cache<8x2x64, #tq.format<"polar3">> -> tensor<2x4x64xf32>
// CHECK: tq.accumulate %{{.*}}, %{{.*}} {lookup = #tq.lookup<lut>} : tensor<2x4x8xf32>
// CHECK: tq.accumulate %{{.*}}, %{{.*}} {lookup = #tq.lookup<tile>} : tensor<2x4x8xf32>
func.func @lookups(%q: tensor<2x4x64xf32>, %k: !tq.cache<8x2x64, #tq.format<"polar3">>, %p: tensor<2x4x8xf32>) {
  %0 = tq.score %q, %k {lookup = #tq.lookup<select>} : tensor<2x4x64xf32>, !tq.cache<8x2x64, #tq.format<"polar3">> -> tensor<2x4x8xf32>
  %1 = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<2x4x64xf32>, !tq.cache<8x2x64, #tq.format<"polar3">> -> tensor<2x4x8xf32>
  %2 = tq.accumulate %p, %k : tensor<2x4x8xf32>, !tq.cache<8x2x64, #tq.format<"polar3">> -> tensor<2x4x64xf32>
  %3 = tq.accumulate %p, %k {lookup = #tq.lookup<lut>} : tensor<2x4x8xf32>, !tq.cache<8x2x64, #tq.format<"polar3">> -> tensor<2x4x64xf32>
  %4 = tq.accumulate %p, %k {lookup = #tq.lookup<tile>} : tensor<2x4x8xf32>, !tq.cache<8x2x64, #tq.format<"polar3">> -> tensor<2x4x64xf32>
  return
}

// window = 0 and softcap = 0 are the defaults and are not printed; scale
// is optional on tq.attention only. Sinks come without a mask; the lse
// comes with every option.
// CHECK-LABEL: func @option_forms
// CHECK: tq.attention %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4x64xf32>
// CHECK: tq.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, window = 1 : i64} : tensor<2x4x64xf32>
// CHECK: %{{.*}}, %{{.*}} = tq.attention %{{.*}}, %{{.*}}, %{{.*}} mask(%{{.*}} : tensor<2x8xf16>) slopes(%{{.*}} : tensor<4xf32>) sinks(%{{.*}} : tensor<4xf32>) {causal, scale = 2.500000e-01 : f32, softcap = 1.000000e+01 : f32, window = 2 : i64} : tensor<2x4x64xf32>, !tq.cache<8x2x64, #tq.format<"polar3">>, !tq.cache<8x2x64, #tq.format<"polar3">> -> tensor<2x4x64xf32>, tensor<2x4xf32>
// CHECK: tq.softmax %{{.*}} {scale = 1.000000e+00 : f32} : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
// CHECK: tq.softmax %{{.*}} sinks(%{{.*}} : tensor<4xf32>) {scale = 1.000000e+00 : f32} : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
// CHECK: %{{.*}}, %{{.*}} = tq.softmax %{{.*}} mask(%{{.*}} : tensor<2x8xf16>) {causal, scale = 1.000000e+00 : f32} : tensor<2x4x8xf32> -> tensor<2x4x8xf32>, tensor<2x4xf32>
func.func @option_forms(%q: tensor<2x4x64xf32>, %k: !tq.cache<8x2x64, #tq.format<"polar3">>, %m: tensor<2x8xf16>,
                        %slopes: tensor<4xf32>, %sinks: tensor<4xf32>, %s: tensor<2x4x8xf32>) {
  %0 = tq.attention %q, %k, %k {window = 0, softcap = 0.0 : f32} : tensor<2x4x64xf32>, !tq.cache<8x2x64, #tq.format<"polar3">>, !tq.cache<8x2x64, #tq.format<"polar3">> -> tensor<2x4x64xf32>
  %1 = tq.attention %q, %k, %k {causal, window = 1} : tensor<2x4x64xf32>, !tq.cache<8x2x64, #tq.format<"polar3">>, !tq.cache<8x2x64, #tq.format<"polar3">> -> tensor<2x4x64xf32>
  %2, %3 = tq.attention %q, %k, %k mask(%m : tensor<2x8xf16>) slopes(%slopes : tensor<4xf32>) sinks(%sinks : tensor<4xf32>) {causal, scale = 0.25 : f32, softcap = 10.0 : f32, window = 2} : tensor<2x4x64xf32>, !tq.cache<8x2x64, #tq.format<"polar3">>, !tq.cache<8x2x64, #tq.format<"polar3">> -> tensor<2x4x64xf32>, tensor<2x4xf32>
  %4 = tq.softmax %s {scale = 1.0 : f32, window = 0} : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %5 = tq.softmax %s sinks(%sinks : tensor<4xf32>) {scale = 1.0 : f32} : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %6, %7 = tq.softmax %s mask(%m : tensor<2x8xf16>) {scale = 1.0 : f32, causal} : tensor<2x4x8xf32> -> tensor<2x4x8xf32>, tensor<2x4xf32>
  return
}

// tq.online_softmax without a mask, with window and softcap; views of a
// static cache.
// CHECK-LABEL: func @flash_forms
// CHECK: %[[N:.*]] = tq.num_tokens %{{.*}} : !tq.cache<8x2x64, #tq.format<"q8_0">>
// CHECK: tq.slice_tokens %{{.*}}[%{{.*}}, %[[N]]] : !tq.cache<8x2x64, #tq.format<"q8_0">> -> !tq.cache<?x2x64, #tq.format<"q8_0">>
// CHECK: tq.online_softmax %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[N]] {scale = 5.000000e-01 : f32, softcap = 2.000000e+01 : f32, window = 16 : i64} : tensor<2x4x?xf32>, tensor<2x4xf32> -> tensor<2x4x?xf32>
// CHECK: tq.from_pages %{{.*}}[%{{.*}}], %[[N]] : tensor<4x16x2x68xi8>, tensor<3xi32> -> !tq.cache<40x2x64, #tq.format<"q8_0">>
func.func @flash_forms(%k: !tq.cache<8x2x64, #tq.format<"q8_0">>, %s: tensor<2x4x?xf32>, %m: tensor<2x4xf32>, %t0: index,
                       %pool: tensor<4x16x2x68xi8>, %table: tensor<3xi32>) {
  %n = tq.num_tokens %k : !tq.cache<8x2x64, #tq.format<"q8_0">>
  %kt = tq.slice_tokens %k[%t0, %n] : !tq.cache<8x2x64, #tq.format<"q8_0">> -> !tq.cache<?x2x64, #tq.format<"q8_0">>
  %p, %m1, %l1, %c = tq.online_softmax %s, %m, %m, %t0, %n {scale = 0.5 : f32, window = 16, softcap = 20.0 : f32} : tensor<2x4x?xf32>, tensor<2x4xf32> -> tensor<2x4x?xf32>
  %paged = tq.from_pages %pool[%table], %n : tensor<4x16x2x68xi8>, tensor<3xi32> -> !tq.cache<40x2x64, #tq.format<"q8_0">>
  return
}

// tq.lane_lookup over tables of 1 to 16 entries.
// CHECK-LABEL: func @lane_lookup
// CHECK: tq.lane_lookup %{{.*}} [2.500000e-01] : vector<8xi32> -> vector<8xf32>
// CHECK: tq.lane_lookup %{{.*}} [-1.000000e+00, -3.000000e-01, 3.000000e-01, 1.000000e+00] : vector<8xi32> -> vector<8xf32>
// CHECK: tq.lane_lookup %{{.*}} [0.000000e+00, 1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00, 5.000000e+00, 6.000000e+00, 7.000000e+00, 8.000000e+00, 9.000000e+00, 1.000000e+01, 1.100000e+01, 1.200000e+01, 1.300000e+01, 1.400000e+01, 1.500000e+01] : vector<8xi32> -> vector<8xf32>
func.func @lane_lookup(%idx: vector<8xi32>) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>) {
  %0 = tq.lane_lookup %idx [0.25] : vector<8xi32> -> vector<8xf32>
  %1 = tq.lane_lookup %idx [-1.0, -0.3, 0.3, 1.0] : vector<8xi32> -> vector<8xf32>
  %2 = tq.lane_lookup %idx [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0] : vector<8xi32> -> vector<8xf32>
  return %0, %1, %2 : vector<8xf32>, vector<8xf32>, vector<8xf32>
}

// -----

// The int8 score's byte ops: a lookup in up to 16 bytes, and groups of
// four unsigned x signed byte products summed into i32 lanes.
// CHECK-LABEL: func @byte_ops
// CHECK: %[[L:.*]] = tq.byte_lookup %{{.*}} [1, 64, -64, -1] : vector<64xi8>
// CHECK: %[[D:.*]] = tq.byte_dot %{{.*}}, %[[L]], %{{.*}} : vector<64xi8> -> vector<16xi32>
// CHECK: %[[L7:.*]] = tq.byte_lookup %{{.*}} [1, 64, 100, 127] : vector<64xi8>
// CHECK: tq.byte_dot %[[D]], %[[L7]], %{{.*}} {narrow} : vector<64xi8> -> vector<16xi32>
func.func @byte_ops(%acc: vector<16xi32>, %idx: vector<64xi8>, %q: vector<64xi8>) -> vector<16xi32> {
  %l = tq.byte_lookup %idx [1, 64, -64, -1] : vector<64xi8>
  %d = tq.byte_dot %acc, %l, %q : vector<64xi8> -> vector<16xi32>
  %l7 = tq.byte_lookup %idx [1, 64, 100, 127] : vector<64xi8>
  %n = tq.byte_dot %d, %l7, %q {narrow} : vector<64xi8> -> vector<16xi32>
  return %n : vector<16xi32>
}

// -----

// The pair weighted sum's word ops: a lookup in up to 32 words, and pairs
// of 16-bit products summed into 32-bit lanes (i16 into i32, bf16 into
// f32).
// CHECK-LABEL: func @word_ops
// CHECK: %[[L:.*]] = tq.word_lookup %{{.*}} [-511, -40, 40, 511] : vector<32xi16>
// CHECK: tq.pair_dot %{{.*}}, %[[L]], %{{.*}} : vector<32xi16> -> vector<16xi32>
// CHECK: tq.pair_dot %{{.*}} : vector<32xbf16> -> vector<16xf32>
func.func @word_ops(%acc: vector<16xi32>, %idx: vector<32xi16>, %w: vector<32xi16>,
                    %facc: vector<16xf32>, %a: vector<32xbf16>) -> (vector<16xi32>, vector<16xf32>) {
  %l = tq.word_lookup %idx [-511, -40, 40, 511] : vector<32xi16>
  %d = tq.pair_dot %acc, %l, %w : vector<32xi16> -> vector<16xi32>
  %f = tq.pair_dot %facc, %a, %a : vector<32xbf16> -> vector<16xf32>
  return %d, %f : vector<16xi32>, vector<16xf32>
}

// -----

// Packed fields gathered into byte lanes at constant bit offsets.
// CHECK-LABEL: func @select_bits
// CHECK: tq.select_bits %{{.*}} [0, 2, 4, 6, 8, 10, 12, 63] : vector<8xi8>
func.func @select_bits(%x: vector<8xi8>) -> vector<8xi8> {
  %f = tq.select_bits %x [0, 2, 4, 6, 8, 10, 12, 63] : vector<8xi8>
  return %f : vector<8xi8>
}
