/*
 * The C side of the Java binding's interop test (InteropTest):
 *   interop write PATH  writes map "c_map" (keys "c0".."c9" as bytes, values i*i-5 as
 *                       8-byte little-endian integers), fixed map "c_fixed" (8/8), and
 *                       map "c_typed", which records utf8 keys and i64 values ("t0".."t4":
 *                       i * 1000 - 1);
 *   interop read PATH   checks what Java wrote: map "j_str_int" {"a": 1, "é": -2} and the
 *                       cell "j_cell" (the empty key) holding 42.
 * Exits 0 when all is as expected, 1 with a message otherwise.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "shoal.h"

static int fail(const char *what, shoal_status st) {
    fprintf(stderr, "%s: %s (%s)\n", what, shoal_strerror(st), shoal_last_error_message());
    return 1;
}

static void le(int64_t v, unsigned char out[8]) {
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)((uint64_t)v >> (8 * i));
}

static int64_t unle(const unsigned char b[8]) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | b[i];
    return (int64_t)v;
}

static int expect(shoal_map *m, const char *key, int64_t want) {
    unsigned char buf[16];
    size_t len = 0;
    shoal_status st = shoal_map_get(m, key, strlen(key), buf, sizeof buf, &len);
    if (st != SHOAL_OK) return fail(key, st);
    if (len != 8 || unle(buf) != want) {
        fprintf(stderr, "%s: %zu bytes, %lld, expected %lld\n", key, len, (long long)unle(buf), (long long)want);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: interop write|read PATH\n");
        return 2;
    }
    shoal_store *s = NULL;
    shoal_status st = shoal_store_open(argv[2], NULL, &s);
    if (st != SHOAL_OK) return fail("open", st);
    int bad = 0;
    if (strcmp(argv[1], "write") == 0) {
        shoal_map *m = NULL;
        if ((st = shoal_map_open(s, "c_map", SHOAL_MAP_CREATE, NULL, &m)) != SHOAL_OK) return fail("c_map", st);
        for (int i = 0; i < 10; i++) {
            char k[8];
            unsigned char v[8];
            snprintf(k, sizeof k, "c%d", i);
            le((int64_t)i * i - 5, v);
            if ((st = shoal_map_put(m, k, strlen(k), v, 8, NULL)) != SHOAL_OK) return fail("put", st);
        }
        shoal_map_close(m);
        shoal_map_options o;
        memset(&o, 0, sizeof o);
        o.struct_size = sizeof o;
        o.key_type = SHOAL_TYPE_UTF8;
        o.value_type = SHOAL_TYPE_I64;
        if ((st = shoal_map_open(s, "c_typed", SHOAL_MAP_CREATE, &o, &m)) != SHOAL_OK) return fail("c_typed", st);
        for (int i = 0; i < 5; i++) {
            char k[8];
            unsigned char v[8];
            snprintf(k, sizeof k, "t%d", i);
            le((int64_t)i * 1000 - 1, v);
            if ((st = shoal_map_put(m, k, strlen(k), v, 8, NULL)) != SHOAL_OK) return fail("put", st);
        }
        shoal_map_close(m);
        shoal_fixed *f = NULL;
        if ((st = shoal_fixed_open(s, "c_fixed", 8, 8, SHOAL_MAP_CREATE, &f)) != SHOAL_OK) return fail("c_fixed", st);
        int64_t r = 0;
        if ((st = shoal_fixed_add(f, "counter1", 8, 77, &r)) != SHOAL_OK) return fail("add", st);
        shoal_fixed_close(f);
    } else {
        shoal_map *m = NULL;
        if ((st = shoal_map_open(s, "j_str_int", 0, NULL, &m)) != SHOAL_OK) return fail("j_str_int", st);
        bad |= expect(m, "a", 1);
        bad |= expect(m, "\xc3\xa9", -2);
        shoal_map_close(m);
        if ((st = shoal_map_open(s, "j_cell", 0, NULL, &m)) != SHOAL_OK) return fail("j_cell", st);
        bad |= expect(m, "", 42);
        shoal_map_close(m);
    }
    shoal_store_close(s);
    if (!bad) printf("ok\n");
    return bad;
}
