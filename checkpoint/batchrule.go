package checkpoint

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
