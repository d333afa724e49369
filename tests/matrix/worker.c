/*
 * The C worker of the cross-language matrix (scripts/test-matrix.sh describes the
 * protocol every language's worker follows), on the C ABI (shoal.h). The golden vectors
 * are checked with libxxhash's XXH3.
 *
 *   worker STORE LANG LANGS KEYS ADDS VECTORS
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "shoal.h"

#define WAIT_SECONDS 180.0

static const char *g_lang = "c";

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "matrix %s: FAILED: ", g_lang);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static void check(shoal_status st, const char *what) {
    if (st != SHOAL_OK) die("%s: %s (%s)", what, shoal_strerror(st), shoal_last_error_message());
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void pause_briefly(void) {
    struct timespec t = {0, 5 * 1000 * 1000};
    nanosleep(&t, NULL);
}

static int golden(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) die("%s: cannot open", path);
    static char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        char key_hex[1024];
        unsigned long long seed, want[6];
        if (sscanf(line, "%llx %1023s %llx %llx %llx %llu %llu %llu", &seed, key_hex, &want[0], &want[1],
                   &want[2], &want[3], &want[4], &want[5]) != 8)
            die("golden vector line: %s", line);
        unsigned char key[512];
        size_t len = 0;
        if (strcmp(key_hex, "-") != 0) {
            for (size_t i = 0; key_hex[i] && key_hex[i + 1]; i += 2) {
                unsigned int b;
                sscanf(key_hex + i, "%2x", &b);
                key[len++] = (unsigned char)b;
            }
        }
        uint64_t h = XXH3_64bits_withSeed(key, len, seed);
        uint64_t got[6] = {h, h >> 48, h >> 56, (((h >> 32) & 0xffff) * 59) >> 16, ((h >> 16) & 0xffff) % 4, h & 15};
        const char *names[6] = {"hash", "tag", "cell tag", "home", "stash", "dir"};
        for (int i = 0; i < 6; i++)
            if (got[i] != want[i])
                die("golden vector %d (key %s): %s 0x%llx, want 0x%llx", n, key_hex, names[i],
                    (unsigned long long)got[i], want[i]);
        n++;
    }
    fclose(f);
    if (n == 0) die("%s: no vectors", path);
    return n;
}

static void le64(uint64_t v, unsigned char out[8]) {
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t unle64(const unsigned char b[8]) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | b[i];
    return v;
}

/* Waits (bounded) until key is in map; returns its length, the value in buf. */
static size_t wait_map(shoal_map *m, const void *key, size_t klen, unsigned char *buf, size_t cap, double start,
                       const char *what) {
    for (;;) {
        size_t len = 0;
        shoal_status st = shoal_map_get(m, key, klen, buf, cap, &len);
        if (st == SHOAL_OK) return len;
        if (st != SHOAL_NOT_FOUND) check(st, what);
        if (now() - start > WAIT_SECONDS) die("timed out waiting for %s", what);
        pause_briefly();
    }
}

static void wait_fixed(shoal_fixed *m, const void *key, size_t klen, unsigned char *buf, size_t vlen, double start,
                       const char *what) {
    for (;;) {
        shoal_status st = shoal_fixed_get(m, key, klen, buf, vlen);
        if (st == SHOAL_OK) return;
        if (st != SHOAL_NOT_FOUND) check(st, what);
        if (now() - start > WAIT_SECONDS) die("timed out waiting for %s", what);
        pause_briefly();
    }
}

static void fixed_key(const char *lang, uint64_t i, char out[17]) {
    char pad[11];
    size_t n = strlen(lang);
    memset(pad, '.', 10);
    memcpy(pad, lang, n < 10 ? n : 10);
    pad[10] = 0;
    snprintf(out, 17, "%s%06llu", pad, (unsigned long long)i);
}

static shoal_map *open_map(shoal_store *s, const char *name, uint32_t kt, uint32_t vt) {
    shoal_map_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.key_type = kt;
    o.value_type = vt;
    shoal_map *m = NULL;
    check(shoal_map_open(s, name, SHOAL_MAP_CREATE, &o, &m), name);
    return m;
}

