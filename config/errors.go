package config

import (
	"fmt"
	"strconv"
	"strings"
)

// Error is one problem found in a configuration.
type Error struct {
	// File is the configuration file's name, when known.
	File string `json:"file,omitempty"`
	// Line is the 1-based line the problem is on, 0 when unknown.
	Line int `json:"line,omitempty"`
	// Key is the path of the offending key, such as
	// sources[2].breaker.failure_ratio; empty for the file as a whole.
	Key string `json:"key,omitempty"`
	// Msg says what is wrong. It never contains a secret.
	Msg string `json:"msg"`
}

// Error formats e as "file:line: key: msg", leaving out what is unknown.
func (e Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			b.WriteString(":" + strconv.Itoa(e.Line))
		}
		b.WriteString(": ")
	} else if e.Line > 0 {
		b.WriteString("line " + strconv.Itoa(e.Line) + ": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in a configuration, in the order found.
type Errors []Error

// Error lists every problem, one per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// add records a problem with key.
func (es *Errors) add(key, format string, args ...any) {
	*es = append(*es, Error{Key: key, Msg: fmt.Sprintf(format, args...)})
}

// child is the key path of key under parent: parent.key, or parent["key"]
// when key is not a plain word.
func child(parent, key string) string {
	if !plainKey(key) {
		return parent + "[" + strconv.Quote(key) + "]"
	}
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// index is the key path of element i of the list at parent.
func index(parent string, i int) string {
	return parent + "[" + strconv.Itoa(i) + "]"
}

// plainKey reports whether key can be written in a path without quotes.
func plainKey(key string) bool {
	if key == "" {
		return false
	}
	for _, r := range key {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// parentPath strips the last segment of a key path; ok is false at the top.
func parentPath(p string) (string, bool) {
	i := strings.LastIndexAny(p, ".[")
	if i <= 0 {
		return "", p != ""
	}
	return p[:i], true
}

// suggest returns the candidate closest to key when it is a likely typo.
func suggest(key string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range candidates {
		if d := editDistance(key, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
