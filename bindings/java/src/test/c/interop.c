/*
 * The C side of the Java binding's interop test (InteropTest):
 *   interop write PATH  writes map "c_map" (keys "c0".."c9" as bytes, values i*i-5 as
 *                       8-byte little-endian integers), fixed map "c_fixed" (8/8), and
 *                       map "c_typed", which records utf8 keys and i64 values ("t0".."t4":
 *                       i * 1000 - 1);
 *   interop read PATH   checks what Java wrote: map "j_str_int" {"a": 1, "é": -2} and the
 *                       cell "j_cell" (the empty key) holding 42;
 *   interop queue PATH  passes elements of the queue set "jq" back to Java: pulls the three
 *                       Java pushed to "to_other" (waiting for each), checks they start
 *                       "java0000".."java0002" in that order, writes "cccc" over their
 *                       first four bytes and pushes them to "to_java"; then pulls one from
 *                       "free", writes "from-c" in it and pushes it to "to_java".
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
        fprintf(stderr, "usage: interop write|read|queue PATH\n");
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
    } else if (strcmp(argv[1], "queue") == 0) {
        shoal_queue *qs = NULL;
        if ((st = shoal_queue_open(s, "jq", NULL, &qs)) != SHOAL_OK) return fail("jq", st);
        uint32_t freeq, other, java;
        if ((st = shoal_queue_index(qs, "free", &freeq)) != SHOAL_OK) return fail("free", st);
        if ((st = shoal_queue_index(qs, "to_other", &other)) != SHOAL_OK) return fail("to_other", st);
        if ((st = shoal_queue_index(qs, "to_java", &java)) != SHOAL_OK) return fail("to_java", st);
        for (int i = 0; i < 3; i++) {
            shoal_element e;
            if ((st = shoal_queue_pull(qs, other, 30000, &e)) != SHOAL_OK) return fail("pull to_other", st);
            char want[16];
            snprintf(want, sizeof want, "java%04d", i);
            if (e.len < 8 || memcmp(e.data, want, 8) != 0) {
                fprintf(stderr, "element %llu: expected %s, got %.8s\n", (unsigned long long)e.index, want,
                        (const char *)e.data);
                return 1;
            }
            memcpy(e.data, "cccc", 4);
            if ((st = shoal_queue_push(qs, java, &e)) != SHOAL_OK) return fail("push to_java", st);
        }
        shoal_element e;
        if ((st = shoal_queue_pull(qs, freeq, 0, &e)) != SHOAL_OK) return fail("pull free", st);
        memcpy(e.data, "from-c", 6);
        if ((st = shoal_queue_push(qs, java, &e)) != SHOAL_OK) return fail("push to_java", st);
        shoal_queue_close(qs);
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
