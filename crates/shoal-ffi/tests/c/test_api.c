/* Tests of every function of the C API and of its error paths: bad arguments, NULL
 * pointers, buffers too small, bad files, and the store-level errors (full, no space,
 * too many users, timeout, permission, corruption). Plain C11 with a small harness. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static char g_dir[256];

/* A path in this run's temporary directory. */
static const char *tpath(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/%s", g_dir, name);
    return buf;
}

/* Options for small test stores (fast to create, little address space). */
static shoal_options small_opts(void) {
    shoal_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.max_size = 256u << 20;
    return o;
}

/* A fresh store at NAME and a map "m" in it. */
static int fresh(const char *name, shoal_store **s, shoal_map **m) {
    char p[512];
    tpath(p, sizeof p, name);
    shoal_store_destroy(p);
    shoal_options o = small_opts();
    o.open_mode = SHOAL_CREATE_NEW;
    shoal_status rc = shoal_store_open(p, &o, s);
    if (rc != SHOAL_OK) {
        fprintf(stderr, "fresh(%s): %s: %s\n", name, shoal_strerror(rc), shoal_last_error_message());
        return 0;
    }
    if (m) {
        rc = shoal_map_open(*s, "m", SHOAL_MAP_CREATE, NULL, m);
        if (rc != SHOAL_OK) {
            fprintf(stderr, "fresh(%s) map: %s\n", name, shoal_last_error_message());
            return 0;
        }
    }
    return 1;
}

static int write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    size_t n = fwrite(data, 1, len, f);
    fclose(f);
    return n == len;
}

static int patch_file(const char *path, off_t off, const void *data, size_t len) {
    int fd = open(path, O_RDWR);
    if (fd < 0) return 0;
    ssize_t n = pwrite(fd, data, len, off);
    close(fd);
    return n == (ssize_t)len;
}

/* Whether the last error message names `want` (a C call) and no Rust API: the messages
 * of this library speak C. Prints the message if not. */
static int msg_names(const char *want) {
    const char *m = shoal_last_error_message();
    int ok = strstr(m, want) != NULL && strstr(m, "Store::") == NULL &&
             strstr(m, "MapOptions::") == NULL;
    if (!ok) fprintf(stderr, "  message \"%s\" should name %s and no Rust API\n", m, want);
    return ok;
}

/* Waits for a child and returns its exit code (or 128 + signal). */
static int wait_child(pid_t pid) {
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return 255;
}

/* ---- library-wide functions ------------------------------------------------------- */

static void test_strerror_and_version(void) {
    const shoal_status codes[] = {
        SHOAL_OK, SHOAL_NOT_FOUND, SHOAL_EXISTS, SHOAL_FULL, SHOAL_NO_SPACE, SHOAL_CORRUPT,
        SHOAL_VERSION, SHOAL_PERMISSION, SHOAL_INVALID, SHOAL_TIMEOUT, SHOAL_TOO_MANY, SHOAL_IO,
        SHOAL_BUFFER_TOO_SMALL, SHOAL_NULL_POINTER, SHOAL_PANIC, SHOAL_NOT_A_STORE, SHOAL_DONE,
        SHOAL_ERROR, SHOAL_MISMATCH, SHOAL_STALE_UID};
    const size_t n = sizeof codes / sizeof codes[0];
    for (size_t i = 0; i < n; i++) {
        const char *s = shoal_strerror(codes[i]);
        CHECK(s != NULL && strlen(s) > 0);
        CHECK(strcmp(s, "unknown status") != 0);
        for (size_t j = 0; j < i; j++) CHECK(strcmp(s, shoal_strerror(codes[j])) != 0);
    }
    CHECK(strcmp(shoal_strerror(-1), "unknown status") == 0);
    CHECK(strcmp(shoal_strerror(1000), "unknown status") == 0);
    CHECK(SHOAL_OK == 0);
    const char *v = shoal_version();
    CHECK(v != NULL && strchr(v, '.') != NULL);
}

static void *thread_last_error(void *arg) {
    (void)arg;
    /* A new thread has no error yet. */
    return (void *)(intptr_t)(strcmp(shoal_last_error_message(), "") == 0);
}

static void test_last_error_message_and_panic(void) {
    CHECK_RC(shoal_store_open(NULL, NULL, NULL), SHOAL_NULL_POINTER);
    CHECK(strstr(shoal_last_error_message(), "out is NULL") != NULL);
    pthread_t t;
    void *ok = NULL;
    CHECK(pthread_create(&t, NULL, thread_last_error, NULL) == 0);
    pthread_join(t, &ok);
    CHECK(ok == (void *)1);
    /* A panic inside the library comes back as a status, with its message. */
    CHECK_RC(shoal_test_panic(), SHOAL_PANIC);
    CHECK(strstr(shoal_last_error_message(), "panic") != NULL);
    /* ...and the library works afterwards. */
    CHECK_RC(shoal_test_panic(), SHOAL_PANIC);
    shoal_store *s;
    shoal_map *m;
    if (!fresh("after-panic", &s, &m)) { h_failures++; return; }
    CHECK_RC(shoal_map_put(m, "k", 1, "v", 1, NULL), SHOAL_OK);
    shoal_map_close(m);
    shoal_store_close(s);
}

/* ---- stores ------------------------------------------------------------------------ */

