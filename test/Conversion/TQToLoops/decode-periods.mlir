// Fused products over rows longer than max-unrolled-chunks: a loop over the
// row's decode periods with one period unrolled (the period's reads move by
// a dynamic byte offset), instead of every chunk of the row unrolled.

// RUN: tq-opt %s -split-input-file --tq-lower-to-loops="max-unrolled-chunks=0" --canonicalize --cse | FileCheck %s
// RUN: tq-opt %s -split-input-file --tq-lower-to-loops --canonicalize --cse | FileCheck %s --check-prefix=WHOLE
// RUN: not tq-opt %s -split-input-file --tq-lower-to-loops="max-unrolled-chunks=-1" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: max-unrolled-chunks must be >= 0, got -1

// turbo3_0 at d256: two 128-value groups of 50 bytes. One query row: the
// score loops over the 2 periods (8 chunks of 16 values each), carrying
// the chains of multiply-adds (2 heads x 4 rows of a step); period k reads
// the query from value 128 k and the row from byte 50 k, its group's norm
// included.
// CHECK-LABEL: func @score_turbo3
// CHECK: scf.for %[[K:.*]] = %c0 to %c2 step %c1 iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK-NEXT: %[[BYTES:.*]] = arith.muli %[[K]], %c50 : index
// CHECK-NEXT: %[[VALUES:.*]] = arith.muli %[[K]], %c128 : index
// CHECK-NEXT: vector.transfer_read %{{.*}}[%c0, %c0, %[[VALUES]]]{{.*}} : tensor<1x2x256xf32>, vector<16xf32>
// CHECK: vector.transfer_read %{{.*}}[%c0, %{{.*}}, %c0, %[[BYTES]]]{{.*}} : tensor<1x5x1x100xi8>, vector<2xi8>
// CHECK: scf.yield
// (The whole row, 16 chunks, is within the default of 48.)
// WHOLE-LABEL: func @score_turbo3
// WHOLE-NOT: iter_args({{.*}}) -> (vector<16xf32>
// WHOLE: vector.fma
func.func @score_turbo3(%q: tensor<1x2x256xf32>, %kb: tensor<5x1x100xi8>) -> tensor<1x2x5xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x100xi8> -> !tq.cache<5x1x256, #tq.format<"turbo3_0">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<1x2x256xf32>, !tq.cache<5x1x256, #tq.format<"turbo3_0">> -> tensor<1x2x5xf32>
  return %s : tensor<1x2x5xf32>
}

// -----

// tqprod3 at d256: 2-bit indices (64 bytes from byte 4) and 256 sign bits
// (32 bytes from byte 68, the row's last). Values: periods of 128 values,
// 32 bytes apart. Signs: periods of 128 signs, 16 bytes apart, read with
// the last period's code (its last word starts 2 bytes before the sign
// field, as the row ends there), so every word read stays inside the row.
// CHECK-LABEL: func @score_tqprod
// CHECK: scf.for %[[K:.*]] = %c0 to %c2 step %c1
// CHECK-NEXT: %[[B:.*]] = arith.muli %[[K]], %c32 : index
// CHECK-NEXT: arith.muli %[[K]], %c128 : index
// CHECK: arith.addi %[[B]], %c4 : index
// CHECK: scf.for %[[S:.*]] = %c0 to %c2 step %c1
// CHECK-NEXT: %[[SB:.*]] = arith.muli %[[S]], %c16 : index
// CHECK-NEXT: arith.muli %[[S]], %c128 : index
// CHECK-NEXT: arith.addi %[[SB]], %c68 : index
// CHECK: arith.addi %[[SB]], %c80 : index
// CHECK-NOT: arith.addi %[[SB]], %c82
// CHECK: scf.yield
func.func @score_tqprod(%q: tensor<1x2x256xf32>, %kb: tensor<5x1x100xi8>) -> tensor<1x2x5xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x100xi8> -> !tq.cache<5x1x256, #tq.format<"tqprod3">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<1x2x256xf32>, !tq.cache<5x1x256, #tq.format<"tqprod3">> -> tensor<1x2x5xf32>
  return %s : tensor<1x2x5xf32>
}

// -----

