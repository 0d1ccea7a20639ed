#!/usr/bin/env bash
# Build the GPU-stack test doubles' RHEL 9 package repository (test bed only).
#
#   build-rpm-repo.sh OUTDIR
#
# OUTDIR/cuda/repos/rhel9/x86_64/ is shaped like NVIDIA's CUDA repository for RHEL 9
# (developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64/): RPMs of the driver (user space,
# open and proprietary DKMS module packages, persistence daemon), fabric manager, CUDA toolkit, NCCL
# and DCGM, createrepo_c metadata, and the driver's dnf module streams (modules.yaml added with
# modifyrepo_c: nvidia-driver:<branch>-open and <branch>-dkms, as NVIDIA's install guide enables them).
#
# Every name comes from the vendor matrix's rhel9 rows and every version string from the cited
# PUBLISHED_RHEL9 table, both through matrix_packages.py --rhel9 (epoch 3 and .el9 on the driver's
# packages, noarch DKMS module packages, NCCL's +cuda<minor> builds with a re-spin), so a role that
# spells a version by rule installs nothing. The payloads are the same stand-ins the Debian doubles
# carry (stack/bin, stack/units, bin/), at RHEL's paths (/usr/lib64, /usr/lib/systemd/system).
# The RPMs require only each other (no automatic dependencies): the test host's rpm database holds
# nothing else. They are signed, as NVIDIA's are, with the doubles' throwaway key (the one
# build-repo.sh signs the apt repositories with, kept in OUTDIR/../doubles-repo-gnupg), whose public
# half is OUTDIR/gpufleet-doubles.asc: a host's gpgkey.
# Needs rpmbuild and rpmsign (rpm), createrepo_c and modifyrepo_c (createrepo-c), gpg, a C compiler
# and python3.
# Rebuilds only when its inputs changed.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: build-rpm-repo.sh OUTDIR}
stack=$here/stack
mkdir -p "$out"
out=$(cd "$out" && pwd)
exec 9>"$out.rpm.lock"
flock 9

gnupg=${GPUFLEET_DOUBLES_GNUPG:-$(dirname "$out")/doubles-repo-gnupg}
for tool in rpmbuild rpmsign createrepo_c modifyrepo_c gpg cc python3; do
  command -v "$tool" >/dev/null || { echo "build-rpm-repo.sh: $tool is missing (apt-get install rpm createrepo-c gnupg gcc python3)" >&2; exit 1; }
done

# kind, upstream release, name, [epoch:]version-release, arch, the branch's module streams (open,dkms).
table=$(python3 "$here/matrix_packages.py" --rhel9)
repo=$out/cuda/repos/rhel9/x86_64
stamp=$( { cat "$0"; printf '%s\n' "$table"; find "$stack" "$here/bin" -type f -print0 | sort -z | xargs -0 cat; } | sha256sum | cut -c1-16)
if [ -f "$repo/.stamp" ] && [ "$(cat "$repo/.stamp")" = "$stamp" ]; then
  echo "doubles RPM repo up to date ($stamp)"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$repo"
mkdir -p "$repo" "$work/rpmbuild"

# put ROOT SRC DEST [MODE] [KEY=VALUE...]: a file into a package root, @KEY@ replaced.
put() {
  local root=$1 src=$2 dest=$3 mode=${4:-0755}
  shift 4 || shift $#
  mkdir -p "$(dirname "$root$dest")"
  cp "$src" "$root$dest"
  local kv
  for kv in "$@"; do sed -i "s|@${kv%%=*}@|${kv#*=}|g" "$root$dest"; done
  chmod "$mode" "$root$dest"
}

