package bench

import "runtime"

// LMDB ties a transaction to the OS thread that began it.
func runtimeLock()   { runtime.LockOSThread() }
func runtimeUnlock() { runtime.UnlockOSThread() }
