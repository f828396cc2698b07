package document

import (
	"bytes"
	"fmt"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/charset"
	"golang.org/x/text/encoding"
)

// Character encodings (SPEC 8 `response.charset`, SPEC 9). Labels are the
// WHATWG Encoding ones (golang.org/x/net/html/charset), read as browsers
// read them: "iso-8859-1" and "latin1" are windows-1252, and a document
// that declares UTF-16 inside itself (a <meta> or an XML prolog, which
// are ASCII bytes and so cannot be UTF-16) is read as UTF-8.

// sniffLength is how much of an answer's start is searched for an XML
// prolog or an HTML meta charset, as HTML's prescan does.
const sniffLength = 1024

// Charset is a configured character encoding; the zero value reads what
// each answer declares.
type Charset struct {
	enc  encoding.Encoding // nil: UTF-8, when set
	name string
	set  bool
}

// ParseCharset looks up a WHATWG label; "" is the zero Charset. Any label,
// utf-8 included, forces that encoding over what the answers declare.
func ParseCharset(label string) (Charset, error) {
	label = strings.TrimSpace(label)
	if label == "" {
		return Charset{}, nil
	}
	e, name := charset.Lookup(label)
	if e == nil {
		return Charset{}, fmt.Errorf("unknown character encoding %q (want a label such as utf-8, windows-1252 or iso-8859-1)", label)
	}
	if name == "utf-8" {
		e = nil
	}
	return Charset{enc: e, name: name, set: true}, nil
}

// IsSet reports whether c was configured.
func (c Charset) IsSet() bool { return c.set }

// String is the encoding's WHATWG name, or "" when not configured.
func (c Charset) String() string { return c.name }

// ToUTF8 returns body as UTF-8. Its encoding is c when configured, else
// the first of: a byte order mark, the Content-Type's charset, the XML
// prolog's encoding (xml) or a meta charset in the first 1024 bytes
// (html), and UTF-8. Unknown labels are passed over. A UTF-8 byte order
// mark is dropped. The result is body itself when it needs no decoding.
func ToUTF8(f Format, c Charset, body []byte, contentType string) ([]byte, error) {
	enc, name := c.enc, c.name
	if !c.set {
		enc, name = detect(f, body, contentType)
	}
	if enc == nil || name == "utf-8" {
		return bytes.TrimPrefix(body, []byte("\uFEFF")), nil
	}
	out, err := enc.NewDecoder().Bytes(body)
	if err != nil {
		return nil, fmt.Errorf("decoding the answer's characters: %w", err)
	}
	return bytes.TrimPrefix(out, []byte("\uFEFF")), nil
}

// Declared is the WHATWG name of the encoding ToUTF8 reads body in when no
// charset is configured, whatever its format (an XML prolog and an HTML
// meta are both looked for): "utf-8" when it declares none.
func Declared(body []byte, contentType string) string {
	f := HTML
	if bytes.HasPrefix(body, []byte("<?xml")) {
		f = XML
	}
	if _, name := detect(f, body, contentType); name != "" {
		return name
	}
	return "utf-8"
}

// detect finds the encoding an answer declares, as ToUTF8 documents.
func detect(f Format, body []byte, contentType string) (encoding.Encoding, string) {
	if enc, name := bomEncoding(body); enc != nil {
		return enc, name
	}
	if enc, name := charset.Lookup(CharsetParam(contentType)); enc != nil {
		return enc, name
	}
	var declared string
	switch f {
	case XML:
		declared = prologEncoding(body)
	case HTML:
		declared = metaCharset(body)
	}
	enc, name := charset.Lookup(declared)
	switch name {
	case "utf-16le", "utf-16be":
		// The declaration was read as ASCII: the document is not UTF-16.
		return nil, "utf-8"
	case "x-user-defined":
		return charset.Lookup("windows-1252")
	}
	return enc, name
}

// bomEncoding is the encoding a byte order mark at the start of body says.
func bomEncoding(body []byte) (encoding.Encoding, string) {
	switch {
	case bytes.HasPrefix(body, []byte{0xEF, 0xBB, 0xBF}):
		return charset.Lookup("utf-8")
	case bytes.HasPrefix(body, []byte{0xFE, 0xFF}):
		return charset.Lookup("utf-16be")
	case bytes.HasPrefix(body, []byte{0xFF, 0xFE}):
		return charset.Lookup("utf-16le")
	}
	return nil, ""
}

// IsUTF8 reports whether an answer with this Content-Type is read as
// UTF-8 without decoding when c is not configured: no charset, or UTF-8.
func (c Charset) IsUTF8(contentType string) bool {
	if c.set {
		return c.enc == nil
	}
	label := CharsetParam(contentType)
	return label == "" || strings.EqualFold(label, "utf-8") || strings.EqualFold(label, "utf8")
}

// CharsetParam returns the charset parameter of a Content-Type, without
// quotes; "" when it has none. It does not allocate.
func CharsetParam(contentType string) string {
	for rest := contentType; ; {
		semi := strings.IndexByte(rest, ';')
		if semi < 0 {
			return ""
		}
		rest = strings.TrimLeft(rest[semi+1:], " \t")
		name, value, ok := strings.Cut(rest, "=")
		if !ok {
			return ""
		}
		if !strings.EqualFold(strings.TrimRight(name, " \t"), "charset") {
			continue
		}
		value = strings.TrimLeft(value, " \t")
		if len(value) > 0 && value[0] == '"' {
			value, _, _ = strings.Cut(value[1:], `"`)
			return value
		}
		if end := strings.IndexAny(value, "; \t"); end >= 0 {
			value = value[:end]
		}
		return value
	}
}

// prologEncoding returns the encoding declared by an XML prolog at the
// start of body (<?xml version="1.0" encoding="ISO-8859-1"?>), or "".
func prologEncoding(body []byte) string {
	if !bytes.HasPrefix(body, []byte("<?xml")) {
		return ""
	}
	decl := body[:min(len(body), sniffLength)]
	end := bytes.Index(decl, []byte("?>"))
	if end < 0 {
		return ""
	}
	decl = decl[len("<?xml"):end]
	i := bytes.Index(decl, []byte("encoding"))
	if i < 0 {
		return ""
	}
	rest := bytes.TrimLeft(decl[i+len("encoding"):], " \t\r\n")
	if len(rest) == 0 || rest[0] != '=' {
		return ""
	}
	rest = bytes.TrimLeft(rest[1:], " \t\r\n")
	if len(rest) == 0 || (rest[0] != '"' && rest[0] != '\'') {
		return ""
	}
	value, _, ok := bytes.Cut(rest[1:], rest[:1])
	if !ok {
		return ""
	}
	return string(value)
}

// metaCharset returns the encoding named by the first <meta charset> or
// <meta http-equiv="Content-Type" content="…; charset=…"> in the first
// 1024 bytes of an HTML body, or "".
func metaCharset(body []byte) string {
	z := html.NewTokenizer(bytes.NewReader(body[:min(len(body), sniffLength)]))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return ""
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			if string(name) != "meta" {
				continue
			}
			var pragma bool
			var content string
			for hasAttr {
				var key, val []byte
				key, val, hasAttr = z.TagAttr()
				switch string(key) {
				case "charset":
					if label := strings.TrimSpace(string(val)); label != "" {
						return label
					}
				case "http-equiv":
					pragma = strings.EqualFold(strings.TrimSpace(string(val)), "content-type")
				case "content":
					content = string(val)
				}
			}
			if label := CharsetParam(content); pragma && label != "" {
				return label
			}
		}
	}
}
