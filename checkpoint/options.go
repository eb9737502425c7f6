package checkpoint

import (
	"fmt"

	"github.com/klauspost/compress/zstd"
	"github.com/vgpusim/vgpusim/memory"
)

// EncryptionMode says whether a writer encrypts and what a reader accepts,
// as Encrypted vMotion's per-VM setting does. A stream runs one way, so
// the two ends agree on a key (or on none) before it starts; the stream
// records the outcome in its header and a reader refuses a stream its mode
// does not accept. FORMAT.md has the table for every pair of modes.
type EncryptionMode uint8

const (
	// EncryptionDisabled: a writer never encrypts; a reader accepts only
	// plaintext streams. It is the zero value.
	EncryptionDisabled EncryptionMode = iota
	// EncryptionOpportunistic: a writer encrypts when it is given a key;
	// a reader accepts plaintext streams, and encrypted ones when it has
	// the key.
	EncryptionOpportunistic
	// EncryptionRequired: a writer must be given a key; a reader must be
	// given a key and accepts only encrypted streams.
	EncryptionRequired
)

// String returns the mode's name.
func (m EncryptionMode) String() string {
	switch m {
	case EncryptionDisabled:
		return "disabled"
	case EncryptionOpportunistic:
		return "opportunistic"
	case EncryptionRequired:
		return "required"
	}
	return fmt.Sprintf("EncryptionMode(%d)", uint8(m))
}

// KeySize is the size of a stream key: AES-256.
const KeySize = 32

// checkKey validates a mode and key pair: the key is KeySize bytes or
// absent, absent with Required is an error, and present with Disabled is
// one too, since a caller who passes a key and gets plaintext has been
// misunderstood.
func checkKey(m EncryptionMode, key []byte) error {
	switch {
	case m > EncryptionRequired:
		return invalid("unknown encryption mode %d", uint8(m))
	case key != nil && len(key) != KeySize:
		return invalid("key is %d bytes, want %d", len(key), KeySize)
	case m == EncryptionRequired && key == nil:
		return invalid("encryption required but no key given")
	case m == EncryptionDisabled && key != nil:
		return invalid("key given but encryption disabled")
	}
	return nil
}

// Level is how a Writer or BatchEncoder compresses page batches: which
// codec, and how hard. The zero value is LevelFastest, which is what the
// copy engine is tuned for.
type Level uint8

const (
	// LevelFastest is zstd's SpeedFastest.
	LevelFastest Level = iota
	// LevelDefault is zstd's SpeedDefault.
	LevelDefault
	// LevelBetter is zstd's SpeedBetterCompression.
	LevelBetter
	// LevelBest is zstd's SpeedBestCompression.
	LevelBest
	// LevelNone does not compress: pages are sent zero or raw.
	LevelNone
	// LevelS2 is klauspost/compress's S2 block encoding at its fastest
	// (s2.Encode): less compression than zstd, in less time. A stream of
	// this level is a version 1.1 stream of codec CodecS2.
	LevelS2

	// maxLevel is the highest level known.
	maxLevel = LevelS2
)

// String returns the level's name.
func (l Level) String() string {
	switch l {
	case LevelFastest:
		return "fastest"
	case LevelDefault:
		return "default"
	case LevelBetter:
		return "better"
	case LevelBest:
		return "best"
	case LevelNone:
		return "none"
	case LevelS2:
		return "s2"
	}
	return fmt.Sprintf("Level(%d)", uint8(l))
}

// valid reports whether l is a known level.
func (l Level) valid() bool { return l <= maxLevel }

// isZstd reports whether l is one of zstd's levels.
func (l Level) isZstd() bool { return l <= LevelBest }

// zstdLevel returns the zstd encoder level of l.
func (l Level) zstdLevel() zstd.EncoderLevel {
	switch l {
	case LevelDefault:
		return zstd.SpeedDefault
	case LevelBetter:
		return zstd.SpeedBetterCompression
	case LevelBest:
		return zstd.SpeedBestCompression
	}
	return zstd.SpeedFastest
}

// Codec returns the codec of level l: the codec a batch encoded at l
// names, and the one the header of a stream written at l declares unless
// the stream is mixed. An unknown level has no codec; it returns
// CodecMixed, which no batch may name.
func (l Level) Codec() Codec {
	switch {
	case l == LevelNone:
		return CodecNone
	case l == LevelS2:
		return CodecS2
	case l.isZstd():
		return CodecZstd
	}
	return CodecMixed
}

