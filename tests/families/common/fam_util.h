/* fam_util.h — shared helpers of the family-plugin tests
 * (tests/families/<family>/test_<family>.c): load one built plugin into a
 * registry, load a test config and build its skeleton, ask for plans and
 * compare them with tpx-plan/1 golden files, check skeleton parameters, and
 * recompute per-rank TP bytes from the placements the plan implies
 * (independently of the shard library) to compare with tpx/sharding.h.
 * Every helper fails the current Check test on error. Not a library. */
#ifndef FAM_UTIL_H
#define FAM_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/diag.h"
#include "tpx/model.h"
#include "tpx/plan.h"
#include "tpx/registry.h"

/* <TPX_SOURCE_DIR>/tests/data/families/<family>/<file> into buf. */
const char *fam_data_path(char *buf, size_t size, const char *family,
                          const char *file);

/* A registry holding exactly
 * <TPX_BUILD_DIR>/plugins/<family>/libtpx_<family>.so. */
tpx_registry *fam_registry(const char *family);

/* The model of a test config; with `skeleton`, the plugin's skeleton built. */
tpx_model *fam_model(tpx_registry *reg, const char *family, const char *file,
                     int skeleton);
/* A model from inline config JSON (no skeleton). */
tpx_model *fam_model_json(const char *json);

/* Ask plugin 0 for a plan. Returns the status; *out set on success. */
int fam_plan(tpx_registry *reg, const tpx_model *model, const char *arch,
             const char *plan_name, int sp, int64_t tp, tpx_plan **out,
             char *msg, size_t msg_size);

/* Normalized JSON of a plan (malloc'd). */
char *fam_plan_json(const tpx_plan *plan);
/* Fail unless plan equals the golden file (normalized JSON). */
void fam_assert_plan_golden(const tpx_plan *plan, const char *family,
                            const char *golden);
/* Ask for a plan and compare it with a golden file in one go. */
void fam_check_plan(tpx_registry *reg, const tpx_model *model, const char *arch,
                    const char *plan_name, int sp, const char *family,
                    const char *golden);
/* Fail unless the plan is refused (at tp = 2, or at `tp`) and the message
 * holds `needle`. */
void fam_check_refused_tp(tpx_registry *reg, const tpx_model *model,
                          const char *arch, const char *plan_name, int sp,
                          int64_t tp, const char *needle);
void fam_check_refused(tpx_registry *reg, const tpx_model *model,
                       const char *arch, const char *plan_name, int sp,
                       const char *needle);
/* Fail unless get_plan succeeds at `tp` (typically one the head counts do
 * not divide) and gives the same plan as at tp = 1 and tp = 2: upstream's
 * plan functions never look at tp or the heads (validate_tp_mesh is the
 * host's). With `golden`, the plan must also equal that file. */
void fam_check_plan_any_tp(tpx_registry *reg, const tpx_model *model,
                           const char *arch, const char *plan_name, int sp,
                           int64_t tp, const char *family, const char *golden);

/* Fail unless parameter fqn exists with this shape (d1 < 0: 1-D). */
void fam_assert_param(const tpx_model *model, const char *fqn, int64_t d0,
                      int64_t d1);
void fam_assert_no_param(const tpx_model *model, const char *fqn);
/* Fail unless fqn is tied to target_fqn. */
void fam_assert_tied(const tpx_model *model, const char *fqn,
                     const char *target_fqn);
/* Fail unless the module exists with this kind. */
void fam_assert_module(const tpx_model *model, const char *fqn,
                       tpx_module_kind kind);
/* Number of stored (untied) parameters. */
int64_t fam_count_untied(const tpx_model *model);

/* Bytes rank `rank` of a tp-sized TP group holds, recomputed here from the
 * placements the plan implies (colwise: weight/bias Shard(0) on a linear,
 * Shard(1) on an embedding; rowwise and vocab embedding: weight Shard(1) on a
 * linear, Shard(0) on an embedding, bias replicated; everything else and
 * unmatched parameters replicated; torch.chunk split; tied counted once). */
int64_t fam_expected_rank_bytes(const tpx_model *model, const tpx_plan *plan,
                                int64_t tp, int64_t rank);
/* Compare fam_expected_rank_bytes with tpx_sharding_rank_param_bytes for
 * every rank of tp = 2, 4, 8 (FSDP off, mesh {"tp": tp}). */
void fam_check_rank_bytes(const tpx_model *model, const tpx_plan *plan);

/* 1 if diags hold a diagnostic with this code whose message contains
 * `needle` (may be NULL). */
int fam_diags_have(const tpx_diag_list *diags, const char *code,
                   const char *needle);
/* How many diagnostics have this code and a message containing `needle`
 * (may be NULL). */
size_t fam_diags_count(const tpx_diag_list *diags, const char *code,
                       const char *needle);

/* Plan selection (tpx_select_plan) for the model's own architecture at `tp`,
 * optionally with a named plan. With `refused` 0: fails unless the plugin's
 * plan is selected (no plugin-refused / plugin-failed diagnostic) and equals
 * `golden` (when not NULL; host post-processing included). With `refused` 1:
 * fails unless exactly one plugin-refused diagnostic is there and another
 * source's plan was selected. Either way, fails unless exactly `n_code`
 * diagnostics have `code` (when not NULL) with `needle` in their message;
 * "heads-not-divisible" diagnostics must be errors. */
void fam_check_selected(tpx_registry *reg, const tpx_model *model,
                        const char *plan_name, int sp, int64_t tp, int refused,
                        const char *family, const char *golden,
                        const char *code, const char *needle, size_t n_code);

/* dlopen the built plugin and call register_parallel_strategy directly with
 * host ABI ranges: [1.0, 1.7] and [0.0, 1.0] must be accepted with
 * TPX_PLUGIN_ABI_CURRENT, [2.0, 3.0] and [0.0, 0.9] refused. */
void fam_check_abi(const char *family);
#endif /* FAM_UTIL_H */
