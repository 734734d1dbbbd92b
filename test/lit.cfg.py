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

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(
    ["tq-aot", "tq-bench", "tq-opt", "tq-quant", "tq-run"],
    [config.tqc_tools_dir])

# Tests that need the golden vectors from ../shared/golden declare
# REQUIRES: golden and are reported unsupported when the folder is missing.
if os.path.isdir(config.tqc_golden_dir):
    config.available_features.add("golden")
