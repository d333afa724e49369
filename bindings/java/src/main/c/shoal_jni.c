/*
 * The JNI shim of the Java binding (Java 17-21; Java 22+ calls the C API through the
 * Foreign Function & Memory API instead). One function per native method of
 * io.shoal.internal.JniNative: it copies the Java arrays in, calls the C API, and on a
 * failure throws the exception io.shoal.internal.Status.exception builds, so that both
 * backends raise the same exceptions. Arrays are copied rather than pinned: a call may
 * wait on a lock (up to the lock timeout), and a pinned array would hold the GC up.
 */
#include <jni.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shoal.h"

#define FN(name) JNICALL Java_io_shoal_internal_JniNative_##name##0

static jclass g_status;        /* io.shoal.internal.Status */
static jmethodID g_exception;  /* Status.exceptionUtf8(int, byte[]) */
static jclass g_bytes;         /* byte[] */

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *reserved) {
    (void)reserved;
    JNIEnv *env;
    if ((*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_8) != JNI_OK) return JNI_ERR;
    jclass c = (*env)->FindClass(env, "io/shoal/internal/Status");
    if (!c) return JNI_ERR;
    g_status = (*env)->NewGlobalRef(env, c);
    g_exception = (*env)->GetStaticMethodID(env, c, "exceptionUtf8", "(I[B)Lio/shoal/ShoalException;");
    jclass b = (*env)->FindClass(env, "[B");
    if (!g_exception || !b) return JNI_ERR;
    g_bytes = (*env)->NewGlobalRef(env, b);
    return JNI_VERSION_1_8;
}

/* Throws the exception of a failed call (status st) on this thread. */
static void fail(JNIEnv *env, shoal_status st) {
    if ((*env)->ExceptionCheck(env)) return;
    /* The message is UTF-8, which JNI's NewStringUTF does not take (it wants modified
     * UTF-8): Java decodes the bytes. */
    const char *m = shoal_last_error_message();
    jbyteArray msg = (*env)->NewByteArray(env, (jsize)strlen(m));
    if (!msg) return;
    (*env)->SetByteArrayRegion(env, msg, 0, (jsize)strlen(m), (const jbyte *)m);
    jobject ex = (*env)->CallStaticObjectMethod(env, g_status, g_exception, (jint)st, msg);
    if (ex && !(*env)->ExceptionCheck(env)) (*env)->Throw(env, (jthrowable)ex);
}

static void fail_oom(JNIEnv *env) {
    jclass c = (*env)->FindClass(env, "java/lang/OutOfMemoryError");
    if (c) (*env)->ThrowNew(env, c, "shoal: native allocation failed");
}

/* A Java byte[] copied in: small ones on the stack. */
typedef struct {
    char stack[256];
    char *p;
    size_t n;
    int null;
} in_t;

static int in_get(JNIEnv *env, jbyteArray a, in_t *b) {
    b->null = a == NULL;
    b->n = 0;
    b->p = b->stack;
    if (!a) return 1;
    jsize n = (*env)->GetArrayLength(env, a);
    b->n = (size_t)n;
    if (b->n > sizeof b->stack) {
        b->p = malloc(b->n);
        if (!b->p) {
            fail_oom(env);
            return 0;
        }
    }
    (*env)->GetByteArrayRegion(env, a, 0, n, (jbyte *)b->p);
    return 1;
}

static void in_free(in_t *b) {
    if (b->p && b->p != b->stack) free(b->p);
    b->p = NULL;
}

static jbyteArray out_bytes(JNIEnv *env, const void *p, size_t n) {
    if (n > (size_t)INT32_MAX - 8) {
        fail(env, SHOAL_INVALID);
        return NULL;
    }
    jbyteArray a = (*env)->NewByteArray(env, (jsize)n);
    if (a && n) (*env)->SetByteArrayRegion(env, a, 0, (jsize)n, (const jbyte *)p);
    return a;
}

