package readmecheck

import (
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	output := "heading\n\nh1  h2\na   1   \nb   2\nc   3\n\nnote one\nnote two\n"
	for _, c := range []struct {
		name  string
		block string
		ok    bool
	}{
		{"whole", strings.TrimSuffix(output, "\n"), true},
		{"the table", "h1  h2\na   1\nb   2\nc   3", true},
		{"elided rows", "h1  h2\na   1\n...\nc   3\n...\nnote two", true},
		{"a row left out without an elision", "h1  h2\na   1\nc   3", false},
		{"a figure changed", "h1  h2\na   1\nb   4", false},
		{"out of order", "c   3\n...\na   1", false},
		{"a line the output lacks", "h1  h2\n...\nd   4", false},
		{"blank line left out", "c   3\nnote one", false},
	} {
		err := Match(strings.Split(c.block, "\n"), output)
		if (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok %v", c.name, err, c.ok)
		}
	}
}

func TestBlock(t *testing.T) {
	readme := []byte("# x\n\n### demo: what it shows\n\n```sh\ngo run ./examples/demo\n```\n\n```\nline 1\n...\n```\n\n### other: more\n\n```\nnot this\n```\n")
	got := Block(t, readme, "demo")
	if strings.Join(got, "|") != "line 1|..." {
		t.Fatalf("block %q", got)
	}
}

func TestDiff(t *testing.T) {
	err := Match([]string{"h1  h2", "a   9"}, "h1  h2\na   1\n")
	if err == nil || !strings.Contains(err.Error(), "a   9") || !strings.Contains(err.Error(), "a   1") {
		t.Fatalf("error %v, want a diff of the changed line", err)
	}
}