// Writer defaults and bounds.
const (
	// DefaultBatchBytes is the raw page bytes a Writer puts in one batch.
	DefaultBatchBytes = 1 << 20
	// MaxBatchBytes bounds WriterOptions.BatchBytes.
	MaxBatchBytes = 64 << 20
)

// WriterOptions configure a Writer or RecordWriter. The zero value writes
// a plaintext stream compressed at LevelFastest in 1 MiB batches.
type WriterOptions struct {
	// StreamID names the stream. The caller chooses it (the package uses
	// no randomness); with encryption it binds every record to this
	// stream.
	StreamID [StreamIDSize]byte
	// Level is the compression level of page batches: of every batch,
	// unless Mixed is set. The stream's header declares its codec
	// (Level.Codec), and the stream may then carry batches of that codec
	// or of none.
	Level Level
	// Mixed declares a stream whose batches may each use any level, as
	// an adaptive writer's do: the header's codec is CodecMixed and each
	// batch's record names its own codec (a version 1.1 stream). Level is
	// then the level of a Writer's batches until Writer.SetLevel changes
	// it.
	Mixed bool
	// BatchBytes is the raw size, in bytes, of the pages (zero pages
	// included) a batch holds: 0 means DefaultBatchBytes; a batch always
	// holds at least one page. A reader's Limits must admit it.
	BatchBytes int
	// Encryption selects authenticated encryption (see EncryptionMode).
	Encryption EncryptionMode
	// Key is the stream's key, KeySize bytes, used for this stream only
	// (the nonces are sequence numbers, which every stream repeats).
	Key []byte
	// Snapshot declares a stream that may carry what a suspend file
	// needs beyond page batches: attachments (Writer.WriteAttachment) and
	// regions as page runs (Writer.WriteRuns, Writer.WriteRegionRuns), the
	// records of version 1.2. The header declares 1.3, whose page runs may
	// name the class of weights under training.
	Snapshot bool
	// Filters declares a stream whose page batches have the layout of
	// version 1.3 (FORMAT.md), which the header then declares: a batch
	// may hold shuffled pages, whose bytes are grouped by significance
	// before compression, and delta pages, sent as the XOR of their
	// content with what the reader holds. Every batch of such a stream
	// has that layout (EncodedBatch.Filtered), and only those. A Writer's
	// own batches shuffle the pages that look like float32 data; delta
	// pages come from a BatchEncoder given a DeltaCache (PageFilters),
	// handed to Writer.WriteBatch.
	Filters bool
}

func (o WriterOptions) withDefaults() (WriterOptions, error) {
	if o.BatchBytes == 0 {
		o.BatchBytes = DefaultBatchBytes
	}
	if o.BatchBytes < 0 || o.BatchBytes > MaxBatchBytes {
		return o, invalid("batch size %d outside [1, %d]", o.BatchBytes, MaxBatchBytes)
	}
	if !o.Level.valid() {
		return o, invalid("unknown level %d", uint8(o.Level))
	}
	if err := checkKey(o.Encryption, o.Key); err != nil {
		return o, err
	}
	return o, nil
}

// codec is the codec the header of a stream written with options o
// declares.
func (o WriterOptions) codec() Codec {
	if o.Mixed {
		return CodecMixed
	}
	return o.Level.Codec()
}

// encrypted reports whether a writer with options o encrypts.
func (o WriterOptions) encrypted() bool { return o.Key != nil && o.Encryption != EncryptionDisabled }

// Limits bound what a Reader accepts and allocates. A zero field takes
// its default; the defaults admit streams written with default
// WriterOptions and bound a reader's memory to a few tens of MiB whatever
// the stream says.
type Limits struct {
	// MaxRecordBytes bounds a record's payload on the wire. Default 8 MiB.
	MaxRecordBytes int
	// MaxBatchBytes bounds the decoded non-zero pages of one batch
	// (pages × page size); it is also the zstd decoder's maximum memory,
	// and the most an S2 block may declare. Default 4 MiB. A batch
	// decoder of a stream with page filters keeps up to three buffers of
	// this size: the frame's pages, the shuffled frame's, and those
	// regrouped.
	MaxBatchBytes int
	// MaxPagesPerRecord bounds the pages of one batch, zero pages
	// included. Default 65536.
	MaxPagesPerRecord int
	// MaxWindowBytes bounds the zstd window a frame may ask for. Default
	// 4 MiB.
	MaxWindowBytes int
	// MaxDeviceStateBytes bounds one device state blob. Default 4 MiB.
	MaxDeviceStateBytes int
	// MaxMetadataBytes bounds the metadata record. Default 64 KiB.
	MaxMetadataBytes int
	// MaxRegions bounds the regions the metadata declares. Default 256.
	MaxRegions int
	// MaxTotalBytes bounds the whole stream. Default 1 TiB.
	MaxTotalBytes int64
	// MaxAttachmentBytes bounds the attachments of a stream, all their
	// parts together, which an Applier holds. Default 64 MiB.
	MaxAttachmentBytes int64
}

