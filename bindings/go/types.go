package shoal

/*
#include <shoal.h>
*/
import "C"

import (
	"fmt"
	"runtime"
)

// The codes of [DataType], as FORMAT.md's "Key and value types" numbers them.
const (
	TypeNone  uint32 = C.SHOAL_TYPE_NONE  // no type recorded
	TypeBytes uint32 = C.SHOAL_TYPE_BYTES // opaque bytes
	TypeUTF8  uint32 = C.SHOAL_TYPE_UTF8  // UTF-8 text
	TypeI64   uint32 = C.SHOAL_TYPE_I64   // 8 bytes, two's complement, little-endian
	TypeU64   uint32 = C.SHOAL_TYPE_U64   // 8 bytes, little-endian
	TypeF64   uint32 = C.SHOAL_TYPE_F64   // IEEE 754 binary64, little-endian
	TypeJSON  uint32 = C.SHOAL_TYPE_JSON  // JSON text in UTF-8
	TypeUser  uint32 = C.SHOAL_TYPE_USER  // the application's own, named by Tag
)

// DataType is how a map's keys or values are encoded, recorded when the map is created
// (MapOptions.KeyType and ValueType) so that programs in every language decode them
// alike. The binding stores and returns bytes whatever the type; the type tells the
// caller how to read them. The zero value is "none recorded".
type DataType struct {
	// Code is one of the Type constants; a code above TypeUser was written by a newer
	// library and means bytes to this one.
	Code uint32
	// Tag names the application's encoding when Code is TypeUser; 0 otherwise.
	Tag uint64
}

// String gives the type's name as FORMAT.md and the other bindings spell it: "bytes",
// "utf8", "i64", "u64", "f64", "json", "user:0xTAG", "none", or "unknown:CODE".
func (t DataType) String() string {
	switch t.Code {
	case TypeNone:
		return "none"
	case TypeBytes:
		return "bytes"
	case TypeUTF8:
		return "utf8"
	case TypeI64:
		return "i64"
	case TypeU64:
		return "u64"
	case TypeF64:
		return "f64"
	case TypeJSON:
		return "json"
	case TypeUser:
		return fmt.Sprintf("user:%#x", t.Tag)
	}
	return fmt.Sprintf("unknown:%d", t.Code)
}

// Types returns the key and value types the map recorded when it was created.
func (m *Map) Types() (key, value DataType, err error) {
	const op = "Map.Types"
	if !m.g.acquire() {
		return key, value, closedError(op)
	}
	defer m.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var kc, vc C.uint32_t
	var kt, vt C.uint64_t
	if st := C.shoal_map_types(m.p, &kc, &kt, &vc, &vt); st != C.SHOAL_OK {
		return key, value, statusError(op, st)
	}
	return DataType{uint32(kc), uint64(kt)}, DataType{uint32(vc), uint64(vt)}, nil
}

// Types returns the key and value types the map recorded when it was created.
func (m *FixedMap) Types() (key, value DataType, err error) {
	const op = "FixedMap.Types"
	if !m.g.acquire() {
		return key, value, closedError(op)
	}
	defer m.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var kc, vc C.uint32_t
	var kt, vt C.uint64_t
	if st := C.shoal_fixed_types(m.p, &kc, &kt, &vc, &vt); st != C.SHOAL_OK {
		return key, value, statusError(op, st)
	}
	return DataType{uint32(kc), uint64(kt)}, DataType{uint32(vc), uint64(vt)}, nil
}
