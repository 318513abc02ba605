/* fp32.c — parameters kept in fp32 under mixed precision: the patterns a
 * plugin lists (tpx_selection_fp32, e.g. Qwen3.5's linear_attn.A_log /
 * dt_bias, NemotronH's router e_score_correction_bias) matched against every
 * parameter FQN, atom by atom with fnmatch (tpx_match_atom), as plan keys
 * are matched against module FQNs.
 *
 * The marking, and the held dtype it implies (tpx__held_dtype); fsdp.c
 * gives marked parameters f32 as their held and FSDP param dtype
 * (Automodel's fully_shard_by_dtype puts them in an fp32 group, so they
 * are neither stored nor all-gathered in bf16), and bytes.c counts them
 * so. */
#include <stdlib.h>
#include <string.h>

#include "model/model_view.h"
#include "shard/shard_internal.h"
#include "tpx/match.h"

/* Does the dotted `pattern` match the dotted `fqn` atom for atom? Both are
 * split in place in the caller-provided copies. */
static int fqn_match(char *pat, char *fqn) {
  for (;;) {
    char *pd = strchr(pat, '.'), *fd = strchr(fqn, '.');
    if ((pd == NULL) != (fd == NULL))
      return 0;
    if (pd)
      *pd = '\0';
    if (fd)
      *fd = '\0';
    int ok = tpx_match_atom(pat, fqn);
    if (pd)
      *pd = '.';
    if (fd)
      *fd = '.';
    if (!ok)
      return 0;
    if (!pd)
      return 1;
    pat = pd + 1;
    fqn = fd + 1;
  }
}

static size_t count_dots(const char *s) {
  size_t n = 0;
  for (; *s; s++) n += *s == '.';
  return n;
}

tpx_status tpx__fp32_mark(tpx_sharding *sh, tpx_error *err) {
  size_t np = sh->num_params;
  size_t n = sh->opts.num_fp32_params;
  sh->param_fp32 = calloc(np ? np : 1, 1);
  if (!sh->param_fp32)
    return tpx__shard_oom(err, "fp32 flags");
  if (n == 0)
    return TPX_OK;
  if (!sh->opts.fp32_params)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_sharding_create: num_fp32_params %zu with NULL "
                         "fp32_params",
                         n);
  sh->fp32_patterns = calloc(n, sizeof *sh->fp32_patterns);
  sh->fp32_matched = calloc(n, sizeof *sh->fp32_matched);
  size_t *dots = calloc(n, sizeof *dots);
  char **work = calloc(n, sizeof *work);
  if (!sh->fp32_patterns || !sh->fp32_matched || !dots || !work) {
    free(dots);
    free(work);
    return tpx__shard_oom(err, "fp32 patterns");
  }
  sh->num_fp32 = n;
  tpx_status st = TPX_OK;
  for (size_t i = 0; i < n && st == TPX_OK; i++) {
    const char *pat = sh->opts.fp32_params[i];
    if (!pat || !*pat) {
      st = tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_sharding_create: fp32 parameter pattern %zu is "
                         "%s",
                         i, pat ? "empty" : "NULL");
      break;
    }
    size_t len = strlen(pat);
    sh->fp32_patterns[i] = malloc(len + 1);
    work[i] = malloc(len + 1);
    if (!sh->fp32_patterns[i] || !work[i]) {
      st = tpx__shard_oom(err, "fp32 patterns");
      break;
    }
    memcpy(sh->fp32_patterns[i], pat, len + 1);
    memcpy(work[i], pat, len + 1);
    dots[i] = count_dots(pat);
  }
  char *fqn = NULL;
  size_t fcap = 0;
  for (size_t p = 0; p < np && st == TPX_OK; p++) {
    tpx_param_info pi;
    tpx__mv_param_info(sh->model, (int64_t)p, &pi);
    if (pi.tied_to >= 0)
      continue; /* follows its target, below */
    size_t len = strlen(pi.fqn), d = count_dots(pi.fqn);
    if (len + 1 > fcap) {
      char *f = realloc(fqn, len + 1);
      if (!f) {
        st = tpx__shard_oom(err, "fp32 matching");
        break;
      }
      fqn = f;
      fcap = len + 1;
    }
    for (size_t i = 0; i < n; i++) {
      if (dots[i] != d)
        continue;
      memcpy(fqn, pi.fqn, len + 1);
      if (fqn_match(work[i], fqn)) {
        sh->param_fp32[p] = 1;
        sh->fp32_matched[i]++;
        break;
      }
    }
  }
  /* A tied alias is its target's tensor. */
  for (size_t t = 0; t < np && st == TPX_OK; t++) {
    tpx_param_info pi;
    if (tpx_model_param(sh->model, (int64_t)t, &pi, NULL) == TPX_OK &&
        pi.tied_to >= 0)
      sh->param_fp32[t] = sh->param_fp32[pi.tied_to];
  }
  free(fqn);
  for (size_t i = 0; i < n; i++) free(work[i]);
  free(work);
  free(dots);
  return st;
}

int tpx_sharding_param_keeps_fp32(const tpx_sharding *sh, int64_t param) {
  if (!sh || !sh->param_fp32 || param < 0 || (size_t)param >= sh->num_params)
    return 0;
  return sh->param_fp32[param] != 0;
}

size_t tpx_sharding_num_fp32_patterns(const tpx_sharding *sh) {
  return sh ? sh->num_fp32 : 0;
}

const char *tpx_sharding_fp32_pattern(const tpx_sharding *sh, size_t i,
                                      size_t *num_matched) {
  if (!sh || i >= sh->num_fp32) {
    if (num_matched)
      *num_matched = 0;
    return NULL;
  }
  if (num_matched)
    *num_matched = sh->fp32_matched[i];
  return sh->fp32_patterns[i];
}

tpx_dtype tpx__held_dtype(const tpx_sharding *sh, int64_t p, tpx_dtype orig) {
  if (sh->param_fp32 && sh->param_fp32[p] && tpx_dtype_is_float(orig))
    return TPX_DTYPE_F32;
  return orig;
}
