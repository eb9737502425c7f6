package live

import (
	"crypto/hmac"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
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
	// version. A destination refuses another major version. The messages
	// are decoded strictly, so any change to their fields is a new major
	// version; a minor version may only change what both ends accept
	// already.
	ProtocolMajor = 4
	ProtocolMinor = 0

	preambleBytes = len(liveMagic) + 4
	// offerBytes is the source's first message: the preamble, its flags
	// and its nonce.
	offerBytes = preambleBytes + 1 + nonceBytes
	// msgHeaderBytes is a control message's type and body length.
	msgHeaderBytes = 5
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

	// flagKeyed, in the offer and the challenge, says that the end holds
	// a migration key.
	flagKeyed = 1
)

type msgType uint8

// The message types. A refusal keeps its number across major versions, so
// that a destination can refuse a source of another version in a message
// that source reads.
const (
	msgHello msgType = iota + 1
	msgAccept
	msgRefuse
	msgReady
	msgCommit
	msgResumed
	msgChallenge
	msgBind
	msgOwed
	msgOwedBits
	msgFetch
	msgLanded
)

var msgNames = [...]string{msgHello: "hello", msgAccept: "accept", msgRefuse: "refuse", msgReady: "ready",
	msgCommit: "commit", msgResumed: "resumed", msgChallenge: "challenge", msgBind: "bind", msgOwed: "owed",
	msgOwedBits: "page bitmap", msgFetch: "fetch", msgLanded: "landed"}

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
	// StreamID is the caller's half of the stream's id (SendConfig).
	StreamID uint64 `json:"stream_id"`
	// Source names the source host and Mode is the migration's Mode, for
	// the destination's report: the stream says neither. The destination
	// refuses a mode it does not know and cuts Source to
	// maxPeerNameBytes.
	Source string `json:"source"`
	Mode   uint8  `json:"mode"`
	// PostCopy says the source may switch over into post-copy (its
	// Policy's Mode or OnNonConvergence): the list of the pages that
	// follow, empty if it did not, comes after its first stream.
	PostCopy bool `json:"post_copy"`
}

// accept is the destination's yes.
type accept struct {
	Host string `json:"host"`
}

// refusal is why a destination turned a migration down.
type refusal struct {
	Code    string `json:"code"` // one of refusalCodes', or "other"
	Message string `json:"message"`
}

// ready says the destination applied the whole stream, checked its digests
// and restored the devices.
type ready struct {
	// StreamBytes is the length of the stream the destination read,
	// which the source checks against what it wrote.
	StreamBytes int64 `json:"stream_bytes"`
}

// commit tells the destination what to do with the VM it restored.
type commit struct {
	Resume   bool    `json:"resume"`
	Throttle float64 `json:"throttle"`
}

// resumed acknowledges a commit with what the destination did, which the
// source checks against what it asked.
type resumed struct {
	Running  bool    `json:"running"`
	Throttle float64 `json:"throttle"`
}

// The offer and the challenge open the conversation: the version, whether
// each end holds a key, and each end's nonce. They are the only messages
// without a tag (there are no keys before them), and the transcript covers
// them like every other.

// writeOffer writes the source's first message.
func writeOffer(w io.Writer, t *transcript, keyed bool, nonce *[nonceBytes]byte) error {
	var b [offerBytes]byte
	copy(b[:], liveMagic)
	binary.LittleEndian.PutUint16(b[8:], ProtocolMajor)
	binary.LittleEndian.PutUint16(b[10:], ProtocolMinor)
	if keyed {
		b[preambleBytes] = flagKeyed
	}
	copy(b[preambleBytes+1:], nonce[:])
	t.add(b[:])
	_, err := w.Write(b[:])
	return err
}

// offer is the source's first message, read.
type offer struct {
	keyed bool
	nonce [nonceBytes]byte
}

// readPreamble checks the magic and returns the peer's major version and
// the preamble's bytes.
func readPreamble(r io.Reader) (major int, b [preambleBytes]byte, err error) {
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, b, err
	}
	if string(b[:8]) != liveMagic {
		return 0, b, fmt.Errorf("%w: not a live migration (magic %q)", migrate.ErrStream, b[:8])
	}
	return int(binary.LittleEndian.Uint16(b[8:])), b, nil
}

// readOfferRest reads the rest of an offer whose preamble was read.
func readOfferRest(r io.Reader, t *transcript, preamble []byte) (offer, error) {
	var o offer
	var b [1 + nonceBytes]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return o, err
	}
	if b[0]&^flagKeyed != 0 {
		return o, fmt.Errorf("%w: unknown offer flags %#x", migrate.ErrStream, b[0])
	}
	t.add(preamble, b[:])
	o.keyed = b[0]&flagKeyed != 0
	copy(o.nonce[:], b[1:])
	return o, nil
}

