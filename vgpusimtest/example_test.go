package vgpusimtest_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/vgpusim/vgpusim/checkpoint"
	"github.com/vgpusim/vgpusim/vgpusimtest"
)

// A connection that closes after 5 bytes: the write that crosses the cut
// writes those and fails, and the peer reads them, then the end.
func ExampleFaultConn() {
	a, b := net.Pipe()
	conn := vgpusimtest.NewFaultConn(a, vgpusimtest.Fault{Write: vgpusimtest.CloseAfter(5)})
	got := make(chan []byte)
	go func() {
		p, _ := io.ReadAll(b)
		got <- p
	}()
	n, err := conn.Write([]byte("hello, world"))
	fmt.Println(n, errors.Is(err, vgpusimtest.ErrInjected))
	fmt.Printf("%q, %d bytes written\n", <-got, conn.BytesWritten())
	fmt.Println(err)
	// Output:
	// 5 true
	// "hello", 5 bytes written
	// vgpusimtest: injected fault: write close at byte 5
}

// Two records of a checkpoint stream swapped: the reader refuses the
// stream at the first of them.
func ExampleSwapRecords() {
	var stream bytes.Buffer
	w, _ := checkpoint.NewWriter(&stream, checkpoint.Metadata{VMID: "vm", Profiles: []string{"P40-1Q"}}, checkpoint.WriterOptions{})
	_ = w.WriteDeviceState(checkpoint.DeviceState{Device: 0, Data: []byte("regs")})
	_, _ = w.EndRound()
	_ = w.Close()
	recs, _ := vgpusimtest.Records(stream.Bytes())
	for _, r := range recs {
		fmt.Println(r.Seq, r.Type)
	}

	swapped, _ := vgpusimtest.SwapRecords(stream.Bytes(), 1, 2)
	rd, err := checkpoint.NewReader(bytes.NewReader(swapped), checkpoint.ReaderOptions{})
	for err == nil {
		_, err = rd.Next()
	}
	fmt.Println(errors.Is(err, checkpoint.ErrSequence))
	// Output:
	// 0 metadata
	// 1 device-state
	// 2 end-round
	// 3 end-stream
	// true
}
