/* famtest.h — helpers shared by the gemma3, falcon_h1 and nemotron family
 * plugin tests: load a family plugin into a fresh registry, load a config
 * from tests/data/families/<family>/, build its skeleton, ask for a plan and
 * compare it with a golden tpx-plan/1 file, and per-rank bytes through
 * tpx/sharding.h. Every helper asserts (Check) on failure. */
#ifndef TPX_FAMTEST_H
#define TPX_FAMTEST_H

#include <stddef.h>
#include <stdint.h>

#include <check.h>

#include "tpx/model.h"
#include "tpx/plan.h"
#include "tpx/registry.h"

/* A registry holding only plugins/<family>/libtpx_<family>.so of the build
 * tree ($TPX_BUILD_DIR). */
tpx_registry *ft_registry(const char *family);
/* Path of tests/data/families/<family>/<file> ($TPX_SOURCE_DIR); static
 * buffer, valid until the next call. */
const char *ft_data(const char *family, const char *file);
/* The config only (no modules). */
tpx_model *ft_config(const char *family, const char *file);
/* The config plus the plugin's skeleton. */
tpx_model *ft_skeleton(const tpx_registry *reg, const char *family,
                       const char *file);

/* Ask the plugin serving `arch` for its plan. On failure returns NULL and
 * copies the status and message into *st / msg (msg may be NULL). */
tpx_plan *ft_plan(const tpx_registry *reg, const tpx_model *model,
                  const char *arch, int sp, int64_t tp, tpx_status *st,
                  char *msg, size_t msg_size);
/* Plan that must succeed. */
tpx_plan *ft_plan_ok(const tpx_registry *reg, const tpx_model *model,
                     const char *arch, int sp, int64_t tp);
/* Assert `plan` equals the golden file: same keys in the same order, equal
 * styles in every field, and identical normalized JSON. */
void ft_assert_golden(const tpx_plan *plan, const char *family,
                      const char *golden);

/* Parameter `fqn` exists with this shape (dims < 0 end the shape). */
void ft_assert_param(const tpx_model *m, const char *fqn, int64_t d0,
                     int64_t d1, int64_t d2);
/* Parameter `fqn` is tied to `target`. */
void ft_assert_tied(const tpx_model *m, const char *fqn, const char *target);
/* Number of parameters whose FQN ends with `suffix` (tied ones included). */
size_t ft_count_suffix(const tpx_model *m, const char *suffix);
/* The parameters whose FQN starts with `prefix` are exactly `names` (each
 * relative to `prefix`), in model order, which is torch's
 * named_parameters() order: a module's own parameters before those of its
 * children, children in registration order. */
void ft_assert_param_order(const tpx_model *m, const char *prefix,
                           const char *const *names, size_t n);
/* Module kind of `fqn` (asserts it exists). */
tpx_module_kind ft_kind(const tpx_model *m, const char *fqn);

/* Parameter bytes rank `rank` holds with `plan` on a 1-D "tp" mesh of size
 * `tp`, FSDP off (tpx/sharding.h). */
int64_t ft_rank_bytes(const tpx_model *m, const tpx_plan *plan, int64_t tp,
                      int64_t rank);

/* Run tpx_select_plan (sp, tp) and look for a diagnostic with `code`:
 * returns its level, or -1 when there is none. */
int ft_select_diag(const tpx_registry *reg, const tpx_model *m, int sp,
                   int64_t tp, const char *code);

/* get_plan for `arch` at `tp` succeeds and equals the plans at tp = 1 and
 * tp = 2 (upstream's plan functions never look at tp or the head counts). */
void ft_assert_plan_any_tp(const tpx_registry *reg, const tpx_model *m,
                           const char *arch, int sp, int64_t tp);
/* tpx_select_plan (sp, tp) selects the plugin's plan (no plugin-refused
 * diagnostic), equal to `golden` when not NULL, with exactly `n_heads`
 * heads-not-divisible diagnostics, all errors, the first holding `needle`
 * (may be NULL). */
void ft_assert_selected_plugin(const tpx_registry *reg, const tpx_model *m,
                               int sp, int64_t tp, const char *family,
                               const char *golden, size_t n_heads,
                               const char *needle);

/* Run the conformance harness (tpx/harness.h, behind `tpx check-plugin`)
 * on the family's plugin: once with its synthetic configs, once with the
 * given data files of tests/data/families/<family>/; assert no check
 * fails (the failing ones are named in the message). */
void ft_assert_harness(const char *family, const char *const *files,
                       size_t num_files);

#endif /* TPX_FAMTEST_H */
