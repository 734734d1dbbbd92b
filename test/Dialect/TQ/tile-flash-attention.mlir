// RUN: tq-opt %s -split-input-file --tq-tile-flash-attention="tile-size=32" | FileCheck %s
// RUN: tq-opt %s -split-input-file --tq-tile-flash-attention="tile-size=16 splits=4" | FileCheck %s --check-prefix=SPLIT
// RUN: not tq-opt %s -split-input-file --tq-tile-flash-attention="tile-size=0" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not tq-opt %s -split-input-file --tq-tile-flash-attention="tile-size=-8" 2>&1 | FileCheck %s --check-prefix=BAD-NEG
// RUN: not tq-opt %s -split-input-file --tq-tile-flash-attention="splits=0" 2>&1 | FileCheck %s --check-prefix=BAD-SPLITS

// BAD: tq-tile-flash-attention needs tile-size > 0 and splits > 0, got 0 and 1
// BAD-NEG: tq-tile-flash-attention needs tile-size > 0 and splits > 0, got -8 and 1
// BAD-SPLITS: tq-tile-flash-attention needs tile-size > 0 and splits > 0, got 64 and 0

// The fused chain becomes a loop over 32-token tiles carrying the running
// max, sum and accumulator; each tile scores every query head (both heads
// of the GQA group read the same tile).
// CHECK-LABEL: func @decode
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x128xf32>, %[[K:.*]]: !tq.cache<?x1x128, #tq.format<"turbo3_0">>, %[[V:.*]]: !tq.cache<?x1x128, #tq.format<"polar4">>)
// CHECK-DAG: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK-DAG: %[[C32:.*]] = arith.constant 32 : index
// CHECK: %[[M0:.*]] = linalg.fill ins(%[[NEGINF]] : f32) outs(%{{.*}} : tensor<1x2xf32>)
// CHECK: %[[N:.*]] = tq.num_tokens %[[K]]
// CHECK: %[[LOOP:.*]]:3 = scf.for %[[T0:arg[0-9]+]] = %{{.*}} to %[[N]] step %[[C32]] iter_args(%[[M:.*]] = %[[M0]], %[[L:.*]] = %{{.*}}, %[[ACC:.*]] = %{{.*}})
// CHECK:   %[[SIZE:.*]] = arith.minui %{{.*}}, %[[C32]] : index
// CHECK:   %[[KT:.*]] = tq.slice_tokens %[[K]][%[[T0]], %[[SIZE]]]
// CHECK:   %[[VT:.*]] = tq.slice_tokens %[[V]][%[[T0]], %[[SIZE]]]
// CHECK:   %[[S:.*]] = tq.score %[[Q]], %[[KT]] : tensor<1x2x128xf32>, {{.*}} -> tensor<1x2x?xf32>
// CHECK:   %[[P:.*]], %[[M1:.*]], %[[L1:.*]], %[[C:.*]] = tq.online_softmax %[[S]], %[[M]], %[[L]], %[[T0]], %[[N]] {causal, scale = 8.838830e-02 : f32}
// CHECK:   %[[AT:.*]] = tq.accumulate %[[P]], %[[VT]]
// CHECK:   %[[ACC1:.*]] = tq.merge_tile %[[ACC]], %[[C]], %[[AT]]
// CHECK:   scf.yield %[[M1]], %[[L1]], %[[ACC1]]
// CHECK: tq.normalize %[[LOOP]]#2, %[[LOOP]]#1
// CHECK-NOT: tq.softmax
// Without a mask every tile runs: no visibility test.
// CHECK-NOT: scf.if