// challengeBody is the destination's answer to an offer.
func challengeBody(keyed bool, nonce *[nonceBytes]byte) []byte {
	b := make([]byte, 1+nonceBytes)
	if keyed {
		b[0] = flagKeyed
	}
	copy(b[1:], nonce[:])
	return b
}

// conversation is one end's side of the control messages, on the first
// connection: each message a type, a length, a body and, once the keys
// are set, a tag of the transcript.
type conversation struct {
	w   io.Writer
	r   io.Reader
	end migrate.End
	t   *transcript
	// tagged: the keys are set and every message carries a tag.
	tagged bool
}

// writeRaw writes one message whose body is already encoded.
func (c *conversation) writeRaw(typ msgType, body []byte) error {
	if len(body) > maxControlBytes {
		return fmt.Errorf("%w: %v message of %d bytes", migrate.ErrConfig, typ, len(body))
	}
	msg := make([]byte, msgHeaderBytes, msgHeaderBytes+len(body)+tagBytes)
	msg[0] = byte(typ)
	binary.LittleEndian.PutUint32(msg[1:], uint32(len(body)))
	msg = append(msg, body...)
	c.t.add(msg)
	if c.tagged {
		msg = append(msg, c.t.tag(c.t.send)...)
	}
	_, err := c.w.Write(msg)
	return err
}

// write writes one message with v as its JSON body.
func (c *conversation) write(typ msgType, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.writeRaw(typ, body)
}

// bindBytes is a bind message: its header, the connection's index and its
// tag.
const bindBytes = msgHeaderBytes + 4 + tagBytes

// writeBind opens extra connection i of a migration whose handshake t
// recorded, binding the connection to it.
func writeBind(w io.Writer, t *transcript, i int) error {
	b := make([]byte, msgHeaderBytes, bindBytes)
	b[0] = byte(msgBind)
	binary.LittleEndian.PutUint32(b[1:], 4)
	b = binary.LittleEndian.AppendUint32(b, uint32(i))
	b = append(b, t.bindTag(i)...)
	_, err := w.Write(b)
	return err
}

// readBind checks that extra connection i is this migration's.
func readBind(r io.Reader, t *transcript, i int) error {
	var b [bindBytes]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return err
	}
	if msgType(b[0]) != msgBind || binary.LittleEndian.Uint32(b[1:]) != 4 || binary.LittleEndian.Uint32(b[5:]) != uint32(i) ||
		!hmac.Equal(b[9:], t.bindTag(i)) {
		return fmt.Errorf("%w: connection %d does not open as this migration's", migrate.ErrAuthentication, i)
	}
	return nil
}

// errUnexpectedMsg reports a control message out of turn.
var errUnexpectedMsg = errors.New("unexpected control message")

// readRaw reads one message, which must be of type want or, at the source,
// a refusal (returned as its error), and returns its body. The body is
// checked against its tag before anything else looks at it.
func (c *conversation) readRaw(want msgType) ([]byte, error) {
	_, body, err := c.readOneOf(want)
	return body, err
}

// readOneOf reads one message, which must be of one of the types wants
// or, at the source, a refusal (returned as its error), and returns its
// type and body, checked against its tag.
func (c *conversation) readOneOf(wants ...msgType) (msgType, []byte, error) {
	var h [msgHeaderBytes]byte
	if _, err := io.ReadFull(c.r, h[:]); err != nil {
		return 0, nil, err
	}
	typ, n := msgType(h[0]), binary.LittleEndian.Uint32(h[1:])
	refused := typ == msgRefuse && c.end == migrate.SourceEnd
	if !slices.Contains(wants, typ) && !refused {
		return 0, nil, fmt.Errorf("%w: %w: %v where %v belongs", migrate.ErrStream, errUnexpectedMsg, typ, wants[0])
	}
	if n > maxControlBytes {
		return 0, nil, fmt.Errorf("%w: %v message of %d bytes, limit %d", migrate.ErrStream, typ, n, maxControlBytes)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.r, body); err != nil {
		return 0, nil, err
	}
	c.t.add(h[:], body)
	if c.tagged {
		var tag [tagBytes]byte
		if _, err := io.ReadFull(c.r, tag[:]); err != nil {
			return 0, nil, err
		}
		if !hmac.Equal(tag[:], c.t.tag(c.t.recv)) {
			return 0, nil, fmt.Errorf("%w: %v message with a bad tag: forged, altered, replayed or out of its place", migrate.ErrAuthentication, typ)
		}
	}
	if refused {
		var rf refusal
		if err := decodeStrict(body, &rf); err != nil {
			return 0, nil, fmt.Errorf("%w: unreadable refusal: %v", migrate.ErrRefused, err)
		}
		return 0, nil, rf.err(c.tagged)
	}
	return typ, body, nil
}

