package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"
)

// Infinity is the return time of an operation whose process was killed before it
// returned: after every other event.
const Infinity = int64(math.MaxInt64)

// Client is one process's parsed log.
type Client struct {
	Name string
	Ops  []porcupine.Operation // the last one may be pending (Return == Infinity)
}

func parseOpt(s string) (int64, bool, error) {
	if s == "-" {
		return 0, false, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, true, err
}

// interned strings: operations and keys then share one copy each, and a log's text
// is not kept alive by them (long runs log millions of operations).
var interned = map[string]string{}

func intern(s string) string {
	if t, ok := interned[s]; ok {
		return t
	}
	s = strings.Clone(s)
	interned[s] = s
	return s
}

func parseCall(f []string) (Input, error) {
	if len(f) < 2 {
		return Input{}, fmt.Errorf("short call")
	}
	in := Input{Op: intern(f[0]), Key: intern(f[1])}
	want := map[string]int{"get": 2, "del": 2, "take": 2, "put": 3, "ins": 3, "rep": 3, "swap": 3, "add": 3, "cas": 4}
	n, ok := want[in.Op]
	if !ok {
		return in, fmt.Errorf("unknown op %q", in.Op)
	}
	if len(f) != n {
		return in, fmt.Errorf("%s takes %d fields, not %d", in.Op, n, len(f))
	}
	var err error
	switch in.Op {
	case "put", "ins", "rep", "swap", "add":
		in.A, err = strconv.ParseInt(f[2], 10, 64)
	case "cas":
		var e2 error
		in.A, in.HasA, err = parseOpt(f[2])
		in.B, in.HasB, e2 = parseOpt(f[3])
		if err == nil {
			err = e2
		}
	}
	return in, err
}

func parseRet(in Input, s string) (Output, error) {
	var out Output
	var err error
	switch in.Op {
	case "get", "swap", "take":
		out.V, out.Ok, err = parseOpt(s)
	case "add":
		out.V, err = strconv.ParseInt(s, 10, 64)
		out.Ok = true
	case "put":
		switch s {
		case "ins":
		case "rep":
			out.Ok = true
		default:
			err = fmt.Errorf("bad put outcome %q", s)
		}
	default:
		switch s {
		case "0":
		case "1":
			out.Ok = true
		default:
			err = fmt.Errorf("bad outcome %q", s)
		}
	}
	return out, err
}

// readToZero reads a file up to its first zero byte: a killed worker's mapped log is
// a large sparse file, zero after what was written.
func readToZero(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var data []byte
	buf := make([]byte, 1<<20)
	for {
		n, err := f.Read(buf)
		if i := bytes.IndexByte(buf[:n], 0); i >= 0 {
			return append(data, buf[:i]...), nil
		}
		data = append(data, buf[:n]...)
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// ParseLog reads one worker log, up to its first zero byte. A last line without its newline (torn by a SIGKILL)
// is ignored: if it was a call, the operation had not started; if a response, the
// operation stays pending, which only weakens what is checked.
func ParseLog(path string, client int) (Client, error) {
	c := Client{Name: filepath.Base(path)}
	data, err := readToZero(path)
	if err != nil {
		return c, err
	}
	text := string(data)
	if i := strings.LastIndexByte(text, '\n'); i+1 != len(text) {
		text = text[:i+1]
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	var cur *porcupine.Operation
	line := 0
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		bad := func(why string, args ...interface{}) error {
			return fmt.Errorf("%s:%d: %q: %s", path, line, sc.Text(), fmt.Sprintf(why, args...))
		}
		if len(f) == 0 {
			return c, bad("empty line")
		}
		switch f[0] {
		case "W":
			if line != 1 {
				return c, bad("W line after the start")
			}
		case "C":
			if cur != nil {
				return c, bad("call while the previous operation is pending")
			}
			if len(f) < 3 {
				return c, bad("short call line")
			}
			t, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return c, bad("bad time: %v", err)
			}
			in, err := parseCall(f[2:])
			if err != nil {
				return c, bad("%v", err)
			}
			if n := len(c.Ops); n > 0 && c.Ops[n-1].Return > t {
				return c, bad("call at %d before the previous response at %d", t, c.Ops[n-1].Return)
			}
			c.Ops = append(c.Ops, porcupine.Operation{ClientId: client, Input: in, Call: t, Output: Output{Unknown: true}, Return: Infinity})
			cur = &c.Ops[len(c.Ops)-1]
		case "R":
			if cur == nil || len(f) != 3 {
				return c, bad("response without a call, or malformed")
			}
			t, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil || t < cur.Call {
				return c, bad("bad response time")
			}
			out, err := parseRet(cur.Input.(Input), f[2])
			if err != nil {
				return c, bad("%v", err)
			}
			cur.Output, cur.Return = out, t
			cur = nil
		default:
			return c, bad("unknown line kind")
		}
	}
	return c, sc.Err()
}

// LoadDir reads every *.lin file of dir, in name order, one client each.
func LoadDir(dir string) ([]Client, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.lin"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var cs []Client
	for i, p := range paths {
		c, err := ParseLog(p, i)
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// History: all operations of all clients. Pending reads are dropped (they change
// nothing and return nothing known).
func History(cs []Client) []porcupine.Operation {
	var h []porcupine.Operation
	for _, c := range cs {
		for _, op := range c.Ops {
			if op.Return == Infinity && op.Input.(Input).Op == "get" {
				continue
			}
			h = append(h, op)
		}
	}
	return h
}
