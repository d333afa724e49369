// Command go is the Go worker of the cross-language matrix (scripts/test-matrix.sh
// describes the protocol every language's worker follows), on the Go binding. The golden
// vectors are checked with github.com/zeebo/xxh3.
//
//	go run . STORE LANG LANGS KEYS ADDS VECTORS
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	shoal "example.invalid/shoal/bindings/go"
	"github.com/zeebo/xxh3"
)

// wait bounds every wait for the other workers: far more than a run takes on two busy
// cores, so that only a worker that died or hung reaches it.
const wait = 180 * time.Second

func golden(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Split(line, "\t")
		if len(fields) != 8 {
			return 0, fmt.Errorf("golden vector line %q: 8 fields expected", line)
		}
		var key []byte
		if fields[1] != "-" {
			if key, err = hex.DecodeString(fields[1]); err != nil {
				return 0, err
			}
		}
		seed, err := strconv.ParseUint(fields[0], 0, 64)
		if err != nil {
			return 0, err
		}
		h := xxh3.HashSeed(key, seed)
		got := []uint64{h, h >> 48, h >> 56, ((h >> 32) & 0xffff) * 59 >> 16, ((h >> 16) & 0xffff) % 4, h & 15}
		names := []string{"hash", "tag", "cell tag", "home", "stash", "dir"}
		for i, g := range got {
			want, err := strconv.ParseUint(fields[i+2], 0, 64)
			if err != nil {
				return 0, err
			}
			if g != want {
				return 0, fmt.Errorf("golden vector %d (key %s): %s %#x, want %s", n, fields[1], names[i], g, fields[i+2])
			}
		}
		n++
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, fmt.Errorf("%s: no vectors", path)
	}
	return n, nil
}

func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func varValue(lang string, i uint64) string { return fmt.Sprintf("%s:%d:é€", lang, i) }

func fixedKey(lang string, i uint64) []byte {
	pad := lang
	if len(pad) > 10 {
		pad = pad[:10]
	}
	return []byte(pad + strings.Repeat(".", 10-len(pad)) + fmt.Sprintf("%06d", i))
}

