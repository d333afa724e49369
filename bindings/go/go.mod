module example.invalid/shoal/bindings/go

go 1.24
