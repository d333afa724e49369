/* writer: one of two unrelated processes sharing a map. It writes COUNT entries
 * ("key-<i>" -> "value-<i>") into the map "shared" of the store STORE, then the key
 * "done" holding COUNT. Start `reader` before or after it, from another shell:
 *
 *     ./writer demo 100000 &      # /dev/shm/demo.shoal
 *     ./reader demo 100000
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shoal.h"

static int fail(const char *what, shoal_status rc) {
    fprintf(stderr, "writer: %s: %s: %s\n", what, shoal_strerror(rc), shoal_last_error_message());
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s STORE [COUNT]\n", argv[0]);
        return 2;
    }
    const char *path = argv[1];
    long count = argc > 2 ? atol(argv[2]) : 10000;

    shoal_store *store = NULL;
    shoal_map *map = NULL;
    shoal_status rc = shoal_store_open(path, NULL, &store); /* open or create */
    if (rc != SHOAL_OK) return fail("shoal_store_open", rc);
    rc = shoal_map_open(store, "shared", SHOAL_MAP_CREATE, NULL, &map);
    if (rc != SHOAL_OK) return fail("shoal_map_open", rc);
    /* A previous run's marker must not fool a reader. */
    shoal_map_remove(map, "done", 4, NULL, 0, NULL);

    for (long i = 0; i < count; i++) {
        char key[32], value[32];
        int kl = snprintf(key, sizeof key, "key-%ld", i);
        int vl = snprintf(value, sizeof value, "value-%ld", i);
        rc = shoal_map_put(map, key, (size_t)kl, value, (size_t)vl, NULL);
        if (rc != SHOAL_OK) return fail("shoal_map_put", rc);
    }
    char n[32];
    int nl = snprintf(n, sizeof n, "%ld", count);
    rc = shoal_map_put(map, "done", 4, n, (size_t)nl, NULL);
    if (rc != SHOAL_OK) return fail("shoal_map_put", rc);
    printf("writer: wrote %ld entries to %s\n", count, path);

    shoal_map_close(map);
    shoal_store_close(store);
    return 0;
}
