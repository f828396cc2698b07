package sources

import (
	"bytes"
	"encoding/json"
	"math/big"
	"net/http"
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/multas/aggregator"
)

// amountFormat is what every normalised amount looks like.
var amountFormat = regexp.MustCompile(`^-?(0|[1-9][0-9]*)\.[0-9]{2}$`)

func FuzzMap(f *testing.F) {
	for _, seed := range []string{
		oneItem,
		`{"resultado": {"actas": null}}`,
		`{"resultado": null}`,
		`{"resultado": {"actas": [{"nro": 1, "monto": 1.5e3, "fecha": 1773490320000, "estado": true}]}}`,
		`{"resultado": {"actas": [{"nro": "x", "monto": "$ 1.234,565", "fecha": "14/03/2026 09:12", "moneda": " usd "}]}}`,
		`{"resultado": {"actas": [{"nro": "x", "monto": "1e999999999"}]}}`,
		`{"resultado": {"actas": [{"nro": "x", "fecha": "2026-03-14T09:12:00.123+05:30"}]}}`,
		`{"resultado": {"actas": [{"nro": {"a": [1, 2]}}]}}`,
		`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
		`{"resultado": {"actas": []}} trailing`,
		``,
	} {
		f.Add([]byte(seed))
	}
	spec := testSpec("http://portal")
	s, err := New(spec, nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		infractions, err := s.mapping.apply(doc)
		if err != nil {
			return
		}
		if len(infractions) > len(doc) {
			t.Fatalf("%d infractions from %d bytes", len(infractions), len(doc))
		}
		for _, inf := range infractions {
			checkInfraction(t, inf)
		}
	})
}

// checkInfraction checks the invariants of a normalised infraction.
func checkInfraction(t *testing.T, inf aggregator.Infraction) {
	t.Helper()
	if inf.ID == "" || inf.Source != "caba" || !inf.Status.Valid() {
		t.Errorf("bad infraction %+v", inf)
	}
	if inf.Amount != "" && !amountFormat.MatchString(inf.Amount) {
		t.Errorf("amount %q is not a two-decimal string", inf.Amount)
	}
	if inf.Date != "" {
		if _, err := time.Parse(time.RFC3339, inf.Date); err != nil || len(inf.Date) > len("2006-01-02T15:04:05-07:00") {
			t.Errorf("date %q is not RFC 3339 at seconds precision", inf.Date)
		}
	}
}

// plainDecimal is the subset of amounts that math/big can check.
var plainDecimal = regexp.MustCompile(`^-?[0-9]{1,25}(\.[0-9]{1,25})?$`)

// FuzzFormatAmount checks formatAmount against a math/big reference on
// plain decimals, and its output format on everything.
func FuzzFormatAmount(f *testing.F) {
	for _, seed := range []string{"0.005", "-0.005", "2.675", "1e2", "1.234,565", "$ 1.234,56", "999.995", "-0", "1e-3", "1,234.5"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, ok := formatAmount(in)
		if ok && !amountFormat.MatchString(got) {
			t.Fatalf("formatAmount(%q) = %q", in, got)
		}
		if !plainDecimal.MatchString(in) {
			return
		}
		if want := referenceAmount(in); !ok || got != want {
			t.Fatalf("formatAmount(%q) = %q, %v; want %q", in, got, ok, want)
		}
	})
}

// referenceAmount rounds a plain decimal half away from zero with math/big.
func referenceAmount(s string) string {
	r, _ := new(big.Rat).SetString(s)
	neg := r.Sign() < 0
	r.Abs(r)
	r.Mul(r, big.NewRat(100, 1))
	r.Add(r, big.NewRat(1, 2))
	cents := new(big.Int).Quo(r.Num(), r.Denom()) // floor(|x|·100 + 1/2)
	text := cents.String()
	for len(text) < 3 {
		text = "0" + text
	}
	if neg && cents.Sign() != 0 {
		text = "-" + text
	}
	return text[:len(text)-2] + "." + text[len(text)-2:]
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, seed := range []string{"120", "0", "-1", "", "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "99999999999999999999999", "1.5"} {
		f.Add(seed)
	}
	now := time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := ParseRetryAfter(v, now)
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v", v, d, ok)
		}
	})
}

func FuzzParseRateLimit(f *testing.F) {
	for _, seed := range []string{`"default";r=0;t=30`, `default;r=5`, `"a";r=0;t=5, "b";r=100;t=60`, `limit=10, remaining=0, reset=30`, `("a" "b");r=1;t=2`, `"a\"b";r=0;t=1`, `"x`, `(((`, `;;;`, `r=0`, `"a";t=1.5;r=0`} {
		f.Add(seed, "0", "30")
	}
	f.Fuzz(func(t *testing.T, field, remaining, reset string) {
		h := http.Header{}
		h.Set("RateLimit", field)
		h.Set("RateLimit-Remaining", remaining)
		h.Set("RateLimit-Reset", reset)
		r, d, ok := ParseRateLimit(h)
		if r < 0 || d < 0 || (!ok && (r != 0 || d != 0)) {
			t.Fatalf("ParseRateLimit(%q, %q, %q) = %d, %v, %v", field, remaining, reset, r, d, ok)
		}
	})
}

