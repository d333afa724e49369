/* The C half of the ABI-overhead benchmark: OPS puts, then OPS gets, of 8-byte keys
 * (KEYS distinct) and 8-byte values through the C ABI; the same workload as
 * src/bin/bench.rs does through the Rust API. `run.sh` runs both and prints the ratio.
 *
 * Usage: bench_c STORE_PATH OPS KEYS. Prints `c-abi put_ns=<ns> get_ns=<ns>`. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shoal.h"

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* A little-endian u64, as Rust's to_le_bytes (one store on little-endian machines). */
static void le(uint64_t v, unsigned char out[8]) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(out, &v, 8);
#else
    for (int b = 0; b < 8; b++) out[b] = (unsigned char)(v >> (8 * b));
#endif
}

/* The key of operation i, as in bench.rs. */
static void key(uint64_t i, uint64_t keys, unsigned char out[8]) {
    le((i * 0x9E3779B97F4A7C15ull) & (keys - 1), out);
}

static int die(const char *what, shoal_status rc) {
    fprintf(stderr, "bench_c: %s: %s: %s\n", what, shoal_strerror(rc), shoal_last_error_message());
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s STORE_PATH OPS KEYS\n", argv[0]);
        return 2;
    }
    const char *path = argv[1];
    uint64_t ops = strtoull(argv[2], NULL, 10), keys = strtoull(argv[3], NULL, 10);
    if (keys == 0 || (keys & (keys - 1)) != 0) {
        fprintf(stderr, "KEYS must be a power of two\n");
        return 2;
    }
    shoal_store_destroy(path);
    shoal_store *s = NULL;
    shoal_map *m = NULL;
    /* 16 GiB of address space, as bench.rs (the 1 TiB default is too much for valgrind). */
    shoal_options o = {.struct_size = sizeof o, .max_size = 16ull << 30};
    shoal_status rc = shoal_store_open(path, &o, &s);
    if (rc != SHOAL_OK) return die("open", rc);
    if ((rc = shoal_map_open(s, "bench", SHOAL_MAP_CREATE, NULL, &m)) != SHOAL_OK)
        return die("map", rc);
    unsigned char k[8], v[8];
    for (uint64_t i = 0; i < keys; i++) {
        key(i, keys, k);
        le(i, v);
        if ((rc = shoal_map_put(m, k, 8, v, 8, NULL)) != SHOAL_OK) return die("put", rc);
    }
    double t = now_ns();
    for (uint64_t i = 0; i < ops; i++) {
        key(i, keys, k);
        le(i, v);
        bool replaced;
        if ((rc = shoal_map_put(m, k, 8, v, 8, &replaced)) != SHOAL_OK) return die("put", rc);
    }
    double put_ns = (now_ns() - t) / (double)ops;
    unsigned char buf[64];
    uint64_t sum = 0;
    t = now_ns();
    for (uint64_t i = 0; i < ops; i++) {
        size_t len;
        key(i, keys, k);
        if ((rc = shoal_map_get(m, k, 8, buf, sizeof buf, &len)) != SHOAL_OK) return die("get", rc);
        sum += buf[0];
    }
    double get_ns = (now_ns() - t) / (double)ops;
    shoal_map_close(m);
    shoal_store_close(s);
    shoal_store_destroy(path);
    printf("c-abi put_ns=%.1f get_ns=%.1f (checksum %llu)\n", put_ns, get_ns,
           (unsigned long long)(sum & 0xff));
    return 0;
}
