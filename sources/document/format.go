package document

import "fmt"

// Format is the syntax of a document: what its selectors are.
type Format uint8

// The formats of SPEC 8 `response.format`.
const (
	JSON Format = iota
	XML
	HTML
)

// ParseFormat reads a format name; "" is json.
func ParseFormat(s string) (Format, error) {
	switch s {
	case "", "json":
		return JSON, nil
	case "xml":
		return XML, nil
	case "html":
		return HTML, nil
	}
	return JSON, fmt.Errorf("unknown format %q (known: json, xml, html)", s)
}

// String is the configuration name of f.
func (f Format) String() string {
	switch f {
	case XML:
		return "xml"
	case HTML:
		return "html"
	}
	return "json"
}

// Accept is the Accept header of requests whose answers are in format f.
func (f Format) Accept() string {
	switch f {
	case XML:
		return "application/xml, text/xml;q=0.9, */*;q=0.1"
	case HTML:
		return "text/html, application/xhtml+xml;q=0.9, */*;q=0.1"
	}
	return "application/json"
}
