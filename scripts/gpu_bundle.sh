#!/usr/bin/env bash
# Packs what the GPU scripts (gpu_check.sh, gpu_parallel_check.sh, gpu_overlap_bench.sh) need on a
# GPU machine that has the CUDA driver and toolkit but not this build's libraries: the binaries of
# `make build` (built where nvcc is), the shared libraries they link beyond glibc and CUDA
# (OpenBLAS, gfortran, OpenMPI), and this machine's OpenMPI programs and plugins, relocatable with
# OPAL_PREFIX. Usage: scripts/gpu_bundle.sh BIN_DIR OUT_DIR. On the GPU machine:
#   mkdir -p /tmp/shardsim-gpu && tar xJf OUT_DIR/libs.tar.xz -C /tmp/shardsim-gpu
#   source OUT_DIR/env.sh; scripts/gpu_check.sh OUT_DIR/bin RESULTS
# (env.sh expects the libraries under /tmp/shardsim-gpu; OUT_DIR/bin travels as it is).
set -euo pipefail
bin=${1:?usage: scripts/gpu_bundle.sh BIN_DIR OUT_DIR}
out=${2:?usage: scripts/gpu_bundle.sh BIN_DIR OUT_DIR}
programs=(shardsim-runtime shardsim-gpu cuda_kernels_test)
for p in "${programs[@]}"; do
  [ -x "$bin/$p" ] || { echo "gpu_bundle.sh: $bin/$p missing (build with nvcc found: make build)" >&2; exit 2; }
done
orterun=$(readlink -f "$(command -v mpiexec)")
ompi_lib=$(dirname "$(ldd "$bin/shardsim-runtime" | awk '$1 == "libmpi.so.40" {print $3}')")
plugins=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')
[ -d "$plugins" ] || { echo "gpu_bundle.sh: OpenMPI's plugin folder not found (ompi_info --path pkglibdir)" >&2; exit 2; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib" "$stage/ompi/bin" "$stage/ompi/lib" "$stage/ompi/share" "$out/bin"
cp "$orterun" "$stage/ompi/bin/orterun"
orted=$(command -v orted || true)
[ -n "$orted" ] && cp "$(readlink -f "$orted")" "$stage/ompi/bin/orted"
ln -s orterun "$stage/ompi/bin/mpiexec"
cp -a "$plugins" "$stage/ompi/lib/plugins"
[ -d /usr/share/openmpi ] && cp -a /usr/share/openmpi "$stage/ompi/share/openmpi"
# Every library the programs and plugins load, but the C library's, the C++ runtime's and CUDA's.
{ for p in "${programs[@]}"; do ldd "$bin/$p"; done; ldd "$orterun"; for f in "$plugins"/*.so; do ldd "$f"; done; } 2>/dev/null |
  awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -v -E '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|libcublas|libcublasLt|libcudart)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
tar cJf "$out/libs.tar.xz" -C "$stage" lib ompi
for p in "${programs[@]}"; do cp "$bin/$p" "$out/bin/"; done
cat > "$out/env.sh" <<EOF
# Sourced on the GPU machine after unpacking libs.tar.xz into /tmp/shardsim-gpu (scripts/gpu_bundle.sh).
D=/tmp/shardsim-gpu
export OPAL_PREFIX=\$D/ompi PATH=\$D/ompi/bin:\$PATH LD_LIBRARY_PATH=\$D/lib:/usr/local/cuda/lib64:\${LD_LIBRARY_PATH:-}
export OMPI_MCA_mca_base_component_path=\$D/ompi/lib/plugins OPAL_PKGDATADIR=\$D/ompi/share/openmpi
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_pml=ob1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export PMIX_MCA_pcompress_base_silence_warning=1 OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export SHARDSIM_MPIEXEC=\$D/ompi/bin/mpiexec SHARDSIM_RUNTIME_BIN=\$(cd "\$(dirname "\${BASH_SOURCE[0]}")" && pwd)/bin/shardsim-runtime
EOF
echo "gpu_bundle.sh: wrote $out/libs.tar.xz ($(du -h "$out/libs.tar.xz" | cut -f1)), $out/bin and $out/env.sh"
