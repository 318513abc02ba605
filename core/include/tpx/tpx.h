/* tpx/tpx.h — the whole public API of libtpx in one include.
 *
 * Trainers include this; plugin authors include tpx/plugin.h only. The
 * conformance harness (tpx/harness.h) is not part of it: its users (tpx
 * check-plugin, tests) include it themselves. */
#ifndef TPX_TPX_H
#define TPX_TPX_H

#include "tpx/checkpoint.h"
#include "tpx/checkpoint_shard.h"
#include "tpx/comm.h"
#include "tpx/diag.h"
#include "tpx/dtype.h"
#include "tpx/error.h"
#include "tpx/fsdp.h"
#include "tpx/layout.h"
#include "tpx/log.h"
#include "tpx/match.h"
#include "tpx/memory.h"
#include "tpx/mesh.h"
#include "tpx/model.h"
#include "tpx/placement.h"
#include "tpx/plan.h"
#include "tpx/redistribute.h"
#include "tpx/registry.h"
#include "tpx/select.h"
#include "tpx/report.h"
#include "tpx/runtime.h"
#include "tpx/runtime_cp.h"
#include "tpx/runtime_moe.h"
#include "tpx/runtime_tp.h"
#include "tpx/sharding.h"
#include "tpx/tensor.h"
#include "tpx/validate.h"
#include "tpx/version.h"

#endif /* TPX_TPX_H */
