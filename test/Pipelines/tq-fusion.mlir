// RUN: tq-opt %s --tq-fusion | FileCheck %s --check-prefix=FUSED
// RUN: tq-opt %s --tq-fusion="hoist-rotations=false" | FileCheck %s --check-prefix=NAIVE
// RUN: tq-opt %s --tq-fusion="hoist-rotations=false fuse-codebook=false" | FileCheck %s --check-prefix=DENSE
// RUN: tq-opt %s --tq-fusion="tile-size=0" | FileCheck %s --check-prefix=UNTILED

// UNTILED-LABEL: func @attn
// UNTILED-NOT: scf.for
// UNTILED: tq.score
// UNTILED: tq.softmax
// UNTILED: tq.accumulate

// The default pipeline rotates the query once and the output once, reads
// the packed caches directly, and walks them in 64-token tiles.
// FUSED-LABEL: func @attn
// FUSED: %[[QR:.*]] = tq.rotate %arg0 {rotation = #rotation} : tensor<1x4x64xf32>
// FUSED: scf.for
// FUSED: %[[KT:.*]] = tq.slice_tokens %arg1
// FUSED: tq.score %[[QR]], %[[KT]]
// FUSED: tq.online_softmax
// FUSED: tq.accumulate
// FUSED: tq.merge_tile
// FUSED: tq.normalize
// FUSED: tq.rotate %{{.*}} {inverse, rotation = #rotation} : tensor<1x4x64xf32>
// FUSED-NOT: tq.gather

// Without hoisting every cached row is un-rotated (a tq.rotate over the
// whole ?x2x64 cache), so qk/pv cannot read packed indices.
// NAIVE-LABEL: func @attn
// NAIVE: tq.gather %arg1
// NAIVE: tq.rotate %{{.*}} {inverse, rotation = #rotation} : tensor<?x2x64xf32>
// NAIVE: tq.qk
// NAIVE: tq.pv
// NAIVE-NOT: tq.score

// DENSE-LABEL: func @attn
// DENSE-NOT: tq.score
// DENSE: tq.qk
func.func @attn(%q: tensor<1x4x64xf32>, %k: !tq.cache<?x2x64, #tq.format<"tq3_0">>, %v: !tq.cache<?x2x64, #tq.format<"tq3_0">>) -> tensor<1x4x64xf32> {
  %o = tq.attention %q, %k, %v : tensor<1x4x64xf32>, !tq.cache<?x2x64, #tq.format<"tq3_0">>, !tq.cache<?x2x64, #tq.format<"tq3_0">> -> tensor<1x4x64xf32>
  return %o : tensor<1x4x64xf32>
}
