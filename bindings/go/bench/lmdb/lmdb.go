// Package lmdb calls LMDB (liblmdb, Debian's liblmdb-dev) through cgo the way lmdb-go
// does: one cgo call per LMDB function, a read transaction per single lookup
// (Env.View: LockOSThread, mdb_txn_begin, mdb_get, a copy of the value into Go memory,
// mdb_txn_abort), and a write transaction per single put (Env.Update). lmdb-go itself
// is not served by the Go module proxy this project installs from, so the benchmark
// carries these few calls instead; each is what lmdb-go's code makes.
package lmdb

/*
#cgo LDFLAGS: -llmdb
#include <stdlib.h>
#include <lmdb.h>

// The key and value structs live on the C stack: Go passes plain pointers and lengths.
static int go_get(MDB_txn *txn, MDB_dbi dbi, void *k, size_t kn, void **v, size_t *vn) {
	MDB_val key = {kn, k}, val;
	int rc = mdb_get(txn, dbi, &key, &val);
	if (rc == 0) { *v = val.mv_data; *vn = val.mv_size; }
	return rc;
}
static int loop_get(MDB_txn *txn, MDB_dbi dbi, const unsigned char *keys, size_t nkeys, size_t n) {
	for (size_t i = 0; i < n; i++) {
		MDB_val key = {16, (void *)(keys + (i % nkeys) * 16)}, val;
		int rc = mdb_get(txn, dbi, &key, &val);
		if (rc != 0) return rc;
	}
	return 0;
}
static int go_put(MDB_txn *txn, MDB_dbi dbi, void *k, size_t kn, void *v, size_t vn) {
	MDB_val key = {kn, k}, val = {vn, v};
	return mdb_put(txn, dbi, &key, &val, 0);
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// Env is an LMDB environment with its one unnamed database.
type Env struct {
	env *C.MDB_env
	dbi C.MDB_dbi
}

func check(op string, rc C.int) error {
	if rc != 0 {
		return fmt.Errorf("lmdb %s: %s", op, C.GoString(C.mdb_strerror(rc)))
	}
	return nil
}

// Open opens (creating) an environment in dir with MDB_NOSYNC | MDB_WRITEMAP (no
// flushes, as Shoal on tmpfs makes none) and a map of mapSize bytes.
func Open(dir string, mapSize int64) (*Env, error) {
	e := &Env{}
	if err := check("env_create", C.mdb_env_create(&e.env)); err != nil {
		return nil, err
	}
	C.mdb_env_set_mapsize(e.env, C.size_t(mapSize))
	cdir := C.CString(dir)
	defer C.free(unsafe.Pointer(cdir))
	if err := check("env_open", C.mdb_env_open(e.env, cdir, C.MDB_NOSYNC|C.MDB_WRITEMAP|C.MDB_NOMETASYNC, 0o644)); err != nil {
		return nil, err
	}
	var txn *C.MDB_txn
	if err := check("txn_begin", C.mdb_txn_begin(e.env, nil, 0, &txn)); err != nil {
		return nil, err
	}
	if err := check("dbi_open", C.mdb_dbi_open(txn, nil, 0, &e.dbi)); err != nil {
		return nil, err
	}
	return e, check("commit", C.mdb_txn_commit(txn))
}

// Close closes the environment.
func (e *Env) Close() { C.mdb_env_close(e.env) }

// Txn is a transaction.
type Txn struct {
	e   *Env
	txn *C.MDB_txn
}

// Begin starts a transaction (read-only if readOnly); the caller must have locked its
// OS thread, as LMDB ties a transaction to its thread.
func (e *Env) Begin(readOnly bool) (*Txn, error) {
	var flags C.uint
	if readOnly {
		flags = C.MDB_RDONLY
	}
	t := &Txn{e: e}
	return t, check("txn_begin", C.mdb_txn_begin(e.env, nil, flags, &t.txn))
}

// GetRaw returns the value in LMDB's map (valid until the transaction ends), or nil.
func (t *Txn) GetRaw(key []byte) []byte {
	var v unsafe.Pointer
	var n C.size_t
	if C.go_get(t.txn, t.e.dbi, unsafe.Pointer(&key[0]), C.size_t(len(key)), &v, &n) != 0 {
		return nil
	}
	return unsafe.Slice((*byte)(v), int(n))
}

// Put writes an entry.
func (t *Txn) Put(key, value []byte) error {
	return check("put", C.go_put(t.txn, t.e.dbi, unsafe.Pointer(&key[0]), C.size_t(len(key)), unsafe.Pointer(&value[0]), C.size_t(len(value))))
}

// Commit commits the transaction.
func (t *Txn) Commit() error { return check("commit", C.mdb_txn_commit(t.txn)) }

// Abort ends the transaction.
func (t *Txn) Abort() { C.mdb_txn_abort(t.txn) }

// Get is lmdb-go's Env.View(func(txn) { v, err = txn.Get(dbi, key) }): a read
// transaction for one lookup, the value copied into Go memory (lmdb-go's default).
func (e *Env) Get(key []byte) ([]byte, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t, err := e.Begin(true)
	if err != nil {
		return nil, err
	}
	defer t.Abort()
	raw := t.GetRaw(key)
	if raw == nil {
		return nil, fmt.Errorf("lmdb: not found")
	}
	return append([]byte(nil), raw...), nil
}

// Put is lmdb-go's Env.Update(func(txn) { txn.Put(dbi, key, value, 0) }): a write
// transaction for one put.
func (e *Env) Put(key, value []byte) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t, err := e.Begin(false)
	if err != nil {
		return err
	}
	if err := t.Put(key, value); err != nil {
		t.Abort()
		return err
	}
	return t.Commit()
}

// LoopGet makes n lookups of 16-byte keys from one flat array in C, inside this
// transaction: LMDB's cost per get without a cgo call per get.
func (t *Txn) LoopGet(flat []byte, n int) error {
	if rc := C.loop_get(t.txn, t.e.dbi, (*C.uchar)(unsafe.Pointer(&flat[0])), C.size_t(len(flat)/16), C.size_t(n)); rc != 0 {
		return check("loop_get", rc)
	}
	return nil
}
