// RUN: tq-opt %s --tq-native-exp2 | FileCheck %s
// RUN: tq-opt %s --tq-native-exp2="intrinsic=llvm.nvvm.ex2.approx.ftz.f32" \
// RUN:   | FileCheck %s --check-prefix=FTZ

// Scalar f32 exp2 becomes the LLVM intrinsic (one hardware instruction on
// NVPTX and AMDGPU); other types are left to the usual lowering.

// CHECK-LABEL: func.func @scalar
// CHECK: %[[R:.*]] = llvm.call_intrinsic "llvm.exp2.f32"(%{{.*}}) : (f32) -> f32
// CHECK-NOT: math.exp2
// CHECK: return %[[R]]
// FTZ-LABEL: func.func @scalar
// FTZ: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"(%{{.*}}) : (f32) -> f32
// FTZ-NOT: llvm.exp2
func.func @scalar(%x: f32) -> f32 {
  %r = math.exp2 %x : f32
  return %r : f32
}

// CHECK-LABEL: func.func @others
// CHECK: math.exp2 %{{.*}} : f64
// CHECK: math.exp2 %{{.*}} : vector<4xf32>
func.func @others(%x: f64, %v: vector<4xf32>) -> (f64, vector<4xf32>) {
  %r = math.exp2 %x : f64
  %s = math.exp2 %v : vector<4xf32>
  return %r, %s : f64, vector<4xf32>
}

// The CPU pass over the same input: the vector exp2 that tq-native-exp2
// leaves alone is approximated, the f64 one is not (regression: the vector
// case used to crash the pass, whose patterns built vector ops without the
// vector dialect loaded).
// RUN: tq-opt %s --tq-approximate-math | FileCheck %s --check-prefix=APPROX
// APPROX-LABEL: func.func @others
// APPROX: math.exp2 %{{.*}} : f64
// APPROX-NOT: math.exp2
// APPROX: return

// Negative: f16 exp2 has no f32 intrinsic, and math.exp is not exp2: both
// stay for the usual lowering.
// CHECK-LABEL: func.func @not_f32_exp2
// CHECK: math.exp2 %{{.*}} : f16
// CHECK: math.exp %{{.*}} : f32
// CHECK-NOT: llvm.call_intrinsic
func.func @not_f32_exp2(%h: f16, %x: f32) -> (f16, f32) {
  %a = math.exp2 %h : f16
  %b = math.exp %x : f32
  return %a, %b : f16, f32
}
