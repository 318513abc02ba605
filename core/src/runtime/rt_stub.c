/* runtime/rt_stub.c — temporary stubs of tpx/runtime.h (replaced by the
 * implementation files). */
#include "tpx/runtime.h"

tpx_status tpx_runtime_create(const tpx_sharding *sh, tpx_mesh_comm *mc, const tpx_runtime_options *opts, tpx_runtime **out, tpx_error *err) { (void)sh; (void)mc; (void)opts; (void)out; (void)err; return TPX_UNSUPPORTED; }
void tpx_runtime_destroy(tpx_runtime *rt) { (void)rt;  }
const tpx_sharding * tpx_runtime_sharding(const tpx_runtime *rt) { (void)rt; return NULL; }
tpx_mesh_comm * tpx_runtime_mesh_comm(const tpx_runtime *rt) { (void)rt; return NULL; }
int64_t tpx_runtime_rank(const tpx_runtime *rt) { (void)rt; return -1; }
int tpx_runtime_fsdp_enabled(const tpx_runtime *rt) { (void)rt; return 0; }
int tpx_runtime_is_async(const tpx_runtime *rt) { (void)rt; return 0; }
size_t tpx_runtime_num_units(const tpx_runtime *rt) { (void)rt; return 0; }
int64_t tpx_runtime_param_unit(const tpx_runtime *rt, int64_t param) { (void)rt; (void)param; return -1; }
int tpx_runtime_unit_is_unsharded(const tpx_runtime *rt, size_t unit) { (void)rt; (void)unit; return 0; }
tpx_status tpx_runtime_param(const tpx_runtime *rt, int64_t param, tpx_runtime_param_info *out, tpx_error *err) { (void)rt; (void)param; (void)out; (void)err; return TPX_UNSUPPORTED; }
tpx_status tpx_runtime_load_param(tpx_runtime *rt, int64_t param, const void *full, tpx_dtype dtype, tpx_error *err) { (void)rt; (void)param; (void)full; (void)dtype; (void)err; return TPX_UNSUPPORTED; }
tpx_status tpx_runtime_gather_param(tpx_runtime *rt, int64_t param, void *full, tpx_dtype dtype, tpx_error *err) { (void)rt; (void)param; (void)full; (void)dtype; (void)err; return TPX_UNSUPPORTED; }
tpx_status tpx_runtime_gather_grad(tpx_runtime *rt, int64_t param, void *full, tpx_dtype dtype, tpx_error *err) { (void)rt; (void)param; (void)full; (void)dtype; (void)err; return TPX_UNSUPPORTED; }
tpx_status tpx_runtime_unshard(tpx_runtime *rt, size_t unit, tpx_runtime_phase phase, tpx_error *err) { (void)rt; (void)unit; (void)phase; (void)err; return TPX_UNSUPPORTED; }
tpx_status tpx_runtime_reshard(tpx_runtime *rt, size_t unit, tpx_runtime_phase phase, tpx_error *err) { (void)rt; (void)unit; (void)phase; (void)err; return TPX_UNSUPPORTED; }
tpx_status tpx_runtime_reduce_grads(tpx_runtime *rt, size_t unit, tpx_error *err) { (void)rt; (void)unit; (void)err; return TPX_UNSUPPORTED; }
tpx_status tpx_runtime_wait(tpx_runtime *rt, tpx_error *err) { (void)rt; (void)err; return TPX_UNSUPPORTED; }
tpx_status tpx_runtime_zero_grads(tpx_runtime *rt, tpx_error *err) { (void)rt; (void)err; return TPX_UNSUPPORTED; }
tpx_status tpx_runtime_grad_norm(tpx_runtime *rt, double norm_type, double *out, tpx_error *err) { (void)rt; (void)norm_type; (void)out; (void)err; return TPX_UNSUPPORTED; }
tpx_status tpx_runtime_clip_grads(tpx_runtime *rt, double max_norm, double total_norm, tpx_error *err) { (void)rt; (void)max_norm; (void)total_norm; (void)err; return TPX_UNSUPPORTED; }
tpx_status tpx_runtime_clip_grad_norm(tpx_runtime *rt, double max_norm, double norm_type, double *total_out, tpx_error *err) { (void)rt; (void)max_norm; (void)norm_type; (void)total_out; (void)err; return TPX_UNSUPPORTED; }
tpx_status tpx_runtime_adamw_step(tpx_runtime *rt, const tpx_adamw_options *opts, tpx_error *err) { (void)rt; (void)opts; (void)err; return TPX_UNSUPPORTED; }
int64_t tpx_runtime_optimizer_steps(const tpx_runtime *rt) { (void)rt; return -1; }
int64_t tpx_runtime_allocated_bytes(const tpx_runtime *rt, tpx_runtime_mem_kind kind) { (void)rt; (void)kind; return -1; }
int64_t tpx_runtime_peak_bytes(const tpx_runtime *rt, tpx_runtime_mem_kind kind) { (void)rt; (void)kind; return -1; }
