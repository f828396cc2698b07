package watch

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// Bounds of decoded values: far beyond what the package writes.
const (
	maxName    = 256  // an owner's name, a source id
	maxText    = 4096 // a problem's members, a URL
	maxSources = 1000
)

// decodeWatch decodes the document of watch id, as stored (SPEC 9: Redis
// contents are untrusted). A document is accepted only when it decodes
// into what this package writes, for that id, with values within their
// ranges and times that can be written back; anything else is absent.
func decodeWatch(doc []byte, id string) (*Watch, bool) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	var w Watch
	if dec.Decode(&w) != nil || dec.More() || !w.valid(id) {
		return nil, false
	}
	return &w, true
}

func (w *Watch) valid(id string) bool {
	if w.ID != id || !ValidID(id) || w.Owner == "" || !validText(w.Owner, maxName) || !validHash(w.SubjectHash) ||
		len(w.Sources) > maxSources || !validCallback(w.CallbackURL) || w.Interval <= 0 ||
		w.CreatedAt.IsZero() || !validTime(w.CreatedAt) || w.NextCheckAt.IsZero() || !validTime(w.NextCheckAt) ||
		w.LastCheckAt != nil && !validTime(*w.LastCheckAt) || len(w.Status) > maxSources {
		return false
	}
	for _, s := range w.Sources {
		if s == "" || !validText(s, maxName) {
			return false
		}
	}
	for _, s := range w.Status {
		if s.Source == "" || !validText(s.Source, maxName) || s.LastSuccessAt != nil && !validTime(*s.LastSuccessAt) {
			return false
		}
		if p := s.Problem; p != nil && (p.Status < 400 || p.Status > 599 || p.RetryAfter != nil && *p.RetryAfter < 0 ||
			!validText(p.Type, maxText) || !validText(p.Title, maxText) || !validText(p.Detail, maxText) ||
			!validText(p.Instance, maxText) || len(p.InvalidParams) > 0 || p.RequestID != "") {
			return false
		}
	}
	if c := w.Check; c != nil {
		if !validTime(c.Due) || !validTime(c.Started) || !validTime(c.Until) || c.Until.Before(c.Started) || len(c.Parts) > maxSources {
			return false
		}
		for _, p := range c.Parts {
			if p.Source == "" || !validText(p.Source, maxName) || p.Tries < 0 || !validTime(p.LastTry) || !validTime(p.NextTry) {
				return false
			}
		}
	}
	return true
}

// validHash reports whether h has the shape of a subject's HMAC.
func validHash(h string) bool {
	b, err := hex.DecodeString(h)
	return err == nil && len(b) == 16 && hex.EncodeToString(b) == h
}

// validCallback reports whether raw has the shape of an accepted callback
// URL (the address it reaches is checked when it is dialled).
func validCallback(raw string) bool {
	if len(raw) > 2048 {
		return false
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Hostname() == "" || u.User != nil {
		return false
	}
	s := strings.ToLower(u.Scheme)
	return s == "http" || s == "https"
}

// validTime reports whether t can be encoded again (RFC 3339 years 0–9999).
func validTime(t time.Time) bool {
	y := t.Year()
	return y >= 0 && y <= 9999
}

func validText(s string, n int) bool { return len(s) <= n && utf8.ValidString(s) }
