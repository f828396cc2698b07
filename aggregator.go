// Package aggregator holds the domain vocabulary of the multi-jurisdiction
// infractions aggregator: what a query is, what an infraction is, and how
// each source's part of an answer is reported. It imports only the standard
// library and the problem catalogue; every other package builds on it.
package aggregator

// Operation is one kind of call a source portal can answer. Each
// (breaker_key, operation) pair has its own circuit breaker.
type Operation string

// The operations of SPEC 4.1.
const (
	ByDomain Operation = "by_domain"
	ByID     Operation = "by_id"
	Voucher  Operation = "voucher"
)

// Operations lists every operation in a stable order.
var Operations = []Operation{ByDomain, ByID, Voucher}

// Valid reports whether o is one of the known operations.
func (o Operation) Valid() bool {
	switch o {
	case ByDomain, ByID, Voucher:
		return true
	}
	return false
}

// IDKind says whether a person id is a CUIT/CUIL or a DNI.
type IDKind string

// The kinds of person id a query can carry.
const (
	CUIT IDKind = "cuit"
	DNI  IDKind = "dni"
)

// Query is a validated lookup: exactly one of Domain or ID is set, already
// normalised (Domain upper case without separators, ID digits only).
type Query struct {
	Domain string
	ID     string
	IDKind IDKind
}

// Operation is the source operation that answers q.
func (q Query) Operation() Operation {
	if q.Domain != "" {
		return ByDomain
	}
	return ByID
}

// Value is the normalised plate or id the query is about.
func (q Query) Value() string {
	if q.Domain != "" {
		return q.Domain
	}
	return q.ID
}
