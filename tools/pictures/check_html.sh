#!/bin/sh
# Renders stepsim's HTML pages (run --html, sweep --html) in headless Chromium and fails when one
# would fetch anything, logs anything to the console (its own scripts log nothing, so any line is
# an error or an uncaught exception), or did not finish rendering (its script marks
# <body data-rendered="ok"> as its last act).
#
#   tools/pictures/check_html.sh [--screenshot PNG] [--size W,H] [--scale F] PAGE.html [PAGE.html ...]
#
# --screenshot saves a picture of the (single) page: a window of W×H CSS pixels (default
# 1280,2000), scaled by F (default 1) to keep the file small. The README's pictures:
#   build/release/stepsim run configs/scenarios/gpt-1.3b-gpipe-16.json -q --html run.html
#   tools/pictures/check_html.sh --screenshot tools/pictures/html_run_report.png --size 1280,2290 --scale 0.9 run.html
#   build/release/stepsim sweep tests/html/small_sweep.json -q -o sweep --html sweep.html
#   tools/pictures/check_html.sh --screenshot tools/pictures/html_sweep_report.png --size 1280,1500 --scale 0.9 sweep.html
# Exits 77 when no Chromium is installed, so that ctest (SKIP_RETURN_CODE 77) shows the test as
# skipped rather than passed.
set -u

screenshot=""
size="1280,2000"
scale="1"
while [ $# -gt 0 ]; do
  case "$1" in
  --screenshot) screenshot="$2"; shift 2 ;;
  --size) size="$2"; shift 2 ;;
  --scale) scale="$2"; shift 2 ;;
  *) break ;;
  esac
done
if [ $# -eq 0 ]; then
  echo "usage: $0 [--screenshot PNG] [--size W,H] [--scale F] PAGE.html ..." >&2
  exit 2
fi

browser=""
for name in chromium chromium-browser google-chrome-stable google-chrome; do
  if command -v "$name" >/dev/null 2>&1; then
    browser=$(command -v "$name")
    break
  fi
done
if [ -z "$browser" ]; then
  echo "check_html: no Chromium found (apt-get install chromium); skipped" >&2
  exit 77
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Every host name resolves to nothing: a fetch the static check missed still cannot leave.
run_browser() {
  timeout 120 "$browser" --headless=new --no-sandbox --disable-gpu --no-first-run --no-default-browser-check \
    --disable-extensions --disable-background-networking --host-resolver-rules="MAP * ~NOTFOUND" \
    --user-data-dir="$work/profile" --enable-logging=stderr --v=0 --virtual-time-budget=5000 "$@"
}

failed=0
for page in "$@"; do
  bad=0
  if [ ! -s "$page" ]; then
    echo "FAIL $page: missing or empty" >&2
    failed=1
    continue
  fi
  url="file://$(cd "$(dirname "$page")" && pwd)/$(basename "$page")"

  # Static: no address a browser would fetch (SVG's xmlns is a name, not a fetch).
  if grep -n -i -E "(src|href|srcset|action|poster)[[:space:]]*=[[:space:]]*[\"']?[[:space:]]*(https?:|//|ftp:)|url\([[:space:]]*[\"']?[[:space:]]*(https?:|//)|@import|<link[[:space:]>]|<iframe|fetch[[:space:]]*\(|XMLHttpRequest" \
    "$page" >"$work/refs"; then
    echo "FAIL $page: external references:" >&2
    cut -c1-200 "$work/refs" >&2
    bad=1
  fi

  run_browser --dump-dom "$url" >"$work/dom.html" 2>"$work/log.txt"
  status=$?
  if [ $status -ne 0 ]; then
    echo "FAIL $page: chromium exited with $status" >&2
    tail -5 "$work/log.txt" >&2
    failed=1
    continue
  fi
  # Console messages are logged as INFO:CONSOLE whatever their level; the pages log none.
  if grep -E ":CONSOLE[:(]|Uncaught" "$work/log.txt" >"$work/console"; then
    echo "FAIL $page: console output:" >&2
    cat "$work/console" >&2
    bad=1
  fi
  if ! grep -q 'data-rendered="ok"' "$work/dom.html"; then
    echo "FAIL $page: the page's script did not finish (no data-rendered=\"ok\" in the DOM)" >&2
    bad=1
  fi
  if [ $bad -eq 0 ]; then
    echo "ok   $page: rendered in $(basename "$browser"), no console output, no external reference"
  fi

  if [ -n "$screenshot" ]; then
    run_browser --hide-scrollbars --window-size="$size" --force-device-scale-factor="$scale" \
      --screenshot="$(realpath -m "$screenshot")" "$url" >/dev/null 2>"$work/shot.txt" || { echo "FAIL $page: screenshot" >&2; bad=1; }
    [ -s "$screenshot" ] && echo "     screenshot $screenshot"
  fi
  [ $bad -eq 0 ] || failed=1
done
exit $failed
