package bench

/*
#cgo pkg-config: shoal
#include <stdlib.h>
#include <shoal.h>

// n gets of 16-byte keys from one flat array, in C: the engine's cost per get without
// a cgo call per get.
static int loop_get(const shoal_map *m, const unsigned char *keys, size_t nkeys, size_t n) {
	unsigned char buf[64];
	size_t len;
	for (size_t i = 0; i < n; i++) {
		shoal_status st = shoal_map_get(m, keys + (i % nkeys) * 16, 16, buf, sizeof buf, &len);
		if (st != SHOAL_OK) return st;
	}
	return 0;
}

// The same as a dependent chain: the next key's address depends on the result of the
// get before it, so the CPU cannot start a get's memory accesses before the previous
// get is done, as it cannot across separate calls from Go.
static int loop_get_chain(const shoal_map *m, const unsigned char *keys, size_t nkeys, size_t n) {
	unsigned char buf[64];
	size_t len = 16, j = 0;
	for (size_t i = 0; i < n; i++) {
		j = (j + 1 + (len - 16)) % nkeys;
		shoal_status st = shoal_map_get(m, keys + j * 16, 16, buf, sizeof buf, &len);
		if (st != SHOAL_OK) return st;
		len += buf[0] & 0; // keep the dependency on what the get wrote
	}
	return 0;
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// cShoal is a second, C-level handle on the benchmark's map, for the loop in C.
type cShoal struct {
	store *C.shoal_store
	m     *C.shoal_map
}

func openCShoal(path, name string) (*cShoal, error) {
	c := &cShoal{}
	cpath, cname := C.CString(path), C.CString(name)
	defer C.free(unsafe.Pointer(cpath))
	defer C.free(unsafe.Pointer(cname))
	if st := C.shoal_store_open(cpath, nil, &c.store); st != 0 {
		return nil, fmt.Errorf("shoal_store_open: %d", st)
	}
	if st := C.shoal_map_open(c.store, cname, 0, nil, &c.m); st != 0 {
		return nil, fmt.Errorf("shoal_map_open: %d", st)
	}
	return c, nil
}

func (c *cShoal) loopGet(flat []byte, n int) error {
	if st := C.loop_get(c.m, (*C.uchar)(unsafe.Pointer(&flat[0])), C.size_t(len(flat)/16), C.size_t(n)); st != 0 {
		return fmt.Errorf("loop_get: %d", st)
	}
	return nil
}

func (c *cShoal) loopGetChain(flat []byte, n int) error {
	if st := C.loop_get_chain(c.m, (*C.uchar)(unsafe.Pointer(&flat[0])), C.size_t(len(flat)/16), C.size_t(n)); st != 0 {
		return fmt.Errorf("loop_get_chain: %d", st)
	}
	return nil
}

func (c *cShoal) close() {
	C.shoal_map_close(c.m)
	C.shoal_store_close(c.store)
}

// cgoFloor is one cgo call to a library function that does no work.
func cgoFloor() { C.shoal_uid_to_u32(1) }
