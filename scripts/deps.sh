#!/usr/bin/env bash
# Installs the Debian packages nibble's build and tests need, and nothing
# else. Idempotent: packages already present are left alone.
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config   # toolchain
  clang libclang-rt-14-dev           # libFuzzer target (tests/fuzz)
  libcmocka-dev                      # unit tests
  libpcre2-dev                       # byte-level BPE pre-tokenizer regexes
  libjansson-dev                     # JSON: config.json, tokenizer.json, references, HTTP bodies
  libmicrohttpd-dev                  # HTTP server (nibble serve)
  libcurl4-openssl-dev               # load generator client (nibble bench)
  gnuplot-nox                        # nibble bench serve/compare plots (PNG, SVG); skipped with a note when absent
  curl python3                       # integration-test clients
  jq                                 # golden / gate tests and make demo read JSON summaries
  haproxy                            # deploy/: the fleet's balancer (tests/integration/fleet_*.sh; skipped when absent)
  prometheus                         # promtool checks deploy/prometheus/alerts.yml (tests/integration/deploy_configs.sh)
)
# Node.js + npm run the official `openai` npm client in the server tests
# (tests/integration/serve_openai.sh). NodeSource's nodejs package already
# contains npm and conflicts with Debian's `npm`, so Debian's nodejs + npm are
# only added when no npm is on the PATH.
if ! command -v npm >/dev/null 2>&1; then
  PKGS+=(nodejs npm)
fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#PKGS[@]} packages present"
  exit 0
fi

echo "deps: installing: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "deps: need root to install ${missing[*]} (run as root or install them yourself)" >&2
    exit 1
  fi
else
  SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get update -qq; then
  echo "deps: apt-get update failed; cannot install ${missing[*]}" >&2
  exit 1
fi
if ! $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
  echo "deps: apt-get install failed for: ${missing[*]}" >&2
  exit 1
fi
echo "deps: done"