// Split-KV: four chunks in an scf.forall, merged by tq.combine.
// SPLIT-LABEL: func @decode
// SPLIT: %[[N:.*]] = tq.num_tokens
// SPLIT: %[[CHUNK:.*]] = arith.ceildivui %[[N]], %c4
// SPLIT: %[[PARTS:.*]]:3 = scf.forall (%[[S:.*]]) in (4) shared_outs(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (tensor<4x1x2xf32>, tensor<4x1x2xf32>, tensor<4x1x2x128xf32>)
// Without sinks every split starts from the empty state.
// SPLIT-NOT: arith.select
// SPLIT:   scf.for
// SPLIT:     tq.online_softmax
// SPLIT:   tensor.parallel_insert_slice
// SPLIT: tq.combine %[[PARTS]]#0, %[[PARTS]]#1, %[[PARTS]]#2 : tensor<4x1x2xf32>, tensor<4x1x2x128xf32> -> tensor<1x2x128xf32>
func.func @decode(%qr: tensor<1x2x128xf32>, %k: !tq.cache<?x1x128, #tq.format<"turbo3_0">>, %v: !tq.cache<?x1x128, #tq.format<"polar4">>) -> tensor<1x2x128xf32> {
  %s = tq.score %qr, %k : tensor<1x2x128xf32>, !tq.cache<?x1x128, #tq.format<"turbo3_0">> -> tensor<1x2x?xf32>
  %p = tq.softmax %s {scale = 0.0883883 : f32, causal} : tensor<1x2x?xf32> -> tensor<1x2x?xf32>
  %a = tq.accumulate %p, %v : tensor<1x2x?xf32>, !tq.cache<?x1x128, #tq.format<"polar4">> -> tensor<1x2x128xf32>
  return %a : tensor<1x2x128xf32>
}

// -----

// The mask follows the tile: its token columns are sliced per tile.
// CHECK-LABEL: func @masked
// CHECK: scf.for %[[T0:arg[0-9]+]] =
// CHECK:   %[[MT:.*]] = tensor.extract_slice %arg3[0, %[[T0]]] [3, %{{.*}}] [1, 1] : tensor<3x?xf32> to tensor<3x?xf32>
// CHECK:   tq.online_softmax {{.*}} mask(%[[MT]] : tensor<3x?xf32>) {scale = 1.000000e+00 : f32, softcap = 5.000000e+00 : f32, window = 3 : i64}
func.func @masked(%qr: tensor<3x2x64xf32>, %k: !tq.cache<?x2x64, #tq.format<"q8_0">>, %v: !tq.cache<?x2x64, #tq.format<"q8_0">>, %m: tensor<3x?xf32>) -> tensor<3x2x64xf32> {
  %s = tq.score %qr, %k : tensor<3x2x64xf32>, !tq.cache<?x2x64, #tq.format<"q8_0">> -> tensor<3x2x?xf32>
  %p = tq.softmax %s mask(%m : tensor<3x?xf32>) {scale = 1.0 : f32, window = 3, softcap = 5.0 : f32} : tensor<3x2x?xf32> -> tensor<3x2x?xf32>
  %a = tq.accumulate %p, %v : tensor<3x2x?xf32>, !tq.cache<?x2x64, #tq.format<"q8_0">> -> tensor<3x2x64xf32>
  return %a : tensor<3x2x64xf32>
}

// -----

// Negative: the probabilities are used twice, so the full softmax row must
// exist; tiling would drop it.
// CHECK-LABEL: func @probs_escape
// CHECK-NOT: scf.for
// CHECK: tq.softmax
func.func @probs_escape(%qr: tensor<1x1x64xf32>, %k: !tq.cache<8x1x64, #tq.format<"f16">>) -> (tensor<1x1x64xf32>, tensor<1x1x8xf32>) {
  %s = tq.score %qr, %k : tensor<1x1x64xf32>, !tq.cache<8x1x64, #tq.format<"f16">> -> tensor<1x1x8xf32>
  %p = tq.softmax %s {scale = 1.0 : f32} : tensor<1x1x8xf32> -> tensor<1x1x8xf32>
  %a = tq.accumulate %p, %k : tensor<1x1x8xf32>, !tq.cache<8x1x64, #tq.format<"f16">> -> tensor<1x1x64xf32>
  return %a, %p : tensor<1x1x64xf32>, tensor<1x1x8xf32>
}

// -----

