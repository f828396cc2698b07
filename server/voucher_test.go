package server

import (
	"mime"
	"strings"
	"testing"
)

func TestVoucherFilename(t *testing.T) {
	t.Parallel()
	tests := []struct{ source, id, media, want string }{
		{"caba", "Q-10442", "application/pdf", "caba-Q-10442.pdf"},
		{"caba", "A-10442/2026 b", "image/png", "caba-A-10442_2026_b.png"},
		{"caba", "Q.1", "image/jpeg", "caba-Q.1.jpg"},
		{"caba", "../../etc/passwd", "application/pdf", "caba-_._.._etc_passwd.pdf"},
		{"caba", `x"; filename*=UTF-8''evil.html`, "application/pdf", "caba-x___filename__UTF-8__evil.html.pdf"},
		{"caba", "a\r\nSet-Cookie: x=1", "application/pdf", "caba-a__Set-Cookie__x_1.pdf"},
		{"caba", "Ñandú", "application/pdf", "caba-__and__.pdf"},
		{"caba", "", "image/svg+xml", "caba-"},
		{"caba", strings.Repeat("x", 500), "application/pdf", "caba-" + strings.Repeat("x", maxFilenameID) + ".pdf"},
	}
	for _, tt := range tests {
		if got := voucherFilename(tt.source, tt.id, tt.media); got != tt.want {
			t.Errorf("voucherFilename(%q, %q, %q) = %q, want %q", tt.source, tt.id, tt.media, got, tt.want)
		}
	}
}

// Whatever the infraction id, the Content-Disposition header is one
// attachment whose file name is safe ASCII, starts with the source, is
// bounded, and parses back unchanged.
func FuzzVoucherFilename(f *testing.F) {
	for _, id := range []string{"Q-10442", "A/1", `"`, "..", "\x00\xff", "é", strings.Repeat("ab", 80)} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id string) {
		name := voucherFilename("caba", id, "application/pdf")
		if !strings.HasPrefix(name, "caba-") || !strings.HasSuffix(name, ".pdf") || len(name) > len("caba-")+maxFilenameID+len(".pdf") {
			t.Fatalf("%q: file name %q", id, name)
		}
		for i := 0; i < len(name); i++ {
			c := name[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
				t.Fatalf("%q: file name %q holds %q", id, name, c)
			}
		}
		disp, params, err := mime.ParseMediaType(`attachment; filename="` + name + `"`)
		if err != nil || disp != "attachment" || params["filename"] != name || len(params) != 1 {
			t.Fatalf("%q: Content-Disposition parses as %q %v (%v)", id, disp, params, err)
		}
	})
}