static void test_store_open_modes_and_options(void) {
    char p[512];
    tpath(p, sizeof p, "modes");
    shoal_store_destroy(p);
    shoal_store *s = (shoal_store *)1;
    shoal_options o = small_opts();

    /* NULL arguments. */
    CHECK_RC(shoal_store_open(p, &o, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_store_open(NULL, &o, &s), SHOAL_NULL_POINTER);
    CHECK(s == NULL); /* out is cleared on failure */

    /* Open-existing of a missing file; create-new; create-new again. */
    o.open_mode = SHOAL_OPEN_EXISTING;
    CHECK_RC(shoal_store_open(p, &o, &s), SHOAL_NOT_FOUND);
    CHECK(s == NULL);
    o.open_mode = SHOAL_CREATE_NEW;
    o.file_mode = 0640;
    REQUIRE_OK(shoal_store_open(p, &o, &s));
    struct stat st;
    CHECK(stat(p, &st) == 0 && (st.st_mode & 07777) == 0640);
    shoal_store *s2 = NULL;
    CHECK_RC(shoal_store_open(p, &o, &s2), SHOAL_EXISTS);
    o.open_mode = SHOAL_OPEN_EXISTING;
    CHECK_RC(shoal_store_open(p, &o, &s2), SHOAL_OK);
    CHECK_RC(shoal_store_close(s2), SHOAL_OK);
    CHECK_RC(shoal_store_close(s), SHOAL_OK);
    CHECK_RC(shoal_store_close(NULL), SHOAL_OK);

    /* NULL options: open or create with defaults. */
    CHECK_RC(shoal_store_open(p, NULL, &s), SHOAL_OK);
    shoal_store_close(s);

    /* Bad options. */
    o = small_opts();
    o.open_mode = 7;
    CHECK_RC(shoal_store_open(p, &o, &s), SHOAL_INVALID);
    o = small_opts();
    o.file_mode = 010000;
    CHECK_RC(shoal_store_open(p, &o, &s), SHOAL_INVALID);
    o = small_opts();
    o.struct_size = 0;
    CHECK_RC(shoal_store_open(p, &o, &s), SHOAL_INVALID);
    CHECK(strstr(shoal_last_error_message(), "struct_size") != NULL);
    char p2[512];
    tpath(p2, sizeof p2, "badopts");
    o = small_opts();
    o.chunk_size = 1000;
    CHECK_RC(shoal_store_open(p2, &o, &s), SHOAL_INVALID);
    o = small_opts();
    o.max_maps = 100000;
    CHECK_RC(shoal_store_open(p2, &o, &s), SHOAL_INVALID);
    o = small_opts();
    o.max_size = 4096; /* below the tables */
    CHECK_RC(shoal_store_open(p2, &o, &s), SHOAL_INVALID);
    CHECK(access(p2, F_OK) != 0);
    o = small_opts();
    o.pretouch = 3;
    CHECK_RC(shoal_store_open(p2, &o, &s), SHOAL_INVALID);
    CHECK(strstr(shoal_last_error_message(), "pretouch") != NULL);
    o = small_opts();
    o.reserved = 1;
    CHECK_RC(shoal_store_open(p2, &o, &s), SHOAL_INVALID);
    CHECK(access(p2, F_OK) != 0);
    /* Pretouching off: a store like any other. */
    o = small_opts();
    o.pretouch = 2;
    REQUIRE_OK(shoal_store_open(p2, &o, &s));
    shoal_map *mp = NULL;
    REQUIRE_OK(shoal_map_open(s, "m", SHOAL_MAP_CREATE, NULL, &mp));
    CHECK_RC(shoal_map_put(mp, "k", 1, "v", 1, NULL), SHOAL_OK);
    shoal_map_close(mp);
    shoal_store_close(s);
    shoal_store_destroy(p2);

    /* A caller compiled against an older header (a shorter struct): the missing fields
     * take their defaults. */
    o = small_opts();
    o.struct_size = offsetof(shoal_options, initial_size);
    o.max_size = 64u << 20;
    o.max_maps = 1; /* beyond struct_size: ignored */
    shoal_store_destroy(p2);
    REQUIRE_OK(shoal_store_open(p2, &o, &s));
    shoal_store_stats ss;
    memset(&ss, 0, sizeof ss);
    ss.struct_size = sizeof ss;
    CHECK_RC(shoal_store_get_stats(s, &ss), SHOAL_OK);
    CHECK(ss.max_size == 64u << 20);
    shoal_map *m1 = NULL, *m2 = NULL;
    CHECK_RC(shoal_map_open(s, "one", SHOAL_MAP_CREATE, NULL, &m1), SHOAL_OK);
    CHECK_RC(shoal_map_open(s, "two", SHOAL_MAP_CREATE, NULL, &m2), SHOAL_OK); /* max_maps ignored */
    shoal_map_close(m1);
    shoal_map_close(m2);
    shoal_store_close(s);

    /* A caller compiled against a newer header: unknown trailing fields must be zero. */
    struct {
        shoal_options o;
        uint64_t future;
    } big;
    memset(&big, 0, sizeof big);
    big.o.struct_size = sizeof big;
    CHECK_RC(shoal_store_open(p2, &big.o, &s), SHOAL_OK);
    shoal_store_close(s);
    big.future = 1;
    CHECK_RC(shoal_store_open(p2, &big.o, &s), SHOAL_INVALID);
    shoal_store_destroy(p2);
    shoal_store_destroy(p);
}

static void test_store_bad_files(void) {
    char p[512];
    shoal_store *s = NULL;
    shoal_options o = small_opts();

    tpath(p, sizeof p, "empty.shoal");
    CHECK(write_file(p, "", 0));
    CHECK_RC(shoal_store_open(p, &o, &s), SHOAL_NOT_A_STORE);
    CHECK(strstr(shoal_last_error_message(), "not a Shoal store") != NULL);

    tpath(p, sizeof p, "garbage.shoal");
    static const char junk[] = "this is not a store, just some text in a file\n";
    CHECK(write_file(p, junk, sizeof junk));
    CHECK_RC(shoal_store_open(p, &o, &s), SHOAL_NOT_A_STORE);
    o.open_mode = SHOAL_CREATE_NEW;
    CHECK_RC(shoal_store_open(p, &o, &s), SHOAL_EXISTS);
    o.open_mode = SHOAL_OPEN_OR_CREATE;

    /* A real store, then damaged headers. */
    tpath(p, sizeof p, "damaged.shoal");
    shoal_store_destroy(p);
    REQUIRE_OK(shoal_store_open(p, &o, &s));
    shoal_store_close(s);
    uint32_t version = 999;
    CHECK(patch_file(p, 8, &version, 4));
    CHECK_RC(shoal_store_open(p, &o, &s), SHOAL_VERSION);
    if (s) shoal_store_close(s);
    version = 5; /* the format version this library writes */
    CHECK(patch_file(p, 8, &version, 4));
    uint64_t flags = 1ull << 63; /* a flag no version knows */
    CHECK(patch_file(p, 16, &flags, 8));
    CHECK_RC(shoal_store_open(p, &o, &s), SHOAL_CORRUPT);
    if (s) shoal_store_close(s);
    CHECK(strstr(shoal_last_error_message(), "flags") != NULL);
    CHECK(truncate(p, 100) == 0);
    CHECK_RC(shoal_store_open(p, &o, &s), SHOAL_CORRUPT);
    CHECK(strstr(shoal_last_error_message(), "truncated") != NULL);
    CHECK(s == NULL);

    /* A directory: a bad argument, as documented, not an I/O error. */
    CHECK_RC(shoal_store_open(g_dir, &o, &s), SHOAL_INVALID);
    CHECK(strstr(shoal_last_error_message(), "is a directory") != NULL);
    CHECK_RC(shoal_store_repair(g_dir, &s, NULL, NULL, NULL), SHOAL_INVALID);
    /* A path whose directory does not exist. */
    tpath(p, sizeof p, "no/such/dir/x.shoal");
    CHECK_RC(shoal_store_open(p, &o, &s), SHOAL_NOT_FOUND);
}

static void test_store_permission(void) {
    char p[512];
    tpath(p, sizeof p, "private.shoal");
    shoal_store_destroy(p);
    shoal_store *s = NULL;
    shoal_options o = small_opts();
    o.file_mode = 0600;
    REQUIRE_OK(shoal_store_open(p, &o, &s));
    shoal_store_close(s);
    pid_t pid = fork();
    if (pid == 0) {
        /* As another user (root drops to nobody), or with no permission bits at all. */
        if (getuid() == 0) {
            if (setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
        } else if (chmod(p, 0) != 0) {
            _exit(4);
        }
        shoal_store *c = NULL;
        shoal_status rc = shoal_store_open(p, NULL, &c);
        if (rc != SHOAL_PERMISSION) {
            fprintf(stderr, "child: %s: %s\n", shoal_strerror(rc), shoal_last_error_message());
            _exit(1);
        }
        _exit(0);
    }
    CHECK(pid > 0 && wait_child(pid) == 0);
    chmod(p, 0600);
    CHECK_RC(shoal_store_destroy(p), SHOAL_OK);
}

/* A store opened read-only by a user who may only read it (root drops to nobody; as
 * another user the file is made mode 0444): reads and iteration work, writes are
 * SHOAL_READ_ONLY, and the file is not changed. */
static void test_store_read_only(void) {
    char p[512];
    tpath(p, sizeof p, "readonly.shoal");
    shoal_store_destroy(p);
    shoal_store *s = NULL;
    shoal_map *m = NULL;
    shoal_options o = small_opts();
    o.file_mode = 0644;
    REQUIRE_OK(shoal_store_open(p, &o, &s));
    REQUIRE_OK(shoal_map_open(s, "m", SHOAL_MAP_CREATE, NULL, &m));
    REQUIRE_OK(shoal_map_put(m, "k", 1, "v", 1, NULL));
    shoal_map_close(m);
    shoal_store_close(s);
    /* The other user must be able to reach the file. */
    CHECK(chmod(g_dir, 0755) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        if (getuid() == 0) {
            if (setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
        } else if (chmod(p, 0444) != 0) {
            _exit(4);
        }
        shoal_store *c = NULL;
        shoal_map *cm = NULL;
        if (shoal_store_open(p, NULL, &c) != SHOAL_PERMISSION) _exit(5);
        shoal_options ro;
        memset(&ro, 0, sizeof ro);
        ro.struct_size = sizeof ro;
        ro.open_mode = SHOAL_OPEN_READ_ONLY;
        shoal_status rc = shoal_store_open(p, &ro, &c);
        if (rc != SHOAL_OK) {
            fprintf(stderr, "child: %s: %s\n", shoal_strerror(rc), shoal_last_error_message());
            _exit(6);
        }
        if (shoal_map_open(c, "m", 0, NULL, &cm) != SHOAL_OK) _exit(7);
        char buf[8];
        size_t len = 0;
        if (shoal_map_get(cm, "k", 1, buf, sizeof buf, &len) != SHOAL_OK || len != 1 ||
            buf[0] != 'v')
            _exit(8);
        if (shoal_map_put(cm, "k", 1, "w", 1, NULL) != SHOAL_READ_ONLY) _exit(9);
        shoal_map *nm = NULL;
        if (shoal_map_open(c, "new", SHOAL_MAP_CREATE, NULL, &nm) != SHOAL_READ_ONLY) _exit(10);
        if (strcmp(shoal_strerror(SHOAL_READ_ONLY), "unknown status") == 0) _exit(11);
        shoal_map_close(cm);
        shoal_store_close(c);
        _exit(0);
    }
    CHECK(pid > 0 && wait_child(pid) == 0);
    chmod(g_dir, 0700);
    chmod(p, 0644);
    REQUIRE_OK(shoal_store_open(p, &o, &s));
    REQUIRE_OK(shoal_map_open(s, "m", 0, NULL, &m));
    char buf[8];
    size_t len = 0;
    CHECK_RC(shoal_map_get(m, "k", 1, buf, sizeof buf, &len), SHOAL_OK);
    CHECK(len == 1 && buf[0] == 'v');
    shoal_map_close(m);
    shoal_store_close(s);
    CHECK_RC(shoal_store_destroy(p), SHOAL_OK);
}

static void test_store_backup_idle(void) {
    char p[512], c[512];
    tpath(p, sizeof p, "backup.shoal");
    tpath(c, sizeof c, "backup-copy.shoal");
    shoal_store_destroy(p);
    unlink(c);
    shoal_store *s = NULL;
    shoal_map *m = NULL;
    REQUIRE_OK(shoal_store_open(p, NULL, &s));
    REQUIRE_OK(shoal_map_open(s, "m", SHOAL_MAP_CREATE, NULL, &m));
    CHECK_RC(shoal_map_put(m, "k", 1, "v", 1, NULL), SHOAL_OK);
    uint64_t n = 0;
    /* Open here: refused, nothing created. */
    CHECK_RC(shoal_store_backup_idle(p, c, &n), SHOAL_TOO_MANY);
    CHECK(access(c, F_OK) != 0);
    shoal_map_close(m);
    shoal_store_close(s);
    CHECK_RC(shoal_store_backup_idle(NULL, c, &n), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_store_backup_idle(p, NULL, &n), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_store_backup_idle(p, c, &n), SHOAL_OK);
    CHECK(n > 0);
    CHECK_RC(shoal_store_backup_idle(p, c, NULL), SHOAL_EXISTS);
    /* The copy opens, holds the entry and passes check. */
    s = NULL;
    m = NULL;
    REQUIRE_OK(shoal_store_open(c, NULL, &s));
    REQUIRE_OK(shoal_map_open(s, "m", 0, NULL, &m));
    char buf[8];
    size_t vl = 0;
    CHECK_RC(shoal_map_get(m, "k", 1, buf, sizeof buf, &vl), SHOAL_OK);
    CHECK(vl == 1 && buf[0] == 'v');
    shoal_check_report r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    CHECK_RC(shoal_store_check(s, &r, NULL, NULL), SHOAL_OK);
    CHECK(r.problems == 0 && r.entries == 1);
    shoal_map_close(m);
    shoal_store_close(s);
    shoal_store_destroy(c);
    shoal_store_destroy(p);
}

/* The writer of test_store_backup: transfers between two accounts in two maps (a chunk
 * apart in the file, so that a plain file copy could tear them), one two-key transaction
 * each, until told to stop; counts its commits. */
struct backup_writer {
    const shoal_store *s;
    const shoal_fixed *fa, *fb;
    int stop;
    long commits;
    shoal_status rc;
};

static void *backup_writer_run(void *arg) {
    struct backup_writer *w = arg;
    uint64_t ka = 1, kb = 2;
    while (!__atomic_load_n(&w->stop, __ATOMIC_RELAXED)) {
        long n = __atomic_load_n(&w->commits, __ATOMIC_RELAXED);
        int64_t amt = 1 + n % 7;
        shoal_txn_op ops[2] = {
            {w->fa, NULL, &ka, 8, SHOAL_TXN_ADD, 0, NULL, 0, -amt, NULL, 0, 0, 0, 0},
            {w->fb, NULL, &kb, 8, SHOAL_TXN_ADD, 0, NULL, 0, amt, NULL, 0, 0, 0, 0},
        };
        bool ok = false;
        shoal_status rc = shoal_txn_commit(w->s, NULL, 0, ops, 2, NULL, 0, &ok);
        if (rc != SHOAL_OK || !ok) {
            __atomic_store_n(&w->rc, rc == SHOAL_OK ? SHOAL_INVALID : rc, __ATOMIC_RELAXED);
            break;
        }
        __atomic_store_n(&w->commits, n + 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* The hot backup of a store this process has open, while another thread commits
 * transfers: the copy opens, passes check, and holds one instant's pair of accounts
 * (their sum exact) and the entry written before. */
static void test_store_backup(void) {
    char c[512];
    tpath(c, sizeof c, "hot-copy.shoal");
    unlink(c);
    shoal_store *s;
    shoal_map *m;
    if (!fresh("hot.shoal", &s, &m)) { h_failures++; return; }
    CHECK_RC(shoal_map_put(m, "k", 1, "v", 1, NULL), SHOAL_OK);
    shoal_fixed *fa, *fb;
    REQUIRE_OK(shoal_fixed_open(s, "a", 8, 8, SHOAL_MAP_CREATE, &fa));
    REQUIRE_OK(shoal_fixed_open(s, "b", 8, 8, SHOAL_MAP_CREATE, &fb));
    uint64_t ka = 1, kb = 2;
    int64_t start = 1000000;
    CHECK_RC(shoal_fixed_put(fa, &ka, 8, &start, 8, NULL), SHOAL_OK);
    CHECK_RC(shoal_fixed_put(fb, &kb, 8, &start, 8, NULL), SHOAL_OK);
    struct backup_writer w = {s, fa, fb, 0, 0, SHOAL_OK};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, backup_writer_run, &w) == 0);
    /* Copy once the writer is going (bounded wait: 10 s). */
    for (int i = 0; i < 10000 && __atomic_load_n(&w.commits, __ATOMIC_RELAXED) < 100 &&
                    __atomic_load_n(&w.rc, __ATOMIC_RELAXED) == SHOAL_OK;
         i++)
        usleep(1000);
    uint64_t n = 0;
    CHECK_RC(shoal_store_backup(s, c, &n), SHOAL_OK);
    CHECK(n > 0);
    __atomic_store_n(&w.stop, 1, __ATOMIC_RELAXED);
    pthread_join(t, NULL);
    CHECK_RC(w.rc, SHOAL_OK);
    CHECK(w.commits > 0);
    CHECK_RC(shoal_store_backup(s, c, NULL), SHOAL_EXISTS);
    CHECK_RC(shoal_store_backup(NULL, c, &n), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_store_backup(s, NULL, &n), SHOAL_NULL_POINTER);
    shoal_fixed_close(fa);
    shoal_fixed_close(fb);
    shoal_map_close(m);
    shoal_store_close(s);

    s = NULL;
    m = NULL;
    fa = fb = NULL;
    REQUIRE_OK(shoal_store_open(c, NULL, &s));
    shoal_check_report r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    CHECK_RC(shoal_store_check(s, &r, NULL, NULL), SHOAL_OK);
    CHECK(r.problems == 0);
    REQUIRE_OK(shoal_map_open(s, "m", 0, NULL, &m));
    char buf[8];
    size_t vl = 0;
    CHECK_RC(shoal_map_get(m, "k", 1, buf, sizeof buf, &vl), SHOAL_OK);
    CHECK(vl == 1 && buf[0] == 'v');
    REQUIRE_OK(shoal_fixed_open(s, "a", 8, 8, 0, &fa));
    REQUIRE_OK(shoal_fixed_open(s, "b", 8, 8, 0, &fb));
    int64_t a = 0, b = 0;
    CHECK_RC(shoal_fixed_get(fa, &ka, 8, &a, 8), SHOAL_OK);
    CHECK_RC(shoal_fixed_get(fb, &kb, 8, &b, 8), SHOAL_OK);
    CHECK(a + b == 2 * start);
    CHECK(a < start); /* the writer had committed before the copy's instant */
    shoal_fixed_close(fa);
    shoal_fixed_close(fb);
    shoal_map_close(m);
    shoal_store_close(s);
    shoal_store_destroy(c);
    tpath(c, sizeof c, "hot.shoal");
    shoal_store_destroy(c);
}

static void test_store_destroy_and_path(void) {
    char p[512];
    tpath(p, sizeof p, "destroy.shoal");
    shoal_store_destroy(p);
    CHECK_RC(shoal_store_destroy(NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_store_destroy(p), SHOAL_NOT_FOUND);
    shoal_store *s = NULL;
    REQUIRE_OK(shoal_store_open(p, NULL, &s));

    size_t len = 0;
    char buf[512];
    CHECK_RC(shoal_store_path(NULL, buf, sizeof buf, &len), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_store_path(s, buf, sizeof buf, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_store_path(s, NULL, 0, &len), SHOAL_BUFFER_TOO_SMALL);
    CHECK(len == strlen(p));
    memset(buf, 'x', sizeof buf);
    CHECK_RC(shoal_store_path(s, buf, len, &len), SHOAL_BUFFER_TOO_SMALL); /* no room for NUL */
    CHECK(buf[0] == 'x');
    CHECK_RC(shoal_store_path(s, NULL, len + 1, &len), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_store_path(s, buf, len + 1, &len), SHOAL_OK);
    CHECK(strcmp(buf, p) == 0);

    /* Destroying a store in use: handles keep working; a new open makes a new store. */
    shoal_map *m = NULL;
    REQUIRE_OK(shoal_map_open(s, "m", SHOAL_MAP_CREATE, NULL, &m));
    CHECK_RC(shoal_store_destroy(p), SHOAL_OK);
    CHECK(access(p, F_OK) != 0);
    CHECK_RC(shoal_map_put(m, "k", 1, "v", 1, NULL), SHOAL_OK);
    shoal_map_close(m);
    shoal_store_close(s);

    /* A bare name means /dev/shm/NAME.shoal. */
    char name[64];
    snprintf(name, sizeof name, "shoal-ctest-%d", (int)getpid());
    REQUIRE_OK(shoal_store_open(name, NULL, &s));
    CHECK_RC(shoal_store_path(s, buf, sizeof buf, &len), SHOAL_OK);
    char want[128];
    snprintf(want, sizeof want, "/dev/shm/%s.shoal", name);
    CHECK(strcmp(buf, want) == 0);
    shoal_store_close(s);
    CHECK_RC(shoal_store_destroy(name), SHOAL_OK);
}

struct names {
    int n;
    int stop_after;
    char seen[8][64];
};

static int collect_name(void *ctx, const char *name, size_t len) {
    struct names *c = ctx;
    if (c->n < 8 && len < 64) {
        memcpy(c->seen[c->n], name, len + 1); /* NUL-terminated */
    }
    c->n++;
    return c->stop_after > 0 && c->n >= c->stop_after;
}

static int has_name(const struct names *c, const char *name) {
    for (int i = 0; i < c->n && i < 8; i++)
        if (strcmp(c->seen[i], name) == 0) return 1;
    return 0;
}

static void test_store_maps_and_drop(void) {
    shoal_store *s;
    if (!fresh("maps", &s, NULL)) { h_failures++; return; }
    shoal_map *a = NULL, *b = NULL, *c = NULL;
    REQUIRE_OK(shoal_map_open(s, "alpha", SHOAL_MAP_CREATE, NULL, &a));
    REQUIRE_OK(shoal_map_open(s, "beta", SHOAL_MAP_CREATE, NULL, &b));
    REQUIRE_OK(shoal_map_open(s, "gamma", SHOAL_MAP_CREATE, NULL, &c));
    struct names got = {0};
    CHECK_RC(shoal_store_maps(NULL, collect_name, &got), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_store_maps(s, NULL, &got), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_store_maps(s, collect_name, &got), SHOAL_OK);
    CHECK(got.n == 3 && has_name(&got, "alpha") && has_name(&got, "beta") && has_name(&got, "gamma"));
    struct names one = {0};
    one.stop_after = 1;
    CHECK_RC(shoal_store_maps(s, collect_name, &one), SHOAL_OK);
    CHECK(one.n == 1);

    CHECK_RC(shoal_map_put(b, "k", 1, "v", 1, NULL), SHOAL_OK);
    CHECK_RC(shoal_store_drop_map(NULL, "beta"), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_store_drop_map(s, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_store_drop_map(s, ""), SHOAL_INVALID);
    CHECK_RC(shoal_store_drop_map(s, "nope"), SHOAL_NOT_FOUND);
    CHECK_RC(shoal_store_drop_map(s, "beta"), SHOAL_OK);
    CHECK_RC(shoal_store_drop_map(s, "beta"), SHOAL_NOT_FOUND);
    /* The dropped map's handle reports NOT_FOUND from then on. */
    uint64_t n = 0;
    CHECK_RC(shoal_map_len(b, &n), SHOAL_NOT_FOUND);
    struct names after = {0};
    CHECK_RC(shoal_store_maps(s, collect_name, &after), SHOAL_OK);
    CHECK(after.n == 2 && !has_name(&after, "beta"));
    shoal_map_close(a);
    shoal_map_close(b);
    shoal_map_close(c);
    shoal_store_close(s);
}

static void test_store_stats_compact(void) {
    shoal_store *s;
    shoal_map *m;
    if (!fresh("stats", &s, &m)) { h_failures++; return; }
    char v[1000];
    memset(v, 'v', sizeof v);
    for (int i = 0; i < 2000; i++) {
        char k[32];
        int kl = snprintf(k, sizeof k, "key-%d", i);
        CHECK_RC(shoal_map_put(m, k, (size_t)kl, v, sizeof v, NULL), SHOAL_OK);
    }
    CHECK_RC(shoal_map_clear(m), SHOAL_OK);

    shoal_store_stats st;
    memset(&st, 0, sizeof st);
    CHECK_RC(shoal_store_get_stats(NULL, &st), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_store_get_stats(s, NULL), SHOAL_NULL_POINTER);
    st.struct_size = 0;
    CHECK_RC(shoal_store_get_stats(s, &st), SHOAL_INVALID);
    st.struct_size = sizeof st;
    CHECK_RC(shoal_store_get_stats(s, &st), SHOAL_OK);
    CHECK(st.struct_size == sizeof st);
    CHECK(st.maps == 1 && st.processes >= 1 && st.max_size == 256u << 20);
    CHECK(st.file_size > 0 && st.data_bytes >= st.live_bytes && st.dead_bytes > 0);

    /* An older caller's shorter struct: only its fields are written. */
    shoal_store_stats old;
    memset(&old, 0xAB, sizeof old);
    old.struct_size = offsetof(shoal_store_stats, max_size);
    CHECK_RC(shoal_store_get_stats(s, &old), SHOAL_OK);
    CHECK(old.struct_size == offsetof(shoal_store_stats, max_size));
    CHECK(old.file_size == st.file_size);
    CHECK(old.max_size == 0xABABABABABABABABull);

    uint64_t freed = 12345;
    CHECK_RC(shoal_store_compact(NULL, &freed), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_store_compact(s, &freed), SHOAL_OK);
    CHECK(freed != 12345);
    CHECK_RC(shoal_store_compact(s, NULL), SHOAL_OK);
    shoal_map_close(m);
    shoal_store_close(s);
}

static int collect_problem(void *ctx, const char *text, size_t len) {
    int *n = ctx;
    CHECK(text != NULL && strlen(text) == len && len > 0);
    (*n)++;
    return 0;
}

static int stop_at_first(void *ctx, const char *text, size_t len) {
    (void)text;
    (void)len;
    (*(int *)ctx)++;
    return 1;
}

static void test_store_check(void) {
    char p[512];
    tpath(p, sizeof p, "check.shoal");
    shoal_store_destroy(p);
    shoal_store *s = NULL;
    shoal_options o = small_opts();
    REQUIRE_OK(shoal_store_open(p, &o, &s));
    shoal_map *m = NULL;
    REQUIRE_OK(shoal_map_open(s, "m", SHOAL_MAP_CREATE, NULL, &m));
    for (int i = 0; i < 20; i++) {
        char k[64];
        int kl = snprintf(k, sizeof k, "corruptme-key-%04d", i);
        CHECK_RC(shoal_map_put(m, k, (size_t)kl, "value", 5, NULL), SHOAL_OK);
    }
    shoal_check_report r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    int problems = 0;
    CHECK_RC(shoal_store_check(NULL, &r, NULL, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_store_check(s, &r, collect_problem, &problems), SHOAL_OK);
    CHECK(r.problems == 0 && r.maps == 1 && r.entries == 20 && r.segments >= 1 && r.chunks >= 1);
    CHECK(problems == 0);
    CHECK_RC(shoal_store_check(s, NULL, NULL, NULL), SHOAL_OK);
    r.struct_size = 3;
    CHECK_RC(shoal_store_check(s, &r, NULL, NULL), SHOAL_INVALID);
    shoal_map_close(m);
    shoal_store_close(s);

    /* Damage the stored keys in the file: the checker must say so. */
    int fd = open(p, O_RDWR);
    CHECK(fd >= 0);
    struct stat st;
    CHECK(fstat(fd, &st) == 0);
    char *data = malloc((size_t)st.st_size);
    CHECK(data != NULL && pread(fd, data, (size_t)st.st_size, 0) == st.st_size);
    int patched = 0;
    for (char *q = data; (q = memmem(q, (size_t)(data + st.st_size - q), "corruptme", 9)) != NULL;
         q += 9) {
        CHECK(pwrite(fd, "CORRUPTED", 9, q - data) == 9);
        patched++;
    }
    CHECK(patched >= 20);
    free(data);
    close(fd);
    REQUIRE_OK(shoal_store_open(p, &o, &s));
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    problems = 0;
    CHECK_RC(shoal_store_check(s, &r, collect_problem, &problems), SHOAL_CORRUPT);
    CHECK(r.problems > 0 && problems == (int)r.problems);
    CHECK(strstr(shoal_last_error_message(), "problems") != NULL);
    int calls = 0;
    CHECK_RC(shoal_store_check(s, NULL, stop_at_first, &calls), SHOAL_CORRUPT);
    CHECK(calls == 1);
    shoal_store_close(s);
    shoal_store_destroy(p);
}

/* ---- maps -------------------------------------------------------------------------- */

static void test_map_open_close_name(void) {
    shoal_store *s;
    if (!fresh("mapopen", &s, NULL)) { h_failures++; return; }
    shoal_map *m = (shoal_map *)1;
    CHECK_RC(shoal_map_open(NULL, "m", SHOAL_MAP_CREATE, NULL, &m), SHOAL_NULL_POINTER);
    CHECK(m == NULL);
    CHECK_RC(shoal_map_open(s, NULL, SHOAL_MAP_CREATE, NULL, &m), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_open(s, "m", SHOAL_MAP_CREATE, NULL, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_open(s, "m", 0, NULL, &m), SHOAL_NOT_FOUND);
    CHECK_RC(shoal_map_open(s, "m", 0x80, NULL, &m), SHOAL_INVALID);
    CHECK_RC(shoal_map_open(s, "", SHOAL_MAP_CREATE, NULL, &m), SHOAL_INVALID);
    CHECK_RC(shoal_map_open(s, "bad\xff utf8", SHOAL_MAP_CREATE, NULL, &m), SHOAL_INVALID);
    char longname[SHOAL_MAX_NAME_LEN + 2];
    memset(longname, 'n', sizeof longname - 1);
    longname[SHOAL_MAX_NAME_LEN + 1] = 0;
    CHECK_RC(shoal_map_open(s, longname, SHOAL_MAP_CREATE, NULL, &m), SHOAL_INVALID);
    longname[SHOAL_MAX_NAME_LEN] = 0; /* exactly the maximum */
    CHECK_RC(shoal_map_open(s, longname, SHOAL_MAP_CREATE, NULL, &m), SHOAL_OK);
    char buf[SHOAL_MAX_NAME_LEN + 1];
    size_t len = 0;
    CHECK_RC(shoal_map_name(m, buf, sizeof buf, &len), SHOAL_OK);
    CHECK(len == SHOAL_MAX_NAME_LEN && strcmp(buf, longname) == 0);
    shoal_map_close(m);

    shoal_map_options mo;
    memset(&mo, 0, sizeof mo);
    mo.struct_size = sizeof mo;
    mo.segment_buckets = 5000;
    CHECK_RC(shoal_map_open(s, "opts", SHOAL_MAP_CREATE, &mo, &m), SHOAL_INVALID);
    mo.segment_buckets = 0;
    mo.struct_size = 0;
    CHECK_RC(shoal_map_open(s, "opts", SHOAL_MAP_CREATE, &mo, &m), SHOAL_INVALID);
    mo.struct_size = sizeof mo;
    mo.segment_buckets = 2;
    mo.stash_buckets = 1;
    REQUIRE_OK(shoal_map_open(s, "opts", SHOAL_MAP_CREATE, &mo, &m));
    /* Tiny segments split often. */
    for (int i = 0; i < 500; i++) {
        char k[16];
        int kl = snprintf(k, sizeof k, "%d", i);
        CHECK_RC(shoal_map_put(m, k, (size_t)kl, k, (size_t)kl, NULL), SHOAL_OK);
    }
    shoal_map_stats ms;
    memset(&ms, 0, sizeof ms);
    ms.struct_size = sizeof ms;
    CHECK_RC(shoal_map_get_stats(m, &ms), SHOAL_OK);
    CHECK(ms.entries == 500 && ms.segments > 4 && ms.splits > 0);

    /* shoal_map_name's buffer protocol. */
    CHECK_RC(shoal_map_name(NULL, buf, sizeof buf, &len), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_name(m, buf, sizeof buf, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_name(m, NULL, 0, &len), SHOAL_BUFFER_TOO_SMALL);
    CHECK(len == 4);
    CHECK_RC(shoal_map_name(m, buf, 4, &len), SHOAL_BUFFER_TOO_SMALL);
    CHECK_RC(shoal_map_name(m, buf, 5, &len), SHOAL_OK);
    CHECK(strcmp(buf, "opts") == 0);
    shoal_map *again = NULL;
    CHECK_RC(shoal_map_open(s, "opts", 0, NULL, &again), SHOAL_OK); /* existing: no create flag needed */
    CHECK_RC(shoal_map_close(again), SHOAL_OK);
    CHECK_RC(shoal_map_close(NULL), SHOAL_OK);

    /* A map handle outlives its store handle. */
    CHECK_RC(shoal_store_close(s), SHOAL_OK);
    CHECK_RC(shoal_map_put(m, "after", 5, "close", 5, NULL), SHOAL_OK);
    CHECK_RC(shoal_map_close(m), SHOAL_OK);
}

static void test_map_get_put_buffers(void) {
    shoal_store *s;
    shoal_map *m;
    if (!fresh("getput", &s, &m)) { h_failures++; return; }
    bool replaced = true;
    CHECK_RC(shoal_map_put(NULL, "k", 1, "v", 1, &replaced), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_put(m, NULL, 1, "v", 1, &replaced), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_put(m, "k", 1, NULL, 1, &replaced), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_put(m, "key", 3, "hello", 5, &replaced), SHOAL_OK);
    CHECK(replaced == false);
    CHECK_RC(shoal_map_put(m, "key", 3, "world!", 6, &replaced), SHOAL_OK);
    CHECK(replaced == true);
    CHECK_RC(shoal_map_put(m, "key2", 4, "x", 1, NULL), SHOAL_OK);

    char buf[64];
    size_t len = 0;
    CHECK_RC(shoal_map_get(NULL, "key", 3, buf, sizeof buf, &len), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_get(m, NULL, 3, buf, sizeof buf, &len), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_get(m, "key", 3, buf, sizeof buf, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_get(m, "key", 3, NULL, 10, &len), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_get(m, "key", 3, buf, sizeof buf, &len), SHOAL_OK);
    CHECK(len == 6 && memcmp(buf, "world!", 6) == 0);
    /* Too small: the needed length, nothing written. */
    memset(buf, '#', sizeof buf);
    len = 0;
    CHECK_RC(shoal_map_get(m, "key", 3, buf, 5, &len), SHOAL_BUFFER_TOO_SMALL);
    CHECK(len == 6 && buf[0] == '#');
    CHECK(strstr(shoal_last_error_message(), "6 bytes needed") != NULL);
    /* Length query with no buffer, then exactly the right size. */
    CHECK_RC(shoal_map_get(m, "key", 3, NULL, 0, &len), SHOAL_BUFFER_TOO_SMALL);
    CHECK(len == 6);
    CHECK_RC(shoal_map_get(m, "key", 3, buf, 6, &len), SHOAL_OK);
    CHECK(memcmp(buf, "world!", 6) == 0);
    CHECK_RC(shoal_map_get(m, "nokey", 5, buf, sizeof buf, &len), SHOAL_NOT_FOUND);
    CHECK(strcmp(shoal_last_error_message(), "key not found") == 0);

    /* Empty keys and values, with NULL pointers. */
    CHECK_RC(shoal_map_put(m, NULL, 0, NULL, 0, &replaced), SHOAL_OK);
    CHECK(replaced == false);
    len = 99;
    CHECK_RC(shoal_map_get(m, NULL, 0, NULL, 0, &len), SHOAL_OK);
    CHECK(len == 0);
    CHECK_RC(shoal_map_get(m, "", 0, buf, sizeof buf, &len), SHOAL_OK);
    CHECK(len == 0);

    /* Binary keys and values (NUL bytes inside). */
    const char bk[] = {0, 1, 2, 0, 3};
    const char bv[] = {9, 0, 9, 0};
    CHECK_RC(shoal_map_put(m, bk, sizeof bk, bv, sizeof bv, NULL), SHOAL_OK);
    CHECK_RC(shoal_map_get(m, bk, sizeof bk, buf, sizeof buf, &len), SHOAL_OK);
    CHECK(len == sizeof bv && memcmp(buf, bv, sizeof bv) == 0);

    /* Size limits. */
    static char bigkey[SHOAL_MAX_KEY_LEN + 1];
    memset(bigkey, 'k', sizeof bigkey);
    CHECK_RC(shoal_map_put(m, bigkey, SHOAL_MAX_KEY_LEN + 1, "v", 1, NULL), SHOAL_INVALID);
    CHECK_RC(shoal_map_get(m, bigkey, SHOAL_MAX_KEY_LEN + 1, buf, sizeof buf, &len), SHOAL_INVALID);
    CHECK_RC(shoal_map_put(m, bigkey, SHOAL_MAX_KEY_LEN, "max", 3, NULL), SHOAL_OK);
    CHECK_RC(shoal_map_get(m, bigkey, SHOAL_MAX_KEY_LEN, buf, sizeof buf, &len), SHOAL_OK);
    CHECK(len == 3);
    /* A value one byte over the limit, in readable (never written) address space. */
    size_t vbig = (size_t)SHOAL_MAX_VALUE_LEN + 1;
    void *vm = mmap(NULL, vbig, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (vm != MAP_FAILED) {
        CHECK_RC(shoal_map_put(m, "huge", 4, vm, vbig, NULL), SHOAL_INVALID);
        munmap(vm, vbig);
    }

    /* A 1 MiB value through a too-small buffer, then the right one. */
    size_t vlen = 1u << 20;
    char *v = malloc(vlen), *out = malloc(vlen);
    for (size_t i = 0; i < vlen; i++) v[i] = (char)(i * 7);
    CHECK_RC(shoal_map_put(m, "mib", 3, v, vlen, NULL), SHOAL_OK);
    CHECK_RC(shoal_map_get(m, "mib", 3, out, 100, &len), SHOAL_BUFFER_TOO_SMALL);
    CHECK(len == vlen);
    CHECK_RC(shoal_map_get(m, "mib", 3, out, len, &len), SHOAL_OK);
    CHECK(memcmp(v, out, vlen) == 0);
    free(v);
    free(out);
    shoal_map_close(m);
    shoal_store_close(s);
}

struct got_value {
    int calls;
    size_t len;
    char data[64];
    const shoal_map *m; /* for the nested call */
    int nested_ok;
};

static void on_value(void *ctx, const void *value, size_t len) {
    struct got_value *g = ctx;
    g->calls++;
    g->len = len;
    if (len <= sizeof g->data && len > 0) memcpy(g->data, value, len);
    if (len == 0) CHECK(value == NULL);
    if (g->m) {
        /* A call into the library from inside a callback (same thread) works. */
        struct got_value inner = {0};
        g->nested_ok = shoal_map_get_cb(g->m, "other", 5, on_value, &inner) == SHOAL_OK &&
                       inner.len == 3 && memcmp(inner.data, "two", 3) == 0;
        g->m = NULL;
    }
}

static void test_map_get_cb_and_take(void) {
    shoal_store *s;
    shoal_map *m;
    if (!fresh("getcb", &s, &m)) { h_failures++; return; }
    CHECK_RC(shoal_map_put(m, "k", 1, "one", 3, NULL), SHOAL_OK);
    CHECK_RC(shoal_map_put(m, "other", 5, "two", 3, NULL), SHOAL_OK);
    CHECK_RC(shoal_map_put(m, "empty", 5, NULL, 0, NULL), SHOAL_OK);
    struct got_value g = {0};
    CHECK_RC(shoal_map_get_cb(NULL, "k", 1, on_value, &g), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_get_cb(m, "k", 1, NULL, &g), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_get_cb(m, NULL, 1, on_value, &g), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_get_cb(m, "absent", 6, on_value, &g), SHOAL_NOT_FOUND);
    CHECK(g.calls == 0);
    g.m = m;
    CHECK_RC(shoal_map_get_cb(m, "k", 1, on_value, &g), SHOAL_OK);
    CHECK(g.calls == 1 && g.len == 3 && memcmp(g.data, "one", 3) == 0 && g.nested_ok);
    memset(&g, 0, sizeof g);
    CHECK_RC(shoal_map_get_cb(m, "empty", 5, on_value, &g), SHOAL_OK);
    CHECK(g.calls == 1 && g.len == 0);

    /* take: remove and hand over the old value. */
    memset(&g, 0, sizeof g);
    CHECK_RC(shoal_map_take(NULL, "k", 1, on_value, &g), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_take(m, "k", 1, NULL, &g), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_take(m, "k", 1, on_value, &g), SHOAL_OK);
    CHECK(g.calls == 1 && g.len == 3 && memcmp(g.data, "one", 3) == 0);
    CHECK_RC(shoal_map_take(m, "k", 1, on_value, &g), SHOAL_NOT_FOUND);
    CHECK(g.calls == 1);
    shoal_map_close(m);
    shoal_store_close(s);
}

static void test_map_insert_replace_remove_contains(void) {
    shoal_store *s;
    shoal_map *m;
    if (!fresh("irr", &s, &m)) { h_failures++; return; }
    CHECK_RC(shoal_map_put_if_absent(NULL, "a", 1, "1", 1), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_put_if_absent(m, NULL, 1, "1", 1), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_put_if_absent(m, "a", 1, NULL, 1), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_put_if_absent(m, "a", 1, "1", 1), SHOAL_OK);
    CHECK_RC(shoal_map_put_if_absent(m, "a", 1, "2", 1), SHOAL_EXISTS);
    char buf[16];
    size_t len;
    CHECK_RC(shoal_map_get(m, "a", 1, buf, sizeof buf, &len), SHOAL_OK);
    CHECK(len == 1 && buf[0] == '1');

    CHECK_RC(shoal_map_put_if_present(NULL, "a", 1, "3", 1), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_put_if_present(m, "a", 1, NULL, 1), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_put_if_present(m, "b", 1, "3", 1), SHOAL_NOT_FOUND);
    CHECK_RC(shoal_map_put_if_present(m, "a", 1, "3", 1), SHOAL_OK);
    CHECK_RC(shoal_map_get(m, "a", 1, buf, sizeof buf, &len), SHOAL_OK);
    CHECK(buf[0] == '3');

    bool present = false;
    CHECK_RC(shoal_map_contains(NULL, "a", 1, &present), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_contains(m, "a", 1, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_contains(m, NULL, 1, &present), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_contains(m, "a", 1, &present), SHOAL_OK);
    CHECK(present);
    CHECK_RC(shoal_map_contains(m, "b", 1, &present), SHOAL_OK);
    CHECK(!present);

    /* remove, plain and with the old value copied out (whole, truncated, absent). */
    CHECK_RC(shoal_map_remove(NULL, "a", 1, NULL, 0, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_remove(m, NULL, 1, NULL, 0, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_remove(m, "a", 1, NULL, 0, NULL), SHOAL_OK);
    CHECK_RC(shoal_map_remove(m, "a", 1, NULL, 0, NULL), SHOAL_NOT_FOUND);
    CHECK_RC(shoal_map_put(m, "c", 1, "old value", 9, NULL), SHOAL_OK);
    CHECK_RC(shoal_map_remove(m, "c", 1, NULL, 5, &len), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_contains(m, "c", 1, &present), SHOAL_OK);
    CHECK(present); /* the failed call changed nothing */
    memset(buf, 0, sizeof buf);
    CHECK_RC(shoal_map_remove(m, "c", 1, buf, sizeof buf, &len), SHOAL_OK);
    CHECK(len == 9 && memcmp(buf, "old value", 9) == 0);
    CHECK_RC(shoal_map_put(m, "c", 1, "old value", 9, NULL), SHOAL_OK);
    memset(buf, 0, sizeof buf);
    CHECK_RC(shoal_map_remove(m, "c", 1, buf, 3, &len), SHOAL_OK);
    CHECK(len == 9 && memcmp(buf, "old", 3) == 0 && buf[3] == 0); /* truncated */
    CHECK_RC(shoal_map_contains(m, "c", 1, &present), SHOAL_OK);
    CHECK(!present);
    len = 77;
    CHECK_RC(shoal_map_remove(m, "c", 1, buf, sizeof buf, &len), SHOAL_NOT_FOUND);
    CHECK(len == 0);
    CHECK_RC(shoal_map_put(m, "d", 1, "x", 1, NULL), SHOAL_OK);
    CHECK_RC(shoal_map_remove(m, "d", 1, NULL, 0, &len), SHOAL_OK); /* length only */
    CHECK(len == 1);

    char bigkey[SHOAL_MAX_KEY_LEN + 1];
    memset(bigkey, 'k', sizeof bigkey);
    CHECK_RC(shoal_map_put_if_absent(m, bigkey, sizeof bigkey, "v", 1), SHOAL_INVALID);
    CHECK_RC(shoal_map_put_if_present(m, bigkey, sizeof bigkey, "v", 1), SHOAL_INVALID);
    CHECK_RC(shoal_map_remove(m, bigkey, sizeof bigkey, NULL, 0, NULL), SHOAL_INVALID);
    CHECK_RC(shoal_map_contains(m, bigkey, sizeof bigkey, &present), SHOAL_INVALID);
    shoal_map_close(m);
    shoal_store_close(s);
}

/* The former names of put_if_absent and put_if_present stay for one release: the same
 * calls, declared deprecated (hence the pragmas: this file builds with -Werror). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static void test_former_names(void) {
    shoal_store *s;
    shoal_map *m;
    if (!fresh("former", &s, &m)) { h_failures++; return; }
    CHECK_RC(shoal_map_insert(m, "a", 1, "1", 1), SHOAL_OK);
    CHECK_RC(shoal_map_insert(m, "a", 1, "2", 1), SHOAL_EXISTS);
    CHECK_RC(shoal_map_replace(m, "b", 1, "3", 1), SHOAL_NOT_FOUND);
    CHECK_RC(shoal_map_replace(m, "a", 1, "3", 1), SHOAL_OK);
    CHECK_RC(shoal_map_insert(NULL, "a", 1, "1", 1), SHOAL_NULL_POINTER);
    char buf[4];
    size_t len = 0;
    CHECK_RC(shoal_map_get(m, "a", 1, buf, sizeof buf, &len), SHOAL_OK);
    CHECK(len == 1 && buf[0] == '3');
    CHECK_RC(shoal_map_get(m, "b", 1, buf, sizeof buf, &len), SHOAL_NOT_FOUND);

    shoal_fixed *f;
    REQUIRE_OK(shoal_fixed_open(s, "f", 2, 2, SHOAL_MAP_CREATE, &f));
    CHECK_RC(shoal_fixed_insert(f, "ab", 2, "12", 2), SHOAL_OK);
    CHECK_RC(shoal_fixed_insert(f, "ab", 2, "34", 2), SHOAL_EXISTS);
    CHECK_RC(shoal_fixed_replace(f, "cd", 2, "56", 2), SHOAL_NOT_FOUND);
    CHECK_RC(shoal_fixed_replace(f, "ab", 2, "56", 2), SHOAL_OK);
    CHECK_RC(shoal_fixed_insert(f, "ab", 3, "12", 2), SHOAL_INVALID);
    CHECK_RC(shoal_fixed_get(f, "ab", 2, buf, 2), SHOAL_OK);
    CHECK(memcmp(buf, "56", 2) == 0);
    CHECK_RC(shoal_fixed_get(f, "cd", 2, buf, 2), SHOAL_NOT_FOUND);
    shoal_fixed_close(f);
    shoal_map_close(m);
    shoal_store_close(s);
}
#pragma GCC diagnostic pop

/* The batch calls of both kinds name the item that stopped them, whatever the error: an
 * argument of the item's own (a NULL key, a key too large) or the map's (dropped). */
static void test_batches_name_the_item(void) {
    shoal_store *s;
    shoal_map *m;
    if (!fresh("batch_items", &s, &m)) { h_failures++; return; }
    shoal_fixed *f;
    REQUIRE_OK(shoal_fixed_open(s, "f", 2, 2, SHOAL_MAP_CREATE, &f));
    shoal_kv null_key[3] = {{"aa", 2, "11", 2}, {"bb", 2, "22", 2}, {NULL, 2, "33", 2}};
    CHECK_RC(shoal_map_put_many(m, null_key, 3), SHOAL_NULL_POINTER);
    CHECK(strstr(shoal_last_error_message(), "item 2") != NULL);
    CHECK_RC(shoal_fixed_put_many(f, null_key, 3), SHOAL_NULL_POINTER);
    CHECK(strstr(shoal_last_error_message(), "item 2") != NULL);
    static char bigkey[SHOAL_MAX_KEY_LEN + 1];
    shoal_bytes big[2] = {{"aa", 2}, {bigkey, sizeof bigkey}};
    CHECK_RC(shoal_map_remove_many(m, big, 2, NULL), SHOAL_INVALID);
    CHECK(strstr(shoal_last_error_message(), "item 1") != NULL);
    CHECK_RC(shoal_store_drop_map(s, "m"), SHOAL_OK);
    CHECK_RC(shoal_store_drop_map(s, "f"), SHOAL_OK);
    shoal_kv items[1] = {{"aa", 2, "11", 2}};
    shoal_bytes keys[1] = {{"aa", 2}};
    uint64_t removed = 7;
    CHECK_RC(shoal_map_put_many(m, items, 1), SHOAL_NOT_FOUND);
    CHECK(strstr(shoal_last_error_message(), "item 0") != NULL);
    CHECK_RC(shoal_map_remove_many(m, keys, 1, &removed), SHOAL_NOT_FOUND);
    CHECK(strstr(shoal_last_error_message(), "item 0") != NULL);
    CHECK_RC(shoal_fixed_remove_many(f, keys, 1, &removed), SHOAL_NOT_FOUND);
    CHECK(strstr(shoal_last_error_message(), "item 0") != NULL);
    CHECK(removed == 7);
    shoal_fixed_close(f);
    shoal_map_close(m);
    shoal_store_close(s);
}

static void test_map_len_clear_stats(void) {
    shoal_store *s;
    shoal_map *m;
    if (!fresh("len", &s, &m)) { h_failures++; return; }
    uint64_t n = 99;
    CHECK_RC(shoal_map_len(NULL, &n), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_len(m, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_len(m, &n), SHOAL_OK);
    CHECK(n == 0);
    for (int i = 0; i < 1000; i++) {
        char k[16];
        int kl = snprintf(k, sizeof k, "k%d", i);
        CHECK_RC(shoal_map_put(m, k, (size_t)kl, "v", 1, NULL), SHOAL_OK);
    }
    CHECK_RC(shoal_map_len(m, &n), SHOAL_OK);
    CHECK(n == 1000);
    shoal_map_stats st;
    memset(&st, 0, sizeof st);
    CHECK_RC(shoal_map_get_stats(NULL, &st), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_get_stats(m, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_get_stats(m, &st), SHOAL_INVALID); /* struct_size 0 */
    st.struct_size = sizeof st;
    CHECK_RC(shoal_map_get_stats(m, &st), SHOAL_OK);
    CHECK(st.struct_size == sizeof st && st.entries == 1000 && st.live_bytes > 0 && st.segments >= 1);
    CHECK(st.file_size > 0 && st.store_data_bytes >= st.live_bytes);
    CHECK_RC(shoal_map_clear(NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_clear(m), SHOAL_OK);
    CHECK_RC(shoal_map_len(m, &n), SHOAL_OK);
    CHECK(n == 0);
    /* Dropped map: NOT_FOUND from every call on the handle. */
    CHECK_RC(shoal_store_drop_map(s, "m"), SHOAL_OK);
    CHECK_RC(shoal_map_get_stats(m, &st), SHOAL_NOT_FOUND);
    CHECK_RC(shoal_map_clear(m), SHOAL_NOT_FOUND);
    shoal_map_close(m);
    shoal_store_close(s);
}

struct walk {
    int n;
    int stop_after;
    uint64_t key_sum;
};

static int on_entry(void *ctx, const void *k, size_t kl, const void *v, size_t vl) {
    struct walk *w = ctx;
    char kb[32] = {0}, vb[32] = {0};
    CHECK(kl < sizeof kb && vl < sizeof vb);
    memcpy(kb, k, kl);
    memcpy(vb, v, vl);
    CHECK(strcmp(kb + 1, vb + 1) == 0); /* "kN" -> "vN" */
    w->key_sum += (uint64_t)atoi(kb + 1);
    w->n++;
    return w->stop_after > 0 && w->n >= w->stop_after;
}

static void test_map_for_each(void) {
    shoal_store *s;
    shoal_map *m;
    if (!fresh("foreach", &s, &m)) { h_failures++; return; }
    for (int i = 0; i < 300; i++) {
        char k[16], v[16];
        int kl = snprintf(k, sizeof k, "k%d", i), vl = snprintf(v, sizeof v, "v%d", i);
        CHECK_RC(shoal_map_put(m, k, (size_t)kl, v, (size_t)vl, NULL), SHOAL_OK);
    }
    struct walk w = {0};
    CHECK_RC(shoal_map_for_each(NULL, on_entry, &w), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_for_each(m, NULL, &w), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_for_each(m, on_entry, &w), SHOAL_OK);
    CHECK(w.n == 300 && w.key_sum == 299 * 300 / 2);
    struct walk w2 = {0};
    w2.stop_after = 10;
    CHECK_RC(shoal_map_for_each(m, on_entry, &w2), SHOAL_OK);
    CHECK(w2.n == 10);
    shoal_map_close(m);
    shoal_store_close(s);
}

static void test_iter(void) {
    shoal_store *s;
    shoal_map *m;
    if (!fresh("iter", &s, &m)) { h_failures++; return; }
    enum { N = 500 };
    static unsigned char seen[N];
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < N; i++) {
        char k[16], v[300];
        int kl = snprintf(k, sizeof k, "%d", i);
        int vl = i % 250; /* values of 0..249 bytes */
        memset(v, 'a' + i % 26, (size_t)vl);
        CHECK_RC(shoal_map_put(m, k, (size_t)kl, v, (size_t)vl, NULL), SHOAL_OK);
    }
    shoal_iter *it = (shoal_iter *)1;
    CHECK_RC(shoal_iter_open(NULL, 0, &it), SHOAL_NULL_POINTER);
    CHECK(it == NULL);
    CHECK_RC(shoal_iter_open(m, 0, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_iter_open(m, 0x10, &it), SHOAL_INVALID);
    REQUIRE_OK(shoal_iter_open(m, 0, &it));
    /* The map handle may be closed while the iterator runs. */
    CHECK_RC(shoal_map_close(m), SHOAL_OK);
    m = NULL;

    char kb[16], vb[300];
    size_t kl = 0, vl = 0;
    CHECK_RC(shoal_iter_next(NULL, kb, sizeof kb, &kl, vb, sizeof vb, &vl), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_iter_next(it, kb, sizeof kb, NULL, vb, sizeof vb, &vl), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_iter_next(it, kb, sizeof kb, &kl, vb, sizeof vb, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_iter_next(it, NULL, 4, &kl, vb, sizeof vb, &vl), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_iter_next(it, kb, sizeof kb, &kl, NULL, 4, &vl), SHOAL_NULL_POINTER);
    int count = 0, too_small = 0;
    size_t vcap = 8; /* grows when an entry does not fit */
    for (;;) {
        shoal_status rc = shoal_iter_next(it, kb, sizeof kb - 1, &kl, vb, vcap, &vl);
        if (rc == SHOAL_DONE) break;
        if (rc == SHOAL_BUFFER_TOO_SMALL) {
            CHECK(vl > vcap && vl <= sizeof vb);
            too_small++;
            vcap = vl; /* the same entry comes back */
            continue;
        }
        CHECK_RC(rc, SHOAL_OK);
        if (rc != SHOAL_OK) break;
        kb[kl] = 0;
        int i = atoi(kb);
        CHECK(i >= 0 && i < N && !seen[i]);
        if (i >= 0 && i < N) seen[i] = 1;
        CHECK(vl == (size_t)(i % 250));
        for (size_t j = 0; j < vl; j++) CHECK(vb[j] == 'a' + i % 26);
        count++;
    }
    CHECK(count == N);
    CHECK(too_small > 0);
    CHECK_RC(shoal_iter_next(it, kb, sizeof kb, &kl, vb, sizeof vb, &vl), SHOAL_DONE);
    CHECK_RC(shoal_iter_close(it), SHOAL_OK);
    CHECK_RC(shoal_iter_close(NULL), SHOAL_OK);

    /* Keys only: the value arguments may be NULL. */
    REQUIRE_OK(shoal_map_open(s, "m", 0, NULL, &m));
    REQUIRE_OK(shoal_iter_open(m, SHOAL_ITER_KEYS_ONLY, &it));
    count = 0;
    CHECK_RC(shoal_iter_next(it, NULL, 0, &kl, NULL, 0, NULL), SHOAL_BUFFER_TOO_SMALL);
    CHECK(kl > 0);
    while (shoal_iter_next(it, kb, sizeof kb, &kl, NULL, 0, NULL) == SHOAL_OK) count++;
    CHECK(count == N);
    shoal_iter_close(it);

    /* An empty map. */
    CHECK_RC(shoal_map_clear(m), SHOAL_OK);
    REQUIRE_OK(shoal_iter_open(m, 0, &it));
    CHECK_RC(shoal_iter_next(it, kb, sizeof kb, &kl, vb, sizeof vb, &vl), SHOAL_DONE);
    shoal_iter_close(it);

    /* A dropped map: the iteration fails, then is over. */
    CHECK_RC(shoal_map_put(m, "x", 1, "y", 1, NULL), SHOAL_OK);
    REQUIRE_OK(shoal_iter_open(m, 0, &it));
    CHECK_RC(shoal_store_drop_map(s, "m"), SHOAL_OK);
    shoal_status rc = shoal_iter_next(it, kb, sizeof kb, &kl, vb, sizeof vb, &vl);
    CHECK(rc == SHOAL_NOT_FOUND || rc == SHOAL_DONE);
    CHECK_RC(shoal_iter_next(it, kb, sizeof kb, &kl, vb, sizeof vb, &vl), SHOAL_DONE);
    shoal_iter_close(it);
    shoal_map_close(m);
    shoal_store_close(s);
}


/* ---- atomic read-modify-write, batches, timeouts, durability ------------------------ */

static void on_old(void *ctx, const void *value, size_t len) {
    struct got_value *g = ctx;
    g->calls++;
    g->len = len;
    if (len <= sizeof g->data && len > 0) memcpy(g->data, value, len);
}

static void test_map_swap_cas_add(void) {
    shoal_store *s;
    shoal_map *m;
    if (!fresh("atomic", &s, &m)) { h_failures++; return; }
    /* swap */
    struct got_value g = {0};
    bool replaced = true;
    CHECK_RC(shoal_map_swap(NULL, "k", 1, "1", 1, &replaced, on_old, &g), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_swap(m, "k", 1, NULL, 1, &replaced, on_old, &g), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_swap(m, "k", 1, "one", 3, &replaced, on_old, &g), SHOAL_OK);
    CHECK(!replaced && g.calls == 0);
    CHECK_RC(shoal_map_swap(m, "k", 1, "two", 3, &replaced, on_old, &g), SHOAL_OK);
    CHECK(replaced && g.calls == 1 && g.len == 3 && memcmp(g.data, "one", 3) == 0);
    CHECK_RC(shoal_map_swap(m, "k", 1, "three", 5, NULL, NULL, NULL), SHOAL_OK);

    /* compare-and-swap */
    CHECK_RC(shoal_map_compare_and_swap(NULL, "k", 1, "three", 5, "4", 1, 0), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_compare_and_swap(m, "k", 1, NULL, 5, "4", 1, 0), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_compare_and_swap(m, "k", 1, "three", 5, NULL, 1, 0), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_compare_and_swap(m, "k", 1, "three", 5, "4", 1, 0x100), SHOAL_INVALID);
    CHECK_RC(shoal_map_compare_and_swap(m, "k", 1, "nope", 4, "4", 1, 0), SHOAL_MISMATCH);
    CHECK(strstr(shoal_last_error_message(), "expected") != NULL);
    CHECK_RC(shoal_map_compare_and_swap(m, "k", 1, "three", 5, "four", 4, 0), SHOAL_OK);
    CHECK_RC(shoal_map_compare_and_swap(m, "k", 1, NULL, 0, "x", 1, SHOAL_CAS_EXPECT_ABSENT),
             SHOAL_MISMATCH);
    CHECK_RC(shoal_map_compare_and_swap(m, "n", 1, NULL, 0, "new", 3, SHOAL_CAS_EXPECT_ABSENT),
             SHOAL_OK);
    CHECK_RC(shoal_map_compare_and_swap(m, "n", 1, "new", 3, NULL, 0, SHOAL_CAS_REMOVE), SHOAL_OK);
    bool present = true;
    CHECK_RC(shoal_map_contains(m, "n", 1, &present), SHOAL_OK);
    CHECK(!present);
    char buf[16];
    size_t len = 0;
    CHECK_RC(shoal_map_get(m, "k", 1, buf, sizeof buf, &len), SHOAL_OK);
    CHECK(len == 4 && memcmp(buf, "four", 4) == 0);

    /* add */
    int64_t v = 99;
    CHECK_RC(shoal_map_add(NULL, "c", 1, 1, &v), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_add(m, NULL, 1, 1, &v), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_add(m, "c", 1, 5, &v), SHOAL_OK);
    CHECK(v == 5);
    CHECK_RC(shoal_map_add(m, "c", 1, -7, &v), SHOAL_OK);
    CHECK(v == -2);
    CHECK_RC(shoal_map_add(m, "c", 1, 1, NULL), SHOAL_OK);
    CHECK_RC(shoal_map_get(m, "c", 1, buf, sizeof buf, &len), SHOAL_OK);
    int64_t raw;
    memcpy(&raw, buf, 8);
    CHECK(len == 8 && raw == -1); /* little-endian on this machine */
    CHECK_RC(shoal_map_add(m, "k", 1, 1, &v), SHOAL_INVALID); /* "four" is not 8 bytes */
    shoal_map_close(m);
    shoal_store_close(s);
}

struct upd {
    int calls;
    int mode; /* 0: append "+", 1: remove, 2: cancel, 3: NULL value with a length */
    char out[64];
};

static int updater(void *ctx, const void *cur, size_t cur_len, bool present,
                   const void **new_value, size_t *new_len) {
    struct upd *u = ctx;
    u->calls++;
    if (!present) CHECK(cur == NULL && cur_len == 0);
    switch (u->mode) {
    case 0:
        if (cur_len + 1 > sizeof u->out) return 2;
        if (cur_len) memcpy(u->out, cur, cur_len);
        u->out[cur_len] = '+';
        *new_value = u->out;
        *new_len = cur_len + 1;
        return SHOAL_UPDATE_SET;
    case 1:
        return SHOAL_UPDATE_REMOVE;
    case 3:
        *new_value = NULL;
        *new_len = 5;
        return SHOAL_UPDATE_SET;
    default:
        return 42;
    }
}

static void test_map_update_get_or_insert(void) {
    shoal_store *s;
    shoal_map *m;
    if (!fresh("update", &s, &m)) { h_failures++; return; }
    struct upd u = {0};
    CHECK_RC(shoal_map_update(NULL, "k", 1, updater, &u), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_update(m, "k", 1, NULL, &u), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_update(m, "k", 1, updater, &u), SHOAL_OK);
    CHECK_RC(shoal_map_update(m, "k", 1, updater, &u), SHOAL_OK);
    char buf[16];
    size_t len = 0;
    CHECK_RC(shoal_map_get(m, "k", 1, buf, sizeof buf, &len), SHOAL_OK);
    CHECK(len == 2 && memcmp(buf, "++", 2) == 0);
    u.mode = 2;
    CHECK_RC(shoal_map_update(m, "k", 1, updater, &u), SHOAL_INVALID);
    CHECK(strstr(shoal_last_error_message(), "cancelled") != NULL);
    u.mode = 3;
    CHECK_RC(shoal_map_update(m, "k", 1, updater, &u), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_get(m, "k", 1, buf, sizeof buf, &len), SHOAL_OK);
    CHECK(len == 2); /* unchanged by the cancelled updates */
    u.mode = 1;
    CHECK_RC(shoal_map_update(m, "k", 1, updater, &u), SHOAL_OK);
    CHECK_RC(shoal_map_get(m, "k", 1, buf, sizeof buf, &len), SHOAL_NOT_FOUND);

    /* get_or_insert */
    CHECK_RC(shoal_map_get_or_insert(NULL, "g", 1, "d", 1, buf, sizeof buf, &len), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_get_or_insert(m, "g", 1, "d", 1, buf, sizeof buf, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_get_or_insert(m, "g", 1, NULL, 1, buf, sizeof buf, &len), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_get_or_insert(m, "g", 1, "d", 1, NULL, 4, &len), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_get_or_insert(m, "g", 1, "default", 7, buf, 3, &len), SHOAL_BUFFER_TOO_SMALL);
    CHECK(len == 7);
    CHECK_RC(shoal_map_get_or_insert(m, "g", 1, "other", 5, buf, sizeof buf, &len), SHOAL_OK);
    CHECK(len == 7 && memcmp(buf, "default", 7) == 0); /* inserted by the first call */
    shoal_map_close(m);
    shoal_store_close(s);
}

struct many {
    int calls;
    int present;
    size_t last_index;
};

static void on_many(void *ctx, size_t index, const void *v, size_t len, bool present) {
    struct many *c = ctx;
    CHECK(index == (size_t)c->calls);
    if (present) {
        char want[16];
        int wl = snprintf(want, sizeof want, "v%zu", index);
        CHECK(len == (size_t)wl && memcmp(v, want, len) == 0);
        c->present++;
    } else {
        CHECK(v == NULL && len == 0);
    }
    c->calls++;
}

/* A map with UIDs: every by-UID call, the 32-bit form, stale handles (after remove, after
 * the entry is reused), NULL pointers, small buffers, and a map without UIDs refusing. */
static void test_map_uids(void) {
    shoal_store *s;
    shoal_map *plain;
    if (!fresh("uids", &s, &plain)) { h_failures++; return; }
    shoal_map_options mo;
    memset(&mo, 0, sizeof mo);
    mo.struct_size = sizeof mo;
    mo.uids = 2;
    shoal_map *m = NULL;
    CHECK_RC(shoal_map_open(s, "u", SHOAL_MAP_CREATE, &mo, &m), SHOAL_INVALID);
    mo.uids = 1;
    mo.reserved = 7;
    CHECK_RC(shoal_map_open(s, "u", SHOAL_MAP_CREATE, &mo, &m), SHOAL_INVALID);
    mo.reserved = 0;
    /* UIDs cannot be added to an existing map. */
    CHECK_RC(shoal_map_open(s, "m", SHOAL_MAP_CREATE, &mo, &m), SHOAL_INVALID);
    REQUIRE_OK(shoal_map_open(s, "u", SHOAL_MAP_CREATE, &mo, &m));
    bool has = false;
    CHECK_RC(shoal_map_has_uids(m, &has), SHOAL_OK);
    CHECK(has);
    CHECK_RC(shoal_map_has_uids(plain, &has), SHOAL_OK);
    CHECK(!has);
    CHECK_RC(shoal_map_has_uids(NULL, &has), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_has_uids(m, NULL), SHOAL_NULL_POINTER);
    /* A UID call on a map without UIDs says how to get them, in C terms. */
    uint64_t none = 0;
    CHECK_RC(shoal_map_put_uid(plain, "k", 1, "v", 1, &none, NULL), SHOAL_INVALID);
    CHECK(msg_names("shoal_map_options.uids"));
    CHECK_RC(shoal_map_uid(plain, "k", 1, &none), SHOAL_INVALID);
    CHECK(msg_names("shoal_map_options.uids"));

    /* put_uid and uid */
    uint64_t a = 0, a2 = 0, b = 0;
    bool replaced = true;
    CHECK_RC(shoal_map_put_uid(NULL, "a", 1, "v", 1, &a, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_put_uid(m, "a", 1, "v", 1, NULL, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_put_uid(m, NULL, 1, "v", 1, &a, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_put_uid(m, "a", 1, NULL, 1, &a, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_put_uid(m, "a", 1, "alpha", 5, &a, &replaced), SHOAL_OK);
    CHECK(a != 0 && !replaced);
    CHECK_RC(shoal_map_put_uid(m, "a", 1, "ALPHA", 5, &a2, &replaced), SHOAL_OK);
    CHECK(a2 == a && replaced);
    CHECK_RC(shoal_map_put_uid(m, "b", 1, "beta", 4, &b, NULL), SHOAL_OK);
    CHECK(b != 0 && b != a);
    uint64_t u = 1;
    CHECK_RC(shoal_map_uid(m, "a", 1, &u), SHOAL_OK);
    CHECK(u == a);
    CHECK_RC(shoal_map_uid(m, "nope", 4, &u), SHOAL_NOT_FOUND);
    CHECK(u == 0);
    CHECK_RC(shoal_map_uid(NULL, "a", 1, &u), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_uid(m, "a", 1, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_uid(m, NULL, 1, &u), SHOAL_NULL_POINTER);
    /* A plain put keeps the handle. */
    CHECK_RC(shoal_map_put(m, "a", 1, "alpha!", 6, NULL), SHOAL_OK);
    CHECK_RC(shoal_map_uid(m, "a", 1, &u), SHOAL_OK);
    CHECK(u == a);

    /* get_by_uid: the needed-length protocol */
    char buf[64];
    size_t len = 0;
    CHECK_RC(shoal_map_get_by_uid(m, a, buf, sizeof buf, &len), SHOAL_OK);
    CHECK(len == 6 && memcmp(buf, "alpha!", 6) == 0);
    memset(buf, 'x', sizeof buf);
    CHECK_RC(shoal_map_get_by_uid(m, a, buf, 3, &len), SHOAL_BUFFER_TOO_SMALL);
    CHECK(len == 6 && buf[0] == 'x');
    CHECK_RC(shoal_map_get_by_uid(m, a, NULL, 0, &len), SHOAL_BUFFER_TOO_SMALL);
    CHECK(len == 6);
    CHECK_RC(shoal_map_get_by_uid(m, a, buf, 6, &len), SHOAL_OK);
    CHECK_RC(shoal_map_get_by_uid(NULL, a, buf, sizeof buf, &len), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_get_by_uid(m, a, buf, sizeof buf, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_get_by_uid(m, a, NULL, 4, &len), SHOAL_NULL_POINTER);

    /* get_by_uid_cb */
    struct got_value g = {0};
    CHECK_RC(shoal_map_get_by_uid_cb(m, b, on_value, &g), SHOAL_OK);
    CHECK(g.calls == 1 && g.len == 4 && memcmp(g.data, "beta", 4) == 0);
    CHECK_RC(shoal_map_get_by_uid_cb(NULL, b, on_value, &g), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_get_by_uid_cb(m, b, NULL, &g), SHOAL_NULL_POINTER);

    /* key_by_uid */
    CHECK_RC(shoal_map_key_by_uid(m, b, buf, sizeof buf, &len), SHOAL_OK);
    CHECK(len == 1 && buf[0] == 'b');
    CHECK_RC(shoal_map_key_by_uid(m, b, NULL, 0, &len), SHOAL_BUFFER_TOO_SMALL);
    CHECK(len == 1);
    CHECK_RC(shoal_map_key_by_uid(NULL, b, buf, sizeof buf, &len), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_key_by_uid(m, b, buf, sizeof buf, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_key_by_uid(m, b, NULL, 8, &len), SHOAL_NULL_POINTER);

    /* put_by_uid */
    CHECK_RC(shoal_map_put_by_uid(m, b, "BETA", 4), SHOAL_OK);
    CHECK_RC(shoal_map_get(m, "b", 1, buf, sizeof buf, &len), SHOAL_OK);
    CHECK(len == 4 && memcmp(buf, "BETA", 4) == 0);
    CHECK_RC(shoal_map_put_by_uid(m, b, NULL, 0), SHOAL_OK);
    CHECK_RC(shoal_map_get_by_uid(m, b, buf, sizeof buf, &len), SHOAL_OK);
    CHECK(len == 0);
    CHECK_RC(shoal_map_put_by_uid(m, b, NULL, 2), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_put_by_uid(NULL, b, "x", 1), SHOAL_NULL_POINTER);

    /* add_by_uid */
    uint64_t c = 0;
    int64_t r = 0;
    CHECK_RC(shoal_map_put_uid(m, "n", 1, "\x05\0\0\0\0\0\0\0", 8, &c, NULL), SHOAL_OK);
    CHECK_RC(shoal_map_add_by_uid(m, c, 10, &r), SHOAL_OK);
    CHECK(r == 15);
    CHECK_RC(shoal_map_add_by_uid(m, c, -20, NULL), SHOAL_OK);
    CHECK_RC(shoal_map_add(m, "n", 1, 0, &r), SHOAL_OK);
    CHECK(r == -5);
    CHECK_RC(shoal_map_add_by_uid(m, a, 1, &r), SHOAL_INVALID); /* not 8 bytes */
    CHECK_RC(shoal_map_add_by_uid(NULL, c, 1, &r), SHOAL_NULL_POINTER);

    /* update_by_uid */
    struct upd up = {0};
    CHECK_RC(shoal_map_update_by_uid(m, a, updater, &up), SHOAL_OK);
    CHECK(up.calls >= 1);
    CHECK_RC(shoal_map_get(m, "a", 1, buf, sizeof buf, &len), SHOAL_OK);
    CHECK(len == 7 && memcmp(buf, "alpha!+", 7) == 0);
    up.mode = 2; /* cancel */
    CHECK_RC(shoal_map_update_by_uid(m, a, updater, &up), SHOAL_INVALID);
    up.mode = 3; /* NULL value with a length */
    CHECK_RC(shoal_map_update_by_uid(m, a, updater, &up), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_get_by_uid(m, a, buf, sizeof buf, &len), SHOAL_OK);
    CHECK(len == 7); /* unchanged by the cancelled updates */
    CHECK_RC(shoal_map_update_by_uid(NULL, a, updater, &up), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_update_by_uid(m, a, NULL, &up), SHOAL_NULL_POINTER);
    /* Removing through update makes the handle stale. */
    uint64_t d = 0;
    CHECK_RC(shoal_map_put_uid(m, "d", 1, "dd", 2, &d, NULL), SHOAL_OK);
    up.mode = 1;
    CHECK_RC(shoal_map_update_by_uid(m, d, updater, &up), SHOAL_OK);
    CHECK_RC(shoal_map_get_by_uid(m, d, buf, sizeof buf, &len), SHOAL_STALE_UID);
    CHECK_RC(shoal_map_update_by_uid(m, d, updater, &up), SHOAL_STALE_UID);

    /* remove_by_uid: the old value, truncated to the buffer; then stale everywhere */
    memset(buf, 0, sizeof buf);
    CHECK_RC(shoal_map_remove_by_uid(m, a, NULL, 4, &len), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_remove_by_uid(NULL, a, NULL, 0, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_remove_by_uid(m, a, buf, 3, &len), SHOAL_OK);
    CHECK(len == 7 && memcmp(buf, "alp", 3) == 0 && buf[3] == 0);
    bool present = true;
    CHECK_RC(shoal_map_contains(m, "a", 1, &present), SHOAL_OK);
    CHECK(!present);
    len = 99;
    CHECK_RC(shoal_map_remove_by_uid(m, a, buf, sizeof buf, &len), SHOAL_STALE_UID);
    CHECK(len == 0);
    CHECK(strstr(shoal_last_error_message(), "stale") != NULL);
    CHECK_RC(shoal_map_remove_by_uid(m, a, NULL, 0, NULL), SHOAL_STALE_UID);
    CHECK_RC(shoal_map_get_by_uid(m, a, buf, sizeof buf, &len), SHOAL_STALE_UID);
    CHECK_RC(shoal_map_get_by_uid_cb(m, a, on_value, &g), SHOAL_STALE_UID);
    CHECK_RC(shoal_map_key_by_uid(m, a, buf, sizeof buf, &len), SHOAL_STALE_UID);
    CHECK_RC(shoal_map_put_by_uid(m, a, "x", 1), SHOAL_STALE_UID);
    CHECK_RC(shoal_map_add_by_uid(m, a, 1, &r), SHOAL_STALE_UID);
    CHECK_RC(shoal_map_update_by_uid(m, a, updater, &up), SHOAL_STALE_UID);
    CHECK_RC(shoal_map_remove_by_uid(m, b, NULL, 0, NULL), SHOAL_OK); /* just remove */
    CHECK_RC(shoal_map_get_by_uid(m, b, buf, sizeof buf, &len), SHOAL_STALE_UID);
    /* take_by_uid: the whole old value to a callback */
    uint64_t t = 0;
    CHECK_RC(shoal_map_put_uid(m, "t", 1, "tango", 5, &t, NULL), SHOAL_OK);
    memset(&g, 0, sizeof g);
    CHECK_RC(shoal_map_take_by_uid(NULL, t, on_value, &g), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_take_by_uid(m, t, NULL, &g), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_take_by_uid(m, t, on_value, &g), SHOAL_OK);
    CHECK(g.calls == 1 && g.len == 5 && memcmp(g.data, "tango", 5) == 0);
    CHECK_RC(shoal_map_take_by_uid(m, t, on_value, &g), SHOAL_STALE_UID);
    CHECK(g.calls == 1);
    /* Handles never handed out, and 0, are stale too. */
    CHECK_RC(shoal_map_get_by_uid(m, 0, buf, sizeof buf, &len), SHOAL_STALE_UID);
    CHECK_RC(shoal_map_get_by_uid(m, 1000000, buf, sizeof buf, &len), SHOAL_STALE_UID);

    /* The 32-bit form: bare index, no generation. */
    uint64_t e = 0;
    CHECK_RC(shoal_map_put_uid(m, "e", 1, "echo", 4, &e, NULL), SHOAL_OK);
    uint32_t e32 = shoal_uid_to_u32(e);
    CHECK((uint64_t)e32 == (e & 0xffffffffu));
    CHECK(shoal_uid_from_u32(e32) == ((uint64_t)e32 | SHOAL_UID_UNCHECKED));
    CHECK_RC(shoal_map_get_by_uid(m, shoal_uid_from_u32(e32), buf, sizeof buf, &len), SHOAL_OK);
    CHECK(len == 4 && memcmp(buf, "echo", 4) == 0);
    CHECK_RC(shoal_map_remove(m, "e", 1, NULL, 0, NULL), SHOAL_OK);
    CHECK_RC(shoal_map_get_by_uid(m, shoal_uid_from_u32(e32), buf, sizeof buf, &len),
             SHOAL_STALE_UID);
    /* Stale after reuse: the freed entry goes to the next new key; the 64-bit handle
     * stays stale, the 32-bit form names the new key. */
    int reused = 0;
    for (int i = 0; i < 64 && !reused; i++) {
        char k[16];
        int kl = snprintf(k, sizeof k, "new%d", i);
        uint64_t nu = 0;
        CHECK_RC(shoal_map_put_uid(m, k, (size_t)kl, k, (size_t)kl, &nu, NULL), SHOAL_OK);
        if (shoal_uid_to_u32(nu) == e32) {
            reused = 1;
            CHECK(nu != e);
            CHECK_RC(shoal_map_get_by_uid(m, e, buf, sizeof buf, &len), SHOAL_STALE_UID);
            CHECK_RC(shoal_map_put_by_uid(m, e, "x", 1), SHOAL_STALE_UID);
            CHECK_RC(shoal_map_key_by_uid(m, shoal_uid_from_u32(e32), buf, sizeof buf, &len),
                     SHOAL_OK);
            CHECK(len == (size_t)kl && memcmp(buf, k, len) == 0);
        }
    }
    CHECK(reused);

    /* A map without UIDs refuses every by-UID call. */
    CHECK_RC(shoal_map_put(plain, "k", 1, "v", 1, NULL), SHOAL_OK);
    CHECK_RC(shoal_map_uid(plain, "k", 1, &u), SHOAL_INVALID);
    CHECK_RC(shoal_map_put_uid(plain, "k", 1, "v", 1, &u, NULL), SHOAL_INVALID);
    CHECK_RC(shoal_map_get_by_uid(plain, 1, buf, sizeof buf, &len), SHOAL_INVALID);
    CHECK_RC(shoal_map_get_by_uid_cb(plain, 1, on_value, &g), SHOAL_INVALID);
    CHECK_RC(shoal_map_key_by_uid(plain, 1, buf, sizeof buf, &len), SHOAL_INVALID);
    CHECK_RC(shoal_map_put_by_uid(plain, 1, "v", 1), SHOAL_INVALID);
    CHECK_RC(shoal_map_remove_by_uid(plain, 1, NULL, 0, NULL), SHOAL_INVALID);
    CHECK_RC(shoal_map_take_by_uid(plain, 1, on_value, &g), SHOAL_INVALID);
    CHECK_RC(shoal_map_add_by_uid(plain, 1, 1, NULL), SHOAL_INVALID);
    CHECK_RC(shoal_map_update_by_uid(plain, 1, updater, &up), SHOAL_INVALID);

    /* An old caller's 16-byte options struct (before `uids`) still works: no UIDs. */
    struct {
        size_t struct_size;
        uint32_t segment_buckets, stash_buckets;
    } old = {16, 0, 0};
    shoal_map *om = NULL;
    REQUIRE_OK(shoal_map_open(s, "old", SHOAL_MAP_CREATE, (const shoal_map_options *)&old, &om));
    CHECK_RC(shoal_map_has_uids(om, &has), SHOAL_OK);
    CHECK(!has);
    shoal_map_close(om);

    CHECK_RC(shoal_store_check(s, NULL, NULL, NULL), SHOAL_OK);
    shoal_map_close(m);
    shoal_map_close(plain);
    shoal_store_close(s);
}

static void test_map_batches(void) {
    shoal_store *s;
    shoal_map *m;
    if (!fresh("batch", &s, &m)) { h_failures++; return; }
    enum { N = 100 };
    static char kb[N][16], vb[N][16];
    shoal_kv items[N];
    shoal_bytes keys[N + 1];
    for (int i = 0; i < N; i++) {
        int kl = snprintf(kb[i], sizeof kb[i], "k%d", i);
        int vl = snprintf(vb[i], sizeof vb[i], "v%d", i);
        items[i] = (shoal_kv){kb[i], (size_t)kl, vb[i], (size_t)vl};
        keys[i] = (shoal_bytes){kb[i], (size_t)kl};
    }
    keys[N] = (shoal_bytes){"absent", 6};
    CHECK_RC(shoal_map_put_many(NULL, items, N), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_put_many(m, NULL, N), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_put_many(m, NULL, 0), SHOAL_OK);
    /* Only even items at first; keys[] asks for all. */
    shoal_kv even[N / 2];
    for (int i = 0; i < N / 2; i++) even[i] = items[2 * i];
    CHECK_RC(shoal_map_put_many(m, even, N / 2), SHOAL_OK);
    struct many c = {0};
    CHECK_RC(shoal_map_get_many(NULL, keys, N + 1, on_many, &c), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_get_many(m, NULL, 3, on_many, &c), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_get_many(m, keys, N + 1, NULL, &c), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_get_many(m, keys, N + 1, on_many, &c), SHOAL_OK);
    CHECK(c.calls == N + 1 && c.present == N / 2);
    CHECK_RC(shoal_map_put_many(m, items, N), SHOAL_OK);
    memset(&c, 0, sizeof c);
    CHECK_RC(shoal_map_get_many(m, keys, N, on_many, &c), SHOAL_OK);
    CHECK(c.present == N);
    memset(&c, 0, sizeof c);
    CHECK_RC(shoal_map_get_many(m, NULL, 0, on_many, &c), SHOAL_OK);
    CHECK(c.calls == 0);
    /* A NULL pointer in an item: refused before anything is written. */
    shoal_kv bad[2] = {{"ok", 2, "1", 1}, {NULL, 3, "x", 1}};
    CHECK_RC(shoal_map_put_many(m, bad, 2), SHOAL_NULL_POINTER);
    /* A key too large: an error naming the item; the earlier items are written. */
    static char bigkey[SHOAL_MAX_KEY_LEN + 1];
    shoal_kv big[2] = {{"ok2", 3, "1", 1}, {bigkey, sizeof bigkey, "x", 1}};
    CHECK_RC(shoal_map_put_many(m, big, 2), SHOAL_INVALID);
    CHECK(strstr(shoal_last_error_message(), "item 1") != NULL);
    bool present = false;
    CHECK_RC(shoal_map_contains(m, "ok2", 3, &present), SHOAL_OK);
    CHECK(present);

    uint64_t removed = 0;
    CHECK_RC(shoal_map_remove_many(NULL, keys, N + 1, &removed), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_remove_many(m, NULL, 2, &removed), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_remove_many(m, keys, N + 1, &removed), SHOAL_OK);
    CHECK(removed == N);
    CHECK_RC(shoal_map_remove_many(m, keys, N + 1, NULL), SHOAL_OK);
    uint64_t n = 0;
    CHECK_RC(shoal_map_len(m, &n), SHOAL_OK);
    CHECK(n == 1); /* "ok2" */
    shoal_map_close(m);
    shoal_store_close(s);
}

static void test_map_with_timeout(void) {
    shoal_store *s;
    shoal_map *m;
    if (!fresh("withtimeout", &s, &m)) { h_failures++; return; }
    shoal_map *t = (shoal_map *)1;
    CHECK_RC(shoal_map_with_timeout(NULL, 10, &t), SHOAL_NULL_POINTER);
    CHECK(t == NULL);
    CHECK_RC(shoal_map_with_timeout(m, 10, NULL), SHOAL_NULL_POINTER);
    REQUIRE_OK(shoal_map_with_timeout(m, 10, &t));
    CHECK_RC(shoal_map_put(t, "k", 1, "v", 1, NULL), SHOAL_OK);
    char buf[8];
    size_t len;
    CHECK_RC(shoal_map_get(m, "k", 1, buf, sizeof buf, &len), SHOAL_OK); /* same map */
    shoal_map_close(t);
    shoal_map_close(m);
    shoal_store_close(s);
}

static int count_lines(void *ctx, const char *text, size_t len) {
    (void)text;
    (void)len;
    (*(int *)ctx)++;
    return 0;
}

static void test_store_flush_repair_durability_options(void) {
    char p[512];
    tpath(p, sizeof p, "durable.shoal");
    shoal_store_destroy(p);
    shoal_options o = small_opts();
    o.checksums = 3;
    shoal_store *s = NULL;
    CHECK_RC(shoal_store_open(p, &o, &s), SHOAL_INVALID);
    o.checksums = 0;
    o.sync_writes = 2;
    CHECK_RC(shoal_store_open(p, &o, &s), SHOAL_INVALID);
    o.checksums = 1;
    o.sync_writes = 1;
    REQUIRE_OK(shoal_store_open(p, &o, &s));
    shoal_store_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    CHECK_RC(shoal_store_get_stats(s, &st), SHOAL_OK);
    CHECK(st.checksums == 1);
    CHECK(st.on_disk == 0 || st.on_disk == 1);
    shoal_map *m = NULL;
    REQUIRE_OK(shoal_map_open(s, "m", SHOAL_MAP_CREATE, NULL, &m));
    CHECK_RC(shoal_map_put(m, "k", 1, "v", 1, NULL), SHOAL_OK);
    CHECK_RC(shoal_store_flush(NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_store_flush(s), SHOAL_OK);
    shoal_map_close(m);
    shoal_store_close(s);

    /* Checksums off. */
    char p2[512];
    tpath(p2, sizeof p2, "nosum.shoal");
    shoal_store_destroy(p2);
    o.checksums = 2;
    o.sync_writes = 0;
    REQUIRE_OK(shoal_store_open(p2, &o, &s));
    CHECK_RC(shoal_store_get_stats(s, &st), SHOAL_OK);
    CHECK(st.checksums == 0);
    shoal_store_close(s);
    shoal_store_destroy(p2);

    /* Repair of a sound store: returned as is, with an empty report. */
    shoal_repair_report r;
    memset(&r, 0xff, sizeof r);
    r.struct_size = sizeof r;
    int lines = 0;
    s = (shoal_store *)1;
    CHECK_RC(shoal_store_repair(NULL, &s, &r, count_lines, &lines), SHOAL_NULL_POINTER);
    CHECK(s == NULL);
    CHECK_RC(shoal_store_repair(p, NULL, &r, count_lines, &lines), SHOAL_NULL_POINTER);
    r.struct_size = 1;
    CHECK_RC(shoal_store_repair(p, &s, &r, count_lines, &lines), SHOAL_INVALID);
    r.struct_size = sizeof r;
    CHECK_RC(shoal_store_repair(p, &s, &r, count_lines, &lines), SHOAL_OK);
    CHECK(r.struct_size == sizeof r && r.found == 0 && r.dropped == 0 && r.rebuilt == 0 && lines == 0);
    REQUIRE_OK(shoal_map_open(s, "m", 0, NULL, &m));
    char buf[4];
    size_t len;
    CHECK_RC(shoal_map_get(m, "k", 1, buf, sizeof buf, &len), SHOAL_OK);
    shoal_map_close(m);
    shoal_store_close(s);
    CHECK_RC(shoal_store_repair(p, &s, NULL, NULL, NULL), SHOAL_OK);
    shoal_store_close(s);
    tpath(p2, sizeof p2, "missing.shoal");
    CHECK_RC(shoal_store_repair(p2, &s, NULL, NULL, NULL), SHOAL_NOT_FOUND);
    shoal_store_destroy(p);
}

/* A store on disk not closed cleanly whose record fails its checksum (as an OS crash can
 * leave it): the open is refused with SHOAL_CORRUPT and a message naming
 * shoal_store_repair, which opens it, dropping that entry alone. */
static void test_store_needs_repair(void) {
    char p[512];
    tpath(p, sizeof p, "torn.shoal");
    shoal_store_destroy(p);
    shoal_options o = small_opts();
    o.open_mode = SHOAL_CREATE_NEW;
    o.checksums = 1;
    shoal_store *s = NULL;
    REQUIRE_OK(shoal_store_open(p, &o, &s));
    shoal_store_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    CHECK_RC(shoal_store_get_stats(s, &st), SHOAL_OK);
    if (!st.on_disk) {
        printf("note: %s is on tmpfs, where no store is verified on open; skipped\n", g_dir);
        shoal_store_close(s);
        shoal_store_destroy(p);
        return;
    }
    shoal_map *m = NULL;
    REQUIRE_OK(shoal_map_open(s, "m", SHOAL_MAP_CREATE, NULL, &m));
    char good[100], torn[100];
    memset(good, 'g', sizeof good);
    memset(torn, 't', sizeof torn);
    CHECK_RC(shoal_map_put(m, "good", 4, good, sizeof good, NULL), SHOAL_OK);
    CHECK_RC(shoal_map_put(m, "torn", 4, torn, sizeof torn, NULL), SHOAL_OK);
    shoal_map_close(m);
    shoal_store_close(s);

    /* A byte of torn's value flipped, and the clean flag (header offset 576) cleared. */
    char *b = NULL, *at = NULL;
    struct stat sb;
    FILE *fp = fopen(p, "rb");
    if (fp && fstat(fileno(fp), &sb) == 0 && (b = malloc((size_t)sb.st_size)) != NULL &&
        fread(b, 1, (size_t)sb.st_size, fp) == (size_t)sb.st_size)
        at = memmem(b, (size_t)sb.st_size, "torntttt", 8);
    if (fp) fclose(fp);
    CHECK(at != NULL);
    if (!at) {
        free(b);
        return;
    }
    char flipped = (char)(at[4 + 50] ^ 1);
    CHECK(patch_file(p, (off_t)(at - b) + 4 + 50, &flipped, 1));
    free(b);
    uint64_t unclean = 0;
    CHECK(patch_file(p, 576, &unclean, 8));

    o.open_mode = SHOAL_OPEN_EXISTING;
    CHECK_RC(shoal_store_open(p, &o, &s), SHOAL_CORRUPT);
    CHECK(msg_names("shoal_store_repair"));
    CHECK(strstr(shoal_last_error_message(), "not closed cleanly") != NULL);
    CHECK(s == NULL);
    shoal_repair_report r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    REQUIRE_OK(shoal_store_repair(p, &s, &r, NULL, NULL));
    CHECK(r.dropped == 1);
    REQUIRE_OK(shoal_map_open(s, "m", 0, NULL, &m));
    char buf[128];
    size_t len = 0;
    CHECK_RC(shoal_map_get(m, "good", 4, buf, sizeof buf, &len), SHOAL_OK);
    CHECK(len == sizeof good && memcmp(buf, good, len) == 0);
    CHECK_RC(shoal_map_get(m, "torn", 4, buf, sizeof buf, &len), SHOAL_NOT_FOUND);
    shoal_map_close(m);
    shoal_store_close(s);
    shoal_store_destroy(p);
}

/* ---- batches: sync_writes flushes once per group ------------------------------------ */

/* Returns the status, or -1 if the error message does not say why. */
static void *end_batch_on_another_thread(void *arg) {
    shoal_status rc = shoal_batch_end((shoal_batch *)arg);
    if (rc != SHOAL_OK && strstr(shoal_last_error_message(), "thread that began it") == NULL)
        return (void *)(intptr_t)-1;
    return (void *)(intptr_t)rc;
}

static void test_batch(void) {
    char p[512];
    tpath(p, sizeof p, "batch.shoal");
    shoal_store_destroy(p);
    shoal_options o = small_opts();
    o.sync_writes = 1;
    shoal_store *s = NULL;
    REQUIRE_OK(shoal_store_open(p, &o, &s));
    shoal_map *m = NULL;
    REQUIRE_OK(shoal_map_open(s, "m", SHOAL_MAP_CREATE, NULL, &m));

    shoal_batch *b = (shoal_batch *)1;
    CHECK_RC(shoal_batch_begin(NULL, &b), SHOAL_NULL_POINTER);
    CHECK(b == NULL);
    CHECK_RC(shoal_batch_begin(s, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_batch_end(NULL), SHOAL_NULL_POINTER);

    /* A batch with writes, and one nested in it. */
    REQUIRE_OK(shoal_batch_begin(s, &b));
    CHECK(b != NULL);
    shoal_batch *inner = NULL;
    REQUIRE_OK(shoal_batch_begin(s, &inner));
    for (int i = 0; i < 50; i++) {
        char k[16];
        int n = snprintf(k, sizeof k, "k%d", i);
        CHECK_RC(shoal_map_put(m, k, (size_t)n, "v", 1, NULL), SHOAL_OK);
    }
    CHECK_RC(shoal_batch_end(inner), SHOAL_OK);

    /* Ended on another thread: refused, and the batch stays open and valid. */
    pthread_t t;
    void *rc = NULL;
    CHECK(pthread_create(&t, NULL, end_batch_on_another_thread, b) == 0);
    pthread_join(t, &rc);
    CHECK((intptr_t)rc == (intptr_t)SHOAL_INVALID);
    CHECK_RC(shoal_map_put(m, "last", 4, "v", 1, NULL), SHOAL_OK);
    CHECK_RC(shoal_batch_end(b), SHOAL_OK);

    uint64_t n = 0;
    CHECK_RC(shoal_map_len(m, &n), SHOAL_OK);
    CHECK(n == 51);
    shoal_map_close(m);
    shoal_store_close(s);
    shoal_store_destroy(p);
}

/* ---- store-level errors ------------------------------------------------------------ */

static void test_full(void) {
    char p[512];
    tpath(p, sizeof p, "full.shoal");
    shoal_store_destroy(p);
    shoal_options o = small_opts();
    o.max_maps = 1;
    o.max_processes = 4;
    o.max_threads = 8;
    o.chunk_size = 64 << 10;
    o.max_size = 2u << 20;
    shoal_store *s = NULL;
    REQUIRE_OK(shoal_store_open(p, &o, &s));
    shoal_map *m = NULL, *m2 = NULL;
    REQUIRE_OK(shoal_map_open(s, "only", SHOAL_MAP_CREATE, NULL, &m));
    CHECK_RC(shoal_map_open(s, "second", SHOAL_MAP_CREATE, NULL, &m2), SHOAL_FULL);
    CHECK(m2 == NULL);
    char v[1000];
    memset(v, 'f', sizeof v);
    shoal_status rc = SHOAL_OK;
    int i;
    for (i = 0; i < 100000 && rc == SHOAL_OK; i++) {
        char k[16];
        int kl = snprintf(k, sizeof k, "%d", i);
        rc = shoal_map_put(m, k, (size_t)kl, v, sizeof v, NULL);
    }
    CHECK_RC(rc, SHOAL_FULL);
    CHECK(i > 100);
    /* Earlier entries are all there. */
    uint64_t n = 0;
    CHECK_RC(shoal_map_len(m, &n), SHOAL_OK);
    CHECK(n == (uint64_t)(i - 1));
    CHECK_RC(shoal_store_check(s, NULL, NULL, NULL), SHOAL_OK);
    shoal_map_close(m);
    shoal_store_close(s);
    shoal_store_destroy(p);
}

static void test_no_space(void) {
    char p[512];
    tpath(p, sizeof p, "nospace.shoal");
    shoal_store_destroy(p);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = {6u << 20, 6u << 20};
        if (setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(3);
        shoal_store *s = NULL;
        shoal_map *m = NULL;
        if (shoal_store_open(p, NULL, &s) != SHOAL_OK) _exit(4);
        if (shoal_map_open(s, "m", SHOAL_MAP_CREATE, NULL, &m) != SHOAL_OK) _exit(5);
        char v[500];
        memset(v, 9, sizeof v);
        shoal_status rc = SHOAL_OK;
        for (int i = 0; i < 1000000 && rc == SHOAL_OK; i++) {
            char k[16];
            int kl = snprintf(k, sizeof k, "k%d", i);
            rc = shoal_map_put(m, k, (size_t)kl, v, sizeof v, NULL);
        }
        if (rc != SHOAL_NO_SPACE) {
            fprintf(stderr, "child: %s: %s\n", shoal_strerror(rc), shoal_last_error_message());
            _exit(1);
        }
        if (strstr(shoal_last_error_message(), "no space") == NULL) _exit(2);
        _exit(0);
    }
    CHECK(pid > 0 && wait_child(pid) == 0);
    shoal_store *s = NULL;
    REQUIRE_OK(shoal_store_open(p, NULL, &s));
    CHECK_RC(shoal_store_check(s, NULL, NULL, NULL), SHOAL_OK);
    shoal_store_close(s);
    shoal_store_destroy(p);
}

static void *put_in_thread(void *arg) {
    const shoal_map *m = arg;
    return (void *)(intptr_t)shoal_map_put(m, "t", 1, "v", 1, NULL);
}

static void test_too_many(void) {
    char p[512];
    tpath(p, sizeof p, "toomany.shoal");
    shoal_store_destroy(p);
    shoal_options o = small_opts();
    o.max_threads = 1;
    o.max_processes = 1;
    shoal_store *s = NULL;
    shoal_map *m = NULL;
    REQUIRE_OK(shoal_store_open(p, &o, &s));
    REQUIRE_OK(shoal_map_open(s, "m", SHOAL_MAP_CREATE, NULL, &m));
    CHECK_RC(shoal_map_put(m, "main", 4, "v", 1, NULL), SHOAL_OK);
    /* A second thread writing while this one holds the only thread slot. */
    pthread_t t;
    void *res = NULL;
    CHECK(pthread_create(&t, NULL, put_in_thread, m) == 0);
    pthread_join(t, &res);
    CHECK((shoal_status)(intptr_t)res == SHOAL_TOO_MANY);
    /* A second process while this one holds the only process slot: a forked child
     * registers on its first use of the inherited handles. */
    pid_t pid = fork();
    if (pid == 0) {
        shoal_status rc = shoal_map_put(m, "child", 5, "v", 1, NULL);
        if (rc != SHOAL_TOO_MANY) {
            fprintf(stderr, "child: %s: %s\n", shoal_strerror(rc), shoal_last_error_message());
            _exit(1);
        }
        _exit(0);
    }
    CHECK(pid > 0 && wait_child(pid) == 0);
    shoal_map_close(m);
    shoal_store_close(s);
    shoal_store_destroy(p);
}

static void test_timeout(void) {
    /* A child writes one key in a loop; stopping it (SIGSTOP) while it holds the
     * segment's lock makes our write wait, then time out after lock_timeout_ms. It is
     * stopped at random moments until that happens. */
    char p[512];
    tpath(p, sizeof p, "timeout.shoal");
    shoal_store_destroy(p);
    shoal_options o = small_opts();
    o.lock_timeout_ms = 20;
    shoal_store *s = NULL;
    shoal_map *m = NULL;
    REQUIRE_OK(shoal_store_open(p, &o, &s));
    shoal_map_options mo;
    memset(&mo, 0, sizeof mo);
    mo.struct_size = sizeof mo;
    mo.segment_buckets = 1;
    mo.stash_buckets = 1;
    REQUIRE_OK(shoal_map_open(s, "hot", SHOAL_MAP_CREATE, &mo, &m));
    pid_t pid = fork();
    if (pid == 0) {
        char v[64] = {0};
        for (uint64_t i = 0;; i++) {
            memcpy(v, &i, sizeof i);
            shoal_map_put(m, "hot", 3, v, sizeof v, NULL);
        }
    }
    CHECK(pid > 0);
    int timed_out = 0, tries = 0;
    struct timespec pause = {0, 200000};
    for (; tries < 2000 && !timed_out; tries++) {
        nanosleep(&pause, NULL);
        kill(pid, SIGSTOP);
        int st;
        waitpid(pid, &st, WUNTRACED);
        shoal_status rc = shoal_map_put(m, "hot", 3, "parent", 6, NULL);
        if (rc == SHOAL_TIMEOUT) {
            timed_out = 1;
            CHECK(strstr(shoal_last_error_message(), "timed out") != NULL);
        } else {
            CHECK_RC(rc, SHOAL_OK);
        }
        kill(pid, SIGCONT);
    }
    CHECK(timed_out);
    if (!timed_out) fprintf(stderr, "no timeout in %d tries\n", tries);
    kill(pid, SIGKILL);
    wait_child(pid);
    /* The dead child's lock is recovered. */
    CHECK_RC(shoal_map_put(m, "hot", 3, "after", 5, NULL), SHOAL_OK);
    CHECK_RC(shoal_store_check(s, NULL, NULL, NULL), SHOAL_OK);
    shoal_map_close(m);
    shoal_store_close(s);
    shoal_store_destroy(p);
}

/* ---- threads and fork --------------------------------------------------------------- */

struct worker {
    const shoal_map *m;
    int id;
    int errors;
};

static void *worker_main(void *arg) {
    struct worker *w = arg;
    for (int i = 0; i < 2000; i++) {
        char k[32], v[32], out[32];
        int kl = snprintf(k, sizeof k, "t%d-%d", w->id, i);
        int vl = snprintf(v, sizeof v, "value-%d", i);
        size_t len = 0;
        if (shoal_map_put(w->m, k, (size_t)kl, v, (size_t)vl, NULL) != SHOAL_OK) w->errors++;
        if (shoal_map_get(w->m, k, (size_t)kl, out, sizeof out, &len) != SHOAL_OK ||
            len != (size_t)vl || memcmp(out, v, len) != 0)
            w->errors++;
    }
    return NULL;
}

static void test_threads_share_handles(void) {
    shoal_store *s;
    shoal_map *m;
    if (!fresh("threads", &s, &m)) { h_failures++; return; }
    enum { T = 4 };
    pthread_t th[T];
    struct worker w[T];
    for (int i = 0; i < T; i++) {
        w[i] = (struct worker){m, i, 0};
        CHECK(pthread_create(&th[i], NULL, worker_main, &w[i]) == 0);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        CHECK(w[i].errors == 0);
    }
    uint64_t n = 0;
    CHECK_RC(shoal_map_len(m, &n), SHOAL_OK);
    CHECK(n == T * 2000);
    CHECK_RC(shoal_store_check(s, NULL, NULL, NULL), SHOAL_OK);
    shoal_map_close(m);
    shoal_store_close(s);
}

static void test_fork_child_uses_handles(void) {
    shoal_store *s;
    shoal_map *m;
    if (!fresh("fork", &s, &m)) { h_failures++; return; }
    CHECK_RC(shoal_map_put(m, "parent", 6, "1", 1, NULL), SHOAL_OK);
    pid_t pid = fork();
    if (pid == 0) {
        char b[8];
        size_t len;
        if (shoal_map_get(m, "parent", 6, b, sizeof b, &len) != SHOAL_OK) _exit(1);
        if (shoal_map_put(m, "child", 5, "2", 1, NULL) != SHOAL_OK) _exit(2);
        _exit(0);
    }
    CHECK(pid > 0 && wait_child(pid) == 0);
    bool present = false;
    CHECK_RC(shoal_map_contains(m, "child", 5, &present), SHOAL_OK);
    CHECK(present);
    shoal_map_close(m);
    shoal_store_close(s);
}

/* ---- fixed-size maps ------------------------------------------------------------- */

static void test_fixed_open_kind(void) {
    shoal_store *s;
    shoal_map *m;
    if (!fresh("fixed_open", &s, &m)) { h_failures++; return; }
    shoal_fixed *f = (shoal_fixed *)1;
    /* NULLs and bad arguments. */
    CHECK_RC(shoal_fixed_open(s, "f", 8, 8, SHOAL_MAP_CREATE, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_fixed_open(NULL, "f", 8, 8, SHOAL_MAP_CREATE, &f), SHOAL_NULL_POINTER);
    CHECK(f == NULL);
    CHECK_RC(shoal_fixed_open(s, NULL, 8, 8, SHOAL_MAP_CREATE, &f), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_fixed_open(s, "f", 8, 8, 0x80, &f), SHOAL_INVALID);
    CHECK_RC(shoal_fixed_open(s, "f", 0, 8, SHOAL_MAP_CREATE, &f), SHOAL_INVALID);
    CHECK_RC(shoal_fixed_open(s, "f", SHOAL_FIXED_MAX_KEY_SIZE + 1, 8, SHOAL_MAP_CREATE, &f),
             SHOAL_INVALID);
    CHECK_RC(shoal_fixed_open(s, "f", 8, SHOAL_FIXED_MAX_VALUE_SIZE + 1, SHOAL_MAP_CREATE, &f),
             SHOAL_INVALID);
    CHECK(f == NULL);
    /* Missing map without create. */
    CHECK_RC(shoal_fixed_open(s, "f", 8, 8, 0, &f), SHOAL_NOT_FOUND);
    CHECK(f == NULL);
    REQUIRE_OK(shoal_fixed_open(s, "f", 8, 8, SHOAL_MAP_CREATE, &f));
    CHECK(f != NULL);
    /* Reopen with the same sizes, without create. */
    shoal_fixed *f2 = NULL;
    CHECK_RC(shoal_fixed_open(s, "f", 8, 8, 0, &f2), SHOAL_OK);
    CHECK_RC(shoal_fixed_close(f2), SHOAL_OK);
    /* Other sizes; a variable map opened as fixed and the reverse. */
    CHECK_RC(shoal_fixed_open(s, "f", 8, 4, SHOAL_MAP_CREATE, &f2), SHOAL_INVALID);
    CHECK_RC(shoal_fixed_open(s, "f", 4, 8, 0, &f2), SHOAL_INVALID);
    CHECK_RC(shoal_fixed_open(s, "m", 8, 8, SHOAL_MAP_CREATE, &f2), SHOAL_INVALID);
    CHECK(msg_names("shoal_map_open"));
    CHECK(f2 == NULL);
    shoal_map *m2 = NULL;
    CHECK_RC(shoal_map_open(s, "f", 0, NULL, &m2), SHOAL_INVALID);
    CHECK(msg_names("shoal_fixed_open"));
    CHECK(strstr(shoal_last_error_message(), "key_size 8, value_size 8") != NULL);
    CHECK_RC(shoal_map_open(s, "f", SHOAL_MAP_CREATE, NULL, &m2), SHOAL_INVALID);
    CHECK(msg_names("shoal_fixed_open"));
    CHECK(m2 == NULL);
    size_t ks = 99, vs = 99;
    CHECK_RC(shoal_fixed_sizes(NULL, &ks, &vs), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_fixed_sizes(f, NULL, NULL), SHOAL_OK);
    CHECK_RC(shoal_fixed_sizes(f, &ks, &vs), SHOAL_OK);
    CHECK(ks == 8 && vs == 8);

    /* shoal_map_kind */
    shoal_map_options uo;
    memset(&uo, 0, sizeof uo);
    uo.struct_size = sizeof uo;
    uo.uids = 1;
    REQUIRE_OK(shoal_map_open(s, "u", SHOAL_MAP_CREATE, &uo, &m2));
    uint32_t kind = 99;
    ks = vs = 99;
    CHECK_RC(shoal_map_kind(s, "m", &kind, &ks, &vs), SHOAL_OK);
    CHECK(kind == SHOAL_MAP_KIND_VARIABLE && ks == 0 && vs == 0);
    CHECK_RC(shoal_map_kind(s, "u", &kind, NULL, NULL), SHOAL_OK);
    CHECK(kind == SHOAL_MAP_KIND_VARIABLE_UIDS);
    CHECK_RC(shoal_map_kind(s, "f", &kind, &ks, &vs), SHOAL_OK);
    CHECK(kind == SHOAL_MAP_KIND_FIXED && ks == 8 && vs == 8);
    CHECK_RC(shoal_map_kind(s, "nope", &kind, &ks, &vs), SHOAL_NOT_FOUND);
    CHECK(kind == 0 && ks == 0 && vs == 0);
    CHECK_RC(shoal_map_kind(NULL, "m", &kind, NULL, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_kind(s, NULL, &kind, NULL, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_map_kind(s, "m", NULL, NULL, NULL), SHOAL_NULL_POINTER);
    CHECK(shoal_map_kind(s, "", &kind, NULL, NULL) != SHOAL_OK);

    /* The fixed map is listed among the store's maps and can be dropped. */
    CHECK_RC(shoal_store_drop_map(s, "f"), SHOAL_OK);
    uint64_t n = 0;
    CHECK_RC(shoal_fixed_len(f, &n), SHOAL_NOT_FOUND);
    CHECK_RC(shoal_fixed_close(f), SHOAL_OK);
    CHECK_RC(shoal_fixed_close(NULL), SHOAL_OK);
    shoal_map_close(m2);
    shoal_map_close(m);
    shoal_store_close(s);
}

static void test_fixed_ops(void) {
    shoal_store *s;
    if (!fresh("fixed_ops", &s, NULL)) { h_failures++; return; }
    shoal_fixed *f;
    REQUIRE_OK(shoal_fixed_open(s, "f", 4, 8, SHOAL_MAP_CREATE, &f));
    const char k1[4] = {'a', 'b', 'c', 'd'};
    const char k2[4] = {'w', 'x', 'y', 'z'};
    const char v1[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    const char v2[8] = {9, 9, 9, 9, 9, 9, 9, 9};
    char buf[16];
    bool b = true;

    /* get on a missing key; wrong sizes; NULLs. */
    CHECK_RC(shoal_fixed_get(f, k1, 4, buf, 8), SHOAL_NOT_FOUND);
    CHECK_RC(shoal_fixed_get(f, k1, 3, buf, 8), SHOAL_INVALID);
    CHECK_RC(shoal_fixed_get(f, k1, 4, buf, 7), SHOAL_INVALID);
    CHECK_RC(shoal_fixed_get(f, k1, 4, buf, 16), SHOAL_INVALID);
    CHECK_RC(shoal_fixed_get(NULL, k1, 4, buf, 8), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_fixed_get(f, NULL, 4, buf, 8), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_fixed_get(f, k1, 4, NULL, 8), SHOAL_NULL_POINTER);

    /* put */
    CHECK_RC(shoal_fixed_put(f, k1, 4, v1, 8, &b), SHOAL_OK);
    CHECK(!b);
    CHECK_RC(shoal_fixed_put(f, k1, 4, v1, 8, &b), SHOAL_OK);
    CHECK(b);
    CHECK_RC(shoal_fixed_put(f, k1, 4, v1, 8, NULL), SHOAL_OK);
    CHECK_RC(shoal_fixed_put(f, k1, 5, v1, 8, NULL), SHOAL_INVALID);
    CHECK_RC(shoal_fixed_put(f, k1, 4, v1, 7, NULL), SHOAL_INVALID);
    CHECK_RC(shoal_fixed_put(f, k1, 4, NULL, 8, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_fixed_put(NULL, k1, 4, v1, 8, NULL), SHOAL_NULL_POINTER);
    memset(buf, 0, sizeof buf);
    CHECK_RC(shoal_fixed_get(f, k1, 4, buf, 8), SHOAL_OK);
    CHECK(memcmp(buf, v1, 8) == 0);

    /* contains */
    CHECK_RC(shoal_fixed_contains(f, k1, 4, &b), SHOAL_OK);
    CHECK(b);
    CHECK_RC(shoal_fixed_contains(f, k2, 4, &b), SHOAL_OK);
    CHECK(!b);
    CHECK_RC(shoal_fixed_contains(f, k2, 2, &b), SHOAL_INVALID);
    CHECK_RC(shoal_fixed_contains(f, k2, 4, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_fixed_contains(NULL, k2, 4, &b), SHOAL_NULL_POINTER);

    /* insert / replace */
    CHECK_RC(shoal_fixed_put_if_absent(f, k1, 4, v2, 8), SHOAL_EXISTS);
    CHECK_RC(shoal_fixed_put_if_present(f, k2, 4, v2, 8), SHOAL_NOT_FOUND);
    CHECK_RC(shoal_fixed_put_if_absent(f, k2, 4, v2, 8), SHOAL_OK);
    CHECK_RC(shoal_fixed_put_if_present(f, k1, 4, v2, 8), SHOAL_OK);
    CHECK_RC(shoal_fixed_get(f, k1, 4, buf, 8), SHOAL_OK);
    CHECK(memcmp(buf, v2, 8) == 0);
    CHECK_RC(shoal_fixed_put_if_absent(f, k1, 4, v2, 9), SHOAL_INVALID);
    CHECK_RC(shoal_fixed_put_if_present(f, k1, 1, v2, 8), SHOAL_INVALID);
    CHECK_RC(shoal_fixed_put_if_absent(NULL, k1, 4, v2, 8), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_fixed_put_if_present(NULL, k1, 4, v2, 8), SHOAL_NULL_POINTER);

    /* compare_and_swap */
    CHECK_RC(shoal_fixed_compare_and_swap(f, k1, 4, v1, 8, v1, 8, 0), SHOAL_MISMATCH);
    CHECK_RC(shoal_fixed_compare_and_swap(f, k1, 4, v2, 8, v1, 8, 0), SHOAL_OK);
    CHECK_RC(shoal_fixed_get(f, k1, 4, buf, 8), SHOAL_OK);
    CHECK(memcmp(buf, v1, 8) == 0);
    CHECK_RC(shoal_fixed_compare_and_swap(f, k1, 4, NULL, 0, v2, 8, SHOAL_CAS_EXPECT_ABSENT),
             SHOAL_MISMATCH);
    CHECK_RC(shoal_fixed_compare_and_swap(f, k1, 4, v1, 8, NULL, 0, SHOAL_CAS_REMOVE), SHOAL_OK);
    CHECK_RC(shoal_fixed_contains(f, k1, 4, &b), SHOAL_OK);
    CHECK(!b);
    CHECK_RC(shoal_fixed_compare_and_swap(f, k1, 4, NULL, 0, v2, 8, SHOAL_CAS_EXPECT_ABSENT),
             SHOAL_OK);
    CHECK_RC(shoal_fixed_compare_and_swap(f, k1, 4, v1, 7, v2, 8, 0), SHOAL_INVALID);
    CHECK_RC(shoal_fixed_compare_and_swap(f, k1, 4, v1, 8, v2, 3, 0), SHOAL_INVALID);
    CHECK_RC(shoal_fixed_compare_and_swap(f, k1, 4, v1, 8, v2, 8, 0x40), SHOAL_INVALID);
    CHECK_RC(shoal_fixed_compare_and_swap(NULL, k1, 4, v1, 8, v2, 8, 0), SHOAL_NULL_POINTER);

    /* remove */
    CHECK_RC(shoal_fixed_remove(f, k1, 4), SHOAL_OK);
    CHECK_RC(shoal_fixed_remove(f, k1, 4), SHOAL_NOT_FOUND);
    CHECK_RC(shoal_fixed_remove(f, k1, 8), SHOAL_INVALID);
    CHECK_RC(shoal_fixed_remove(NULL, k1, 4), SHOAL_NULL_POINTER);

    /* swap / take / get_or_insert (k1 is absent before and after) */
    {
        unsigned char old[8];
        bool rep = true;
        CHECK_RC(shoal_fixed_swap(f, k1, 4, v1, 8, old, 8, &rep), SHOAL_OK);
        CHECK(!rep);
        CHECK_RC(shoal_fixed_swap(f, k1, 4, v2, 8, old, 8, &rep), SHOAL_OK);
        CHECK(rep);
        CHECK(memcmp(old, v1, 8) == 0);
        CHECK_RC(shoal_fixed_swap(f, k1, 4, v1, 8, NULL, 0, NULL), SHOAL_OK);
        CHECK_RC(shoal_fixed_swap(f, k1, 4, v2, 8, old, 7, NULL), SHOAL_INVALID);
        CHECK_RC(shoal_fixed_swap(f, k1, 4, v2, 7, old, 8, NULL), SHOAL_INVALID);
        CHECK_RC(shoal_fixed_swap(NULL, k1, 4, v1, 8, NULL, 0, NULL), SHOAL_NULL_POINTER);
        CHECK_RC(shoal_fixed_take(f, k1, 4, old, 8), SHOAL_OK);
        CHECK(memcmp(old, v1, 8) == 0);
        CHECK_RC(shoal_fixed_take(f, k1, 4, old, 8), SHOAL_NOT_FOUND);
        CHECK_RC(shoal_fixed_take(f, k1, 4, old, 9), SHOAL_INVALID);
        CHECK_RC(shoal_fixed_take(NULL, k1, 4, NULL, 0), SHOAL_NULL_POINTER);
        CHECK_RC(shoal_fixed_get_or_insert(f, k1, 4, v2, 8, old, 8), SHOAL_OK);
        CHECK(memcmp(old, v2, 8) == 0);
        CHECK_RC(shoal_fixed_get_or_insert(f, k1, 4, v1, 8, old, 8), SHOAL_OK);
        CHECK(memcmp(old, v2, 8) == 0);
        CHECK_RC(shoal_fixed_get_or_insert(f, k1, 4, v1, 7, old, 8), SHOAL_INVALID);
        CHECK_RC(shoal_fixed_get_or_insert(f, k1, 4, v1, 8, NULL, 0), SHOAL_OK);
        CHECK_RC(shoal_fixed_take(f, k1, 4, NULL, 0), SHOAL_OK);
        CHECK_RC(shoal_fixed_contains(f, k1, 4, &b), SHOAL_OK);
        CHECK(!b);
    }

    /* add (8-byte values) */
    int64_t r = 0;
    CHECK_RC(shoal_fixed_add(f, k1, 4, 5, &r), SHOAL_OK);
    CHECK(r == 5);
    CHECK_RC(shoal_fixed_add(f, k1, 4, -7, &r), SHOAL_OK);
    CHECK(r == -2);
    CHECK_RC(shoal_fixed_add(f, k1, 4, 2, NULL), SHOAL_OK);
    int64_t back = 1;
    CHECK_RC(shoal_fixed_get(f, k1, 4, &back, sizeof back), SHOAL_OK);
    CHECK(back == 0);
    CHECK_RC(shoal_fixed_add(f, k1, 3, 1, &r), SHOAL_INVALID);
    CHECK_RC(shoal_fixed_add(NULL, k1, 4, 1, &r), SHOAL_NULL_POINTER);

    /* len / clear */
    uint64_t n = 0;
    CHECK_RC(shoal_fixed_len(f, &n), SHOAL_OK);
    CHECK(n == 2);
    CHECK_RC(shoal_fixed_len(f, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_fixed_len(NULL, &n), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_fixed_clear(NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_fixed_clear(f), SHOAL_OK);
    CHECK_RC(shoal_fixed_len(f, &n), SHOAL_OK);
    CHECK(n == 0);

    /* add on a map whose values are not 8 bytes */
    shoal_fixed *g;
    REQUIRE_OK(shoal_fixed_open(s, "g", 2, 4, SHOAL_MAP_CREATE, &g));
    CHECK_RC(shoal_fixed_add(g, "ab", 2, 1, &r), SHOAL_INVALID);
    /* a zero-size value: NULL buffers allowed */
    shoal_fixed *z;
    REQUIRE_OK(shoal_fixed_open(s, "z", 2, 0, SHOAL_MAP_CREATE, &z));
    CHECK_RC(shoal_fixed_put(z, "ab", 2, NULL, 0, NULL), SHOAL_OK);
    CHECK_RC(shoal_fixed_get(z, "ab", 2, NULL, 0), SHOAL_OK);
    CHECK_RC(shoal_fixed_get(z, "cd", 2, NULL, 0), SHOAL_NOT_FOUND);
    shoal_fixed_close(z);
    shoal_fixed_close(g);
    shoal_fixed_close(f);
    shoal_store_close(s);
}

static void test_fixed_iter_stats(void) {
    shoal_store *s;
    if (!fresh("fixed_iter", &s, NULL)) { h_failures++; return; }
    shoal_fixed *f;
    REQUIRE_OK(shoal_fixed_open(s, "f", 8, 8, SHOAL_MAP_CREATE, &f));
    const uint64_t N = 2000;
    for (uint64_t i = 0; i < N; i++) {
        uint64_t v = i * 3;
        CHECK_RC(shoal_fixed_put(f, &i, 8, &v, 8, NULL), SHOAL_OK);
    }
    shoal_fixed_iter *it = (shoal_fixed_iter *)1;
    CHECK_RC(shoal_fixed_iter_open(NULL, &it), SHOAL_NULL_POINTER);
    CHECK(it == NULL);
    CHECK_RC(shoal_fixed_iter_open(f, NULL), SHOAL_NULL_POINTER);
    REQUIRE_OK(shoal_fixed_iter_open(f, &it));
    uint64_t k, v, count = 0, ksum = 0;
    int bad = 0;
    /* Wrong sizes and NULLs do not consume an entry. */
    CHECK_RC(shoal_fixed_iter_next(it, &k, 4, &v, 8), SHOAL_INVALID);
    CHECK_RC(shoal_fixed_iter_next(it, &k, 8, &v, 4), SHOAL_INVALID);
    CHECK_RC(shoal_fixed_iter_next(it, NULL, 8, &v, 8), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_fixed_iter_next(NULL, &k, 8, &v, 8), SHOAL_NULL_POINTER);
    shoal_status rc;
    while ((rc = shoal_fixed_iter_next(it, &k, 8, &v, 8)) == SHOAL_OK) {
        count++;
        ksum += k;
        if (v != k * 3) bad++;
    }
    CHECK(rc == SHOAL_DONE);
    CHECK_RC(shoal_fixed_iter_next(it, &k, 8, &v, 8), SHOAL_DONE);
    CHECK(count == N && ksum == N * (N - 1) / 2 && bad == 0);
    CHECK_RC(shoal_fixed_iter_close(it), SHOAL_OK);
    CHECK_RC(shoal_fixed_iter_close(NULL), SHOAL_OK);
    /* Keys only (value buffer NULL, length 0); the iterator outlives the map handle. */
    REQUIRE_OK(shoal_fixed_iter_open(f, &it));
    shoal_fixed *f2;
    REQUIRE_OK(shoal_fixed_open(s, "f", 8, 8, 0, &f2));
    count = 0;
    while (shoal_fixed_iter_next(it, &k, 8, NULL, 0) == SHOAL_OK) count++;
    CHECK(count == N);
    shoal_fixed_iter_close(it);

    shoal_fixed_stats st;
    memset(&st, 0, sizeof st);
    CHECK_RC(shoal_fixed_get_stats(NULL, &st), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_fixed_get_stats(f2, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_fixed_get_stats(f2, &st), SHOAL_INVALID); /* struct_size 0 */
    st.struct_size = sizeof st;
    CHECK_RC(shoal_fixed_get_stats(f2, &st), SHOAL_OK);
    CHECK(st.struct_size == sizeof st && st.entries == N && st.key_size == 8 && st.value_size == 8);
    CHECK(st.segments >= 1 && st.capacity >= N && st.cell_bytes >= 16 && st.file_size > 0);
    CHECK(st.cells_per_bucket >= 1 && st.bucket_bytes > 0 && st.segment_bytes > 0);
    /* An older, shorter struct gets only its fields. */
    struct { size_t struct_size; uint64_t entries; } old = {sizeof old, 0};
    CHECK_RC(shoal_fixed_get_stats(f2, (shoal_fixed_stats *)&old), SHOAL_OK);
    CHECK(old.struct_size == sizeof old && old.entries == N);
    shoal_fixed_close(f2);
    shoal_fixed_close(f);
    shoal_store_close(s);
}

static void test_fixed_open_with_options(void) {
    shoal_store *s;
    shoal_map *m;
    if (!fresh("fixed_opts", &s, &m)) { h_failures++; return; }
    shoal_fixed *f = (shoal_fixed *)1;
    shoal_fixed_options fo;
    memset(&fo, 0, sizeof fo);
    fo.struct_size = sizeof fo;
    /* NULLs; bad flags, sizes and names (as shoal_fixed_open). */
    CHECK_RC(shoal_fixed_open_with(NULL, "f", 8, 8, SHOAL_MAP_CREATE, &fo, &f), SHOAL_NULL_POINTER);
    CHECK(f == NULL);
    CHECK_RC(shoal_fixed_open_with(s, NULL, 8, 8, SHOAL_MAP_CREATE, &fo, &f), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_fixed_open_with(s, "f", 8, 8, SHOAL_MAP_CREATE, &fo, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_fixed_open_with(s, "f", 8, 8, 0x80, &fo, &f), SHOAL_INVALID);
    CHECK_RC(shoal_fixed_open_with(s, "f", 0, 8, SHOAL_MAP_CREATE, &fo, &f), SHOAL_INVALID);
    CHECK_RC(shoal_fixed_open_with(s, "f", 8, SHOAL_FIXED_MAX_VALUE_SIZE + 1, SHOAL_MAP_CREATE, &fo, &f),
             SHOAL_INVALID);
    CHECK_RC(shoal_fixed_open_with(s, "", 8, 8, SHOAL_MAP_CREATE, &fo, &f), SHOAL_INVALID);
    CHECK_RC(shoal_fixed_open_with(s, "bad\xff utf8", 8, 8, SHOAL_MAP_CREATE, &fo, &f), SHOAL_INVALID);
    /* Bad options. */
    fo.segment_buckets = 4097;
    CHECK_RC(shoal_fixed_open_with(s, "f", 8, 8, SHOAL_MAP_CREATE, &fo, &f), SHOAL_INVALID);
    CHECK(strstr(shoal_last_error_message(), "segment_buckets") != NULL);
    fo.segment_buckets = 0;
    fo.stash_buckets = 1025;
    CHECK_RC(shoal_fixed_open_with(s, "f", 8, 8, SHOAL_MAP_CREATE, &fo, &f), SHOAL_INVALID);
    fo.stash_buckets = 0;
    fo.struct_size = 0;
    CHECK_RC(shoal_fixed_open_with(s, "f", 8, 8, SHOAL_MAP_CREATE, &fo, &f), SHOAL_INVALID);
    CHECK(strstr(shoal_last_error_message(), "struct_size") != NULL);
    fo.struct_size = sizeof(size_t) - 1;
    CHECK_RC(shoal_fixed_open_with(s, "f", 8, 8, SHOAL_MAP_CREATE, &fo, &f), SHOAL_INVALID);
    /* A newer caller's larger struct: unknown fields must be 0. */
    struct {
        shoal_fixed_options o;
        uint64_t future;
    } newer;
    memset(&newer, 0, sizeof newer);
    newer.o.struct_size = sizeof newer;
    newer.future = 1;
    CHECK_RC(shoal_fixed_open_with(s, "f", 8, 8, SHOAL_MAP_CREATE, &newer.o, &f), SHOAL_INVALID);
    CHECK(strstr(shoal_last_error_message(), "does not know") != NULL);
    CHECK(f == NULL);
    /* None of the failed calls created the map. */
    uint32_t kind = 0;
    CHECK_RC(shoal_map_kind(s, "f", &kind, NULL, NULL), SHOAL_NOT_FOUND);
    newer.future = 0;
    REQUIRE_OK(shoal_fixed_open_with(s, "newer", 8, 8, SHOAL_MAP_CREATE, &newer.o, &f));
    shoal_fixed_stats st_default;
    memset(&st_default, 0, sizeof st_default);
    st_default.struct_size = sizeof st_default;
    CHECK_RC(shoal_fixed_get_stats(f, &st_default), SHOAL_OK);
    shoal_fixed_close(f);
    const uint64_t per_seg_default =
        st_default.capacity / st_default.segments / st_default.cells_per_bucket;
    CHECK(per_seg_default > 8);

    /* Missing map without create. */
    fo.struct_size = sizeof fo;
    CHECK_RC(shoal_fixed_open_with(s, "f", 8, 8, 0, &fo, &f), SHOAL_NOT_FOUND);
    CHECK(f == NULL);
    /* NULL options and an older struct holding only struct_size: the defaults. */
    shoal_fixed *d = NULL;
    REQUIRE_OK(shoal_fixed_open_with(s, "dflt", 8, 8, SHOAL_MAP_CREATE, NULL, &d));
    struct { size_t struct_size; } old = {sizeof old};
    shoal_fixed *o = NULL;
    REQUIRE_OK(shoal_fixed_open_with(s, "old", 8, 8, SHOAL_MAP_CREATE,
                                     (const shoal_fixed_options *)&old, &o));
    shoal_fixed_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    CHECK_RC(shoal_fixed_get_stats(d, &st), SHOAL_OK);
    CHECK(st.capacity / st.segments / st.cells_per_bucket == per_seg_default);
    CHECK_RC(shoal_fixed_get_stats(o, &st), SHOAL_OK);
    CHECK(st.capacity / st.segments / st.cells_per_bucket == per_seg_default);

    /* Tiny segments (2 main + 1 stash buckets) split often. */
    fo.segment_buckets = 2;
    fo.stash_buckets = 1;
    REQUIRE_OK(shoal_fixed_open_with(s, "f", 8, 8, SHOAL_MAP_CREATE, &fo, &f));
    CHECK_RC(shoal_fixed_get_stats(f, &st), SHOAL_OK);
    CHECK(st.segments == 1 && st.capacity == 3 * st.cells_per_bucket);
    for (uint64_t i = 0; i < 2000; i++) {
        uint64_t v = i + 1;
        CHECK_RC(shoal_fixed_put(f, &i, 8, &v, 8, NULL), SHOAL_OK);
        CHECK_RC(shoal_fixed_put(d, &i, 8, &v, 8, NULL), SHOAL_OK);
    }
    CHECK_RC(shoal_fixed_get_stats(f, &st), SHOAL_OK);
    CHECK(st.entries == 2000 && st.splits > 0 && st.capacity == st.segments * 3 * st.cells_per_bucket);
    uint64_t tiny_segments = st.segments;
    CHECK_RC(shoal_fixed_get_stats(d, &st), SHOAL_OK);
    CHECK(st.entries == 2000 && st.segments < tiny_segments);
    for (uint64_t i = 0; i < 2000; i += 97) {
        uint64_t v = 0;
        CHECK_RC(shoal_fixed_get(f, &i, 8, &v, 8), SHOAL_OK);
        CHECK(v == i + 1);
    }
    /* Reopening an existing map: its own options stay; other options are still checked. */
    shoal_fixed_options big;
    memset(&big, 0, sizeof big);
    big.struct_size = sizeof big;
    big.segment_buckets = 100;
    shoal_fixed *f2 = NULL;
    REQUIRE_OK(shoal_fixed_open_with(s, "f", 8, 8, 0, &big, &f2));
    CHECK_RC(shoal_fixed_get_stats(f2, &st), SHOAL_OK);
    CHECK(st.capacity == st.segments * 3 * st.cells_per_bucket);
    shoal_fixed_close(f2);
    big.segment_buckets = 5000;
    CHECK_RC(shoal_fixed_open_with(s, "f", 8, 8, 0, &big, &f2), SHOAL_INVALID);
    /* Other sizes, or a variable map's name. */
    CHECK_RC(shoal_fixed_open_with(s, "f", 8, 4, SHOAL_MAP_CREATE, &fo, &f2), SHOAL_INVALID);
    CHECK_RC(shoal_fixed_open_with(s, "m", 8, 8, SHOAL_MAP_CREATE, &fo, &f2), SHOAL_INVALID);
    CHECK(f2 == NULL);
    CHECK_RC(shoal_store_check(s, NULL, NULL, NULL), SHOAL_OK);
    shoal_fixed_close(o);
    shoal_fixed_close(d);
    shoal_fixed_close(f);
    shoal_map_close(m);
    shoal_store_close(s);
}

struct fupd {
    int calls;
    int absent_calls;
    int mode; /* see fixed_updater */
    size_t vsize;
    uint64_t out;
};

/* mode 0: add 1 to the little-endian u64 (absent = 0); 1: remove; 2: return 42;
 * 3: return -1; 4: a value of 4 bytes; 5: a NULL value of the right length; 6: an
 * empty value (for 0-byte values); 7: 9 bytes. */
static int fixed_updater(void *ctx, const void *cur, size_t cur_len, bool present,
                         const void **new_value, size_t *new_len) {
    struct fupd *u = ctx;
    u->calls++;
    if (present) {
        CHECK(cur_len == u->vsize && (cur != NULL || u->vsize == 0));
    } else {
        CHECK(cur == NULL && cur_len == 0);
        u->absent_calls++;
    }
    switch (u->mode) {
    case 0: {
        uint64_t v = 0;
        if (present && cur_len == 8) memcpy(&v, cur, 8);
        u->out = v + 1;
        *new_value = &u->out;
        *new_len = 8;
        return SHOAL_UPDATE_SET;
    }
    case 1:
        return SHOAL_UPDATE_REMOVE;
    case 2:
        return 42;
    case 3:
        return -1;
    case 4:
        *new_value = &u->out;
        *new_len = 4;
        return SHOAL_UPDATE_SET;
    case 5:
        *new_value = NULL;
        *new_len = 8;
        return SHOAL_UPDATE_SET;
    case 6:
        *new_value = NULL;
        *new_len = 0;
        return SHOAL_UPDATE_SET;
    default:
        *new_value = "123456789";
        *new_len = 9;
        return SHOAL_UPDATE_SET;
    }
}

/* The callback of the threaded updates: no CHECK (not thread-safe), counts its calls. */
static int fixed_incr(void *ctx, const void *cur, size_t cur_len, bool present,
                      const void **new_value, size_t *new_len) {
    struct fupd *u = ctx;
    u->calls++;
    uint64_t v = 0;
    if (present && cur_len == 8) memcpy(&v, cur, 8);
    u->out = v + 1;
    *new_value = &u->out;
    *new_len = 8;
    return SHOAL_UPDATE_SET;
}

struct fupd_worker {
    const shoal_fixed *f;
    struct fupd u;
    int errors;
};

static void *fixed_update_worker(void *arg) {
    struct fupd_worker *w = arg;
    uint64_t key = 77;
    for (int i = 0; i < 500; i++)
        if (shoal_fixed_update(w->f, &key, 8, fixed_incr, &w->u) != SHOAL_OK) w->errors++;
    return NULL;
}

static void test_fixed_update(void) {
    shoal_store *s;
    if (!fresh("fixed_update", &s, NULL)) { h_failures++; return; }
    shoal_fixed *f;
    REQUIRE_OK(shoal_fixed_open(s, "f", 8, 8, SHOAL_MAP_CREATE, &f));
    uint64_t k = 5, v = 0;
    bool present = true;
    struct fupd u = {0, 0, 0, 8, 0};
    /* NULLs and a wrong key length: the callback is not called. */
    CHECK_RC(shoal_fixed_update(NULL, &k, 8, fixed_updater, &u), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_fixed_update(f, &k, 8, NULL, &u), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_fixed_update(f, NULL, 8, fixed_updater, &u), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_fixed_update(f, &k, 4, fixed_updater, &u), SHOAL_INVALID);
    CHECK_RC(shoal_fixed_update(f, &k, 0, fixed_updater, &u), SHOAL_INVALID);
    CHECK(u.calls == 0);
    /* Absent: the callback sees absence and inserts; then it sees the value. */
    CHECK_RC(shoal_fixed_update(f, &k, 8, fixed_updater, &u), SHOAL_OK);
    CHECK(u.calls == 1 && u.absent_calls == 1);
    CHECK_RC(shoal_fixed_update(f, &k, 8, fixed_updater, &u), SHOAL_OK);
    CHECK(u.calls == 2 && u.absent_calls == 1);
    CHECK_RC(shoal_fixed_get(f, &k, 8, &v, 8), SHOAL_OK);
    CHECK(v == 2);
    /* Cancelled (any other return value), wrong sizes, a NULL value: nothing changes,
     * and the callback is called once (not retried). */
    int modes[] = {2, 3, 4, 7, 5};
    shoal_status want[] = {SHOAL_INVALID, SHOAL_INVALID, SHOAL_INVALID, SHOAL_INVALID,
                           SHOAL_NULL_POINTER};
    const char *msg[] = {"cancelled", "cancelled", "*new_len", "*new_len", "*new_value"};
    for (int i = 0; i < 5; i++) {
        u.mode = modes[i];
        u.calls = 0;
        CHECK_RC(shoal_fixed_update(f, &k, 8, fixed_updater, &u), want[i]);
        CHECK(strstr(shoal_last_error_message(), msg[i]) != NULL);
        CHECK(u.calls == 1);
        v = 0;
        CHECK_RC(shoal_fixed_get(f, &k, 8, &v, 8), SHOAL_OK);
        CHECK(v == 2);
        /* The same on an absent key: it stays absent. */
        uint64_t absent = 6;
        u.calls = 0;
        CHECK_RC(shoal_fixed_update(f, &absent, 8, fixed_updater, &u), want[i]);
        CHECK(u.calls == 1);
        CHECK_RC(shoal_fixed_contains(f, &absent, 8, &present), SHOAL_OK);
        CHECK(!present);
    }
    /* Remove a present key; "remove" on an absent key leaves it absent. */
    u.mode = 1;
    CHECK_RC(shoal_fixed_update(f, &k, 8, fixed_updater, &u), SHOAL_OK);
    CHECK_RC(shoal_fixed_contains(f, &k, 8, &present), SHOAL_OK);
    CHECK(!present);
    CHECK_RC(shoal_fixed_update(f, &k, 8, fixed_updater, &u), SHOAL_OK);
    CHECK_RC(shoal_fixed_contains(f, &k, 8, &present), SHOAL_OK);
    CHECK(!present);
    uint64_t n = 99;
    CHECK_RC(shoal_fixed_len(f, &n), SHOAL_OK);
    CHECK(n == 0);

    /* Threads updating one key: every increment lands exactly once. */
    enum { T = 4 };
    pthread_t th[T];
    struct fupd_worker w[T];
    for (int i = 0; i < T; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].f = f;
        CHECK(pthread_create(&th[i], NULL, fixed_update_worker, &w[i]) == 0);
    }
    int calls = 0;
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        CHECK(w[i].errors == 0);
        calls += w[i].u.calls;
    }
    uint64_t hot = 77;
    CHECK_RC(shoal_fixed_get(f, &hot, 8, &v, 8), SHOAL_OK);
    CHECK(v == T * 500);
    CHECK(calls >= T * 500);

    /* 0-byte values: set (a NULL, empty value) and remove. */
    shoal_fixed *z;
    REQUIRE_OK(shoal_fixed_open(s, "z", 2, 0, SHOAL_MAP_CREATE, &z));
    struct fupd uz = {0, 0, 6, 0, 0};
    CHECK_RC(shoal_fixed_update(z, "ab", 2, fixed_updater, &uz), SHOAL_OK);
    CHECK_RC(shoal_fixed_contains(z, "ab", 2, &present), SHOAL_OK);
    CHECK(present && uz.absent_calls == 1);
    CHECK_RC(shoal_fixed_update(z, "ab", 2, fixed_updater, &uz), SHOAL_OK); /* sees it present */
    CHECK(uz.calls == 2 && uz.absent_calls == 1);
    uz.mode = 0; /* 8 bytes: wrong size here */
    CHECK_RC(shoal_fixed_update(z, "ab", 2, fixed_updater, &uz), SHOAL_INVALID);
    uz.mode = 1;
    CHECK_RC(shoal_fixed_update(z, "ab", 2, fixed_updater, &uz), SHOAL_OK);
    CHECK_RC(shoal_fixed_contains(z, "ab", 2, &present), SHOAL_OK);
    CHECK(!present);
    shoal_fixed_close(z);

    /* A dropped map: SHOAL_NOT_FOUND, the callback not called. */
    CHECK_RC(shoal_store_drop_map(s, "f"), SHOAL_OK);
    u.mode = 0;
    u.calls = 0;
    CHECK_RC(shoal_fixed_update(f, &k, 8, fixed_updater, &u), SHOAL_NOT_FOUND);
    CHECK(u.calls == 0);
    shoal_fixed_close(f);
    shoal_store_close(s);
}

struct fmany {
    int calls;
    int present;
    int bad;
};

/* Keys are u64 i; a present key's value is i * 10. */
static void on_fixed_many(void *ctx, size_t index, const void *v, size_t len, bool present) {
    struct fmany *c = ctx;
    if (index != (size_t)c->calls) c->bad++;
    if (present) {
        uint64_t got;
        if (len != 8 || v == NULL) {
            c->bad++;
        } else {
            memcpy(&got, v, 8);
            if (got != (uint64_t)index * 10) c->bad++;
        }
        c->present++;
    } else if (v != NULL || len != 0) {
        c->bad++;
    }
    c->calls++;
}

static void test_fixed_batches(void) {
    shoal_store *s;
    if (!fresh("fixed_batch", &s, NULL)) { h_failures++; return; }
    shoal_fixed *f;
    REQUIRE_OK(shoal_fixed_open(s, "f", 8, 8, SHOAL_MAP_CREATE, &f));
    enum { N = 100 };
    static uint64_t kb[N + 1], vb[N];
    shoal_kv items[N];
    shoal_bytes keys[N + 1];
    for (int i = 0; i < N; i++) {
        kb[i] = (uint64_t)i;
        vb[i] = (uint64_t)i * 10;
        items[i] = (shoal_kv){&kb[i], 8, &vb[i], 8};
        keys[i] = (shoal_bytes){&kb[i], 8};
    }
    kb[N] = 1000000; /* never put */
    keys[N] = (shoal_bytes){&kb[N], 8};

    /* put_many: NULLs; an empty batch. */
    CHECK_RC(shoal_fixed_put_many(NULL, items, N), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_fixed_put_many(f, NULL, N), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_fixed_put_many(f, NULL, 0), SHOAL_OK);
    shoal_kv even[N / 2];
    for (int i = 0; i < N / 2; i++) even[i] = items[2 * i];
    CHECK_RC(shoal_fixed_put_many(f, even, N / 2), SHOAL_OK);
    uint64_t n = 0;
    CHECK_RC(shoal_fixed_len(f, &n), SHOAL_OK);
    CHECK(n == N / 2);

    /* get_many: NULLs; results in key order, absent keys reported absent. */
    struct fmany c = {0};
    CHECK_RC(shoal_fixed_get_many(NULL, keys, N + 1, on_fixed_many, &c), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_fixed_get_many(f, NULL, 3, on_fixed_many, &c), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_fixed_get_many(f, keys, N + 1, NULL, &c), SHOAL_NULL_POINTER);
    CHECK(c.calls == 0);
    CHECK_RC(shoal_fixed_get_many(f, keys, N + 1, on_fixed_many, &c), SHOAL_OK);
    CHECK(c.calls == N + 1 && c.present == N / 2 && c.bad == 0);
    memset(&c, 0, sizeof c);
    CHECK_RC(shoal_fixed_get_many(f, NULL, 0, on_fixed_many, &c), SHOAL_OK);
    CHECK(c.calls == 0);
    /* A key of the wrong length, or a NULL key: refused before any callback. */
    shoal_bytes badkeys[10];
    memcpy(badkeys, keys, sizeof badkeys);
    badkeys[7].len = 4;
    CHECK_RC(shoal_fixed_get_many(f, badkeys, 10, on_fixed_many, &c), SHOAL_INVALID);
    CHECK(strstr(shoal_last_error_message(), "item 7") != NULL);
    badkeys[7].len = 8;
    badkeys[3].data = NULL;
    CHECK_RC(shoal_fixed_get_many(f, badkeys, 10, on_fixed_many, &c), SHOAL_NULL_POINTER);
    CHECK(c.calls == 0);

    CHECK_RC(shoal_fixed_put_many(f, items, N), SHOAL_OK);
    memset(&c, 0, sizeof c);
    CHECK_RC(shoal_fixed_get_many(f, keys, N, on_fixed_many, &c), SHOAL_OK);
    CHECK(c.calls == N && c.present == N && c.bad == 0);

    /* Wrong lengths and NULL pointers in an item: refused before anything is written. */
    uint64_t nk = 5000, nv = 1;
    shoal_kv bad[2] = {{&nk, 8, &nv, 8}, {&kb[1], 8, &vb[1], 4}};
    CHECK_RC(shoal_fixed_put_many(f, bad, 2), SHOAL_INVALID);
    CHECK(strstr(shoal_last_error_message(), "item 1") != NULL);
    bad[1] = (shoal_kv){&kb[1], 3, &vb[1], 8};
    CHECK_RC(shoal_fixed_put_many(f, bad, 2), SHOAL_INVALID);
    CHECK(strstr(shoal_last_error_message(), "item 1") != NULL);
    bad[1] = (shoal_kv){&kb[1], 8, NULL, 8};
    CHECK_RC(shoal_fixed_put_many(f, bad, 2), SHOAL_NULL_POINTER);
    bad[1] = (shoal_kv){NULL, 8, &vb[1], 8};
    CHECK_RC(shoal_fixed_put_many(f, bad, 2), SHOAL_NULL_POINTER);
    bool present = true;
    CHECK_RC(shoal_fixed_contains(f, &nk, 8, &present), SHOAL_OK);
    CHECK(!present);

    /* remove_many: NULLs; bad keys refused before anything is removed. */
    uint64_t removed = 99;
    CHECK_RC(shoal_fixed_remove_many(NULL, keys, N + 1, &removed), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_fixed_remove_many(f, NULL, 2, &removed), SHOAL_NULL_POINTER);
    badkeys[3] = keys[3];
    badkeys[9].len = 9;
    CHECK_RC(shoal_fixed_remove_many(f, badkeys, 10, &removed), SHOAL_INVALID);
    CHECK(strstr(shoal_last_error_message(), "item 9") != NULL);
    CHECK(removed == 99);
    CHECK_RC(shoal_fixed_len(f, &n), SHOAL_OK);
    CHECK(n == N);
    CHECK_RC(shoal_fixed_remove_many(f, NULL, 0, &removed), SHOAL_OK);
    CHECK(removed == 0);
    CHECK_RC(shoal_fixed_remove_many(f, keys, N + 1, &removed), SHOAL_OK);
    CHECK(removed == N);
    CHECK_RC(shoal_fixed_put_many(f, items, 3), SHOAL_OK);
    CHECK_RC(shoal_fixed_remove_many(f, keys, N + 1, NULL), SHOAL_OK);
    CHECK_RC(shoal_fixed_len(f, &n), SHOAL_OK);
    CHECK(n == 0);

    /* A dropped map: every batch call fails with SHOAL_NOT_FOUND. */
    CHECK_RC(shoal_store_drop_map(s, "f"), SHOAL_OK);
    memset(&c, 0, sizeof c);
    CHECK_RC(shoal_fixed_get_many(f, keys, N, on_fixed_many, &c), SHOAL_NOT_FOUND);
    CHECK(c.calls == 0);
    CHECK_RC(shoal_fixed_put_many(f, items, N), SHOAL_NOT_FOUND);
    CHECK(strstr(shoal_last_error_message(), "item 0") != NULL);
    CHECK_RC(shoal_fixed_remove_many(f, keys, N, &removed), SHOAL_NOT_FOUND);
    shoal_fixed_close(f);
    shoal_store_close(s);

    /* A batch that fills the store stops at the failing item, naming it; the earlier
     * entries stay written. */
    char p[512];
    tpath(p, sizeof p, "fixed_full.shoal");
    shoal_store_destroy(p);
    shoal_options o = small_opts();
    o.max_maps = 1;
    o.max_processes = 4;
    o.max_threads = 8;
    o.chunk_size = 64 << 10;
    o.max_size = 2u << 20;
    REQUIRE_OK(shoal_store_open(p, &o, &s));
    REQUIRE_OK(shoal_fixed_open(s, "big", 8, SHOAL_FIXED_MAX_VALUE_SIZE, SHOAL_MAP_CREATE, &f));
    enum { M = 40000 };
    static uint64_t fk[M];
    static shoal_kv fitems[M];
    static char fv[SHOAL_FIXED_MAX_VALUE_SIZE];
    memset(fv, 'v', sizeof fv);
    for (int i = 0; i < M; i++) {
        fk[i] = (uint64_t)i;
        fitems[i] = (shoal_kv){&fk[i], 8, fv, sizeof fv};
    }
    CHECK_RC(shoal_fixed_put_many(f, fitems, M), SHOAL_FULL);
    const char *full_msg = shoal_last_error_message();
    const char *at = strstr(full_msg, "item ");
    CHECK(at != NULL);
    long failed = at ? strtol(at + 5, NULL, 10) : -1;
    CHECK(failed > 100 && failed < M);
    CHECK_RC(shoal_fixed_len(f, &n), SHOAL_OK);
    CHECK(n == (uint64_t)failed);
    present = false;
    CHECK_RC(shoal_fixed_contains(f, &fk[failed > 0 ? failed - 1 : 0], 8, &present), SHOAL_OK);
    CHECK(present);
    CHECK_RC(shoal_store_check(s, NULL, NULL, NULL), SHOAL_OK);
    shoal_fixed_close(f);
    shoal_store_close(s);
    shoal_store_destroy(p);
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void test_fixed_with_timeout(void) {
    shoal_store *s;
    if (!fresh("fixed_withtimeout", &s, NULL)) { h_failures++; return; }
    shoal_fixed *f, *t = (shoal_fixed *)1;
    REQUIRE_OK(shoal_fixed_open(s, "f", 4, 4, SHOAL_MAP_CREATE, &f));
    CHECK_RC(shoal_fixed_with_timeout(NULL, 10, &t), SHOAL_NULL_POINTER);
    CHECK(t == NULL);
    CHECK_RC(shoal_fixed_with_timeout(f, 10, NULL), SHOAL_NULL_POINTER);
    REQUIRE_OK(shoal_fixed_with_timeout(f, 10, &t));
    size_t ks = 0, vs = 0;
    CHECK_RC(shoal_fixed_sizes(t, &ks, &vs), SHOAL_OK);
    CHECK(ks == 4 && vs == 4);
    CHECK_RC(shoal_fixed_put(t, "key1", 4, "val1", 4, NULL), SHOAL_OK);
    char buf[4];
    CHECK_RC(shoal_fixed_get(f, "key1", 4, buf, 4), SHOAL_OK); /* the same map */
    CHECK(memcmp(buf, "val1", 4) == 0);
    /* Independent handles: close the original first. */
    CHECK_RC(shoal_fixed_close(f), SHOAL_OK);
    CHECK_RC(shoal_fixed_put(t, "key2", 4, "val2", 4, NULL), SHOAL_OK);
    uint64_t n = 0;
    CHECK_RC(shoal_fixed_len(t, &n), SHOAL_OK);
    CHECK(n == 2);
    CHECK_RC(shoal_fixed_close(t), SHOAL_OK);
    shoal_store_close(s);

    /* The handle's deadline applies, not the store's (30 s): a child writes one key in
     * a loop; stopped (SIGSTOP) while it holds the segment's lock, it makes writes
     * through a 20 ms handle fail with SHOAL_TIMEOUT, quickly. */
    char p[512];
    tpath(p, sizeof p, "fixed_timeout.shoal");
    shoal_store_destroy(p);
    shoal_options o = small_opts();
    o.lock_timeout_ms = 30000;
    REQUIRE_OK(shoal_store_open(p, &o, &s));
    shoal_fixed_options fo;
    memset(&fo, 0, sizeof fo);
    fo.struct_size = sizeof fo;
    fo.segment_buckets = 1;
    fo.stash_buckets = 1;
    REQUIRE_OK(shoal_fixed_open_with(s, "hot", 8, 8, SHOAL_MAP_CREATE, &fo, &f));
    REQUIRE_OK(shoal_fixed_with_timeout(f, 20, &t));
    uint64_t key = 1;
    pid_t pid = fork();
    if (pid == 0) {
        for (uint64_t i = 0;; i++) shoal_fixed_put(f, &key, 8, &i, 8, NULL);
    }
    CHECK(pid > 0);
    int timed_out = 0, tries = 0;
    struct timespec pause = {0, 200000};
    for (; tries < 2000 && !timed_out; tries++) {
        nanosleep(&pause, NULL);
        kill(pid, SIGSTOP);
        int st;
        waitpid(pid, &st, WUNTRACED);
        uint64_t v = 0xdead;
        double t0 = now_ms();
        shoal_status rc = shoal_fixed_put(t, &key, 8, &v, 8, NULL);
        if (rc == SHOAL_TIMEOUT) {
            timed_out = 1;
            CHECK(now_ms() - t0 < 5000);
            CHECK(strstr(shoal_last_error_message(), "timed out") != NULL);
            /* The other writing calls through the same handle time out the same way. */
            struct fupd u = {0, 0, 0, 8, 0};
            t0 = now_ms();
            CHECK_RC(shoal_fixed_update(t, &key, 8, fixed_updater, &u), SHOAL_TIMEOUT);
            CHECK(now_ms() - t0 < 5000);
            shoal_bytes kk = {&key, 8};
            shoal_kv kv = {&key, 8, &v, 8};
            CHECK_RC(shoal_fixed_put_many(t, &kv, 1), SHOAL_TIMEOUT);
            CHECK_RC(shoal_fixed_remove_many(t, &kk, 1, NULL), SHOAL_TIMEOUT);
            CHECK(now_ms() - t0 < 15000);
        } else {
            CHECK_RC(rc, SHOAL_OK);
        }
        kill(pid, SIGCONT);
    }
    CHECK(timed_out);
    if (!timed_out) fprintf(stderr, "no timeout in %d tries\n", tries);
    kill(pid, SIGKILL);
    wait_child(pid);
    /* The dead child's lock is recovered. */
    uint64_t last = 42;
    CHECK_RC(shoal_fixed_put(f, &key, 8, &last, 8, NULL), SHOAL_OK);
    CHECK_RC(shoal_store_check(s, NULL, NULL, NULL), SHOAL_OK);
    shoal_fixed_close(t);
    shoal_fixed_close(f);
    shoal_store_close(s);
    shoal_store_destroy(p);
}

/* ---- queue sets ------------------------------------------------------------------- */

static void test_queue(void) {
    shoal_store *s;
    shoal_map *m;
    if (!fresh("queue", &s, &m)) { h_failures++; return; }
    shoal_queue *qs = NULL;
    CHECK_RC(shoal_queue_open(s, "jobs", NULL, &qs), SHOAL_NOT_FOUND);
    CHECK(qs == NULL);
    const char *names[] = {"a2b", "b2a"};
    const uint64_t limits[] = {0, 2};
    shoal_queue_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.element_size = 100;
    o.elements = 8;
    o.queues = names;
    o.n_queues = 2;
    o.limits = limits;
    REQUIRE_OK(shoal_queue_open(s, "jobs", &o, &qs));
    uint32_t free_q = 99, a2b = 99, b2a = 99;
    REQUIRE_OK(shoal_queue_index(qs, "free", &free_q));
    REQUIRE_OK(shoal_queue_index(qs, "a2b", &a2b));
    REQUIRE_OK(shoal_queue_index(qs, "b2a", &b2a));
    CHECK(free_q == 0 && a2b == 1 && b2a == 2);
    uint32_t nope;
    CHECK_RC(shoal_queue_index(qs, "nope", &nope), SHOAL_NOT_FOUND);
    uint64_t len = 0;
    REQUIRE_OK(shoal_queue_len(qs, free_q, &len));
    CHECK(len == 8);

    /* Written in place, seen by whoever pulls it next. */
    shoal_element e;
    REQUIRE_OK(shoal_queue_pull(qs, free_q, 0, &e));
    CHECK(e.len == 100 && e.index == 0 && e.from == free_q && e.redelivered == 0);
    CHECK(((uintptr_t)e.data & 63) == 0);
    memcpy(e.data + 90, "in place", 8);
    REQUIRE_OK(shoal_queue_push(qs, a2b, &e));
    /* Pushed: no longer this process's. */
    CHECK_RC(shoal_queue_push(qs, b2a, &e), SHOAL_INVALID);
    CHECK(msg_names("not held"));
    shoal_element g;
    REQUIRE_OK(shoal_queue_pull(qs, a2b, 1000, &g));
    CHECK(g.index == 0 && g.from == a2b && memcmp(g.data + 90, "in place", 8) == 0);
    REQUIRE_OK(shoal_queue_release(qs, &g));
    REQUIRE_OK(shoal_queue_len(qs, a2b, &len));
    CHECK(len == 1);

    /* Batches, and a depth limit that refuses a whole batch, which stays held. */
    shoal_element batch[8];
    size_t got = 0;
    REQUIRE_OK(shoal_queue_pull_many(qs, free_q, batch, 8, &got));
    CHECK(got == 7);
    CHECK_RC(shoal_queue_push_many(qs, b2a, batch, 3), SHOAL_QUEUE_FULL);
    REQUIRE_OK(shoal_queue_push_many(qs, b2a, batch, 2));
    CHECK_RC(shoal_queue_push(qs, b2a, &batch[2]), SHOAL_QUEUE_FULL);
    shoal_element twice[2] = {batch[2], batch[2]};
    CHECK_RC(shoal_queue_push_many(qs, a2b, twice, 2), SHOAL_INVALID);
    REQUIRE_OK(shoal_queue_push_many(qs, free_q, batch + 2, 5));
    size_t moved = 0;
    REQUIRE_OK(shoal_queue_move(qs, free_q, b2a, 10, &moved));
    CHECK(moved == 0); /* b2a is at its limit */
    REQUIRE_OK(shoal_queue_move(qs, b2a, a2b, 10, &moved));
    CHECK(moved == 2);
    CHECK_RC(shoal_queue_move(qs, a2b, a2b, 1, &moved), SHOAL_INVALID);

    /* An empty queue: at once, and after a wait. */
    CHECK_RC(shoal_queue_pull(qs, b2a, 0, &e), SHOAL_EMPTY);
    CHECK_RC(shoal_queue_pull(qs, b2a, 30, &e), SHOAL_EMPTY);
    CHECK_RC(shoal_queue_pull(qs, 7, 0, &e), SHOAL_INVALID);
    CHECK_RC(shoal_queue_pull(NULL, 0, 0, &e), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_queue_pull(qs, 0, 0, NULL), SHOAL_NULL_POINTER);
    uint64_t back = 99;
    REQUIRE_OK(shoal_queue_reclaim(qs, &back));
    CHECK(back == 0);

    /* Geometry, names, figures, holders. */
    shoal_queue_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    REQUIRE_OK(shoal_queue_get_info(qs, &info));
    CHECK(info.struct_size == sizeof info && info.element_size == 100 && info.elements == 8 &&
          info.queues == 3);
    char qname[8];
    size_t qlen = 0;
    REQUIRE_OK(shoal_queue_name(qs, b2a, qname, sizeof qname, &qlen));
    CHECK(qlen == 3 && strcmp(qname, "b2a") == 0);
    CHECK_RC(shoal_queue_name(qs, b2a, qname, 3, &qlen), SHOAL_BUFFER_TOO_SMALL);
    CHECK(qlen == 3);
    CHECK_RC(shoal_queue_name(qs, 3, qname, sizeof qname, &qlen), SHOAL_INVALID);
    shoal_queue_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    REQUIRE_OK(shoal_queue_get_stats(qs, b2a, &st));
    /* b2a: 2 pushed by push_many, 2 moved out to a2b; limit 2; 30 ms of waiting above. */
    CHECK(st.len == 0 && st.limit == 2 && st.pushes == 2 && st.pulls == 2 && st.waits >= 1);
    st.struct_size = 0;
    CHECK_RC(shoal_queue_get_stats(qs, b2a, &st), SHOAL_INVALID);
    shoal_element h1;
    REQUIRE_OK(shoal_queue_pull(qs, a2b, 0, &h1));
    shoal_queue_holder holders[2];
    size_t nh = 99;
    REQUIRE_OK(shoal_queue_holders(qs, holders, 2, &nh));
    CHECK(nh == 1 && holders[0].pid == (uint32_t)getpid() && holders[0].elements == 1);
    CHECK_RC(shoal_queue_holders(qs, NULL, 0, &nh), SHOAL_BUFFER_TOO_SMALL);
    CHECK(nh == 1);
    REQUIRE_OK(shoal_queue_release(qs, &h1));

    /* pull_any: the first non-empty queue in the order given, and which one it was. */
    const uint32_t order[] = {b2a, a2b, free_q};
    shoal_element any;
    REQUIRE_OK(shoal_queue_pull_any(qs, order, 3, 0, &any));
    CHECK(any.from == a2b);
    REQUIRE_OK(shoal_queue_push(qs, b2a, &any));
    REQUIRE_OK(shoal_queue_pull_any(qs, order, 3, 0, &any));
    CHECK(any.from == b2a);
    REQUIRE_OK(shoal_queue_push(qs, a2b, &any));
    const uint32_t only_b2a[] = {b2a};
    CHECK_RC(shoal_queue_pull_any(qs, only_b2a, 1, 20, &any), SHOAL_EMPTY);
    CHECK_RC(shoal_queue_pull_any(qs, order, 0, 0, &any), SHOAL_INVALID);
    const uint32_t bad[] = {b2a, 9};
    CHECK_RC(shoal_queue_pull_any(qs, bad, 2, 0, &any), SHOAL_INVALID);
    CHECK_RC(shoal_queue_pull_any(qs, NULL, 1, 0, &any), SHOAL_NULL_POINTER);

    /* Another handle sees the same set; a map of that name is refused in C's words. */
    shoal_queue *again = NULL;
    REQUIRE_OK(shoal_queue_open(s, "jobs", NULL, &again));
    REQUIRE_OK(shoal_queue_len(again, a2b, &len));
    CHECK(len == 3);
    shoal_map *wrong = NULL;
    CHECK_RC(shoal_map_open(s, "jobs", 0, NULL, &wrong), SHOAL_INVALID);
    CHECK(msg_names("queue set"));
    REQUIRE_OK(shoal_queue_close(again));
    shoal_queue *not_a_set = NULL;
    CHECK_RC(shoal_queue_open(s, "m", NULL, &not_a_set), SHOAL_INVALID);
    CHECK(not_a_set == NULL);
    REQUIRE_OK(shoal_queue_close(qs));
    CHECK_RC(shoal_queue_close(NULL), SHOAL_OK);
    shoal_map_close(m);
    shoal_store_close(s);
}

/* ---- logs ------------------------------------------------------------------------- */

struct log_seen {
    int n;
    uint64_t seq;
    uint8_t level;
    char msg[64];
    size_t n_fields;
    char field[32];
};

static void log_cb(void *ctx, const shoal_log_record *r) {
    struct log_seen *s = (struct log_seen *)ctx;
    s->n++;
    s->seq = r->seq;
    s->level = r->level;
    size_t n = r->message_len < sizeof s->msg - 1 ? r->message_len : sizeof s->msg - 1;
    memcpy(s->msg, r->message, n);
    s->msg[n] = 0;
    s->n_fields = r->n_fields;
    s->field[0] = 0;
    if (r->n_fields > 0 && r->fields[0].key_len + r->fields[0].value_len + 2 < sizeof s->field) {
        snprintf(s->field, sizeof s->field, "%.*s=%.*s", (int)r->fields[0].key_len,
                 (const char *)r->fields[0].key, (int)r->fields[0].value_len,
                 (const char *)r->fields[0].value);
    }
}

static void test_log(void) {
    shoal_store *s;
    shoal_map *m;
    if (!fresh("log", &s, &m)) { h_failures++; return; }
    shoal_log *lg = NULL;
    CHECK_RC(shoal_log_open(s, "app", NULL, &lg), SHOAL_NOT_FOUND);
    shoal_log_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.slots = 4;
    o.max_record = 40;
    o.policy = 7;
    CHECK_RC(shoal_log_open(s, "app", &o, &lg), SHOAL_INVALID);
    o.policy = SHOAL_LOG_DROP;
    REQUIRE_OK(shoal_log_open(s, "app", &o, &lg));
    shoal_log_reader *r = NULL;
    REQUIRE_OK(shoal_log_reader_open(lg, "drain", &r));
    uint64_t seq = 99;
    REQUIRE_OK(shoal_log_append(lg, 3, "hello", 5, NULL, 0, 0, &seq));
    CHECK(seq == 0);
    shoal_log_field f = {"path", 4, "/a", 2};
    REQUIRE_OK(shoal_log_append(lg, 4, "req", 3, &f, 1, 0, &seq));
    CHECK(seq == 1);
    REQUIRE_OK(shoal_log_printf(lg, 5, "n=%d %s", 42, "ok"));
    /* A record too large changes nothing. */
    char big[41];
    memset(big, 'x', sizeof big);
    CHECK_RC(shoal_log_append(lg, 1, big, sizeof big, NULL, 0, 0, &seq), SHOAL_INVALID);
    CHECK_RC(shoal_log_printf(lg, 1, "%0600d", 1), SHOAL_INVALID);
    /* The ring holds 4: the fifth is dropped while the reader lags. */
    REQUIRE_OK(shoal_log_append(lg, 6, "four", 4, NULL, 0, 0, &seq));
    CHECK(seq == 3);
    REQUIRE_OK(shoal_log_append(lg, 6, "five", 4, NULL, 0, 0, &seq));
    CHECK(seq == SHOAL_LOG_DROPPED);

    struct log_seen seen;
    memset(&seen, 0, sizeof seen);
    REQUIRE_OK(shoal_log_read(r, 0, log_cb, &seen));
    CHECK(seen.n == 1 && seen.seq == 0 && seen.level == 3 && strcmp(seen.msg, "hello") == 0);
    REQUIRE_OK(shoal_log_read(r, 0, log_cb, &seen));
    CHECK(seen.seq == 1 && seen.n_fields == 1 && strcmp(seen.field, "path=/a") == 0);
    REQUIRE_OK(shoal_log_read(r, 0, log_cb, &seen));
    CHECK(seen.seq == 2 && seen.level == 5 && strcmp(seen.msg, "n=42 ok") == 0);
    REQUIRE_OK(shoal_log_read(r, 0, log_cb, &seen));
    CHECK(seen.seq == 3);
    CHECK_RC(shoal_log_read(r, 0, log_cb, &seen), SHOAL_EMPTY);
    CHECK_RC(shoal_log_read(r, 20, log_cb, &seen), SHOAL_EMPTY);
    CHECK(seen.n == 4);
    CHECK_RC(shoal_log_read(r, 0, NULL, &seen), SHOAL_NULL_POINTER);
    uint64_t pos = 0, missed = 9, skipped = 9;
    REQUIRE_OK(shoal_log_reader_stats(r, &pos, &missed, &skipped));
    CHECK(pos == 4 && missed == 0 && skipped == 0);

    /* A reader opened again resumes at its cursor. */
    shoal_log_reader_close(r);
    REQUIRE_OK(shoal_log_append(lg, 1, "again", 5, NULL, 0, 0, &seq));
    REQUIRE_OK(shoal_log_reader_open(lg, "drain", &r));
    REQUIRE_OK(shoal_log_read(r, 0, log_cb, &seen));
    CHECK(seen.seq == 4 && strcmp(seen.msg, "again") == 0);
    uint32_t removed = 9;
    REQUIRE_OK(shoal_log_remove_reader(lg, "drain", &removed));
    CHECK(removed == 1);
    CHECK_RC(shoal_log_read(r, 0, log_cb, &seen), SHOAL_NOT_FOUND);
    shoal_log_reader_close(r);

    /* A map's name is refused in C's words. */
    shoal_log *bad = NULL;
    CHECK_RC(shoal_log_open(s, "m", &o, &bad), SHOAL_INVALID);
    shoal_log_close(lg);
    shoal_map_close(m);
    shoal_store_close(s);
}

/* ---- a log read in batches ------------------------------------------------------- */

static void test_log_read_batch(void) {
    shoal_store *s;
    shoal_map *m;
    if (!fresh("logbatch", &s, &m)) { h_failures++; return; }
    shoal_log_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.slots = 16;
    o.max_record = 64;
    shoal_log *lg = NULL;
    REQUIRE_OK(shoal_log_open(s, "app", &o, &lg));
    shoal_log_reader *r = NULL;
    REQUIRE_OK(shoal_log_reader_open(lg, "drain", &r));
    shoal_log_record recs[8];
    size_t n = 9;
    CHECK_RC(shoal_log_read_batch(r, 0, recs, 8, &n), SHOAL_EMPTY);
    CHECK(n == 0);
    CHECK_RC(shoal_log_read_batch(r, 20, recs, 8, &n), SHOAL_EMPTY);
    uint64_t seq = 0;
    char msg[32];
    for (int i = 0; i < 5; i++) {
        char v[16];
        snprintf(msg, sizeof msg, "m%d", i);
        snprintf(v, sizeof v, "v%d", i);
        shoal_log_field f[2] = {{"k", 1, v, strlen(v)}, {"i", 1, msg, strlen(msg)}};
        REQUIRE_OK(shoal_log_append(lg, (uint8_t)(i + 1), msg, strlen(msg), f,
                                    (size_t)(i % 3), 0, &seq));
    }
    REQUIRE_OK(shoal_log_append(lg, 9, "", 0, NULL, 0, 0, &seq));
    /* At most 3: the first three, each with its own fields, all valid together. */
    REQUIRE_OK(shoal_log_read_batch(r, 0, recs, 3, &n));
    CHECK(n == 3);
    for (size_t i = 0; i < n; i++) {
        snprintf(msg, sizeof msg, "m%zu", i);
        CHECK(recs[i].seq == i && recs[i].level == i + 1 && recs[i].pid == (uint32_t)getpid());
        CHECK(recs[i].message_len == strlen(msg) &&
              memcmp(recs[i].message, msg, recs[i].message_len) == 0);
        CHECK(recs[i].n_fields == i % 3);
        CHECK((recs[i].n_fields == 0) == (recs[i].fields == NULL));
    }
    CHECK(recs[1].fields[0].key_len == 1 && memcmp(recs[1].fields[0].value, "v1", 2) == 0);
    CHECK(recs[2].fields[1].value_len == 2 && memcmp(recs[2].fields[1].value, "m2", 2) == 0);
    CHECK(memcmp(recs[2].fields[0].value, "v2", 2) == 0);
    /* The rest, fewer than asked; the empty message is NULL. */
    REQUIRE_OK(shoal_log_read_batch(r, 10, recs, 8, &n));
    CHECK(n == 3 && recs[0].seq == 3 && recs[2].seq == 5);
    CHECK(recs[0].n_fields == 0 && recs[0].fields == NULL);
    CHECK(recs[1].n_fields == 1 && memcmp(recs[1].fields[0].value, "v4", 2) == 0);
    CHECK(recs[2].message_len == 0 && recs[2].message == NULL && recs[2].level == 9);
    CHECK_RC(shoal_log_read_batch(r, 0, recs, 8, &n), SHOAL_EMPTY);
    uint64_t pos = 0;
    REQUIRE_OK(shoal_log_reader_stats(r, &pos, NULL, NULL));
    CHECK(pos == 6);
    /* Bad input, in C's words. */
    CHECK_RC(shoal_log_read_batch(r, 0, recs, 0, &n), SHOAL_INVALID);
    CHECK_RC(shoal_log_read_batch(r, 0, NULL, 8, &n), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_log_read_batch(r, 0, recs, 8, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_log_read_batch(NULL, 0, recs, 8, &n), SHOAL_NULL_POINTER);
    /* A removed reader. */
    REQUIRE_OK(shoal_log_remove_reader(lg, "drain", NULL));
    CHECK_RC(shoal_log_read_batch(r, 0, recs, 8, &n), SHOAL_NOT_FOUND);
    shoal_log_reader_close(r);
    shoal_log_close(lg);
    shoal_map_close(m);
    shoal_store_close(s);
}

/* ---- a log's drainer -------------------------------------------------------------- */

struct drain_seen {
    int n;
    uint64_t next;
    int in_order;
};

static void drain_cb(void *ctx, const shoal_log_record *r) {
    struct drain_seen *d = (struct drain_seen *)ctx;
    if (r->seq != d->next) d->in_order = 0;
    d->next = r->seq + 1;
    d->n++;
}

/* The whole of a small file (at most 4 KiB) into buf; its length, or -1 if absent. */
static long slurp(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = 0;
    return (long)n;
}

/* A drainer thread started by one call: a file rotated by size, a callback with its own
 * cursor, a restart that resumes at the cursor, and the errors. */
static void test_log_drainer(void) {
    shoal_store *s;
    if (!fresh("logdrain", &s, NULL)) { h_failures++; return; }
    shoal_log_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.slots = 256;
    o.max_record = 64;
    shoal_log *lg = NULL;
    REQUIRE_OK(shoal_log_open(s, "app", &o, &lg));
    char path[512], p1[530], p2[530], p3[530], buf[4096];
    tpath(path, sizeof path, "drain.log");
    snprintf(p1, sizeof p1, "%s.1", path);
    snprintf(p2, sizeof p2, "%s.2", path);
    snprintf(p3, sizeof p3, "%s.3", path);
    remove(path), remove(p1), remove(p2), remove(p3);

    shoal_log_drain_options d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.path = path;
    d.rotate_bytes = 300; /* four lines of about 60 bytes */
    d.keep = 2;
    shoal_log_drainer *dr = NULL;
    REQUIRE_OK(shoal_log_drainer_start(lg, &d, NULL, NULL, &dr));
    for (int i = 0; i < 20; i++) REQUIRE_OK(shoal_log_printf(lg, 6, "line %02d", i));
    uint64_t n = 0;
    /* The stop writes what was published. */
    REQUIRE_OK(shoal_log_drainer_stop(dr, &n));
    CHECK(n == 20);
    long len = slurp(path, buf, sizeof buf);
    CHECK(len > 0 && len <= 300);
    CHECK(len > 0 && strstr(buf, " 6 line 19\n") != NULL);
    CHECK(slurp(p1, buf, sizeof buf) > 0 && slurp(p2, buf, sizeof buf) > 0);
    CHECK(slurp(p3, buf, sizeof buf) == -1);

    /* A callback, through a cursor of its own: every record, in order. */
    struct drain_seen seen = {0, 0, 1};
    shoal_log_drain_options c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    c.cursor = "cb";
    REQUIRE_OK(shoal_log_drainer_start(lg, &c, drain_cb, &seen, &dr));
    REQUIRE_OK(shoal_log_printf(lg, 6, "more"));
    REQUIRE_OK(shoal_log_drainer_stop(dr, &n));
    CHECK(n == 21 && seen.n == 21 && seen.in_order && seen.next == 21);

    /* The file's drainer started again resumes at its cursor: only the new records. */
    d.format = SHOAL_LOG_FORMAT_JSON;
    REQUIRE_OK(shoal_log_drainer_start(lg, &d, NULL, NULL, &dr));
    REQUIRE_OK(shoal_log_printf(lg, 3, "json"));
    REQUIRE_OK(shoal_log_drainer_stop(dr, &n));
    CHECK(n == 2);
    CHECK(slurp(path, buf, sizeof buf) > 0 && strstr(buf, "{\"seq\":21,") != NULL &&
          strstr(buf, "\"message\":\"json\"") != NULL);

    /* Errors: a file and a callback, an unknown format, a file that cannot be opened. */
    dr = (shoal_log_drainer *)1;
    CHECK_RC(shoal_log_drainer_start(lg, &d, drain_cb, &seen, &dr), SHOAL_INVALID);
    CHECK(dr == NULL);
    d.format = 9;
    d.path = NULL;
    CHECK_RC(shoal_log_drainer_start(lg, &d, NULL, NULL, &dr), SHOAL_INVALID);
    d.format = 0;
    d.path = "/nonexistent-dir/x.log";
    CHECK_RC(shoal_log_drainer_start(lg, &d, NULL, NULL, &dr), SHOAL_IO);
    CHECK_RC(shoal_log_drainer_start(NULL, &d, NULL, NULL, &dr), SHOAL_NULL_POINTER);
    REQUIRE_OK(shoal_log_drainer_stop(NULL, NULL));
    remove(path), remove(p1), remove(p2);
    shoal_log_close(lg);
    shoal_store_close(s);
}

/* Key and value types recorded at creation: read back by every handle, a conflicting
 * one refused, bad codes and tags refused, a number type only for 8-byte fixed cells. */
static void test_types(void) {
    shoal_store *s;
    shoal_map *m;
    if (!fresh("types", &s, &m)) { h_failures++; return; }
    uint32_t kt = 99, vt = 99;
    uint64_t ktag = 99, vtag = 99;
    CHECK_RC(shoal_map_types(m, &kt, &ktag, &vt, &vtag), SHOAL_OK);
    CHECK(kt == SHOAL_TYPE_NONE && vt == SHOAL_TYPE_NONE && ktag == 0 && vtag == 0);
    CHECK_RC(shoal_map_types(NULL, &kt, NULL, NULL, NULL), SHOAL_NULL_POINTER);

    shoal_map_options mo;
    memset(&mo, 0, sizeof mo);
    mo.struct_size = sizeof mo;
    mo.key_type = SHOAL_TYPE_UTF8;
    mo.value_type = SHOAL_TYPE_USER;
    mo.value_tag = 0xfeedULL;
    shoal_map *t = NULL;
    REQUIRE_OK(shoal_map_open(s, "typed", SHOAL_MAP_CREATE, &mo, &t));
    CHECK_RC(shoal_map_types(t, &kt, &ktag, &vt, &vtag), SHOAL_OK);
    CHECK(kt == SHOAL_TYPE_UTF8 && ktag == 0 && vt == SHOAL_TYPE_USER && vtag == 0xfeedULL);
    shoal_map *again = NULL;
    REQUIRE_OK(shoal_map_open(s, "typed", 0, NULL, &again));
    CHECK_RC(shoal_map_types(again, &kt, NULL, &vt, NULL), SHOAL_OK);
    CHECK(kt == SHOAL_TYPE_UTF8 && vt == SHOAL_TYPE_USER);
    shoal_map_close(again);
    mo.value_type = SHOAL_TYPE_JSON;
    mo.value_tag = 0;
    CHECK_RC(shoal_map_open(s, "typed", SHOAL_MAP_CREATE, &mo, &again), SHOAL_INVALID);
    CHECK(strstr(shoal_last_error_message(), "values as user:0xfeed, not json") != NULL);
    mo.value_type = 8;
    CHECK_RC(shoal_map_open(s, "other", SHOAL_MAP_CREATE, &mo, &again), SHOAL_INVALID);
    CHECK(strstr(shoal_last_error_message(), "value_type") != NULL);
    mo.value_type = SHOAL_TYPE_BYTES;
    mo.value_tag = 1;
    CHECK_RC(shoal_map_open(s, "other", SHOAL_MAP_CREATE, &mo, &again), SHOAL_INVALID);
    CHECK(strstr(shoal_last_error_message(), "value_tag") != NULL);

    shoal_fixed_options fo;
    memset(&fo, 0, sizeof fo);
    fo.struct_size = sizeof fo;
    fo.key_type = SHOAL_TYPE_U64;
    fo.value_type = SHOAL_TYPE_F64;
    shoal_fixed *f = NULL;
    REQUIRE_OK(shoal_fixed_open_with(s, "counts", 8, 8, SHOAL_MAP_CREATE, &fo, &f));
    CHECK_RC(shoal_fixed_types(f, &kt, NULL, &vt, NULL), SHOAL_OK);
    CHECK(kt == SHOAL_TYPE_U64 && vt == SHOAL_TYPE_F64);
    shoal_fixed_close(f);
    fo.value_type = SHOAL_TYPE_I64;
    CHECK_RC(shoal_fixed_open_with(s, "wide", 8, 16, SHOAL_MAP_CREATE, &fo, &f), SHOAL_INVALID);
    CHECK(strstr(shoal_last_error_message(), "8 bytes") != NULL);

    /* An old caller's options struct (before the types) records none. */
    struct {
        size_t struct_size;
        uint32_t segment_buckets, stash_buckets, uids, reserved;
    } old = {24, 0, 0, 0, 0};
    shoal_map *om = NULL;
    REQUIRE_OK(shoal_map_open(s, "old", SHOAL_MAP_CREATE, (const shoal_map_options *)&old, &om));
    CHECK_RC(shoal_map_types(om, &kt, NULL, &vt, NULL), SHOAL_OK);
    CHECK(kt == SHOAL_TYPE_NONE && vt == SHOAL_TYPE_NONE);
    shoal_map_close(om);
    shoal_map_close(t);
    shoal_map_close(m);
    shoal_store_close(s);
}

/* Multi-key transactions: a transfer (then list), a failed condition (else list with
 * results per operation), argument errors naming the item, the size limit, and a
 * snapshot of every account. */
struct sumctx {
    int calls, absent;
    int64_t sum;
};
static void on_sum(void *ctx, size_t i, const void *v, size_t len, bool present) {
    (void)i;
    struct sumctx *c = ctx;
    c->calls++;
    if (!present || len != 8) {
        c->absent++;
        return;
    }
    int64_t x;
    memcpy(&x, v, 8);
    c->sum += x;
}

static void test_txn(void) {
    shoal_store *s;
    if (!fresh("txn", &s, NULL)) { h_failures++; return; }
    shoal_fixed *f;
    REQUIRE_OK(shoal_fixed_open(s, "acct", 8, 8, SHOAL_MAP_CREATE, &f));
    uint64_t ka = 1, kb = 2, kc = 3;
    int64_t hundred = 100, five = 5;
    CHECK_RC(shoal_fixed_put(f, &ka, 8, &hundred, 8, NULL), SHOAL_OK);
    CHECK_RC(shoal_fixed_put(f, &kb, 8, &five, 8, NULL), SHOAL_OK);

    /* Transfer 30 from a to b if a holds at least 30. */
    shoal_txn_cond cond = {f, NULL, &ka, 8, SHOAL_TXN_INT, SHOAL_CMP_GE, NULL, 0, 30, 0};
    int64_t olda = 0, oldb = 0;
    shoal_txn_op then_ops[2] = {
        {f, NULL, &ka, 8, SHOAL_TXN_ADD, 7, NULL, 0, -30, &olda, 8, 7, 0, 0},
        {f, NULL, &kb, 8, SHOAL_TXN_ADD, 7, NULL, 0, 30, &oldb, 8, 7, 0, 0},
    };
    bool ok = false;
    CHECK_RC(shoal_txn_commit(s, &cond, 1, then_ops, 2, NULL, 0, &ok), SHOAL_OK);
    CHECK(ok);
    CHECK(then_ops[0].applied == 1 && then_ops[0].old_present == 1 && olda == 100);
    CHECK(then_ops[1].applied == 1 && then_ops[1].old_present == 1 && oldb == 5);
    int64_t got = 0;
    CHECK_RC(shoal_fixed_get(f, &ka, 8, &got, 8), SHOAL_OK);
    CHECK(got == 70);
    CHECK_RC(shoal_fixed_get(f, &kb, 8, &got, 8), SHOAL_OK);
    CHECK(got == 35);

    /* A failed condition runs the else list: an insert of an absent key, a get. */
    cond.operand = 1000;
    int64_t seven = 7, oldc = -1;
    shoal_txn_op else_ops[2] = {
        {f, NULL, &kc, 8, SHOAL_TXN_PUT_IF_ABSENT, 9, &seven, 8, 0, &oldc, 8, 9, 0, 0},
        {f, NULL, &ka, 8, SHOAL_TXN_GET, 9, NULL, 0, 0, &olda, 8, 9, 0, 0},
    };
    then_ops[0].applied = 9;
    CHECK_RC(shoal_txn_commit(s, &cond, 1, then_ops, 2, else_ops, 2, &ok), SHOAL_OK);
    CHECK(!ok);
    CHECK(then_ops[0].applied == 9); /* the other list's results are left alone */
    CHECK(else_ops[0].applied == 1 && else_ops[0].old_present == 0);
    CHECK(else_ops[1].applied == 0 && else_ops[1].old_present == 1 && olda == 70);
    CHECK_RC(shoal_fixed_get(f, &kc, 8, &got, 8), SHOAL_OK);
    CHECK(got == 7);

    /* Errors: NULLs, a wrong key length naming the item, an unknown kind, a key
     * written twice, too large. Nothing changes. */
    CHECK_RC(shoal_txn_commit(NULL, &cond, 1, then_ops, 2, NULL, 0, &ok), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_txn_commit(s, &cond, 1, then_ops, 2, NULL, 0, NULL), SHOAL_NULL_POINTER);
    CHECK_RC(shoal_txn_commit(s, NULL, 1, then_ops, 2, NULL, 0, &ok), SHOAL_NULL_POINTER);
    then_ops[1].key_len = 4;
    CHECK_RC(shoal_txn_commit(s, NULL, 0, then_ops, 2, NULL, 0, &ok), SHOAL_INVALID);
    CHECK(strstr(shoal_last_error_message(), "item 1") != NULL);
    then_ops[1].key_len = 8;
    then_ops[1].kind = 99;
    CHECK_RC(shoal_txn_commit(s, NULL, 0, then_ops, 2, NULL, 0, &ok), SHOAL_INVALID);
    then_ops[1].kind = SHOAL_TXN_ADD;
    then_ops[1].key = &ka;
    CHECK_RC(shoal_txn_commit(s, NULL, 0, then_ops, 2, NULL, 0, &ok), SHOAL_INVALID);
    CHECK(strstr(shoal_last_error_message(), "twice") != NULL);
    then_ops[1].key = &kb;
    enum { BIG = 40 };
    static uint64_t bk[BIG];
    shoal_txn_op big[BIG];
    for (int i = 0; i < BIG; i++) {
        bk[i] = 100 + (uint64_t)i;
        big[i] = (shoal_txn_op){f, NULL, &bk[i], 8, SHOAL_TXN_PUT, 0, &seven, 8, 0, NULL, 0, 0, 0, 0};
    }
    CHECK_RC(shoal_txn_commit(s, NULL, 0, big, BIG, NULL, 0, &ok), SHOAL_INVALID);
    CHECK(strstr(shoal_last_error_message(), "too large") != NULL);
    uint64_t n = 0;
    CHECK_RC(shoal_fixed_len(f, &n), SHOAL_OK);
    CHECK(n == 3);

    /* A snapshot of the accounts: 70 + 35 + 7, one absent key. */
    uint64_t kd = 4;
    const shoal_fixed *maps[4] = {f, f, f, f};
    shoal_bytes keys[4] = {{&ka, 8}, {&kb, 8}, {&kc, 8}, {&kd, 8}};
    struct sumctx c = {0};
    CHECK_RC(shoal_snapshot_get(s, maps, NULL, keys, 4, on_sum, &c), SHOAL_OK);
    CHECK(c.calls == 4 && c.absent == 1 && c.sum == 112);
    CHECK_RC(shoal_snapshot_get(s, maps, NULL, keys, 4, NULL, &c), SHOAL_NULL_POINTER);
    keys[2].len = 3;
    CHECK_RC(shoal_snapshot_get(s, maps, NULL, keys, 4, on_sum, &c), SHOAL_INVALID);
    CHECK(strstr(shoal_last_error_message(), "item 2") != NULL);

    CHECK_RC(shoal_fixed_close(f), SHOAL_OK);
    CHECK_RC(shoal_store_close(s), SHOAL_OK);
}

/* Transactions over a variable-size map with UIDs, mixed with a fixed-size map. */
static void test_txn_var(void) {
    shoal_store *s;
    if (!fresh("txnvar", &s, NULL)) { h_failures++; return; }
    shoal_map_options mo;
    memset(&mo, 0, sizeof mo);
    mo.struct_size = sizeof mo;
    mo.uids = 1;
    shoal_map *v;
    REQUIRE_OK(shoal_map_open(s, "names", SHOAL_MAP_CREATE, &mo, &v));
    shoal_fixed *f;
    REQUIRE_OK(shoal_fixed_open(s, "acct", 8, 8, SHOAL_MAP_CREATE, &f));
    int64_t hundred = 100, zero = 0;
    CHECK_RC(shoal_map_put(v, "alice", 5, &hundred, 8, NULL), SHOAL_OK);
    uint64_t kb = 2;
    CHECK_RC(shoal_fixed_put(f, &kb, 8, &zero, 8, NULL), SHOAL_OK);

    /* A transfer from a variable map's key to a fixed map's, with a condition on each
     * and a long value written beside them; the old values come back. */
    shoal_txn_cond conds[2] = {
        {NULL, v, "alice", 5, SHOAL_TXN_INT, SHOAL_CMP_GE, NULL, 0, 40, 0},
        {f, NULL, &kb, 8, SHOAL_TXN_PRESENT, 0, NULL, 0, 0, 0},
    };
    char note[300];
    memset(note, 'n', sizeof note);
    int64_t olda = 0, oldb = -1;
    char oldn[400];
    shoal_txn_op ops[3] = {
        {NULL, v, "alice", 5, SHOAL_TXN_ADD, 7, NULL, 0, -40, &olda, 8, 7, 0, 99},
        {f, NULL, &kb, 8, SHOAL_TXN_ADD, 7, NULL, 0, 40, &oldb, 8, 7, 0, 99},
        {NULL, v, "note", 4, SHOAL_TXN_PUT, 7, note, sizeof note, 0, oldn, sizeof oldn, 7, 0, 99},
    };
    bool ok = false;
    CHECK_RC(shoal_txn_commit(s, conds, 2, ops, 3, NULL, 0, &ok), SHOAL_OK);
    CHECK(ok);
    CHECK(ops[0].applied == 1 && ops[0].old_present == 1 && ops[0].old_len == 8 && olda == 100);
    CHECK(ops[1].applied == 1 && ops[1].old_present == 1 && ops[1].old_len == 8 && oldb == 0);
    CHECK(ops[2].applied == 1 && ops[2].old_present == 0 && ops[2].old_len == 0);
    int64_t got = 0;
    size_t len = 0;
    CHECK_RC(shoal_map_get(v, "alice", 5, &got, 8, &len), SHOAL_OK);
    CHECK(got == 60 && len == 8);
    CHECK_RC(shoal_fixed_get(f, &kb, 8, &got, 8), SHOAL_OK);
    CHECK(got == 40);

    /* The version condition: holds with the key's current version, fails with another. */
    uint64_t ver = 0;
    CHECK_RC(shoal_map_version(v, "alice", 5, &ver), SHOAL_OK);
    CHECK_RC(shoal_map_version(v, "nobody", 6, &ver), SHOAL_NOT_FOUND);
    CHECK_RC(shoal_map_version(v, "alice", 5, &ver), SHOAL_OK);
    shoal_txn_cond vc = {NULL, v, "alice", 5, SHOAL_TXN_VERSION, 0, NULL, 0, 0, ver};
    shoal_txn_op put1 = {NULL, v, "alice", 5, SHOAL_TXN_PUT, 0, &zero, 8, 0, NULL, 0, 0, 0, 0};
    CHECK_RC(shoal_txn_commit(s, &vc, 1, &put1, 1, NULL, 0, &ok), SHOAL_OK);
    CHECK(ok);
    CHECK_RC(shoal_txn_commit(s, &vc, 1, &put1, 1, NULL, 0, &ok), SHOAL_OK);
    CHECK(!ok); /* the put moved the version */
    /* ... and is refused on a fixed map (no UIDs). */
    shoal_txn_cond fvc = {f, NULL, &kb, 8, SHOAL_TXN_VERSION, 0, NULL, 0, 0, 1};
    CHECK_RC(shoal_txn_commit(s, &fvc, 1, &put1, 1, NULL, 0, &ok), SHOAL_INVALID);

    /* An old value longer than old_cap: the transaction commits, old_len says how long,
     * nothing is copied, and the status says so. */
    char small[16];
    memset(small, 'x', sizeof small);
    shoal_txn_op get = {NULL, v, "note", 4, SHOAL_TXN_PUT, 0, "short", 5, 0, small, sizeof small, 0, 0, 0};
    CHECK_RC(shoal_txn_commit(s, NULL, 0, &get, 1, NULL, 0, &ok), SHOAL_BUFFER_TOO_SMALL);
    CHECK(ok && get.applied == 1 && get.old_present == 1 && get.old_len == sizeof note);
    CHECK(small[0] == 'x');
    CHECK(strstr(shoal_last_error_message(), "committed") != NULL);
    char buf[16];
    CHECK_RC(shoal_map_get(v, "note", 4, buf, sizeof buf, &len), SHOAL_OK);
    CHECK(len == 5 && memcmp(buf, "short", 5) == 0);

    /* Errors, nothing changed: neither map nor both, a fixed map's old_cap too small. */
    shoal_txn_op bad = {NULL, NULL, "alice", 5, SHOAL_TXN_ADD, 0, NULL, 0, 1, NULL, 0, 0, 0, 0};
    CHECK_RC(shoal_txn_commit(s, NULL, 0, &bad, 1, NULL, 0, &ok), SHOAL_NULL_POINTER);
    bad.map = f;
    bad.vmap = v;
    CHECK_RC(shoal_txn_commit(s, NULL, 0, &bad, 1, NULL, 0, &ok), SHOAL_INVALID);
    CHECK(strstr(shoal_last_error_message(), "item 0") != NULL);
    shoal_txn_op fsmall = {f, NULL, &kb, 8, SHOAL_TXN_ADD, 0, NULL, 0, 1, small, 4, 0, 0, 0};
    CHECK_RC(shoal_txn_commit(s, NULL, 0, &fsmall, 1, NULL, 0, &ok), SHOAL_INVALID);
    CHECK_RC(shoal_fixed_get(f, &kb, 8, &got, 8), SHOAL_OK);
    CHECK(got == 40);

    /* A snapshot over both kinds: 0 + 40, and an absent key. */
    const shoal_fixed *fm[3] = {NULL, f, NULL};
    const shoal_map *vm[3] = {v, NULL, v};
    shoal_bytes keys[3] = {{"alice", 5}, {&kb, 8}, {"bob", 3}};
    struct sumctx c = {0};
    CHECK_RC(shoal_snapshot_get(s, fm, vm, keys, 3, on_sum, &c), SHOAL_OK);
    CHECK(c.calls == 3 && c.absent == 1 && c.sum == 40);
    vm[1] = v; /* both given */
    CHECK_RC(shoal_snapshot_get(s, fm, vm, keys, 3, on_sum, &c), SHOAL_INVALID);
    CHECK(strstr(shoal_last_error_message(), "item 1") != NULL);
    CHECK_RC(shoal_snapshot_get(s, NULL, NULL, keys, 3, on_sum, &c), SHOAL_NULL_POINTER);
    /* Only variable maps: the fixed array may be NULL. */
    const shoal_map *vonly[2] = {v, v};
    shoal_bytes vkeys[2] = {{"alice", 5}, {"note", 4}};
    struct sumctx c2 = {0};
    CHECK_RC(shoal_snapshot_get(s, NULL, vonly, vkeys, 2, on_sum, &c2), SHOAL_OK);
    CHECK(c2.calls == 2 && c2.absent == 1 && c2.sum == 0); /* "short" is not 8 bytes */

    CHECK_RC(shoal_fixed_close(f), SHOAL_OK);
    CHECK_RC(shoal_map_close(v), SHOAL_OK);
    CHECK_RC(shoal_store_close(s), SHOAL_OK);
}

int main(void) {
    const char *base = getenv("SHOAL_TEST_DIR");
    snprintf(g_dir, sizeof g_dir, "%s/shoal-ctest-XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 2;
    }
    RUN(test_strerror_and_version);
    RUN(test_last_error_message_and_panic);
    RUN(test_store_open_modes_and_options);
    RUN(test_store_bad_files);
    RUN(test_store_permission);
    RUN(test_store_read_only);
    RUN(test_store_destroy_and_path);
    RUN(test_store_backup_idle);
    RUN(test_store_backup);
    RUN(test_store_maps_and_drop);
    RUN(test_store_stats_compact);
    RUN(test_store_check);
    RUN(test_map_open_close_name);
    RUN(test_types);
    RUN(test_map_get_put_buffers);
    RUN(test_map_get_cb_and_take);
    RUN(test_map_insert_replace_remove_contains);
    RUN(test_former_names);
    RUN(test_batches_name_the_item);
    RUN(test_map_len_clear_stats);
    RUN(test_map_for_each);
    RUN(test_iter);
    RUN(test_map_swap_cas_add);
    RUN(test_map_update_get_or_insert);
    RUN(test_map_uids);
    RUN(test_map_batches);
    RUN(test_map_with_timeout);
    RUN(test_fixed_open_kind);
    RUN(test_fixed_ops);
    RUN(test_fixed_iter_stats);
    RUN(test_fixed_open_with_options);
    RUN(test_fixed_update);
    RUN(test_fixed_batches);
    RUN(test_fixed_with_timeout);
    RUN(test_txn);
    RUN(test_txn_var);
    RUN(test_store_flush_repair_durability_options);
    RUN(test_store_needs_repair);
    RUN(test_batch);
    RUN(test_full);
    RUN(test_no_space);
    RUN(test_too_many);
    RUN(test_timeout);
    RUN(test_threads_share_handles);
    RUN(test_fork_child_uses_handles);
    RUN(test_queue);
    RUN(test_log);
    RUN(test_log_read_batch);
    RUN(test_log_drainer);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    return finish();
}
