#!/usr/bin/env bash
# Installs, with apt-get, the Debian packages stepsim builds with, skipping those already there.
# Nothing is downloaded at build time.
set -euo pipefail
packages=(build-essential cmake pkg-config libsimgrid-dev libboost-graph-dev nlohmann-json3-dev libfmt-dev
          catch2 libcli11-dev
          libprotobuf-dev protobuf-compiler # Chakra execution traces (workloads/traces)
          python3-dev pybind11-dev python3-pandas # the Python module (tools/python)
          "$@") # extra packages a target needs (e.g. `make fuzz`: clang)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