static shoal_fixed *open_fixed(shoal_store *s, const char *name, size_t ks, size_t vs, uint32_t kt, uint32_t vt) {
    shoal_fixed_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.key_type = kt;
    o.value_type = vt;
    shoal_fixed *f = NULL;
    check(shoal_fixed_open_with(s, name, ks, vs, SHOAL_MAP_CREATE, &o, &f), name);
    return f;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: worker STORE LANG LANGS KEYS ADDS VECTORS\n");
        return 2;
    }
    g_lang = argv[2];
    const char *lang = argv[2];
    char *langs[16];
    int n_langs = 0, id = -1;
    char *list = strdup(argv[3]);
    for (char *t = strtok(list, ","); t && n_langs < 16; t = strtok(NULL, ",")) {
        if (strcmp(t, lang) == 0) id = n_langs;
        langs[n_langs++] = t;
    }
    if (id < 0) die("%s is not in %s", lang, argv[3]);
    uint64_t keys = strtoull(argv[4], NULL, 10), adds = strtoull(argv[5], NULL, 10);
    int vectors = golden(argv[6]);
    double start = now();

    shoal_store *s = NULL;
    check(shoal_store_open(argv[1], NULL, &s), "open");
    shoal_map *sync = open_map(s, "mx_sync", SHOAL_TYPE_UTF8, SHOAL_TYPE_UTF8);
    shoal_map *var = open_map(s, "mx_var", SHOAL_TYPE_UTF8, SHOAL_TYPE_UTF8);
    shoal_fixed *fixed = open_fixed(s, "mx_fixed", 16, 8, SHOAL_TYPE_BYTES, SHOAL_TYPE_F64);
    shoal_fixed *inl = open_fixed(s, "mx_inline", 8, 8, SHOAL_TYPE_U64, SHOAL_TYPE_I64);
    shoal_fixed *count_fixed = open_fixed(s, "mx_count_fixed", 8, 8, SHOAL_TYPE_U64, SHOAL_TYPE_I64);
    shoal_map *count_var = open_map(s, "mx_count_var", SHOAL_TYPE_UTF8, SHOAL_TYPE_I64);
    uint32_t kt = 0, vt = 0;
    check(shoal_fixed_types(inl, &kt, NULL, &vt, NULL), "mx_inline types");
    if (kt != SHOAL_TYPE_U64 || vt != SHOAL_TYPE_I64) die("mx_inline records types %u/%u", kt, vt);

    char k[64], v[128], what[160];
    unsigned char buf[256];
    snprintf(k, sizeof k, "ready/%s", lang);
    check(shoal_map_put(sync, k, strlen(k), "1", 1, NULL), "ready");
    for (int l = 0; l < n_langs; l++) {
        snprintf(k, sizeof k, "ready/%s", langs[l]);
        snprintf(what, sizeof what, "%s to start (%s)", langs[l], k);
        wait_map(sync, k, strlen(k), buf, sizeof buf, start, what);
    }

    for (uint64_t i = 0; i < keys; i++) {
        snprintf(k, sizeof k, "%s/%llu", lang, (unsigned long long)i);
        snprintf(v, sizeof v, "%s:%llu:\xc3\xa9\xe2\x82\xac", lang, (unsigned long long)i);
        check(shoal_map_put(var, k, strlen(k), v, strlen(v), NULL), "mx_var put");
        char fk[17];
        fixed_key(lang, i, fk);
        double d = (double)((uint64_t)id * 1000 + i) + 0.25;
        uint64_t bits;
        memcpy(&bits, &d, 8);
        unsigned char fv[8], ik[8], iv[8];
        le64(bits, fv);
        check(shoal_fixed_put(fixed, fk, 16, fv, 8, NULL), "mx_fixed put");
        le64(((uint64_t)(id + 1) << 32) | i, ik);
        le64((uint64_t)(-(int64_t)((uint64_t)id * 1000 + i) - 1), iv);
        check(shoal_fixed_put(inl, ik, 8, iv, 8, NULL), "mx_inline put");
    }
    for (uint64_t r = 0; r < adds; r++) {
        unsigned char ck[8];
        int64_t out;
        le64(r % 4, ck);
        check(shoal_fixed_add(count_fixed, ck, 8, 1, &out), "mx_count_fixed add");
        check(shoal_map_add(count_var, "total", 5, 1, &out), "mx_count_var add");
    }
    snprintf(k, sizeof k, "done/%s", lang);
    check(shoal_map_put(sync, k, strlen(k), "1", 1, NULL), "done");

    uint64_t checked = 0;
    for (int o = 0; o < n_langs; o++) {
        const char *other = langs[o];
        for (uint64_t i = 0; i < keys; i++) {
            snprintf(k, sizeof k, "%s/%llu", other, (unsigned long long)i);
            snprintf(v, sizeof v, "%s:%llu:\xc3\xa9\xe2\x82\xac", other, (unsigned long long)i);
            snprintf(what, sizeof what, "%s's key \"%s\" in mx_var", other, k);
            size_t len = wait_map(var, k, strlen(k), buf, sizeof buf, start, what);
            if (len != strlen(v) || memcmp(buf, v, len) != 0)
                die("%s's key \"%s\" in mx_var: \"%.*s\", want \"%s\"", other, k, (int)len, buf, v);
            char fk[17];
            fixed_key(other, i, fk);
            snprintf(what, sizeof what, "%s's key \"%s\" in mx_fixed", other, fk);
            wait_fixed(fixed, fk, 16, buf, 8, start, what);
            uint64_t bits = unle64(buf);
            double got, want = (double)((uint64_t)o * 1000 + i) + 0.25;
            memcpy(&got, &bits, 8);
            if (got != want) die("%s's key \"%s\" in mx_fixed: %g, want %g", other, fk, got, want);
            unsigned char ik[8];
            uint64_t ikey = ((uint64_t)(o + 1) << 32) | i;
            le64(ikey, ik);
            snprintf(what, sizeof what, "%s's key %llu in mx_inline", other, (unsigned long long)ikey);
            wait_fixed(inl, ik, 8, buf, 8, start, what);
            int64_t gi = (int64_t)unle64(buf), wi = -(int64_t)((uint64_t)o * 1000 + i) - 1;
            if (gi != wi)
                die("%s's key %llu in mx_inline: %lld, want %lld", other, (unsigned long long)ikey, (long long)gi,
                    (long long)wi);
            checked += 3;
        }
    }

    for (int l = 0; l < n_langs; l++) {
        snprintf(k, sizeof k, "done/%s", langs[l]);
        snprintf(what, sizeof what, "%s to finish (%s)", langs[l], k);
        wait_map(sync, k, strlen(k), buf, sizeof buf, start, what);
    }
    size_t len = 0;
    check(shoal_map_get(count_var, "total", 5, buf, sizeof buf, &len), "mx_count_var get");
    int64_t total = len == 8 ? (int64_t)unle64(buf) : -1;
    if (total != (int64_t)(n_langs * adds)) die("mx_count_var \"total\": %lld, want %llu", (long long)total,
                                                (unsigned long long)(n_langs * adds));
    for (uint64_t c = 0; c < 4; c++) {
        unsigned char ck[8];
        le64(c, ck);
        check(shoal_fixed_get(count_fixed, ck, 8, buf, 8), "mx_count_fixed get");
        int64_t got = (int64_t)unle64(buf);
        int64_t want = (int64_t)(n_langs * (adds / 4 + (c < adds % 4 ? 1 : 0)));
        if (got != want) die("mx_count_fixed key %llu: %lld, want %lld", (unsigned long long)c, (long long)got,
                             (long long)want);
    }
    shoal_map_close(sync);
    shoal_map_close(var);
    shoal_map_close(count_var);
    shoal_fixed_close(fixed);
    shoal_fixed_close(inl);
    shoal_fixed_close(count_fixed);
    shoal_store_close(s);
    free(list);
    printf("matrix %s: ok (%d golden vectors; %llu keys of %d languages; counters %llu)\n", lang, vectors,
           (unsigned long long)checked, n_langs, (unsigned long long)(n_langs * adds));
    return 0;
}