// read reads one message of type want and decodes its body into v,
// strictly.
func (c *conversation) read(want msgType, v any) error {
	body, err := c.readRaw(want)
	if err != nil {
		return err
	}
	return decodeMsg(want, body, v)
}

// decodeMsg decodes the body of a message of type typ into v, strictly.
func decodeMsg(typ msgType, body []byte, v any) error {
	if err := decodeStrict(body, v); err != nil {
		return fmt.Errorf("%w: bad %v message: %v", migrate.ErrStream, typ, err)
	}
	return nil
}

// decodeStrict decodes JSON body into v, a pointer to a struct, refusing
// any field v does not have (named exactly, not matched without case as
// encoding/json would), any field of v the body lacks, and anything after
// the value.
func decodeStrict(body []byte, v any) error {
	if err := exactFields(body, reflect.TypeOf(v).Elem()); err != nil {
		return err
	}
	return json.Unmarshal(body, v)
}

// exactFields checks that the JSON object raw has exactly the fields of
// struct type t, and recursively of its struct-typed fields.
func exactFields(raw []byte, t reflect.Type) error {
	if t.Kind() != reflect.Struct {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	if m == nil {
		return errors.New("null where an object belongs")
	}
	known := make(map[string]bool, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if f.Tag.Get("json") == "-" {
			continue // never encoded, as encoding/json has it
		}
		name := f.Name
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag != "" {
			name = tag
		}
		v, ok := m[name]
		if !ok {
			return fmt.Errorf("field %q missing", name)
		}
		if err := exactFields(v, f.Type); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		known[name] = true
	}
	for name := range m {
		if !known[name] {
			return fmt.Errorf("unknown field %q", peerText(name, 64))
		}
	}
	return nil
}

// refusalCodes maps the causes a destination refuses with to their codes
// on the wire (match), and the codes to the sentinels the source returns
// beside ErrRefused (err). Only a version or a configuration refusal may
// come before the keys (preKey), as the only ones a destination can give
// then.
var refusalCodes = []struct {
	code       string
	match, err error
	preKey     bool
}{
	{"version", errVersion, migrate.ErrIncompatible, true},
	{"incompatible", migrate.ErrIncompatible, migrate.ErrIncompatible, false},
	{"busy", migrate.ErrBusy, migrate.ErrBusy, false},
	{"config", migrate.ErrConfig, migrate.ErrConfig, true},
	{"auth", migrate.ErrAuthentication, migrate.ErrAuthentication, false},
	{"stream", migrate.ErrStream, migrate.ErrStream, false},
	{"destination", migrate.ErrDestination, migrate.ErrDestination, false},
}

// errVersion marks a refusal of the source's protocol version.
var errVersion = errors.New("live protocol version")

func refusalOf(cause error) refusal {
	for _, c := range refusalCodes {
		if errors.Is(cause, c.match) {
			return refusal{Code: c.code, Message: cause.Error()}
		}
	}
	return refusal{Code: "other", Message: cause.Error()}
}

// err is the refusal as the source returns it: ErrRefused and the code's
// sentinel, which errors.Is both finds, and the destination's reason said
// once. The reason is the destination's own error text, which names the
// code's sentinel already ("migrate: invalid configuration: ..."); only its
// package prefix goes, as ErrRefused's says it. A refusal read before the
// keys (authenticated false) is nobody's word but its sender's: it says
// so, and only a version or configuration refusal is taken at all.
func (r refusal) err(authenticated bool) error {
	errs := []error{migrate.ErrRefused}
	known := false
	for _, c := range refusalCodes {
		if c.code == r.Code && (authenticated || c.preKey) {
			errs, known = append(errs, c.err), true
			break
		}
	}
	if !authenticated && !known {
		return fmt.Errorf("%w: a refusal (code %q) before the keys, where only a version or configuration refusal can come", migrate.ErrStream, peerText(r.Code, 64))
	}
	why := strings.TrimPrefix(peerText(r.Message, maxPeerMessageBytes), "migrate: ")
	if why == "" {
		why = "no reason given"
	}
	msg := migrate.ErrRefused.Error() + ": " + why
	if !authenticated {
		msg = migrate.ErrRefused.Error() + " (unauthenticated, before the keys): " + why
	}
	return &labeledError{msg: msg, errs: errs}
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
