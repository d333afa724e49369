/* C helpers of the Go binding: they keep whole loops on the C side so that a batch costs
 * one cgo call, and adapt callbacks whose types cgo cannot express. */
#ifndef SHOAL_GO_HELPERS_H
#define SHOAL_GO_HELPERS_H

#include <stdint.h>
#include <shoal.h>

/* Value lengths of goshoal_*_get_many for an absent key. */
#define GOSHOAL_ABSENT SIZE_MAX

shoal_status goshoal_map_get_many(const shoal_map *map, const unsigned char *keys,
                                  const size_t *key_lens, size_t n, unsigned char *buf,
                                  size_t cap, size_t *lens, size_t *total);
shoal_status goshoal_fixed_get_many(const shoal_fixed *fixed, const unsigned char *keys,
                                    size_t key_size, size_t n, unsigned char *buf,
                                    size_t value_size, unsigned char *present);
shoal_status goshoal_map_update(const shoal_map *map, const void *key, size_t key_len,
                                uintptr_t handle);
shoal_status goshoal_fixed_update(const shoal_fixed *fixed, const void *key, size_t key_len,
                                  uintptr_t handle);
shoal_status goshoal_map_names(const shoal_store *store, uintptr_t handle);
shoal_status goshoal_store_check(const shoal_store *store, uint64_t *problems,
                                 uintptr_t handle);

#endif
