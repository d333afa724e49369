/* reader: the other process of the writer/reader pair. It waits (up to TIMEOUT seconds)
 * for the store STORE, its map "shared" and the key "done" to appear, then reads and
 * verifies every entry the writer wrote. Exit status 0 when all are there. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shoal.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void nap(void) {
    struct timespec t = {0, 10 * 1000 * 1000};
    nanosleep(&t, NULL);
}

static int fail(const char *what, shoal_status rc) {
    fprintf(stderr, "reader: %s: %s: %s\n", what, shoal_strerror(rc), shoal_last_error_message());
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s STORE [COUNT] [TIMEOUT_SECONDS]\n", argv[0]);
        return 2;
    }
    const char *path = argv[1];
    long count = argc > 2 ? atol(argv[2]) : 10000;
    double deadline = now() + (argc > 3 ? atof(argv[3]) : 30.0);

    /* Wait for the writer: the store file, then the map, then the "done" marker. */
    shoal_options opts = {.struct_size = sizeof opts, .open_mode = SHOAL_OPEN_EXISTING};
    shoal_store *store = NULL;
    shoal_map *map = NULL;
    shoal_status rc;
    while ((rc = shoal_store_open(path, &opts, &store)) == SHOAL_NOT_FOUND && now() < deadline)
        nap();
    if (rc != SHOAL_OK) return fail("shoal_store_open", rc);
    while ((rc = shoal_map_open(store, "shared", 0, NULL, &map)) == SHOAL_NOT_FOUND &&
           now() < deadline)
        nap();
    if (rc != SHOAL_OK) return fail("shoal_map_open", rc);
    char buf[64];
    size_t len = 0;
    while ((rc = shoal_map_get(map, "done", 4, buf, sizeof buf - 1, &len)) == SHOAL_NOT_FOUND &&
           now() < deadline)
        nap();
    if (rc != SHOAL_OK) return fail("waiting for \"done\"", rc);
    buf[len] = 0;
    if (atol(buf) != count) {
        fprintf(stderr, "reader: the writer wrote %s entries, expected %ld\n", buf, count);
        return 1;
    }

    long bad = 0;
    for (long i = 0; i < count; i++) {
        char key[32], want[32];
        int kl = snprintf(key, sizeof key, "key-%ld", i);
        int wl = snprintf(want, sizeof want, "value-%ld", i);
        rc = shoal_map_get(map, key, (size_t)kl, buf, sizeof buf, &len);
        if (rc != SHOAL_OK || len != (size_t)wl || memcmp(buf, want, len) != 0) {
            if (bad++ < 5) fprintf(stderr, "reader: %s: %s\n", key, shoal_strerror(rc));
        }
    }
    printf("reader: read %ld entries from %s, %ld wrong\n", count, path, bad);
    shoal_map_close(map);
    shoal_store_close(store);
    return bad == 0 ? 0 : 1;
}
