package vgpusimtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// The relay at its edges: framing it cannot follow, actions it cannot
// carry out, messages never finished, no framing at all, no connection,
// and arbitrary bytes.

// TestRelayFramingError: bytes a Framer cannot frame pass on as they
// come, and Wait says why they were not framed.
func TestRelayFramingError(t *testing.T) {
	for _, c := range []struct {
		name string
		n    int
		err  error
	}{{"error", 0, errors.New("not a message")}, {"negative length", -1, nil}} {
		t.Run(c.name, func(t *testing.T) {
			framing := func(Side) Framer {
				return func(p []byte) (int, string, error) {
					if len(p) > 0 && p[0] == 0xff {
						return c.n, "", c.err
					}
					return toyFramer(SideA)(p)
				}
			}
			calls := 0
			a, b, r := NewRelayPipe(RelayPlan{Framing: framing, Rule: func(Message) Action { calls++; return Action{Drop: true} }})
			got := drain(b)
			msgs := append(toy("m0"), []byte{0xff, 1, 2}, toy("m1")[0])
			send(a, msgs, "bytes")
			if out := <-got; !bytes.Equal(out, bytes.Join(msgs[1:], nil)) || calls != 1 {
				t.Fatalf("read %q after %d Rule calls", out, calls)
			}
			if err := r.Close(); !errors.Is(err, ErrFraming) || c.err != nil && !errors.Is(err, c.err) {
				t.Fatalf("relay error %v, want ErrFraming", err)
			}
		})
	}
}

// TestRelayInvalidAction: an action that cannot be carried out ends the
// relay, both ends closed, and Wait says why.
func TestRelayInvalidAction(t *testing.T) {
	for _, c := range []struct {
		act  Action
		want error
	}{
		{Action{Repeat: -1}, ErrInvalid},
		{Action{Delay: -time.Second}, ErrInvalid},
		{Action{FlipBits: []int64{-1}}, ErrInvalid},
		{Action{Close: 4}, ErrInvalid},
		{Action{FlipBits: []int64{8 * 4}}, ErrOutOfRange},
	} {
		t.Run(fmt.Sprintf("%+v", c.act), func(t *testing.T) {
			got, err := relayed(t, at(SideA, 1, c.act), toy("m0", "m1", "m2"), "")
			if !bytes.Equal(got, toy("m0")[0]) || !errors.Is(err, c.want) {
				t.Fatalf("read %q, relay error %v; want the first message and %v", got, err, c.want)
			}
		})
	}
}

// TestRelayUnfinishedMessage: a message its sender never finished does
// not go on.
func TestRelayUnfinishedMessage(t *testing.T) {
	m := toy("m0", "m1")
	got, err := relayed(t, nil, [][]byte{m[0], m[1][:2]}, "")
	if err != nil || !bytes.Equal(got, m[0]) {
		t.Fatalf("read %q (%v), want %q", got, err, m[0])
	}
}

// TestRelayUnframed: with no Framer and no Rule, the relay is a pipe
// both ways.
func TestRelayUnframed(t *testing.T) {
	for name, framing := range map[string]func(Side) Framer{"no Framing": nil, "nil Framers": func(Side) Framer { return nil }} {
		t.Run(name, func(t *testing.T) {
			a, b, r := NewRelayPipe(RelayPlan{Framing: framing})
			defer a.Close()
			defer b.Close()
			gotA, gotB := readN(a, 4), readN(b, 4)
			go write(b, [][]byte{[]byte("pong")}, "")
			write(a, [][]byte{[]byte("ping")}, "bytes")
			if ga, gb := <-gotA, <-gotB; string(ga) != "pong" || string(gb) != "ping" {
				t.Fatalf("a read %q, b read %q", ga, gb)
			}
			must(t, r.Close())
		})
	}
}

