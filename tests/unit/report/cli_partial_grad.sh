#!/bin/sh
# cli_partial_grad.sh — `tpx plan` notes `partial-grad-replicated` for
# Qwen3's unstyled per-head q_norm / k_norm at tp > 1 in one info line with
# the qwen plugin's plan (its strategy sums them), warns with the same plan
# given as a custom one (text and JSON, the
# JSON still valid to tests/robustness/check_report.py), not at tp 1 and
# not for Llama; and not when a tpx-plan/1 plan styles the norms
# replicated_with_grad_allreduce as NeMo Automodel 0.7.0's Qwen plan does
# (the style is then reported). Usage: cli_partial_grad.sh TPX_BINARY
# SOURCE_DIR
set -u
tpx=$1
src=$2
cfg="$src/tests/data/configs"
out=$(mktemp "${TMPDIR:-/tmp}/tpx-cli.XXXXXX")
trap 'rm -f "$out"' EXIT INT TERM
. "$(dirname "$0")/cli_lib.sh"

# The qwen plugin's own plan: its strategy sums them upstream (trait
# tp_grad_sync), so one info line and no warning (issue 28 D17).
expect 0 "qwen3 tp2 text" -- --config "$cfg/Qwen3-0.6B/config.json" --tp 2
has "info [partial-grad-replicated] q_norm, k_norm (56 modules): replicated over tp with partial gradients, summed over tp by this plan's strategy as upstream does" "one info line"
lacks "warning [partial-grad-replicated]" "no warning for the golden plan"
has "Verdict: OK" "OK"
lacks "Verdict: OK (with warnings)" "without (with warnings)"
has "its strategy sums over tp the partial gradients of replicated parameters (trait tp_grad_sync)" "the trace says why"
expect 0 "qwen3 tp4 sp (the Quick start)" -- --config "$cfg/Qwen3-0.6B/config.json" --tp 4 --sp
lacks "with warnings" "the Quick start reads OK"

expect 0 "qwen3 tp2 dp2 json" -- --config "$cfg/Qwen3-0.6B/config.json" \
  --tp 2 --dp-shard 2 --format json
has '"code": "partial-grad-replicated"' "json code"
has '"subject": "model.layers.*.self_attn.q_norm"' "json subject"
n=$((n + 1))
if python3 "$src/tests/robustness/check_report.py" "$out" --tp 2 \
    --dp-shard 2 >"$out.chk" 2>&1; then
  echo "ok: check_report.py accepts the report"
else
  echo "FAIL: check_report.py:"; head "$out.chk"; fails=$((fails + 1))
fi
rm -f "$out.chk"

expect 0 "qwen3 tp1" -- --config "$cfg/Qwen3-0.6B/config.json" --tp 1
lacks "partial-grad-replicated" "nothing partial at tp 1"
expect 0 "llama tp2" -- --config "$cfg/Llama-3.2-1B/config.json" --tp 2
lacks "partial-grad-replicated" "no q/k norms in Llama"
# Issue 18 item 12: the optional fused keys fold into one info line.
has "info [unmatched-key] 2 optional keys for other checkpoint variants (e.g. fused projections) matched nothing, as expected: 'model.layers.*.self_attn.qkv_proj', 'model.layers.*.mlp.gate_up_proj'" "optional keys folded"
lacks "plan key 'model.layers.*.self_attn.qkv_proj' matches no module" "no line per optional key"

# The same plan given as a custom plan: nothing says it is summed, so
# the warnings stand.
plan07="$out.plan.json"
"$tpx" plan --config "$cfg/Qwen3-0.6B/config.json" --tp 2 --format json \
  >"$out.sel.json" 2>/dev/null
python3 - "$out.sel.json" "$plan07" <<'PY'
import json, sys
json.dump(json.load(open(sys.argv[1]))["plan"], open(sys.argv[2], "w"))
PY
expect 0 "qwen3 tp2, the plugin's plan as a custom plan" -- \
  --config "$cfg/Qwen3-0.6B/config.json" --tp 2 --plan "$plan07"
has "warning [partial-grad-replicated] 'model.layers.*.self_attn.q_norm' (28 modules)" "q_norm warned"
has "warning [partial-grad-replicated] 'model.layers.*.self_attn.k_norm' (28 modules)" "k_norm warned"
has "tpx_tp_param_grad_needs_allreduce" "the fix names the runtime rule"
has "Verdict: OK (with warnings)" "a warning, not an error"
has "Result: OK" "Result OK"

# A 0.7.0-style plan: the selected plan plus the two norms styled.
python3 - "$out.sel.json" "$plan07" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))["plan"]
for n in ("q_norm", "k_norm"):
    plan["entries"].append({"module": "model.layers.*.self_attn." + n,
                            "style": "replicated_with_grad_allreduce"})
json.dump(plan, open(sys.argv[2], "w"))
PY
expect 0 "qwen3 tp2, q/k norms replicated_with_grad_allreduce" -- \
  --config "$cfg/Qwen3-0.6B/config.json" --tp 2 --plan "$plan07"
lacks "partial-grad-replicated" "a styled norm is not warned about"
has "replicated_with_grad_allreduce" "the style is reported"
has "Result: OK" "the plan is OK"
rm -f "$plan07" "$out.sel.json"

echo "$n checks, $fails failed"
[ "$fails" -eq 0 ]