// FuzzResolve checks the in-place JSON walk against encoding/json: on any
// valid document, a pointer finds the same value as it does in the
// document decoded into maps and slices.
func FuzzResolve(f *testing.F) {
	for _, seed := range []struct{ doc, ptr string }{
		{`{"a": {"b/c": [10, {"d~e": "x"}]}}`, "/a/b~1c/1/d~0e"},
		{`{"a": 1, "a": {"b": 2}}`, "/a/b"},
		{`{"k\u00e9y": "v", "k\\\"": 1}`, "/kéy"},
		{`[[], [1, [2, "]"]]]`, "/1/1/1"},
		{`{"a": null}`, "/a/b/c"},
		{`{"\ud800": 1}`, "/\ufffd"},
		{" [ 1 , 2 ] ", "/1"},
		{`"\\\\\""`, ""},
		{`[1e400, {"a": -0.0}]`, "/0"},
	} {
		f.Add([]byte(seed.doc), seed.ptr)
	}
	f.Fuzz(func(t *testing.T, doc []byte, ptr string) {
		p, err := compilePointer(ptr)
		if err != nil || !json.Valid(doc) {
			return
		}
		got, found := p.resolve(doc[skipSpace(doc, 0):])
		v, err := decodeNumbers(doc)
		if err != nil {
			t.Fatalf("valid document does not decode: %v", err)
		}
		want, wantFound := resolveDecoded(p, v)
		if found != wantFound {
			t.Fatalf("resolve(%q) in %q: found = %v, want %v", ptr, doc, found, wantFound)
		}
		if !found {
			return
		}
		gotV, err := decodeNumbers(got)
		if err != nil {
			t.Fatalf("resolve(%q) in %q = %q, not a JSON value: %v", ptr, doc, got, err)
		}
		if !reflect.DeepEqual(gotV, want) {
			t.Fatalf("resolve(%q) in %q = %q, want %v", ptr, doc, got, want)
		}
	})
}

// decodeNumbers decodes a JSON value keeping numbers as their literals,
// which never overflow.
func decodeNumbers(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// resolveDecoded is the reference walk of p over a decoded document, with
// the same treatment of null.
func resolveDecoded(p pointer, v any) (any, bool) {
	for _, tok := range p.tokens {
		switch node := v.(type) {
		case nil:
			return nil, true
		case map[string]any:
			next, ok := node[tok]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			i, ok := arrayIndex(tok)
			if !ok || i >= len(node) {
				return nil, false
			}
			v = node[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// FuzzFormatDate checks that every date accepted comes out as RFC 3339
// with an offset, at seconds precision.
func FuzzFormatDate(f *testing.F) {
	for _, seed := range []string{"2026-03-14T09:12:00-03:00", "2026-03-14", "14/03/2026 09:12", "1773490320", "/Date(1773490320000-0300)/", "2026-03-14T09:12:00.5+05:30", "29/02/2024"} {
		f.Add(seed)
	}
	loc := mustLocation("America/Argentina/Buenos_Aires")
	f.Fuzz(func(t *testing.T, in string) {
		got, ok := formatDate(in, loc)
		if !ok {
			return
		}
		if _, err := time.Parse(time.RFC3339, got); err != nil || len(got) > len("2006-01-02T15:04:05-07:00") {
			t.Fatalf("formatDate(%q) = %q, not RFC 3339 at seconds precision", in, got)
		}
	})
}
