package shoal

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// The Python binding's interpreter, built by scripts/test-python.sh (which the full
// suite runs before this binding's tests); the test is skipped without it.
func pythonBinding(t *testing.T) string {
	py, _ := filepath.Abs("../python/.venv/bin/python")
	if _, err := os.Stat(py); err != nil {
		t.Skip("bindings/python/.venv not built (scripts/test-python.sh builds it)")
	}
	if err := exec.Command(py, "-c", "import shoal").Run(); err != nil {
		t.Skipf("the Python binding does not import: %v", err)
	}
	return py
}

func runPython(t *testing.T, py, script string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, append([]string{"-c", script}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
}

// Go reads what Python wrote and Python reads what Go wrote, in one store file.
func TestPythonInterop(t *testing.T) {
	py := pythonBinding(t)
	path := storePath(t)
	runPython(t, py, `
import struct, sys, shoal
with shoal.open(sys.argv[1]) as s:
    m = s.map("py")
    for i in range(300):
        m[b"k%d" % i] = bytes([i % 256]) * (i % 70)
    c = s.map("pyctr", value="int")
    c.add(b"hits", 7)
    c.add(b"hits", -2)
    f = s.fixed_map("pyfixed", 8, 8)
    for i in range(100):
        f[struct.pack("<q", i)] = struct.pack("<q", i * i)
`, path)
	s := must[*Store](t)(Open(path, &Options{Mode: ModeOpenExisting}))
	defer s.Close()
	m := must[*Map](t)(s.Map("py", &MapOptions{OpenExisting: true}))
	defer m.Close()
	for i := 0; i < 300; i++ {
		v := must[[]byte](t)(m.Get([]byte(fmt.Sprintf("k%d", i))))
		if !bytes.Equal(v, bytes.Repeat([]byte{byte(i)}, i%70)) {
			t.Fatalf("k%d: %x", i, v)
		}
	}
	c := must[*Map](t)(s.Map("pyctr", &MapOptions{OpenExisting: true}))
	defer c.Close()
	if n := must[int64](t)(c.Add([]byte("hits"), 0)); n != 5 {
		t.Fatalf("Python's counter: %d", n)
	}
	f := must[*FixedMap](t)(s.FixedMap("pyfixed", 8, 8, &FixedOptions{OpenExisting: true}))
	defer f.Close()
	for i := int64(0); i < 100; i++ {
		v := must[[]byte](t)(f.Get(PutInt64(i)))
		if n, _ := Int64(v); n != i*i {
			t.Fatalf("fixed %d: %d", i, n)
		}
	}
	g := must[*Map](t)(s.Map("go", nil))
	defer g.Close()
	for i := 0; i < 300; i++ {
		if err := g.Put([]byte(fmt.Sprintf("g%d", i)), bytes.Repeat([]byte("go"), i)); err != nil {
			t.Fatal(err)
		}
	}
	gc := must[*Map](t)(s.Map("goctr", nil))
	defer gc.Close()
	if _, err := gc.Add([]byte("hits"), 41); err != nil {
		t.Fatal(err)
	}
	runPython(t, py, `
import sys, shoal
with shoal.open(sys.argv[1], create=False) as s:
    g = s.map("go", create=False)
    for i in range(300):
        assert g[b"g%d" % i] == b"go" * i, i
    assert len(g) == 300
    c = s.map("goctr", value="int", create=False)
    assert c[b"hits"] == 41, c[b"hits"]
    assert c.add(b"hits", 1) == 42
`, path)
	if n := must[int64](t)(gc.Add([]byte("hits"), 0)); n != 42 {
		t.Fatalf("after Python's add: %d", n)
	}
}
