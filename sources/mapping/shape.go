package mapping

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/antchfx/xmlquery"
	"golang.org/x/net/html"

	"github.com/multas/aggregator/sources/document"
)

// The shape of an answer (SPEC 13): the structural names its items are
// made of, never a value, so that a source whose portal renamed a member,
// wrapped its items in another object or turned a table into spans can be
// told from one that answers as it always did.
//
// Names are paths below the item: JSON member paths ("/monto",
// "/infracciones/*/desc", an array's elements being "*"), XML element and
// attribute paths ("/importe", "/importe/@moneda"), HTML element paths
// ("/td", "/td/span") and HTML class names (".estado"). A segment that
// holds a digit (array indices, objects keyed by acta number or plate), a
// control character, a "/" or invalid UTF-8, or more than MaxSegment
// bytes, is written "*": a name never carries a plate, a CUIT or a DNI,
// nor any digit at all.
//
// On the JSON fast path, each item's structure is hashed while its
// members are read for the fields (fast.go), and the names of a structure
// already seen come from the mapping's cache: an answer shaped like the
// previous ones costs a few hash steps per member and no allocation.

const (
	// MaxNames bounds the names of a shape.
	MaxNames = 200
	// maxCollected bounds the distinct names collected for one answer,
	// of which the first MaxNames in sorted order are kept.
	maxCollected = 4 * MaxNames
	// MaxSegment bounds a segment of a name, in bytes; longer is "*".
	MaxSegment = 64
	// maxShapeDepth bounds the segments of a name: deeper structure is
	// not named.
	maxShapeDepth = 8
	// maxShapeVisits bounds the nodes visited to name one answer's items
	// (markup and decoded JSON): items beyond it do not add names.
	maxShapeVisits = 1 << 14
	// maxCachedShapes bounds the shapes a mapping remembers; a portal
	// whose every answer is shaped differently starts the cache afresh.
	maxCachedShapes = 256
	// maxDistinct bounds the item structures one answer is hashed into on
	// the fast path; an answer with more is named item by item.
	maxDistinct = 16
)

// Shape is the set of structural names of an answer's items. It is
// immutable: shapes handed out may be shared. The nil *Shape is the
// shape of an answer without items.
type Shape struct {
	names     []string // sorted, distinct
	sum       uint64
	truncated bool
}

// NewShape is the shape made of names (a segment per name is not
// checked: they are taken as names), at most MaxNames of them, the first
// in sorted order.
func NewShape(names []string) *Shape {
	n := slices.Clone(names)
	slices.Sort(n)
	n = slices.Compact(n)
	s := &Shape{names: n}
	if len(n) > MaxNames {
		s.names, s.truncated = n[:MaxNames:MaxNames], true
	}
	s.sum = sumNames(s.names)
	return s
}

// Names lists the names, sorted.
func (s *Shape) Names() []string {
	if s == nil {
		return nil
	}
	return slices.Clone(s.names)
}

// Len is the number of names.
func (s *Shape) Len() int {
	if s == nil {
		return 0
	}
	return len(s.names)
}

// Has reports whether name is one of the shape's.
func (s *Shape) Has(name string) bool {
	if s == nil {
		return false
	}
	_, ok := slices.BinarySearch(s.names, name)
	return ok
}

// Sum identifies the set of names: equal sets have equal sums.
func (s *Shape) Sum() uint64 {
	if s == nil {
		return 0
	}
	return s.sum
}

// Truncated reports whether names were left out to keep MaxNames.
func (s *Shape) Truncated() bool { return s != nil && s.truncated }

// union is the shape of both a and b.
func union(a, b *Shape) *Shape {
	switch {
	case a == nil || a == b:
		return b
	case b == nil || a.sum == b.sum:
		return a
	}
	u := NewShape(append(slices.Clone(a.names), b.names...))
	u.truncated = u.truncated || a.truncated || b.truncated
	return u
}

// sumNames hashes sorted names.
func sumNames(names []string) uint64 {
	h := uint64(fnvOffset)
	for _, n := range names {
		h = mix(h, fnvString(n))
	}
	return h
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
	// Seeds of the structure hash.
	seedObject = 0x6f626a656374
	seedArray  = 0x6172726179
	seedLeaf   = 0x6c656166
	seedStar   = 0x2a2a2a
)

func mix(h, x uint64) uint64 {
	h ^= x
	h *= 0x9E3779B97F4A7C15
	return h ^ h>>32
}

func fnvString(s string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return h
}