/* A NUL-terminated UTF-8 string passed as a byte[] (Java appends the NUL). */
#define IN_STR(var, arr)                          \
    in_t var##_b;                                 \
    if (!in_get(env, arr, &var##_b)) return 0;    \
    const char *var = var##_b.null ? NULL : var##_b.p;

/* ---- store ------------------------------------------------------------------------ */

JNIEXPORT jbyteArray FN(version)(JNIEnv *env, jclass c) {
    (void)c;
    const char *v = shoal_version();
    return out_bytes(env, v, strlen(v));
}

JNIEXPORT jlong FN(storeOpen)(JNIEnv *env, jclass c, jbyteArray path_a, jlongArray opts_a) {
    (void)c;
    jlong o[12] = {0};
    (*env)->GetLongArrayRegion(env, opts_a, 0, 12, o);
    if ((*env)->ExceptionCheck(env)) return 0;
    shoal_options opts;
    memset(&opts, 0, sizeof opts);
    opts.struct_size = sizeof opts;
    opts.open_mode = (uint32_t)o[0];
    opts.file_mode = (uint32_t)o[1];
    opts.max_size = (uint64_t)o[2];
    opts.initial_size = (uint64_t)o[3];
    opts.chunk_size = (uint64_t)o[4];
    opts.lock_timeout_ms = (uint32_t)o[5];
    opts.max_processes = (uint32_t)o[6];
    opts.max_threads = (uint32_t)o[7];
    opts.max_maps = (uint32_t)o[8];
    opts.checksums = (uint32_t)o[9];
    opts.sync_writes = (uint32_t)o[10];
    opts.pretouch = (uint32_t)o[11];
    IN_STR(path, path_a);
    shoal_store *s = NULL;
    shoal_status st = shoal_store_open(path, &opts, &s);
    in_free(&path_b);
    if (st != SHOAL_OK) {
        fail(env, st);
        return 0;
    }
    return (jlong)(intptr_t)s;
}

JNIEXPORT void FN(storeClose)(JNIEnv *env, jclass c, jlong s) {
    (void)env, (void)c;
    shoal_store_close((shoal_store *)(intptr_t)s);
}

JNIEXPORT jbyteArray FN(storePath)(JNIEnv *env, jclass c, jlong s) {
    (void)c;
    char buf[512];
    size_t len = 0;
    shoal_status st = shoal_store_path((shoal_store *)(intptr_t)s, buf, sizeof buf, &len);
    if (st == SHOAL_BUFFER_TOO_SMALL) {
        char *big = malloc(len + 1);
        if (!big) {
            fail_oom(env);
            return NULL;
        }
        st = shoal_store_path((shoal_store *)(intptr_t)s, big, len + 1, &len);
        jbyteArray r = st == SHOAL_OK ? out_bytes(env, big, len) : NULL;
        free(big);
        if (st != SHOAL_OK) fail(env, st);
        return r;
    }
    if (st != SHOAL_OK) {
        fail(env, st);
        return NULL;
    }
    return out_bytes(env, buf, len);
}

typedef struct {
    JNIEnv *env;
    jobjectArray arr;
    jsize n, cap;
    int failed;
} list_t;

static int maps_cb(void *ctx, const char *text, size_t len) {
    list_t *l = ctx;
    JNIEnv *env = l->env;
    if (l->n == l->cap) {
        jsize cap = l->cap ? l->cap * 2 : 16;
        jobjectArray a = (*env)->NewObjectArray(env, cap, g_bytes, NULL);
        if (!a) {
            l->failed = 1;
            return 1;
        }
        for (jsize i = 0; i < l->n; i++) {
            jobject e = (*env)->GetObjectArrayElement(env, l->arr, i);
            (*env)->SetObjectArrayElement(env, a, i, e);
            (*env)->DeleteLocalRef(env, e);
        }
        if (l->arr) (*env)->DeleteLocalRef(env, l->arr);
        l->arr = a;
        l->cap = cap;
    }
    jbyteArray b = out_bytes(env, text, len);
    if (!b) {
        l->failed = 1;
        return 1;
    }
    (*env)->SetObjectArrayElement(env, l->arr, l->n++, b);
    (*env)->DeleteLocalRef(env, b);
    return 0;
}

JNIEXPORT jobjectArray FN(storeMaps)(JNIEnv *env, jclass c, jlong s) {
    (void)c;
    list_t l = {env, NULL, 0, 0, 0};
    shoal_status st = shoal_store_maps((shoal_store *)(intptr_t)s, maps_cb, &l);
    if (l.failed) return NULL;
    if (st != SHOAL_OK) {
        fail(env, st);
        return NULL;
    }
    jobjectArray r = (*env)->NewObjectArray(env, l.n, g_bytes, NULL);
    for (jsize i = 0; r && i < l.n; i++) {
        jobject e = (*env)->GetObjectArrayElement(env, l.arr, i);
        (*env)->SetObjectArrayElement(env, r, i, e);
        (*env)->DeleteLocalRef(env, e);
    }
    return r;
}

JNIEXPORT void FN(storeDropMap)(JNIEnv *env, jclass c, jlong s, jbyteArray name_a) {
    (void)c;
    in_t name_b;
    if (!in_get(env, name_a, &name_b)) return;
    shoal_status st = shoal_store_drop_map((shoal_store *)(intptr_t)s, name_b.p);
    in_free(&name_b);
    if (st != SHOAL_OK) fail(env, st);
}

JNIEXPORT void FN(storeFlush)(JNIEnv *env, jclass c, jlong s) {
    (void)c;
    shoal_status st = shoal_store_flush((shoal_store *)(intptr_t)s);
    if (st != SHOAL_OK) fail(env, st);
}

JNIEXPORT void FN(storeDestroy)(JNIEnv *env, jclass c, jbyteArray path_a) {
    (void)c;
    in_t b;
    if (!in_get(env, path_a, &b)) return;
    shoal_status st = shoal_store_destroy(b.p);
    in_free(&b);
    if (st != SHOAL_OK) fail(env, st);
}

JNIEXPORT jlongArray FN(mapKind)(JNIEnv *env, jclass c, jlong s, jbyteArray name_a) {
    (void)c;
    IN_STR(name, name_a);
    uint32_t kind = 0;
    size_t ks = 0, vs = 0;
    shoal_status st = shoal_map_kind((shoal_store *)(intptr_t)s, name, &kind, &ks, &vs);
    in_free(&name_b);
    if (st == SHOAL_NOT_FOUND) return NULL;
    if (st != SHOAL_OK) {
        fail(env, st);
        return NULL;
    }
    jlong v[3] = {(jlong)kind, (jlong)ks, (jlong)vs};
    jlongArray r = (*env)->NewLongArray(env, 3);
    if (r) (*env)->SetLongArrayRegion(env, r, 0, 3, v);
    return r;
}

/* ---- variable-size maps ------------------------------------------------------------ */

#define MAP(h) ((shoal_map *)(intptr_t)(h))
#define FIX(h) ((shoal_fixed *)(intptr_t)(h))

/* Reads {key code, key tag, value code, value tag} (NULL: none) into the four fields. */
static int types_in(JNIEnv *env, jlongArray types_a, uint32_t *kt, uint64_t *ktag, uint32_t *vt,
                    uint64_t *vtag) {
    jlong t[4] = {0, 0, 0, 0};
    if (types_a) {
        if ((*env)->GetArrayLength(env, types_a) != 4) {
            fail(env, SHOAL_INVALID);
            return 0;
        }
        (*env)->GetLongArrayRegion(env, types_a, 0, 4, t);
    }
    *kt = (uint32_t)t[0], *ktag = (uint64_t)t[1], *vt = (uint32_t)t[2], *vtag = (uint64_t)t[3];
    return 1;
}

/* {key code, key tag, value code, value tag} as a new long[4]. */
static jlongArray types_out(JNIEnv *env, uint32_t kt, uint64_t ktag, uint32_t vt, uint64_t vtag) {
    jlong v[4] = {(jlong)kt, (jlong)ktag, (jlong)vt, (jlong)vtag};
    jlongArray r = (*env)->NewLongArray(env, 4);
    if (r) (*env)->SetLongArrayRegion(env, r, 0, 4, v);
    return r;
}

JNIEXPORT jlong FN(mapOpen)(JNIEnv *env, jclass c, jlong s, jbyteArray name_a, jboolean create,
                            jboolean uids, jlongArray types_a) {
    (void)c;
    shoal_map_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.uids = uids ? 1 : 0;
    if (!types_in(env, types_a, &o.key_type, &o.key_tag, &o.value_type, &o.value_tag)) return 0;
    IN_STR(name, name_a);
    shoal_map *m = NULL;
    shoal_status st = shoal_map_open((shoal_store *)(intptr_t)s, name, create ? SHOAL_MAP_CREATE : 0, &o, &m);
    in_free(&name_b);
    if (st != SHOAL_OK) {
        fail(env, st);
        return 0;
    }
    return (jlong)(intptr_t)m;
}

JNIEXPORT jlongArray FN(mapTypes)(JNIEnv *env, jclass c, jlong m) {
    (void)c;
    uint32_t kt = 0, vt = 0;
    uint64_t ktag = 0, vtag = 0;
    shoal_status st = shoal_map_types(MAP(m), &kt, &ktag, &vt, &vtag);
    if (st != SHOAL_OK) {
        fail(env, st);
        return NULL;
    }
    return types_out(env, kt, ktag, vt, vtag);
}

JNIEXPORT jlong FN(mapWithTimeout)(JNIEnv *env, jclass c, jlong m, jint ms) {
    (void)c;
    shoal_map *out = NULL;
    shoal_status st = shoal_map_with_timeout(MAP(m), (uint32_t)ms, &out);
    if (st != SHOAL_OK) {
        fail(env, st);
        return 0;
    }
    return (jlong)(intptr_t)out;
}

JNIEXPORT void FN(mapClose)(JNIEnv *env, jclass c, jlong m) {
    (void)env, (void)c;
    shoal_map_close(MAP(m));
}

typedef struct {
    JNIEnv *env;
    jbyteArray out;
} value_ctx;

static void value_cb(void *ctx, const void *value, size_t len) {
    value_ctx *v = ctx;
    v->out = out_bytes(v->env, value, len);
}

JNIEXPORT jbyteArray FN(mapGet)(JNIEnv *env, jclass c, jlong m, jbyteArray key_a) {
    (void)c;
    in_t k;
    if (!in_get(env, key_a, &k)) return NULL;
    value_ctx v = {env, NULL};
    shoal_status st = shoal_map_get_cb(MAP(m), k.p, k.n, value_cb, &v);
    in_free(&k);
    if (st == SHOAL_OK) return v.out;
    if (st != SHOAL_NOT_FOUND) fail(env, st);
    return NULL;
}

/* Calls that take a key and a value and answer yes/no through a status. */
#define KV_CALL(fnname, expr, yes, no)                                                   \
    JNIEXPORT jboolean FN(fnname)(JNIEnv * env, jclass c, jlong h, jbyteArray key_a,     \
                                  jbyteArray val_a) {                                    \
        (void)c;                                                                         \
        in_t k, v;                                                                       \
        if (!in_get(env, key_a, &k)) return JNI_FALSE;                                   \
        if (!in_get(env, val_a, &v)) {                                                   \
            in_free(&k);                                                                 \
            return JNI_FALSE;                                                            \
        }                                                                                \
        bool flag = false;                                                               \
        (void)flag;                                                                      \
        shoal_status st = expr;                                                          \
        in_free(&k);                                                                     \
        in_free(&v);                                                                     \
        if (st == SHOAL_OK) return (yes);                                                \
        if (st == (no)) return JNI_FALSE;                                                \
        fail(env, st);                                                                   \
        return JNI_FALSE;                                                                \
    }

KV_CALL(mapPut, shoal_map_put(MAP(h), k.p, k.n, v.p, v.n, &flag), flag ? JNI_TRUE : JNI_FALSE, SHOAL_OK)
KV_CALL(mapPutIfAbsent, shoal_map_put_if_absent(MAP(h), k.p, k.n, v.p, v.n), JNI_TRUE, SHOAL_EXISTS)
KV_CALL(mapPutIfPresent, shoal_map_put_if_present(MAP(h), k.p, k.n, v.p, v.n), JNI_TRUE, SHOAL_NOT_FOUND)
KV_CALL(fixedPut, shoal_fixed_put(FIX(h), k.p, k.n, v.p, v.n, &flag), flag ? JNI_TRUE : JNI_FALSE, SHOAL_OK)
KV_CALL(fixedPutIfAbsent, shoal_fixed_put_if_absent(FIX(h), k.p, k.n, v.p, v.n), JNI_TRUE, SHOAL_EXISTS)
KV_CALL(fixedPutIfPresent, shoal_fixed_put_if_present(FIX(h), k.p, k.n, v.p, v.n), JNI_TRUE, SHOAL_NOT_FOUND)

/* compare_and_swap: a null expected means "absent", a null update "remove". */
#define CAS_CALL(fnname, cas)                                                            \
    JNIEXPORT jboolean FN(fnname)(JNIEnv * env, jclass c, jlong h, jbyteArray key_a,     \
                                  jbyteArray exp_a, jbyteArray new_a) {                  \
        (void)c;                                                                         \
        in_t k, e, n;                                                                    \
        if (!in_get(env, key_a, &k)) return JNI_FALSE;                                   \
        if (!in_get(env, exp_a, &e)) {                                                   \
            in_free(&k);                                                                 \
            return JNI_FALSE;                                                            \
        }                                                                                \
        if (!in_get(env, new_a, &n)) {                                                   \
            in_free(&k);                                                                 \
            in_free(&e);                                                                 \
            return JNI_FALSE;                                                            \
        }                                                                                \
        uint32_t flags = (e.null ? SHOAL_CAS_EXPECT_ABSENT : 0) | (n.null ? SHOAL_CAS_REMOVE : 0); \
        shoal_status st = cas(h, k.p, k.n, e.p, e.n, n.p, n.n, flags);                   \
        in_free(&k);                                                                     \
        in_free(&e);                                                                     \
        in_free(&n);                                                                     \
        if (st == SHOAL_OK) return JNI_TRUE;                                             \
        if (st != SHOAL_MISMATCH) fail(env, st);                                         \
        return JNI_FALSE;                                                                \
    }

#define MAP_CAS(h, ...) shoal_map_compare_and_swap(MAP(h), __VA_ARGS__)
#define FIX_CAS(h, ...) shoal_fixed_compare_and_swap(FIX(h), __VA_ARGS__)
CAS_CALL(mapCas, MAP_CAS)
CAS_CALL(fixedCas, FIX_CAS)

/* Calls that take a key only and answer yes/no. */
#define K_CALL(fnname, expr, yes, no)                                                    \
    JNIEXPORT jboolean FN(fnname)(JNIEnv * env, jclass c, jlong h, jbyteArray key_a) {   \
        (void)c;                                                                         \
        in_t k;                                                                          \
        if (!in_get(env, key_a, &k)) return JNI_FALSE;                                   \
        bool flag = false;                                                               \
        (void)flag;                                                                      \
        shoal_status st = expr;                                                          \
        in_free(&k);                                                                     \
        if (st == SHOAL_OK) return (yes);                                                \
        if (st == (no)) return JNI_FALSE;                                                \
        fail(env, st);                                                                   \
        return JNI_FALSE;                                                                \
    }

K_CALL(mapRemove, shoal_map_remove(MAP(h), k.p, k.n, NULL, 0, NULL), JNI_TRUE, SHOAL_NOT_FOUND)
K_CALL(mapContains, shoal_map_contains(MAP(h), k.p, k.n, &flag), flag ? JNI_TRUE : JNI_FALSE, SHOAL_OK)
K_CALL(fixedRemove, shoal_fixed_remove(FIX(h), k.p, k.n), JNI_TRUE, SHOAL_NOT_FOUND)
K_CALL(fixedContains, shoal_fixed_contains(FIX(h), k.p, k.n, &flag), flag ? JNI_TRUE : JNI_FALSE, SHOAL_OK)

#define ADD_CALL(fnname, addfn, type)                                                    \
    JNIEXPORT jlong FN(fnname)(JNIEnv * env, jclass c, jlong h, jbyteArray key_a, jlong delta) { \
        (void)c;                                                                         \
        in_t k;                                                                          \
        if (!in_get(env, key_a, &k)) return 0;                                           \
        int64_t r = 0;                                                                   \
        shoal_status st = addfn((type *)(intptr_t)h, k.p, k.n, (int64_t)delta, &r);      \
        in_free(&k);                                                                     \
        if (st != SHOAL_OK) fail(env, st);                                               \
        return (jlong)r;                                                                 \
    }
ADD_CALL(mapAdd, shoal_map_add, shoal_map)
ADD_CALL(fixedAdd, shoal_fixed_add, shoal_fixed)

JNIEXPORT jlong FN(mapLen)(JNIEnv *env, jclass c, jlong h) {
    (void)c;
    uint64_t n = 0;
    shoal_status st = shoal_map_len(MAP(h), &n);
    if (st != SHOAL_OK) fail(env, st);
    return (jlong)n;
}

JNIEXPORT jlong FN(fixedLen)(JNIEnv *env, jclass c, jlong h) {
    (void)c;
    uint64_t n = 0;
    shoal_status st = shoal_fixed_len(FIX(h), &n);
    if (st != SHOAL_OK) fail(env, st);
    return (jlong)n;
}

JNIEXPORT void FN(mapClear)(JNIEnv *env, jclass c, jlong h) {
    (void)c;
    shoal_status st = shoal_map_clear(MAP(h));
    if (st != SHOAL_OK) fail(env, st);
}

JNIEXPORT void FN(fixedClear)(JNIEnv *env, jclass c, jlong h) {
    (void)c;
    shoal_status st = shoal_fixed_clear(FIX(h));
    if (st != SHOAL_OK) fail(env, st);
}

/* ---- batches ----------------------------------------------------------------------- */

/* Copies a byte[][] into one allocation: n shoal_bytes followed by the bytes. */
static shoal_bytes *keys_in(JNIEnv *env, jobjectArray keys_a, size_t *n_out) {
    jsize n = (*env)->GetArrayLength(env, keys_a);
    if (n < 0) n = 0;
    size_t total = 0;
    for (jsize i = 0; i < n; i++) {
        jbyteArray a = (*env)->GetObjectArrayElement(env, keys_a, i);
        if (!a) {
            fail(env, SHOAL_NULL_POINTER);
            return NULL;
        }
        total += (size_t)(*env)->GetArrayLength(env, a);
        (*env)->DeleteLocalRef(env, a);
    }
    shoal_bytes *b = malloc(sizeof(shoal_bytes) * (size_t)(n ? n : 1) + total);
    if (!b) {
        fail_oom(env);
        return NULL;
    }
    char *data = (char *)(b + (n ? n : 1));
    for (jsize i = 0; i < n; i++) {
        jbyteArray a = (*env)->GetObjectArrayElement(env, keys_a, i);
        jsize len = (*env)->GetArrayLength(env, a);
        (*env)->GetByteArrayRegion(env, a, 0, len, (jbyte *)data);
        b[i].data = data;
        b[i].len = (size_t)len;
        data += len;
        (*env)->DeleteLocalRef(env, a);
    }
    *n_out = (size_t)n;
    return b;
}

typedef struct {
    JNIEnv *env;
    jobjectArray out;
} many_ctx;

static void many_cb(void *ctx, size_t index, const void *value, size_t len, bool present) {
    many_ctx *m = ctx;
    if (!present || (*m->env)->ExceptionCheck(m->env)) return;
    jbyteArray b = out_bytes(m->env, value, len);
    if (!b) return;
    (*m->env)->SetObjectArrayElement(m->env, m->out, (jsize)index, b);
    (*m->env)->DeleteLocalRef(m->env, b);
}

JNIEXPORT jobjectArray FN(mapGetMany)(JNIEnv *env, jclass c, jlong h, jobjectArray keys_a) {
    (void)c;
    size_t n = 0;
    shoal_bytes *keys = keys_in(env, keys_a, &n);
    if (!keys) return NULL;
    many_ctx m = {env, (*env)->NewObjectArray(env, (jsize)n, g_bytes, NULL)};
    if (!m.out) {
        free(keys);
        return NULL;
    }
    shoal_status st = shoal_map_get_many(MAP(h), keys, n, many_cb, &m);
    free(keys);
    if (st != SHOAL_OK) {
        fail(env, st);
        return NULL;
    }
    return m.out;
}

JNIEXPORT jobjectArray FN(fixedGetMany)(JNIEnv *env, jclass c, jlong h, jobjectArray keys_a, jint vs) {
    (void)c, (void)vs;
    size_t n = 0;
    shoal_bytes *keys = keys_in(env, keys_a, &n);
    if (!keys) return NULL;
    many_ctx m = {env, (*env)->NewObjectArray(env, (jsize)n, g_bytes, NULL)};
    if (!m.out) {
        free(keys);
        return NULL;
    }
    shoal_status st = shoal_fixed_get_many(FIX(h), keys, n, many_cb, &m);
    free(keys);
    if (st != SHOAL_OK) {
        fail(env, st);
        return NULL;
    }
    return m.out;
}

static shoal_kv *kv_in(JNIEnv *env, jobjectArray keys_a, jobjectArray vals_a, size_t *n_out,
                       shoal_bytes **kb, shoal_bytes **vb) {
    size_t nk = 0, nv = 0;
    *kb = keys_in(env, keys_a, &nk);
    if (!*kb) return NULL;
    *vb = keys_in(env, vals_a, &nv);
    if (!*vb) {
        free(*kb);
        return NULL;
    }
    shoal_kv *kv = malloc(sizeof(shoal_kv) * (nk ? nk : 1));
    if (!kv || nk != nv) {
        free(*kb);
        free(*vb);
        free(kv);
        if (nk != nv) fail(env, SHOAL_INVALID); else fail_oom(env);
        return NULL;
    }
    for (size_t i = 0; i < nk; i++) {
        kv[i].key = (*kb)[i].data;
        kv[i].key_len = (*kb)[i].len;
        kv[i].value = (*vb)[i].data;
        kv[i].value_len = (*vb)[i].len;
    }
    *n_out = nk;
    return kv;
}

JNIEXPORT void FN(mapPutMany)(JNIEnv *env, jclass c, jlong h, jobjectArray keys_a, jobjectArray vals_a) {
    (void)c;
    size_t n = 0;
    shoal_bytes *kb, *vb;
    shoal_kv *kv = kv_in(env, keys_a, vals_a, &n, &kb, &vb);
    if (!kv) return;
    shoal_status st = shoal_map_put_many(MAP(h), kv, n);
    free(kv), free(kb), free(vb);
    if (st != SHOAL_OK) fail(env, st);
}

JNIEXPORT void FN(fixedPutMany)(JNIEnv *env, jclass c, jlong h, jobjectArray keys_a, jobjectArray vals_a) {
    (void)c;
    size_t n = 0;
    shoal_bytes *kb, *vb;
    shoal_kv *kv = kv_in(env, keys_a, vals_a, &n, &kb, &vb);
    if (!kv) return;
    shoal_status st = shoal_fixed_put_many(FIX(h), kv, n);
    free(kv), free(kb), free(vb);
    if (st != SHOAL_OK) fail(env, st);
}

JNIEXPORT jlong FN(mapRemoveMany)(JNIEnv *env, jclass c, jlong h, jobjectArray keys_a) {
    (void)c;
    size_t n = 0;
    shoal_bytes *keys = keys_in(env, keys_a, &n);
    if (!keys) return 0;
    uint64_t removed = 0;
    shoal_status st = shoal_map_remove_many(MAP(h), keys, n, &removed);
    free(keys);
    if (st != SHOAL_OK) fail(env, st);
    return (jlong)removed;
}

JNIEXPORT jlong FN(fixedRemoveMany)(JNIEnv *env, jclass c, jlong h, jobjectArray keys_a) {
    (void)c;
    size_t n = 0;
    shoal_bytes *keys = keys_in(env, keys_a, &n);
    if (!keys) return 0;
    uint64_t removed = 0;
    shoal_status st = shoal_fixed_remove_many(FIX(h), keys, n, &removed);
    free(keys);
    if (st != SHOAL_OK) fail(env, st);
    return (jlong)removed;
}

/* ---- UIDs -------------------------------------------------------------------------- */

JNIEXPORT jlong FN(mapUid)(JNIEnv *env, jclass c, jlong h, jbyteArray key_a) {
    (void)c;
    in_t k;
    if (!in_get(env, key_a, &k)) return 0;
    uint64_t uid = 0;
    shoal_status st = shoal_map_uid(MAP(h), k.p, k.n, &uid);
    in_free(&k);
    if (st == SHOAL_NOT_FOUND) return 0;
    if (st != SHOAL_OK) fail(env, st);
    return (jlong)uid;
}

JNIEXPORT jlong FN(mapPutUid)(JNIEnv *env, jclass c, jlong h, jbyteArray key_a, jbyteArray val_a) {
    (void)c;
    in_t k, v;
    if (!in_get(env, key_a, &k)) return 0;
    if (!in_get(env, val_a, &v)) {
        in_free(&k);
        return 0;
    }
    uint64_t uid = 0;
    shoal_status st = shoal_map_put_uid(MAP(h), k.p, k.n, v.p, v.n, &uid, NULL);
    in_free(&k);
    in_free(&v);
    if (st != SHOAL_OK) fail(env, st);
    return (jlong)uid;
}

JNIEXPORT jbyteArray FN(mapGetByUid)(JNIEnv *env, jclass c, jlong h, jlong uid) {
    (void)c;
    value_ctx v = {env, NULL};
    shoal_status st = shoal_map_get_by_uid_cb(MAP(h), (uint64_t)uid, value_cb, &v);
    if (st != SHOAL_OK) {
        fail(env, st);
        return NULL;
    }
    return v.out;
}

JNIEXPORT jbyteArray FN(mapKeyByUid)(JNIEnv *env, jclass c, jlong h, jlong uid) {
    (void)c;
    char buf[256];
    size_t len = 0;
    shoal_status st = shoal_map_key_by_uid(MAP(h), (uint64_t)uid, buf, sizeof buf, &len);
    if (st == SHOAL_BUFFER_TOO_SMALL) {
        char *big = malloc(len ? len : 1);
        if (!big) {
            fail_oom(env);
            return NULL;
        }
        /* A key never changes under its UID: one retry with its length is enough. */
        st = shoal_map_key_by_uid(MAP(h), (uint64_t)uid, big, len, &len);
        jbyteArray r = st == SHOAL_OK ? out_bytes(env, big, len) : NULL;
        free(big);
        if (st != SHOAL_OK) fail(env, st);
        return r;
    }
    if (st != SHOAL_OK) {
        fail(env, st);
        return NULL;
    }
    return out_bytes(env, buf, len);
}

/* ---- iteration --------------------------------------------------------------------- */

JNIEXPORT jlong FN(iterOpen)(JNIEnv *env, jclass c, jlong h) {
    (void)c;
    shoal_iter *it = NULL;
    shoal_status st = shoal_iter_open(MAP(h), 0, &it);
    if (st != SHOAL_OK) {
        fail(env, st);
        return 0;
    }
    return (jlong)(intptr_t)it;
}

static jobjectArray pair(JNIEnv *env, const void *k, size_t kn, const void *v, size_t vn) {
    jobjectArray r = (*env)->NewObjectArray(env, 2, g_bytes, NULL);
    if (!r) return NULL;
    jbyteArray kb = out_bytes(env, k, kn);
    if (!kb) return NULL;
    jbyteArray vb = out_bytes(env, v, vn);
    if (!vb) return NULL;
    (*env)->SetObjectArrayElement(env, r, 0, kb);
    (*env)->SetObjectArrayElement(env, r, 1, vb);
    return r;
}

JNIEXPORT jobjectArray FN(iterNext)(JNIEnv *env, jclass c, jlong h) {
    (void)c;
    shoal_iter *it = (shoal_iter *)(intptr_t)h;
    char kbuf[256], vbuf[1024];
    char *kp = kbuf, *vp = vbuf;
    size_t kcap = sizeof kbuf, vcap = sizeof vbuf, kn = 0, vn = 0;
    jobjectArray r = NULL;
    for (;;) {
        shoal_status st = shoal_iter_next(it, kp, kcap, &kn, vp, vcap, &vn);
        if (st == SHOAL_OK) {
            r = pair(env, kp, kn, vp, vn);
            break;
        }
        if (st == SHOAL_DONE) break;
        if (st != SHOAL_BUFFER_TOO_SMALL) {
            fail(env, st);
            break;
        }
        /* The entry was not consumed: grow the buffers and ask again. */
        if (kn > kcap) {
            if (kp != kbuf) free(kp);
            kp = malloc(kn);
            kcap = kn;
        }
        if (vn > vcap) {
            if (vp != vbuf) free(vp);
            vp = malloc(vn);
            vcap = vn;
        }
        if (!kp || !vp) {
            fail_oom(env);
            break;
        }
    }
    if (kp != kbuf) free(kp);
    if (vp != vbuf) free(vp);
    return r;
}

JNIEXPORT void FN(iterClose)(JNIEnv *env, jclass c, jlong h) {
    (void)env, (void)c;
    shoal_iter_close((shoal_iter *)(intptr_t)h);
}

/* ---- fixed-size maps --------------------------------------------------------------- */

JNIEXPORT jlong FN(fixedOpen)(JNIEnv *env, jclass c, jlong s, jbyteArray name_a, jint ks, jint vs,
                              jboolean create, jlongArray types_a) {
    (void)c;
    shoal_fixed_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    if (!types_in(env, types_a, &o.key_type, &o.key_tag, &o.value_type, &o.value_tag)) return 0;
    IN_STR(name, name_a);
    shoal_fixed *f = NULL;
    shoal_status st = shoal_fixed_open_with((shoal_store *)(intptr_t)s, name, (size_t)ks, (size_t)vs,
                                            create ? SHOAL_MAP_CREATE : 0, &o, &f);
    in_free(&name_b);
    if (st != SHOAL_OK) {
        fail(env, st);
        return 0;
    }
    return (jlong)(intptr_t)f;
}

JNIEXPORT jlongArray FN(fixedTypes)(JNIEnv *env, jclass c, jlong h) {
    (void)c;
    uint32_t kt = 0, vt = 0;
    uint64_t ktag = 0, vtag = 0;
    shoal_status st = shoal_fixed_types(FIX(h), &kt, &ktag, &vt, &vtag);
    if (st != SHOAL_OK) {
        fail(env, st);
        return NULL;
    }
    return types_out(env, kt, ktag, vt, vtag);
}

JNIEXPORT jlong FN(fixedWithTimeout)(JNIEnv *env, jclass c, jlong h, jint ms) {
    (void)c;
    shoal_fixed *out = NULL;
    shoal_status st = shoal_fixed_with_timeout(FIX(h), (uint32_t)ms, &out);
    if (st != SHOAL_OK) {
        fail(env, st);
        return 0;
    }
    return (jlong)(intptr_t)out;
}

JNIEXPORT void FN(fixedClose)(JNIEnv *env, jclass c, jlong h) {
    (void)env, (void)c;
    shoal_fixed_close(FIX(h));
}

JNIEXPORT jbyteArray FN(fixedGet)(JNIEnv *env, jclass c, jlong h, jbyteArray key_a, jint vs) {
    (void)c;
    in_t k;
    if (!in_get(env, key_a, &k)) return NULL;
    char buf[SHOAL_FIXED_MAX_VALUE_SIZE];
    if (vs < 0 || vs > SHOAL_FIXED_MAX_VALUE_SIZE) vs = 0;
    shoal_status st = shoal_fixed_get(FIX(h), k.p, k.n, buf, (size_t)vs);
    in_free(&k);
    if (st == SHOAL_OK) return out_bytes(env, buf, (size_t)vs);
    if (st != SHOAL_NOT_FOUND) fail(env, st);
    return NULL;
}

JNIEXPORT jlong FN(fixedIterOpen)(JNIEnv *env, jclass c, jlong h) {
    (void)c;
    shoal_fixed_iter *it = NULL;
    shoal_status st = shoal_fixed_iter_open(FIX(h), &it);
    if (st != SHOAL_OK) {
        fail(env, st);
        return 0;
    }
    return (jlong)(intptr_t)it;
}

JNIEXPORT jobjectArray FN(fixedIterNext)(JNIEnv *env, jclass c, jlong h, jint ks, jint vs) {
    (void)c;
    char kbuf[SHOAL_FIXED_MAX_KEY_SIZE], vbuf[SHOAL_FIXED_MAX_VALUE_SIZE];
    if (ks < 0 || ks > SHOAL_FIXED_MAX_KEY_SIZE || vs < 0 || vs > SHOAL_FIXED_MAX_VALUE_SIZE) {
        fail(env, SHOAL_INVALID);
        return NULL;
    }
    shoal_status st = shoal_fixed_iter_next((shoal_fixed_iter *)(intptr_t)h, kbuf, (size_t)ks,
                                            vs ? vbuf : NULL, (size_t)vs);
    if (st == SHOAL_OK) return pair(env, kbuf, (size_t)ks, vbuf, (size_t)vs);
    if (st != SHOAL_DONE) fail(env, st);
    return NULL;
}

JNIEXPORT void FN(fixedIterClose)(JNIEnv *env, jclass c, jlong h) {
    (void)env, (void)c;
    shoal_fixed_iter_close((shoal_fixed_iter *)(intptr_t)h);
}

/* ---- queue sets -------------------------------------------------------------------- */

#define QSET(h) ((shoal_queue *)(intptr_t)(h))
#define E_WORDS 5 /* io.shoal.internal.NativeApi.E_WORDS: data, len, index, from, redelivered */

/* Throws the exception of status st with a message of the shim's own. */
static void fail_msg(JNIEnv *env, shoal_status st, const char *m) {
    if ((*env)->ExceptionCheck(env)) return;
    jbyteArray msg = (*env)->NewByteArray(env, (jsize)strlen(m));
    if (!msg) return;
    (*env)->SetByteArrayRegion(env, msg, 0, (jsize)strlen(m), (const jbyte *)m);
    jobject ex = (*env)->CallStaticObjectMethod(env, g_status, g_exception, (jint)st, msg);
    if (ex && !(*env)->ExceptionCheck(env)) (*env)->Throw(env, (jthrowable)ex);
}

static void elem_out(const shoal_element *e, jlong *w) {
    w[0] = (jlong)(intptr_t)e->data;
    w[1] = (jlong)e->len;
    w[2] = (jlong)e->index;
    w[3] = (jlong)e->from;
    w[4] = (jlong)e->redelivered;
}

static void elem_in(const jlong *w, shoal_element *e) {
    e->data = (uint8_t *)(intptr_t)w[0];
    e->len = (size_t)w[1];
    e->index = (uint64_t)w[2];
    e->from = (uint32_t)w[3];
    e->redelivered = (uint32_t)w[4];
}

JNIEXPORT jlong FN(queueOpen)(JNIEnv *env, jclass c, jlong s, jbyteArray name_a, jboolean create,
                              jlong element_size, jlong elements, jobjectArray queues_a,
                              jlongArray limits_a, jbyteArray initial_a, jboolean redeliver) {
    (void)c;
    shoal_queue_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.element_size = (size_t)element_size;
    o.elements = (uint64_t)elements;
    o.redeliver = redeliver ? 1 : 0;
    jsize n = queues_a ? (*env)->GetArrayLength(env, queues_a) : 0;
    if (limits_a && (*env)->GetArrayLength(env, limits_a) != n) {
        fail_msg(env, SHOAL_INVALID, "queue names and limits differ in number");
        return 0;
    }
    /* One allocation for the name pointers, the limits and the names' bytes. */
    size_t bytes = 0;
    for (jsize i = 0; i < n; i++) {
        jbyteArray q = (jbyteArray)(*env)->GetObjectArrayElement(env, queues_a, i);
        if (!q) {
            fail_msg(env, SHOAL_NULL_POINTER, "a queue name is null");
            return 0;
        }
        bytes += (size_t)(*env)->GetArrayLength(env, q);
        (*env)->DeleteLocalRef(env, q);
    }
    size_t total = (size_t)n * (sizeof(char *) + sizeof(uint64_t)) + bytes + 1;
    char *mem = malloc(total);
    if (!mem) {
        fail_oom(env);
        return 0;
    }
    const char **names = (const char **)mem;
    uint64_t *limits = (uint64_t *)(mem + (size_t)n * sizeof(char *));
    char *text = (char *)(limits + n);
    for (jsize i = 0; i < n; i++) {
        jbyteArray q = (jbyteArray)(*env)->GetObjectArrayElement(env, queues_a, i);
        jsize len = (*env)->GetArrayLength(env, q);
        (*env)->GetByteArrayRegion(env, q, 0, len, (jbyte *)text);
        (*env)->DeleteLocalRef(env, q);
        names[i] = text;
        text += len;
    }
    for (jsize i = 0; i < n; i++) limits[i] = 0;
    if (limits_a) (*env)->GetLongArrayRegion(env, limits_a, 0, n, (jlong *)limits);
    o.queues = n ? names : NULL;
    o.n_queues = (size_t)n;
    o.limits = n ? limits : NULL;
    in_t init_b;
    if (!in_get(env, initial_a, &init_b)) {
        free(mem);
        return 0;
    }
    o.initial = init_b.null ? NULL : init_b.p;
    in_t name_b;
    if (!in_get(env, name_a, &name_b)) {
        in_free(&init_b);
        free(mem);
        return 0;
    }
    shoal_queue *q = NULL;
    shoal_status st = shoal_queue_open((shoal_store *)(intptr_t)s, name_b.null ? NULL : name_b.p,
                                       create ? &o : NULL, &q);
    in_free(&name_b);
    in_free(&init_b);
    free(mem);
    if (st != SHOAL_OK) {
        fail(env, st);
        return 0;
    }
    return (jlong)(intptr_t)q;
}

JNIEXPORT void FN(queueClose)(JNIEnv *env, jclass c, jlong h) {
    (void)env, (void)c;
    shoal_queue_close(QSET(h));
}

JNIEXPORT jint FN(queueIndex)(JNIEnv *env, jclass c, jlong h, jbyteArray name_a) {
    (void)c;
    IN_STR(name, name_a);
    uint32_t q = 0;
    shoal_status st = shoal_queue_index(QSET(h), name, &q);
    in_free(&name_b);
    if (st != SHOAL_OK) {
        fail(env, st);
        return 0;
    }
    return (jint)q;
}

JNIEXPORT jboolean FN(queuePull)(JNIEnv *env, jclass c, jlong h, jint q, jlong timeout_ms, jlongArray out_a) {
    (void)c;
    shoal_element e;
    shoal_status st = shoal_queue_pull(QSET(h), (uint32_t)q, (uint64_t)timeout_ms, &e);
    if (st == SHOAL_EMPTY) return JNI_FALSE;
    if (st != SHOAL_OK) {
        fail(env, st);
        return JNI_FALSE;
    }
    jlong w[E_WORDS];
    elem_out(&e, w);
    (*env)->SetLongArrayRegion(env, out_a, 0, E_WORDS, w);
    return JNI_TRUE;
}

JNIEXPORT jint FN(queuePullMany)(JNIEnv *env, jclass c, jlong h, jint q, jint max, jlongArray out_a) {
    (void)c;
    if (max <= 0 || (*env)->GetArrayLength(env, out_a) < (jlong)max * E_WORDS) {
        fail_msg(env, SHOAL_INVALID, "pull_many: no room for the elements");
        return 0;
    }
    shoal_element *es = malloc((size_t)max * sizeof *es);
    jlong *w = malloc((size_t)max * E_WORDS * sizeof *w);
    if (!es || !w) {
        free(es), free(w);
        fail_oom(env);
        return 0;
    }
    size_t got = 0;
    shoal_status st = shoal_queue_pull_many(QSET(h), (uint32_t)q, es, (size_t)max, &got);
    if (st == SHOAL_OK) {
        for (size_t i = 0; i < got; i++) elem_out(&es[i], w + i * E_WORDS);
        (*env)->SetLongArrayRegion(env, out_a, 0, (jsize)(got * E_WORDS), w);
    }
    free(es), free(w);
    if (st != SHOAL_OK) {
        fail(env, st);
        return 0;
    }
    return (jint)got;
}

JNIEXPORT void FN(queuePush)(JNIEnv *env, jclass c, jlong h, jint q, jlongArray e_a) {
    (void)c;
    jlong w[E_WORDS];
    (*env)->GetLongArrayRegion(env, e_a, 0, E_WORDS, w);
    if ((*env)->ExceptionCheck(env)) return;
    shoal_element e;
    elem_in(w, &e);
    shoal_status st = shoal_queue_push(QSET(h), (uint32_t)q, &e);
    if (st != SHOAL_OK) fail(env, st);
}

JNIEXPORT void FN(queuePushMany)(JNIEnv *env, jclass c, jlong h, jint q, jlongArray e_a, jint n) {
    (void)c;
    if (n <= 0 || (*env)->GetArrayLength(env, e_a) < (jlong)n * E_WORDS) {
        fail_msg(env, SHOAL_INVALID, "push_many: fewer element words than elements");
        return;
    }
    shoal_element *es = malloc((size_t)n * sizeof *es);
    jlong *w = malloc((size_t)n * E_WORDS * sizeof *w);
    if (!es || !w) {
        free(es), free(w);
        fail_oom(env);
        return;
    }
    (*env)->GetLongArrayRegion(env, e_a, 0, n * E_WORDS, w);
    for (jint i = 0; i < n; i++) elem_in(w + (size_t)i * E_WORDS, &es[i]);
    shoal_status st = shoal_queue_push_many(QSET(h), (uint32_t)q, es, (size_t)n);
    free(es), free(w);
    if (st != SHOAL_OK) fail(env, st);
}

JNIEXPORT void FN(queueRelease)(JNIEnv *env, jclass c, jlong h, jlongArray e_a) {
    (void)c;
    jlong w[E_WORDS];
    (*env)->GetLongArrayRegion(env, e_a, 0, E_WORDS, w);
    if ((*env)->ExceptionCheck(env)) return;
    shoal_element e;
    elem_in(w, &e);
    shoal_status st = shoal_queue_release(QSET(h), &e);
    if (st != SHOAL_OK) fail(env, st);
}

JNIEXPORT jlong FN(queueMove)(JNIEnv *env, jclass c, jlong h, jint from, jint to, jlong max) {
    (void)c;
    size_t moved = 0;
    shoal_status st = shoal_queue_move(QSET(h), (uint32_t)from, (uint32_t)to, (size_t)max, &moved);
    if (st != SHOAL_OK) {
        fail(env, st);
        return 0;
    }
    return (jlong)moved;
}

JNIEXPORT jlong FN(queueLen)(JNIEnv *env, jclass c, jlong h, jint q) {
    (void)c;
    uint64_t n = 0;
    shoal_status st = shoal_queue_len(QSET(h), (uint32_t)q, &n);
    if (st != SHOAL_OK) {
        fail(env, st);
        return 0;
    }
    return (jlong)n;
}

JNIEXPORT jlong FN(queueReclaim)(JNIEnv *env, jclass c, jlong h) {
    (void)c;
    uint64_t n = 0;
    shoal_status st = shoal_queue_reclaim(QSET(h), &n);
    if (st != SHOAL_OK) {
        fail(env, st);
        return 0;
    }
    return (jlong)n;
}

JNIEXPORT jboolean FN(queuePullAny)(JNIEnv *env, jclass c, jlong h, jintArray qs_a, jlong timeout_ms,
                                    jlongArray out_a) {
    (void)c;
    jsize n = (*env)->GetArrayLength(env, qs_a);
    uint32_t stack[16];
    uint32_t *qs = n <= 16 ? stack : malloc((size_t)n * sizeof *qs);
    if (!qs) {
        fail_oom(env);
        return JNI_FALSE;
    }
    jint *raw = (*env)->GetIntArrayElements(env, qs_a, NULL);
    if (!raw) {
        if (qs != stack) free(qs);
        return JNI_FALSE;
    }
    for (jsize i = 0; i < n; i++) qs[i] = (uint32_t)raw[i];
    (*env)->ReleaseIntArrayElements(env, qs_a, raw, JNI_ABORT);
    shoal_element e;
    shoal_status st = shoal_queue_pull_any(QSET(h), qs, (size_t)n, (uint64_t)timeout_ms, &e);
    if (qs != stack) free(qs);
    if (st == SHOAL_EMPTY) return JNI_FALSE;
    if (st != SHOAL_OK) {
        fail(env, st);
        return JNI_FALSE;
    }
    jlong w[E_WORDS];
    elem_out(&e, w);
    (*env)->SetLongArrayRegion(env, out_a, 0, E_WORDS, w);
    return JNI_TRUE;
}

static jlongArray out_longs(JNIEnv *env, const jlong *v, jsize n) {
    jlongArray r = (*env)->NewLongArray(env, n);
    if (r) (*env)->SetLongArrayRegion(env, r, 0, n, v);
    return r;
}

JNIEXPORT jlongArray FN(queueInfo)(JNIEnv *env, jclass c, jlong h) {
    (void)c;
    shoal_queue_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    shoal_status st = shoal_queue_get_info(QSET(h), &info);
    if (st != SHOAL_OK) {
        fail(env, st);
        return NULL;
    }
    jlong v[3] = {(jlong)info.element_size, (jlong)info.elements, (jlong)info.queues};
    return out_longs(env, v, 3);
}

JNIEXPORT jbyteArray FN(queueName)(JNIEnv *env, jclass c, jlong h, jint q) {
    (void)c;
    char buf[128]; /* queue names are at most 120 bytes */
    size_t len = 0;
    shoal_status st = shoal_queue_name(QSET(h), (uint32_t)q, buf, sizeof buf, &len);
    if (st != SHOAL_OK) {
        fail(env, st);
        return NULL;
    }
    return out_bytes(env, buf, len);
}

JNIEXPORT jlongArray FN(queueStats)(JNIEnv *env, jclass c, jlong h, jint q) {
    (void)c;
    shoal_queue_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    shoal_status st = shoal_queue_get_stats(QSET(h), (uint32_t)q, &s);
    if (st != SHOAL_OK) {
        fail(env, st);
        return NULL;
    }
    jlong v[5] = {(jlong)s.len, (jlong)s.limit, (jlong)s.pushes, (jlong)s.pulls, (jlong)s.waits};
    return out_longs(env, v, 5);
}

JNIEXPORT jlongArray FN(queueHolders)(JNIEnv *env, jclass c, jlong h) {
    (void)c;
    size_t n = 0;
    shoal_status st = shoal_queue_holders(QSET(h), NULL, 0, &n);
    for (;;) {
        if (st != SHOAL_OK && st != SHOAL_BUFFER_TOO_SMALL) {
            fail(env, st);
            return NULL;
        }
        size_t cap = n + 4; /* holders may come meanwhile */
        shoal_queue_holder *hs = malloc(cap * sizeof *hs);
        jlong *v = malloc(cap * 2 * sizeof *v);
        if (!hs || !v) {
            free(hs), free(v);
            fail_oom(env);
            return NULL;
        }
        st = shoal_queue_holders(QSET(h), hs, cap, &n);
        if (st == SHOAL_OK) {
            for (size_t i = 0; i < n; i++) {
                v[2 * i] = (jlong)hs[i].pid;
                v[2 * i + 1] = (jlong)hs[i].elements;
            }
            jlongArray r = out_longs(env, v, (jsize)(2 * n));
            free(hs), free(v);
            return r;
        }
        free(hs), free(v);
    }
}

/* A direct buffer over a held element's bytes in place (the memory stays the store's:
 * the buffer frees nothing). */
JNIEXPORT jobject FN(directBuffer)(JNIEnv *env, jclass c, jlong address, jlong length) {
    (void)c;
    jobject b = (*env)->NewDirectByteBuffer(env, (void *)(intptr_t)address, length);
    if (!b && !(*env)->ExceptionCheck(env)) fail_msg(env, SHOAL_ERROR, "this JVM does not support direct buffers over native memory");
    return b;
}
