package shoal

import (
	"errors"
	"testing"
)

func TestRecordedTypes(t *testing.T) {
	s := openStore(t, nil)
	utf8, user := DataType{Code: TypeUTF8}, DataType{Code: TypeUser, Tag: 0x2a}
	m, err := s.Map("typed", &MapOptions{KeyType: utf8, ValueType: user})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	again := openMap(t, s, "typed")
	k, v, err := again.Types()
	if err != nil || k != utf8 || v != user {
		t.Fatalf("Types() = %v, %v, %v; want utf8, user:0x2a", k, v, err)
	}
	if v.String() != "user:0x2a" || (DataType{}).String() != "none" {
		t.Fatalf("names: %q, %q", v.String(), DataType{}.String())
	}
	_, err = s.Map("typed", &MapOptions{ValueType: DataType{Code: TypeJSON}})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("a conflicting type: %v, want ErrInvalid", err)
	}
	raw, err := s.Map("typed", &MapOptions{KeyType: DataType{Code: TypeBytes}, ValueType: DataType{Code: TypeBytes}})
	if err != nil {
		t.Fatalf("bytes opens any map: %v", err)
	}
	raw.Close()
	if k, v, _ := openMap(t, s, "plain").Types(); k.Code != TypeNone || v.Code != TypeNone {
		t.Fatalf("a map created without types: %v, %v", k, v)
	}

	f, err := s.FixedMap("counts", 8, 8, &FixedOptions{KeyType: DataType{Code: TypeU64}, ValueType: DataType{Code: TypeI64}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if k, v, err := f.Types(); err != nil || k.Code != TypeU64 || v.Code != TypeI64 {
		t.Fatalf("FixedMap.Types() = %v, %v, %v", k, v, err)
	}
	if _, err := s.FixedMap("wide", 16, 8, &FixedOptions{KeyType: DataType{Code: TypeF64}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("f64 keys of 16 bytes: %v, want ErrInvalid", err)
	}
}
