//===- Passes.td - Conversions out of the tq dialect -------*- tablegen -*-===//

#ifndef TQ_CONVERSION_PASSES_TD
#define TQ_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def TQLowerToLoops : Pass<"tq-lower-to-loops", "::mlir::ModuleOp"> {
  let summary = "Lower tq ops to linalg loop nests with explicit bit unpacking";
  let description = [{
    Converts every tq op (after `tq-decompose-attention`; `tq.attention`
    itself is rejected with an error; `tq.quantize` becomes the encoder's
    loops) into
    `linalg.generic` loop nests over tensors, with the packed cache as a
    `tensor<tokens x kv_heads x row_bytes x i8>`:

    - each element is decoded in the loop body: the block's scale (fp16 or
      f32 bytes), the index assembled from its bit planes with shifts and
      masks, and the centroid read from a constant codebook table;
    - `tq.score` / `tq.accumulate` decode on the fly, with `lookup = lut`
      building a per-query table `q[d] * C[c]` first; formats with a QJL
      residual add `||r|| sqrt(pi/2)/m <S q, sign(S r)>` through a
      precomputed `S q`;
    - rotations become dense products with the rotation's constant matrix;
    - `tq.softmax` becomes masked max / exp / sum / divide.

    Every constant (codebooks, rotation matrices, QJL projections, block
    layouts) is folded in from the format library at compile time; the
    generated code calls nothing but libm. The result bufferizes with
    `one-shot-bufferize` and lowers to LLVM with upstream passes.
  }];
  let dependentDialects = [
    "::mlir::amx::AMXDialect",
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
    "::mlir::vector::VectorDialect"
  ];
  let options = [
    Option<"maxUnrolledChunks", "max-unrolled-chunks", "int64_t",
           /*default=*/"48",
           "Fused score and accumulate unroll a row of at most this many "
           "vector chunks (values and QJL signs together) whole; longer "
           "rows loop over the row's decode periods and unroll one (IR, and "
           "compile time, then grow with the period, not the head dim)">,
    Option<"scoreRows", "score-rows", "int64_t", /*default=*/"4",
           "At most this many KV rows per step of the fused score (their "
           "multiply-add chains share one horizontal-sum tree, which also "
           "bounds the step)">,
    Option<"accumulators", "accumulators", "int64_t", /*default=*/"16",
           "Vector accumulators the one-query-row weighted sum keeps per "
           "token loop (more: fewer passes over the rows, more registers)">,
    Option<"scoreDot", "score-dot", "std::string", /*default=*/"\"f32\"",
           "Dot products of the fused score: f32 (decoded rows times the f32 "
           "query) or i8 (codebook indices as int8 levels times the query "
           "quantised to int8 once per call, tq.byte_dot; formats with a "
           "scale per block and at most 16 levels, no QJL residual; others "
           "keep f32)">,
    Option<"narrowLevels", "narrow-levels", "bool", /*default=*/"false",
           "The int8 score's codebook levels as 7-bit bytes (below 128), its "
           "tq.byte_dot ops marked narrow, so that CPUs without VNNI compute "
           "them exactly with AVX2's vpmaddubsw (tq-lower-lane-lookup "
           "isa=avx2); without it 8-bit levels, for vpdpbusd. tq-aot sets it "
           "where the lowering's isa has no vpdpbusd (hasVnniByteDots)">,
    Option<"valueDot", "value-dot", "std::string", /*default=*/"\"f32\"",
           "Multiply-adds of the fused weighted sum: f32, bf16 "
           "(two tokens per tq.pair_dot on bf16 centroids and weights, "
           "summed in f32) or i16 (int16 levels times int16 fixed-point "
           "weights, summed in i32 and scaled once per call; with several "
           "query rows each token pair's levels are formed once into a "
           "buffer); formats with "
           "a scale per block and at most 16 levels, no QJL residual; "
           "others keep f32">,
    Option<"scoreLanes", "score-lanes", "std::string", /*default=*/"\"rows\"",
           "Lanes of score-dot=i8 with one query row: rows (a vector per "
           "row chunk, the chunks' sums reduced by a shuffle tree) or "
           "tokens (every i32 lane a part of one token's score, four "
           "tokens a vector, the packed index fields gathered by "
           "tq.select_bits: no per-row reduction; formats whose index "
           "planes are 1, 2 or 4 bits wide, at most two, blocks of a "
           "multiple of 2S or exactly S values, S = 64 / widest plane's "
           "bits; others keep rows, or f32 where blocks are shorter than "
           "64 values) or blocks (tokens, and rows of short scale blocks "
           "such as tq3_0's hold four blocks' sums in the i32 lanes of a "
           "token's 128-bit lane: one chain and transpose per head for "
           "four blocks; the same scores) or shifts (tokens, and rows of "
           "one index plane or of a 2-bit plane under a 1-bit one, in "
           "blocks of a multiple of 128 / b values, b the widest plane's "
           "bits, take each 16 bytes' field f by one shift of 16-bit "
           "words by b f, the values in the order the shifts leave them "
           "and the query in the same order: no tq.select_bits, the same "
           "scores)">,
    Option<"selectFields", "select-fields", "bool", /*default=*/"false",
           "The integer score's and pair weighted sum's index decode "
           "gathers each index plane's fields with tq.select_bits and "
           "joins the planes with bit selects (indices exact in their low "
           "bits, which the table lookups read); for targets where "
           "tq.select_bits is one instruction (tq-lower-lane-lookup "
           "vbmi). Formats whose planes are 1, 2 or 4 bits wide with "
           "2^bits levels; others keep the shift-and-mask decode">,
    Option<"prefetch", "prefetch", "std::string", /*default=*/"\"l1\"",
           "Where the fused products' prefetches of the next tile's rows "
           "bring them: l1 (memref.prefetch locality 3: x86's prefetcht0) "
           "or l2 (locality 2: prefetcht1). A tile's K and V rows overflow "
           "a 32-48 KB L1 while the tile before them is read, so on CPUs "
           "whose L1 misses queue behind such prefetches (Zen 4) l2 keeps "
           "them out of the way (see tq-aot's --prefetch)">,
    Option<"pairAhead", "pair-ahead", "bool", /*default=*/"false",
           "The pair weighted sum with one query row (value-dot=bf16 or "
           "i16) decodes the next token pair while its dots take the "
           "current pair's words (carried by the loop), so the decode's "
           "permute chain overlaps the dots; needs four more live vectors, "
           "for targets whose registers hold them (see tq-aot's "
           "--pair-ahead)">,
    Option<"amxTiles", "amx-tiles", "bool", /*default=*/"false",
           "With several query rows (prefill), the fused score and weighted "
           "sum as AMX-BF16 tile products (tdpbf16ps on 16x16 f32 tiles): "
           "per tile the queries, keys, weights and values are written once "
           "as bf16 in the tiles' layouts (keys and values as VNNI pairs). "
           "Formats without a QJL residual whose padded dim is a multiple "
           "of 32; others keep the vector products. For CPUs with AMX-BF16 "
           "(see tq-aot's --amx)">,
    Option<"vectorRotations", "vector-rotations", "bool", /*default=*/"false",
           "tq.rotate's Hadamard kinds on rows of 16-lane vectors (sign "
           "flips and scale as vector multiplies, butterfly stages as lane "
           "shuffles and selects or whole-vector adds; the same bits as "
           "the scalar stages), for rows whose length is a multiple of 16; "
           "for pipelines that lower the vector dialect">,
    Option<"vectorSoftmax", "vector-softmax", "bool", /*default=*/"false",
           "tq.online_softmax (static heads) as 16-lane vector loops: per "
           "query row one pass for every head's maximum, one for their "
           "probabilities and sums, the exp specialised to its argument "
           "(a logit minus a maximum over it: <= 0); for pipelines that "
           "lower the vector dialect">
  ];
}

