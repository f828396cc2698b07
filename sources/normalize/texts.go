package normalize

import (
	"strings"
	"time"
	"unsafe"
)

// Texts holds the normalised values of one answer: dates, amounts and the
// text copied out of the answer's bytes are strings cut from a few shared
// chunks, so an answer's values cost one allocation between them instead
// of one each. The zero Texts is ready; a nil *Texts gives every value a
// string of its own.
//
// A chunk is only ever appended to: the bytes under a string handed out
// are never written again, which is what makes the strings immutable.
// They share the chunk's lifetime: one value kept keeps its chunk.
type Texts struct {
	buf  []byte
	hint int // the size of the next chunk
}

// Chunk sizes: the first is Reserve's estimate, within these bounds.
const (
	minChunk = 128
	maxChunk = 4 << 10
)

// Reserve sizes the next chunk for about n bytes of values.
func (t *Texts) Reserve(n int) {
	if t != nil {
		t.hint = min(max(n, minChunk), maxChunk)
	}
}

// Clone is a copy of s in t.
func (t *Texts) Clone(s string) string {
	if t == nil {
		return strings.Clone(s)
	}
	return t.add(unsafe.Slice(unsafe.StringData(s), len(s)))
}

// bytes is b as a string.
func (t *Texts) bytes(b []byte) string {
	if t == nil {
		return string(b)
	}
	return t.add(b)
}

// time renders tm as RFC 3339.
func (t *Texts) time(tm time.Time) string {
	var b [len(time.RFC3339) + 16]byte
	return t.bytes(tm.AppendFormat(b[:0], time.RFC3339))
}

func (t *Texts) add(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > cap(t.buf)-len(t.buf) {
		// A new chunk: the full one stays under the strings cut from it.
		size := max(t.hint, minChunk)
		t.hint = min(size*2, maxChunk)
		t.buf = make([]byte, 0, max(size, len(b)))
	}
	start := len(t.buf)
	t.buf = append(t.buf, b...)
	return unsafe.String(&t.buf[start], len(b))
}
