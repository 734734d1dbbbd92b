// The fused products' register knobs of tq-lower-to-loops: score-rows caps
// the KV rows of a score step (their chains share one horizontal-sum
// tree), accumulators sets the loop-carried vectors of the one-row
// weighted sum.

// RUN: tq-opt %s -split-input-file --tq-lower-to-loops | FileCheck %s --check-prefix=DEFAULT
// RUN: tq-opt %s -split-input-file --tq-lower-to-loops="score-rows=1 accumulators=4" | FileCheck %s --check-prefix=SMALL
// RUN: not tq-opt %s -split-input-file --tq-lower-to-loops="score-rows=0" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not tq-opt %s -split-input-file --tq-lower-to-loops="accumulators=0" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: score-rows and accumulators must be >= 1

// Two heads of one kv head, 128 values (8 chunks). Default: 4 rows per
// step (the flash loop over tokens steps by 4; 8 chains of one tree);
// score-rows=1: one row per step.
// DEFAULT-LABEL: func @score
// DEFAULT: scf.for %{{.*}} = %c0{{.*}} to %c5 step %c4
// SMALL-LABEL: func @score
// SMALL: scf.for %{{.*}} = %c0{{.*}} to %c5 step %c1{{.*}} iter_args
func.func @score(%q: tensor<1x2x128xf32>, %kb: tensor<5x1x50xi8>) -> tensor<1x2x5xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x50xi8> -> !tq.cache<5x1x128, #tq.format<"turbo3_0">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<1x2x128xf32>, !tq.cache<5x1x128, #tq.format<"turbo3_0">> -> tensor<1x2x5xf32>
  return %s : tensor<1x2x5xf32>
}

// -----

// One query row, 2 heads x 8 chunks: with 16 accumulators one token loop
// carries all 16 (8 per head); with 4, four loops carry 2 chunks per head.
// DEFAULT-LABEL: func @accumulate
// DEFAULT-COUNT-1: iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// SMALL-LABEL: func @accumulate
// SMALL-COUNT-4: iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// SMALL-NOT: iter_args({{.*}}) -> (vector<16xf32>
func.func @accumulate(%p: tensor<1x2x5xf32>, %vb: tensor<5x1x50xi8>) -> tensor<1x2x128xf32> {
  %v = tq.from_bytes %vb : tensor<5x1x50xi8> -> !tq.cache<5x1x128, #tq.format<"turbo3_0">>
  %a = tq.accumulate %p, %v {lookup = #tq.lookup<tile>} : tensor<1x2x5xf32>, !tq.cache<5x1x128, #tq.format<"turbo3_0">> -> tensor<1x2x128xf32>
  return %a : tensor<1x2x128xf32>
}