# rpm NAME EVR ARCH ROOT [REQUIRES] [CONFLICTS] [POST] [PREUN]: build ROOT's files into NAME-EVR.ARCH.rpm.
rpm_pkg() {
  local name=$1 evr=$2 arch=$3 root=$4 requires=${5:-} conflicts=${6:-} post=${7:-} preun=${8:-}
  local epoch="" vr=$evr
  case $evr in *:*) epoch=${evr%%:*} vr=${evr#*:} ;; esac
  local version=${vr%%-*} release=${vr#*-}
  mkdir -p "$root/usr/share/doc/$name"
  printf 'gpufleet test double of NVIDIA package %s %s: not the real software.\n' "$name" "$evr" \
    >"$root/usr/share/doc/$name/README.gpufleet-double"
  local spec=$work/$name-$vr.$arch.spec
  {
    printf 'Name: %s\nVersion: %s\nRelease: %s\n' "$name" "$version" "$release"
    [ -z "$epoch" ] || printf 'Epoch: %s\n' "$epoch"
    printf 'Summary: %s (gpufleet test double)\nLicense: Apache-2.0\nBuildArch: %s\nAutoReqProv: no\n' "$name" "$arch"
    [ -z "$requires" ] || printf 'Requires: %s\n' "$requires"
    [ -z "$conflicts" ] || printf 'Conflicts: %s\n' "$conflicts"
    printf '%%description\nStand-in with the vendor'"'"'s name and version for the gpufleet test bed.\n'
    printf '%%install\ncp -a %s/. %%{buildroot}/\n' "$root"
    [ -z "$post" ] || printf '%%post\n%s\n' "$post"
    [ -z "$preun" ] || printf '%%preun\n%s\n' "$preun"
    printf '%%files\n'
    (cd "$root" && find . ! -type d -printf '/%P\n' | sort | sed 's/^/"/; s/$/"/')
  } >"$spec"
  rpmbuild -bb --quiet --define "_topdir $work/rpmbuild" --define "_rpmdir $repo" \
    --define '_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm' \
    --define 'debug_package %{nil}' --define '__os_install_post %{nil}' --define '_build_id_links none' \
    --define '_binary_payload w9.gzdio' "$spec" >"$work/rpmbuild.log" 2>&1 \
    || { cat "$work/rpmbuild.log" >&2; exit 1; }
}

nvidia_smi=$here/bin/nvidia-smi
[ -f "$nvidia_smi" ] || nvidia_smi=$stack/bin/nvidia-smi-minimal
cc -shared -fPIC -o "$work/libstub.so" -x c - <<<'int gpufleet_driver_double(void) { return 0; }'
helper() { put "$1" "$stack/bin/gpufleet_doubles_profile.py" "/usr/lib/gpufleet-doubles/$2/gpufleet_doubles_profile.py" 0644; }

# NEVRA lists per module stream (name-epoch:version-release.arch, modulemd's artifacts).
declare -A stream_rpms=()
# name -> EVR of the same release of another package, for the lockstep Requires.
declare -A evr_of=()

while IFS=$'\t' read -r kind v name evr arch streams; do
  root=$work/root/$name-${evr#*:}.$arch
  mkdir -p "$root"
  requires="" conflicts="" post="" preun=""
  case $kind in
    driver)
      # nvidia-driver-cuda: the compute user space (libcuda, NVML, nvidia-smi).
      mkdir -p "$root/usr/lib64"
      cp "$work/libstub.so" "$root/usr/lib64/libcuda.so.$v"
      cp "$work/libstub.so" "$root/usr/lib64/libnvidia-ml.so.$v"
      ln -s "libcuda.so.$v" "$root/usr/lib64/libcuda.so.1"
      ln -s "libnvidia-ml.so.$v" "$root/usr/lib64/libnvidia-ml.so.1"
      put "$root" "$nvidia_smi" /usr/bin/nvidia-smi 0755 "PKG=$name"
      helper "$root" "$name" ;;
    kmod_open | kmod_proprietary)
      mkdir -p "$root/usr/src/nvidia-$v"
      printf 'PACKAGE_NAME="nvidia"\nPACKAGE_VERSION="%s"\n' "$v" >"$root/usr/src/nvidia-$v/dkms.conf"
      [ "$kind" = kmod_open ] && other=kmod_proprietary || other=kmod_open
      conflicts=$(python3 "$here/matrix_packages.py" --rhel9 | awk -F'\t' -v k="$other" -v v="$v" '$1 == k && $2 == v {print $3; exit}') ;;
    persistenced)
      put "$root" "$stack/bin/daemon-standin" /usr/bin/nvidia-persistenced 0755 NAME=nvidia-persistenced "VERSION=$v"
      put "$root" "$stack/units/nvidia-persistenced.service" /usr/lib/systemd/system/nvidia-persistenced.service 0644 ;;
    fabricmanager)
      put "$root" "$stack/bin/daemon-standin" /usr/bin/nv-fabricmanager 0755 NAME=nv-fabricmanager "VERSION=$v"
      put "$root" "$stack/units/nvidia-fabricmanager.service" /usr/lib/systemd/system/nvidia-fabricmanager.service 0644
      mkdir -p "$root/usr/share/nvidia/nvswitch"
      printf 'LOG_LEVEL=4\nFABRIC_MODE=0\n' >"$root/usr/share/nvidia/nvswitch/fabricmanager.cfg" ;;
    nscq)
      mkdir -p "$root/usr/lib64"
      cp "$work/libstub.so" "$root/usr/lib64/libnvidia-nscq.so.$v" ;;
    cuda)
      minor=${v%.*} prio=$(( ${v%%.*} * 10 + $(cut -d. -f2 <<<"$v") ))
      put "$root" "$stack/bin/nvcc" "/usr/local/cuda-$minor/bin/nvcc" 0755 "MINOR=$minor" "FULL=$v"
      printf '{\n   "cuda" : {\n      "name" : "CUDA SDK",\n      "version" : "%s"\n   }\n}\n' "$v" >"$root/usr/local/cuda-$minor/version.json"
      mkdir -p "$root/usr/local/cuda-$minor/include"
      printf '/* gpufleet test double */\n#define CUDART_VERSION %d\n' "$(( ${minor%%.*} * 1000 + ${minor#*.} * 10 ))" \
        >"$root/usr/local/cuda-$minor/include/cuda_runtime_api.h"
      # As cuda-toolkit-config-common does: register /usr/local/cuda with the alternatives system
      # (RHEL's alternatives answers to update-alternatives too).
      post="update-alternatives --install /usr/local/cuda cuda /usr/local/cuda-$minor $prio"
      preun="[ \"\$1\" -ge 1 ] || update-alternatives --remove cuda /usr/local/cuda-$minor" ;;
    nccl_lib)
      IFS=. read -r major minor patch <<<"$v"
      mkdir -p "$root/usr/lib64"
      cc -shared -fPIC -Wl,-soname,libnccl.so.2 -DNCCL_STUB_CODE=$(( major * 10000 + minor * 100 + patch )) \
        -o "$root/usr/lib64/libnccl.so.$v" "$stack/nccl-stub.c"
      ln -s "libnccl.so.$v" "$root/usr/lib64/libnccl.so.2" ;;
    nccl_dev)
      IFS=. read -r major minor patch <<<"$v"
      mkdir -p "$root/usr/include" "$root/usr/lib64"
      ln -s libnccl.so.2 "$root/usr/lib64/libnccl.so"
      cat >"$root/usr/include/nccl.h" <<H
