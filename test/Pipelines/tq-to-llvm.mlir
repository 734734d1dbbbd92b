// The CPU pipeline: the fusion stages, tq-lower-to-loops, the polynomial
// exp, bufferization and the upstream conversions to the LLVM dialect.

// RUN: tq-opt %s --tq-to-llvm --dump-pass-pipeline -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=STAGES
// RUN: tq-opt %s --tq-to-llvm | FileCheck %s --check-prefix=LLVM
// RUN: tq-opt %s --tq-to-llvm="splits=2 tile-size=16" | FileCheck %s --check-prefix=LLVM
// RUN: tq-opt %s --tq-to-llvm="lookup=tile" \
// RUN:   --mlir-print-ir-after=tq-tile-flash-attention,tq-lower-to-loops,tq-approximate-math,one-shot-bufferize,tq-lower-lane-lookup \
// RUN:   -o /dev/null 2>&1 | FileCheck %s --check-prefix=IR
// RUN: tq-opt %s --tq-to-llvm="lookup=tile centroid-permute=avx512" | FileCheck %s --check-prefix=AVX512
// RUN: tq-opt %s --tq-to-llvm="lookup=tile" | FileCheck %s --check-prefix=TREE
// RUN: not tq-opt %s --tq-to-llvm="centroid-permute=neon" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: tq-opt %s --tq-to-llvm="max-unrolled-chunks=7 score-rows=2 accumulators=24 pair-ahead=true" --dump-pass-pipeline -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=UNROLL
// RUN: tq-opt %s --tq-to-llvm="score-dot=i8 score-lanes=tokens centroid-permute=avx512 vnni=true vbmi=true" --dump-pass-pipeline -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BYTES
// RUN: tq-opt %s --tq-to-llvm="score-dot=i8 centroid-permute=avx2 vnni=true vbmi=true" --dump-pass-pipeline -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NOVNNI
// RUN: tq-opt %s --tq-to-llvm="value-dot=bf16 centroid-permute=avx512 vnni=true bf16=true" --dump-pass-pipeline -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=PAIRS
// RUN: tq-opt %s --tq-to-llvm="amx-tiles=true" --dump-pass-pipeline -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=AMX
// RUN: tq-opt %s --tq-to-llvm="native-fma-floor=true" --dump-pass-pipeline -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=FMA

// native-fma-floor (tq-aot: AVX-512 targets) reaches tq-approximate-math.
// FMA: tq-approximate-math{native-fma-floor=true},

// score-dot reaches tq-lower-to-loops; vnni turns the avx512 permutes'
// lane lookup into avx512vnni (the byte ops' vpshufb / vpdpbusd), and
// leaves other permutes alone (their byte ops stay portable);
// score-lanes reaches tq-lower-to-loops, and vbmi the lane lookup only
// with an AVX-512 isa (vpmultishiftqb and vpermb are AVX-512), where it
// also makes the integer paths' index decode gather fields by
// tq.select_bits (select-fields).
// BYTES: tq-lower-to-loops{{{.*}}score-dot=i8 score-lanes=tokens score-rows=4 select-fields=true{{.*}}},
// BYTES: tq-lower-lane-lookup{isa=avx512vnni vbmi=true},
// NOVNNI: tq-lower-to-loops{{{.*}}select-fields=false{{.*}}},
// NOVNNI: tq-lower-lane-lookup{isa=avx2 vbmi=false},

// value-dot reaches tq-lower-to-loops; bf16 (AVX512-BF16) makes the lane
// lookup avx512bf16 (vdpbf16ps through x86vector, which the vector-to-llvm
// conversion then lowers).
// PAIRS: tq-lower-to-loops{{{.*}}value-dot=bf16 vector-rotations=true vector-softmax=true},
// PAIRS: tq-lower-lane-lookup{isa=avx512bf16 vbmi=false},
// PAIRS: convert-vector-to-llvm{{{.*}}enable-x86vector=true{{.*}}},

// (pair-ahead, like the other register knobs, reaches tq-lower-to-loops.)
// The AMX tile products: the option reaches the loop lowering, the vector
// conversion lowers the tile ops and branches carrying tiles (a weighted
// sum's accumulator) take the AMX dialect's type conversion.
// AMX: tq-lower-to-loops{{.*}}amx-tiles=true
// AMX: convert-vector-to-llvm{enable-amx=true
// AMX: convert-to-llvm{{.*}}filter-dialects={cf,amx}
// UNROLL: tq-lower-to-loops{accumulators=24 amx-tiles=false max-unrolled-chunks=7 narrow-levels=false pair-ahead=true prefetch=l1 score-dot=f32 score-lanes=rows score-rows=2 select-fields=false value-dot=f32 vector-rotations=true vector-softmax=true},