// An engine's mask (f16, llama.cpp's) with ALiBi slopes and sinks: a tile
// runs only when some entry of its mask columns is above -inf (padding and
// sliding-window layers hide most tiles); the sinks are the state before
// the first key (max = sink, sum = 1, or 0 for a sink of -inf).
// CHECK-LABEL: func @engine_mask
// CHECK: %[[SINKMAX:.*]]:2 = linalg.generic {{.*}} ins(%arg5 : tensor<4xf32>)
// CHECK: arith.cmpf oeq
// CHECK: scf.for %[[T0:arg[0-9]+]] = {{.*}} iter_args(%[[M:.*]] = %[[SINKMAX]]#0, %[[L:.*]] = %[[SINKMAX]]#1, %[[ACC:.*]] = %{{.*}})
// CHECK:   %[[MT:.*]] = tensor.extract_slice %arg3[0, %[[T0]]] [1, %{{.*}}] [1, 1] : tensor<1x?xf16> to tensor<1x?xf16>
// CHECK:   %[[MAX:.*]] = linalg.generic {{.*}} iterator_types = ["reduction", "reduction"]} ins(%[[MT]] : tensor<1x?xf16>)
// CHECK:     arith.extf
// CHECK:     arith.maximumf
// CHECK:   %[[VISIBLE:.*]] = arith.cmpf ogt, %{{.*}}, %{{.*}} : f32
// CHECK:   %[[STEP:.*]]:3 = scf.if %[[VISIBLE]]
// CHECK:     tq.score
// CHECK:     tq.online_softmax {{.*}} mask(%[[MT]] : tensor<1x?xf16>) slopes(%arg4 : tensor<4xf32>)
// CHECK:     tq.merge_tile
// CHECK:     scf.yield
// CHECK:   } else {
// CHECK:     scf.yield %[[M]], %[[L]], %[[ACC]]
// CHECK:   scf.yield %[[STEP]]#0, %[[STEP]]#1, %[[STEP]]#2
// Split-KV: only the first split starts from the sinks.
// SPLIT-LABEL: func @engine_mask
// SPLIT: scf.forall (%[[S:.*]]) in (4)
// SPLIT:   %[[FIRST:.*]] = arith.cmpi eq, %[[S]], %c0
// SPLIT:   arith.select %[[FIRST]], %{{.*}}#0, %{{.*}} : tensor<1x4xf32>
// SPLIT:   arith.select %[[FIRST]], %{{.*}}#1, %{{.*}} : tensor<1x4xf32>
// SPLIT:   scf.for
// SPLIT:     scf.if
func.func @engine_mask(%qr: tensor<1x4x128xf32>, %k: !tq.cache<?x1x64, #tq.format<"turbo3_0">>, %v: !tq.cache<?x1x64, #tq.format<"turbo3_0">>, %m: tensor<1x?xf16>, %slopes: tensor<4xf32>, %sinks: tensor<4xf32>) -> tensor<1x4x128xf32> {
  %s = tq.score %qr, %k : tensor<1x4x128xf32>, !tq.cache<?x1x64, #tq.format<"turbo3_0">> -> tensor<1x4x?xf32>
  %p = tq.softmax %s mask(%m : tensor<1x?xf16>) slopes(%slopes : tensor<4xf32>) sinks(%sinks : tensor<4xf32>) {scale = 1.0 : f32} : tensor<1x4x?xf32> -> tensor<1x4x?xf32>
  %a = tq.accumulate %p, %v : tensor<1x4x?xf32>, !tq.cache<?x1x64, #tq.format<"turbo3_0">> -> tensor<1x4x128xf32>
  return %a : tensor<1x4x128xf32>
}

// -----

