package portalsim

import (
	"bytes"
	"fmt"
	"strings"
)

// voucherPDF renders the payment voucher of rec: a one-page PDF, small
// but well formed (its cross-reference table points at its objects). It
// names the jurisdiction and the infraction, never the plate or the person.
func voucherPDF(jurisdiction string, rec Record) []byte {
	currency := rec.Currency
	if currency == "" {
		currency = "ARS"
	}
	lines := []string{
		"Boleta de pago - " + jurisdiction,
		"Acta " + rec.ID + " del " + recordTime(rec.Date).Format("02/01/2006"),
		rec.Description,
		"Importe: " + currency + " " + rec.Amount,
		"Documento simulado, sin validez.",
	}
	var text strings.Builder
	text.WriteString("BT /F1 12 Tf 72 770 Td 16 TL\n")
	for _, l := range lines {
		fmt.Fprintf(&text, "(%s) '\n", pdfString(l))
	}
	text.WriteString("ET\n")
	objects := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%sendstream", text.Len(), text.String()),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objects))
	for i, o := range objects {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objects)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objects)+1, xref)
	return b.Bytes()
}

// pdfString escapes s for a PDF literal string in WinAnsiEncoding: Latin-1
// letters (á, ñ) become their single byte, anything else beyond it "?".
func pdfString(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '(' || r == ')' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		case r >= 0xa0 && r <= 0xff:
			fmt.Fprintf(&b, "\\%03o", r)
		default:
			b.WriteByte('?')
		}
	}
	return b.String()
}

// safeFileName keeps the characters of an infraction id that are safe in a
// Content-Disposition file name.
func safeFileName(id string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, id)
}
