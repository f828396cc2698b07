package sources

import (
	"bytes"
	"fmt"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/charset"
	"golang.org/x/text/encoding"
)

// Character encodings (SPEC 8 `response.charset`). Labels are the WHATWG
// ones (golang.org/x/net/html/charset): "iso-8859-1" and "latin1" are
// windows-1252, as browsers read them.

// sniffLength is how much of an answer's start is searched for an XML
// prolog or an HTML meta charset, as HTML's prescan does.
const sniffLength = 1024

// compileCharset looks label up; "" and every name of UTF-8 compile to
// nil, meaning no decoding is configured.
func compileCharset(label string) (encoding.Encoding, error) {
	if strings.TrimSpace(label) == "" {
		return nil, nil
	}
	e, name := charset.Lookup(label)
	if e == nil {
		return nil, fmt.Errorf("unknown character encoding %q", label)
	}
	if name == "utf-8" {
		return nil, nil
	}
	return e, nil
}

// toUTF8 returns body as UTF-8. Its encoding is enc when given, else the
// first of: a byte order mark, the Content-Type's charset, the XML prolog's
// encoding (xml) or a meta charset in the first 1024 bytes (html), and
// UTF-8. Unknown labels are passed over. A UTF-8 byte order mark is
// dropped. The result is body itself when it needs no decoding.
func toUTF8(f format, enc encoding.Encoding, body []byte, contentType string) ([]byte, error) {
	name := ""
	if enc == nil {
		enc, name = bomEncoding(body)
	}
	if enc == nil {
		enc, name = charset.Lookup(charsetParam(contentType))
	}
	if enc == nil && f == formatXML {
		enc, name = charset.Lookup(prologEncoding(body))
	}
	if enc == nil && f == formatHTML {
		enc, name = charset.Lookup(metaCharset(body))
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

// isUTF8Label reports whether a charset label means UTF-8; "" (no label)
// does too.
func isUTF8Label(label string) bool {
	return label == "" || strings.EqualFold(label, "utf-8") || strings.EqualFold(label, "utf8")
}

// charsetParam returns the charset parameter of a Content-Type, without
// quotes; "" when it has none. It does not allocate.
func charsetParam(contentType string) string {
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
			if label := charsetParam(content); pragma && label != "" {
				return label
			}
		}
	}
}
