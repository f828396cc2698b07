package mapping

import (
	"bytes"
	"fmt"
	"unsafe"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/sources/document"
)

// The fast path: a JSON answer whose items are one array that a pointer
// leads to, and whose fields are each one pointer, is mapped by walking
// its text in place (document's raw JSON functions), without decoding it
// into Go values: only the values the mapping asks for ever become
// strings. It gives exactly what the general path gives (a test runs
// every JSON mapping both ways).

// fastPath decides whether the mapping can take the fast path.
func (c *compiler) fastPath(r Response) {
	m := c.m
	if m.format != document.JSON || len(m.unwrap) > 0 || len(m.entries) != 1 || m.match != nil ||
		len(m.rules) > 0 || m.notFound != nil || m.unavail != nil || m.columns {
		return
	}
	e := &m.entries[0]
	p, ok := e.sel.Pointer()
	if e.embedded || !ok {
		return
	}
	for f := range numFields {
		sels := e.sels.fields[f]
		if !m.fields[f].configured {
			continue
		}
		if len(sels) != 1 {
			return
		}
		fp, ok := sels[0].Pointer()
		if !ok {
			return
		}
		m.fastSels[f] = fp
	}
	m.fast, m.fastItems = true, p
}

// fastJSON maps a JSON answer in place.
func (r *run) fastJSON(body []byte) error {
	m := r.m
	doc := bytes.TrimPrefix(body, []byte("\uFEFF")) // a byte order mark, as some portals send
	if err := document.ValidJSON(doc); err != nil {
		return err
	}
	r.budget = 8*len(doc) + 64<<10
	r.fastPath = true
	v, found := m.fastItems.Resolve(doc[document.SkipSpace(doc, 0):])
	switch {
	case !found:
		return fmt.Errorf("items pointer %q: %w", m.fastItems, document.ErrItemsNotFound)
	case document.IsNull(v):
		return nil
	case v[0] != '[':
		return fmt.Errorf("items pointer %q does not lead to an array", m.fastItems)
	}
	e := &m.entries[0]
	for it := (document.Iterator{B: v, I: 1}); ; {
		item, ok := it.Next()
		if !ok {
			return nil
		}
		i := r.page.Items
		if r.page.Items++; r.page.Items > m.maxItems {
			return fmt.Errorf("the answer holds more than %d items (response.max_items)", m.maxItems)
		}
		if r.page.Infractions == nil {
			// Room for as many items as the first one's size suggests.
			n := min(len(v)/(len(item)+1)+1, 64)
			r.page.Infractions = make([]aggregator.Infraction, 0, n)
			r.texts.Reserve(n * textPerItem)
		}
		var vals [numFields]fieldValue
		r.fast.item(r.fieldValues(item, e, &vals), item)
		if r.budget < 0 {
			return errTooMuchText
		}
		var inf aggregator.Infraction
		if err := r.fill(&vals, &inf); err != nil {
			return r.itemError(i, err)
		}
		r.page.Infractions = append(r.page.Infractions, inf)
		r.page.Health.Mapped++
	}
}

// fieldValues finds the value of every mapped field in item, and returns
// the hash of the item's structure (shape.go). For an object item it
// reads the item once, matching each member against the first token of
// every field's pointer, and hashing the member on the way.
func (r *run) fieldValues(item []byte, e *entry, vals *[numFields]fieldValue) (shape uint64) {
	m := r.m
	var raw [numFields][]byte
	objectFields := false
	for f := range numFields {
		switch {
		case !m.fields[f].configured:
		case item[0] == '{' && len(m.fastSels[f].Tokens) > 0:
			objectFields = true
		default:
			raw[f] = notNull(m.fastSels[f].Resolve(item))
		}
	}
	if objectFields {
		shape = seedObject
		var prev uint64
		for it := (document.Iterator{B: item, I: 1}); ; {
			k, ok := it.Next()
			if !ok {
				break
			}
			it.I = document.SkipSpace(item, it.I) + 1 // ':'
			v, _ := it.Next()
			key := document.KeyText(k)
			// As rawHash does, so that both tell the same structures apart.
			if mh := memberHash(key, v, 0); mh != prev {
				shape, prev = mix(shape, mh), mh
			}
			for f := range numFields {
				p := m.fastSels[f]
				if m.fields[f].configured && len(p.Tokens) > 0 && string(key) == p.Tokens[0] {
					// The last of duplicate members wins, as in encoding/json.
					raw[f] = notNull(document.Pointer{Tokens: p.Tokens[1:]}.Resolve(v))
				}
			}
		}
	}
	for f := range numFields {
		if b := raw[f]; b != nil {
			text, val, _ := document.TextOf(b)
			if val.NotText {
				vals[f].notText = true
			} else {
				// The text is read in place, not copied: fill copies what
				// an infraction keeps, and nothing else holds it.
				vals[f] = r.value(unsafe.String(unsafe.SliceData(text), len(text)), val.Number)
				vals[f].alias = vals[f].present
			}
		}
		vals[f] = e.orSet(f, vals[f])
	}
	if !objectFields {
		shape = rawHash(item, 0)
	}
	return shape
}

// notNull is the value a pointer found, or nil when it found nothing or
// null.
func notNull(v []byte, found bool) []byte {
	if !found || document.IsNull(v) {
		return nil
	}
	return v
}
