/* tpx/harness.h — the plugin conformance harness, callable from a plugin
 * author's own test suite (and behind `tpx check-plugin`).
 *
 * tpx_harness_run checks one plugin .so against the ABI (docs/PLUGIN_ABI.md):
 *   exports       the two required symbols are exported (read from the ELF
 *                 dynamic symbol table, without running plugin code); the
 *                 optional ones and any other exports are listed;
 *   load          dlopen + registration succeed;
 *   registration  name, version, architectures are well formed;
 *   negotiation   a host offering only a newer / only an older ABI major is
 *                 refused cleanly (TPX_PLUGIN_ABI_UNSUPPORTED, or an answer
 *                 outside the range), not accepted and not a crash;
 *   per architecture served (with a synthetic config) or per --config file,
 *   skeleton      the optional skeleton builds;
 *   plan          for sp in {0,1} x tp in {1,2,4,8}: get_plan succeeds or
 *                 refuses with a message; is deterministic; only valid styles
 *                 and layouts; no duplicate keys; every required key matches
 *                 a module of the skeleton; tied parameters get the same
 *                 placement. Heads not divisible by tp are the host's
 *                 validate_tp_mesh error (heads-not-divisible), not the
 *                 plugin's: a plan or a refusal with a message both pass,
 *                 with a note;
 *   concurrent    get_plan from several threads at once gives identical plans;
 *   capabilities  validate / FSDP units / fp32 params run cleanly.
 *
 * Isolation: each group of checks runs in a forked child process; the
 * results come back over a pipe. A crash, abort, exit() or hang (killed
 * after the timeout) inside the plugin is a failed check naming the step it
 * was in; the harness itself always returns normally. Call it from a
 * single-threaded point of the program (it forks). Leaks are not checked
 * here: run the harness under valgrind (children included) for that.
 *
 * Thread safety: independent calls may run concurrently. */
#ifndef TPX_HARNESS_H
#define TPX_HARNESS_H

#include <stddef.h>

#include "tpx/error.h"

TPX_BEGIN_DECLS

typedef struct tpx_harness_options {
  size_t struct_size;
  double timeout_sec; /* per child process; <= 0 means 10 s */
  /* config.json paths; each gives a model (+ the plugin's skeleton of it)
   * to check the plans against. With none, every architecture the plugin
   * serves is checked with a small synthetic Llama-shaped config. */
  const char *const *configs;
  size_t num_configs;
  int threads; /* for the concurrency check; <= 0 means 4 */
} tpx_harness_options;

#define TPX_HARNESS_OPTIONS_INIT                                               \
  { sizeof(tpx_harness_options), 10.0, NULL, 0, 4 }

typedef struct tpx_harness_result tpx_harness_result;

/* Borrowed view of one check; strings valid while the result lives. */
typedef struct tpx_harness_check {
  const char *name;   /* "exports", "plan LlamaForCausalLM sp=0 tp=2", ... */
  int passed;         /* 1 or 0 */
  const char *detail; /* what was seen; for a failure, what is wrong */
} tpx_harness_check;

/* Run every check on the plugin at `path`. Returns TPX_OK whenever the
 * checks ran (look at the counts for the verdict); an error only on bad
 * arguments or when the harness itself cannot work (no memory, fork or pipe
 * failure). *out is owned by the caller. `opts` may be NULL (defaults). */
TPX_API tpx_status tpx_harness_run(const char *path,
                                   const tpx_harness_options *opts,
                                   tpx_harness_result **out, tpx_error *err);
/* NULL is a no-op. */
TPX_API void tpx_harness_result_destroy(tpx_harness_result *result);

TPX_API size_t tpx_harness_num_checks(const tpx_harness_result *result);
TPX_API size_t tpx_harness_num_passed(const tpx_harness_result *result);
TPX_API size_t tpx_harness_num_failed(const tpx_harness_result *result);
/* TPX_OUT_OF_RANGE past the end. */
TPX_API tpx_status tpx_harness_check_get(const tpx_harness_result *result,
                                         size_t index, tpx_harness_check *out,
                                         tpx_error *err);

/* The report: one line per check ("PASS name: detail" / "FAIL ..."), then
 * "N passed, N failed". *out is malloc'd; free() it. */
TPX_API tpx_status tpx_harness_to_text(const tpx_harness_result *result,
                                       char **out, tpx_error *err);
/* {"plugin": path, "checks": [{"name", "passed", "detail"}...],
 *  "passed": N, "failed": N}; `indent` as jansson's JSON_INDENT. *out is
 * malloc'd; free() it. */
TPX_API tpx_status tpx_harness_to_json(const tpx_harness_result *result,
                                       int indent, char **out, tpx_error *err);

TPX_END_DECLS

#endif /* TPX_HARNESS_H */