// DefaultLimits returns the limits a zero Limits stands for.
func DefaultLimits() Limits {
	return Limits{
		MaxRecordBytes:      8 << 20,
		MaxBatchBytes:       4 << 20,
		MaxPagesPerRecord:   1 << 16,
		MaxWindowBytes:      4 << 20,
		MaxDeviceStateBytes: 4 << 20,
		MaxMetadataBytes:    64 << 10,
		MaxRegions:          256,
		MaxTotalBytes:       1 << 40,
		MaxAttachmentBytes:  64 << 20,
	}
}

// Hard ceilings on Limits, so that a careless configuration cannot make
// the record arithmetic overflow or the zstd decoder's memory unbounded.
const (
	ceilingRecordBytes = 1 << 30
	ceilingPages       = memory.MaxPages
	ceilingRegions     = 1 << 16
	minWindowBytes     = 1 << 10 // zstd's minimum window
)

func (l Limits) withDefaults() (Limits, error) {
	d := DefaultLimits()
	var err error
	// One field at a time, without pointers into l, so that validating
	// limits (on every Reader.Reset) allocates nothing.
	l.MaxRecordBytes, err = limitOrDefault(l.MaxRecordBytes, d.MaxRecordBytes, 64, ceilingRecordBytes, "MaxRecordBytes", err)
	l.MaxBatchBytes, err = limitOrDefault(l.MaxBatchBytes, d.MaxBatchBytes, memory.MinPageSize, ceilingRecordBytes, "MaxBatchBytes", err)
	l.MaxPagesPerRecord, err = limitOrDefault(l.MaxPagesPerRecord, d.MaxPagesPerRecord, 1, ceilingPages, "MaxPagesPerRecord", err)
	l.MaxWindowBytes, err = limitOrDefault(l.MaxWindowBytes, d.MaxWindowBytes, minWindowBytes, ceilingRecordBytes, "MaxWindowBytes", err)
	l.MaxDeviceStateBytes, err = limitOrDefault(l.MaxDeviceStateBytes, d.MaxDeviceStateBytes, 1, ceilingRecordBytes, "MaxDeviceStateBytes", err)
	l.MaxMetadataBytes, err = limitOrDefault(l.MaxMetadataBytes, d.MaxMetadataBytes, 16, ceilingRecordBytes, "MaxMetadataBytes", err)
	l.MaxRegions, err = limitOrDefault(l.MaxRegions, d.MaxRegions, 1, ceilingRegions, "MaxRegions", err)
	if err != nil {
		return l, err
	}
	if l.MaxTotalBytes == 0 {
		l.MaxTotalBytes = d.MaxTotalBytes
	}
	if l.MaxTotalBytes < headerSizeV1 {
		return l, invalid("MaxTotalBytes %d below a header", l.MaxTotalBytes)
	}
	if l.MaxAttachmentBytes == 0 {
		l.MaxAttachmentBytes = d.MaxAttachmentBytes
	}
	if l.MaxAttachmentBytes < 0 {
		return l, invalid("MaxAttachmentBytes %d negative", l.MaxAttachmentBytes)
	}
	return l, nil
}

// limitOrDefault returns v, or def if v is zero, and an error if it is
// outside [lo, hi] and there was none before.
func limitOrDefault(v, def, lo, hi int, name string, err error) (int, error) {
	if v == 0 {
		v = def
	}
	if err == nil && (v < lo || v > hi) {
		err = invalid("%s %d outside [%d, %d]", name, v, lo, hi)
	}
	return v, err
}

// ReaderOptions configure a Reader or RecordReader.
type ReaderOptions struct {
	// Limits bound what the reader accepts; zero fields take defaults.
	Limits Limits
	// Encryption says which streams the reader accepts.
	Encryption EncryptionMode
	// Key opens encrypted streams: KeySize bytes.
	Key []byte
}

func (o ReaderOptions) withDefaults() (ReaderOptions, error) {
	var err error
	if o.Limits, err = o.Limits.withDefaults(); err != nil {
		return o, err
	}
	if err := checkKey(o.Encryption, o.Key); err != nil {
		return o, err
	}
	return o, nil
}
