package config

import (
	"strings"
	"unicode"

	"github.com/andybalholm/cascadia"
	"github.com/antchfx/xpath"
	"golang.org/x/net/html/charset"
)

// The checks of this file mirror what package sources compiles (its
// format.go documents the selectors); a test in sources keeps the two in
// agreement.

// validateFormat checks response.format, charset, namespaces, not_found
// and unavailable. It reports whether the format is known, so that the
// selectors can be checked in it.
func validateFormat(errs *Errors, p string, r Response) (known bool) {
	switch r.Format {
	case "json", "xml", "html":
		known = true
	default:
		errs.add(child(p, "format"), "want json, xml or html, got %q", r.Format)
	}
	if r.Charset != "" {
		if e, _ := charset.Lookup(r.Charset); e == nil {
			errs.add(child(p, "charset"), "unknown character encoding %q (want a label such as utf-8, windows-1252 or iso-8859-1)", r.Charset)
		}
	}
	np := child(p, "namespaces")
	if len(r.Namespaces) > 0 && r.Format != "xml" {
		errs.add(np, "only with format: xml (XPath prefixes)")
	}
	for _, prefix := range sortedKeys(r.Namespaces) {
		switch {
		case !ncName(prefix):
			errs.add(child(np, prefix), "%q is not a namespace prefix (an XML name without ':')", prefix)
		case r.Namespaces[prefix] == "":
			errs.add(child(np, prefix), "empty namespace URI")
		}
	}
	for _, m := range [...]struct{ key, text string }{{"not_found", r.NotFound}, {"unavailable", r.Unavailable}} {
		if m.text == "" || !known {
			continue
		}
		if msg := checkSelector(r.Format, r.Namespaces, m.text); msg != "" {
			errs.add(child(p, m.key), "%s", msg)
		}
	}
	return known
}

// checkItems describes what is wrong with response.items in format, or is
// empty: xml and html need one, selecting elements.
func checkItems(format string, namespaces map[string]string, text string) string {
	switch {
	case format == "json":
	case text == "":
		return "required with format: " + format
	case format == "html":
		if _, attr := splitAttr(text); attr != "" {
			return `selects item elements: "@attr" is for fields`
		}
	}
	return checkSelector(format, namespaces, text)
}

// checkSelector describes what is wrong with a selector of format, or is
// empty: an RFC 6901 pointer (json), an XPath 1.0 expression whose
// prefixes are all declared (xml), a CSS selector with an optional "@attr"
// ("" and "." being the item itself; html).
func checkSelector(format string, namespaces map[string]string, text string) string {
	switch format {
	case "xml":
		if text == "" {
			text = "."
		}
		ns := namespaces
		if ns == nil {
			ns = map[string]string{}
		}
		if _, err := xpath.CompileWithNS(text, ns); err != nil {
			return "not an XPath 1.0 expression: " + err.Error()
		}
	case "html":
		if strings.HasSuffix(text, "@") {
			return `"@" must be followed by an attribute name`
		}
		sel, _ := splitAttr(text)
		if sel = strings.TrimSpace(sel); sel == "" || sel == "." {
			return ""
		}
		if _, err := cascadia.ParseGroup(sel); err != nil {
			return "not a CSS selector: " + err.Error()
		}
	default:
		return checkPointer(text)
	}
	return ""
}

// splitAttr splits "sel@attr" when what follows the last '@' is an
// attribute name.
func splitAttr(text string) (sel, attr string) {
	i := strings.LastIndexByte(text, '@')
	if i < 0 || i == len(text)-1 {
		return text, ""
	}
	for _, r := range text[i+1:] {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("-_:.", r) {
			return text, ""
		}
	}
	return text[:i], text[i+1:]
}

// ncName reports whether s is an XML name without a colon.
func ncName(s string) bool {
	for i, r := range s {
		switch {
		case unicode.IsLetter(r), r == '_':
		case i > 0 && (unicode.IsDigit(r) || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return s != ""
}