// waitFor polls get until the key is there, for at most wait since start.
func waitFor(start time.Time, what string, get func() ([]byte, error)) ([]byte, error) {
	for {
		v, err := get()
		if err == nil {
			return v, nil
		}
		if !errors.Is(err, shoal.ErrNotFound) {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if time.Since(start) > wait {
			return nil, fmt.Errorf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func run(args []string) error {
	path, lang := args[0], args[1]
	langs := strings.Split(args[2], ",")
	id := -1
	for i, l := range langs {
		if l == lang {
			id = i
		}
	}
	if id < 0 {
		return fmt.Errorf("%s is not in %v", lang, langs)
	}
	keys, err := strconv.ParseUint(args[3], 10, 64)
	if err != nil {
		return err
	}
	adds, err := strconv.ParseUint(args[4], 10, 64)
	if err != nil {
		return err
	}
	vectors, err := golden(args[5])
	if err != nil {
		return err
	}
	start := time.Now()

	s, err := shoal.Open(path, nil)
	if err != nil {
		return err
	}
	defer s.Close()
	t := func(code uint32) shoal.DataType { return shoal.DataType{Code: code} }
	text := &shoal.MapOptions{KeyType: t(shoal.TypeUTF8), ValueType: t(shoal.TypeUTF8)}
	ints := &shoal.FixedOptions{KeyType: t(shoal.TypeU64), ValueType: t(shoal.TypeI64)}
	sync, err := s.Map("mx_sync", text)
	if err != nil {
		return err
	}
	vm, err := s.Map("mx_var", text)
	if err != nil {
		return err
	}
	fixed, err := s.FixedMap("mx_fixed", 16, 8, &shoal.FixedOptions{KeyType: t(shoal.TypeBytes), ValueType: t(shoal.TypeF64)})
	if err != nil {
		return err
	}
	inline, err := s.FixedMap("mx_inline", 8, 8, ints)
	if err != nil {
		return err
	}
	countFixed, err := s.FixedMap("mx_count_fixed", 8, 8, ints)
	if err != nil {
		return err
	}
	countVar, err := s.Map("mx_count_var", &shoal.MapOptions{KeyType: t(shoal.TypeUTF8), ValueType: t(shoal.TypeI64)})
	if err != nil {
		return err
	}
	if k, v, err := inline.Types(); err != nil || k.Code != shoal.TypeU64 || v.Code != shoal.TypeI64 {
		return fmt.Errorf("mx_inline records %v/%v (%v), not u64/i64", k, v, err)
	}

	if err := sync.Put([]byte("ready/"+lang), []byte("1")); err != nil {
		return err
	}
	for _, l := range langs {
		k := []byte("ready/" + l)
		if _, err := waitFor(start, l+" to start ("+string(k)+")", func() ([]byte, error) { return sync.Get(k) }); err != nil {
			return err
		}
	}

	uid := uint64(id)
	for i := uint64(0); i < keys; i++ {
		if err := vm.Put([]byte(fmt.Sprintf("%s/%d", lang, i)), []byte(varValue(lang, i))); err != nil {
			return fmt.Errorf("mx_var put: %w", err)
		}
		if err := fixed.Put(fixedKey(lang, i), le64(math.Float64bits(float64(uid*1000+i)+0.25))); err != nil {
			return fmt.Errorf("mx_fixed put: %w", err)
		}
		if err := inline.Put(le64((uid+1)<<32|i), le64(uint64(-int64(uid*1000+i)-1))); err != nil {
			return fmt.Errorf("mx_inline put: %w", err)
		}
	}
	for r := uint64(0); r < adds; r++ {
		if _, err := countFixed.Add(le64(r%4), 1); err != nil {
			return fmt.Errorf("mx_count_fixed add: %w", err)
		}
		if _, err := countVar.Add([]byte("total"), 1); err != nil {
			return fmt.Errorf("mx_count_var add: %w", err)
		}
	}
	if err := sync.Put([]byte("done/"+lang), []byte("1")); err != nil {
		return err
	}

	checked := 0
	for o, other := range langs {
		oid := uint64(o)
		for i := uint64(0); i < keys; i++ {
			k := []byte(fmt.Sprintf("%s/%d", other, i))
			v, err := waitFor(start, fmt.Sprintf("%s's key %q in mx_var", other, k), func() ([]byte, error) { return vm.Get(k) })
			if err != nil {
				return err
			}
			if string(v) != varValue(other, i) {
				return fmt.Errorf("%s's key %q in mx_var: %q, want %q", other, k, v, varValue(other, i))
			}
			fk := fixedKey(other, i)
			v, err = waitFor(start, fmt.Sprintf("%s's key %q in mx_fixed", other, fk), func() ([]byte, error) { return fixed.Get(fk) })
			if err != nil {
				return err
			}
			if got, want := math.Float64frombits(binary.LittleEndian.Uint64(v)), float64(oid*1000+i)+0.25; got != want {
				return fmt.Errorf("%s's key %q in mx_fixed: %v, want %v", other, fk, got, want)
			}
			ik := (oid+1)<<32 | i
			v, err = waitFor(start, fmt.Sprintf("%s's key %d in mx_inline", other, ik), func() ([]byte, error) { return inline.Get(le64(ik)) })
			if err != nil {
				return err
			}
			if got, want := int64(binary.LittleEndian.Uint64(v)), -int64(oid*1000+i)-1; got != want {
				return fmt.Errorf("%s's key %d in mx_inline: %d, want %d", other, ik, got, want)
			}
			checked += 3
		}
	}

	for _, l := range langs {
		k := []byte("done/" + l)
		if _, err := waitFor(start, l+" to finish ("+string(k)+")", func() ([]byte, error) { return sync.Get(k) }); err != nil {
			return err
		}
	}
	n := uint64(len(langs))
	v, err := countVar.Get([]byte("total"))
	if err != nil {
		return fmt.Errorf("mx_count_var get: %w", err)
	}
	if got := int64(binary.LittleEndian.Uint64(v)); got != int64(n*adds) {
		return fmt.Errorf("mx_count_var \"total\": %d, want %d", got, n*adds)
	}
	for c := uint64(0); c < 4; c++ {
		v, err := countFixed.Get(le64(c))
		if err != nil {
			return fmt.Errorf("mx_count_fixed get: %w", err)
		}
		want := n * (adds / 4)
		if c < adds%4 {
			want += n
		}
		if got := binary.LittleEndian.Uint64(v); got != want {
			return fmt.Errorf("mx_count_fixed key %d: %d, want %d", c, got, want)
		}
	}
	fmt.Printf("matrix %s: ok (%d golden vectors; %d keys of %d languages; counters %d)\n", lang, vectors, checked, n, n*adds)
	return nil
}

func main() {
	if len(os.Args) != 7 {
		fmt.Fprintln(os.Stderr, "usage: go STORE LANG LANGS KEYS ADDS VECTORS")
		os.Exit(2)
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "matrix %s: FAILED: %v\n", os.Args[2], err)
		os.Exit(1)
	}
}
