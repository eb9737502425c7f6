package live

import (
	"testing"

	"github.com/vgpusim/vgpusim/checkpoint"
)

// TestReceiveLimits checks that the destination widens each limit left
// zero to the source's batch size and keeps each one set.
func TestReceiveLimits(t *testing.T) {
	const batch = 8 << 20
	for _, tc := range []struct {
		name      string
		user      checkpoint.Limits
		wantBatch int
		wantTotal int64
	}{
		{"none set", checkpoint.Limits{}, batch, checkpoint.DefaultLimits().MaxTotalBytes},
		{"total set", checkpoint.Limits{MaxTotalBytes: 1 << 30}, batch, 1 << 30},
		{"batch set below the source's", checkpoint.Limits{MaxBatchBytes: 1 << 20}, 1 << 20, checkpoint.DefaultLimits().MaxTotalBytes},
	} {
		l := receiveLimits(tc.user, batch)
		if l.MaxBatchBytes != tc.wantBatch || l.MaxTotalBytes != tc.wantTotal {
			t.Errorf("%s: batch %d, total %d; want %d, %d", tc.name, l.MaxBatchBytes, l.MaxTotalBytes, tc.wantBatch, tc.wantTotal)
		}
		if tc.user.MaxRecordBytes == 0 && l.MaxRecordBytes < batch {
			t.Errorf("%s: records of %d bytes cannot carry %d-byte batches", tc.name, l.MaxRecordBytes, batch)
		}
	}
}