// TestRelayRuleWithoutFramer: a Rule with no Framer on either side could
// never be called; the relay says so at once, relays nothing and closes
// both connections, rather than pass everything as if the Rule had.
func TestRelayRuleWithoutFramer(t *testing.T) {
	for name, framing := range map[string]func(Side) Framer{"no Framing": nil, "nil Framers": func(Side) Framer { return nil }} {
		t.Run(name, func(t *testing.T) {
			calls := 0
			a, b, r := NewRelayPipe(RelayPlan{Framing: framing, Rule: func(Message) Action { calls++; return Action{} }})
			defer a.Close()
			defer b.Close()
			if err := waitWithin(t, r, 5*time.Second); !errors.Is(err, ErrInvalid) {
				t.Fatalf("relay error %v, want ErrInvalid", err)
			}
			if _, err := a.Write([]byte("ping")); err == nil {
				t.Fatal("the relay left a open")
			}
			if out, _ := io.ReadAll(b); len(out) != 0 || calls != 0 {
				t.Fatalf("b read %q after %d Rule calls", out, calls)
			}
		})
	}
	// One side framed is enough: the Rule sees that side's messages, and
	// the other's pass unframed.
	seen := 0
	framing := func(s Side) Framer {
		if s == SideA {
			return toyFramer(s)
		}
		return nil
	}
	a, b, r := NewRelayPipe(RelayPlan{Framing: framing, Rule: func(m Message) Action {
		if m.From != SideA {
			t.Errorf("the Rule saw a message from %v, which has no Framer", m.From)
		}
		seen++
		return Action{}
	}})
	defer a.Close()
	defer b.Close()
	gotA, gotB := readN(a, 4), readN(b, 3)
	go write(b, [][]byte{[]byte("pong")}, "")
	write(a, toy("m0"), "")
	if ga, gb := <-gotA, <-gotB; string(ga) != "pong" || !bytes.Equal(gb, toy("m0")[0]) || seen != 1 {
		t.Fatalf("a read %q, b read %q, %d Rule calls", ga, gb, seen)
	}
	must(t, r.Close())
}

// TestRelayNilConn: a relay with no connection on one side ends at once
// and closes the other.
func TestRelayNilConn(t *testing.T) {
	x, y := net.Pipe()
	defer y.Close()
	r := NewRelay(x, nil, RelayPlan{})
	if err := r.Wait(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("relay error %v, want ErrInvalid", err)
	}
	if _, err := x.Write([]byte{1}); err == nil {
		t.Fatal("the relay left its connection open")
	}
}

func TestSideString(t *testing.T) {
	for e, want := range map[Side]string{0: "none", SideA: "a", SideB: "b", SideA | SideB: "a+b", 4: "Side(4)"} {
		if e.String() != want {
			t.Errorf("Side %d is %q, want %q", uint8(e), e, want)
		}
	}
}

// FuzzRelay relays arbitrary bytes, framed by their length bytes, with
// an action drawn from each message's: the relay never panics, and Wait
// returns.
func FuzzRelay(f *testing.F) {
	f.Add(bytes.Join(toy("m0", "m1", "m2"), nil), uint8(0))
	f.Add([]byte{0, 0, 0xff, 3}, uint8(7))
	f.Fuzz(func(t *testing.T, data []byte, salt uint8) {
		rule := func(m Message) Action {
			k := (int(m.Data[len(m.Data)-1]) + int(salt)) % 8
			return [...]Action{{}, {Drop: true}, {Repeat: 1}, {FlipBits: []int64{int64(k)}}, {Replace: []byte{}},
				{Close: SideA}, {Close: SideB}, {Repeat: -1}}[k]
		}
		framing := func(Side) Framer {
			return func(p []byte) (int, string, error) {
				if len(p) == 0 {
					return 0, "", nil
				}
				return 1 + int(p[0]), "", nil
			}
		}
		a, b, r := NewRelayPipe(RelayPlan{Framing: framing, Rule: rule})
		got := drain(b)
		send(a, [][]byte{data}, "")
		<-got
		_ = r.Close()
	})
}
