/* Tests of the ordered-map calls of the C API: open and kinds, point calls checked against
 * a sorted reference, range iterators both ways across batch boundaries, exact counts,
 * snapshots that keep their view while writers commit, write transactions over two maps
 * (commit, abort, own writes), calls from the wrong thread, and a second process that
 * commits transfers between two maps while this one checks every snapshot's sum; cursors
 * over integer keys and multimaps, and nested transactions. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static char g_dir[256];

static shoal_store *fresh(const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    shoal_store_destroy(p);
    shoal_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.max_size = 256u << 20;
    o.open_mode = SHOAL_CREATE_NEW;
    shoal_store *s = NULL;
    shoal_status rc = shoal_store_open(p, &o, &s);
    if (rc != SHOAL_OK) {
        fprintf(stderr, "fresh(%s): %s: %s\n", name, shoal_strerror(rc), shoal_last_error_message());
        return NULL;
    }
    return s;
}

static shoal_bytes B(const char *s) {
    shoal_bytes b = {s, strlen(s)};
    return b;
}

static int count_names(void *ctx, const char *name, size_t len) {
    (void)name;
    (void)len;
    ++*(int *)ctx;
    return 0;
}

static void test_open_and_kinds(void) {
    shoal_store *s = fresh("kinds");
    CHECK(s != NULL);
    if (!s) return;
    shoal_ordered *o = (shoal_ordered *)1;
    CHECK_RC(shoal_ordered_open(s, "o", 0, &o), SHOAL_NOT_FOUND);
    CHECK(o == NULL);
    CHECK_RC(shoal_ordered_open(s, "o", 8, &o), SHOAL_INVALID);
    CHECK_RC(shoal_ordered_open(NULL, "o", 0, &o), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_ordered_open(s, NULL, 0, &o), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_ordered_open(s, "o", 0, NULL), SHOAL_NULL_POINTER);
    REQUIRE_OK(shoal_ordered_open(s, "o", SHOAL_MAP_CREATE, &o));
    shoal_ordered *o2 = NULL;
    REQUIRE_OK(shoal_ordered_open(s, "o", 0, &o2));
    REQUIRE_OK(shoal_ordered_put(o, "k", 1, "v", 1));
    char buf[8];
    size_t n = 0;
    CHECK_RC(shoal_ordered_get(o2, "k", 1, buf, sizeof buf, &n), SHOAL_OK);
    CHECK(n == 1 && buf[0] == 'v');

    /* A hash map is not an ordered map, and the other way round: the message says which
     * call opens it. */
    shoal_map *h = NULL;
    REQUIRE_OK(shoal_map_open(s, "h", SHOAL_MAP_CREATE, NULL, &h));
    shoal_ordered *bad = NULL;
    CHECK_RC(shoal_ordered_open(s, "h", SHOAL_MAP_CREATE, &bad), SHOAL_INVALID);
    CHECK(strstr(shoal_last_error_message(), "shoal_map_open") != NULL);
    shoal_map *bad2 = NULL;
    CHECK_RC(shoal_map_open(s, "o", 0, NULL, &bad2), SHOAL_INVALID);
    CHECK(strstr(shoal_last_error_message(), "shoal_ordered_open") != NULL);
    uint32_t kind = 0;
    CHECK_RC(shoal_map_kind(s, "o", &kind, NULL, NULL), SHOAL_OK);
    CHECK(kind == SHOAL_MAP_KIND_ORDERED);
    int count = 0;
    CHECK_RC(shoal_store_ordered_maps(s, count_names, &count), SHOAL_OK);
    CHECK(count == 1);
    CHECK_RC(shoal_ordered_close(NULL), SHOAL_OK);
    shoal_map_close(h);
    shoal_ordered_close(o2);
    shoal_ordered_close(o);
    shoal_store_close(s);
}

/* A deterministic pseudo-random key number. */
static uint32_t lcg(uint32_t *x) {
    *x = *x * 1664525u + 1013904223u;
    return *x >> 8;
}

#define NKEYS 3000

