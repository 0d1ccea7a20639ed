#!/usr/bin/env bash
# Build the GPU-stack test doubles' package repositories (test bed only).
#
#   build-repo.sh OUTDIR
#
# OUTDIR gets these trees, each shaped like the NVIDIA repository it stands in for:
#   cuda/repos/<distro>/x86_64/  one flat apt repo per OS like developer.download.nvidia.com/compute/cuda/
#                          repos/<distro>/x86_64/ (driver, fabric manager, CUDA toolkit, NCCL, DCGM):
#                          debian12/ and debian13/ in Debian's package names, ubuntu2204/ and ubuntu2404/
#                          (served to the Ubuntu test doubles' hosts) with the driver and fabric manager
#                          in Ubuntu's (branch-named below 590, nvidia-persistenced of its own, NSCQ);
#                          each tree offers what NVIDIA publishes for its OS (no DCGM nor exporter in
#                          debian13/), from matrix_packages.py (cuda_tree_files)
#   libnvidia-container/   flat apt repo like nvidia.github.io/libnvidia-container/stable/deb/amd64/
#   src/                   nccl-tests-<version>.tar.gz and pyxis-<version>.tar.gz (stand-in source
#                          trees, shaped like GitHub's tag archives) + SHA256SUMS
#   releases/              enroot_<version>-1_amd64.deb and enroot+caps_<version>-1_amd64.deb, plain
#                          files like github.com/NVIDIA/enroot/releases/download/v<version>/ + SHA256SUMS
# plus gpufleet-doubles.asc, the public key both apt repositories are signed with
# (a throwaway key kept in OUTDIR/../doubles-repo-gnupg).
#
# The packages carry NVIDIA's real names, version strings and version-locked Depends
# (Debian flavour of the CUDA repository), and two versions of the pinned ones,
# so that pins, holds and downgrades are exercised. Every NVIDIA name comes from the
# vendor matrix (module_utils/brief/vendor_matrix.py) and every version string from a
# cited listing (PUBLISHED), both through matrix_packages.py, which also holds the
# versions built: a double cannot carry a name the matrix does not list for Debian
# 12 / 13, nor a version no listing shows (tests/unit/test_doubles_repo.py builds the
# repository and checks it). The versions keep the vendor's irregularities (in the Ubuntu trees,
# driver revisions that follow the release; a re-spin, a build number; the Debian trees' driver carries
# Debian's plain -1, as NVIDIA's Debian repository does; the next branch's renamed packages), so a
# role that spells a version or a name by rule instead of resolving it installs nothing. Their programs are stand-ins
# (stack/bin) answering from /etc/gpufleet-doubles/hw-profile.json.
# Needs dpkg-deb, apt-ftparchive (apt-utils), gpg, a C compiler and python3.
# Rebuilds only when its inputs changed.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: build-repo.sh OUTDIR}
stack=$here/stack
mkdir -p "$out"
out=$(cd "$out" && pwd)
# Two scenarios may prepare at once (make molecule runs them in parallel): one build at a time.
exec 9>"$out.lock"
flock 9
gnupg=${GPUFLEET_DOUBLES_GNUPG:-$(dirname "$out")/doubles-repo-gnupg}

for tool in dpkg-deb apt-ftparchive gpg cc python3; do
  command -v "$tool" >/dev/null || { echo "build-repo.sh: $tool is missing (apt-get install dpkg apt-utils gnupg gcc python3)" >&2; exit 1; }
done

# NVIDIA's packages: the versions built (the pinned one first, then a newer one that must never
# be picked up) and, per version, each package's name and version string from the vendor matrix
# (driver_versions, drv_driver[v], drv_version[v], ... ; see matrix_packages.py).
matrix=$(python3 "$here/matrix_packages.py")
eval "$matrix"
# Not NVIDIA repository packages (source tarballs and GitHub release files).
nccl_tests_version=2.16.3
enroot_version=3.5.0
pyxis_version=0.20.0

