#!/usr/bin/env bash
# Regenerates the pictures in this folder with the stepsim built in build/release (`make`).
#   tools/pictures/render.sh              rewrites pipeline_1f1b.svg
#   tools/pictures/render.sh --png DIR    also screenshots each SVG to DIR/*.png with headless
#                                         Chromium (installed with apt-get if missing; not a build
#                                         dependency)
set -euo pipefail
cd "$(dirname "$0")/../.."
stepsim=${STEPSIM:-build/release/stepsim}

# GPT-3 6.7B (Brown et al. 2020, table 2.1) on 4 DGX A100 nodes: tensor 2 × pipeline 4 × data 4,
# 8 micro-batches per replica, no recompute — small enough to read every micro-batch of 1F1B.
"$stepsim" run configs/scenarios/default.json -q --svg tools/pictures/pipeline_1f1b.svg \
  --set name=gpt3-6.7b-a100-32 --set model.num_layers=32 --set model.hidden_size=4096 \
  --set model.num_attention_heads=32 --set model.ffn_hidden_size=16384 \
  --set parallelism.tensor=2 --set parallelism.pipeline=4 --set parallelism.data=4 \
  --set training.global_batch_size=32 --set training.recompute=none --set platform.node_groups.0.count=4

if [ "${1:-}" = "--png" ]; then
  out=${2:?usage: render.sh --png DIR}
  mkdir -p "$out"
  if ! command -v chromium >/dev/null; then
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get install -y -qq --no-install-recommends chromium
  fi
  for svg in tools/pictures/*.svg; do
    png="$out/$(basename "${svg%.svg}").png"
    chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --screenshot="$png" \
      --window-size=1600,420 "file://$PWD/$svg" 2>/dev/null
    echo "wrote $png"
  done
fi
