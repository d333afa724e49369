#include <string.h>
#include "helpers.h"
#include "_cgo_export.h"

/* Keys per call of the library's get_many: the shoal_bytes array lives on this stack. */
#define GOSHOAL_CHUNK 256

struct many_ctx {
    unsigned char *buf;
    size_t cap;
    size_t used; /* bytes the values need so far, even past cap */
    size_t *lens;
};

/* Values go one after the other into buf; once one does not fit, the rest are only
 * counted, so the Go side learns the size to retry with. */
static void many_cb(void *vctx, size_t index, const void *value, size_t len, bool present) {
    struct many_ctx *ctx = vctx;
    if (!present) {
        ctx->lens[index] = GOSHOAL_ABSENT;
        return;
    }
    ctx->lens[index] = len;
    if (ctx->used <= ctx->cap && len <= ctx->cap - ctx->used && len > 0) {
        memcpy(ctx->buf + ctx->used, value, len);
    }
    ctx->used += len;
}

shoal_status goshoal_map_get_many(const shoal_map *map, const unsigned char *keys,
                                  const size_t *key_lens, size_t n, unsigned char *buf,
                                  size_t cap, size_t *lens, size_t *total) {
    shoal_bytes kb[GOSHOAL_CHUNK];
    struct many_ctx ctx = {buf, cap, 0, lens};
    size_t off = 0;
    for (size_t base = 0; base < n; base += GOSHOAL_CHUNK) {
        size_t c = n - base < GOSHOAL_CHUNK ? n - base : GOSHOAL_CHUNK;
        for (size_t i = 0; i < c; i++) {
            kb[i].data = keys + off;
            kb[i].len = key_lens[base + i];
            off += key_lens[base + i];
        }
        ctx.lens = lens + base;
        shoal_status st = shoal_map_get_many(map, kb, c, many_cb, &ctx);
        if (st != SHOAL_OK) {
            return st;
        }
    }
    *total = ctx.used;
    return SHOAL_OK;
}

struct fixed_many_ctx {
    unsigned char *buf;
    size_t value_size;
    unsigned char *present;
};

static void fixed_many_cb(void *vctx, size_t index, const void *value, size_t len, bool present) {
    struct fixed_many_ctx *ctx = vctx;
    ctx->present[index] = present;
    if (present && len > 0) {
        memcpy(ctx->buf + index * ctx->value_size, value, len);
    }
}

shoal_status goshoal_fixed_get_many(const shoal_fixed *fixed, const unsigned char *keys,
                                    size_t key_size, size_t n, unsigned char *buf,
                                    size_t value_size, unsigned char *present) {
    shoal_bytes kb[GOSHOAL_CHUNK];
    for (size_t base = 0; base < n; base += GOSHOAL_CHUNK) {
        size_t c = n - base < GOSHOAL_CHUNK ? n - base : GOSHOAL_CHUNK;
        for (size_t i = 0; i < c; i++) {
            kb[i].data = keys + (base + i) * key_size;
            kb[i].len = key_size;
        }
        struct fixed_many_ctx ctx = {buf + base * value_size, value_size, present + base};
        shoal_status st = shoal_fixed_get_many(fixed, kb, c, fixed_many_cb, &ctx);
        if (st != SHOAL_OK) {
            return st;
        }
    }
    return SHOAL_OK;
}

/* The shoal_update_fn of both update calls: hands the current value to the Go function
 * registered under the handle in ctx (a cgo.Handle, an integer, never a Go pointer). */
static int update_tramp(void *ctx, const void *current, size_t current_len, bool present,
                        const void **new_value, size_t *new_len) {
    return goshoalUpdate((uintptr_t)ctx, (void *)current, current_len, present,
                         (void **)new_value, new_len);
}

shoal_status goshoal_map_update(const shoal_map *map, const void *key, size_t key_len,
                                uintptr_t handle) {
    return shoal_map_update(map, key, key_len, update_tramp, (void *)handle);
}

shoal_status goshoal_fixed_update(const shoal_fixed *fixed, const void *key, size_t key_len,
                                  uintptr_t handle) {
    return shoal_fixed_update(fixed, key, key_len, update_tramp, (void *)handle);
}

static int name_tramp(void *ctx, const char *text, size_t len) {
    return goshoalName((uintptr_t)ctx, (char *)text, len);
}

shoal_status goshoal_map_names(const shoal_store *store, uintptr_t handle) {
    return shoal_store_maps(store, name_tramp, (void *)handle);
}

shoal_status goshoal_store_check(const shoal_store *store, uint64_t *problems,
                                 uintptr_t handle) {
    shoal_check_report report;
    memset(&report, 0, sizeof report);
    report.struct_size = sizeof report;
    shoal_status st = shoal_store_check(store, &report, name_tramp, (void *)handle);
    *problems = report.problems;
    return st;
}