// STAGES: builtin.module(
// STAGES-NEXT: tq-decompose-attention,
// STAGES-NEXT: tq-hoist-rotation,
// STAGES-NEXT: tq-fuse-codebook{lookup=select},
// STAGES-NEXT: tq-tile-flash-attention{splits=1 tile-size=64},
// STAGES-NEXT: canonicalize{{.*}},
// STAGES-NEXT: cse,
// STAGES-NEXT: tq-lower-to-loops{accumulators=16 amx-tiles=false max-unrolled-chunks=48 narrow-levels=false pair-ahead=false prefetch=l1 score-dot=f32 score-lanes=rows score-rows=4 select-fields=false value-dot=f32 vector-rotations=true vector-softmax=true},
// STAGES-NEXT: tq-approximate-math{native-fma-floor=false},
// STAGES-NEXT: canonicalize{{.*}},
// STAGES-NEXT: cse,
// STAGES-NEXT: loop-invariant-code-motion,
// STAGES-NEXT: one-shot-bufferize{{{.*}}bufferize-function-boundaries=true{{.*}}function-boundary-type-conversion=identity-layout-map{{.*}}},
// STAGES: ownership-based-buffer-deallocation
// STAGES: bufferization-lower-deallocations,
// STAGES: tq-lower-lane-lookup{isa=none vbmi=false},
// STAGES-NEXT: tq-memref-copy-to-linalg,
// STAGES-NEXT: func.func(
// STAGES-NEXT: convert-linalg-to-loops
// STAGES-NEXT: ),
// STAGES-NEXT: scf-forall-to-for,
// STAGES-NEXT: tq-hoist-tile-buffers{max-bytes=16777216},
// STAGES-NEXT: convert-vector-to-scf{{.*}},
// STAGES-NEXT: expand-strided-metadata,
// STAGES-NEXT: lower-affine,
// STAGES-NEXT: convert-scf-to-cf{{.*}},
// STAGES-NEXT: convert-math-to-llvm{{.*}},
// STAGES-NEXT: convert-math-to-libm,
// STAGES-NEXT: convert-vector-to-llvm{{.*}},
// STAGES-NEXT: finalize-memref-to-llvm{{.*}},
// STAGES-NEXT: convert-arith-to-llvm{{.*}},
// STAGES-NEXT: convert-cf-to-llvm{{.*}},
// STAGES-NEXT: convert-func-to-llvm{{.*}},
// STAGES-NEXT: convert-index-to-llvm{{.*}},
// STAGES-NEXT: convert-ub-to-llvm{{.*}},
// STAGES-NEXT: reconcile-unrealized-casts
// STAGES-NEXT: )

// Only the LLVM dialect is left (with and without split-KV): memrefs are
// pointers and sizes, the codebooks and sign vectors are constant
// globals, temporaries are malloc'd, and exp is inline arithmetic (no
// libm call).
// LLVM-DAG: llvm.func @malloc(i64) -> !llvm.ptr
// LLVM-DAG: llvm.mlir.global private constant @{{.*}}(dense<{{.*}}> : tensor<8xf32>)
// LLVM-LABEL: llvm.func @decode(
// LLVM-SAME: %{{.*}}: !llvm.ptr
// LLVM-NOT: tq.
// LLVM-NOT: builtin.unrealized_conversion_cast
// LLVM-NOT: {{ (memref|scf|linalg|tensor|vector|arith|math|cf|func)\.}}
// LLVM-NOT: @expf
// LLVM: llvm.return
// LLVM-NOT: {{ (memref|scf|linalg|tensor|vector|arith|math|cf|func)\.}}

// The stages on tensors: the flash loop; then loops, with only the
// centroid lookups left of the tq dialect; exp expanded; buffers; and
// the lookups expanded to selects.
// IR-LABEL: IR Dump After TQTileFlashAttention
// IR: scf.for
// IR: tq.score %{{.*}} {lookup = #tq.lookup<tile>}
// IR: tq.online_softmax
// IR: tq.accumulate %{{.*}} {lookup = #tq.lookup<tile>}
// IR-LABEL: IR Dump After TQLowerToLoops
// IR-SAME: (tq-lower-to-loops)
// IR: func.func @decode(%{{.*}}: tensor<1x4x64xf32>, %{{.*}}: tensor<?x?x2x50xi8>, %{{.*}}: tensor<?x?x2x68xi8>) -> tensor<1x4x64xf32>
// IR-NOT: tq.{{(score|accumulate|online_softmax|merge_tile|normalize|rotate|slice_tokens|num_tokens)}}
// IR: tq.lane_lookup
// IR-NOT: tq.{{(score|accumulate|online_softmax|merge_tile|normalize|rotate|slice_tokens|num_tokens)}}
// IR: math.exp
// IR-LABEL: IR Dump After TQApproximateMath
// IR-NOT: math.exp
// IR-LABEL: IR Dump After OneShotBufferize
// IR: func.func @decode(%{{.*}}: memref<1x4x64xf32>, %{{.*}}: memref<?x?x2x50xi8>, %{{.*}}: memref<?x?x2x68xi8>) -> memref<1x4x64xf32>
// IR: tq.lane_lookup
// IR-LABEL: IR Dump After TQLowerLaneLookup
// IR-NOT: tq.
// IR: arith.select %{{.*}} : vector<16xi1>, vector<16xf32>
// IR-NOT: tq.

// centroid-permute picks the x86 permute for the lookups.
// AVX512-LABEL: llvm.func @decode(
// AVX512: llvm.call_intrinsic "llvm.x86.avx512.permvar.sf.512"
// TREE-LABEL: llvm.func @decode(
// TREE-NOT: llvm.call_intrinsic "llvm.x86
// TREE: llvm.select %{{.*}} : vector<16xi1>, vector<16xf32>
// TREE-NOT: llvm.call_intrinsic "llvm.x86

// BAD: tq-lower-lane-lookup: isa must be none, avx2, avxvnni, avx512, avx512vnni or avx512bf16, got 'neon'

func.func @decode(%q: tensor<1x4x64xf32>, %k: !tq.cache<?x2x64, #tq.format<"turbo3_0">>, %v: !tq.cache<?x2x64, #tq.format<"q8_0">>) -> tensor<1x4x64xf32> {
  %o = tq.attention %q, %k, %v {causal} : tensor<1x4x64xf32>, !tq.cache<?x2x64, #tq.format<"turbo3_0">>, !tq.cache<?x2x64, #tq.format<"q8_0">> -> tensor<1x4x64xf32>
  return %o : tensor<1x4x64xf32>
}
