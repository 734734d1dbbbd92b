// RUN: tq-opt %s --tq-exact-math | FileCheck %s

// sqrt, round and absf become arith ops (plus llvm.intr.fma for the exact
// residuals); vectors are left alone.

// CHECK-LABEL: func @sqrt_f32
// CHECK-DAG: arith.constant 6910469410427058089 : i64
// CHECK-DAG: arith.extf %{{.*}} : f32 to f64
// CHECK: llvm.intr.fma
// CHECK: arith.truncf %{{.*}} : f64 to f32
// CHECK-NOT: math.
// CHECK: return
func.func @sqrt_f32(%x: f32) -> f32 {
  %r = math.sqrt %x : f32
  return %r : f32
}

// CHECK-LABEL: func @sqrt_f64
// CHECK-NOT: math.
// CHECK-NOT: arith.extf
// A Heron step (two fma) and two Tuckerman rounds (two fma each).
// CHECK-COUNT-6: llvm.intr.fma
// CHECK-NOT: math.
// CHECK: return
func.func @sqrt_f64(%x: f64) -> f64 {
  %r = math.sqrt %x : f64
  return %r : f64
}

// CHECK-LABEL: func @round_f32
// CHECK-DAG: arith.constant 5.000000e-01 : f32
// CHECK-DAG: arith.fptosi %{{.*}} : f32 to i32
// CHECK: arith.sitofp %{{.*}} : i32 to f32
// CHECK: arith.ori
// CHECK-NOT: math.
// CHECK: return
func.func @round_f32(%x: f32) -> f32 {
  %r = math.round %x : f32
  return %r : f32
}

// CHECK-LABEL: func @abs_f64
// CHECK: arith.constant 9223372036854775807 : i64
// CHECK: arith.andi
// CHECK-NOT: math.
// CHECK: return
func.func @abs_f64(%x: f64) -> f64 {
  %r = math.absf %x : f64
  return %r : f64
}

// CHECK-LABEL: func @vector_left_alone
// CHECK: math.sqrt %{{.*}} : vector<4xf32>
func.func @vector_left_alone(%x: vector<4xf32>) -> vector<4xf32> {
  %r = math.sqrt %x : vector<4xf32>
  return %r : vector<4xf32>
}

// f64 rounds through i64; magnitudes from 2^52 on are integral already and
// pass through.
// CHECK-LABEL: func @round_f64
// CHECK-DAG: %[[BIG:.*]] = arith.constant 0x4330000000000000 : f64
// CHECK-DAG: %[[SIGN:.*]] = arith.constant -9223372036854775808 : i64
// CHECK: %[[INTEGRAL:.*]] = arith.cmpf uge, %{{.*}}, %[[BIG]] : f64
// CHECK: arith.fptosi %{{.*}} : f64 to i64
// CHECK: arith.andi %{{.*}}, %[[SIGN]] : i64
// CHECK: %[[R:.*]] = arith.select %[[INTEGRAL]], %arg0, %{{.*}} : f64
// CHECK-NEXT: return %[[R]]
func.func @round_f64(%x: f64) -> f64 {
  %r = math.round %x : f64
  return %r : f64
}

// CHECK-LABEL: func @abs_f32
// CHECK-NEXT: %[[MASK:.*]] = arith.constant 2147483647 : i32
// CHECK-NEXT: %[[BITS:.*]] = arith.bitcast %arg0 : f32 to i32
// CHECK-NEXT: %[[CLEAR:.*]] = arith.andi %[[BITS]], %[[MASK]] : i32
// CHECK-NEXT: %[[R:.*]] = arith.bitcast %[[CLEAR]] : i32 to f32
// CHECK-NEXT: return %[[R]]
func.func @abs_f32(%x: f32) -> f32 {
  %r = math.absf %x : f32
  return %r : f32
}

// Negative: only f32 and f64 scalars are expanded; f16, vectors and
// tensors keep the math ops (the patterns have no expansion for them).
// CHECK-LABEL: func @others_left_alone
// CHECK: math.sqrt %{{.*}} : f16
// CHECK: math.round %{{.*}} : f16
// CHECK: math.absf %{{.*}} : f16
// CHECK: math.round %{{.*}} : vector<4xf64>
// CHECK: math.absf %{{.*}} : vector<4xf64>
// CHECK: math.sqrt %{{.*}} : tensor<4xf32>
func.func @others_left_alone(%h: f16, %v: vector<4xf64>, %t: tensor<4xf32>) -> (f16, f16, f16, vector<4xf64>, vector<4xf64>, tensor<4xf32>) {
  %a = math.sqrt %h : f16
  %b = math.round %h : f16
  %c = math.absf %h : f16
  %d = math.round %v : vector<4xf64>
  %e = math.absf %v : vector<4xf64>
  %f = math.sqrt %t : tensor<4xf32>
  return %a, %b, %c, %d, %e, %f : f16, f16, f16, vector<4xf64>, vector<4xf64>, tensor<4xf32>
}
