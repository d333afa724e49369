// Package shoal is the Go binding of Shoal, a shared-memory key-value store: named hash
// maps in one memory-mapped file (in /dev/shm by default) that any number of processes,
// written in any of Shoal's languages, read and write at once, directly, without a
// server.
//
// It calls the C ABI (libshoal, header shoal.h) through cgo, and finds both through
// pkg-config under the name "shoal": see the README for building the library and
// pointing PKG_CONFIG_PATH at it.
//
//	store, err := shoal.Open("demo", nil) // /dev/shm/demo.shoal, created if absent
//	if err != nil { ... }
//	defer store.Close()
//	m, err := store.Map("users", nil)
//	if err != nil { ... }
//	defer m.Close()
//	err = m.Put([]byte("alice"), []byte("admin"))
//	v, err := m.Get([]byte("alice"))
//	if errors.Is(err, shoal.ErrNotFound) { ... }
//	n, err := m.Add([]byte("logins"), 1) // atomic across processes
//
// Keys and values are byte slices. The package copies them in and out: a slice it
// returns is the caller's, and a slice passed in may be reused as soon as the call
// returns. Counters (Add) are 8-byte little-endian signed integers, as in every other
// language (docs/FORMAT.md, "Conventions"); [PutInt64] and [Int64] encode and decode
// them.
//
// Every handle ([Store], [Map], [FixedMap], [QueueSet]) may be used by any number of
// goroutines at once, and Close may be called at any time: calls in flight finish
// first, later calls fail with [ErrClosed]. Failures are [*Error] values that match the
// sentinel of their status with [errors.Is].
package shoal
