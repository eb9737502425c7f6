package script

import (
	"fmt"
	"strings"
)

// separator divides a command from its expected output; two in a row
// open an output block that may hold blank lines, and two more close it.
const separator = "----"

// testCase is one command of a script and where its expected output lies
// among the file's lines, so that a rewrite replaces exactly that block.
type testCase struct {
	line int    // the command's line, from 1
	text string // the command line as written, for messages
	cmd  string
	args []arg
	// hasSep is false for a command with no separator yet: only a
	// rewrite gives it one.
	hasSep   bool
	expected string
	// outStart and outEnd are the indexes of the output block's lines,
	// [outStart, outEnd): the block a rewrite replaces, the inner
	// separators of the double form included.
	outStart, outEnd int
}

// script is a parsed file: its lines, kept for a rewrite, and its cases.
type script struct {
	path  string
	lines []string
	cases []testCase
}

// blank reports whether a line ends a single-form output block.
func blank(l string) bool { return strings.TrimSpace(l) == "" }

// splitLines splits a file into lines without their line endings; a last
// line ending is not an empty line.
func splitLines(text string) []string {
	text = strings.TrimSuffix(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	if text == "" {
		return nil
	}
	return strings.Split(text, "\n")
}

// parse reads a script. Blank lines and lines starting with # between
// cases are skipped; the lines after a command up to its separator are
// more of its arguments.
func parse(path, text string) (*script, error) {
	s := &script{path: path, lines: splitLines(text)}
	lines := s.lines
	for i := 0; i < len(lines); {
		t := strings.TrimSpace(lines[i])
		if t == "" || strings.HasPrefix(t, "#") {
			i++
			continue
		}
		if t == separator {
			return nil, fmt.Errorf("%s:%d: %w: %s without a command before it", path, i+1, errSyntax, separator)
		}
		c := testCase{line: i + 1, text: t}
		toks, err := tokenize(t)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		c.cmd, c.args = toks[0].key, nil
		if toks[0].vals != nil {
			return nil, fmt.Errorf("%s:%d: %w: command %q has a value", path, i+1, errSyntax, toks[0].key)
		}
		c.args = append(c.args, toks[1:]...)
		for i++; i < len(lines); i++ {
			t := strings.TrimSpace(lines[i])
			if t == separator || t == "" {
				break
			}
			if strings.HasPrefix(t, "#") {
				continue
			}
			toks, err := tokenize(t)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
			}
			c.args = append(c.args, toks...)
		}
		if i == len(lines) || strings.TrimSpace(lines[i]) != separator {
			c.outStart, c.outEnd = i, i
			s.cases = append(s.cases, c)
			continue
		}
		c.hasSep = true
		i++
		if i < len(lines) && strings.TrimSpace(lines[i]) == separator {
			end := closeDouble(lines, i+1)
			if end < 0 {
				return nil, fmt.Errorf("%s:%d: %w: the output block opened by %s%s is never closed", path, c.line, errSyntax, separator, separator)
			}
			c.expected = joinOutput(lines[i+1 : end])
			c.outStart, c.outEnd = i, end+2
			i = end + 2
		} else {
			start := i
			for i < len(lines) && !blank(lines[i]) {
				i++
			}
			c.expected = joinOutput(lines[start:i])
			c.outStart, c.outEnd = start, i
		}
		s.cases = append(s.cases, c)
	}
	return s, nil
}

// closeDouble returns the index of the first of the two separator lines
// that close a double-form block starting at from, or -1.
func closeDouble(lines []string, from int) int {
	for j := from; j+1 < len(lines); j++ {
		if strings.TrimSpace(lines[j]) == separator && strings.TrimSpace(lines[j+1]) == separator {
			return j
		}
	}
	return -1
}

// joinOutput is an output block's lines as one string, each line ending
// in a newline and with its trailing spaces dropped, as normalize leaves
// an actual output.
func joinOutput(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(strings.TrimRight(l, " \t"))
		b.WriteByte('\n')
	}
	return b.String()
}

// normalize makes an actual output comparable with an expected one: each
// line's trailing spaces dropped, a last newline added.
func normalize(out string) string {
	if out == "" {
		return ""
	}
	return joinOutput(strings.Split(strings.TrimSuffix(out, "\n"), "\n"))
}

// outputBlock returns the lines a rewrite writes after a command's
// separator for output out: the single form, or the double form where out
// has a blank line, which would end a single-form block early.
func outputBlock(out string) []string {
	if out == "" {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for _, l := range lines {
		if blank(l) || strings.TrimSpace(l) == separator {
			return append(append([]string{separator}, lines...), separator, separator)
		}
	}
	return lines
}

// rewrite returns the file with each case's output block replaced by its
// actual output; a case with none (the run stopped before it) keeps its
// block.
func (s *script) rewrite(actual []*string) string {
	var out []string
	prev := 0
	for i, c := range s.cases {
		if actual[i] == nil {
			continue
		}
		out = append(out, s.lines[prev:c.outStart]...)
		if !c.hasSep {
			out = append(out, separator)
		}
		out = append(out, outputBlock(*actual[i])...)
		// The block must end at a blank line; a double-form block the
		// rewrite made single would otherwise run into what follows.
		if c.outEnd < len(s.lines) && !blank(s.lines[c.outEnd]) {
			out = append(out, "")
		}
		prev = c.outEnd
	}
	out = append(out, s.lines[prev:]...)
	return strings.Join(out, "\n") + "\n"
}
