// RUN: tq-opt %s --split-input-file --verify-diagnostics --tq-gpu-bufferize | FileCheck %s

// A kernel written on tensors: the constant becomes a global of the
// gpu.module (none is left in the builtin module), each temporary a private
// alloca cast to the generic space, and the two generics that shared one
// tensor.empty write separate buffers.

// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK-NOT: memref.global
// CHECK: gpu.module @m
// CHECK: memref.global "private" constant @__constant_4xf32 : memref<4xf32> = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]>
// CHECK: gpu.func @k
// CHECK: %[[A:.*]] = memref.alloca() {{.*}} : memref<4xf32, #gpu.address_space<private>>
// CHECK: %[[GA:.*]] = memref.memory_space_cast %[[A]] : memref<4xf32, #gpu.address_space<private>> to memref<4xf32>
// CHECK: %[[B:.*]] = memref.alloca() {{.*}} : memref<4xf32, #gpu.address_space<private>>
// CHECK: %[[GB:.*]] = memref.memory_space_cast %[[B]]
// CHECK-NOT: memref.alloc()
// CHECK: memref.get_global @__constant_4xf32
// CHECK: linalg.generic {{.*}} outs(%[[G1:.*]] : memref<4xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[G1]] : memref<4xf32>) outs(%[[G2:.*]] : memref<4xf32>)
#id = affine_map<(d0) -> (d0)>
module attributes {gpu.container_module} {
  gpu.module @m {
    gpu.func @k(%out: memref<4xf32>) kernel {
      %cst = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
      %one = arith.constant 1.0 : f32
      %e = tensor.empty() : tensor<4xf32>
      %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
          ins(%cst : tensor<4xf32>) outs(%e : tensor<4xf32>) {
      ^bb0(%in: f32, %o: f32):
        %s = arith.addf %in, %one : f32
        linalg.yield %s : f32
      } -> tensor<4xf32>
      %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
          ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) {
      ^bb0(%in: f32, %o: f32):
        %p = arith.mulf %in, %in : f32
        linalg.yield %p : f32
      } -> tensor<4xf32>
      bufferization.materialize_in_destination %b in restrict writable %out
          : (tensor<4xf32>, memref<4xf32>) -> ()
      gpu.return
    }
  }
}

// -----

// A temporary of dynamic size cannot live in private memory.
#id = affine_map<(d0) -> (d0)>
module attributes {gpu.container_module} {
  gpu.module @m {
    gpu.func @k(%out: memref<?xf32>, %n: index) kernel {
      %one = arith.constant 1.0 : f32
      // expected-error @+1 {{has a dynamic shape; a GPU kernel's temporaries must be static}}
      %e = tensor.empty(%n) : tensor<?xf32>
      %a = linalg.fill ins(%one : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
      %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
          ins(%a : tensor<?xf32>) outs(%e : tensor<?xf32>) {
      ^bb0(%in: f32, %o: f32):
        %p = arith.mulf %in, %in : f32
        linalg.yield %p : f32
      } -> tensor<?xf32>
      bufferization.materialize_in_destination %b in restrict writable %out
          : (tensor<?xf32>, memref<?xf32>) -> ()
      gpu.return
    }
  }
}

// -----

// A device function (a gpu.func without `kernel`) gets private
// temporaries too; a global that host code still reads stays in the
// builtin module next to the gpu.module's copy.
// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: memref.global "private" constant @[[G:__constant_4xf32]] : memref<4xf32>
// CHECK: func.func @host
// CHECK: memref.get_global @[[G]]
// CHECK: gpu.module @m
// CHECK: memref.global "private" constant @[[G]] : memref<4xf32>
// CHECK: gpu.func @dev(
// CHECK-NEXT: %[[A:.*]] = memref.alloca() {{.*}} : memref<4xf32, #gpu.address_space<private>>
// CHECK-NEXT: %[[GA:.*]] = memref.memory_space_cast %[[A]]
// CHECK-NOT: memref.alloc()
// CHECK: linalg.generic {{.*}} outs(%[[GA]] : memref<4xf32>)
#id = affine_map<(d0) -> (d0)>
module attributes {gpu.container_module} {
  func.func @host(%out: memref<4xf32>) {
    %cst = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
    bufferization.materialize_in_destination %cst in restrict writable %out
        : (tensor<4xf32>, memref<4xf32>) -> ()
    return
  }
  gpu.module @m {
    gpu.func @dev(%out: memref<4xf32>) {
      %cst = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
      %e = tensor.empty() : tensor<4xf32>
      %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
          ins(%cst : tensor<4xf32>) outs(%e : tensor<4xf32>) {
      ^bb0(%in: f32, %o: f32):
        %s = arith.addf %in, %in : f32
        linalg.yield %s : f32
      } -> tensor<4xf32>
      bufferization.materialize_in_destination %a in restrict writable %out
          : (tensor<4xf32>, memref<4xf32>) -> ()
      gpu.return
    }
  }
}
