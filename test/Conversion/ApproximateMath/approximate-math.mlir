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
