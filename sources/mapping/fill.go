package mapping

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/sources/normalize"
)

// fill normalises the values of one item into inf: the part of mapping
// that every answer format shares. A configured field that holds nothing
// is counted missing; one whose value does not normalise makes the item
// unreadable (the error names the field and its selector, never the
// value: it may be personal data).
func (r *run) fill(vals *[numFields]fieldValue, inf *aggregator.Infraction) error {
	m := r.m
	*inf = aggregator.Infraction{
		Source:       m.opts.Source,
		Jurisdiction: m.opts.Jurisdiction,
		Currency:     m.cur,
		Status:       aggregator.Unknown,
	}
	var firstErr error
	affected := false
	// problem records what happened to field f; a lookup stops at the
	// first value that does not normalise.
	problem := func(f field, why reason, cause string) {
		r.page.Health.unmapped[f][why]++
		affected = affected || why != suspectText
		if r.ins != nil {
			r.ins.problem(r, f, why, vals[f], cause)
		}
		if why == invalid && firstErr == nil {
			firstErr = r.fieldError(f, cause)
		}
	}
	for f := range numFields {
		v := vals[f]
		fs := &m.fields[f]
		switch {
		case v.broken != nil:
			problem(f, invalid, v.broken.Error())
			continue
		case v.notText && !v.present:
			problem(f, invalid, "is not text (an object or an array)")
			continue
		case !v.present:
			if fs.configured {
				problem(f, missing, "")
			}
			if f == fieldID && firstErr == nil {
				// Items without an id make the answer unreadable.
				firstErr = r.fieldError(fieldID, "missing or empty")
			}
			continue
		}
		if !v.fromSet && normalize.Suspect(v.text) {
			problem(f, suspectText, "")
		}
		var err error
		switch f {
		case fieldID:
			if utf8.RuneCountInString(v.text) > normalize.MaxID {
				err = fmt.Errorf("longer than %d characters", normalize.MaxID)
				break
			}
			inf.ID = r.keep(v, v.text)
			if m.opts.VoucherPrefix != "" {
				inf.Voucher = m.opts.VoucherPrefix + url.PathEscape(inf.ID) + "/voucher"
			}
		case fieldDescription:
			inf.Description = r.keep(v, normalize.Text(v.text))
		case fieldPlace:
			inf.Place = r.keep(v, normalize.Text(v.text))
		case fieldCurrency:
			if c := strings.ToUpper(normalize.Text(v.text)); c != m.cur {
				inf.Currency = r.keep(v, c)
			}
		case fieldDate:
			inf.Date, err = r.texts.Date(fs.layouts, v.text, v.number, m.loc, m.opts.Now())
			inf.Date = r.keep(v, inf.Date) // a value already normal may come back as it is
		case fieldAmount:
			inf.Amount, err = r.amount(v, fs)
			inf.Amount = r.keep(v, inf.Amount)
		case fieldUnits:
			var u string
			if u, err = r.amount(v, fs); err == nil {
				inf.Units = &aggregator.Units{Value: r.keep(v, u), Code: fs.code}
			}
		case fieldStatus:
			if !r.status(normalize.Text(v.text), v, inf) {
				problem(f, unknownStatus, "")
				r.page.Health.addUnknown(inf.StatusRaw, 1)
			}
		}
		if err != nil {
			problem(f, invalid, err.Error())
		}
	}
	r.page.Health.seen++
	if affected {
		r.page.Health.affected++
	}
	switch {
	case inf.ID == "" && r.ins != nil && !m.fields[fieldID].configured:
		r.ins.refuse()
	case inf.Units != nil && inf.Amount == "":
		// Units are never passed off as money (SPEC 12): no amount, no
		// currency. Without units, SPEC 3.1 holds: the source's currency.
		inf.Currency = ""
	}
	if r.ins != nil {
		r.ins.done(inf, firstErr != nil)
		return nil
	}
	return firstErr
}

// amount normalises an amount (or units) value.
func (r *run) amount(v fieldValue, fs *fieldSpec) (string, error) {
	if v.number && !v.fromSet {
		return r.texts.Number(v.text)
	}
	s, err := r.texts.Amount(v.text, fs.decimal)
	if errors.Is(err, normalize.ErrAmbiguous) {
		return "", err
	}
	return s, err
}

// status maps the status text raw through the status map into inf; false
// when the map does not know it (the status is then unknown, and
// StatusRaw keeps the text).
func (r *run) status(raw string, v fieldValue, inf *aggregator.Infraction) bool {
	for _, e := range r.m.statuses {
		if e.key == raw {
			inf.Status, inf.StatusRaw = e.status, e.key
			return true
		}
		if strings.EqualFold(e.key, raw) {
			inf.Status, inf.StatusRaw = e.status, r.keep(v, raw)
			return true
		}
	}
	inf.StatusRaw = r.keep(v, raw)
	return len(r.m.statuses) == 0
}

// fieldError describes a field that cannot be read, naming the field and
// its selectors but never its value.
func (r *run) fieldError(f field, reason string) error {
	fs := &r.m.fields[f]
	var where string
	switch {
	case len(fs.columns) > 0:
		where = " (column " + quoteAll(fs.columns) + ")"
	case len(fs.src) > 0:
		where = fmt.Sprintf(" (%q)", strings.Join(fs.src, `", "`))
	}
	return fmt.Errorf("field %s%s: %s", f, where, reason)
}
