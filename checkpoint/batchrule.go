package checkpoint

import "github.com/vgpusim/vgpusim/memory"

// PagesPerBatch is the batch-cutting rule of every writer of page batches:
// a batch holds as many pages of one region as fit in batchBytes raw
// bytes, and at least one, so that a page larger than a batch still goes
// alone. Writer, the migration's copy engine and its model of the wire
// all cut batches by it.
func PagesPerBatch(batchBytes, pageSize int) int {
	if pageSize <= 0 {
		return 1
	}
	return max(1, batchBytes/pageSize)
}

// Batches is how many batches PagesPerBatch cuts pages pages of pageSize
// bytes into.
func Batches(pages int64, batchBytes, pageSize int) int64 {
	per := int64(PagesPerBatch(batchBytes, pageSize))
	return (max(pages, 0) + per - 1) / per
}

// LimitsForBatch returns DefaultLimits widened to admit batches of
// batchBytes raw bytes: the record that carries one compressed or not,
// and its pages at the smallest page size. A destination that knows the
// batch size a source writes reads its stream with them.
func LimitsForBatch(batchBytes int) Limits {
	l := DefaultLimits()
	l.MaxBatchBytes = max(l.MaxBatchBytes, batchBytes)
	l.MaxRecordBytes = max(l.MaxRecordBytes, batchBytes+batchBytes/8+64<<10)
	l.MaxPagesPerRecord = max(l.MaxPagesPerRecord, batchBytes/memory.MinPageSize)
	return l
}
