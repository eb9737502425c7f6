package vgpusimtest

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// The relay's tests frame a toy protocol: a message is a length byte and
// that many bytes, and is named by its first byte after the length.

// toyFramer frames the toy protocol.
func toyFramer(Side) Framer {
	return func(p []byte) (int, string, error) {
		if len(p) < 2 {
			return 0, "", nil
		}
		return 1 + int(p[0]), string(p[1:2]), nil
	}
}

// toy returns the toy messages of bodies, each framed.
func toy(bodies ...string) [][]byte {
	out := make([][]byte, len(bodies))
	for i, b := range bodies {
		out[i] = append([]byte{byte(len(b))}, b...)
	}
	return out
}

// send writes msgs on c, chunked as how says, then closes c. Its errors
// are the relay's doing, and the test looks at what arrived instead.
func send(c net.Conn, msgs [][]byte, how string) {
	defer c.Close()
	write(c, msgs, how)
}

// write writes msgs on c, chunked as how says.
func write(c net.Conn, msgs [][]byte, how string) {
	all := bytes.Join(msgs, nil)
	switch how {
	case "one-write":
		_, _ = c.Write(all)
	case "bytes":
		for i := range all {
			if _, err := c.Write(all[i : i+1]); err != nil {
				return
			}
		}
	default: // a write a message
		for _, m := range msgs {
			if _, err := c.Write(m); err != nil {
				return
			}
		}
	}
}

// readN reads n bytes of c on a goroutine and returns them, or what came
// before an error.
func readN(c net.Conn, n int) <-chan []byte {
	out := make(chan []byte, 1)
	go func() {
		b := make([]byte, n)
		k, _ := io.ReadFull(c, b)
		out <- b[:k]
	}()
	return out
}

// at returns a Rule that does act to the message of index i from end,
// and passes every other.
func at(from Side, i int, act Action) Rule {
	return func(m Message) Action {
		if m.From == from && m.Index == i {
			return act
		}
		return Action{}
	}
}

// relayed sends msgs from a to b through a relay of rule and returns
// what b read, and the relay's error.
func relayed(t *testing.T, rule Rule, msgs [][]byte, how string) ([]byte, error) {
	t.Helper()
	a, b, r := NewRelayPipe(RelayPlan{Framing: toyFramer, Rule: rule})
	defer b.Close()
	got := drain(b)
	send(a, msgs, how)
	out := <-got
	return out, r.Close()
}

// TestRelayActions does each action to the second of three messages,
// written in one Write, a Write each and a byte a Write.
func TestRelayActions(t *testing.T) {
	m := toy("m0", "m1", "m2")
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	cases := []struct {
		name string
		act  Action
		want []byte
	}{
		{"pass", Action{}, cat(m...)},
		{"drop", Action{Drop: true}, cat(m[0], m[2])},
		{"corrupt", Action{FlipBits: []int64{8*2 + 1}}, cat(m[0], []byte("\x02m3"), m[2])},
		{"duplicate", Action{Repeat: 2}, cat(m[0], m[1], m[1], m[1], m[2])},
		{"replace", Action{Replace: toy("xyz")[0]}, cat(m[0], toy("xyz")[0], m[2])},
		{"replace and flip", Action{Replace: []byte("ab"), FlipBits: []int64{0}}, cat(m[0], []byte("`b"), m[2])},
		{"cut the sender after it", Action{Close: SideA}, cat(m[0], m[1])},
		{"cut the receiver after it", Action{Close: SideB}, cat(m[0], m[1])},
		{"cut both after it", Action{Close: SideA | SideB}, cat(m[0], m[1])},
		{"cut it short", Action{Replace: m[1][:2], Close: SideA}, cat(m[0], m[1][:2])},
		{"drop and cut", Action{Drop: true, Close: SideB}, m[0]},
	}
	for _, c := range cases {
		for _, how := range []string{"one-write", "a-write-a-message", "bytes"} {
			t.Run(c.name+"/"+how, func(t *testing.T) {
				got, err := relayed(t, at(SideA, 1, c.act), m, how)
				if err != nil || !bytes.Equal(got, c.want) {
					t.Fatalf("read %q (relay error %v), want %q", got, err, c.want)
				}
			})
		}
	}
}

