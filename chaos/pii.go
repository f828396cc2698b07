package chaos

import (
	"bytes"
	"fmt"
	"net/url"
	"sync/atomic"
)

// piiScanner finds the run's plates and CUITs, in every form the workers
// send them, in any text: log lines, metrics, admin and coverage answers.
type piiScanner struct {
	needles   [][]byte // upper case
	texts     atomic.Int64
	lines     atomic.Int64
	onFinding func(where, needle, context string)
}

func newPIIScanner(p *people, onFinding func(where, needle, context string)) *piiScanner {
	s := &piiScanner{onFinding: onFinding}
	seen := map[string]bool{}
	add := func(v string) {
		v = string(bytes.ToUpper([]byte(v)))
		if !seen[v] {
			seen[v] = true
			s.needles = append(s.needles, []byte(v))
		}
	}
	for _, pl := range p.plates {
		for _, f := range plateForms(pl) {
			// As sent, and as a logged URL would write it.
			add(f)
			add(url.QueryEscape(f))
			add(url.PathEscape(f))
		}
	}
	for _, c := range p.cuits {
		add(c)
		add(dashedCUIT(c))
	}
	return s
}

// scan reports every needle found in text, with where it was.
func (s *piiScanner) scan(where string, text []byte) int {
	s.texts.Add(1)
	upper := bytes.ToUpper(text)
	found := 0
	for _, n := range s.needles {
		if i := bytes.Index(upper, n); i >= 0 {
			found++
			lo, hi := max(0, i-120), min(len(text), i+len(n)+120)
			s.onFinding(where, string(n), string(text[lo:hi]))
		}
	}
	return found
}

// writer is an io.Writer of log lines that scans each line written.
func (s *piiScanner) writer(where string) *scanWriter { return &scanWriter{s: s, where: where} }

type scanWriter struct {
	s     *piiScanner
	where string
}

// Write scans p, one or more whole lines (slog handlers and log.Logger
// write a record at a time).
func (w *scanWriter) Write(p []byte) (int, error) {
	w.s.lines.Add(int64(bytes.Count(p, []byte("\n"))))
	w.s.scan(w.where, p)
	return len(p), nil
}

func piiDetail(where, needle, context string) string {
	return fmt.Sprintf("%s holds %q: …%s…", where, needle, context)
}
