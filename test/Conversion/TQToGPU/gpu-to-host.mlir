// RUN: tq-opt %s --split-input-file --tq-gpu-to-host --verify-diagnostics \
// RUN:   | FileCheck %s

// One host function per kernel, one call per GPU thread: block ids, thread
// id and the workgroup arena trail the arguments; workgroup buffers are
// 16-byte aligned views of the arena; barriers and shuffles call the
// emulator; globals leave the gpu.module in the default memory space.

// CHECK-NOT: gpu.container_module
// CHECK-DAG: memref.global "private" constant @table : memref<2xf32> = dense<[1.000000e+00, 2.000000e+00]>
// CHECK-DAG: func.func private @tq_emu_barrier()
// CHECK-DAG: func.func private @tq_emu_shuffle_xor_f32(f32, i32, i32) -> f32
// CHECK-LABEL: func.func @k(
// CHECK-SAME: %[[OUT:.*]]: memref<?xf32>, %[[BX:.*]]: index, %{{.*}}: index, %{{.*}}: index, %[[TID:.*]]: index, %[[ARENA:.*]]: memref<?xi8>)
// CHECK-SAME: llvm.emit_c_interface
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK: memref.view %[[ARENA]][%[[C0]]][] : memref<?xi8> to memref<3xf32>
// CHECK: %[[C16:.*]] = arith.constant 16 : index
// CHECK: %[[BUF:.*]] = memref.view %[[ARENA]][%[[C16]]][] : memref<?xi8> to memref<8xf32>
// CHECK: memref.get_global @table : memref<2xf32>
// CHECK: memref.store %{{.*}}, %[[BUF]][%[[TID]]]
// CHECK: call @tq_emu_barrier() : () -> ()
// CHECK: call @tq_emu_shuffle_xor_f32(%{{.*}}, %{{.*}}, %{{.*}}) : (f32, i32, i32) -> f32
// CHECK: memref.store %{{.*}}, %[[OUT]][%[[BX]]]
// CHECK-NOT: gpu.
module attributes {gpu.container_module} {
  gpu.module @m {
    memref.global "private" constant @table : memref<2xf32, 1> = dense<[1.0, 2.0]>
    gpu.func @k(%out: memref<?xf32>)
        workgroup(%pad : memref<3xf32, #gpu.address_space<workgroup>>,
                  %buf : memref<8xf32, #gpu.address_space<workgroup>>)
        kernel {
      %t = gpu.thread_id x
      %b = gpu.block_id x
      %g = memref.get_global @table : memref<2xf32, 1>
      %c0 = arith.constant 0 : index
      %one = memref.load %g[%c0] : memref<2xf32, 1>
      memref.store %one, %buf[%t] : memref<8xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      %v = memref.load %buf[%t] : memref<8xf32, #gpu.address_space<workgroup>>
      %c1 = arith.constant 1 : i32
      %w = arith.constant 8 : i32
      %s, %ok = gpu.shuffle xor %v, %c1, %w : f32
      memref.store %s, %out[%b] : memref<?xf32>
      gpu.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @m {
    gpu.func @ints(%out: memref<?xi32>) kernel {
      %c1 = arith.constant 1 : i32
      %w = arith.constant 8 : i32
      // expected-error @below {{host emulation shuffles only f32}}
      %s, %ok = gpu.shuffle xor %c1, %c1, %w : i32
      gpu.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @m {
    gpu.func @valid(%out: memref<?xi1>) kernel {
      %f = arith.constant 1.0 : f32
      %c1 = arith.constant 1 : i32
      %w = arith.constant 8 : i32
      // expected-error @below {{host emulation has no `valid` result}}
      %s, %ok = gpu.shuffle xor %f, %c1, %w : f32
      %c0 = arith.constant 0 : index
      memref.store %ok, %out[%c0] : memref<?xi1>
      gpu.return
    }
  }
}

// -----

// Block ids y and z are the trailing arguments after x; thread ids y and z
// are 0 (blocks are one-dimensional); a private attribution is a stack
// allocation in the default memory space.
// CHECK-LABEL: func.func @ids(
// CHECK-SAME: %[[OUT:.*]]: memref<?xindex>, %{{.*}}: index, %[[BY:.*]]: index, %[[BZ:.*]]: index, %{{.*}}: index, %{{.*}}: memref<?xi8>)
// CHECK: %[[TMP:.*]] = memref.alloca() : memref<4xf32>
// CHECK: %[[ZERO:.*]] = arith.constant 0 : index
// CHECK: memref.store %[[ZERO]], %[[OUT]]
// CHECK: memref.store %[[ZERO]], %[[OUT]]
// CHECK: memref.store %[[BY]], %[[OUT]]
// CHECK: memref.store %[[BZ]], %[[OUT]]
// CHECK: memref.store %{{.*}}, %[[TMP]][%{{.*}}] : memref<4xf32>
// CHECK-NOT: gpu.
module attributes {gpu.container_module} {
  gpu.module @m {
    gpu.func @ids(%out: memref<?xindex>)
        private(%tmp : memref<4xf32, #gpu.address_space<private>>)
        kernel {
      %ty = gpu.thread_id y
      %tz = gpu.thread_id z
      %by = gpu.block_id y
      %bz = gpu.block_id z
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      memref.store %ty, %out[%c0] : memref<?xindex>
      memref.store %tz, %out[%c1] : memref<?xindex>
      memref.store %by, %out[%c2] : memref<?xindex>
      memref.store %bz, %out[%c3] : memref<?xindex>
      %f = arith.constant 1.0 : f32
      memref.store %f, %tmp[%c0] : memref<4xf32, #gpu.address_space<private>>
      gpu.return
    }
  }
}

// -----

// Each shuffle mode calls its own emulator function.
// CHECK-DAG: func.func private @tq_emu_shuffle_up_f32(f32, i32, i32) -> f32
// CHECK-DAG: func.func private @tq_emu_shuffle_down_f32(f32, i32, i32) -> f32
// CHECK-DAG: func.func private @tq_emu_shuffle_idx_f32(f32, i32, i32) -> f32
// CHECK-LABEL: func.func @shuffles(
// CHECK: %[[A:.*]] = call @tq_emu_shuffle_up_f32(%{{.*}}, %[[OFF:.*]], %[[W:.*]]) : (f32, i32, i32) -> f32
// CHECK: %[[B:.*]] = call @tq_emu_shuffle_down_f32(%[[A]], %[[OFF]], %[[W]])
// CHECK: %[[C:.*]] = call @tq_emu_shuffle_idx_f32(%[[B]], %[[OFF]], %[[W]])
// CHECK: %[[D:.*]] = call @tq_emu_shuffle_up_f32(%[[C]], %[[OFF]], %[[W]])
// CHECK: memref.store %[[D]]
module attributes {gpu.container_module} {
  gpu.module @m {
    gpu.func @shuffles(%out: memref<?xf32>) kernel {
      %f = arith.constant 1.0 : f32
      %c1 = arith.constant 1 : i32
      %w = arith.constant 32 : i32
      %a, %v1 = gpu.shuffle up %f, %c1, %w : f32
      %b, %v2 = gpu.shuffle down %a, %c1, %w : f32
      %c, %v3 = gpu.shuffle idx %b, %c1, %w : f32
      %d, %v4 = gpu.shuffle up %c, %c1, %w : f32
      %c0 = arith.constant 0 : index
      memref.store %d, %out[%c0] : memref<?xf32>
      gpu.return
    }
  }
}

// -----

// A kernel with control flow between blocks has no straight-line host
// function to become.
module attributes {gpu.container_module} {
  gpu.module @m {
    // expected-error @below {{expected a single-block kernel body}}
    gpu.func @branchy(%out: memref<?xf32>, %c: i1) kernel {
      cf.cond_br %c, ^bb1, ^bb2
    ^bb1:
      gpu.return
    ^bb2:
      gpu.return
    }
  }
}

// -----

// Device functions (func.func in the gpu.module, called by its kernels)
// move to the host module with the kernels instead of being erased with
// the gpu.module (which left the calls dangling). A workgroup or private
// memref argument takes the default memory space, matching the kernel's
// view of its arena; barriers and shuffles inside call the emulator.
// CHECK-DAG: func.func private @tq_emu_barrier()
// CHECK-DAG: func.func private @tq_emu_shuffle_xor_f32(f32, i32, i32) -> f32
// CHECK-LABEL: func.func @reduce(
// CHECK-SAME: %[[B:.*]]: memref<8xf32>, %[[T:.*]]: index) -> f32
// CHECK: %[[X:.*]] = memref.load %[[B]][%[[T]]] : memref<8xf32>
// CHECK: call @tq_emu_barrier() : () -> ()
// CHECK: %[[Y:.*]] = call @tq_emu_shuffle_xor_f32(%[[X]], %{{.*}}, %{{.*}}) : (f32, i32, i32) -> f32
// CHECK: %[[Z:.*]] = call @twice(%[[Y]]) : (f32) -> f32
// CHECK: return %[[Z]] : f32
// CHECK-LABEL: func.func @twice(
// CHECK: arith.addf
// CHECK-LABEL: func.func @caller(
// CHECK-SAME: %[[OUT:.*]]: memref<?xf32>, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %[[TID:.*]]: index, %[[ARENA:.*]]: memref<?xi8>)
// CHECK: %[[BUF:.*]] = memref.view %[[ARENA]][%{{.*}}][] : memref<?xi8> to memref<8xf32>
// CHECK: %[[R:.*]] = call @reduce(%[[BUF]], %[[TID]]) : (memref<8xf32>, index) -> f32
// CHECK: memref.store %[[R]], %[[OUT]]
// CHECK-NOT: gpu.
module attributes {gpu.container_module} {
  gpu.module @m {
    gpu.func @caller(%out: memref<?xf32>)
        workgroup(%buf : memref<8xf32, #gpu.address_space<workgroup>>)
        kernel {
      %t = gpu.thread_id x
      %r = func.call @reduce(%buf, %t) : (memref<8xf32, #gpu.address_space<workgroup>>, index) -> f32
      memref.store %r, %out[%t] : memref<?xf32>
      gpu.return
    }
    func.func @reduce(%b: memref<8xf32, #gpu.address_space<workgroup>>, %t: index) -> f32 {
      %x = memref.load %b[%t] : memref<8xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      %c1 = arith.constant 1 : i32
      %w = arith.constant 32 : i32
      %y, %valid = gpu.shuffle xor %x, %c1, %w : f32
      %z = func.call @twice(%y) : (f32) -> f32
      return %z : f32
    }
    func.func @twice(%x: f32) -> f32 {
      %y = arith.addf %x, %x : f32
      return %y : f32
    }
  }
}

// -----

// A device function cannot read the block or thread id: only a kernel's
// host function receives them (as trailing arguments).
module attributes {gpu.container_module} {
  gpu.module @m {
    gpu.func @k(%out: memref<?xindex>) kernel {
      %i = func.call @id() : () -> index
      memref.store %i, %out[%i] : memref<?xindex>
      gpu.return
    }
    func.func @id() -> index {
      // expected-error @below {{in device function 'id': the host emulation passes block and thread ids to kernels only (pass the id as an argument)}}
      %t = gpu.thread_id x
      return %t : index
    }
  }
}

// -----

// A device function whose name the host module already uses (here by
// another gpu.module's kernel) cannot move there without renaming calls.
module attributes {gpu.container_module} {
  gpu.module @a {
    gpu.func @f(%out: memref<?xf32>) kernel {
      gpu.return
    }
  }
  gpu.module @b {
    // expected-error @below {{is a device function of gpu.module 'b' whose name is taken in the host module (by 'func.func')}}
    func.func @f() {
      return
    }
  }
}

// -----

// A gpu.func without `kernel` is not a kernel: converting it to a
// one-thread host function with trailing ids (as it used to be) gives its
// callers the wrong signature.
module attributes {gpu.container_module} {
  gpu.module @m {
    // expected-error @below {{is not a kernel: the host emulation converts kernels (one call per GPU thread) and func.func device functions; write a device function as a func.func}}
    gpu.func @helper(%x: f32) {
      gpu.return
    }
  }
}
