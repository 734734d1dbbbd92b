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
