package server

import (
	"net/http"
	"strings"

	"github.com/multas/aggregator/sources"
)

// voucherCSP keeps a relayed voucher inert even if a browser renders it:
// no script, no plugin, no request, no same-origin access (SPEC 9).
const voucherCSP = "sandbox; default-src 'none'"

// maxFilenameID bounds the infraction id's part of a voucher's file name.
const maxFilenameID = 100

// voucherHeaders sets the headers of a relayed voucher: the portal's
// content type (already checked against the source's voucher_types), and
// what keeps a browser from sniffing, running or displaying it in our
// origin: nosniff, a sandboxing Content-Security-Policy, and a download
// with a file name made of the source and the infraction id.
func voucherHeaders(h http.Header, source, infractionID string, v *sources.Voucher) {
	h.Set("Content-Type", v.ContentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", voucherCSP)
	h.Set("Content-Disposition", `attachment; filename="`+voucherFilename(source, infractionID, v.MediaType)+`"`)
}

// clearVoucherHeaders drops what voucherHeaders set, before a problem is
// written in the voucher's place.
func clearVoucherHeaders(h http.Header) {
	for _, k := range []string{"Content-Type", "X-Content-Type-Options", "Content-Security-Policy", "Content-Disposition"} {
		h.Del(k)
	}
}

// voucherFilename is "<source>-<infraction id>.<ext>", in safe ASCII: any
// byte other than a letter, a digit, '-', '_' or '.' becomes '_' (so no
// quote, backslash, separator or control character reaches the header, and
// no path either), the id is cut at maxFilenameID bytes, and the extension
// follows the media type. Being plain ASCII, the name needs no RFC 6266
// filename* form.
func voucherFilename(source, infractionID, mediaType string) string {
	var b strings.Builder
	b.Grow(len(source) + 1 + min(len(infractionID), maxFilenameID) + 5)
	safe(&b, source, len(source))
	b.WriteByte('-')
	safe(&b, infractionID, maxFilenameID)
	b.WriteString(extension(mediaType))
	return b.String()
}

// safe writes at most max bytes of s to b, each byte outside [A-Za-z0-9._-]
// as '_', and so is a dot that would begin the part.
func safe(b *strings.Builder, s string, max int) {
	if len(s) > max {
		s = s[:max]
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
		case c == '.' && i > 0:
		default:
			c = '_'
		}
		b.WriteByte(c)
	}
}

// extension is the file name extension of a voucher's media type; none for
// a type this table does not know.
func extension(mediaType string) string {
	switch mediaType {
	case "application/pdf":
		return ".pdf"
	case "image/png":
		return ".png"
	case "image/jpeg":
		return ".jpg"
	case "image/gif":
		return ".gif"
	case "image/webp":
		return ".webp"
	case "image/tiff":
		return ".tif"
	case "image/bmp":
		return ".bmp"
	}
	return ""
}
