/* base_test.h — small helpers shared by the base-suite Check tests: the
 * ones every suite shares (../check_util.h: CHECK_OK, CHECK_FAILS,
 * run_suite). */
#ifndef TPX_TESTS_BASE_TEST_H
#define TPX_TESTS_BASE_TEST_H

#include "../check_util.h"

#endif /* TPX_TESTS_BASE_TEST_H */