// A used lse becomes max + log(sum) of the final state (-inf where the sum
// is 0); with split-KV, M + log(sum_s exp(max_s - M) sum_s) of the
// chunks' states.
// CHECK-LABEL: func @lse
// CHECK: %[[LOOP:.*]]:3 = scf.for
// CHECK: tq.normalize %[[LOOP]]#2, %[[LOOP]]#1
// CHECK: %[[LSE:.*]] = linalg.generic {{.*}} ins(%[[LOOP]]#0, %[[LOOP]]#1 : tensor<1x4xf32>, tensor<1x4xf32>)
// CHECK:   %[[SEEN:.*]] = arith.cmpf ogt
// CHECK:   %[[LOG:.*]] = math.log
// CHECK:   %[[SUM:.*]] = arith.addf %{{.*}}, %[[LOG]]
// CHECK:   arith.select %[[SEEN]], %[[SUM]], %{{.*}}
// CHECK: return %{{.*}}, %[[LSE]]
// SPLIT-LABEL: func @lse
// SPLIT: %[[PARTS:.*]]:3 = scf.forall
// SPLIT: tq.combine %[[PARTS]]#0, %[[PARTS]]#1, %[[PARTS]]#2
// SPLIT: %[[GMAX:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[PARTS]]#0 : tensor<4x1x4xf32>)
// SPLIT:   arith.maximumf
// SPLIT: %[[TOTAL:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[PARTS]]#0, %[[PARTS]]#1, %[[GMAX]] : tensor<4x1x4xf32>, tensor<4x1x4xf32>, tensor<1x4xf32>)
// SPLIT:   math.exp
// SPLIT: %[[LSE:.*]] = linalg.generic {{.*}} ins(%[[GMAX]], %[[TOTAL]] : tensor<1x4xf32>, tensor<1x4xf32>)
// SPLIT:   math.log
// SPLIT: return %{{.*}}, %[[LSE]]
func.func @lse(%qr: tensor<1x4x128xf32>, %k: !tq.cache<?x1x64, #tq.format<"turbo3_0">>, %v: !tq.cache<?x1x64, #tq.format<"turbo3_0">>) -> (tensor<1x4x128xf32>, tensor<1x4xf32>) {
  %s = tq.score %qr, %k : tensor<1x4x128xf32>, !tq.cache<?x1x64, #tq.format<"turbo3_0">> -> tensor<1x4x?xf32>
  %p, %l = tq.softmax %s {scale = 1.0 : f32} : tensor<1x4x?xf32> -> tensor<1x4x?xf32>, tensor<1x4xf32>
  %a = tq.accumulate %p, %v : tensor<1x4x?xf32>, !tq.cache<?x1x64, #tq.format<"turbo3_0">> -> tensor<1x4x128xf32>
  return %a, %l : tensor<1x4x128xf32>, tensor<1x4xf32>
}

// -----

// An unused lse adds nothing.
// CHECK-LABEL: func @unused_lse
// CHECK-NOT: math.log
// CHECK: return
func.func @unused_lse(%qr: tensor<1x4x128xf32>, %k: !tq.cache<?x1x64, #tq.format<"turbo3_0">>, %v: !tq.cache<?x1x64, #tq.format<"turbo3_0">>) -> tensor<1x4x128xf32> {
  %s = tq.score %qr, %k : tensor<1x4x128xf32>, !tq.cache<?x1x64, #tq.format<"turbo3_0">> -> tensor<1x4x?xf32>
  %p, %l = tq.softmax %s {scale = 1.0 : f32} : tensor<1x4x?xf32> -> tensor<1x4x?xf32>, tensor<1x4xf32>
  %a = tq.accumulate %p, %v : tensor<1x4x?xf32>, !tq.cache<?x1x64, #tq.format<"turbo3_0">> -> tensor<1x4x128xf32>
  return %a : tensor<1x4x128xf32>
}

// -----

