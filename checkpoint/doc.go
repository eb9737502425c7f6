// Package checkpoint is the stream format for device state and memory
// pages: the same stream carries a live migration, written round by round
// while the VM runs, and a suspended VM at rest in a file. The stream is
// versioned, self-describing, checksummed, optionally compressed and
// optionally encrypted, and every byte of it is deterministic: the caller
// supplies the stream id and the key, and nothing depends on time, map
// order or randomness.
//
// The destination of a migration treats the stream as hostile. A bad
// stream fails cleanly: with a typed error that says where, without a
// panic, within the memory its limits allow, and leaving nothing behind.
//
// FORMAT.md, beside this file, draws the byte layout and states the
// compatibility and encryption rules.
//
// # Streams
//
// A stream is a header (magic, version, flags, stream id), then records,
// each with a type code, a length, a sequence number, a payload and a check
// value that chains the previous record's. The first record declares the VM,
// its GPU model and vGPU profiles, and its regions (id, size, page size,
// seed); then come page batches, device states and ends of rounds; the last
// record is the end of the stream. A migration's stream looks like this:
//
//	source                                            destination
//	  |  header, metadata                                  |
//	  |--------------------------------------------------->|  NewReader, NewApplier
//	  |  round 0: every non-zero page, end of round 0      |
//	  |--------------------------------------------------->|  Step until RecordEndRound
//	  |  round 1: pages dirtied meanwhile, end of round 1  |
//	  |--------------------------------------------------->|  ...
//	  |  (stun) device states, last pages, end of stream   |
//	  |--------------------------------------------------->|  Run, then Commit
//
// # Writing
//
// Writer writes a whole stream: WritePage or WriteRegion add pages to a
// batch of up to WriterOptions.BatchBytes (1 MiB by default), which is
// written when full; EndRound closes a round; WriteDeviceState, Close. A
// Writer is reused with Reset.
//
// It is built of two parts that a parallel copy engine uses separately.
// A BatchEncoder, one per goroutine, turns pages into a page batch payload:
// zero pages are elided, pages that look incompressible are sent raw, the
// rest share one zstd frame or one S2 block; its buffers are reused, so a
// batch allocates nothing once warm. A RecordWriter, on one goroutine, writes the payloads
// in order: it assigns sequence numbers, seals payloads, chains check
// values. Writer.WriteBatch is the ordered stage that takes batches
// encoded elsewhere and keeps the round and stream counts.
//
// # Codecs
//
// A stream's header names its codec: none, zstd or S2 (klauspost/compress's
// S2 block format, faster than zstd for a little less compression), or
// mixed, whose batches may each use any of the three. WriterOptions.Level
// chooses the codec and, for zstd, how hard it works; WriterOptions.Mixed
// declares a mixed stream, whose batches take the levels Writer.SetLevel
// or BatchEncoder.SetLevel give them, as an adaptive writer chooses them.
// A stream of codec S2 or mixed carries each batch in a coded page batch
// record, which names the batch's codec (version 1.1 of the format); a
// stream of codec none or zstd is a version 1.0 stream, byte for byte.
//
// # Page filters
//
// A stream written with WriterOptions.Filters (version 1.3) may carry two
// transforms of a page (PageFilters, FORMAT.md): shuffled pages, whose
// float32 bytes are grouped by significance before compression, as HDF5's
// and Blosc's shuffle filters do, and delta pages, sent as the XOR of the
// page with the content the reader holds, as QEMU's XBZRLE sends guest
// RAM. A sender learns what the reader holds from a DeltaCache of what it
// last sent, bounded in memory and the same whatever order its encoders
// fill it in; the reader checks each delta's base page by page and refuses
// a delta against other content (ErrDeltaBase). Apply, ParallelApply and
// StoreDelta apply delta pages; a caller storing a Reader's batches itself
// must apply them through StoreDelta.
//
// # Reading
//
// Reader reads a whole stream and hands over its records one at a time:
// Next returns the type, Batch, DeviceState, RoundEnd and StreamEnd the
// contents. It is built the same way: a RecordReader checks the framing,
// limits, sequence, check value and authentication of each record before
// anything looks inside it; a BatchDecoder decodes page batches against the
// metadata and the limits.
//
// # Applying
//
// An Applier applies a stream to destination regions, one per declared
// region, with the same page size, page count and seed. The regions belong
// to it until Commit, which succeeds only after the end-of-stream record has
// verified, including the regions' content digests if the writer sent them.
// If the stream fails, or the caller aborts, every destination region is
// scrubbed. Device states are handed over, as copies, after the end
// verified.
//
// # Several streams
//
// A migration may carry one VM's pages over several streams at once, one
// per connection. ParallelWriter deals the batches to K whole streams in
// turn (batch n to stream n mod K, the device states and the regions'
// digests on stream 0), each with its own header, metadata, chain of check
// values, tally and key; a caller that writes each stream on a goroutine
// of its own deals them itself (ParallelWriter.Deal). ParallelApplier reads each stream on a goroutine
// of its own — the record layer in order, as Reader does — and hands the
// page batches to workers that decode and apply them in any order; a
// stream's end of round waits until its batches are applied and every
// other stream has ended the round, so that a page re-sent in a later
// round is never overwritten by its older copy. A bounded number of
// batches is in flight, so a fast stream waits, unread. It keeps every
// promise of Applier, and refuses streams that disagree on the VM, the
// codec or the number of rounds, or that repeat a device state or a
// digest.
//
// Save writes a suspended VM — regions, device states and the caller's
// attachments (a VM's spec, its workload's state) — to a stream, its pages
// read, hashed and compressed in one pass on several goroutines; in
// compact form (Snapshot.Compact) a region's generated content goes as
// page runs (memory.Run), a few bytes each, so a synthetic guest of any
// size takes kilobytes. Restore reads it back into fresh regions, byte for
// byte and generation for generation; RestorePrepared reads the
// attachments first and asks its caller for the regions only then, so
// that a suspended VM can be made from its own file (version 1.2 of the
// format).
//
// # Encryption
//
// With a key, every record payload is sealed with AES-256-GCM; the nonce is
// the sequence number and the headers are associated data, so a record
// cannot be altered, dropped, replayed or moved without failing with
// ErrAuth. Writers and readers have modes — disabled, opportunistic,
// required — and a reader refuses, with ErrEncryptionMode, a stream its
// mode does not accept (FORMAT.md has the table).
//
// # Errors and limits
//
// Every error is an *Error carrying the byte offset where the problem was
// found and wrapping one sentinel: ErrBadMagic, ErrVersion, ErrChecksum,
// ErrSequence, ErrTruncated, ErrLimit, ErrMalformed, ErrUnknownRecord,
// ErrAuth, ErrEncryptionMode, ErrDeltaBase, and, for the caller's own
// mistakes, ErrWrite, ErrInvalid and ErrState. Readers' errors are sticky.
// Limits bound record size, batch size, pages per record, zstd window and
// memory, device state and metadata size, region count and stream length;
// an S2 block's declared length is held to the batch limit as a zstd
// frame's is; every zero field has a safe default.
//
// # Concurrency
//
// No type is safe for concurrent use, but for a DeltaCache's use by the
// encoders of one pass (BatchEncoder.AddFrom, Add). A parallel engine gives
// each goroutine its own BatchEncoder or BatchDecoder and keeps one
// RecordWriter or Reader for the ordered part.
package checkpoint
