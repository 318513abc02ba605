/* plan_file.c — a `--plan FILE`: a tpx-plan/1 document, or a Hugging Face
 * tp_plan object (translated for the model, tpx_plan_load_hf), told apart by
 * tpx_plan_file_is_hf. One call for every command that takes --plan. Not
 * named plugin plans (selection) and not the path-or-name guess. */
#include <stdio.h>
#include <sys/stat.h>

#include "cli.h"
#include "tpx/registry.h"

/* The largest plan file read: a 100 000-entry plan is about 10 MB; a
 * bigger file is refused before it is read (or parsed twice, as both
 * formats are tried). */
#define CLI_PLAN_MAX_BYTES (64ll * 1024 * 1024)

tpx_status cli_load_plan_file(const char *path, const tpx_model *model,
                              tpx_diag_list *diags, tpx_plan **out, char *trace,
                              size_t trace_size, tpx_error *err) {
  if (trace && trace_size)
    trace[0] = '\0';
  struct stat st_;
  if (stat(path, &st_) == 0 && (long long)st_.st_size > CLI_PLAN_MAX_BYTES)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "%s: plan file of %lld bytes; tpx reads plan files "
                         "of at most %lld MB",
                         path, (long long)st_.st_size,
                         CLI_PLAN_MAX_BYTES / (1024 * 1024));
  if (!tpx_plan_file_is_hf(path))
    return tpx_plan_load(path, out, err);
  char how[768];
  tpx_status st =
      tpx_plan_load_hf(path, model, out, diags, how, sizeof how, err);
  if (st == TPX_OK && trace && trace_size)
    snprintf(trace, trace_size, "plan file: %s is %s", path, how);
  return st;
}
