package vgpusimtest_test

import (
	"bytes"
	"fmt"
	"io"

	"github.com/vgpusim/vgpusim/vgpusimtest"
)

// A man in the middle of a line protocol, each message a line: it drops
// the second line from a, corrupts the third and sends the fourth twice.
// The fifth, never finished, is lost with the connection.
func ExampleRelay() {
	lines := func(vgpusimtest.Side) vgpusimtest.Framer {
		return func(pending []byte) (int, string, error) {
			return bytes.IndexByte(pending, '\n') + 1, "", nil // 0 until a line is whole
		}
	}
	rule := func(m vgpusimtest.Message) vgpusimtest.Action {
		switch {
		case m.From != vgpusimtest.SideA:
			return vgpusimtest.Action{}
		case m.Index == 1:
			return vgpusimtest.Action{Drop: true}
		case m.Index == 2:
			return vgpusimtest.Action{FlipBits: []int64{5}} // "three" to "Three"
		case m.Index == 3:
			return vgpusimtest.Action{Repeat: 1}
		}
		return vgpusimtest.Action{}
	}
	a, b, relay := vgpusimtest.NewRelayPipe(vgpusimtest.RelayPlan{Framing: lines, Rule: rule})
	go func() {
		defer a.Close()
		_, _ = a.Write([]byte("one\ntwo\nthree\nfour\nfive"))
	}()
	got, _ := io.ReadAll(b)
	fmt.Printf("%q\n", got)
	fmt.Println(relay.Close())
	// Output:
	// "one\nThree\nfour\nfour\n"
	// <nil>
}
