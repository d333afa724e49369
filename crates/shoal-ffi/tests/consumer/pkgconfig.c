/* Built with `cc pkgconfig.c $(pkg-config --cflags --libs shoal)` against an installed
 * Shoal by scripts/test-c.sh. */
#include <shoal.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    shoal_store *s = NULL;
    shoal_map *m = NULL;
    if (shoal_store_open("/tmp/shoal-pkgconfig-consumer.shoal", NULL, &s) != SHOAL_OK) return 1;
    if (shoal_map_open(s, "m", SHOAL_MAP_CREATE, NULL, &m) != SHOAL_OK) return 1;
    char buf[8];
    size_t len = 0;
    if (shoal_map_put(m, "k", 1, "v", 1, NULL) != SHOAL_OK) return 1;
    if (shoal_map_get(m, "k", 1, buf, sizeof buf, &len) != SHOAL_OK || len != 1 || buf[0] != 'v')
        return 1;
    shoal_map_close(m);
    shoal_store_close(s);
    shoal_store_destroy("/tmp/shoal-pkgconfig-consumer.shoal");
    printf("pkg-config consumer ok (libshoal %s)\n", shoal_version());
    return 0;
}
