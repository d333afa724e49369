module example.invalid/shoal/tests/matrix/go

go 1.24

require (
	example.invalid/shoal/bindings/go v0.0.0
	github.com/zeebo/xxh3 v1.1.0
)

require (
	github.com/klauspost/cpuid/v2 v2.2.10 // indirect
	golang.org/x/sys v0.30.0 // indirect
)

replace example.invalid/shoal/bindings/go => ../../../bindings/go
