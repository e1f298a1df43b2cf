#!/usr/bin/env bash
# Builds sluice and sluice-worker for each platform the image holds, into
# OUT/<os>_<arch>/, for `make image` (docs/deploy.md, "The image"):
#
#   deploy/image/build.sh OUT PLATFORM...      e.g. bin/image linux/amd64 linux/arm64
#
# Both binaries link pg_query_go, a cgo package, so every platform needs a C
# compiler and a static C library for it: the host's gcc for the build host's
# platform, Debian's cross toolchain (gcc-aarch64-linux-gnu and
# libc6-dev-arm64-cross for linux/arm64, gcc-x86-64-linux-gnu and
# libc6-dev-amd64-cross for linux/amd64 on an arm64 host) for the others,
# installed here with apt-get when missing (idempotent: nothing is installed
# twice). One go build per platform builds both binaries, so they record the
# same commit. $GO names the go command (default go).
set -euo pipefail

GO=${GO:-go}
FLAGS=(-buildvcs=true -tags netgo,osusergo,timetzdata
	-ldflags '-s -w -linkmode external -extldflags "-static"')

log() { printf 'image build: %s\n' "$*"; }
die() {
	printf 'image build: error: %s\n' "$*" >&2
	exit 1
}

(($# >= 2)) || die "usage: $0 OUT PLATFORM..."
out=$1
shift

host_os=$("$GO" env GOHOSTOS)
host_arch=$("$GO" env GOHOSTARCH)

# gnu_triple GOARCH: the GNU target triple of Debian's cross toolchain.
gnu_triple() {
	case $1 in
	amd64) echo x86_64-linux-gnu ;;
	arm64) echo aarch64-linux-gnu ;;
	*) return 1 ;;
	esac
}

# apt_install PACKAGE...: installs Debian packages, as root or through sudo,
# refreshing the package lists only when the first attempt fails.
apt_install() {
	local sudo=()
	if ((EUID != 0)); then
		command -v sudo >/dev/null && sudo -n true 2>/dev/null ||
			die "need $* installed (apt-get install $*), and this is not root and has no password-less sudo"
		sudo=(sudo -n)
	fi
	export DEBIAN_FRONTEND=noninteractive
	"${sudo[@]}" apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1 ||
		{ "${sudo[@]}" apt-get update -qq && "${sudo[@]}" apt-get install -y -qq --no-install-recommends "$@" >/dev/null; } ||
		die "apt-get install $* failed"
}

# c_compiler OS ARCH: prints the C compiler for the platform, installing the
# cross toolchain when it is missing.
c_compiler() {
	local triple
	if [[ $1 == "$host_os" && $2 == "$host_arch" ]]; then
		echo "${CC:-gcc}"
		return
	fi
	[[ $1 == linux ]] || die "$1/$2: only linux platforms are built"
	triple=$(gnu_triple "$2") || die "$1/$2: no Debian cross toolchain known for $2 (known: amd64, arm64)"
	# libc.a: the static C library -extldflags -static links.
	if ! command -v "$triple-gcc" >/dev/null || [[ ! -e /usr/$triple/lib/libc.a ]]; then
		log "$1/$2: installing Debian's cross toolchain gcc-${triple//_/-} libc6-dev-$2-cross" >&2
		apt_install "gcc-${triple//_/-}" "libc6-dev-$2-cross"
	fi
	echo "$triple-gcc"
}

rm -rf "$out"
for platform in "$@"; do
	os=${platform%%/*}
	rest=${platform#*/}
	arch=${rest%%/*}
	[[ -n $os && -n $arch && $platform == */* ]] || die "platform $platform: want os/arch"
	cc=$(c_compiler "$os" "$arch")
	dir=$out/${os}_$arch
	mkdir -p "$dir"
	log "$os/$arch with CC=$cc"
	CGO_ENABLED=1 GOOS=$os GOARCH=$arch CC=$cc "$GO" build "${FLAGS[@]}" -o "$dir/" ./starter ./worker
	mv "$dir/starter" "$dir/sluice"
	mv "$dir/worker" "$dir/sluice-worker"
done
