// tq-lower-to-loops{vector-softmax=true}: a tile's tq.online_softmax as
// 16-lane vector loops (the CPU pipeline's choice). The scaled and masked
// logits stay one linalg.generic; then, per query row, one token loop
// carries every head's running maximum (four independent chains here),
// the correction exp(old max - new max) is a scalar per head, and a second
// token loop writes every head's probabilities (masked reads and writes
// past the tile's tokens) and carries their sums. The probabilities'
// exp is specialised to its argument (x - max <= 0): a clamp at -87, n =
// x / ln 2 rounded by adding and subtracting 1.5 * 2^23 (whose bits give
// n as an integer), the remainder in two multiply-add steps, a degree-5
// polynomial fitted for the least largest relative error (multiply-adds
// that may contract to fma; no intrinsic, so no libm call on any target)
// and n added to the exponent bits.

// RUN: tq-opt %s -split-input-file --tq-lower-to-loops="vector-softmax=true" | FileCheck %s
// RUN: tq-opt %s -split-input-file --tq-lower-to-loops | FileCheck %s --check-prefix=LINALG

// CHECK-LABEL: func @four_heads
// CHECK: %[[MASKED:.*]] = linalg.generic {{.*}} ins(%arg0 : tensor<1x4x?xf32>)
// CHECK: scf.for {{.*}} -> (tensor<1x4x?xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>)
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %{{.*}} step %c16{{.*}} iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK: vector.transfer_read %[[MASKED]][%{{.*}}, %c0{{.*}}, %{{.*}}], %cst{{.*}} : tensor<1x4x?xf32>, vector<16xf32>
// CHECK: arith.maximumf %{{.*}} fastmath<nnan,nsz> : vector<16xf32>
// CHECK: vector.transfer_read %[[MASKED]][%{{.*}}, %c3{{.*}}, %{{.*}}]
// CHECK: vector.reduction <maximumf>
// CHECK: math.exp %{{.*}} : f32
// CHECK: tensor.insert
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %{{.*}} step %c16{{.*}} iter_args({{.*}}) -> (tensor<1x4x?xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK: arith.cmpf olt
// CHECK: arith.mulf %{{.*}} fastmath<contract> : vector<16xf32>
// CHECK: arith.addf %{{.*}} fastmath<contract> : vector<16xf32>
// CHECK: arith.constant dense<0x4B400000> : vector<16xf32>
// CHECK: arith.subf
// CHECK: arith.constant dense<1262485504> : vector<16xi32>
// CHECK: arith.subi %{{.*}}, %{{.*}} : vector<16xi32>
// CHECK-COUNT-2: arith.mulf %{{.*}} fastmath<contract> : vector<16xf32>
// CHECK: arith.constant dense<8.290230e-03> : vector<16xf32>
// CHECK-COUNT-5: arith.mulf %{{.*}} fastmath<contract> : vector<16xf32>
// CHECK-NOT: arith.mulf
// CHECK-NOT: math.
// CHECK: arith.shli
// CHECK: vector.transfer_write %{{.*}}, %{{.*}}[%{{.*}}, %c0{{.*}}, %{{.*}}] : vector<16xf32>, tensor<1x4x?xf32>
// CHECK: arith.addf %{{.*}} : vector<16xf32>
// CHECK-NOT: math.exp
// CHECK: vector.reduction <add>
// CHECK: arith.mulf %{{.*}} : f32
// LINALG-LABEL: func @four_heads
// LINALG-NOT: vector.reduction
// LINALG: math.exp
func.func @four_heads(%s: tensor<1x4x?xf32>, %m: tensor<1x4xf32>, %l: tensor<1x4xf32>, %t0: index, %n: index) -> (tensor<1x4x?xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>) {
  %p, %m1, %l1, %c = tq.online_softmax %s, %m, %l, %t0, %n {scale = 0.125 : f32} : tensor<1x4x?xf32>, tensor<1x4xf32> -> tensor<1x4x?xf32>
  return %p, %m1, %l1, %c : tensor<1x4x?xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>
}

// -----

// Heads not known statically: the token loops could not carry one chain
// per head, so the linalg loop nests stay.
// CHECK-LABEL: func @dynamic_heads
// CHECK-NOT: vector.reduction
// CHECK: math.exp
func.func @dynamic_heads(%s: tensor<1x?x?xf32>, %m: tensor<1x?xf32>, %l: tensor<1x?xf32>, %t0: index, %n: index) -> tensor<1x?x?xf32> {
  %p, %m1, %l1, %c = tq.online_softmax %s, %m, %l, %t0, %n {scale = 0.125 : f32} : tensor<1x?x?xf32>, tensor<1x?xf32> -> tensor<1x?x?xf32>
  return %p : tensor<1x?x?xf32>
}

// -----

// A group larger than 16 heads: the heads' chains go side by side in blocks
// of 16 (the largest divisor of 48 not above 16) and a loop runs over the
// blocks, so the loops carry 16 vectors, not 48 (a group of 256 unrolled
// whole took 75 s to compile and spilled every chain).
// CHECK-LABEL: func @forty_eight_heads
// CHECK: scf.for {{.*}} -> (tensor<1x48x?xf32>, tensor<1x48xf32>, tensor<1x48xf32>, tensor<1x48xf32>)
// CHECK: scf.for %[[FIRST:.*]] = %c0{{.*}} to %c48{{.*}} step %c16{{.*}} iter_args({{.*}}) -> (tensor<1x48x?xf32>, tensor<1x48xf32>, tensor<1x48xf32>, tensor<1x48xf32>)
// CHECK: %[[H15:.*]] = arith.addi %[[FIRST]], %c15
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %{{.*}} step %c16{{.*}} iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK: vector.transfer_read %{{.*}}[%{{.*}}, %[[FIRST]], %{{.*}}]
// CHECK: vector.transfer_read %{{.*}}[%{{.*}}, %[[H15]], %{{.*}}]
// CHECK-COUNT-16: vector.reduction <maximumf>
// CHECK-NOT: vector.reduction <maximumf>
// CHECK: vector.transfer_write %{{.*}}, %{{.*}}[%{{.*}}, %[[FIRST]], %{{.*}}]
// CHECK-COUNT-16: vector.reduction <add>
// CHECK-NOT: vector.reduction
// CHECK: return
func.func @forty_eight_heads(%s: tensor<1x48x?xf32>, %m: tensor<1x48xf32>, %l: tensor<1x48xf32>, %t0: index, %n: index) -> (tensor<1x48x?xf32>, tensor<1x48xf32>, tensor<1x48xf32>, tensor<1x48xf32>) {
  %p, %m1, %l1, %c = tq.online_softmax %s, %m, %l, %t0, %n {scale = 0.125 : f32} : tensor<1x48x?xf32>, tensor<1x48xf32> -> tensor<1x48x?xf32>
  return %p, %m1, %l1, %c : tensor<1x48x?xf32>, tensor<1x48xf32>, tensor<1x48xf32>, tensor<1x48xf32>
}
