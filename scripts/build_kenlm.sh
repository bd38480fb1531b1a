#!/usr/bin/env bash
# Build KenLM's command-line tools (lmplz, build_binary, query) from the kenlm
# source distribution on PyPI and install them into a bin directory.
#
# Usage: scripts/build_kenlm.sh [BIN_DIR]      (default: .venv/bin)
#
# Steps, each skipped when already done (the script is idempotent):
#   1. check the Debian build dependencies; install the missing ones with apt
#      when running as root, otherwise name them and exit with status 2;
#   2. download kenlm-$KENLM_VERSION.tar.gz from PyPI (no pip, no metadata
#      build), check its sha256 against the pin below and PyPI's JSON, and
#      cache it under build/;
#   3. unpack it under build/ and make Boost.Test optional in its CMakeLists
#      (upstream requires unit_test_framework even with COMPILE_TESTS=OFF);
#   4. configure (Release) and build only the targets lmplz build_binary query;
#   5. smoke-test the three programs on a tiny corpus;
#   6. install each into BIN_DIR through a temporary file and a rename, so a
#      binary there is always either the old one or the complete new one.
#
# Environment: KENLM_MAX_ORDER (default 6), KENLM_JOBS (default: nproc),
# PYTHON (interpreter used for the download; default: BIN_DIR/python or python3).
set -Eeuo pipefail

KENLM_VERSION=0.3.0
KENLM_SHA256=c4628bb9fb63c8a6f9240035b8b037385cfc404cb72e933cf48878291edac1e8
MAX_ORDER=${KENLM_MAX_ORDER:-6}
JOBS=${KENLM_JOBS:-$(nproc 2>/dev/null || echo 2)}
TARGETS=(lmplz build_binary query)
APT_PACKAGES=(libboost-program-options-dev libboost-system-dev libboost-thread-dev
              zlib1g-dev libbz2-dev liblzma-dev)

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_ROOT=$ROOT/build
SDIST=$BUILD_ROOT/kenlm-$KENLM_VERSION.tar.gz
SRC=$BUILD_ROOT/kenlm-$KENLM_VERSION
BUILD_DIR=$BUILD_ROOT/kenlm-$KENLM_VERSION-build-o$MAX_ORDER

log() { printf '[build_kenlm] %s\n' "$*"; }
die() { printf '[build_kenlm] ERROR: %s\n' "$*" >&2; exit 1; }
trap 'die "command failed (exit $?) at line $LINENO: $BASH_COMMAND"' ERR

