/* Linked by hand against the library a plain `cargo build` writes, exactly as
 * crates/shoal-ffi/README.md says (`cc ... -L target/release -lshoal_ffi -Wl,-rpath,...`),
 * by scripts/test-c.sh. Argument: a store path, created and removed. */
#include <shoal.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    shoal_store *s = NULL;
    shoal_map *m = NULL;
    char buf[8];
    size_t len = 0;
    if (shoal_store_open(argv[1], NULL, &s) != SHOAL_OK ||
        shoal_map_open(s, "m", SHOAL_MAP_CREATE, NULL, &m) != SHOAL_OK ||
        shoal_map_put(m, "k", 1, "v", 1, NULL) != SHOAL_OK ||
        shoal_map_get(m, "k", 1, buf, sizeof buf, &len) != SHOAL_OK || len != 1 || buf[0] != 'v') {
        fprintf(stderr, "by_hand: %s\n", shoal_last_error_message());
        return 1;
    }
    shoal_map_close(m);
    shoal_store_close(s);
    shoal_store_destroy(argv[1]);
    printf("linked by hand: ok (libshoal %s)\n", shoal_version());
    return 0;
}
