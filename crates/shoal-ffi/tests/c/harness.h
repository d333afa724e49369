/* A small test harness for the C tests: CHECK and CHECK_RC record failures and go on;
 * RUN runs one test function; finish() prints "N passed, N failed" and the exit code. */
#ifndef SHOAL_TEST_HARNESS_H
#define SHOAL_TEST_HARNESS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shoal.h"

static int h_failures;       /* checks failed in the current test */
static int h_tests_passed;
static int h_tests_failed;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            h_failures++;                                                            \
        }                                                                            \
    } while (0)

/* Checks that `call` returns `want`; prints both codes and the library's message if not. */
#define CHECK_RC(call, want)                                                               \
    do {                                                                                   \
        shoal_status h_rc_ = (call);                                                       \
        shoal_status h_want_ = (want);                                                     \
        if (h_rc_ != h_want_) {                                                            \
            fprintf(stderr, "%s:%d: %s\n  returned %d (%s: %s), expected %d (%s)\n",       \
                    __FILE__, __LINE__, #call, (int)h_rc_, shoal_strerror(h_rc_),          \
                    shoal_last_error_message(), (int)h_want_, shoal_strerror(h_want_));    \
            h_failures++;                                                                  \
        }                                                                                  \
    } while (0)

/* Like CHECK_RC with SHOAL_OK, but stops the test (the rest depends on it). */
#define REQUIRE_OK(call)                                                                   \
    do {                                                                                   \
        shoal_status h_rc_ = (call);                                                       \
        if (h_rc_ != SHOAL_OK) {                                                           \
            fprintf(stderr, "%s:%d: %s\n  returned %d (%s: %s); stopping this test\n",     \
                    __FILE__, __LINE__, #call, (int)h_rc_, shoal_strerror(h_rc_),          \
                    shoal_last_error_message());                                           \
            h_failures++;                                                                  \
            return;                                                                        \
        }                                                                                  \
    } while (0)

#define RUN(test)                                                   \
    do {                                                            \
        h_failures = 0;                                             \
        test();                                                     \
        if (h_failures == 0) {                                      \
            printf("ok   %s\n", #test);                             \
            h_tests_passed++;                                       \
        } else {                                                    \
            printf("FAIL %s (%d checks failed)\n", #test, h_failures); \
            h_tests_failed++;                                       \
        }                                                           \
        fflush(stdout);                                             \
    } while (0)

static int finish(void) {
    printf("%d passed, %d failed\n", h_tests_passed, h_tests_failed);
    return h_tests_failed == 0 ? 0 : 1;
}

#endif
