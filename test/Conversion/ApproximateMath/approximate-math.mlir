// RUN: tq-opt %s --tq-approximate-math | FileCheck %s
// RUN: tq-opt %s --tq-approximate-math=native-fma-floor | FileCheck %s --check-prefix=NATIVE

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

// A floor of f32 vectors is truncated lane-wise, with vector constants.
// CHECK-LABEL: func.func @floor_vector
// CHECK: arith.fptosi %arg0 : vector<4xf32> to vector<4xi32>
// CHECK: arith.select %{{.*}}, %{{.*}}, %{{.*}} : vector<4xi1>, vector<4xf32>
// CHECK-NOT: math.floor
// CHECK: return
func.func @floor_vector(%x: vector<4xf32>) -> vector<4xf32> {
  %y = math.floor %x : vector<4xf32>
  return %y : vector<4xf32>
}

// A scalar f32 exp is approximated directly (no ln 2 scaling first): the
// result is 2^k (an exponent built by shifting k + 127 into place) times a
// polynomial.
// CHECK-LABEL: func.func @exp_f32
// CHECK-NOT: 0.693147182 : f32
// CHECK: arith.constant 127 : i32
// CHECK: arith.shli
// CHECK: arith.bitcast %{{.*}} : i32 to f32
// CHECK-NOT: math.
// CHECK: return
func.func @exp_f32(%x: f32) -> f32 {
  %y = math.exp %x : f32
  return %y : f32
}

// Negative: f16 exp, exp2 and floor are left alone: the polynomial and the
// truncation are f32 ones.
// CHECK-LABEL: func.func @f16
// CHECK: math.exp %{{.*}} : f16
// CHECK: math.exp2 %{{.*}} : f16
// CHECK: math.floor %{{.*}} : f16
func.func @f16(%x: f16) -> (f16, f16, f16) {
  %a = math.exp %x : f16
  %b = math.exp2 %x : f16
  %c = math.floor %x : f16
  return %a, %b, %c : f16, f16, f16
}

// native-fma-floor (targets with FMA and SSE4.1): the polynomial's fma and
// floor stay math ops, which become vfmadd and vroundps; a floor outside
// an exp is left as it is.
// NATIVE-LABEL: func.func @exp2
// NATIVE: math.floor %{{.*}} : f32
// NATIVE: math.fma %{{.*}} : f32
// NATIVE-NOT: math.exp
// NATIVE: return
// NATIVE-LABEL: func.func @floor
// NATIVE: math.floor %{{.*}} : f32
// NATIVE-NOT: arith.fptosi
// NATIVE: return
