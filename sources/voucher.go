package sources

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
)

// DefaultVoucherTypes are the media types a voucher may have when
// Spec.VoucherTypes is empty (SPEC 9 `voucher_types`).
var DefaultVoucherTypes = []string{"application/pdf", "image/png", "image/jpeg"}

// DefaultVoucherMaxBytes bounds a voucher when Spec.VoucherMaxBytes is zero
// (SPEC 9 `voucher_max_bytes`, 10 MiB).
const DefaultVoucherMaxBytes = 10 << 20

// ErrVoucherTooLarge is the error of a Read of a voucher's body once more
// than the source's voucher_max_bytes came: the voucher must not be
// relayed whole, and what was relayed of it must be cut off.
var ErrVoucherTooLarge = errors.New("voucher larger than voucher_max_bytes")

// voucherPolicy is what a source relays as a voucher.
type voucherPolicy struct {
	types []string // lower case, without parameters
	max   int64
}

// compileVoucherPolicy checks a source's voucher_types and
// voucher_max_bytes, with their defaults.
func compileVoucherPolicy(types []string, max int64) (voucherPolicy, error) {
	var errs []error
	p := voucherPolicy{max: max}
	switch {
	case max < 0:
		errs = append(errs, errors.New("voucher_max_bytes: negative"))
	case max == 0:
		p.max = DefaultVoucherMaxBytes
	}
	if len(types) == 0 {
		types = DefaultVoucherTypes
	}
	for _, t := range types {
		mt, ok := bareMediaType(t)
		if !ok {
			errs = append(errs, fmt.Errorf("voucher_types: %q is not a media type such as application/pdf (no parameters, no wildcards)", t))
			continue
		}
		if !slices.Contains(p.types, mt) {
			p.types = append(p.types, mt)
		}
	}
	return p, errors.Join(errs...)
}

// bareMediaType returns s in lower case when it is type/subtype, both
// tokens, without parameters or wildcards.
func bareMediaType(s string) (string, bool) {
	typ, sub, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok || !isToken(typ) || !isToken(sub) || strings.Contains(s, "*") {
		return "", false
	}
	return strings.ToLower(typ + "/" + sub), true
}

// check reads the head of a 2xx voucher answer: its media type must be one
// of the policy's and its announced length within the bound. The error
// never quotes an unparsable Content-Type: it comes from the portal.
func (p voucherPolicy) check(resp *http.Response) (*Voucher, error) {
	ct := resp.Header.Get("Content-Type")
	if strings.TrimSpace(ct) == "" {
		return nil, errors.New("voucher without a Content-Type")
	}
	mt, params, err := mime.ParseMediaType(ct)
	if errors.Is(err, mime.ErrInvalidMediaParameter) {
		err, params = nil, nil // a sound media type with broken parameters: they are dropped
	}
	if err != nil || !strings.Contains(mt, "/") {
		return nil, errors.New("voucher with an unparsable Content-Type")
	}
	if !slices.Contains(p.types, mt) {
		// mt is made of tokens (ParseMediaType checked it): safe to quote.
		return nil, fmt.Errorf("voucher media type %s is not one of the source's voucher_types", mt)
	}
	if resp.ContentLength > p.max {
		return nil, fmt.Errorf("voucher of %d bytes, larger than voucher_max_bytes (%d)", resp.ContentLength, p.max)
	}
	relayed := mime.FormatMediaType(mt, params)
	if relayed == "" {
		relayed = mt // parameters that cannot be written back are dropped
	}
	return &Voucher{
		ContentType: relayed,
		MediaType:   mt,
		Body:        &limitedBody{body: resp.Body, left: p.max},
		Length:      resp.ContentLength,
	}, nil
}

// limitedBody yields at most left more bytes of body; the Read that would
// go past them returns what fits and ErrVoucherTooLarge, as does every
// Read after it.
type limitedBody struct {
	body io.ReadCloser
	left int64 // < 0 once the limit was passed
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, ErrVoucherTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1] // one byte more than allowed tells "too large"
	}
	n, err := b.body.Read(p)
	if int64(n) > b.left {
		n = int(b.left)
		b.left = -1
		return n, ErrVoucherTooLarge
	}
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.body.Close() }
