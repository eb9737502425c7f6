module github.com/vgpusim/vgpusim

go 1.26

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	golang.org/x/sync v0.24.0 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)
