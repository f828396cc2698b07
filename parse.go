package aggregator

import (
	"errors"

	"github.com/multas/aggregator/problem"
)

// ErrInvalid is wrapped by every parse error of this package.
var ErrInvalid = errors.New("invalid")

// ParseDomain validates and normalises an Argentine plate (SPEC 3.1).
func ParseDomain(s string) (string, error) { return "", ErrInvalid }

// ParseID validates and normalises a CUIT/CUIL or DNI (SPEC 3.1).
func ParseID(s string) (string, IDKind, error) { return "", "", ErrInvalid }

// NewQuery builds a Query from the raw `domain` and `id` inputs; present
// says whether each was given at all. It returns every bad parameter.
func NewQuery(domain, id string, hasDomain, hasID bool) (Query, []problem.InvalidParam) {
	return Query{}, nil
}
