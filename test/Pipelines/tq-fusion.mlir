// RUN: tq-opt %s --tq-fusion | FileCheck %s --check-prefix=FUSED
// RUN: tq-opt %s --tq-fusion="hoist-rotations=false" | FileCheck %s --check-prefix=NAIVE
// RUN: tq-opt %s --tq-fusion="hoist-rotations=false fuse-codebook=false" | FileCheck %s --check-prefix=DENSE
// RUN: tq-opt %s --tq-fusion="tile-size=0" | FileCheck %s --check-prefix=UNTILED
// RUN: tq-opt %s --tq-fusion="lookup=lut tile-size=32 splits=4" | FileCheck %s --check-prefix=SPLIT

// The stages and their options, as the pipeline builds them.
// RUN: tq-opt %s --tq-fusion --dump-pass-pipeline -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=STAGES
// RUN: tq-opt %s --tq-fusion="lookup=lut tile-size=32 splits=4" --dump-pass-pipeline -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=STAGES-OPTIONS
// RUN: tq-opt %s --tq-fusion="tile-size=0" --dump-pass-pipeline -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=STAGES-UNTILED
// RUN: tq-opt %s --tq-fusion="hoist-rotations=false fuse-codebook=false tile-size=16" --dump-pass-pipeline -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=STAGES-DENSE
// The IR between the stages.
// RUN: tq-opt %s --tq-fusion --mlir-print-ir-after=tq-decompose-attention,tq-hoist-rotation,tq-fuse-codebook,tq-tile-flash-attention \
// RUN:   -o /dev/null 2>&1 | FileCheck %s --check-prefix=IR

// STAGES: builtin.module(
// STAGES-NEXT: tq-decompose-attention,
// STAGES-NEXT: tq-hoist-rotation,
// STAGES-NEXT: tq-fuse-codebook{lookup=select},
// STAGES-NEXT: tq-tile-flash-attention{splits=1 tile-size=64},
// STAGES-NEXT: canonicalize{{.*}},
// STAGES-NEXT: cse
// STAGES-NEXT: )

// STAGES-OPTIONS: tq-fuse-codebook{lookup=lut},
// STAGES-OPTIONS-NEXT: tq-tile-flash-attention{splits=4 tile-size=32},

// No tiling without a tile size.
// STAGES-UNTILED: tq-fuse-codebook{lookup=select},
// STAGES-UNTILED-NEXT: canonicalize

// Tiling needs the fused ops: without fuse-codebook the tile size is
// ignored, and without hoisting there is no hoist stage.
// STAGES-DENSE: builtin.module(
// STAGES-DENSE-NEXT: tq-decompose-attention,
// STAGES-DENSE-NEXT: canonicalize{{.*}},
// STAGES-DENSE-NEXT: cse
// STAGES-DENSE-NEXT: )

// Decomposed: both caches gathered and un-rotated per row; hoisted: the
// rotations act on the query and the output instead; fused: the products
// read the packed caches; tiled: a loop over 64-token tiles.
// IR-LABEL: IR Dump After TQDecomposeAttention
// IR: %[[KG:.*]] = tq.gather %arg1
// IR: %[[KR:.*]] = tq.rotate %[[KG]] {inverse, rotation = #rotation} : tensor<?x2x64xf32>
// IR: tq.qk %arg0, %[[KR]]
// IR: tq.softmax
// IR: tq.gather %arg2
// IR: tq.rotate %{{.*}} {inverse, rotation = #rotation} : tensor<?x2x64xf32>
// IR: tq.pv
// IR-LABEL: IR Dump After TQHoistRotation
// IR: %[[KG:.*]] = tq.gather %arg1
// IR-NOT: tq.rotate {{.*}} : tensor<?x2x64xf32>
// IR: %[[QR:.*]] = tq.rotate %arg0 {rotation = #rotation} : tensor<1x4x64xf32>
// IR: tq.qk %[[QR]], %[[KG]]
// IR: %[[VG:.*]] = tq.gather %arg2
// IR-NOT: tq.rotate {{.*}} : tensor<?x2x64xf32>
// IR: %[[A:.*]] = tq.pv %{{.*}}, %[[VG]]
// IR: tq.rotate %[[A]] {inverse, rotation = #rotation} : tensor<1x4x64xf32>
// IR-LABEL: IR Dump After TQFuseCodebook
// IR-NOT: tq.gather
// IR: %[[QR:.*]] = tq.rotate %arg0
// IR: tq.score %[[QR]], %arg1
// IR: tq.softmax
// IR: tq.accumulate %{{.*}}, %arg2
// IR-LABEL: IR Dump After TQTileFlashAttention
// IR-NOT: tq.softmax
// IR: scf.for %{{.*}} step %c64
// IR: tq.online_softmax
// IR: tq.normalize

// The options reach the stages: per-query tables (lut), 32-token tiles,
// four splits merged by tq.combine.
// SPLIT-LABEL: func @attn
// SPLIT: scf.forall (%{{.*}}) in (4)
// SPLIT: scf.for %{{.*}} step %c32
// SPLIT: tq.score %{{.*}} {lookup = #tq.lookup<lut>}
// SPLIT: tq.accumulate %{{.*}} {lookup = #tq.lookup<lut>}
// SPLIT: tq.combine
// SPLIT: tq.rotate %{{.*}} {inverse, rotation = #rotation} : tensor<1x4x64xf32>

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
