module github.com/vgpusim/vgpusim

go 1.26

require (
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/google/go-cmp v0.7.0
	github.com/klauspost/compress v1.20.3
	pgregory.net/rapid v1.3.0
)
