// tq-lower-to-loops{vector-rotations=true}: tq.rotate's Hadamard kinds on
// rows of 16-lane vectors where the row's length is a multiple of 16 (the
// CPU pipeline's choice; GPU kernel bodies keep the scalar stages). Per
// element the operations are the scalar stages', in the same order, so
// the bits are the same (the encoders built on it reproduce the
// library's bytes: QuantizeExecution): the first signs as a vector
// multiply, a stage of distance h < 16 as a lane shuffle (partner l ^ h),
// the sum and the difference and a select by the lane's bit h, a stage of
// distance >= 16 as adds and subtracts of whole vectors, then the scale
// and the second signs.

// RUN: tq-opt %s -split-input-file --tq-lower-to-loops="vector-rotations=true" | FileCheck %s
// RUN: tq-opt %s -split-input-file --tq-lower-to-loops | FileCheck %s --check-prefix=SCALAR

// Rows of 32 (two vectors) under a loop over the two leading dims.
// CHECK-LABEL: func @hadamard32
// CHECK: scf.for
// CHECK: scf.for
// CHECK: %[[A:.*]] = vector.transfer_read %arg0[%{{.*}}, %{{.*}}, %c0{{.*}}]{{.*}} : tensor<2x3x32xf32>, vector<16xf32>
// CHECK: %[[SA:.*]] = arith.mulf %[[A]], %{{.*}} : vector<16xf32>
// CHECK: %[[B:.*]] = vector.transfer_read %arg0[%{{.*}}, %{{.*}}, %c16{{.*}}]{{.*}} : tensor<2x3x32xf32>, vector<16xf32>
// CHECK: %[[SB:.*]] = arith.mulf %[[B]], %{{.*}} : vector<16xf32>
// CHECK: %[[LOW1:.*]] = arith.constant dense<[true, false, true, false,
// CHECK: %[[P:.*]] = vector.shuffle %[[SA]], %[[SA]] [1, 0, 3, 2, 5, 4,
// CHECK: %[[SUM:.*]] = arith.addf %[[SA]], %[[P]] : vector<16xf32>
// CHECK: %[[DIFF:.*]] = arith.subf %[[P]], %[[SA]] : vector<16xf32>
// CHECK: arith.select %[[LOW1]], %[[SUM]], %[[DIFF]] : vector<16xi1>, vector<16xf32>
// CHECK: vector.shuffle %{{.*}} [2, 3, 0, 1,
// CHECK: vector.shuffle %{{.*}} [4, 5, 6, 7, 0, 1, 2, 3,
// CHECK: vector.shuffle %{{.*}} [8, 9, 10, 11, 12, 13, 14, 15, 0, 1,
// CHECK: %[[V0:.*]] = arith.select
// CHECK: vector.shuffle %{{.*}} [8, 9, 10, 11, 12, 13, 14, 15, 0, 1,
// CHECK: %[[V1:.*]] = arith.select
// The stage of distance 16: vector 0 with vector 1.
// CHECK: %[[LO:.*]] = arith.addf %[[V0]], %[[V1]] : vector<16xf32>
// CHECK: %[[HI:.*]] = arith.subf %[[V0]], %[[V1]] : vector<16xf32>
// CHECK: %[[SCALED:.*]] = arith.mulf %[[LO]], %{{.*}} : vector<16xf32>
// CHECK: %[[SIGNED:.*]] = arith.mulf %[[SCALED]], %{{.*}} : vector<16xf32>
// CHECK: vector.transfer_write %[[SIGNED]], %{{.*}}[%{{.*}}, %{{.*}}, %c0{{.*}}]
// CHECK: arith.mulf %[[HI]]
// CHECK: vector.transfer_write %{{.*}}[%{{.*}}, %{{.*}}, %c16{{.*}}]
// CHECK-NOT: linalg.generic
// SCALAR-LABEL: func @hadamard32
// SCALAR-NOT: vector.shuffle
// SCALAR: linalg.generic
func.func @hadamard32(%x: tensor<2x3x32xf32>) -> tensor<2x3x32xf32> {
  %r = tq.rotate %x {rotation = #tq.rotation<kind = hadamard, dim = 32, block = 32, signs1 = [1, -1, 1, 1, 1, -1, 1, 1, 1, -1, 1, 1, 1, -1, 1, 1, 1, -1, 1, 1, 1, -1, 1, 1, 1, -1, 1, 1, 1, -1, 1, 1], signs2 = [-1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1]>} : tensor<2x3x32xf32>
  return %r : tensor<2x3x32xf32>
}

// -----

// A row of 24 values is no whole number of vectors: the scalar stages.
// CHECK-LABEL: func @hadamard24
// CHECK-NOT: vector.shuffle
// CHECK: linalg.generic
func.func @hadamard24(%x: tensor<2x24xf32>) -> tensor<2x24xf32> {
  %r = tq.rotate %x {rotation = #tq.rotation<kind = block_hadamard, dim = 24, block = 8, signs1 = [1, -1, 1, 1, -1, 1, 1, -1]>} : tensor<2x24xf32>
  return %r : tensor<2x24xf32>
}
