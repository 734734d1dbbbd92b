// RUN: tq-opt %s --split-input-file --tq-gpu-to-host --verify-diagnostics | FileCheck %s

// A one-thread-per-block kernel becomes a host function taking the block
// ids; thread ids are 0, barriers vanish, workgroup memory is an alloca,
// globals leave the gpu.module in the default memory space.
// CHECK-NOT: gpu.container_module
// CHECK: memref.global "private" constant @table : memref<2xf32> = dense<[1.000000e+00, 2.000000e+00]>
// CHECK-LABEL: func.func @k(
// CHECK-SAME: %[[OUT:.*]]: memref<?xf32>, %[[BX:.*]]: index, %[[BY:.*]]: index, %[[BZ:.*]]: index)
// CHECK-SAME: llvm.emit_c_interface
// CHECK: %[[SCRATCH:.*]] = memref.alloca() : memref<4xf32>
// CHECK: memref.get_global @table : memref<2xf32>
// CHECK-NOT: gpu.
// CHECK: memref.store %{{.*}}, %[[SCRATCH]][%[[BY]]]
// CHECK: memref.store %{{.*}}, %[[OUT]][%[[BX]]]
// CHECK: return
module attributes {gpu.container_module} {
  gpu.module @m {
    memref.global "private" constant @table : memref<2xf32, 1> = dense<[1.0, 2.0]>
    gpu.func @k(%out: memref<?xf32>) workgroup(%s : memref<4xf32, #gpu.address_space<workgroup>>) kernel {
      %t = gpu.thread_id x
      %bx = gpu.block_id x
      %by = gpu.block_id y
      %g = memref.get_global @table : memref<2xf32, 1>
      %v = memref.load %g[%t] : memref<2xf32, 1>
      memref.store %v, %s[%by] : memref<4xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      %w = memref.load %s[%by] : memref<4xf32, #gpu.address_space<workgroup>>
      memref.store %w, %out[%bx] : memref<?xf32>
      gpu.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @m {
    // expected-error @below {{has warp shuffles; only one-thread-per-block kernels run on the host}}
    gpu.func @k(%x: f32) kernel {
      %c1 = arith.constant 1 : i32
      %c32 = arith.constant 32 : i32
      %y, %ok = gpu.shuffle xor %x, %c1, %c32 : f32
      gpu.return
    }
  }
}