def TQLowerLaneLookup : Pass<"tq-lower-lane-lookup"> {
  let summary = "Expand tq.lane_lookup, tq.byte_lookup and tq.byte_dot for "
                "the target's vector ISA";
  let description = [{
    Rewrites each `tq.lane_lookup` (a decoded row picking its centroids):

    - `isa=none`: a binary select tree on the index bits — bit k picks
      between pairs of the previous level, so a table of 2^b entries takes
      b bit tests and 2^b - 1 selects (the verifier admits only
      power-of-two tables);
    - `isa=avx512`: one `vpermps` (`llvm.x86.avx512.permvar.sf.512`) per
      16 lanes, for tables of up to 16 entries;
    - `isa=avx2`: one `vpermps` (`llvm.x86.avx2.permps`) per 8 lanes, for
      tables of up to 8 entries.

    - `isa=avx512vnni` and `isa=avx512bf16`: as `avx512` for
      `tq.lane_lookup`.

    Where the permute does not apply (a larger table, a lane count that is
    not a multiple of the permute's width) the select tree is used.

    The int8 score path's byte ops (see `tq-lower-to-loops{score-dot=i8}`):
    with `isa=avx512vnni`, `tq.byte_lookup` becomes one `vpshufb`
    (`llvm.x86.avx512.pshuf.b.512`) per 64 lanes and `tq.byte_dot` one
    `vpdpbusd` (`llvm.x86.avx512.vpdpbusd.512/256/128`) per 16, 8 or 4
    lanes; with `isa=avx2` (or `avx512`, which has AVX2) one 256-bit
    `vpshufb` (`llvm.x86.avx2.pshuf.b`) per 32 lanes and, for a `narrow`
    `tq.byte_dot` (lhs bytes below 128), `vpmaddubsw` + `vpmaddwd` against
    ones (`llvm.x86.avx2.pmadd.ub.sw`, `llvm.x86.avx2.pmadd.wd`) per 8
    lanes; with `isa=avxvnni` (AVX2 plus AVX-VNNI) the same lookups and
    one VEX `vpdpbusd` (`llvm.x86.avx512.vpdpbusd.256`) per 8 lanes,
    narrow or not. Otherwise a select tree on bytes and widening
    multiplies with a sum of each group of four.

    The token-lane score's field gathers (`tq.select_bits`, see
    `tq-lower-to-loops{score-lanes=tokens}`): with `vbmi` one
    `vpmultishiftqb` (`llvm.x86.avx512.pmultishift.qb.512`) per 64 bytes,
    and with it `tq.byte_lookup` is one `vpermb`
    (`llvm.x86.avx512.permvar.qi.512`) per 64 lanes; otherwise each byte's
    64-bit lane is rotated by its offset and truncated.

    The pair weighted sum's ops (see `tq-lower-to-loops{value-dot=...}`):
    with `isa=avx512vnni` or `avx512bf16`, `tq.word_lookup` becomes one
    `vpermw` (`llvm.x86.avx512.permvar.hi.512`) per 32 lanes and an i16
    `tq.pair_dot` one `vpdpwssd` (`llvm.x86.avx512.vpdpwssd.512/256/128`)
    per 16, 8 or 4 lanes; with `isa=avx512bf16` a bf16 `tq.pair_dot`
    becomes `x86vector.avx512.dot` (`vdpbf16ps`). With `isa=avx2`,
    `avx512` or `avxvnni` a table of up to 16 words is looked up by 256-bit
    `vpshufb` on its bytes per 16 lanes (a lookup of bytes widened to
    words by a shuffle with zeros: two `tq.byte_lookup` of the table's low
    and high bytes, the shuffle taking the high bytes), and an i16
    `tq.pair_dot` is
    `vpmaddwd` + an add per 8 lanes (`avxvnni`: a VEX `vpdpwssd`).
    Otherwise a select tree on words and widening multiplies with a sum of
    each pair. The
    permutes only run on a CPU with that ISA: tq-aot picks `isa` from the
    target CPU's features. Runs after bufferization (the intrinsic calls
    have no declared memory effects).
  }];
  let options = [
    Option<"isa", "isa", "std::string", /*default=*/"\"none\"",
           "none (select tree, any target), avx2 (also its byte and word "
           "ops), avxvnni (avx2 plus AVX-VNNI's 256-bit vpdpbusd/vpdpwssd), "
           "avx512 (with AVX2's byte and word ops), avx512vnni (avx512 "
           "plus AVX512-VNNI/BW byte and word ops) or avx512bf16 "
           "(avx512vnni plus vdpbf16ps)">,
    Option<"vbmi", "vbmi", "bool", /*default=*/"false",
           "The target also has AVX512-VBMI (with an AVX-512 isa): "
           "tq.select_bits becomes vpmultishiftqb and tq.byte_lookup one "
           "vpermb per 64 lanes (the table repeated to 64 bytes, no index "
           "mask)">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::vector::VectorDialect",
                           "::mlir::x86vector::X86VectorDialect"];
}

