package tabular

import (
	"flag"
	"strings"
)

// CSVFlag is the examples' -csv flag, which may stand alone (the table as
// CSV on standard output instead of aligned columns) or carry a file name
// (the table printed as usual, and also written as CSV to the file). It
// is a boolean flag to the flag package, so that -csv alone parses;
// -csv=FILE sets the file, and ParseFlags takes the FILE of "-csv FILE".
type CSVFlag struct {
	set  bool
	path string // "" or "-" for standard output
}

// String returns the file named, if any.
func (c *CSVFlag) String() string { return c.path }

// Set records -csv ("true", alone), its absence ("false") or its file.
func (c *CSVFlag) Set(v string) error {
	switch v {
	case "true": // -csv alone
		c.set, c.path = true, ""
	case "false":
		c.set, c.path = false, ""
	default:
		c.set, c.path = true, v
	}
	return nil
}

// IsBoolFlag lets -csv stand alone.
func (c *CSVFlag) IsBoolFlag() bool { return true }

// Given reports whether -csv was given, alone or with a file.
func (c CSVFlag) Given() bool { return c.set }

// ToStdout reports whether the CSV replaces the printed table: -csv alone,
// or -csv -.
func (c CSVFlag) ToStdout() bool { return c.set && (c.path == "" || c.path == "-") }

// Path is the file the CSV goes to ("" or "-": standard output), for
// WriteFile.
func (c CSVFlag) Path() string { return c.path }

// ParseFlags parses args with fs and, where -csv (c, which fs must name
// "csv") stood alone and the next argument is not a flag, takes that
// argument as its file and parses on after it.
func ParseFlags(fs *flag.FlagSet, c *CSVFlag, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if rest := fs.Args(); c.set && c.path == "" && len(rest) > 0 &&
		(rest[0] == "-" || !strings.HasPrefix(rest[0], "-")) && csvFlagLast(args, len(args)-len(rest)) {
		c.path = rest[0]
		return fs.Parse(rest[1:])
	}
	return nil
}

// csvFlagLast reports whether the argument just before args[i] is -csv (or
// --csv) with no value.
func csvFlagLast(args []string, i int) bool {
	return i > 0 && (args[i-1] == "-csv" || args[i-1] == "--csv")
}
