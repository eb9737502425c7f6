package script

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// arg is one key of a command: key=value, key=(v1, v2) or a bare key.
type arg struct {
	key  string
	vals []string // nil for a bare key
}

// tokenize splits a line into its words, a quoted value or a parenthesized
// list being one word with its spaces.
func tokenize(line string) ([]arg, error) {
	var out []arg
	for i := 0; i < len(line); {
		if line[i] == ' ' || line[i] == '\t' {
			i++
			continue
		}
		start, depth, quoted := i, 0, false
	scan:
		for ; i < len(line); i++ {
			c := line[i]
			switch {
			case c == '"':
				quoted = !quoted
			case quoted:
			case c == '(':
				depth++
			case c == ')':
				depth--
				if depth < 0 {
					return nil, fmt.Errorf("%w: unbalanced ) in %q", errSyntax, line[start:])
				}
			case (c == ' ' || c == '\t') && depth == 0:
				break scan
			}
		}
		if quoted || depth != 0 {
			return nil, fmt.Errorf("%w: unterminated quote or parenthesis in %q", errSyntax, line[start:])
		}
		a, err := parseWord(line[start:i])
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: empty line", errSyntax)
	}
	return out, nil
}

// parseWord reads one word: a bare key, key=value or key=(v1, v2).
func parseWord(w string) (arg, error) {
	key, val, ok := strings.Cut(w, "=")
	if !validKey(key) {
		return arg{}, fmt.Errorf("%w: %q is not a key (letters, digits, '-', '_' and '.')", errSyntax, key)
	}
	if !ok {
		return arg{key: key}, nil
	}
	if strings.HasPrefix(val, "(") && strings.HasSuffix(val, ")") {
		vals := []string{}
		for _, v := range strings.Split(val[1:len(val)-1], ",") {
			if v = unquote(strings.TrimSpace(v)); v != "" {
				vals = append(vals, v)
			}
		}
		return arg{key: key, vals: vals}, nil
	}
	if strings.ContainsAny(val, "()") && !strings.HasPrefix(val, `"`) {
		return arg{}, fmt.Errorf("%w: misplaced parenthesis in %q", errSyntax, w)
	}
	return arg{key: key, vals: []string{unquote(val)}}, nil
}

// unquote drops the double quotes around a value that has them.
func unquote(v string) string {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return v[1 : len(v)-1]
	}
	return v
}

// validKey reports whether k may be a key or a command's name.
func validKey(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// args are a command's keys, checked against the keys it takes before it
// runs. Its getters keep the first error, so that a command reads every
// key and then checks once.
type args struct {
	cmd   string
	byKey map[string]arg
	err   error
}

// newArgs checks a command's keys: each one it takes, none twice.
func newArgs(cmd string, list []arg, keys []string) (*args, error) {
	a := &args{cmd: cmd, byKey: map[string]arg{}}
	for _, x := range list {
		if !slices.Contains(keys, x.key) {
			return nil, fmt.Errorf("%w: %s takes no key %q (it takes: %s)", errUnknownKey, cmd, x.key, strings.Join(keys, " "))
		}
		if _, dup := a.byKey[x.key]; dup {
			return nil, fmt.Errorf("%w: %s: %q given twice", errUnknownKey, cmd, x.key)
		}
		a.byKey[x.key] = x
	}
	return a, nil
}

// has reports whether the command was given key.
func (a *args) has(key string) bool { _, ok := a.byKey[key]; return ok }

// fail keeps err if it is the first.
func (a *args) fail(err error) {
	if a.err == nil {
		a.err = err
	}
}

// raw returns a key's one value; ok is false if the key is absent.
func (a *args) raw(key string) (string, bool) {
	x, ok := a.byKey[key]
	if !ok {
		return "", false
	}
	if len(x.vals) != 1 {
		a.fail(fmt.Errorf("%w: %s: %s wants one value", errBadValue, a.cmd, key))
		return "", false
	}
	return x.vals[0], true
}

// str returns a key's value, or def if it is absent.
func (a *args) str(key, def string) string {
	if v, ok := a.raw(key); ok {
		return v
	}
	return def
}

// need returns a key's value, failing if it is absent.
func (a *args) need(key string) string {
	if !a.has(key) {
		a.fail(fmt.Errorf("%w: %s needs %s=", errMissingKey, a.cmd, key))
		return ""
	}
	return a.str(key, "")
}

// list returns a key's values, one or a parenthesized list.
func (a *args) list(key string) []string {
	x, ok := a.byKey[key]
	if ok && x.vals == nil {
		a.fail(fmt.Errorf("%w: %s: %s wants a value", errBadValue, a.cmd, key))
	}
	return x.vals
}

// parsed reads a key with parse, or returns def if it is absent.
func parsed[T any](a *args, key string, def T, what string, parse func(string) (T, error)) T {
	v, ok := a.raw(key)
	if !ok {
		return def
	}
	x, err := parse(v)
	if err != nil {
		a.fail(fmt.Errorf("%w: %s: %s=%s is not %s", errBadValue, a.cmd, key, v, what))
		return def
	}
	return x
}

// flag reads a boolean: a bare key is true, key=false false.
func (a *args) flag(key string) bool {
	x, ok := a.byKey[key]
	if ok && x.vals == nil {
		return true // a bare key is true
	}
	return parsed(a, key, false, "true or false", strconv.ParseBool)
}

// int reads an integer in [lo, hi].
func (a *args) int(key string, def, lo, hi int) int {
	return parsed(a, key, def, fmt.Sprintf("an integer in [%d, %d]", lo, hi), func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err == nil && (n < lo || n > hi) {
			err = errBadValue
		}
		return n, err
	})
}

// uint reads an unsigned integer, in any base strconv reads (0x...).
func (a *args) uint(key string, def uint64) uint64 {
	return parsed(a, key, def, "an unsigned integer", func(s string) (uint64, error) { return strconv.ParseUint(s, 0, 64) })
}

// float reads a number in [lo, hi].
func (a *args) float(key string, def, lo, hi float64) float64 {
	return parsed(a, key, def, fmt.Sprintf("a number in [%g, %g]", lo, hi), func(s string) (float64, error) {
		f, err := strconv.ParseFloat(s, 64)
		if err == nil && !(f >= lo && f <= hi) {
			err = errBadValue
		}
		return f, err
	})
}

// dur reads a non-negative duration.
func (a *args) dur(key string, def time.Duration) time.Duration {
	return parsed(a, key, def, "a non-negative duration (time.ParseDuration)", func(s string) (time.Duration, error) {
		d, err := time.ParseDuration(s)
		if err == nil && d < 0 {
			err = errBadValue
		}
		return d, err
	})
}

// size reads a byte count (parseSize).
func (a *args) size(key string, def int64) int64 {
	return parsed(a, key, def, "a size (4096, 64KiB, 1.5GiB)", parseSize)
}

// rate reads bytes per second, written as a size with or without "/s".
func (a *args) rate(key string, def int64) int64 {
	return parsed(a, key, def, "a rate (4MiB/s)", func(s string) (int64, error) { return parseSize(strings.TrimSuffix(s, "/s")) })
}

// bits reads a line rate in bits per second (parseBits).
func (a *args) bits(key string, def int64) int64 {
	return parsed(a, key, def, "a bit rate (100Mbit, 10Gb/s, 25e9)", parseBits)
}
