// RUN: tq-opt %s --tq-approximate-math | FileCheck %s

// exp2 becomes exp(x ln 2), then a polynomial; the floor and fma the
// polynomial uses are expanded too: nothing a device library would supply
// is left.
// CHECK-LABEL: func.func @exp2
// CHECK: arith.constant 0.693147182 : f32
// CHECK: arith.fptosi
// CHECK: arith.sitofp
// CHECK: arith.bitcast
// CHECK-NOT: math.
// CHECK: return
func.func @exp2(%x: f32) -> f32 {
  %y = math.exp2 %x : f32
  return %y : f32
}

// floor by truncation, with |x| >= 2^23 (and NaN) passed through.
// CHECK-LABEL: func.func @floor
// CHECK-DAG: arith.constant 0x4B000000 : f32
// CHECK-DAG: arith.constant 0xCB000000 : f32
// CHECK: arith.fptosi %{{.*}} : f32 to i32
// CHECK: arith.cmpf ogt
// CHECK-NOT: math.floor
func.func @floor(%x: f32) -> f32 {
  %y = math.floor %x : f32
  return %y : f32
}

// f64 is left alone.
// CHECK-LABEL: func.func @f64
// CHECK: math.floor %{{.*}} : f64
func.func @f64(%x: f64) -> f64 {
  %y = math.floor %x : f64
  return %y : f64
}

// Vectors of f32 (what the softmax loops hold once vectorised) get the same
// polynomial, with vector constants.
// CHECK-LABEL: func.func @vectors
// CHECK: arith.constant dense<0.693147182> : vector<16xf32>
// CHECK: arith.fptosi %{{.*}} : vector<16xf32> to vector<16xi32>
// CHECK-NOT: math.
// CHECK: return
func.func @vectors(%x: vector<16xf32>, %y: vector<2x4xf32>) -> (vector<16xf32>, vector<2x4xf32>) {
  %a = math.exp2 %x : vector<16xf32>
  %b = math.exp %y : vector<2x4xf32>
  return %a, %b : vector<16xf32>, vector<2x4xf32>
}

// Tensors are left alone: the approximation's range reduction mixes scalar
// constants into the operation's type, which is only valid for scalars and
// vectors; tensors go through the usual lowering (linalg, then scalars).
// CHECK-LABEL: func.func @tensors
// CHECK: math.exp2 %{{.*}} : tensor<4xf32>
// CHECK: math.exp %{{.*}} : tensor<4xf32>
func.func @tensors(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = math.exp2 %x : tensor<4xf32>
  %b = math.exp %x : tensor<4xf32>
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}

// f64 exp and exp2 are left alone: the polynomial is an f32 one.
// CHECK-LABEL: func.func @f64_exp
// CHECK: math.exp2 %{{.*}} : f64
// CHECK: math.exp %{{.*}} : f64
func.func @f64_exp(%x: f64) -> (f64, f64) {
  %a = math.exp2 %x : f64
  %b = math.exp %x : f64
  return %a, %b : f64, f64
}