// Each tile keeps the lookup of the op it came from (lut for the scores,
// tile for the weighted sum); a static token count tiles the same way.
// CHECK-LABEL: func @lookups_static
// CHECK: %[[N:.*]] = tq.num_tokens %arg1 : !tq.cache<100x1x64, #tq.format<"q8_0">>
// CHECK: scf.for %[[T0:.*]] = %{{.*}} to %[[N]] step %c32
// CHECK:   %[[KT:.*]] = tq.slice_tokens %arg1[%[[T0]], %{{.*}}] : !tq.cache<100x1x64, #tq.format<"q8_0">> -> !tq.cache<?x1x64, #tq.format<"q8_0">>
// CHECK:   %[[VT:.*]] = tq.slice_tokens %arg1[%[[T0]], %{{.*}}] : !tq.cache<100x1x64, #tq.format<"q8_0">> -> !tq.cache<?x1x64, #tq.format<"q8_0">>
// CHECK:   tq.score %arg0, %[[KT]] {lookup = #tq.lookup<lut>} : tensor<1x2x64xf32>, !tq.cache<?x1x64, #tq.format<"q8_0">> -> tensor<1x2x?xf32>
// CHECK:   tq.accumulate %{{.*}}, %[[VT]] {lookup = #tq.lookup<tile>} : tensor<1x2x?xf32>, !tq.cache<?x1x64, #tq.format<"q8_0">> -> tensor<1x2x64xf32>
func.func @lookups_static(%qr: tensor<1x2x64xf32>, %k: !tq.cache<100x1x64, #tq.format<"q8_0">>) -> tensor<1x2x64xf32> {
  %s = tq.score %qr, %k {lookup = #tq.lookup<lut>} : tensor<1x2x64xf32>, !tq.cache<100x1x64, #tq.format<"q8_0">> -> tensor<1x2x100xf32>
  %p = tq.softmax %s {scale = 1.0 : f32} : tensor<1x2x100xf32> -> tensor<1x2x100xf32>
  %a = tq.accumulate %p, %k {lookup = #tq.lookup<tile>} : tensor<1x2x100xf32>, !tq.cache<100x1x64, #tq.format<"q8_0">> -> tensor<1x2x64xf32>
  return %a : tensor<1x2x64xf32>
}

// -----

// Negative: the probabilities are not a tq.softmax (here a function
// argument); there is no softmax to make online.
// CHECK-LABEL: func @probs_not_softmax
// CHECK-NOT: scf.for
// CHECK: tq.accumulate %arg0, %arg1
// SPLIT-LABEL: func @probs_not_softmax
// SPLIT-NOT: scf.forall
func.func @probs_not_softmax(%p: tensor<1x2x8xf32>, %v: !tq.cache<8x1x64, #tq.format<"q8_0">>) -> tensor<1x2x64xf32> {
  %a = tq.accumulate %p, %v : tensor<1x2x8xf32>, !tq.cache<8x1x64, #tq.format<"q8_0">> -> tensor<1x2x64xf32>
  return %a : tensor<1x2x64xf32>
}

// -----

// Negative: the logits are dense products (tq.qk), not a tq.score over a
// packed cache that a tile could slice.
// CHECK-LABEL: func @logits_not_score
// CHECK-NOT: scf.for
// CHECK: tq.qk
// CHECK: tq.softmax
// CHECK: tq.accumulate
func.func @logits_not_score(%q: tensor<1x2x64xf32>, %kd: tensor<8x1x64xf32>, %v: !tq.cache<8x1x64, #tq.format<"q8_0">>) -> tensor<1x2x64xf32> {
  %s = tq.qk %q, %kd : tensor<1x2x64xf32>, tensor<8x1x64xf32> -> tensor<1x2x8xf32>
  %p = tq.softmax %s {scale = 1.0 : f32} : tensor<1x2x8xf32> -> tensor<1x2x8xf32>
  %a = tq.accumulate %p, %v : tensor<1x2x8xf32>, !tq.cache<8x1x64, #tq.format<"q8_0">> -> tensor<1x2x64xf32>
  return %a : tensor<1x2x64xf32>
}

// -----

// Negative: the scores are used twice, so the full row of logits must
// exist; tiling would drop it.
// CHECK-LABEL: func @scores_escape
// CHECK-NOT: scf.for
// CHECK: %[[S:.*]] = tq.score
// CHECK: tq.softmax %[[S]]
// CHECK: return %{{.*}}, %[[S]]
func.func @scores_escape(%qr: tensor<1x2x64xf32>, %k: !tq.cache<8x1x64, #tq.format<"q8_0">>) -> (tensor<1x2x64xf32>, tensor<1x2x8xf32>) {
  %s = tq.score %qr, %k : tensor<1x2x64xf32>, !tq.cache<8x1x64, #tq.format<"q8_0">> -> tensor<1x2x8xf32>
  %p = tq.softmax %s {scale = 1.0 : f32} : tensor<1x2x8xf32> -> tensor<1x2x8xf32>
  %a = tq.accumulate %p, %k : tensor<1x2x8xf32>, !tq.cache<8x1x64, #tq.format<"q8_0">> -> tensor<1x2x64xf32>
  return %a, %s : tensor<1x2x64xf32>, tensor<1x2x8xf32>
}
