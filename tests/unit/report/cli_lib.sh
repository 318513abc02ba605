# cli_lib.sh — helpers shared by the `tpx plan` end-to-end scripts
# (cli_plan.sh, cli_memory.sh, cli_cp.sh, cli_partial_grad.sh, cli_truth.sh),
# sourced after they set `tpx` and `out`.
# Each check counts in `n` and failures in `fails`.
fails=0
n=0

# expect CODE DESCRIPTION -- ARGS...: run tpx plan ARGS, check the exit code
expect() {
  want=$1
  what=$2
  shift 3
  n=$((n + 1))
  "$tpx" plan "$@" >"$out" 2>&1
  got=$?
  if [ "$got" -ne "$want" ]; then
    echo "FAIL: $what: exit $got, want $want"
    sed 's/^/    /' "$out" | head -20
    fails=$((fails + 1))
  else
    echo "ok: $what"
  fi
}

# has TEXT DESCRIPTION: the last output contains TEXT
has() {
  n=$((n + 1))
  if grep -qF -- "$1" "$out"; then
    echo "ok: $2"
  else
    echo "FAIL: $2: output lacks '$1'"
    fails=$((fails + 1))
  fi
}

# lacks TEXT DESCRIPTION: the last output does not contain TEXT
lacks() {
  n=$((n + 1))
  if grep -qF -- "$1" "$out"; then
    echo "FAIL: $2: output has '$1'"
    fails=$((fails + 1))
  else
    echo "ok: $2"
  fi
}

# py DESCRIPTION CODE: run python3 CODE with the last output as JSON in `r`
py() {
  n=$((n + 1))
  if ! command -v python3 >/dev/null 2>&1; then
    echo "skip: $1 (no python3)"
    return
  fi
  if python3 -c "import json,sys; r=json.load(open(sys.argv[1])); $2" "$out"; then
    echo "ok: $1"
  else
    echo "FAIL: $1"
    fails=$((fails + 1))
  fi
}