// One query row's weighted sum: the output tensor goes through the period
// loop; inside, each pass is a token loop over the period's chunks whose
// results are written at the period's offset.
// CHECK-LABEL: func @accumulate_tqprod
// CHECK: scf.for %[[K:.*]] = %c0 to %c2 step %c1 iter_args(%{{.*}} = %{{.*}}) -> (tensor<1x2x512xf32>)
// CHECK-NEXT: arith.muli %[[K]], %c32 : index
// CHECK-NEXT: %[[AT:.*]] = arith.muli %[[K]], %c128 : index
// CHECK: scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK: vector.transfer_write %{{.*}}[%c0, %c0, %[[AT]]] {{.*}} : vector<2x16xf32>, tensor<1x2x512xf32>
func.func @accumulate_tqprod(%p: tensor<1x2x5xf32>, %vb: tensor<5x1x100xi8>) -> tensor<1x2x256xf32> {
  %v = tq.from_bytes %vb : tensor<5x1x100xi8> -> !tq.cache<5x1x256, #tq.format<"tqprod3">>
  %a = tq.accumulate %p, %v {lookup = #tq.lookup<tile>} : tensor<1x2x5xf32>, !tq.cache<5x1x256, #tq.format<"tqprod3">> -> tensor<1x2x256xf32>
  return %a : tensor<1x2x256xf32>
}

// -----

// Several query rows: per step of rows, a period's chunks are decoded once,
// then every query row and head adds them at the period's offset.
// CHECK-LABEL: func @accumulate_rows
// CHECK: scf.for %[[K:.*]] = %c0 to %c2 step %c1 iter_args(%{{.*}} = %{{.*}}) -> (tensor<3x2x256xf32>)
// CHECK: %[[AT:.*]] = arith.muli %[[K]], %c128 : index
// CHECK: scf.for %[[I:.*]] = %c0 to %c3
// CHECK-NEXT: scf.for %[[H:.*]] = %c0 to %c2
// CHECK: vector.transfer_read %{{.*}}[%[[I]], %[[H]], %[[AT]]]
// CHECK: vector.transfer_write %{{.*}}[%[[I]], %[[H]], %[[AT]]]
func.func @accumulate_rows(%p: tensor<3x2x5xf32>, %vb: tensor<5x1x100xi8>) -> tensor<3x2x256xf32> {
  %v = tq.from_bytes %vb : tensor<5x1x100xi8> -> !tq.cache<5x1x256, #tq.format<"turbo3_0">>
  %a = tq.accumulate %p, %v {lookup = #tq.lookup<tile>} : tensor<3x2x5xf32>, !tq.cache<5x1x256, #tq.format<"turbo3_0">> -> tensor<3x2x256xf32>
  return %a : tensor<3x2x256xf32>
}

// -----

// polar3 at d256: a 2-bit plane (64 bytes from byte 2) and a 1-bit plane
// (32 bytes from byte 66, read by words from byte 65, which leave its
// fields at index bit 2). A period of 128 values moves the planes by 32 and
// 16 bytes: each plane's reads take its own moved base.
// CHECK-LABEL: func @score_polar3
// CHECK: scf.for %[[K:.*]] = %c0 to %c2 step %c1
// CHECK-DAG: %[[TWO:.*]] = arith.muli %[[K]], %c32 : index
// CHECK-DAG: %[[ONE:.*]] = arith.muli %[[K]], %c16 : index
// CHECK-DAG: arith.addi %[[TWO]], %c2 : index
// CHECK-DAG: arith.addi %[[ONE]], %c65 : index
// CHECK: scf.yield
func.func @score_polar3(%q: tensor<1x2x256xf32>, %kb: tensor<5x1x98xi8>) -> tensor<1x2x5xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x98xi8> -> !tq.cache<5x1x256, #tq.format<"polar3">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<1x2x256xf32>, !tq.cache<5x1x256, #tq.format<"polar3">> -> tensor<1x2x5xf32>
  return %s : tensor<1x2x5xf32>
}

// -----

// No period: haar4 at d200 takes 8-lane chunks, and no multiple of the
// shortest period (8 chunks, 64 values) divides 200, so the row stays
// whole even at max-unrolled-chunks=0.
// CHECK-LABEL: func @score_no_period
// CHECK-NOT: iter_args({{.*}}) -> (vector<8xf32>
// CHECK: return
func.func @score_no_period(%q: tensor<1x2x200xf32>, %kb: tensor<5x1x204xi8>) -> tensor<1x2x5xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x204xi8> -> !tq.cache<5x1x200, #tq.format<"haar4">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<1x2x200xf32>, !tq.cache<5x1x200, #tq.format<"haar4">> -> tensor<1x2x5xf32>
  return %s : tensor<1x2x5xf32>
}