stamp=$( { cat "$0"; printf '%s\n' "$matrix"; find "$stack" "$here/bin" -type f -print0 2>/dev/null | sort -z | xargs -0 cat; } | sha256sum | cut -c1-16)
if [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$stamp" ] && [ -f "$out/gpufleet-doubles.asc" ]; then
  echo "doubles repo up to date ($stamp)"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$out/cuda" "$out/cuda-ubuntu" "$out/libnvidia-container" "$out/src" "$out/releases" "$out/doca"
mkdir -p "$out/cuda" "$out/libnvidia-container" "$out/src" "$out/releases" "$work/pool/debian" "$work/pool/ubuntu"

# pkg REPO NAME VERSION DEPENDS [CONFLICTS]: build $work/root/NAME-VERSION into REPO (pool/<layout>:
# the CUDA repository's packages in one layout, from which each OS's tree takes its own).
pkg() {
  local repo=$1 name=$2 version=$3 depends=$4 conflicts=${5:-} root=$work/root/$2-$3 dest=$out/$1
  case $repo in pool/*) dest=$work/$repo ;; esac
  mkdir -p "$root/DEBIAN" "$root/usr/share/doc/$name"
  printf 'gpufleet test double of NVIDIA package %s %s: not the real software.\n' "$name" "$version" \
    >"$root/usr/share/doc/$name/README.gpufleet-double"
  {
    printf 'Package: %s\nVersion: %s\nArchitecture: amd64\n' "$name" "$version"
    printf 'Maintainer: gpufleet test bed <noreply@gpufleet.invalid>\nSection: non-free/libs\nPriority: optional\n'
    [ -n "$depends" ] && printf 'Depends: %s\n' "$depends"
    [ -n "$conflicts" ] && printf 'Conflicts: %s\n' "$conflicts"
    printf 'Description: %s (gpufleet test double)\n Stand-in with the vendor'"'"'s name and version for the test bed.\n' "$name"
  } >"$root/DEBIAN/control"
  dpkg-deb -Zgzip --root-owner-group --build "$root" "$dest/${name}_${version#*:}_amd64.deb" >/dev/null
}
# put NAME-VERSION SRC DEST [MODE] [SUBST...]: a file into a package root, @KEY@ replaced.
put() {
  local root=$work/root/$1 src=$2 dest=$3 mode=${4:-0755}
  shift 4 || shift $#
  mkdir -p "$(dirname "$root$dest")"
  cp "$src" "$root$dest"
  local kv
  for kv in "$@"; do sed -i "s|@${kv%%=*}@|${kv#*=}|g" "$root$dest"; done
  chmod "$mode" "$root$dest"
}
# script NAME-VERSION KIND BODY: a maintainer script.
script() {
  local root=$work/root/$1
  mkdir -p "$root/DEBIAN"
  printf '#!/bin/sh\nset -e\n%s\n' "$3" >"$root/DEBIAN/$2"
  chmod 0755 "$root/DEBIAN/$2"
}
# helper NAME-VERSION PACKAGE: the stand-ins' profile reader, in a directory of the package's own.
helper() {
  put "$1" "$stack/bin/gpufleet_doubles_profile.py" "/usr/lib/gpufleet-doubles/$2/gpufleet_doubles_profile.py" 0644
}

nvidia_smi=$here/bin/nvidia-smi
[ -f "$nvidia_smi" ] || nvidia_smi=$stack/bin/nvidia-smi-minimal

# --- driver (Debian names in NVIDIA's CUDA repository) ------------------------
for v in "${driver_versions[@]}"; do
  dv=${drv_version[$v]} fmv=${drv_fabricmanager_version[$v]}
  libcuda=${drv_libcuda[$v]} smi=${drv_smi[$v]} driver=${drv_driver[$v]} persistenced=${drv_persistenced[$v]}
  kopen=${drv_kmod_open[$v]} kprop=${drv_kmod_proprietary[$v]} fmname=${drv_fabricmanager[$v]}
  cc -shared -fPIC -o "$work/libstub.so" -x c - <<<'int gpufleet_driver_double(void) { return 0; }'
  mkdir -p "$work/root/$libcuda-$dv/usr/lib/x86_64-linux-gnu"
  cp "$work/libstub.so" "$work/root/$libcuda-$dv/usr/lib/x86_64-linux-gnu/libcuda.so.$v"
  cp "$work/libstub.so" "$work/root/$libcuda-$dv/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.$v"
  ln -s "libcuda.so.$v" "$work/root/$libcuda-$dv/usr/lib/x86_64-linux-gnu/libcuda.so.1"
  ln -s "libnvidia-ml.so.$v" "$work/root/$libcuda-$dv/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"
  pkg pool/debian "$libcuda" "$dv" ""
  put "$smi-$dv" "$nvidia_smi" /usr/bin/nvidia-smi 0755 "PKG=$smi"
  helper "$smi-$dv" "$smi"
  pkg pool/debian "$smi" "$dv" "$libcuda (= $dv)"
  pkg pool/debian "$driver" "$dv" "$smi (= $dv), $libcuda (= $dv)"
  mkdir -p "$work/root/$kopen-$dv/usr/src/nvidia-$v" "$work/root/$kprop-$dv/usr/src/nvidia-$v"
  pkg pool/debian "$kopen" "$dv" "" "$kprop"
  pkg pool/debian "$kprop" "$dv" "" "$kopen"
  put "$persistenced-$dv" "$stack/bin/daemon-standin" /usr/bin/nvidia-persistenced 0755 NAME=nvidia-persistenced "VERSION=$v"
  put "$persistenced-$dv" "$stack/units/nvidia-persistenced.service" /lib/systemd/system/nvidia-persistenced.service 0644
  pkg pool/debian "$persistenced" "$dv" "$libcuda (= $dv)"
  fm=$fmname-$fmv
  put "$fm" "$stack/bin/daemon-standin" /usr/bin/nv-fabricmanager 0755 NAME=nv-fabricmanager "VERSION=$v"
  put "$fm" "$stack/units/nvidia-fabricmanager.service" /lib/systemd/system/nvidia-fabricmanager.service 0644
  mkdir -p "$work/root/$fm/usr/share/nvidia/nvswitch"
  printf 'LOG_LEVEL=4\nFABRIC_MODE=0\n' >"$work/root/$fm/usr/share/nvidia/nvswitch/fabricmanager.cfg"
  pkg pool/debian "$fmname" "$fmv" ""
done

# --- CUDA toolkits -------------------------------------------------------------
for full in "${cuda_versions[@]}" "$cuda_other"; do
  minor=${full%.*} dv=${cuda_version[$full]} name=${cuda_toolkit[$full]}
  prio=$(( ${minor%%.*} * 10 + ${minor#*.} ))
  r=$name-$dv
  put "$r" "$stack/bin/nvcc" "/usr/local/cuda-$minor/bin/nvcc" 0755 "MINOR=$minor" "FULL=$full"
  mkdir -p "$work/root/$r/usr/local/cuda-$minor/include" "$work/root/$r/usr/local/cuda-$minor/lib64"
  printf '{\n   "cuda" : {\n      "name" : "CUDA SDK",\n      "version" : "%s"\n   }\n}\n' "$full" >"$work/root/$r/usr/local/cuda-$minor/version.json"
  printf '/* gpufleet test double */\n#define CUDART_VERSION %d\n' "$(( ${minor%%.*} * 1000 + ${minor#*.} * 10 ))" \
    >"$work/root/$r/usr/local/cuda-$minor/include/cuda_runtime_api.h"
  # As cuda-toolkit-X-Y-config-common does: register /usr/local/cuda with the alternatives system.
  script "$r" postinst "update-alternatives --install /usr/local/cuda cuda /usr/local/cuda-$minor $prio"
  script "$r" prerm "[ \"\$1\" = upgrade ] || update-alternatives --remove cuda /usr/local/cuda-$minor"
  pkg pool/debian "$name" "$dv" ""
  # GPUDirect Storage as nvidia-gds-X-Y: in production it pulls nvidia-fs (DKMS) and the cuFile tools.
  gds=${cuda_gds[$full]} gdsv=${cuda_gds_version[$full]}
  mkdir -p "$work/root/$gds-$gdsv/usr/local/cuda-$minor/gds/tools"
  pkg pool/debian "$gds" "$gdsv" ""
done

# --- NCCL ---------------------------------------------------------------------------
# One per build (<release>+cuda<minor>): a release is built for several CUDA minors.
for build in "${nccl_builds[@]}"; do
  v=${build%%+*}
  IFS=. read -r major minor patch <<<"$v"
  dv=${nccl_version[$build]} code=$(( major * 10000 + minor * 100 + patch ))
  lib=$work/root/$nccl_lib-$dv/usr/lib/x86_64-linux-gnu
  mkdir -p "$lib"
  cc -shared -fPIC -Wl,-soname,libnccl.so.2 -DNCCL_STUB_CODE="$code" -o "$lib/libnccl.so.$v" "$stack/nccl-stub.c"
  ln -s "libnccl.so.$v" "$lib/libnccl.so.2"
  pkg pool/debian "$nccl_lib" "$dv" ""
  dev=$work/root/$nccl_dev-$dv
  mkdir -p "$dev/usr/include" "$dev/usr/lib/x86_64-linux-gnu"
  ln -s libnccl.so.2 "$dev/usr/lib/x86_64-linux-gnu/libnccl.so"
  cat >"$dev/usr/include/nccl.h" <<H
/* gpufleet test double of NCCL's nccl.h: the version macros and what the probe needs. */
#ifndef NCCL_H_
#define NCCL_H_
#define NCCL_MAJOR $major
#define NCCL_MINOR $minor
#define NCCL_PATCH $patch
#define NCCL_SUFFIX ""
#define NCCL_VERSION_CODE $code
#define NCCL_VERSION(X,Y,Z) (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))
typedef enum { ncclSuccess = 0 } ncclResult_t;
ncclResult_t ncclGetVersion(int *version);
#endif
H
  pkg pool/debian "$nccl_dev" "$dv" "$nccl_lib (= $dv)"
done

# --- DCGM 4 ---------------------------------------------------------------------
for v in "${dcgm_versions[@]}"; do
  dv=${dcgm_version[$v]} r=$dcgm_core-${dcgm_version[$v]}
  put "$r" "$stack/bin/nv-hostengine" /usr/bin/nv-hostengine 0755 "VERSION=$v" "PKG=$dcgm_core"
  put "$r" "$here/bin/dcgmi" /usr/bin/dcgmi 0755 "VERSION=$v"
  helper "$r" "$dcgm_core"
  put "$r" "$stack/units/nvidia-dcgm.service" /lib/systemd/system/nvidia-dcgm.service 0644
  pkg pool/debian "$dcgm_core" "$dv" ""
  pkg pool/debian "$dcgm_cuda" "$dv" "$dcgm_core (= $dv)"
done

# --- DCGM exporter --------------------------------------
# datacenter-gpu-manager-exporter as in NVIDIA's CUDA repository: /usr/bin/dcgm-exporter, the
# nvidia-dcgm-exporter unit and /etc/dcgm-exporter/default-counters.csv. The pinned version
# first (4.1.3 is paired with DCGM 4.2.3), then a newer one that must never be picked up.
for v in "${dcgm_exporter_versions[@]}"; do
  dv=${dcgm_exporter_version[$v]} r=$dcgm_exporter_pkg-${dcgm_exporter_version[$v]}
  put "$r" "$stack/bin/dcgm_exporter_double.py" /usr/bin/dcgm-exporter 0755 "VERSION=$v"
  put "$r" "$stack/units/nvidia-dcgm-exporter.service" /lib/systemd/system/nvidia-dcgm-exporter.service 0644
  put "$r" "$stack/dcgm-exporter/default-counters.csv" /etc/dcgm-exporter/default-counters.csv 0644
  mkdir -p "$work/root/$r/DEBIAN" && printf '/etc/dcgm-exporter/default-counters.csv\n' >"$work/root/$r/DEBIAN/conffiles"
  pkg pool/debian "$dcgm_exporter_pkg" "$dv" "$dcgm_core (>= 1:4.0.0)"
done

# --- the Ubuntu layout of the CUDA repository (pool/ubuntu: the ubuntu2204/2404 trees) ---
# NVIDIA's Ubuntu repository names the driver after Ubuntu's packaging (vendor matrix, driver rows for
# ubuntu2204/2404): per branch nvidia-driver-<branch>[-open] and nvidia-dkms-<branch>[-open], the
# libraries in libnvidia-compute-<branch>, nvidia-smi in nvidia-utils-<branch>, nvidia-persistenced a
# package of its own at the driver's version; below 580 nvidia-fabricmanager-<branch> with
# libnvidia-nscq-<branch>. Its CUDA toolkit, GDS, NCCL and DCGM packages carry the Debian names, and
# are the Debian pool's own files.
build_ubuntu_repo() {
  local v dv fmv lib utils dopen dprop kopen kprop persistenced fmname nscq name f
  for v in "${driver_versions[@]}"; do
    dv=${ubu_version[$v]} fmv=${ubu_fabricmanager_version[$v]}
    lib=${ubu_libcompute[$v]} utils=${ubu_utils[$v]} persistenced=${ubu_persistenced[$v]}
    dopen=${ubu_driver_open[$v]} dprop=${ubu_driver_proprietary[$v]}
    kopen=${ubu_dkms_open[$v]} kprop=${ubu_dkms_proprietary[$v]}
    fmname=${ubu_fabricmanager[$v]} nscq=${ubu_nscq[$v]}
    mkdir -p "$work/root/$lib-$dv/usr/lib/x86_64-linux-gnu"
    cp "$work/libstub.so" "$work/root/$lib-$dv/usr/lib/x86_64-linux-gnu/libcuda.so.$v"
    cp "$work/libstub.so" "$work/root/$lib-$dv/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.$v"
    ln -sf "libcuda.so.$v" "$work/root/$lib-$dv/usr/lib/x86_64-linux-gnu/libcuda.so.1"
    ln -sf "libnvidia-ml.so.$v" "$work/root/$lib-$dv/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"
    pkg pool/ubuntu "$lib" "$dv" ""
    put "$utils-$dv" "$nvidia_smi" /usr/bin/nvidia-smi 0755 "PKG=$utils"
    helper "$utils-$dv" "$utils"
    pkg pool/ubuntu "$utils" "$dv" "$lib (= $dv)"
    pkg pool/ubuntu "$dopen" "$dv" "$utils (= $dv), $lib (= $dv)" "$dprop"
    pkg pool/ubuntu "$dprop" "$dv" "$utils (= $dv), $lib (= $dv)" "$dopen"
    mkdir -p "$work/root/$kopen-$dv/usr/src/nvidia-$v" "$work/root/$kprop-$dv/usr/src/nvidia-$v"
    pkg pool/ubuntu "$kopen" "$dv" "" "$kprop"
    pkg pool/ubuntu "$kprop" "$dv" "" "$kopen"
    put "$persistenced-$dv" "$stack/bin/daemon-standin" /usr/bin/nvidia-persistenced 0755 NAME=nvidia-persistenced "VERSION=$v"
    put "$persistenced-$dv" "$stack/units/nvidia-persistenced.service" /lib/systemd/system/nvidia-persistenced.service 0644
    pkg pool/ubuntu "$persistenced" "$dv" "$lib (= $dv)"
    put "$fmname-$fmv" "$stack/bin/daemon-standin" /usr/bin/nv-fabricmanager 0755 NAME=nv-fabricmanager "VERSION=$v"
    put "$fmname-$fmv" "$stack/units/nvidia-fabricmanager.service" /lib/systemd/system/nvidia-fabricmanager.service 0644
    mkdir -p "$work/root/$fmname-$fmv/usr/share/nvidia/nvswitch"
    printf 'LOG_LEVEL=4\nFABRIC_MODE=0\n' >"$work/root/$fmname-$fmv/usr/share/nvidia/nvswitch/fabricmanager.cfg"
    pkg pool/ubuntu "$fmname" "$fmv" "$nscq (= $fmv)"
    mkdir -p "$work/root/$nscq-$fmv/usr/lib/x86_64-linux-gnu"
    cp "$work/libstub.so" "$work/root/$nscq-$fmv/usr/lib/x86_64-linux-gnu/libnvidia-nscq.so.$v"
    pkg pool/ubuntu "$nscq" "$fmv" ""
  done
  for name in "${cuda_toolkit[@]}" "${cuda_gds[@]}" "$nccl_lib" "$nccl_dev" "$dcgm_core" "$dcgm_cuda" "$dcgm_exporter_pkg"; do
    for f in "$work/pool/debian/${name}"_*_amd64.deb; do
      [ -e "$work/pool/ubuntu/${f##*/}" ] || cp "$f" "$work/pool/ubuntu/"
    done
  done
}
build_ubuntu_repo

# --- the CUDA repository's trees, one per OS (cuda/repos/<distro>/x86_64/) ---------------------
# Each takes from its layout's pool the files matrix_packages.py lists for that OS: what NVIDIA
# publishes there (no DCGM nor dcgm-exporter for debian13, NVIDIA/cuda-repo-management#41).
cuda_trees=()
for os in "${!cuda_tree_files[@]}"; do
  tree=cuda/repos/$os/x86_64
  mkdir -p "$out/$tree"
  for f in ${cuda_tree_files[$os]}; do
    [ -e "$work/pool/${cuda_tree_layout[$os]}/$f" ] || { echo "build-repo.sh: $os lists $f, which was not built" >&2; exit 1; }
    cp "$work/pool/${cuda_tree_layout[$os]}/$f" "$out/$tree/"
  done
  cuda_trees+=("$tree")
done

# --- DOCA-OFED repositories, one per release and distro -------
# As linux.mellanox.com/public/repo/doca/<release>/<distro>/x86_64/: a flat repository
# whose doca-ofed profile meta-package pulls the user space (here Debian's real one).
doca_repos=()
for v in "${doca_versions[@]}"; do
  dv=${doca_version[$v]}
  for os in "${!doca_distro[@]}"; do
    repo=doca/$v/${doca_distro[$os]}/x86_64
    mkdir -p "$out/$repo"
    pkg "$repo" "$doca_pkg" "$dv" "rdma-core, ibverbs-providers, ibverbs-utils, infiniband-diags, perftest"
    pkg "$repo" "$doca_userspace_pkg" "$dv" "rdma-core, ibverbs-providers, ibverbs-utils"
    rm -rf "$work/root/$doca_pkg-$dv" "$work/root/$doca_userspace_pkg-$dv"
    doca_repos+=("$repo")
  done
done

# --- NVIDIA container toolkit (its own repository, as in production) ------------------
for v in "${toolkit_versions[@]}"; do
  dv=${toolkit_version[$v]}
  mkdir -p "$work/root/$ctk_lib-$dv/usr/lib/x86_64-linux-gnu"
  cp "$work/libstub.so" "$work/root/$ctk_lib-$dv/usr/lib/x86_64-linux-gnu/libnvidia-container.so.$v"
  pkg libnvidia-container "$ctk_lib" "$dv" ""
  printf '#!/bin/sh\necho "cli-version: %s (gpufleet test double)"\n' "$v" >"$work/cli"
  put "$ctk_tools-$dv" "$work/cli" /usr/bin/nvidia-container-cli 0755
  pkg libnvidia-container "$ctk_tools" "$dv" "$ctk_lib (>= $dv)"
  r=$ctk_base-$dv
  put "$r" "$stack/bin/nvidia-ctk" /usr/bin/nvidia-ctk 0755 "VERSION=$v" "PKG=$ctk_base"
  helper "$r" "$ctk_base"
  printf '#!/bin/sh\necho "nvidia-container-runtime (gpufleet test double) %s" >&2\nexec runc "$@"\n' "$v" >"$work/rt"
  put "$r" "$work/rt" /usr/bin/nvidia-container-runtime 0755
  printf '#!/bin/sh\nexit 0\n' >"$work/hook"
  put "$r" "$work/hook" /usr/bin/nvidia-cdi-hook 0755
  pkg libnvidia-container "$ctk_base" "$dv" ""
  put "$ctk_toolkit-$dv" "$work/hook" /usr/bin/nvidia-container-runtime-hook 0755
  pkg libnvidia-container "$ctk_toolkit" "$dv" \
    "$ctk_base (= $dv), $ctk_tools (>= $dv), $ctk_tools (<< 2.0.0)"
done

# --- nccl-tests source (stand-in tree, real build interface) ---------------------
src=$work/nccl-tests-$nccl_tests_version
mkdir -p "$src/src"
cp "$stack/nccl-tests/Makefile" "$src/"
cp "$stack/nccl-tests/src/probe.c" "$stack/nccl-tests/src/perf.standin" "$src/src/"
if [ -f "$here/bin/all_reduce_perf" ]; then
  cp "$here/bin/all_reduce_perf" "$src/src/all_reduce_perf.standin"
else
  cp "$stack/nccl-tests/src/perf.standin" "$src/src/all_reduce_perf.standin"
fi
tar -C "$work" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -c "nccl-tests-$nccl_tests_version" \
  | gzip -n >"$out/src/nccl-tests-$nccl_tests_version.tar.gz"

# --- pyxis source (stand-in tree: a real minimal SPANK plugin, pyxis' Makefile interface) ---
src=$work/pyxis-$pyxis_version
mkdir -p "$src"
cp "$stack/pyxis/spank_pyxis_double.c" "$src/"
sed "s|@VERSION@|$pyxis_version|g" "$stack/pyxis/Makefile" >"$src/Makefile"
tar -C "$work" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -c "pyxis-$pyxis_version" \
  | gzip -n >"$out/src/pyxis-$pyxis_version.tar.gz"
(cd "$out/src" && sha256sum ./*.tar.gz | sed 's| \./| |' >SHA256SUMS)

# --- enroot release packages (plain .deb files, not an apt repository, as on GitHub) ---
r=enroot-$enroot_version-1
put "$r" "$stack/enroot/enroot" /usr/bin/enroot 0755 "VERSION=$enroot_version"
put "$r" "$stack/enroot/enroot.conf" /etc/enroot/enroot.conf 0644
mkdir -p "$work/root/$r/DEBIAN" && printf '/etc/enroot/enroot.conf\n' >"$work/root/$r/DEBIAN/conffiles"
pkg releases enroot "$enroot_version-1" ""
r=enroot+caps-$enroot_version-1
mkdir -p "$work/root/$r"
pkg releases enroot+caps "$enroot_version-1" "enroot (= $enroot_version-1)"
(cd "$out/releases" && sha256sum ./*.deb | sed 's| \./| |' >SHA256SUMS)

# --- indexes and signatures --------------------------------------------------------
if [ ! -f "$gnupg/pubring.kbx" ]; then
  mkdir -p "$gnupg" && chmod 700 "$gnupg"
  gpg --homedir "$gnupg" --batch --passphrase '' --quick-gen-key 'gpufleet test doubles <noreply@gpufleet.invalid>' ed25519 sign never 2>/dev/null
fi
gpg --homedir "$gnupg" --batch --armor --export >"$out/gpufleet-doubles.asc"
for repo in "${cuda_trees[@]}" libnvidia-container "${doca_repos[@]}"; do
  (
    cd "$out/$repo"
    apt-ftparchive packages . >Packages
    gzip -9nkf Packages
    apt-ftparchive -o APT::FTPArchive::Release::Origin="gpufleet test doubles ($repo)" \
      -o APT::FTPArchive::Release::Label="$repo" release . >Release
    gpg --homedir "$gnupg" --batch --yes --clearsign -o InRelease Release
    gpg --homedir "$gnupg" --batch --yes -abs -o Release.gpg Release
  )
done
# --- pkgs.k8s.io stand-ins, helm release, Kueue / Calico manifests ---
# kubernetes/v<minor>/deb/   flat apt repo like pkgs.k8s.io/core:/stable:/v<minor>/deb/ (kubeadm, kubelet,
#                            kubectl at the pinned version and a newer one, cri-tools, kubernetes-cni),
#                            signed with the doubles' key, which is also its Release.key
# kubernetes/helm/           helm-v<version>-linux-amd64.tar.gz + .sha256sum, like get.helm.sh
# kubernetes/kueue/v<version>/manifests.yaml, kubernetes/calico/v<version>/manifests/tigera-operator.yaml
# kubernetes/mpi-operator/v<version>/deploy/v2beta1/mpi-operator.yaml (raw.githubusercontent.com's layout)
# Programs: stack/k8s (stand-ins answering through an API server stand-in on the control plane).
# 1.33.4 = the gpu_stack scenario's pin, 1.33.5 a newer patch (held back), 1.34.2 the minor its
# rolling upgrade moves to (pkgs.k8s.io has one repository per minor: v1.33, v1.34).
k8s_versions=(1.33.4 1.33.5 1.34.2)
# Each minor's repository also carries cri-tools of that minor and kubernetes-cni (1.6.0 in both:
# kubernetes/release#4100 aggregated the 1.33 build into v1.34).
declare -A k8s_cri_tools=([1.33]=1.33.0-1.1 [1.34]=1.34.0-1.1)
helm_version=3.18.4 kueue_version=v0.14.8 calico_version=v3.30.3 mpi_operator_version=v0.8.0
rm -rf "$out/kubernetes" && mkdir -p "$out/kubernetes/helm" "$out/kubernetes/kueue/$kueue_version" \
  "$out/kubernetes/calico/$calico_version/manifests" "$out/kubernetes/mpi-operator/$mpi_operator_version/deploy/v2beta1"
for k8s_minor in "${!k8s_cri_tools[@]}"; do mkdir -p "$out/kubernetes/v$k8s_minor/deb"; done
k8s_lib() {  # the stand-ins' shared module, in each package's own directory
  put "$1" "$stack/k8s/gpufleet_k8s_double.py" "/usr/lib/gpufleet-doubles/k8s-$2/gpufleet_k8s_double.py" 0644 \
    "K8S_VERSION=$3"
  sed -i "s|/usr/lib/gpufleet-doubles/k8s\"|/usr/lib/gpufleet-doubles/k8s-$2\"|" "$work/root/$1/usr/bin/$2"
}
for v in "${k8s_versions[@]}"; do
  dv=$v-1.1 k8s_minor=${v%.*}
  put "kubeadm-$dv" "$stack/k8s/kubeadm" /usr/bin/kubeadm 0755
  k8s_lib "kubeadm-$dv" kubeadm "$v"
  pkg "kubernetes/v$k8s_minor/deb" kubeadm "$dv" "cri-tools (>= 1.30.0)"
  put "kubectl-$dv" "$stack/k8s/kubectl" /usr/bin/kubectl 0755
  k8s_lib "kubectl-$dv" kubectl "$v"
  # An MPIJob's launcher runs the production image's nccl-tests: the all_reduce_perf double (bin/).
  put "kubectl-$dv" "$here/bin/all_reduce_perf" /usr/lib/gpufleet-doubles/k8s-kubectl/all_reduce_perf 0755
  # batch/v1 Jobs: the API server's checks, Kueue, the Job controller and the kubelet (gpufleet_k8s_jobs.py).
  put "kubectl-$dv" "$stack/k8s/gpufleet_k8s_jobs.py" /usr/lib/gpufleet-doubles/k8s-kubectl/gpufleet_k8s_jobs.py 0644
  pkg "kubernetes/v$k8s_minor/deb" kubectl "$dv" ""
  put "kubelet-$dv" "$stack/k8s/kubelet" /usr/bin/kubelet 0755 "K8S_VERSION=$v"
  put "kubelet-$dv" "$stack/k8s/kube-apiserver" /usr/bin/kube-apiserver-double 0755
  k8s_lib "kubelet-$dv" kube-apiserver-double "$v"
  sed -i "s|/usr/lib/gpufleet-doubles/k8s/kube-apiserver\"|/usr/bin/kube-apiserver-double\"|" \
    "$work/root/kubelet-$dv/usr/bin/kubelet"
  put "kubelet-$dv" "$stack/k8s/kubelet.service" /lib/systemd/system/kubelet.service 0644
  pkg "kubernetes/v$k8s_minor/deb" kubelet "$dv" "kubernetes-cni (>= 1.1.1)"
done
mkdir -p "$work/root/kubernetes-cni-1.6.0-1.1/opt/cni/bin"
for k8s_minor in "${!k8s_cri_tools[@]}"; do
  mkdir -p "$work/root/cri-tools-${k8s_cri_tools[$k8s_minor]}/usr/bin"
  pkg "kubernetes/v$k8s_minor/deb" cri-tools "${k8s_cri_tools[$k8s_minor]}" ""
  pkg "kubernetes/v$k8s_minor/deb" kubernetes-cni 1.6.0-1.1 ""
done
mkdir -p "$work/helm/linux-amd64"
sed "s|@K8S_VERSION@|${k8s_versions[0]}|; s|/usr/lib/gpufleet-doubles/k8s\"|/usr/local/lib/gpufleet-doubles-helm\"|" \
  "$stack/k8s/helm" >"$work/helm/linux-amd64/helm"
chmod 0755 "$work/helm/linux-amd64/helm"
# The helm tarball carries its own copy of the shared module (helm is one static binary in production).
cp "$stack/k8s/gpufleet_k8s_double.py" "$work/helm/linux-amd64/gpufleet_k8s_double.py"
sed -i 's|sys.path.insert(0, "/usr/local/lib/gpufleet-doubles-helm")|sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.realpath(__file__)))|' \
  "$work/helm/linux-amd64/helm"
tarball=helm-v$helm_version-linux-amd64.tar.gz
tar -C "$work/helm" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -c linux-amd64 | gzip -n \
  >"$out/kubernetes/helm/$tarball"
(cd "$out/kubernetes/helm" && sha256sum "$tarball" >"$tarball.sha256sum")
sed "s|@KUEUE_VERSION@|$kueue_version|" "$stack/k8s/kueue-manifests.yaml" >"$out/kubernetes/kueue/$kueue_version/manifests.yaml"
sed "s|@TIGERA_VERSION@|$calico_version|" "$stack/k8s/tigera-operator.yaml" \
  >"$out/kubernetes/calico/$calico_version/manifests/tigera-operator.yaml"
sed "s|@MPI_OPERATOR_IMAGE_TAG@|${mpi_operator_version#v}|" "$stack/k8s/mpi-operator.yaml" \
  >"$out/kubernetes/mpi-operator/$mpi_operator_version/deploy/v2beta1/mpi-operator.yaml"
for k8s_minor in "${!k8s_cri_tools[@]}"; do
  (
    cd "$out/kubernetes/v$k8s_minor/deb"
    apt-ftparchive packages . >Packages
    gzip -9nkf Packages
    apt-ftparchive -o APT::FTPArchive::Release::Origin="gpufleet test doubles (kubernetes)" \
      -o APT::FTPArchive::Release::Label=kubernetes release . >Release
    gpg --homedir "$gnupg" --batch --yes --clearsign -o InRelease Release
    gpg --homedir "$gnupg" --batch --yes -abs -o Release.gpg Release
    cp "$out/gpufleet-doubles.asc" Release.key
  )
done

chmod -R a+rX "$out"
echo "$stamp" >"$out/.stamp"
echo "doubles repo built in $out ($(find "$out" -name '*.deb' | wc -l) packages)"
