#!/usr/bin/env bash
# Installs the Debian packages only the benchmarks use (never CI): the SGEMM peers of
# bench/sgemm (oneDNN, OpenBLAS; Eigen comes with scripts/setup.sh) and the Python plotting
# and PyTorch peers. Idempotent.
set -euo pipefail

PKGS=(
  libdnnl-dev      # oneDNN: dnnl_sgemm, the bar of the GEMM work (bench/sgemm)
  libopenblas-dev  # OpenBLAS: cblas_sgemm (bench/sgemm; run with OPENBLAS_CORETYPE=SkylakeX)
  libeigen3-dev    # Eigen: the third SGEMM peer (also in setup.sh)
  python3-torch python3-matplotlib
)

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup-bench: all ${#PKGS[@]} packages already installed"
  exit 0
fi

echo "setup-bench: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
