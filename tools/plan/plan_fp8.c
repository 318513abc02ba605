/* plan_fp8.c — the `fp8-checkpoint` diagnostic of `tpx plan --weights`:
 * the checkpoint stores FP8 block-quantized weights, which NeMo Automodel
 * 0.7.0 dequantizes as it loads; the model tpx_model_add_safetensors built
 * already holds them in the dtype they are trained in (tpx/model.h,
 * docs/CHECKPOINT.md "FP8 checkpoints"). This says so, with the bytes on
 * disk against the bytes trained. Not the pairing or its checks (core). */
#include <stdio.h>

#include "plan_setup.h"
#include "tpx/diag.h"
#include "tpx/model.h"

static void mib(char *buf, size_t size, int64_t bytes) {
  if (bytes >= 1 << 20)
    snprintf(buf, size, "%.1f MiB", (double)bytes / (1 << 20));
  else
    snprintf(buf, size, "%.1f KiB", (double)bytes / 1024);
}

int cli_fp8_diag(const tpx_model *model, tpx_diag_list *diags) {
  size_t n = tpx_model_num_quantized(model);
  if (n == 0)
    return 0;
  tpx_quantized_weight q0, q;
  int64_t stored = 0, scales = 0, trained = 0, blocks = 0;
  int same = 1;
  if (tpx_model_quantized(model, 0, &q0, NULL) != TPX_OK)
    return -1;
  for (size_t i = 0; i < n; i++) {
    if (tpx_model_quantized(model, i, &q, NULL) != TPX_OK)
      return -1;
    stored += q.numel * (int64_t)tpx_dtype_size(q.stored_dtype);
    scales += q.scale_numel * (int64_t)tpx_dtype_size(q.scale_dtype);
    trained += q.numel * (int64_t)tpx_dtype_size(q.train_dtype);
    blocks += q.block[0] > 0;
    same &= q.stored_dtype == q0.stored_dtype &&
            q.scale_dtype == q0.scale_dtype && q.train_dtype == q0.train_dtype;
  }
  const char *method = NULL;
  tpx_model_config_string(model, "quantization_config.quant_method", &method,
                          NULL);
  char a[32], b[32], c[32], forms[128];
  if (blocks == (int64_t)n)
    snprintf(forms, sizeof forms, "in 128 x 128 blocks");
  else if (blocks == 0)
    snprintf(forms, sizeof forms, "one scale per tensor or expert");
  else
    snprintf(forms, sizeof forms,
             "%lld in 128 x 128 blocks, %lld one per tensor or expert",
             (long long)blocks, (long long)n - (long long)blocks);
  mib(a, sizeof a, stored);
  mib(b, sizeof b, scales);
  mib(c, sizeof c, trained);
  tpx_status st = tpx_diag_add(
      diags, TPX_DIAG_WARNING, "fp8-checkpoint", q0.weight,
      "nothing to change for the plan; `tpx shard` cuts each F8 weight as "
      "stored (grouped experts too) with its scales whole in every rank "
      "file, and tpx's reader (tpx_checkpoint_read_rank, tpx-train) "
      "dequantizes a weight read into floats as upstream does, bit for "
      "bit",
      "%zu weights are stored %s with their scales ('%s' with '%s' %s; %s), "
      "as "
      "quantization_config (quant_method %s) declares: NeMo Automodel 0.7.0 "
      "dequantizes each as it loads (every block times its scale, into %s) "
      "and drops the scales, so they are planned and counted as %s "
      "parameters: %s of %s weights and %s of scales on disk, %s as trained",
      n, same ? tpx_dtype_safetensors_name(q0.stored_dtype) : "F8", q0.weight,
      q0.scale, tpx_dtype_safetensors_name(q0.scale_dtype), forms,
      method ? method : "?", tpx_dtype_short_name(q0.train_dtype),
      tpx_dtype_short_name(q0.train_dtype), a,
      same ? tpx_dtype_safetensors_name(q0.stored_dtype) : "F8", b, c);
  return st == TPX_OK ? 0 : -1;
}
