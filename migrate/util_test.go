package migrate

import (
	"bytes"
	"encoding/json"
	"runtime"
)

func setProcs(n int) (restore func()) {
	old := runtime.GOMAXPROCS(n)
	return func() { runtime.GOMAXPROCS(old) }
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

func contains(b []byte, s string) bool { return bytes.Contains(b, []byte(s)) }