/* gpufleet test double of NCCL's nccl.h: the version macros and what the probe needs. */
#ifndef NCCL_H_
#define NCCL_H_
#define NCCL_MAJOR $major
#define NCCL_MINOR $minor
#define NCCL_PATCH $patch
#define NCCL_SUFFIX ""
#define NCCL_VERSION_CODE $(( major * 10000 + minor * 100 + patch ))
#define NCCL_VERSION(X,Y,Z) (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))
typedef enum { ncclSuccess = 0 } ncclResult_t;
ncclResult_t ncclGetVersion(int *version);
#endif
H
      requires="${evr_of[nccl_lib:$evr]} = $evr" ;;
    dcgm_core)
      put "$root" "$stack/bin/nv-hostengine" /usr/bin/nv-hostengine 0755 "VERSION=$v" "PKG=$name"
      put "$root" "$here/bin/dcgmi" /usr/bin/dcgmi 0755 "VERSION=$v"
      helper "$root" "$name"
      put "$root" "$stack/units/nvidia-dcgm.service" /usr/lib/systemd/system/nvidia-dcgm.service 0644 ;;
    dcgm_cuda)
      requires="${evr_of[dcgm_core:$evr]} = $evr" ;;
    *) echo "build-rpm-repo.sh: unknown stand-in kind $kind" >&2; exit 1 ;;
  esac
  evr_of[$kind:$evr]=$name
  rpm_pkg "$name" "$evr" "$arch" "$root" "$requires" "$conflicts" "$post" "$preun"
  if [ "$streams" != - ]; then
    open=${streams%%,*} dkms=${streams#*,}
    epoch=${evr%%:*}; [ "$epoch" != "$evr" ] || epoch=0
    nevra="$name-$epoch:${evr#*:}.$arch"
    [ "$kind" = kmod_proprietary ] || stream_rpms[$open]+="    - $nevra"$'\n'
    [ "$kind" = kmod_open ] || stream_rpms[$dkms]+="    - $nevra"$'\n'
  fi
done <<<"$table"

# The driver's module streams (modulemd v2, as NVIDIA's rhel9 repository carries them: one stream per
# branch and flavour, whose packages dnf shows only once the stream is enabled).
{
  for stream in $(printf '%s\n' "${!stream_rpms[@]}" | sort); do
    cat <<M
---
document: modulemd
version: 2
data:
  name: nvidia-driver
  stream: "$stream"
  version: 1
  context: gpufleet
  arch: x86_64
  summary: NVIDIA driver for the $stream stream (gpufleet test double)
  description: Stand-in of NVIDIA's nvidia-driver module stream for the gpufleet test bed.
  license:
    module: [Apache-2.0]
  dependencies:
  - requires:
      platform: [el9]
  artifacts:
    rpms:
${stream_rpms[$stream]}...
M
  done
} >"$work/modules.yaml"
if [ ! -f "$gnupg/pubring.kbx" ]; then
  mkdir -p "$gnupg" && chmod 700 "$gnupg"
  gpg --homedir "$gnupg" --batch --passphrase '' --quick-gen-key 'gpufleet test doubles <noreply@gpufleet.invalid>' ed25519 sign never 2>/dev/null
fi
gpg --homedir "$gnupg" --batch --armor --export >"$out/gpufleet-doubles.asc"
rpmsign --addsign --define "__gpg $(command -v gpg)" --define "_gpg_path $gnupg" --define '_gpg_name gpufleet test doubles' "$repo"/*.rpm >"$work/sign.log" 2>&1 \
  || { cat "$work/sign.log" >&2; exit 1; }
createrepo_c -q --general-compress-type=gz "$repo"
modifyrepo_c --compress-type=gz --mdtype=modules "$work/modules.yaml" "$repo/repodata" >/dev/null
chmod -R a+rX "$out/cuda"
echo "$stamp" >"$repo/.stamp"
echo "doubles RPM repo built in $repo ($(find "$repo" -name '*.rpm' | wc -l) packages)"
