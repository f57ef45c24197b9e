#!/usr/bin/env bash
# Installs the system packages the build and the SDK tests need, and checks the Rust toolchain.
# Idempotent and silent when everything is already present; runs `apt-get update` only when a
# package is actually missing, and uses sudo only when not root.
set -euo pipefail

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)           # grpcio-sys builds gRPC core with CMake
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config) # finds the system OpenSSL
command -v c++ >/dev/null 2>&1 || missing+=(g++)               # gRPC core is C++
command -v make >/dev/null 2>&1 || missing+=(make)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)     # the HTTPS webhook test makes its own CA
# OpenSSL headers: ask pkg-config when it exists, else dpkg.
if command -v pkg-config >/dev/null 2>&1; then
    pkg-config --exists openssl || missing+=(libssl-dev)
elif ! dpkg-query -W -f='${Status}' libssl-dev 2>/dev/null | grep -q 'install ok installed'; then
    missing+=(libssl-dev)
fi

# python3-venv is only needed when the python3 on PATH cannot create a virtualenv by itself
# (Debian's /usr/bin/python3 without the package; pyenv/official builds carry ensurepip).
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    missing+=(python3-venv)
fi
# scripts/release --check parses dist/compose.yaml and the release workflow with PyYAML.
python3 -c 'import yaml' >/dev/null 2>&1 || missing+=(python3-yaml)
# scripts/release --check reads the container image archive with skopeo too (both formats).
if [ "$(uname -s)" = Linux ]; then
    command -v skopeo >/dev/null 2>&1 || missing+=(skopeo)
fi
# The web chat's browser test (tests/sdk/run_web_tests.py) drives Debian's headless chromium
# through chromedriver.
if [ "$(uname -s)" = Linux ]; then
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
    command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
fi
# The telegraf SDK test needs Node.js and npm.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)

if ((${#missing[@]})); then
    echo "setup: installing missing system packages: ${missing[*]}" >&2
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "setup: apt-get not found; install these packages with your package manager: ${missing[*]}" >&2
        exit 1
    fi
    sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if ! command -v sudo >/dev/null 2>&1; then
            echo "setup: not root and sudo is not available; install as root: apt-get install ${missing[*]}" >&2
            exit 1
        fi
        sudo=(sudo)
    fi
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
    echo "setup: cargo not found. Install the Rust toolchain (https://rustup.rs):" >&2
    echo "    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y" >&2
    echo "then open a new shell (or: source \"\$HOME/.cargo/env\") and re-run this script." >&2
    exit 1
fi
