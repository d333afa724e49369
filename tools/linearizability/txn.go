package main

// The hash-map transaction check (lincheck -txn LOGDIR): histories logged by
// shoal-txn-worker processes (the kill storm of crates/shoal-torture/tests/txn_storm.rs),
// checked for strict serializability as the ordered-map ones are (ordered.go): the
// whole store is one object, every committed transaction one atomic step of it, every
// consistent multi-key read (Store::snapshot_get) one instant of it, each at some point
// between its call and its return. Transfers couple any two accounts, so the history is
// not partitioned: the storm keeps it small (a few accounts, rounds of a few seconds,
// each checked apart from where the last one ended).
//
// Keys are numbered 0..N-1 (-keys N), each starting at -initial or at the value -init
// lists; the worker maps the numbers to accounts of its hash maps. The log is
// LOGDIR/*.tlin, one per process, in ordered.go's format and rules, using these lines:
//
//	C <ns> xfer <from> <to> <amt>   a conditional transaction (Store::transaction): if
//	R <ns> <va> <vb> ok | no        from holds at least amt, move amt to `to` (ok), else
//	                                not (no); va, vb: both balances before it
//	C <ns> opt <from> <to> <amt>    the same transfer, optimistic (Store::optimistic):
//	R <ns> <va> <vb> ok | no        the balances its committed run read
//	C <ns> ver <from> <to> <amt>    the same transfer, watching a version: from's value
//	R <ns> <va> <vb> ok | no        and UID version read, committed only if the version
//	                                is unchanged (Cond::version), else read again
//	C <ns> read <k1,k2,...>         a consistent multi-key read: the values
//	R <ns> <v1,v2,...>
//
// A transaction whose process was killed before its R line may or may not have
// committed (Porcupine's pending operation): if it did, whole, as the state then says.
// The harness adds a final read of every key after every worker stopped (final.tlin).

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// checkTxn runs the hash-map transaction check on LOGDIR and exits with lincheck's
// statuses.
func checkTxn(dir string, timeout, maxWait time.Duration, viz string, keys int, initial uint64, initList string) {
	if keys <= 0 {
		fmt.Fprintln(os.Stderr, "lincheck: -txn needs -keys")
		os.Exit(4)
	}
	init := make([]uint64, keys)
	for i := range init {
		init[i] = initial
	}
	if initList != "" {
		var err error
		init, err = parseInts(initList)
		if err != nil || len(init) != keys {
			fmt.Fprintf(os.Stderr, "lincheck: -init needs %d values, comma-separated\n", keys)
			os.Exit(4)
		}
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.tlin"))
	if err != nil || len(paths) == 0 {
		fmt.Fprintf(os.Stderr, "lincheck: no *.tlin logs in %s\n", dir)
		os.Exit(4)
	}
	checkTransactions("txn", dir, paths, keys, orderedModel(keys, 0, 0, init), timeout, maxWait, viz)
}