def TQApproximateMath : Pass<"tq-approximate-math"> {
  let summary = "Expand math.exp2 / math.exp into polynomial approximations";
  let description = [{
    A libm `exp2f` call per element would keep softmax loops scalar. This
    pass rewrites `math.exp2(x)` as `math.exp(x * ln 2)` and then applies MLIR's
    polynomial approximation of `math.exp` (range reduction plus a minimax
    polynomial, a few ulp in f32) and expands the `math.fma` and
    `math.floor` it creates,
    leaving only arith ops and bit casts.
    The CPU pipelines use it so softmax loops vectorise; the GPU targets
    use `tq-native-exp2` (the hardware instruction) instead.
    Only f32 scalars and vectors are rewritten (the approximation builds
    vector broadcasts for vectors); tensors and other element types are
    left to the usual lowering.

    With `native-fma-floor` the `math.fma` and `math.floor` the
    approximation creates stay, for targets that have them as
    instructions (x86 with FMA and SSE4.1: `vfmadd`, `vroundps`); without
    it a target lacking them would turn them into libm calls.
  }];
  let options = [
    Option<"nativeFmaFloor", "native-fma-floor", "bool", /*default=*/"false",
           "keep the approximation's math.fma and math.floor (the target "
           "has them as instructions)">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::vector::VectorDialect"];
}

def TQNativeExp2 : Pass<"tq-native-exp2"> {
  let summary = "f32 math.exp2 as the targets' hardware exp2";
  let description = [{
    The GPU conversions turn `math.exp2` (and `llvm.intr.exp2`, which they
    mark illegal) into device-library calls: libdevice's `__nv_exp2f`,
    ocml's `__ocml_exp2_f32`. This pass rewrites each scalar f32
    `math.exp2` as `llvm.call_intrinsic "llvm.exp2.f32"`, which the
    conversions leave alone and the backends select as one instruction
    (`ex2.approx.f32` on NVIDIA, `v_exp_f32` on AMD; a relative error
    around 2^-22), so the softmax needs no library and no polynomial.

    `intrinsic` names another f32 -> f32 intrinsic to call instead: NVIDIA
    kernels use `llvm.nvvm.ex2.approx.ftz.f32`, which flushes results
    below 2^-126 to zero (softmax weights that small add nothing) and
    spares the range fix-up ptxas wraps around a non-flushing `ex2`.
  }];
  let options = [
    Option<"intrinsic", "intrinsic", "std::string", "\"llvm.exp2.f32\"",
           "The f32 intrinsic each scalar f32 math.exp2 becomes">,
  ];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def TQExactMath : Pass<"tq-exact-math"> {
  let summary = "Expand math.sqrt / round / absf exactly into arith ops";
  let description = [{
    The GPU conversions turn these math ops into device-library calls
    (libdevice on NVIDIA, where `__nv_sqrtf` is the approximate square
    root unless `__CUDA_PREC_SQRT` is reflected; ocml on AMD). The append
    kernels must reproduce the library encoder's bytes and link nothing, so
    this pass rewrites, for f32 and f64 scalars:

    - `math.sqrt` as the correctly rounded square root: a reciprocal
      square root by the bit-level guess and Newton steps in f64, its
      product with x, then Tuckerman's test (the signs of
      `fma(-pred(s), s, x)` and `fma(-s, succ(s), x)`, with `llvm.intr.fma`,
      which both backends emit as one instruction) moves s to the correctly
      rounded neighbour. f32 goes through f64 (double rounding of a square
      root to f32 is innocuous). Zero, infinity, NaN and negative inputs
      give IEEE's results; f64 subnormals are scaled first.
    - `math.round` (half away from zero) by truncation through an integer;
    - `math.absf` by clearing the sign bit.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

def TQAttachLoopAnnotations : Pass<"tq-attach-loop-annotations"> {
  let summary = "Make llvm.loop_annotation hints on LLVM branches effective";
  let description = [{
    `convert-scf-to-cf` copies an `scf.for`'s discardable
    `llvm.loop_annotation` attribute (e.g. "do not unroll") onto the loop's
    back-edge branch, and the conversion to the LLVM dialect keeps it there
    as a discardable attribute of `llvm.br` / `llvm.cond_br`. The LLVM IR
    translation reads only the branches' `loop_annotation` property, so
    without this pass the hint never becomes `!llvm.loop` metadata. The
    pass moves the attribute into the property (run it after the
    conversion to the LLVM dialect).
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def TQGpuToHost : Pass<"tq-gpu-to-host", "::mlir::ModuleOp"> {
  let summary = "Run gpu kernels as host functions, one call per thread";
  let description = [{
    For tests of the GPU kernels on a machine without a GPU. Each kernel
    becomes a `func.func` with its arguments followed by the block's x, y
    and z ids, the thread id (`index`) and the block's workgroup memory (a
    `memref<?xi8>` arena, shared by the block's threads); the caller runs
    one host thread per GPU thread of a block, all of them concurrently.

    - `gpu.block_id` / `gpu.thread_id` (x) become those arguments
      (`thread_id` y and z: 0);
    - each workgroup attribution becomes a `memref.view` of the arena at a
      16-byte aligned offset, in declaration order;
    - `gpu.barrier` becomes a call to `tq_emu_barrier()` and a 32-bit float
      `gpu.shuffle` a call to `tq_emu_shuffle_<mode>_f32(value, offset,
      width)`, functions the caller provides (the test harness implements
      them with host barriers over the block's and the warp's threads);
      a shuffle's `valid` result must be unused;
    - private allocas (`tq-gpu-bufferize`) and memory-space casts move to
      the default memory space, and the gpu.module's globals move to the
      parent module;
    - `func.func` device functions the kernels call move to the parent
      module too, their workgroup or private memref arguments and results
      in the default memory space and their barriers and shuffles rewritten
      as above. A device function may not read block or thread ids (only
      kernels receive them), nor take a name the parent module already
      uses; a `gpu.func` without `kernel` is refused (write it as a
      `func.func`).
  }];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::memref::MemRefDialect"];
}

def TQGpuBufferize : Pass<"tq-gpu-bufferize", "::mlir::ModuleOp"> {
  let summary = "One-shot bufferization of gpu kernels written on tensors";
  let description = [{
    Kernels whose bodies are written on tensors (the append kernels run
    `tq.quantize` per thread, lowered by `tq-lower-to-loops`) are
    bufferized with one-shot bufferization, and its output is made legal
    inside a gpu.module:

    - constant tensors become `memref.global`s, which one-shot
      bufferization places in the builtin module, out of the kernels'
      reach: each one a gpu.module reads is copied into it (and dropped
      from the outer module once unused);
    - temporaries become allocations: a statically shaped one inside a
      function of a gpu.module (kernel or device function) becomes a
      `memref.alloca` in private memory at the function's entry (one per
      thread), cast back to the default memory
      space so its users are unchanged; its deallocations are erased. A
      dynamically shaped allocation is an error.
  }];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::memref::MemRefDialect"];
}

def TQMemRefCopyToLinalg : Pass<"tq-memref-copy-to-linalg"> {
  let summary = "Turn memref.copy into linalg.copy loop nests";
  let description = [{
    Bufferization copies between strided views as `memref.copy`, which the
    LLVM lowering turns into a call to a runtime-library function
    (`memrefCopy`). Kernels must not depend on that library, so this pass
    rewrites every copy as `linalg.copy`, which `convert-linalg-to-loops`
    lowers to plain loads and stores.

    ```mlir
    memref.copy %a, %b : memref<?xf32, strided<[?]>> to memref<?xf32>
    ```
    becomes
    ```mlir
    linalg.copy ins(%a : memref<?xf32, strided<[?]>>) outs(%b : memref<?xf32>)
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def TQHoistTileBuffers : Pass<"tq-hoist-tile-buffers"> {
  let summary = "Allocate a loop's per-iteration buffers once, before the loop";
  let description = [{
    After bufferization and deallocation, the flash loop allocates and frees
    its per-tile buffers (scores, weights, row tables) in every iteration: a
    `malloc`/`free` pair per buffer and tile. This pass moves such a buffer
    out of its loop nest when its lifetime is one iteration (its only
    `memref.dealloc` is in the allocation's block, no terminator uses it):

    - a static shape: the `memref.alloc` moves before the outermost
      enclosing `scf.for`, the `memref.dealloc` after it;
    - dynamic sizes that integer range analysis bounds (a tile's length is
      `arith.minui` of the remaining tokens and the tile size): one byte
      buffer of the bounded size is allocated before the loop nest, and each
      iteration's buffer becomes a `memref.view` of its prefix (identity
      layout, so no user changes type).

    ```mlir
    scf.for %t = %lo to %hi step %c512 {
      %n = arith.minui %rest, %c512 : index
      %s = memref.alloc(%n) {alignment = 64 : i64} : memref<1x4x?xf32>
      ...
      memref.dealloc %s : memref<1x4x?xf32>
    }
    ```
    becomes
    ```mlir
    %storage = memref.alloc() {alignment = 64 : i64} : memref<8192xi8>
    scf.for %t = %lo to %hi step %c512 {
      %n = arith.minui %rest, %c512 : index
      %s = memref.view %storage[%c0][%n] : memref<8192xi8> to memref<1x4x?xf32>
      ...
    }
    memref.dealloc %storage : memref<8192xi8>
    ```

    The climb stops at anything but an `scf.for` (an `scf.forall`'s
    iterations may run at once; a buffer under an `scf.if` may never be
    needed). Unbounded sizes, bounds over `max-bytes`, non-identity layouts,
    memory spaces and sub-byte elements stay as they are.
  }];
  let options = [
    Option<"maxBytes", "max-bytes", "int64_t", /*default=*/"16777216",
           "Largest buffer (bytes, at the bounded size) hoisted">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

#endif // TQ_CONVERSION_PASSES_TD