// TestRelayMessages checks what the Rule is shown, from both ends, and
// that a Rule that keeps or changes its copy changes nothing sent.
func TestRelayMessages(t *testing.T) {
	var seen []Message
	calls := 0 // unlocked: the relay calls the Rule one message at a time
	rule := func(m Message) Action {
		calls++
		seen = append(seen, m)
		m.Data[0] ^= 0xff
		return Action{}
	}
	a, b, r := NewRelayPipe(RelayPlan{Framing: toyFramer, Rule: rule})
	defer a.Close()
	defer b.Close()
	fromA, fromB := toy("a0", "a1"), toy("b0")
	gotB, gotA := readN(b, 6), readN(a, 3)
	go write(b, fromB, "")
	write(a, fromA, "")
	if ga, gb := <-gotA, <-gotB; !bytes.Equal(gb, bytes.Join(fromA, nil)) || !bytes.Equal(ga, bytes.Join(fromB, nil)) {
		t.Fatalf("b read %q, a read %q", gb, ga)
	}
	must(t, r.Close())
	want := map[string]Message{"a": {SideA, 0, "a", fromA[0]}, "A": {SideA, 1, "a", fromA[1]}, "b": {SideB, 0, "b", fromB[0]}}
	if calls != 3 || len(seen) != 3 {
		t.Fatalf("%d calls, %d messages seen", calls, len(seen))
	}
	for _, m := range seen {
		key := m.Name
		if m.Index == 1 {
			key = "A"
		}
		w := want[key]
		w.Data = bytes.Clone(w.Data)
		w.Data[0] ^= 0xff
		if m.From != w.From || m.Index != w.Index || m.Name != w.Name || !bytes.Equal(m.Data, w.Data) {
			t.Errorf("seen %+v, want %+v", m, w)
		}
	}
}

// TestRelayDelay holds a message back, and Close cuts a hold short.
func TestRelayDelay(t *testing.T) {
	const hold = 50 * time.Millisecond
	a, b, r := NewRelayPipe(RelayPlan{Framing: toyFramer, Rule: at(SideA, 0, Action{Delay: hold})})
	defer a.Close()
	defer b.Close()
	start := time.Now()
	go send(a, toy("m0"), "")
	buf := make([]byte, 3)
	if _, err := io.ReadFull(b, buf); err != nil || time.Since(start) < hold {
		t.Fatalf("read %q after %v (%v), want it after %v", buf, time.Since(start), err, hold)
	}
	must(t, r.Close())

	held := make(chan struct{})
	a, b, r = NewRelayPipe(RelayPlan{Framing: toyFramer, Rule: func(Message) Action {
		close(held)
		return Action{Delay: time.Hour}
	}})
	defer b.Close()
	go send(a, toy("m0"), "")
	<-held
	closed := make(chan error)
	go func() { closed <- r.Close() }()
	select {
	case err := <-closed:
		must(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end a delay of an hour")
	}
	if got, _ := io.ReadAll(b); len(got) != 0 {
		t.Fatalf("read %q from a relay closed while it held the message", got)
	}
}

// waitWithin returns r's Wait error, or fails t if Wait takes longer
// than d: how a test tells a relay that ended from one left hanging.
func waitWithin(t *testing.T, r *Relay, d time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- r.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("Wait still blocked after %v", d)
		return nil
	}
}

// TestRelayDelayEndsWithTheConnections: a delay is cut short when the
// relay's connections close, not only by Close: once the sides are gone
// the held message has nowhere to go, and Wait must not outlast them.
func TestRelayDelayEndsWithTheConnections(t *testing.T) {
	// prompt is far below the hold, with room for a loaded machine.
	const hold, prompt = 5 * time.Second, 500 * time.Millisecond
	for _, c := range []struct {
		name  string
		close func(a, b net.Conn)
	}{
		{"both sides", func(a, b net.Conn) { a.Close(); b.Close() }},
		{"the receiver", func(_, b net.Conn) { b.Close() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			held := make(chan struct{})
			a, b, r := NewRelayPipe(RelayPlan{Framing: toyFramer, Rule: func(Message) Action {
				close(held)
				return Action{Delay: hold}
			}})
			defer a.Close()
			defer b.Close()
			write(a, toy("m0"), "")
			<-held
			start := time.Now()
			c.close(a, b)
			must(t, waitWithin(t, r, prompt))
			t.Logf("Wait returned %v after the close", time.Since(start))
		})
	}
}

// TestRelayCloseCutsBoth: whichever sides an Action's Close names, both
// connections close right after the message, and nothing more crosses
// either way, even while the other direction is blocked writing to a side
// that does not read.
func TestRelayCloseCutsBoth(t *testing.T) {
	for _, set := range []Side{SideA, SideB, SideA | SideB} {
		t.Run(set.String(), func(t *testing.T) {
			fromB := make(chan struct{})
			a, b, r := NewRelayPipe(RelayPlan{Framing: toyFramer, Rule: func(m Message) Action {
				if m.From == SideB {
					close(fromB)
					return Action{}
				}
				return Action{Close: set}
			}})
			defer a.Close()
			defer b.Close()
			// b's message goes to a, which does not read yet: the relay
			// blocks writing it.
			go write(b, toy("b0"), "")
			<-fromB
			got := drain(b)
			write(a, toy("a0"), "")
			must(t, waitWithin(t, r, 5*time.Second))
			if out := <-got; !bytes.Equal(out, toy("a0")[0]) {
				t.Fatalf("b read %q, want the message the cut came after", out)
			}
			if out, _ := io.ReadAll(a); len(out) != 0 {
				t.Fatalf("a read %q after the cut", out)
			}
		})
	}
}
