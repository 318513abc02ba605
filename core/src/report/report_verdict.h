/* report/report_verdict.h — the verdict screen that opens the text report
 * and the Diagnostics section with consequences folded under their cause
 * (report_verdict.c). Private to the report area. */
#ifndef TPX_REPORT_REPORT_VERDICT_H
#define TPX_REPORT_REPORT_VERDICT_H

#include "report/report_util.h"

void tpx__report_verdict(tpx__sbuf *b, const tpx_sharding *sh,
                         const tpx_report_options *o);
void tpx__report_diagnostics(tpx__sbuf *b, const tpx_sharding *sh,
                             const tpx_report_options *o);

#endif /* TPX_REPORT_REPORT_VERDICT_H */
