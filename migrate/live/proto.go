package live

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/vgpusim/vgpusim/migrate"
	"github.com/vgpusim/vgpusim/vgpu"
)

// The messages of the control conversation the package doc draws, their
// framing and their limits.

const (
	liveMagic = "VGPULIVE"
	// ProtocolMajor and ProtocolMinor are the live protocol's
	// version. A destination refuses another major version; minor
	// versions only add optional fields.
	ProtocolMajor = 1
	ProtocolMinor = 0

	preambleBytes = len(liveMagic) + 4
	// maxControlBytes bounds a control message, so a hostile peer cannot
	// make the other side allocate more.
	maxControlBytes = 64 << 10
	// maxConnections bounds how many connections one migration spreads
	// its stream over.
	maxConnections = 64
	// maxPeerNameBytes and maxPeerMessageBytes bound the text a peer puts
	// in a report or an error: a name, and a refusal's reason.
	maxPeerNameBytes    = 256
	maxPeerMessageBytes = 1024
)

type msgType uint8

const (
	msgHello msgType = iota + 1
	msgAccept
	msgRefuse
	msgReady
	msgCommit
	msgResumed
)

var msgNames = [...]string{msgHello: "hello", msgAccept: "accept", msgRefuse: "refuse", msgReady: "ready",
	msgCommit: "commit", msgResumed: "resumed"}

func (t msgType) String() string {
	if int(t) < len(msgNames) && msgNames[t] != "" {
		return msgNames[t]
	}
	return fmt.Sprintf("message(%d)", uint8(t))
}

// hello is what the source declares before any memory moves.
type hello struct {
	Connections int               `json:"connections"`
	Encrypted   bool              `json:"encrypted"`
	BatchBytes  int               `json:"batch_bytes"`
	Spec        vgpu.IncomingSpec `json:"spec"`
	// Source names the source host and Mode is the migration's Mode, for
	// the destination's report: the stream says neither. The destination
	// refuses a mode it does not know and cuts Source to
	// maxPeerNameBytes.
	Source string `json:"source"`
	Mode   uint8  `json:"mode"`
}

// accept is the destination's yes.
type accept struct {
	Host string `json:"host"`
}

// refusal is why a destination turned a migration down.
type refusal struct {
	Code    string `json:"code"` // "incompatible", "busy", "config", "version"
	Message string `json:"message"`
}

// commit tells the destination what to do with the VM it restored.
type commit struct {
	Resume   bool    `json:"resume"`
	Throttle float64 `json:"throttle"`
}

// UnmarshalJSON requires both fields: a commit that lost one, to a
// corrupted key say, would otherwise leave the VM paused (or unthrottled)
// at the destination while the source believes it resumed.
func (c *commit) UnmarshalJSON(b []byte) error {
	var w struct {
		Resume   *bool    `json:"resume"`
		Throttle *float64 `json:"throttle"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if w.Resume == nil || w.Throttle == nil {
		return errors.New("commit without resume or throttle")
	}
	c.Resume, c.Throttle = *w.Resume, *w.Throttle
	return nil
}

func writePreamble(w io.Writer) error {
	var b [preambleBytes]byte
	copy(b[:], liveMagic)
	binary.LittleEndian.PutUint16(b[8:], ProtocolMajor)
	binary.LittleEndian.PutUint16(b[10:], ProtocolMinor)
	_, err := w.Write(b[:])
	return err
}

// readPreamble checks the magic and returns the peer's major version.
func readPreamble(r io.Reader) (major int, err error) {
	var b [preambleBytes]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, err
	}
	if string(b[:8]) != liveMagic {
		return 0, fmt.Errorf("%w: not a live migration (magic %q)", migrate.ErrStream, b[:8])
	}
	return int(binary.LittleEndian.Uint16(b[8:])), nil
}

// writeMsg writes one control message: type, length, and v as JSON (no
// body when v is nil).
func writeMsg(w io.Writer, t msgType, v any) error {
	var body []byte
	if v != nil {
		var err error
		if body, err = json.Marshal(v); err != nil {
			return err
		}
	}
	if len(body) > maxControlBytes {
		return fmt.Errorf("%w: %v message of %d bytes", migrate.ErrConfig, t, len(body))
	}
	msg := make([]byte, 5, 5+len(body))
	msg[0] = byte(t)
	binary.LittleEndian.PutUint32(msg[1:], uint32(len(body)))
	_, err := w.Write(append(msg, body...))
	return err
}

// errUnexpectedMsg reports a control message out of turn.
var errUnexpectedMsg = errors.New("unexpected control message")

// readMsg reads one control message, which must be of type want (or, when
// the destination sends want, a refusal), and decodes its body into v. Only
// a destination refuses: a refusal where the source's hello or commit
// belongs is a message out of turn.
func readMsg(r io.Reader, want msgType, v any) error {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return err
	}
	t, n := msgType(h[0]), binary.LittleEndian.Uint32(h[1:])
	if n > maxControlBytes {
		return fmt.Errorf("%w: %v message of %d bytes, limit %d", migrate.ErrStream, t, n, maxControlBytes)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	if t == msgRefuse && (want == msgAccept || want == msgReady || want == msgResumed) {
		var rf refusal
		if err := json.Unmarshal(body, &rf); err != nil {
			return fmt.Errorf("%w: unreadable refusal: %v", migrate.ErrRefused, err)
		}
		return rf.err()
	}
	if t != want {
		return fmt.Errorf("%w: %w: %v where %v belongs", migrate.ErrStream, errUnexpectedMsg, t, want)
	}
	if v == nil {
		if n != 0 {
			return fmt.Errorf("%w: %v message with a %d-byte body", migrate.ErrStream, t, n)
		}
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: bad %v message: %v", migrate.ErrStream, t, err)
	}
	return nil
}

// refusalCodes maps the sentinels a destination refuses with to their codes
// on the wire and back.
var refusalCodes = []struct {
	code string
	err  error
}{{"incompatible", migrate.ErrIncompatible}, {"busy", migrate.ErrBusy}, {"config", migrate.ErrConfig}, {"version", migrate.ErrIncompatible}}

func refusalOf(cause error) refusal {
	for _, c := range refusalCodes {
		if errors.Is(cause, c.err) {
			return refusal{Code: c.code, Message: cause.Error()}
		}
	}
	return refusal{Code: "other", Message: cause.Error()}
}

// err is the refusal as the source returns it: ErrRefused and the code's
// sentinel, which errors.Is both finds, and the destination's reason said
// once. The reason is the destination's own error text, which names the
// code's sentinel already ("migrate: invalid configuration: ..."); only its
// package prefix goes, as ErrRefused's says it.
func (r refusal) err() error {
	errs := []error{migrate.ErrRefused}
	for _, c := range refusalCodes {
		if c.code == r.Code {
			errs = append(errs, c.err)
			break
		}
	}
	why := strings.TrimPrefix(peerText(r.Message, maxPeerMessageBytes), "migrate: ")
	if why == "" {
		why = "no reason given"
	}
	return &labeledError{msg: migrate.ErrRefused.Error() + ": " + why, errs: errs}
}

// peerText returns s, which came from the peer, fit to print in a report
// or an error: at most limit bytes, valid UTF-8, without control
// characters.
func peerText(s string, limit int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
