package document

import "testing"

// Declared names the encoding an answer is read in, whatever its format.
func TestDeclared(t *testing.T) {
	t.Parallel()
	tests := []struct{ body, contentType, want string }{
		{`{"a": "Córdoba"}`, "application/json", "utf-8"},
		{`{"a": 1}`, "application/json; charset=ISO-8859-1", "windows-1252"},
		{`<html><head><meta charset="windows-1252"></head>`, "text/html", "windows-1252"},
		{`<html><head><meta http-equiv="Content-Type" content="text/html; charset=iso-8859-15">`, "", "iso-8859-15"},
		{`<html><head><meta charset="utf-16">`, "text/html", "utf-8"},
		{`<?xml version="1.0" encoding="ISO-8859-1"?><a/>`, "text/xml", "windows-1252"},
		{`<?xml version="1.0" encoding="ISO-8859-1"?><a/>`, "text/xml; charset=utf-8", "utf-8"},
		{"\xef\xbb\xbf<a/>", "text/xml; charset=windows-1252", "utf-8"},
		{"plain", "", "utf-8"},
	}
	for _, tt := range tests {
		if got := Declared([]byte(tt.body), tt.contentType); got != tt.want {
			t.Errorf("Declared(%q, %q) = %q, want %q", tt.body, tt.contentType, got, tt.want)
		}
	}
}
