package har

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// What Read accepts of a HAR: a browser's export of a whole session, with
// its scripts and images, stays well under these.
const (
	// MaxFileBytes bounds a HAR file.
	MaxFileBytes = 64 << 20
	// MaxEntries bounds its entries.
	MaxEntries = 20000
)

// ErrTooLarge is a HAR over MaxFileBytes or MaxEntries.
var ErrTooLarge = errors.New("HAR too large")

// Read reads a HAR document: at most MaxFileBytes of it, with at most
// MaxEntries entries, decoded one at a time so that a file of many small
// entries is refused before they are made. Members it does not use are
// skipped; an entry that makes no sense (a URL that does not parse, no
// method) is kept, and never matches a request.
func Read(r io.Reader) (*File, error) {
	lr := &io.LimitedReader{R: r, N: MaxFileBytes + 1}
	f, err := decode(json.NewDecoder(lr))
	if lr.N <= 0 {
		return nil, fmt.Errorf("%w: more than %d MiB (save only the portal's requests)", ErrTooLarge, MaxFileBytes>>20)
	}
	if err != nil {
		return nil, err
	}
	return f, nil
}

// decode reads {"log": {"version", "creator", "comment", "entries": […]}}.
func decode(dec *json.Decoder) (*File, error) {
	var f File
	found := false
	err := object(dec, func(key string) error {
		if key != "log" {
			return skip(dec)
		}
		return object(dec, func(key string) error {
			switch key {
			case "version":
				return dec.Decode(&f.Log.Version)
			case "creator":
				return dec.Decode(&f.Log.Creator)
			case "comment":
				return dec.Decode(&f.Log.Comment)
			case "entries":
				found = true
				f.Log.Entries = f.Log.Entries[:0]
				return entries(dec, &f.Log.Entries)
			}
			return skip(dec)
		})
	})
	if err == nil && dec.More() {
		err = errors.New("data after the document")
	}
	switch {
	case err != nil:
		return nil, fmt.Errorf("not a HAR: %w", jsonError(err))
	case !found:
		return nil, errors.New("not a HAR: no log.entries")
	}
	return &f, nil
}

// object reads a JSON object, calling member for each key with the decoder
// at its value, which member must consume.
func object(dec *json.Decoder, member func(key string) error) error {
	if err := delim(dec, '{'); err != nil {
		return err
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		key, ok := t.(string)
		if !ok {
			return errors.New("an object key is not a string")
		}
		if err := member(key); err != nil {
			return err
		}
	}
	return delim(dec, '}')
}

// entries reads the entries array, at most MaxEntries of it.
func entries(dec *json.Decoder, out *[]Entry) error {
	if err := delim(dec, '['); err != nil {
		return err
	}
	for dec.More() {
		if len(*out) == MaxEntries {
			return fmt.Errorf("%w: more than %d entries", ErrTooLarge, MaxEntries)
		}
		var e Entry
		if err := dec.Decode(&e); err != nil {
			return fmt.Errorf("entry %d: %w", len(*out), jsonError(err))
		}
		*out = append(*out, e)
	}
	return delim(dec, ']')
}

// delim reads the delimiter want.
func delim(dec *json.Decoder, want json.Delim) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := t.(json.Delim); !ok || d != want {
		return fmt.Errorf("want %q, got a %T", rune(want), t)
	}
	return nil
}

// skip consumes one value, keeping nothing of it.
func skip(dec *json.Decoder) error { return dec.Decode(&ignore{}) }

// ignore is any JSON value, dropped.
type ignore struct{}

func (ignore) UnmarshalJSON([]byte) error { return nil }

// jsonError says where a HAR did not decode, without quoting it.
func jsonError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errors.New("the document ends early")
	case errors.As(err, &se):
		return fmt.Errorf("invalid JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Errorf("%s is a JSON %s, not a %s", te.Field, te.Value, te.Type)
	}
	return err
}

// Write writes f as indented JSON, <, > and & as they are, every list
// that HAR 1.2 requires written, empty when f has none.
func Write(w io.Writer, f *File) error {
	for i := range f.Log.Entries {
		e := &f.Log.Entries[i]
		for _, l := range []*[]NameValue{&e.Request.Headers, &e.Request.QueryString, &e.Response.Headers} {
			if *l == nil {
				*l = []NameValue{}
			}
		}
		for _, l := range []*[]Cookie{&e.Request.Cookies, &e.Response.Cookies} {
			if *l == nil {
				*l = []Cookie{}
			}
		}
	}
	if f.Log.Entries == nil {
		f.Log.Entries = []Entry{}
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(f)
}
