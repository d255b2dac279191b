# lit configuration of nnc's text-in/text-out tests. Runs from the build's lit.site.cfg.py,
# which sets the tool paths. A test is a .nir (graph IR) or .kir (kernel IR) file whose
# `// RUN:` lines use the tools below; `// CHECK:` lines are FileCheck patterns.
#
# Substitutions: nnc-opt, nnc (the CLI; tests that need it say `REQUIRES: nnc-cli`),
# FileCheck, not, split-file. Tool directories are also put first on PATH.
import os
import lit.formats

config.name = "nnc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".nir", ".kir"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.nnc_obj_root, "tests", "lit")

def tool(name, path):
    # Whole words only: not inside paths, options or other names (nnc-opt vs nnc).
    config.substitutions.append((r"(?<![-\w/.=])" + name.replace("-", r"\-") + r"(?![-\w/.])",
                                 path))

tool("nnc-opt", config.nnc_opt)
if config.nnc and os.path.exists(config.nnc):
    tool("nnc", config.nnc)
    config.available_features.add("nnc-cli")
tool("FileCheck", config.filecheck)
tool("not", config.not_tool)
tool("split-file", os.path.join(os.path.dirname(config.filecheck), "split-file"))

path = [os.path.dirname(config.nnc_opt), os.path.dirname(config.filecheck)]
if config.nnc:
    path.append(os.path.dirname(config.nnc))
config.environment["PATH"] = os.pathsep.join(path + [config.environment.get("PATH", "")])
# Tests of the code --precision bf16 runs need the bf16 dot product on the host (the
# avx512_bf16 flag of /proc/cpuinfo; nnc's own check is CpuTarget::setPrecision).
try:
    with open("/proc/cpuinfo") as cpuinfo:
        if "avx512_bf16" in cpuinfo.read().split():
            config.available_features.add("avx512-bf16")
except OSError:
    pass
config.environment["NNC_SHARED"] = config.nnc_shared_dir
if os.path.isdir(config.nnc_shared_dir):
    config.available_features.add("shared-data")