TMP_PATHS=()
cleanup() { [ ${#TMP_PATHS[@]} -eq 0 ] || rm -rf -- "${TMP_PATHS[@]}"; }
trap cleanup EXIT

[ $# -le 1 ] || die "usage: $0 [BIN_DIR]"
case $MAX_ORDER in ''|*[!0-9]*) die "KENLM_MAX_ORDER must be a positive integer, got '$MAX_ORDER'";; esac
[ "$MAX_ORDER" -ge 2 ] || die "KENLM_MAX_ORDER must be at least 2, got $MAX_ORDER"
case $JOBS in ''|*[!0-9]*|0) die "KENLM_JOBS must be a positive integer, got '$JOBS'";; esac

BIN_DIR=${1:-.venv/bin}
[ -d "$BIN_DIR" ] || die "bin directory '$BIN_DIR' does not exist (create the virtual environment first, e.g. 'make install')"
BIN_DIR=$(cd "$BIN_DIR" && pwd)
[ -w "$BIN_DIR" ] || die "bin directory '$BIN_DIR' is not writable"

START=$SECONDS
log "kenlm $KENLM_VERSION (max order $MAX_ORDER) -> $BIN_DIR"

# --- 1. build dependencies ----------------------------------------------------
missing=()
if command -v dpkg-query >/dev/null 2>&1; then
    for pkg in "${APT_PACKAGES[@]}"; do
        status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
        [ "$status" = "install ok installed" ] || missing+=("$pkg")
    done
    command -v cmake >/dev/null 2>&1 || missing+=(cmake)
    command -v g++ >/dev/null 2>&1 || missing+=(g++)
    command -v make >/dev/null 2>&1 || command -v ninja >/dev/null 2>&1 || missing+=(make)
else
    log "not a Debian system: make sure cmake, a C++ compiler, Boost (program_options, system, thread), zlib, bzip2 and liblzma development files are installed"
fi
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        {
            echo "[build_kenlm] ERROR: missing Debian packages needed to build KenLM: ${missing[*]}"
            echo "[build_kenlm] install them as root, then run this again:"
            echo "    sudo apt-get install -y --no-install-recommends ${missing[*]}"
        } >&2
        exit 2
    fi
    log "installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y --no-install-recommends "${missing[@]}"; then
        log "apt-get install failed; refreshing the package lists and trying again"
        apt-get update || die "apt-get update failed"
        apt-get install -y --no-install-recommends "${missing[@]}" \
            || die "could not install: ${missing[*]}"
    fi
else
    log "build dependencies present"
fi

mkdir -p "$BUILD_ROOT"
if command -v flock >/dev/null 2>&1; then
    exec 9>"$BUILD_ROOT/.kenlm.lock"
    flock 9 || die "could not lock $BUILD_ROOT/.kenlm.lock"
fi

# --- 2. source distribution -----------------------------------------------------
sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

if [ -f "$SDIST" ] && [ "$(sha256_of "$SDIST")" = "$KENLM_SHA256" ]; then
    log "using cached $(basename "$SDIST")"
else
    rm -f -- "$SDIST"
    PY=${PYTHON:-}
    if [ -z "$PY" ]; then
        if [ -x "$BIN_DIR/python" ]; then PY=$BIN_DIR/python; else PY=python3; fi
    fi
    command -v "$PY" >/dev/null 2>&1 || die "no Python interpreter '$PY' to download the sdist with"
    log "downloading kenlm-$KENLM_VERSION.tar.gz from PyPI"
    TMP_PATHS+=("$SDIST.part")
    "$PY" - "$KENLM_VERSION" "$KENLM_SHA256" "$SDIST.part" <<'PYEOF' || die "download of the kenlm sdist failed"
import hashlib, json, sys, urllib.request

version, pinned, out = sys.argv[1:4]

def fetch_json(url):
    with urllib.request.urlopen(url, timeout=60) as r:
        return json.load(r)

# The per-version endpoint is the natural one; the project endpoint lists
# every release and serves when the former is unavailable.
files = None
for url in (f"https://pypi.org/pypi/kenlm/{version}/json", "https://pypi.org/pypi/kenlm/json"):
    try:
        data = fetch_json(url)
    except Exception as exc:  # noqa: BLE001 - report and try the next endpoint
        print(f"[build_kenlm]   {url}: {exc}; trying the next endpoint", file=sys.stderr)
        continue
    files = data["urls"] if "/" + version + "/" in url else data.get("releases", {}).get(version)
    if files:
        break
if not files:
    sys.exit(f"kenlm {version} not found on PyPI")
sdists = [f for f in files if f.get("packagetype") == "sdist"]
if not sdists:
    sys.exit(f"kenlm {version} has no sdist on PyPI")
sdist = sdists[0]
listed = sdist["digests"]["sha256"]
if listed != pinned:
    sys.exit(f"PyPI lists sha256 {listed} for {sdist['filename']}, expected {pinned}")
h = hashlib.sha256()
with urllib.request.urlopen(sdist["url"], timeout=120) as r, open(out, "wb") as f:
    while True:
        chunk = r.read(1 << 16)
        if not chunk:
            break
        h.update(chunk)
        f.write(chunk)
if h.hexdigest() != pinned:
    sys.exit(f"sha256 mismatch for {sdist['url']}: got {h.hexdigest()}, expected {pinned}")
print(f"[build_kenlm]   {sdist['url']} ({sdist['size']} bytes, sha256 ok)")
PYEOF
    mv -f -- "$SDIST.part" "$SDIST"
fi

# --- 3. unpack and patch ----------------------------------------------------------
MARK=$SRC/.fsmlearn-unpacked
if [ -f "$MARK" ] && [ "$(cat "$MARK")" = "$KENLM_SHA256" ]; then
    log "using unpacked sources in ${SRC#"$ROOT"/}"
else
    log "unpacking into ${SRC#"$ROOT"/}"
    rm -rf -- "$SRC" "$BUILD_DIR"
    UNPACK=$(mktemp -d "$BUILD_ROOT/.unpack.XXXXXX")
    TMP_PATHS+=("$UNPACK")
    tar --no-same-owner -xzf "$SDIST" -C "$UNPACK"
    [ -f "$UNPACK/kenlm-$KENLM_VERSION/lm/builder/lmplz_main.cc" ] \
        || die "$SDIST does not hold the KenLM C++ sources"
    # Upstream asks for Boost's unit_test_framework even with COMPILE_TESTS=OFF
    # (and then links it into every program); only the tests use it.
    python3 - "$UNPACK/kenlm-$KENLM_VERSION/CMakeLists.txt" <<'PYEOF' || die "could not patch kenlm's CMakeLists.txt"
import sys
path = sys.argv[1]
text = open(path).read()
old = ("find_package(Boost 1.41.0 REQUIRED COMPONENTS\n"
       "  program_options\n  system\n  thread\n  unit_test_framework\n)\n")
new = ("set(KENLM_BOOST_COMPONENTS program_options system thread)\n"
       "if (COMPILE_TESTS)\n"
       "  list(APPEND KENLM_BOOST_COMPONENTS unit_test_framework)\n"
       "endif()\n"
       "find_package(Boost 1.41.0 REQUIRED COMPONENTS ${KENLM_BOOST_COMPONENTS})\n")
if text.count(old) != 1:
    sys.exit("the Boost find_package block was not found")
open(path, "w").write(text.replace(old, new))
PYEOF
    echo "$KENLM_SHA256" > "$UNPACK/kenlm-$KENLM_VERSION/.fsmlearn-unpacked"
    mv -- "$UNPACK/kenlm-$KENLM_VERSION" "$SRC"
fi

# --- 4. configure and build -----------------------------------------------------
if command -v ninja >/dev/null 2>&1; then GENERATOR=Ninja; else GENERATOR="Unix Makefiles"; fi
if [ -f "$BUILD_DIR/CMakeCache.txt" ] \
   && ! grep -qx "CMAKE_GENERATOR:INTERNAL=$GENERATOR" "$BUILD_DIR/CMakeCache.txt"; then
    rm -rf -- "$BUILD_DIR"
fi
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
    log "configuring (Release, KENLM_MAX_ORDER=$MAX_ORDER, $GENERATOR)"
    mkdir -p "$BUILD_DIR"
    if ! cmake -S "$SRC" -B "$BUILD_DIR" -G "$GENERATOR" \
            -DCMAKE_BUILD_TYPE=Release \
            -DKENLM_MAX_ORDER="$MAX_ORDER" \
            -DCOMPILE_TESTS=OFF -DENABLE_PYTHON=OFF -DFORCE_STATIC=OFF \
            -DCMAKE_DISABLE_FIND_PACKAGE_Eigen3=ON \
            -DCMAKE_CXX_FLAGS="${CXXFLAGS:-} -Wno-deprecated-declarations" \
            >"$BUILD_DIR/configure.log" 2>&1; then
        tail -n 40 "$BUILD_DIR/configure.log" >&2
        rm -f -- "$BUILD_DIR/CMakeCache.txt"
        die "cmake configure failed (full log: $BUILD_DIR/configure.log)"
    fi
fi
log "building ${TARGETS[*]} with $JOBS jobs"
cmake --build "$BUILD_DIR" --target "${TARGETS[@]}" -j "$JOBS" \
    || die "building ${TARGETS[*]} failed (build directory: $BUILD_DIR)"
for t in "${TARGETS[@]}"; do
    [ -x "$BUILD_DIR/bin/$t" ] || die "the build did not produce $BUILD_DIR/bin/$t"
done

# --- 5. smoke test ----------------------------------------------------------------
SMOKE=$(mktemp -d "$BUILD_ROOT/.smoke.XXXXXX")
TMP_PATHS+=("$SMOKE")
for i in 1 2 3 4 5 6 7 8; do
    echo "the cat sat on the mat"; echo "the dog sat on the log"; echo "a cat and a dog $i"
done > "$SMOKE/corpus.txt"
"$BUILD_DIR/bin/lmplz" -o 3 -S 64M -T "$SMOKE/" --discount_fallback \
    < "$SMOKE/corpus.txt" > "$SMOKE/lm.arpa" 2> "$SMOKE/lmplz.log" \
    || { tail -n 20 "$SMOKE/lmplz.log" >&2; die "smoke test: lmplz failed"; }
"$BUILD_DIR/bin/build_binary" "$SMOKE/lm.arpa" "$SMOKE/lm.bin" > "$SMOKE/bb.log" 2>&1 \
    || { tail -n 20 "$SMOKE/bb.log" >&2; die "smoke test: build_binary failed"; }
echo "the cat sat on the log" | "$BUILD_DIR/bin/query" "$SMOKE/lm.bin" > "$SMOKE/query.out" 2>&1 \
    || { tail -n 20 "$SMOKE/query.out" >&2; die "smoke test: query failed"; }
grep -q "Total:" "$SMOKE/query.out" || die "smoke test: query printed no score"
log "smoke test passed (lmplz -> build_binary -> query)"

# --- 6. install ---------------------------------------------------------------------
for t in "${TARGETS[@]}"; do
    dest=$BIN_DIR/$t
    if [ -f "$dest" ] && cmp -s "$BUILD_DIR/bin/$t" "$dest"; then
        log "$dest is up to date"
        continue
    fi
    tmp=$BIN_DIR/.$t.tmp.$$
    TMP_PATHS+=("$tmp")
    cp -- "$BUILD_DIR/bin/$t" "$tmp"
    chmod 755 -- "$tmp"
    mv -f -- "$tmp" "$dest"
    log "installed $dest"
done
log "done in $((SECONDS - START)) s"
