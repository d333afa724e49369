module example.invalid/shoal/bindings/go/bench

go 1.24

require (
	example.invalid/shoal/bindings/go v0.0.0
	go.etcd.io/bbolt v1.4.3
)

require golang.org/x/sys v0.29.0 // indirect

replace example.invalid/shoal/bindings/go => ../
