/* Two unrelated processes share a map: the `writer` and `reader` examples, started
 * separately (fork + exec), in both orders. Usage: test_two_procs WRITER READER */
#define _GNU_SOURCE
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

extern char **environ;

static pid_t spawn(const char *exe, const char *store, const char *count) {
    char *argv[] = {(char *)exe, (char *)store, (char *)count, "30", NULL};
    pid_t pid = -1;
    if (posix_spawn(&pid, exe, NULL, NULL, argv, environ) != 0) return -1;
    return pid;
}

static int wait_exit(pid_t pid) {
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static const char *g_writer, *g_reader;
static char g_store[256];

static void reader_started_first(void) {
    shoal_store_destroy(g_store);
    pid_t r = spawn(g_reader, g_store, "20000");
    struct timespec t = {0, 100 * 1000 * 1000};
    nanosleep(&t, NULL); /* the reader is waiting for a store that does not exist yet */
    pid_t w = spawn(g_writer, g_store, "20000");
    CHECK(r > 0 && w > 0);
    CHECK(wait_exit(w) == 0);
    CHECK(wait_exit(r) == 0);
}

static void writer_started_first(void) {
    shoal_store_destroy(g_store);
    pid_t w = spawn(g_writer, g_store, "5000");
    CHECK(w > 0 && wait_exit(w) == 0);
    pid_t r = spawn(g_reader, g_store, "5000");
    CHECK(r > 0 && wait_exit(r) == 0);
    /* And this process, a third one, sees the same entries. */
    shoal_store *s = NULL;
    shoal_map *m = NULL;
    REQUIRE_OK(shoal_store_open(g_store, NULL, &s));
    REQUIRE_OK(shoal_map_open(s, "shared", 0, NULL, &m));
    uint64_t n = 0;
    CHECK_RC(shoal_map_len(m, &n), SHOAL_OK);
    CHECK(n == 5001);
    shoal_map_close(m);
    shoal_store_close(s);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s WRITER READER\n", argv[0]);
        return 2;
    }
    g_writer = argv[1];
    g_reader = argv[2];
    snprintf(g_store, sizeof g_store, "/tmp/shoal-two-procs-%d.shoal", (int)getpid());
    RUN(reader_started_first);
    RUN(writer_started_first);
    shoal_store_destroy(g_store);
    return finish();
}
