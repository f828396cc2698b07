package portalsim

import (
	"net/http"
	"strings"
)

// kind is what a data call asks for; CallStats counts calls by kind.
type kind int

const (
	kindOther kind = iota // not a call the portal knows
	kindByDomain
	kindByID
	kindVoucher
	kindToken   // the OAuth2 token endpoint
	kindSession // the session page
)

// lookup reports whether k is a lookup (by_domain or by_id).
func (k kind) lookup() bool { return k == kindByDomain || k == kindByID }

// operation is one path template of a dialect, as the portal matches it.
type operation struct {
	kind kind
	// query maps each query parameter of the template (each form field of
	// a POST) to its placeholder: "?dominio={domain}" → {"dominio": "domain"}.
	query map[string]string
	// inPath lists the placeholders that are path wildcards.
	inPath []string
}

// route is one ServeMux pattern and the operations that share its method
// and path, told apart by their query parameters (form fields for a POST).
type route struct {
	pattern string
	post    bool
	ops     []operation
}

// routes turns the dialect's templates into ServeMux patterns. A template
// in the aggregator's syntax, "/v1/vehiculos/{domain}/multas" or
// "/api/v2/actas?dominio={domain}", has a path that is already a valid
// pattern (same wildcard syntax) and query values that are placeholders.
func (d *dialect) routes() []route {
	var rs []route
	index := make(map[string]int)
	add := func(k kind, method, template string) {
		if template == "" {
			return
		}
		path, rawQuery, _ := strings.Cut(template, "?")
		op := operation{kind: k, query: make(map[string]string)}
		for _, pair := range strings.Split(rawQuery, "&") {
			if name, value, ok := strings.Cut(pair, "="); ok {
				op.query[name] = placeholder(value)
			}
		}
		for _, seg := range strings.Split(path, "/") {
			if ph := placeholder(seg); ph != "" {
				op.inPath = append(op.inPath, ph)
			}
		}
		pattern := method + " " + path
		i, ok := index[pattern]
		if !ok {
			i = len(rs)
			index[pattern] = i
			rs = append(rs, route{pattern: pattern, post: method == http.MethodPost})
		}
		rs[i].ops = append(rs[i].ops, op)
	}
	lookups := http.MethodGet
	if d.post {
		lookups = http.MethodPost
	}
	add(kindByDomain, lookups, d.byDomain)
	add(kindByID, lookups, d.byID)
	add(kindVoucher, http.MethodGet, d.voucher)
	return rs
}

// placeholder is "name" for "{name}", else "".
func placeholder(s string) string {
	if len(s) > 2 && s[0] == '{' && s[len(s)-1] == '}' {
		return s[1 : len(s)-1]
	}
	return ""
}

// match finds the operation of r among ops (the first whose query
// parameters, or form fields for a POST route, are all present) and the
// values of its placeholders. A POST's form must have been parsed.
func match(rt route, r *http.Request) (operation, map[string]string, bool) {
	ops := rt.ops
	q := r.URL.Query()
	if rt.post {
		q = r.PostForm
	}
	for _, op := range ops {
		vals := make(map[string]string, len(op.query)+len(op.inPath))
		complete := true
		for name, ph := range op.query {
			v := q.Get(name)
			if v == "" {
				complete = false
				break
			}
			vals[ph] = v
		}
		if !complete {
			continue
		}
		for _, ph := range op.inPath {
			vals[ph] = r.PathValue(ph)
		}
		return op, vals, true
	}
	return operation{}, nil, false
}