// segmentHash hashes a segment as its name would write it: "*" when
// starred.
func segmentHash(seg []byte) uint64 {
	if len(seg) > MaxSegment {
		return seedStar
	}
	h := uint64(fnvOffset)
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		switch {
		case c-'0' < 10, c < 0x20, c == 0x7f, c == '/':
			return seedStar
		case c >= utf8.RuneSelf:
			if starredText(string(seg[i:])) {
				return seedStar
			}
			for ; i < len(seg); i++ {
				h = (h ^ uint64(seg[i])) * fnvPrime
			}
			return h
		}
		h = (h ^ uint64(c)) * fnvPrime
	}
	return h
}

// starred reports whether a segment is written "*".
func starred(seg string) bool {
	if len(seg) > MaxSegment {
		return true
	}
	for i := 0; i < len(seg); i++ {
		if c := seg[i]; c-'0' < 10 || c < 0x20 || c == 0x7f || c == '/' {
			return true
		}
	}
	return starredText(seg)
}

// starredText reports whether text holds invalid UTF-8 (or U+FFFD), a
// digit of any script, or a control or format character.
func starredText(text string) bool {
	for _, r := range text {
		if r == utf8.RuneError || unicode.IsNumber(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return true
		}
	}
	return false
}

// rawHash hashes the structure of the JSON text v as rawNames names it:
// members by their (starred) keys and what they hold, consecutive equal
// members or elements once, so that arrays and objects keyed by acta
// number hash alike whatever their length.
func rawHash(v []byte, depth int) uint64 {
	if depth >= maxShapeDepth || (v[0] != '{' && v[0] != '[') {
		return seedLeaf
	}
	h, prev := uint64(seedObject), uint64(0)
	if v[0] == '[' {
		h = seedArray
	}
	for it := (document.Iterator{B: v, I: 1}); ; {
		x, ok := it.Next()
		if !ok {
			return h
		}
		var eh uint64
		if v[0] == '{' {
			it.I = document.SkipSpace(v, it.I) + 1 // ':'
			val, _ := it.Next()
			eh = memberHash(document.KeyText(x), val, depth)
		} else {
			eh = rawHash(x, depth+1)
		}
		if eh != prev {
			h, prev = mix(h, eh), eh
		}
	}
}

// memberHash hashes one member: its key and what it holds.
func memberHash(key, val []byte, depth int) uint64 {
	return mix(segmentHash(key), rawHash(val, depth+1))
}

// shapeBuilder collects the names of an answer's items.
type shapeBuilder struct {
	set     map[string]struct{}
	names   []string
	full    bool
	path    []byte
	scratch []byte
	visits  int
}

// add records the name in b.path.
func (b *shapeBuilder) add() {
	if b.full {
		return
	}
	if _, ok := b.set[string(b.path)]; ok {
		return
	}
	if len(b.names) == maxCollected {
		b.full = true
		return
	}
	if b.set == nil {
		b.set = make(map[string]struct{})
	}
	name := string(b.path)
	b.set[name] = struct{}{}
	b.names = append(b.names, name)
}

// visit counts one node; false once the answer's budget is spent.
func (b *shapeBuilder) visit() bool {
	b.visits++
	return b.visits <= maxShapeVisits && !b.full
}

// push appends a segment to the path (sep and the segment, or "*") and
// returns the length to restore.
func (b *shapeBuilder) push(sep byte, seg string) int {
	n := len(b.path)
	b.path = append(b.path, sep)
	if starred(seg) {
		b.path = append(b.path, '*')
	} else {
		b.path = append(b.path, seg...)
	}
	return n
}

// shape is what b collected: the first MaxNames names in sorted order,
// whatever the order the items were read in; nil without items.
func (b *shapeBuilder) shape(items bool) *Shape {
	if !items {
		return nil
	}
	s := &Shape{names: b.names, truncated: b.full}
	sort.Strings(s.names)
	if len(s.names) > MaxNames {
		s.names, s.truncated = s.names[:MaxNames:MaxNames], true
	}
	s.sum = sumNames(s.names)
	return s
}

// rawNames names the JSON text v found at b.path.
func (b *shapeBuilder) rawNames(v []byte, depth int) {
	if depth >= maxShapeDepth || (v[0] != '{' && v[0] != '[') {
		return
	}
	for it := (document.Iterator{B: v, I: 1}); ; {
		x, ok := it.Next()
		if !ok || !b.visit() {
			return
		}
		var n int
		if v[0] == '{' {
			n = b.push('/', string(document.KeyText(x)))
			it.I = document.SkipSpace(v, it.I) + 1 // ':'
			x, _ = it.Next()
		} else {
			n = b.push('/', "*")
		}
		b.add()
		b.rawNames(x, depth+1)
		b.path = b.path[:n]
	}
}

