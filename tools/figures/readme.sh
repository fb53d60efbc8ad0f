#!/usr/bin/env bash
# Regenerates the measured figures of README.md from a build, in place, each between its markers
# `<!-- figure: NAME -->` and `<!-- /figure -->`:
#   default-run  the report of `stepsim run configs/scenarios/default.json`
#   accuracy     `stepsim accuracy --markdown` over configs/validation/
#   bench        `stepsim_bench --markdown` (minutes; only with --bench)
# Usage: tools/figures/readme.sh [BUILD_DIR] [--bench]   (`make figures`, `make figures BENCH=1`)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build/release
bench=false
for arg in "$@"; do
  case "$arg" in
    --bench) bench=true ;;
    *) build="$arg" ;;
  esac
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

{ echo '```'; "$build/stepsim" run configs/scenarios/default.json; echo '```'; } > "$out/default-run"
"$build/stepsim" accuracy --quiet --markdown "$out/accuracy"
if $bench; then "$build/stepsim_bench" --markdown "$out/bench" > /dev/null; fi

# Replaces what stands between the markers of figure $1 with the file $2.
replace() {
  awk -v name="$1" -v file="$2" '
    $0 == "<!-- figure: " name " -->" { print; while ((getline line < file) > 0) print line; skip = 1; found = 1; next }
    skip && $0 == "<!-- /figure -->" { skip = 0 }
    !skip { print }
    END { if (!found) { print "README.md has no figure " name > "/dev/stderr"; exit 2 } }
  ' README.md > "$out/README.md"
  mv "$out/README.md" README.md
}
replace default-run "$out/default-run"
replace accuracy "$out/accuracy"
if $bench; then replace bench "$out/bench"; fi
echo "README.md: figures regenerated from $build"
