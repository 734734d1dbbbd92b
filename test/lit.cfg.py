# -*- Python -*-
# lit configuration for tqc's IR and tool tests.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "TQC"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tqc_obj_root, "test")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs"]

config.substitutions.append(("%golden", config.tqc_golden_dir))
config.substitutions.append(
    ("%examples", os.path.join(config.tqc_src_root, "examples")))
config.substitutions.append(("%tqc_src", config.tqc_src_root))

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(
    ["tq-aot", "tq-bench", "tq-gpu-check", "tq-opt", "tq-quant", "tq-run"],
    [config.tqc_tools_dir])

# Tests that need the golden vectors from ../shared/golden declare
# REQUIRES: golden and are reported unsupported when the folder is missing.
if os.path.isdir(config.tqc_golden_dir):
    config.available_features.add("golden")

# Kernels with AMX tiles run only on a host whose CPU has AMX-BF16 (tests
# that run them declare REQUIRES: amx; reported unsupported elsewhere).
def host_has_amx():
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l for l in f if l.startswith("flags")), "").split()
    except OSError:
        return False
    return "amx_bf16" in flags and "amx_tile" in flags

if host_has_amx():
    config.available_features.add("amx")

# GPU assembly checks: PTX is assembled with the CUDA toolkit's ptxas
# (REQUIRES: ptxas; reported unsupported without a toolkit). AMDGCN needs
# only llvm-mc and ld.lld, which come with LLVM.
import shutil
import sys

ptxas = shutil.which("ptxas") or (
    "/usr/local/cuda/bin/ptxas"
    if os.access("/usr/local/cuda/bin/ptxas", os.X_OK) else None)
if ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
config.substitutions.append(
    ("%gpu_resources", sys.executable + " " +
     os.path.join(config.tqc_src_root, "scripts", "gpu-resources.py")))
config.substitutions.append(
    ("%ptx_loop_stats", sys.executable + " " +
     os.path.join(config.tqc_src_root, "scripts", "ptx-loop-stats.py")))
# SASS counts need cuobjdump as well (REQUIRES: cuobjdump): the CUDA
# toolkit's runfile has it, Debian's CI image does not.
cuobjdump = shutil.which("cuobjdump") or (
    "/usr/local/cuda/bin/cuobjdump"
    if os.access("/usr/local/cuda/bin/cuobjdump", os.X_OK) else None)
if cuobjdump:
    config.available_features.add("cuobjdump")
    config.substitutions.append(
        ("%sass_loop_stats",
         sys.executable + " " +
         os.path.join(config.tqc_src_root, "scripts", "sass-loop-stats.py") +
         " --ptxas " + (ptxas or "ptxas") + " --cuobjdump " + cuobjdump))
