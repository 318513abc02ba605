#!/bin/sh
# `tpx plan --html` pages rendered by a real browser: headless Chromium
# loads each page from disk, must log no console message (an error, a failed
# load, a CSP violation all show up there), and takes a screenshot.
# Pages at 4, 18, 8 and 64 ranks (the last two: ranks grouped on the
# dp_shard × tp grid, labelled blocks and tp bands; checked in the page text
# too). Skips (exit 77) when Chromium is not installed; CI does not install
# it.
# usage: html_chromium.sh TPX_CLI SOURCE_DIR [SCREENSHOT_OUT]
set -u
tpx=$1
src=$2
shot=${3:-}
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$browser" ]; then
  echo "SKIP: no chromium on PATH"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
n=0
for args in \
  "--config $src/tests/data/configs/Llama-3.2-1B/config.json --tp 2 --dp-shard 2" \
  "--config $src/tests/data/configs/Qwen3-0.6B/config.json --tp 4 --sp" \
  "--config $src/tests/data/configs/Llama-3.2-1B/config.json --tp 3 --dp-shard 3 --dp-replicate 2" \
  "--config $src/tests/data/configs/Llama-3.2-1B/config.json --tp 4 --dp-shard 2" \
  "--config $src/tests/data/configs/Llama-3.2-1B/config.json --tp 4 --dp-shard 16"; do
  n=$((n + 1))
  page=$tmp/page$n.html
  # shellcheck disable=SC2086
  "$tpx" plan $args --html "$page" > /dev/null
  rc=$?
  if [ $rc -gt 1 ] || [ ! -s "$page" ]; then
    echo "FAIL page $n: tpx plan $args --html exited $rc"
    status=1
    continue
  fi
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --window-size=1280,1800 --screenshot="$tmp/page$n.png" \
    --enable-logging=stderr --v=0 "file://$page" > "$tmp/log$n" 2>&1
  if grep -q ':CONSOLE' "$tmp/log$n"; then
    echo "FAIL page $n: console messages:"
    grep ':CONSOLE' "$tmp/log$n"
    status=1
  elif [ ! -s "$tmp/page$n.png" ]; then
    echo "FAIL page $n: no screenshot"
    tail -5 "$tmp/log$n"
    status=1
  elif ! grep -q 'id="fsdp"' "$page" || grep -q ',… (' "$page"; then
    echo "FAIL page $n: no FSDP units table, or memory bars without rank ranges"
    status=1
  else
    echo "PASS page $n ($args): rendered, no console messages"
  fi
done
[ -n "$shot" ] && [ -s "$tmp/page1.png" ] && cp "$tmp/page1.png" "$shot"
exit $status
