package sources

import "github.com/multas/aggregator"

// The pagination styles of SPEC 8.
const (
	PageStyle   = "page"
	OffsetStyle = "offset"
	CursorStyle = "cursor"
	LinkStyle   = "link"
)

// Pagination says how a lookup follows the pages of an answer (SPEC 8).
type Pagination struct {
	// Style is page, offset, cursor or link; empty means one page.
	Style string
	// Start is the first {page} or {offset}, as given: the configuration
	// supplies the defaults (1 for page, 0 for offset).
	Start int
	// Size is {size}: the page size, by which offset advances.
	Size int
	// Next selects the next cursor (cursor) or the next URL (link; without
	// it, the RFC 8288 Link rel="next" header).
	Next string
	// MaxPages bounds the pages of one lookup; more is a source-error.
	MaxPages int
}

// scope is what the templates of operation op may use.
func (spec *Spec) scope(op aggregator.Operation) scope {
	sc := scope{op: op}
	switch spec.Pagination.Style {
	case PageStyle:
		sc.paging[paramPage], sc.paging[paramSize] = true, true
	case OffsetStyle:
		sc.paging[paramOffset], sc.paging[paramSize] = true, true
	case CursorStyle:
		sc.paging[paramCursor], sc.paging[paramSize] = true, true
	case LinkStyle:
		sc.paging[paramSize] = true
	}
	sc.sessions = spec.Auth.sessionNames()
	return sc
}
