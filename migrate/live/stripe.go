package live

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/vgpusim/vgpusim/migrate"
)

// A live migration may spread its stream over several connections, as
// QEMU's multifd channels and vMotion's parallel streams do. The stream is
// cut into frames, each what one Write carried, and frame i goes to
// connection i mod K. The receiver reads frame i from connection i mod K,
// so it reassembles the stream in order without reading ahead, and both
// ends agree on where every frame is without any exchange. Because the
// receiver drains the connections in the order the sender fills them,
// neither side can wait on the other forever.
//
// A frame is a 12-byte header — its index (uint64) and length (uint32),
// little-endian — and the bytes.

const (
	stripeHeaderBytes = 12
	// maxFrameBytes bounds what a hostile sender can make the receiver
	// wait for in one frame; the sender's frames are its buffer's size.
	maxFrameBytes = 4 << 20
)

// stripeWriter deals each Write over its connections as one frame. It is
// not safe for concurrent use; errors are sticky.
type stripeWriter struct {
	conns []io.Writer
	next  uint64
	hdr   [stripeHeaderBytes]byte
	err   error
}

func newStripeWriter(conns []io.Writer) *stripeWriter { return &stripeWriter{conns: conns} }

// Write sends p as frames of at most maxFrameBytes.
func (s *stripeWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), maxFrameBytes)]
		c := s.conns[s.next%uint64(len(s.conns))]
		binary.LittleEndian.PutUint64(s.hdr[:8], s.next)
		binary.LittleEndian.PutUint32(s.hdr[8:], uint32(len(chunk)))
		if _, err := c.Write(s.hdr[:]); err != nil {
			s.err = err
			return n, err
		}
		if _, err := c.Write(chunk); err != nil {
			s.err = err
			return n, err
		}
		s.next++
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}

// stripeReader reassembles what a stripeWriter sent. It reads a frame's
// header only when its caller wants bytes past the previous frame, so it
// never consumes anything that follows the stream on a connection.
type stripeReader struct {
	conns []io.Reader
	next  uint64 // index of the next frame to read
	left  int    // bytes of the current frame not yet read
	cur   io.Reader
	hdr   [stripeHeaderBytes]byte
	err   error
}

func newStripeReader(conns []io.Reader) *stripeReader { return &stripeReader{conns: conns} }

func (s *stripeReader) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	for s.left == 0 {
		if err := s.nextFrame(); err != nil {
			s.err = err
			return 0, err
		}
	}
	n, err := s.cur.Read(p[:min(len(p), s.left)])
	s.left -= n
	switch {
	case err == io.EOF && s.left > 0:
		err = io.ErrUnexpectedEOF // the connection ended inside a frame
	case err == io.EOF:
		err = nil // the frame ended with the read; the next may follow
	}
	if err != nil {
		s.err = err
	}
	return n, err
}

func (s *stripeReader) nextFrame() error {
	c := s.conns[s.next%uint64(len(s.conns))]
	if _, err := io.ReadFull(c, s.hdr[:]); err != nil {
		if err == io.EOF {
			return io.ErrUnexpectedEOF // a stream ends with its own record, never between frames
		}
		return err
	}
	idx := binary.LittleEndian.Uint64(s.hdr[:8])
	n := binary.LittleEndian.Uint32(s.hdr[8:])
	switch {
	case idx != s.next:
		return fmt.Errorf("%w: frame %d arrived where frame %d belongs", migrate.ErrStream, idx, s.next)
	case n == 0 || n > maxFrameBytes:
		return fmt.Errorf("%w: frame %d of %d bytes (1 to %d)", migrate.ErrStream, idx, n, maxFrameBytes)
	}
	s.next++
	s.cur, s.left = c, int(n)
	return nil
}
