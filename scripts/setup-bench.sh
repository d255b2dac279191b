#!/usr/bin/env bash
# Installs the benchmark-only peers for bench/ (never for CI: scripts/setup.sh has what builds
# and tests need). Idempotent. ONNX Runtime comes from npm (bench/ort), not Debian.
#   libdnnl-dev, libopenblas-dev, libeigen3-dev: the SGEMM peers (bench/sgemm); oneDNN also
#                                 the int8 GEMM peer (nnc-igemm-bench)
#   libclblast-dev:               CLBlast, the OpenCL SGEMM peer on the same device (bench/clblast)
#   python3-torch:                the PyTorch peer (bench/peers_torch.py)
#   python3-torchvision:          the exported CNNs and ViTs of bench/torch_models.py
#   python3-matplotlib:           the plots of bench/peers.py and bench/torch_models.py
#   python3-onnx:                 reads and rewrites models for lent machines
#                                 (bench/refill_weights.py, bench/gpu_pack.py)
#   nodejs, npm:                  onnxruntime-node: the ONNX Runtime peer of bench/ (its own
#                                 process, bench/ort/ort_bench.js), and the libonnxruntime.so
#                                 `nnc bench --compare ort` loads (NNC_ORT_LIBRARY or
#                                 bench/ort/node_modules)
# bench/README.md says which study needs which.
set -euo pipefail

PKGS=(
  libdnnl-dev      # oneDNN: dnnl_sgemm, the bar of the GEMM work (bench/sgemm)
  libopenblas-dev  # OpenBLAS: cblas_sgemm (bench/sgemm; OPENBLAS_CORETYPE=SkylakeX on AVX-512 hosts)
  libeigen3-dev    # Eigen: the third SGEMM peer (also in setup.sh)
  libclblast-dev   # CLBlast: SGEMM on the OpenCL device, untuned defaults (bench/clblast)
  python3-torch python3-torchvision python3-matplotlib
  python3-onnx     # bench/refill_weights.py and bench/gpu_pack.py rewrite models' weights
  python3-sklearn  # the digits data of `nnc train`'s end-to-end test and bench/train_peer.py
  python3-threadpoolctl  # bounds OpenBLAS's pool in the PyTorch training peers (scripts/char_lm.py)
  nodejs
)
# npm: Debian's package, unless an npm is already on the path (some images ship it with node).
command -v npm >/dev/null 2>&1 || PKGS+=(npm)

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/apt-install.sh" setup-bench "${PKGS[@]}"

if [ ! -d "$ROOT/bench/ort/node_modules/onnxruntime-node" ]; then
  echo "setup-bench: npm install --ignore-scripts in bench/ort (onnxruntime-node)"
  (cd "$ROOT/bench/ort" && npm install --ignore-scripts)
fi