static void test_point_calls_against_a_reference(void) {
    shoal_store *s = fresh("points");
    if (!s) { CHECK(0); return; }
    shoal_ordered *o = NULL;
    REQUIRE_OK(shoal_ordered_open(s, "o", SHOAL_MAP_CREATE, &o));
    /* ref[i]: the value of key i (0 = absent), keys "k%06u" so that byte order is
     * number order. */
    static uint32_t ref[NKEYS];
    memset(ref, 0, sizeof ref);
    uint32_t x = 12345;
    char k[16], v[32], buf[64];
    size_t n;
    for (int step = 0; step < 12000; step++) {
        uint32_t i = lcg(&x) % NKEYS, op = lcg(&x) % 5, val = lcg(&x) | 1;
        int kl = snprintf(k, sizeof k, "k%06u", i);
        int vl = snprintf(v, sizeof v, "v%u", val);
        switch (op) {
        case 0:
        case 1:
            CHECK_RC(shoal_ordered_put(o, k, kl, v, vl), SHOAL_OK);
            ref[i] = val;
            break;
        case 2:
            CHECK_RC(shoal_ordered_put_if_absent(o, k, kl, v, vl), ref[i] ? SHOAL_EXISTS : SHOAL_OK);
            if (!ref[i]) ref[i] = val;
            break;
        case 3:
            CHECK_RC(shoal_ordered_put_if_present(o, k, kl, v, vl), ref[i] ? SHOAL_OK : SHOAL_NOT_FOUND);
            if (ref[i]) ref[i] = val;
            break;
        default:
            CHECK_RC(shoal_ordered_remove(o, k, kl), ref[i] ? SHOAL_OK : SHOAL_NOT_FOUND);
            ref[i] = 0;
        }
    }
    uint64_t live = 0, len = 0;
    for (uint32_t i = 0; i < NKEYS; i++) {
        int kl = snprintf(k, sizeof k, "k%06u", i);
        shoal_status rc = shoal_ordered_get(o, k, kl, buf, sizeof buf, &n);
        if (ref[i]) {
            live++;
            int vl = snprintf(v, sizeof v, "v%u", ref[i]);
            CHECK(rc == SHOAL_OK && n == (size_t)vl && memcmp(buf, v, n) == 0);
        } else {
            CHECK(rc == SHOAL_NOT_FOUND);
        }
    }
    REQUIRE_OK(shoal_ordered_len(o, &len));
    CHECK(len == live);

    /* Counts of ranges match the reference. */
    for (int t = 0; t < 50; t++) {
        uint32_t a = lcg(&x) % NKEYS, b = lcg(&x) % NKEYS;
        char lo[16], hi[16];
        snprintf(lo, sizeof lo, "k%06u", a);
        snprintf(hi, sizeof hi, "k%06u", b);
        shoal_bytes l = B(lo), h = B(hi);
        uint64_t want = 0, got = 99;
        for (uint32_t i = a; i < b; i++) want += ref[i] != 0;
        REQUIRE_OK(shoal_ordered_count_range(o, &l, &h, &got));
        CHECK(got == want);
    }
    uint64_t all = 0;
    REQUIRE_OK(shoal_ordered_count_range(o, NULL, NULL, &all));
    CHECK(all == live);

    /* Sizes: the buffer protocol, the entry limit, empty keys and values. */
    REQUIRE_OK(shoal_ordered_put(o, "big", 3, "0123456789", 10));
    CHECK_RC(shoal_ordered_get(o, "big", 3, buf, 4, &n), SHOAL_BUFFER_TOO_SMALL);
    CHECK(n == 10);
    CHECK_RC(shoal_ordered_get(o, "big", 3, NULL, 0, &n), SHOAL_BUFFER_TOO_SMALL);
    static char huge[SHOAL_MAX_ORDERED_KEY + 1];
    CHECK_RC(shoal_ordered_put(o, huge, SHOAL_MAX_ORDERED_KEY + 1, "v", 1), SHOAL_INVALID);
    CHECK_RC(shoal_ordered_put(o, huge, SHOAL_MAX_ORDERED_KEY, "v", 1), SHOAL_OK);
    CHECK_RC(shoal_ordered_put(o, "x", 1, huge, SHOAL_MAX_ORDERED_ENTRY - 1), SHOAL_OK);
    /* A value past a leaf's limit is kept out of line, whole. */
    static char large[100000], back[100000];
    for (size_t i = 0; i < sizeof large; i++) large[i] = (char)(i * 7);
    REQUIRE_OK(shoal_ordered_put(o, "large", 5, large, sizeof large));
    CHECK_RC(shoal_ordered_get(o, "large", 5, back, sizeof back, &n), SHOAL_OK);
    CHECK(n == sizeof large && memcmp(large, back, n) == 0);
    CHECK_RC(shoal_ordered_put(o, NULL, 0, NULL, 0), SHOAL_OK);
    CHECK_RC(shoal_ordered_get(o, NULL, 0, buf, sizeof buf, &n), SHOAL_OK);
    CHECK(n == 0);
    CHECK_RC(shoal_ordered_get(o, "k", 1, NULL, 0, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_ordered_put(o, NULL, 3, "v", 1), SHOAL_NULL_POINTER);
    shoal_ordered_close(o);
    shoal_store_close(s);
}

/* Collects an iterator's keys as numbers ("k%06u"); returns how many, -1 on an error. */
static int drain(shoal_ordered_iter *it, uint32_t *out, int cap) {
    const void *k, *v;
    size_t kl, vl;
    int n = 0;
    shoal_status rc;
    while ((rc = shoal_ordered_iter_next(it, &k, &kl, &v, &vl)) == SHOAL_OK) {
        char tmp[16] = {0};
        if (kl != 7 || n >= cap) return -1;
        memcpy(tmp, k, kl);
        uint32_t num = (uint32_t)atoi(tmp + 1);
        /* Every value is "v" and the key's number. */
        char want[16];
        int wl = snprintf(want, sizeof want, "v%u", num);
        if ((size_t)wl != vl || memcmp(v, want, vl) != 0) return -1;
        out[n++] = num;
    }
    if (rc != SHOAL_DONE) return -1;
    /* Done stays done. */
    if (shoal_ordered_iter_next(it, &k, &kl, NULL, NULL) != SHOAL_DONE) return -1;
    return n;
}

static void test_ranges(void) {
    shoal_store *s = fresh("ranges");
    if (!s) { CHECK(0); return; }
    shoal_ordered *o = NULL;
    REQUIRE_OK(shoal_ordered_open(s, "o", SHOAL_MAP_CREATE, &o));
    /* Even numbers 0..1998: 1000 keys, several iterator batches. */
    char k[16], v[16];
    for (uint32_t i = 0; i < 2000; i += 2) {
        int kl = snprintf(k, sizeof k, "k%06u", i), vl = snprintf(v, sizeof v, "v%u", i);
        REQUIRE_OK(shoal_ordered_put(o, k, kl, v, vl));
    }
    static uint32_t got[2000];
    const uint32_t los[] = {0, 1, 2, 501, 1998, 3000}, his[] = {0, 2, 3, 1500, 1999, 4000};
    for (int bound = 0; bound < 4; bound++) {
        for (size_t a = 0; a < 6; a++) {
            for (size_t b = 0; b < 6; b++) {
                for (int rev = 0; rev < 2; rev++) {
                    char lo[16], hi[16];
                    snprintf(lo, sizeof lo, "k%06u", los[a]);
                    snprintf(hi, sizeof hi, "k%06u", his[b]);
                    shoal_bytes l = B(lo), h = B(hi);
                    /* bound bit 0: no lower bound; bit 1: no upper bound. */
                    uint32_t from = bound & 1 ? 0 : los[a], to = bound & 2 ? 2000 : his[b];
                    if (to > 2000) to = 2000; /* the map's keys end at 1998 */
                    shoal_ordered_iter *it = NULL;
                    REQUIRE_OK(shoal_ordered_range(o, bound & 1 ? NULL : &l, bound & 2 ? NULL : &h,
                                                   rev ? SHOAL_ORDERED_REVERSE : 0, &it));
                    int n = drain(it, got, 2000);
                    shoal_ordered_iter_close(it);
                    int want = 0, ok = 1;
                    for (uint32_t i = from + (from & 1); i < to; i += 2) {
                        int at = rev ? n - 1 - want : want;
                        if (at < 0 || at >= n || got[at] != i) ok = 0;
                        want++;
                    }
                    CHECK(n == want && ok);
                    if (n != want || !ok) {
                        fprintf(stderr, "  range %u..%u bound %d rev %d: %d entries, want %d\n",
                                from, to, bound, rev, n, want);
                    }
                }
            }
        }
    }
    shoal_ordered_iter *it = NULL;
    CHECK_RC(shoal_ordered_range(o, NULL, NULL, 4, &it), SHOAL_INVALID);
    CHECK(it == NULL);
    CHECK_RC(shoal_ordered_iter_next(NULL, NULL, NULL, NULL, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_ordered_iter_close(NULL), SHOAL_OK);
    shoal_ordered_close(o);
    shoal_store_close(s);
}

static void test_snapshots_keep_their_view(void) {
    shoal_store *s = fresh("snaps");
    if (!s) { CHECK(0); return; }
    shoal_ordered *o = NULL;
    REQUIRE_OK(shoal_ordered_open(s, "o", SHOAL_MAP_CREATE, &o));
    REQUIRE_OK(shoal_ordered_put(o, "a", 1, "1", 1));
    REQUIRE_OK(shoal_ordered_put(o, "b", 1, "2", 1));
    shoal_ordered_snapshot *snap = NULL;
    REQUIRE_OK(shoal_ordered_snapshot_open(o, &snap));
    shoal_ordered_iter *it = NULL;
    REQUIRE_OK(shoal_ordered_snapshot_range(snap, NULL, NULL, 0, &it));
    /* Writers go on; the snapshot and its iterator do not see them. */
    REQUIRE_OK(shoal_ordered_put(o, "a", 1, "9", 1));
    REQUIRE_OK(shoal_ordered_remove(o, "b", 1));
    REQUIRE_OK(shoal_ordered_put(o, "c", 1, "3", 1));
    char buf[8];
    size_t n;
    uint64_t len = 0, seq = 0, cnt = 0;
    CHECK_RC(shoal_ordered_snapshot_get(snap, "a", 1, buf, sizeof buf, &n), SHOAL_OK);
    CHECK(n == 1 && buf[0] == '1');
    CHECK_RC(shoal_ordered_snapshot_get(snap, "c", 1, buf, sizeof buf, &n), SHOAL_NOT_FOUND);
    REQUIRE_OK(shoal_ordered_snapshot_len(snap, &len, &seq));
    CHECK(len == 2 && seq > 0);
    REQUIRE_OK(shoal_ordered_snapshot_count_range(snap, NULL, NULL, &cnt));
    CHECK(cnt == 2);
    /* Closing the snapshot first leaves the iterator its view. */
    REQUIRE_OK(shoal_ordered_snapshot_close(snap));
    const void *k, *v;
    size_t kl, vl;
    REQUIRE_OK(shoal_ordered_iter_next(it, &k, &kl, &v, &vl));
    CHECK(kl == 1 && memcmp(k, "a", 1) == 0 && vl == 1 && memcmp(v, "1", 1) == 0);
    REQUIRE_OK(shoal_ordered_iter_next(it, &k, &kl, &v, &vl));
    CHECK(kl == 1 && memcmp(k, "b", 1) == 0);
    CHECK_RC(shoal_ordered_iter_next(it, &k, &kl, &v, &vl), SHOAL_DONE);
    shoal_ordered_iter_close(it);
    /* The map itself shows the latest commit. */
    REQUIRE_OK(shoal_ordered_len(o, &len));
    CHECK(len == 2);
    shoal_ordered_close(o);
    shoal_store_close(s);
}

static void test_transactions(void) {
    shoal_store *s = fresh("txns");
    if (!s) { CHECK(0); return; }
    shoal_ordered *a = NULL, *b = NULL, *c = NULL;
    REQUIRE_OK(shoal_ordered_open(s, "a", SHOAL_MAP_CREATE, &a));
    REQUIRE_OK(shoal_ordered_open(s, "b", SHOAL_MAP_CREATE, &b));
    REQUIRE_OK(shoal_ordered_open(s, "c", SHOAL_MAP_CREATE, &c));
    const shoal_ordered *ab[2] = {a, b};
    shoal_ordered_txn *t = NULL;
    CHECK_RC(shoal_ordered_txn_begin(ab, 0, &t), SHOAL_INVALID);
    CHECK_RC(shoal_ordered_txn_begin(NULL, 2, &t), SHOAL_NULL_POINTER);

    /* Aborted: nothing shows. */
    REQUIRE_OK(shoal_ordered_txn_begin(ab, 2, &t));
    REQUIRE_OK(shoal_ordered_txn_put(t, a, "x", 1, "1", 1));
    REQUIRE_OK(shoal_ordered_txn_put(t, b, "y", 1, "2", 1));
    REQUIRE_OK(shoal_ordered_txn_abort(t));
    uint64_t la = 9, lb = 9;
    REQUIRE_OK(shoal_ordered_len(a, &la));
    REQUIRE_OK(shoal_ordered_len(b, &lb));
    CHECK(la == 0 && lb == 0);

    /* Committed: everything shows, and the transaction saw its own writes. */
    REQUIRE_OK(shoal_ordered_txn_begin(ab, 2, &t));
    REQUIRE_OK(shoal_ordered_txn_put(t, a, "x", 1, "1", 1));
    CHECK_RC(shoal_ordered_txn_put_if_absent(t, a, "x", 1, "2", 1), SHOAL_EXISTS);
    CHECK_RC(shoal_ordered_txn_put_if_present(t, b, "y", 1, "2", 1), SHOAL_NOT_FOUND);
    REQUIRE_OK(shoal_ordered_txn_put_if_absent(t, b, "y", 1, "2", 1));
    REQUIRE_OK(shoal_ordered_txn_put(t, b, "z", 1, "3", 1));
    REQUIRE_OK(shoal_ordered_txn_remove(t, b, "z", 1));
    CHECK_RC(shoal_ordered_txn_remove(t, b, "z", 1), SHOAL_NOT_FOUND);
    char buf[8];
    size_t n;
    CHECK_RC(shoal_ordered_txn_get(t, a, "x", 1, buf, sizeof buf, &n), SHOAL_OK);
    CHECK(n == 1 && buf[0] == '1');
    /* Not yet committed: others do not see it. */
    CHECK_RC(shoal_ordered_get(a, "x", 1, buf, sizeof buf, &n), SHOAL_NOT_FOUND);
    /* A map outside the transaction is refused. */
    CHECK_RC(shoal_ordered_txn_put(t, c, "q", 1, "1", 1), SHOAL_INVALID);
    uint64_t seq = 0;
    REQUIRE_OK(shoal_ordered_txn_commit(t, &seq));
    CHECK(seq > 0);
    CHECK_RC(shoal_ordered_get(a, "x", 1, buf, sizeof buf, &n), SHOAL_OK);
    CHECK_RC(shoal_ordered_get(b, "y", 1, buf, sizeof buf, &n), SHOAL_OK);
    CHECK(n == 1 && buf[0] == '2');
    CHECK_RC(shoal_ordered_get(b, "z", 1, buf, sizeof buf, &n), SHOAL_NOT_FOUND);

    /* Snapshots of both maps as of one commit. */
    shoal_ordered_snapshot *ss[2] = {NULL, NULL};
    REQUIRE_OK(shoal_ordered_snapshot_open_many(ab, 2, ss));
    uint64_t s0 = 0, s1 = 1;
    REQUIRE_OK(shoal_ordered_snapshot_len(ss[0], &la, &s0));
    REQUIRE_OK(shoal_ordered_snapshot_len(ss[1], &lb, &s1));
    CHECK(s0 == s1 && la == 1 && lb == 1);
    shoal_ordered_snapshot_close(ss[0]);
    shoal_ordered_snapshot_close(ss[1]);
    CHECK_RC(shoal_ordered_snapshot_open_many(ab, 0, ss), SHOAL_INVALID);
    CHECK_RC(shoal_ordered_txn_commit(NULL, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_ordered_txn_abort(NULL), SHOAL_OK);
    shoal_ordered_close(a);
    shoal_ordered_close(b);
    shoal_ordered_close(c);
    shoal_store_close(s);
}

struct other_thread {
    shoal_ordered_snapshot *snap;
    shoal_ordered_txn *txn;
    shoal_ordered *map;
    shoal_status get, close, put, commit;
};

static void *use_elsewhere(void *p) {
    struct other_thread *o = p;
    char buf[8];
    size_t n;
    o->get = shoal_ordered_snapshot_get(o->snap, "a", 1, buf, sizeof buf, &n);
    o->close = shoal_ordered_snapshot_close(o->snap);
    o->put = shoal_ordered_txn_put(o->txn, o->map, "a", 1, "2", 1);
    o->commit = shoal_ordered_txn_commit(o->txn, NULL);
    return NULL;
}

static void test_handles_stay_on_their_thread(void) {
    shoal_store *s = fresh("threads");
    if (!s) { CHECK(0); return; }
    shoal_ordered *o = NULL;
    REQUIRE_OK(shoal_ordered_open(s, "o", SHOAL_MAP_CREATE, &o));
    REQUIRE_OK(shoal_ordered_put(o, "a", 1, "1", 1));
    struct other_thread ot;
    memset(&ot, 0, sizeof ot);
    ot.map = o;
    REQUIRE_OK(shoal_ordered_snapshot_open(o, &ot.snap));
    const shoal_ordered *one[1] = {o};
    REQUIRE_OK(shoal_ordered_txn_begin(one, 1, &ot.txn));
    pthread_t th;
    CHECK(pthread_create(&th, NULL, use_elsewhere, &ot) == 0);
    pthread_join(th, NULL);
    CHECK(ot.get == SHOAL_INVALID && ot.close == SHOAL_INVALID);
    CHECK(ot.put == SHOAL_INVALID && ot.commit == SHOAL_INVALID);
    /* Still usable on their own thread. */
    char buf[8];
    size_t n;
    CHECK_RC(shoal_ordered_snapshot_get(ot.snap, "a", 1, buf, sizeof buf, &n), SHOAL_OK);
    REQUIRE_OK(shoal_ordered_txn_put(ot.txn, o, "a", 1, "3", 1));
    REQUIRE_OK(shoal_ordered_txn_commit(ot.txn, NULL));
    REQUIRE_OK(shoal_ordered_snapshot_close(ot.snap));
    CHECK_RC(shoal_ordered_get(o, "a", 1, buf, sizeof buf, &n), SHOAL_OK);
    CHECK(n == 1 && buf[0] == '3');
    shoal_ordered_close(o);
    shoal_store_close(s);
}

/* A child process moves amounts between two maps' accounts in transactions while this
 * process takes snapshots of both as of one commit: every snapshot's total must be the
 * starting total (a half-applied transfer would change it). */
#define ACCOUNTS 20
#define TRANSFERS 400

static int64_t total(shoal_ordered_snapshot *sn) {
    shoal_ordered_iter *it = NULL;
    if (shoal_ordered_snapshot_range(sn, NULL, NULL, 0, &it) != SHOAL_OK) return INT64_MIN;
    const void *k, *v;
    size_t kl, vl;
    int64_t sum = 0;
    while (shoal_ordered_iter_next(it, &k, &kl, &v, &vl) == SHOAL_OK) {
        int64_t x;
        if (vl != sizeof x) { sum = INT64_MIN; break; }
        memcpy(&x, v, sizeof x);
        sum += x;
    }
    shoal_ordered_iter_close(it);
    return sum;
}

static void test_two_processes(void) {
    shoal_store *s = fresh("procs");
    if (!s) { CHECK(0); return; }
    shoal_ordered *a = NULL, *b = NULL;
    REQUIRE_OK(shoal_ordered_open(s, "a", SHOAL_MAP_CREATE, &a));
    REQUIRE_OK(shoal_ordered_open(s, "b", SHOAL_MAP_CREATE, &b));
    char k[16];
    int64_t hundred = 100;
    for (int i = 0; i < ACCOUNTS; i++) {
        int kl = snprintf(k, sizeof k, "acct%02d", i);
        REQUIRE_OK(shoal_ordered_put(i % 2 ? b : a, k, kl, &hundred, sizeof hundred));
    }
    const shoal_ordered *ab[2] = {a, b};
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        uint32_t x = (uint32_t)getpid();
        for (int t = 0; t < TRANSFERS; t++) {
            int from = lcg(&x) % ACCOUNTS, to = lcg(&x) % ACCOUNTS;
            int64_t amt = lcg(&x) % 10, fv, tv;
            shoal_ordered_txn *tx = NULL;
            char fk[16], tk[16];
            int fl = snprintf(fk, sizeof fk, "acct%02d", from), tl = snprintf(tk, sizeof tk, "acct%02d", to);
            const shoal_ordered *fm = from % 2 ? b : a, *tm = to % 2 ? b : a;
            size_t n;
            if (shoal_ordered_txn_begin(ab, 2, &tx) != SHOAL_OK) _exit(3);
            if (shoal_ordered_txn_get(tx, fm, fk, fl, &fv, sizeof fv, &n) != SHOAL_OK) _exit(4);
            fv -= amt;
            if (shoal_ordered_txn_put(tx, fm, fk, fl, &fv, sizeof fv) != SHOAL_OK) _exit(5);
            if (shoal_ordered_txn_get(tx, tm, tk, tl, &tv, sizeof tv, &n) != SHOAL_OK) _exit(6);
            tv += amt;
            if (shoal_ordered_txn_put(tx, tm, tk, tl, &tv, sizeof tv) != SHOAL_OK) _exit(7);
            /* Every fifth transfer is abandoned: it must leave no trace. */
            if (t % 5 == 4) {
                if (shoal_ordered_txn_abort(tx) != SHOAL_OK) _exit(8);
            } else if (shoal_ordered_txn_commit(tx, NULL) != SHOAL_OK) {
                _exit(9);
            }
        }
        _exit(0);
    }
    CHECK(pid > 0);
    int status = 0, reads = 0, bad = 0;
    for (;;) {
        shoal_ordered_snapshot *ss[2] = {NULL, NULL};
        REQUIRE_OK(shoal_ordered_snapshot_open_many(ab, 2, ss));
        int64_t sum = total(ss[0]) + total(ss[1]);
        shoal_ordered_snapshot_close(ss[0]);
        shoal_ordered_snapshot_close(ss[1]);
        reads++;
        if (sum != 100 * ACCOUNTS) {
            bad++;
            fprintf(stderr, "  snapshot %d: total %lld\n", reads, (long long)sum);
        }
        if (waitpid(pid, &status, WNOHANG) == pid) break;
    }
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(bad == 0);
    shoal_ordered_snapshot *ss[2] = {NULL, NULL};
    REQUIRE_OK(shoal_ordered_snapshot_open_many(ab, 2, ss));
    CHECK(total(ss[0]) + total(ss[1]) == 100 * ACCOUNTS);
    shoal_ordered_snapshot_close(ss[0]);
    shoal_ordered_snapshot_close(ss[1]);
    printf("     (%d consistent snapshots while the other process committed)\n", reads);
    shoal_ordered_close(a);
    shoal_ordered_close(b);
    shoal_store_close(s);
}

static int collect_values(void *ctx, const void *v, size_t len) {
    char *out = ctx;
    strncat(out, (const char *)v, len);
    strcat(out, ",");
    return 0;
}

/* Integer keys and multimaps, compare-and-swap, range removal, appends, sequences,
 * markers. */
static void test_forms_and_more_writes(void) {
    shoal_store *s = fresh("more");
    if (!s) { CHECK(0); return; }
    shoal_ordered *ints = NULL, *multi = NULL, *plain = NULL, *again = NULL;
    REQUIRE_OK(shoal_ordered_open(s, "ints", SHOAL_MAP_CREATE | SHOAL_ORDERED_U64_KEYS, &ints));
    REQUIRE_OK(shoal_ordered_open(s, "multi", SHOAL_MAP_CREATE | SHOAL_ORDERED_DUPS, &multi));
    REQUIRE_OK(shoal_ordered_open(s, "plain", SHOAL_MAP_CREATE, &plain));
    /* Other options than the map's are refused; none at all opens it as it is. */
    CHECK_RC(shoal_ordered_open(s, "ints", SHOAL_ORDERED_DUPS, &again), SHOAL_INVALID);
    REQUIRE_OK(shoal_ordered_open(s, "ints", 0, &again));
    shoal_ordered_close(again);
    CHECK_RC(shoal_ordered_open(s, "x", 8, &again), SHOAL_INVALID);

    /* Integer keys sort as numbers (little-endian bytes would not). */
    uint64_t nums[] = {256, 1, 65536, 2};
    for (int i = 0; i < 4; i++) REQUIRE_OK(shoal_ordered_put(ints, &nums[i], 8, "v", 1));
    CHECK_RC(shoal_ordered_put(ints, "short", 5, "v", 1), SHOAL_INVALID);
    uint64_t lo = 2, hi = 65536, n = 0;
    shoal_bytes blo = {&lo, 8}, bhi = {&hi, 8};
    REQUIRE_OK(shoal_ordered_count_range(ints, &blo, &bhi, &n));
    CHECK(n == 2); /* 2 and 256 */
    REQUIRE_OK(shoal_ordered_remove_range(ints, &blo, &bhi, &n));
    CHECK(n == 2);
    REQUIRE_OK(shoal_ordered_len(ints, &n));
    CHECK(n == 2);

    /* A multimap keeps every value of a key, sorted. */
    REQUIRE_OK(shoal_ordered_put(multi, "k", 1, "b", 1));
    REQUIRE_OK(shoal_ordered_put(multi, "k", 1, "a", 1));
    REQUIRE_OK(shoal_ordered_put(multi, "j", 1, "z", 1));
    char seen[64] = "";
    uint64_t count = 0;
    REQUIRE_OK(shoal_ordered_values(multi, "k", 1, collect_values, seen, &count));
    CHECK(count == 2 && strcmp(seen, "a,b,") == 0);
    CHECK_RC(shoal_ordered_compare_and_swap(multi, "k", 1, "a", 1, "c", 1, 0), SHOAL_INVALID);

    /* Compare-and-swap: a match, a mismatch, from absent, to absent. */
    REQUIRE_OK(shoal_ordered_compare_and_swap(plain, "c", 1, NULL, 0, "1", 1, SHOAL_CAS_EXPECT_ABSENT));
    CHECK_RC(shoal_ordered_compare_and_swap(plain, "c", 1, "2", 1, "3", 1, 0), SHOAL_MISMATCH);
    REQUIRE_OK(shoal_ordered_compare_and_swap(plain, "c", 1, "1", 1, "3", 1, 0));
    REQUIRE_OK(shoal_ordered_compare_and_swap(plain, "c", 1, "3", 1, NULL, 0, SHOAL_CAS_REMOVE));
    size_t vlen = 0;
    CHECK_RC(shoal_ordered_get(plain, "c", 1, NULL, 0, &vlen), SHOAL_NOT_FOUND);
    CHECK_RC(shoal_ordered_compare_and_swap(plain, "c", 1, NULL, 0, NULL, 0, 64), SHOAL_INVALID);

    /* Appends, the sequence and a marker, in one transaction. */
    const shoal_ordered *only[1] = {plain};
    shoal_ordered_txn *t = NULL;
    REQUIRE_OK(shoal_ordered_txn_begin(only, 1, &t));
    char k[16];
    for (int i = 0; i < 1000; i++) {
        snprintf(k, sizeof k, "a%05d", i);
        REQUIRE_OK(shoal_ordered_txn_append(t, plain, k, strlen(k), "v", 1));
    }
    CHECK_RC(shoal_ordered_txn_append(t, plain, "a00001", 6, "v", 1), SHOAL_INVALID);
    uint64_t seq = 9;
    REQUIRE_OK(shoal_ordered_txn_next_sequence(t, plain, 10, &seq));
    CHECK(seq == 0);
    REQUIRE_OK(shoal_ordered_txn_set_marker(t, 5, 77));
    CHECK_RC(shoal_ordered_txn_set_marker(t, 14, 1), SHOAL_INVALID);
    uint64_t mark = 9;
    REQUIRE_OK(shoal_store_ordered_marker(s, 5, &mark));
    CHECK(mark == 0);
    REQUIRE_OK(shoal_ordered_txn_commit(t, NULL));
    REQUIRE_OK(shoal_store_ordered_marker(s, 5, &mark));
    CHECK(mark == 77);
    REQUIRE_OK(shoal_ordered_sequence(plain, &seq));
    CHECK(seq == 10);
    REQUIRE_OK(shoal_ordered_len(plain, &n));
    CHECK(n == 1000);
    shoal_ordered_close(ints);
    shoal_ordered_close(multi);
    shoal_ordered_close(plain);
    shoal_store_close(s);
}

/* The cursor stands on key `k` (8-byte integer) with `pos` entries before it. */
static void check_at_u64(shoal_ordered_cursor *c, uint64_t k, uint64_t pos) {
    const void *kp = NULL;
    size_t kl = 0;
    uint64_t got = 0, p = 0;
    REQUIRE_OK(shoal_ordered_cursor_get(c, &kp, &kl, NULL, NULL));
    CHECK(kl == 8);
    if (kl == 8) memcpy(&got, kp, 8);
    CHECK(got == k);
    REQUIRE_OK(shoal_ordered_cursor_position(c, &p));
    CHECK(p == pos);
}

/* The cursor stands on the pair (k, v) of one-character strings. */
static void check_at_pair(shoal_ordered_cursor *c, const char *k, const char *v) {
    const void *kp = NULL, *vp = NULL;
    size_t kl = 0, vl = 0;
    REQUIRE_OK(shoal_ordered_cursor_get(c, &kp, &kl, &vp, &vl));
    CHECK(kl == strlen(k) && memcmp(kp, k, kl) == 0);
    CHECK(vl == strlen(v) && memcmp(vp, v, vl) == 0);
}

static void test_cursors_and_nested(void) {
    shoal_store *s = fresh("cursors");
    if (!s) { CHECK(0); return; }
    shoal_ordered *ints = NULL, *multi = NULL, *plain = NULL;
    REQUIRE_OK(shoal_ordered_open(s, "ints", SHOAL_MAP_CREATE | SHOAL_ORDERED_U64_KEYS, &ints));
    REQUIRE_OK(shoal_ordered_open(s, "multi", SHOAL_MAP_CREATE | SHOAL_ORDERED_DUPS, &multi));
    REQUIRE_OK(shoal_ordered_open(s, "plain", SHOAL_MAP_CREATE, &plain));
    /* Integer keys 0, 3, ..., 897, loaded in order. */
    const shoal_ordered *one[1] = {ints};
    shoal_ordered_txn *t = NULL;
    REQUIRE_OK(shoal_ordered_txn_begin(one, 1, &t));
    for (uint64_t i = 0; i < 300; i++) {
        uint64_t k = i * 3;
        REQUIRE_OK(shoal_ordered_txn_append(t, ints, &k, 8, "v", 1));
    }
    REQUIRE_OK(shoal_ordered_txn_commit(t, NULL));

    /* A range iteration over integer keys runs past the iterator's internal batches. */
    shoal_ordered_iter *it = NULL;
    REQUIRE_OK(shoal_ordered_range(ints, NULL, NULL, SHOAL_ORDERED_REVERSE, &it));
    const void *kp = NULL;
    size_t kl = 0;
    uint64_t seen = 0, want = 897, k = 0;
    shoal_status rc;
    while ((rc = shoal_ordered_iter_next(it, &kp, &kl, NULL, NULL)) == SHOAL_OK) {
        memcpy(&k, kp, 8);
        CHECK(k == want);
        want -= 3;
        seen++;
    }
    CHECK_RC(rc, SHOAL_DONE);
    CHECK(seen == 300);
    shoal_ordered_iter_close(it);

    shoal_ordered_snapshot *snap = NULL;
    shoal_ordered_cursor *c = NULL;
    REQUIRE_OK(shoal_ordered_snapshot_open(ints, &snap));
    REQUIRE_OK(shoal_ordered_cursor_open(snap, &c));
    /* The cursor keeps the snapshot's view after the snapshot handle closes and a writer
     * commits. */
    shoal_ordered_snapshot_close(snap);
    k = 4;
    REQUIRE_OK(shoal_ordered_put(ints, &k, 8, "w", 1));
    CHECK_RC(shoal_ordered_cursor_get(c, &kp, &kl, NULL, NULL), SHOAL_NOT_FOUND);
    uint64_t pos = 0;
    CHECK_RC(shoal_ordered_cursor_position(c, &pos), SHOAL_NOT_FOUND);
    REQUIRE_OK(shoal_ordered_cursor_first(c));
    check_at_u64(c, 0, 0);
    CHECK_RC(shoal_ordered_cursor_seek(c, &k, 8), SHOAL_NOT_FOUND); /* 4: not in the view */
    REQUIRE_OK(shoal_ordered_cursor_seek_ge(c, &k, 8));
    check_at_u64(c, 6, 2);
    REQUIRE_OK(shoal_ordered_cursor_seek_le(c, &k, 8));
    check_at_u64(c, 3, 1);
    REQUIRE_OK(shoal_ordered_cursor_next(c));
    check_at_u64(c, 6, 2);
    REQUIRE_OK(shoal_ordered_cursor_prev(c));
    REQUIRE_OK(shoal_ordered_cursor_prev(c));
    check_at_u64(c, 0, 0);
    CHECK_RC(shoal_ordered_cursor_prev(c), SHOAL_NOT_FOUND);
    k = 6;
    REQUIRE_OK(shoal_ordered_cursor_seek(c, &k, 8));
    check_at_u64(c, 6, 2);
    REQUIRE_OK(shoal_ordered_cursor_last(c));
    check_at_u64(c, 897, 299);
    uint64_t nv = 0;
    REQUIRE_OK(shoal_ordered_cursor_count_values(c, &nv));
    CHECK(nv == 1);
    CHECK_RC(shoal_ordered_cursor_next(c), SHOAL_NOT_FOUND);
    k = 1000;
    CHECK_RC(shoal_ordered_cursor_seek_ge(c, &k, 8), SHOAL_NOT_FOUND);
    CHECK_RC(shoal_ordered_cursor_seek_ge(c, "short", 5), SHOAL_INVALID);
    CHECK_RC(shoal_ordered_cursor_next_key(c), SHOAL_INVALID); /* not a multimap */
    CHECK_RC(shoal_ordered_cursor_first(NULL), SHOAL_NULL_POINTER);
    REQUIRE_OK(shoal_ordered_cursor_close(c));
    REQUIRE_OK(shoal_ordered_cursor_close(NULL));

    /* Multimap moves: j:{z}, k:{a,b,c}, m:{x}. */
    const char *pairs[][2] = {{"k", "b"}, {"m", "x"}, {"k", "a"}, {"j", "z"}, {"k", "c"}};
    for (int i = 0; i < 5; i++) REQUIRE_OK(shoal_ordered_put(multi, pairs[i][0], 1, pairs[i][1], 1));
    REQUIRE_OK(shoal_ordered_snapshot_open(multi, &snap));
    REQUIRE_OK(shoal_ordered_cursor_open(snap, &c));
    REQUIRE_OK(shoal_ordered_cursor_first(c));
    check_at_pair(c, "j", "z");
    CHECK_RC(shoal_ordered_cursor_next_value(c), SHOAL_NOT_FOUND);
    check_at_pair(c, "j", "z"); /* stayed */
    REQUIRE_OK(shoal_ordered_cursor_next_key(c));
    check_at_pair(c, "k", "a");
    REQUIRE_OK(shoal_ordered_cursor_count_values(c, &nv));
    CHECK(nv == 3);
    REQUIRE_OK(shoal_ordered_cursor_next_value(c));
    check_at_pair(c, "k", "b");
    REQUIRE_OK(shoal_ordered_cursor_position(c, &pos));
    CHECK(pos == 2);
    REQUIRE_OK(shoal_ordered_cursor_next_key(c));
    check_at_pair(c, "m", "x");
    CHECK_RC(shoal_ordered_cursor_next_key(c), SHOAL_NOT_FOUND);
    REQUIRE_OK(shoal_ordered_cursor_last(c));
    REQUIRE_OK(shoal_ordered_cursor_prev_key(c));
    check_at_pair(c, "k", "c");
    REQUIRE_OK(shoal_ordered_cursor_prev_value(c));
    check_at_pair(c, "k", "b");
    REQUIRE_OK(shoal_ordered_cursor_seek_le(c, "l", 1));
    check_at_pair(c, "k", "c");
    REQUIRE_OK(shoal_ordered_cursor_seek(c, "k", 1));
    check_at_pair(c, "k", "a");
    REQUIRE_OK(shoal_ordered_cursor_seek_value(c, "k", 1, "b", 1, false));
    check_at_pair(c, "k", "b");
    REQUIRE_OK(shoal_ordered_cursor_seek_value(c, "k", 1, "bb", 2, true));
    check_at_pair(c, "k", "c");
    CHECK_RC(shoal_ordered_cursor_seek_value(c, "k", 1, "d", 1, true), SHOAL_NOT_FOUND);
    CHECK_RC(shoal_ordered_cursor_seek_value(c, "k", 1, "bb", 2, false), SHOAL_NOT_FOUND);
    shoal_ordered_cursor_close(c);
    shoal_ordered_snapshot_close(snap);
    /* One pair goes, the key's others stay. */
    REQUIRE_OK(shoal_ordered_remove_value(multi, "k", 1, "b", 1));
    CHECK_RC(shoal_ordered_remove_value(multi, "k", 1, "b", 1), SHOAL_NOT_FOUND);
    REQUIRE_OK(shoal_ordered_txn_begin((const shoal_ordered *[]){multi}, 1, &t));
    REQUIRE_OK(shoal_ordered_txn_remove_value(t, multi, "k", 1, "a", 1));
    CHECK_RC(shoal_ordered_txn_remove_value(t, multi, "k", 1, "a", 1), SHOAL_NOT_FOUND);
    REQUIRE_OK(shoal_ordered_txn_commit(t, NULL));
    char vals[64] = "";
    REQUIRE_OK(shoal_ordered_values(multi, "k", 1, collect_values, vals, &nv));
    CHECK(nv == 1 && strcmp(vals, "c,") == 0);

    /* A multimap's range iteration keeps every value of a key with many. */
    REQUIRE_OK(shoal_ordered_txn_begin((const shoal_ordered *[]){multi}, 1, &t));
    char v[16];
    for (int i = 0; i < 400; i++) {
        snprintf(v, sizeof v, "%04d", i);
        REQUIRE_OK(shoal_ordered_txn_put(t, multi, "n", 1, v, strlen(v)));
    }
    REQUIRE_OK(shoal_ordered_txn_commit(t, NULL));
    shoal_bytes lo = B("n"), hi = B("n\x01");
    REQUIRE_OK(shoal_ordered_range(multi, &lo, &hi, 0, &it));
    seen = 0;
    const void *vp = NULL;
    size_t vl = 0;
    while ((rc = shoal_ordered_iter_next(it, &kp, &kl, &vp, &vl)) == SHOAL_OK) {
        snprintf(v, sizeof v, "%04d", (int)seen);
        CHECK(vl == 4 && memcmp(vp, v, 4) == 0);
        seen++;
    }
    CHECK_RC(rc, SHOAL_DONE);
    CHECK(seen == 400);
    shoal_ordered_iter_close(it);

    /* Nested transactions: an aborted one leaves nothing, a committed one stays in its
     * parent, the parent commits only with none open. */
    REQUIRE_OK(shoal_ordered_txn_begin((const shoal_ordered *[]){plain}, 1, &t));
    REQUIRE_OK(shoal_ordered_txn_put(t, plain, "a", 1, "1", 1));
    CHECK_RC(shoal_ordered_txn_nested_commit(t), SHOAL_INVALID); /* none open */
    REQUIRE_OK(shoal_ordered_txn_nested_begin(t));
    REQUIRE_OK(shoal_ordered_txn_put(t, plain, "b", 1, "2", 1));
    REQUIRE_OK(shoal_ordered_txn_remove(t, plain, "a", 1));
    REQUIRE_OK(shoal_ordered_txn_set_marker(t, 2, 5));
    REQUIRE_OK(shoal_ordered_txn_nested_abort(t));
    size_t len = 0;
    /* Present: its one byte does not fit a buffer of none. */
    CHECK_RC(shoal_ordered_txn_get(t, plain, "a", 1, NULL, 0, &len), SHOAL_BUFFER_TOO_SMALL);
    CHECK_RC(shoal_ordered_txn_get(t, plain, "b", 1, NULL, 0, &len), SHOAL_NOT_FOUND);
    REQUIRE_OK(shoal_ordered_txn_nested_begin(t));
    REQUIRE_OK(shoal_ordered_txn_put(t, plain, "c", 1, "3", 1));
    REQUIRE_OK(shoal_ordered_txn_nested_begin(t));
    REQUIRE_OK(shoal_ordered_txn_put(t, plain, "d", 1, "4", 1));
    REQUIRE_OK(shoal_ordered_txn_nested_commit(t));
    CHECK_RC(shoal_ordered_txn_commit(t, NULL), SHOAL_INVALID); /* one still open */
    REQUIRE_OK(shoal_ordered_txn_nested_commit(t));
    REQUIRE_OK(shoal_ordered_txn_commit(t, NULL));
    uint64_t n = 0, mark = 9;
    REQUIRE_OK(shoal_ordered_len(plain, &n));
    CHECK(n == 3); /* a, c, d */
    CHECK_RC(shoal_ordered_get(plain, "b", 1, NULL, 0, &len), SHOAL_NOT_FOUND);
    REQUIRE_OK(shoal_store_ordered_marker(s, 2, &mark));
    CHECK(mark == 0);
    /* A nested commit is undone by its parent's abort, open nested ones included. */
    REQUIRE_OK(shoal_ordered_txn_begin((const shoal_ordered *[]){plain}, 1, &t));
    REQUIRE_OK(shoal_ordered_txn_nested_begin(t));
    REQUIRE_OK(shoal_ordered_txn_put(t, plain, "e", 1, "5", 1));
    REQUIRE_OK(shoal_ordered_txn_nested_commit(t));
    REQUIRE_OK(shoal_ordered_txn_nested_begin(t));
    REQUIRE_OK(shoal_ordered_txn_abort(t));
    CHECK_RC(shoal_ordered_get(plain, "e", 1, NULL, 0, &len), SHOAL_NOT_FOUND);
    CHECK_RC(shoal_ordered_txn_nested_begin(NULL), SHOAL_NULL_POINTER);

    shoal_ordered_close(ints);
    shoal_ordered_close(multi);
    shoal_ordered_close(plain);
    shoal_store_close(s);
}

/* Cursors on a write transaction: they see its own writes (and its nested ones'), write
 * at where they stand, stay usable across writes through the transaction, and refuse
 * every call once it ends. */
static void test_txn_cursors(void) {
    shoal_store *s = fresh("txn-cursors");
    if (!s) { CHECK(0); return; }
    shoal_ordered *m = NULL, *multi = NULL, *other = NULL;
    REQUIRE_OK(shoal_ordered_open(s, "m", SHOAL_MAP_CREATE, &m));
    REQUIRE_OK(shoal_ordered_open(s, "multi", SHOAL_MAP_CREATE | SHOAL_ORDERED_DUPS, &multi));
    REQUIRE_OK(shoal_ordered_open(s, "other", SHOAL_MAP_CREATE, &other));
    REQUIRE_OK(shoal_ordered_put(m, "a", 1, "1", 1));
    REQUIRE_OK(shoal_ordered_put(m, "c", 1, "1", 1));
    shoal_ordered_txn *t = NULL;
    REQUIRE_OK(shoal_ordered_txn_begin((const shoal_ordered *[]){m, multi}, 2, &t));
    shoal_ordered_cursor *c = NULL;
    CHECK_RC(shoal_ordered_txn_cursor_open(t, other, &c), SHOAL_INVALID);
    CHECK(c == NULL);
    REQUIRE_OK(shoal_ordered_txn_cursor_open(t, m, &c));
    /* Writes through the transaction after the cursor opened are seen by it. */
    REQUIRE_OK(shoal_ordered_txn_put(t, m, "b", 1, "2", 1));
    REQUIRE_OK(shoal_ordered_cursor_first(c));
    check_at_pair(c, "a", "1");
    REQUIRE_OK(shoal_ordered_cursor_next(c));
    check_at_pair(c, "b", "2");
    uint64_t pos = 0;
    REQUIRE_OK(shoal_ordered_cursor_position(c, &pos));
    CHECK(pos == 1);
    /* Its entry replaced through the transaction: read again. */
    REQUIRE_OK(shoal_ordered_txn_put(t, m, "b", 1, "3", 1));
    check_at_pair(c, "b", "3");
    /* Written at the cursor. */
    REQUIRE_OK(shoal_ordered_cursor_put_current(c, "4", 1));
    check_at_pair(c, "b", "4");
    char buf[8];
    size_t vl = 0;
    REQUIRE_OK(shoal_ordered_txn_get(t, m, "b", 1, buf, sizeof buf, &vl));
    CHECK(vl == 1 && buf[0] == '4');
    /* Removed at the cursor: it stands in the gap; next and prev leave it. */
    REQUIRE_OK(shoal_ordered_cursor_remove_current(c));
    const void *kp = NULL;
    size_t kl = 0;
    CHECK_RC(shoal_ordered_cursor_get(c, &kp, &kl, NULL, NULL), SHOAL_NOT_FOUND);
    CHECK_RC(shoal_ordered_cursor_remove_current(c), SHOAL_NOT_FOUND);
    REQUIRE_OK(shoal_ordered_cursor_next(c));
    check_at_pair(c, "c", "1");
    /* Its entry removed in a nested transaction: gone while it is open, back after its
     * abort. */
    REQUIRE_OK(shoal_ordered_txn_nested_begin(t));
    REQUIRE_OK(shoal_ordered_txn_remove(t, m, "c", 1));
    CHECK_RC(shoal_ordered_cursor_get(c, &kp, &kl, NULL, NULL), SHOAL_NOT_FOUND);
    REQUIRE_OK(shoal_ordered_cursor_prev(c));
    check_at_pair(c, "a", "1");
    REQUIRE_OK(shoal_ordered_txn_nested_abort(t));
    REQUIRE_OK(shoal_ordered_cursor_next(c));
    check_at_pair(c, "c", "1");
    CHECK_RC(shoal_ordered_cursor_next(c), SHOAL_NOT_FOUND);

    /* A multimap's values, the transaction's own among the committed. */
    shoal_ordered_cursor *mc = NULL;
    REQUIRE_OK(shoal_ordered_txn_put(t, multi, "k", 1, "b", 1));
    REQUIRE_OK(shoal_ordered_txn_put(t, multi, "k", 1, "a", 1));
    REQUIRE_OK(shoal_ordered_txn_cursor_open(t, multi, &mc));
    REQUIRE_OK(shoal_ordered_cursor_seek(mc, "k", 1));
    check_at_pair(mc, "k", "a");
    uint64_t nv = 0;
    REQUIRE_OK(shoal_ordered_cursor_count_values(mc, &nv));
    CHECK(nv == 2);
    REQUIRE_OK(shoal_ordered_cursor_next_value(mc));
    check_at_pair(mc, "k", "b");
    REQUIRE_OK(shoal_ordered_cursor_put_current(mc, "0", 1));
    check_at_pair(mc, "k", "0");
    REQUIRE_OK(shoal_ordered_cursor_seek_value(mc, "k", 1, "a", 1, false));

    /* A snapshot's cursor does not write. */
    shoal_ordered_snapshot *snap = NULL;
    shoal_ordered_cursor *sc = NULL;
    REQUIRE_OK(shoal_ordered_snapshot_open(m, &snap));
    REQUIRE_OK(shoal_ordered_cursor_open(snap, &sc));
    REQUIRE_OK(shoal_ordered_cursor_first(sc));
    CHECK_RC(shoal_ordered_cursor_remove_current(sc), SHOAL_INVALID);
    CHECK_RC(shoal_ordered_cursor_put_current(sc, "x", 1), SHOAL_INVALID);
    shoal_ordered_cursor_close(sc);
    shoal_ordered_snapshot_close(snap);

    REQUIRE_OK(shoal_ordered_txn_commit(t, NULL));
    /* The transaction is over: its cursors refuse every call but close. */
    CHECK_RC(shoal_ordered_cursor_first(c), SHOAL_INVALID);
    CHECK_RC(shoal_ordered_cursor_get(c, &kp, &kl, NULL, NULL), SHOAL_INVALID);
    CHECK_RC(shoal_ordered_cursor_remove_current(mc), SHOAL_INVALID);
    REQUIRE_OK(shoal_ordered_cursor_close(c));
    REQUIRE_OK(shoal_ordered_cursor_close(mc));
    uint64_t n = 0;
    CHECK_RC(shoal_ordered_get(m, "b", 1, buf, sizeof buf, &vl), SHOAL_NOT_FOUND);
    REQUIRE_OK(shoal_ordered_len(m, &n));
    CHECK(n == 2);
    char vals[64] = "";
    REQUIRE_OK(shoal_ordered_values(multi, "k", 1, collect_values, vals, &nv));
    CHECK(nv == 2 && strcmp(vals, "0,a,") == 0);
    shoal_ordered_close(m);
    shoal_ordered_close(multi);
    shoal_ordered_close(other);
    shoal_store_close(s);
}

int main(void) {
    const char *base = getenv("SHOAL_TEST_DIR");
    snprintf(g_dir, sizeof g_dir, "%s/shoal-ordered-XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 2;
    }
    RUN(test_open_and_kinds);
    RUN(test_point_calls_against_a_reference);
    RUN(test_ranges);
    RUN(test_snapshots_keep_their_view);
    RUN(test_transactions);
    RUN(test_forms_and_more_writes);
    RUN(test_cursors_and_nested);
    RUN(test_txn_cursors);
    RUN(test_handles_stay_on_their_thread);
    RUN(test_two_processes);
    int rc = finish();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    return rc;
}
