module github.com/vgpusim/vgpusim

go 1.26.0

require (
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/google/go-cmp v0.7.0
	github.com/klauspost/compress v1.20.3
	golang.org/x/sync v0.24.0
	pgregory.net/rapid v1.3.0
)