// decodedNames names the decoded JSON value v found at b.path.
func (b *shapeBuilder) decodedNames(v any, depth int) {
	if depth >= maxShapeDepth {
		return
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if !b.visit() {
				return
			}
			n := b.push('/', k)
			b.add()
			b.decodedNames(e, depth+1)
			b.path = b.path[:n]
		}
	case []any:
		for _, e := range x {
			if !b.visit() {
				return
			}
			n := b.push('/', "*")
			b.add()
			b.decodedNames(e, depth+1)
			b.path = b.path[:n]
		}
	}
}

// xmlNames names the children and attributes of element e found at
// b.path.
func (b *shapeBuilder) xmlNames(e *xmlquery.Node, depth int) {
	if depth >= maxShapeDepth {
		return
	}
	for _, a := range e.Attr {
		if !b.visit() {
			return
		}
		n := b.push('/', "@"+a.Name.Local)
		b.add()
		b.path = b.path[:n]
	}
	for c := e.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != xmlquery.ElementNode {
			continue
		}
		if !b.visit() {
			return
		}
		n := b.push('/', c.Data)
		b.add()
		b.xmlNames(c, depth+1)
		b.path = b.path[:n]
	}
}

// htmlNames names the child elements of e found at b.path, and every
// class name below e (e's own included).
func (b *shapeBuilder) htmlNames(e *html.Node, depth int) {
	b.htmlClasses(e)
	if depth >= maxShapeDepth {
		return
	}
	for c := e.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.ElementNode {
			continue
		}
		if !b.visit() {
			return
		}
		n := b.push('/', c.Data)
		b.add()
		b.htmlNames(c, depth+1)
		b.path = b.path[:n]
	}
}

func (b *shapeBuilder) htmlClasses(e *html.Node) {
	for _, a := range e.Attr {
		if a.Namespace != "" || a.Key != "class" {
			continue
		}
		for _, cls := range strings.Fields(a.Val) {
			// A class name stands on its own, not below the path.
			saved := b.path
			b.path = b.scratch[:0]
			b.push('.', cls)
			b.add()
			b.scratch, b.path = b.path, saved
		}
	}
}

// itemNames names one item of the general path.
func (b *shapeBuilder) itemNames(n document.Node) {
	if !b.visit() {
		return
	}
	b.path = b.path[:0]
	switch {
	case n.HTML() != nil:
		b.htmlNames(n.HTML(), 0)
	case n.XML() != nil:
		b.xmlNames(n.XML(), 0)
	default:
		b.decodedNames(n.JSON(), 0)
	}
}

// shapeCache remembers the shapes of the item structures a mapping has
// met, by structure hash.
type shapeCache struct {
	mu     sync.RWMutex
	shapes map[uint64]*Shape
}

func (c *shapeCache) get(h uint64) (*Shape, bool) {
	c.mu.RLock()
	s, ok := c.shapes[h]
	c.mu.RUnlock()
	return s, ok
}

func (c *shapeCache) put(h uint64, s *Shape) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shapes == nil || len(c.shapes) >= maxCachedShapes {
		c.shapes = make(map[uint64]*Shape)
	}
	c.shapes[h] = s
}

// fastShape is the item structures one answer met on the fast path.
type fastShape struct {
	n        int
	distinct [maxDistinct]struct {
		h    uint64
		item []byte
	}
	over bool // more than maxDistinct: named item by item
	b    shapeBuilder
}

// item records one item of structure hash h.
func (f *fastShape) item(h uint64, item []byte) {
	if f.over {
		f.b.path = f.b.path[:0]
		f.b.rawNames(item, 0)
		return
	}
	for i := range f.n {
		if f.distinct[i].h == h {
			return
		}
	}
	if f.n == maxDistinct {
		f.over = true
		for i := range f.n {
			f.b.path = f.b.path[:0]
			f.b.rawNames(f.distinct[i].item, 0)
		}
		f.item(h, item)
		return
	}
	f.distinct[f.n].h, f.distinct[f.n].item = h, item
	f.n++
}

// shape is the answer's shape: from the cache when its item structures
// were met before.
func (f *fastShape) shape(c *shapeCache, items bool) *Shape {
	if !items {
		return nil
	}
	if f.over {
		return f.b.shape(true)
	}
	d := f.distinct[:f.n]
	key := d[0].h
	if len(d) > 1 {
		hs := make([]uint64, len(d))
		for i := range d {
			hs[i] = d[i].h
		}
		slices.Sort(hs)
		key = seedArray
		for _, h := range hs {
			key = mix(key, h)
		}
	}
	if s, ok := c.get(key); ok {
		return s
	}
	for i := range d {
		f.b.path = f.b.path[:0]
		f.b.rawNames(d[i].item, 0)
	}
	s := f.b.shape(true)
	c.put(key, s)
	return s
}
