package shoal

import (
	"fmt"
	"testing"
)

// The per-call cost of the binding on a map in cache: what a call adds to the
// library's own work (cgo transition, thread lock, the handle's guard).
func BenchmarkGetIntoInCache(b *testing.B) {
	s := openStore(b, nil)
	m := openMap(b, s, "micro")
	keys := make([][]byte, 1000)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("key:%012d", i))
		if err := m.Put(keys[i], []byte("value:0123456789")); err != nil {
			b.Fatal(err)
		}
	}
	buf := make([]byte, 64)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := m.GetInto(keys[i%len(keys)], buf); err != nil {
			b.Fatal(err)
		}
	}
}
