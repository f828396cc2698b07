// Package normalize turns the text a portal wrote into the values an
// infraction carries (SPEC 3.1, 9 and 12): amounts, dates, bounded text,
// problem details, and the query subject's forms. It holds pure functions
// over strings, safe for concurrent use; none panics, and none quotes the
// value it refuses in its error (callers show it apart, or not at all).
//
// # Amounts
//
// [Amount] reads an amount written as text and [Number] the literal of a
// JSON number. Both give a decimal string with exactly two decimals
// ("1234.50"), rounded half away from zero on the decimal digits, never
// through binary floating point ("0.005" → "0.01", "-0.005" → "-0.01",
// "2.675" → "2.68"). Zero is "0.00", never "-0.00".
//
// Text is read as:
//
//   - an optional sign ('+', '-' or U+2212 '−'), before or after the
//     currency marks ("-$ 5", "$ -5");
//   - optional currency marks before or after the number: letters,
//     currency symbols and spaces ("$", "ARS", "R$", "U$S", "€", "USD",
//     "100 ARS"); a lone "e" is half an exponent, and is refused;
//   - the digits, with separators. '.' and ',' separate decimals or group
//     thousands; white space (U+00A0 and U+202F non-breaking spaces
//     included) and apostrophes (' and ’) always group thousands. Grouped
//     digits come as a first group of 1 to 3 digits, then groups of
//     exactly 3 ("1.234.567", "1 234", "1'234"); digits after the decimal
//     separator are not grouped;
//   - an exponent ("1.5e3", "1E+2"), only on digits without grouping.
//
// With `decimal` configured ([Point] or [Comma]), that separator separates
// decimals and appears at most once, and the other one groups thousands.
// With [Comma]: "R$ 1.234,56" → "1234.56", "185.000" → "185000.00",
// "12,5" → "12.50", "1 234,5" → "1234.50", and "1.5" does not normalise;
// with [Point]: "185.000" → "185.00", "1,234.56" → "1234.56", and "1,5"
// does not normalise. An exponent then follows digits with at most one
// `decimal` ("1,5e3" with [Comma]).
//
// Without `decimal` ([Unset]), the text tells:
//
//   - when both '.' and ',' appear, the last one separates decimals (and
//     must appear once) and the other groups thousands ("1.234,56",
//     "1,234.56");
//   - a separator that repeats groups thousands ("1.234.567" →
//     "1234567.00");
//   - a separator that appears once followed by exactly three digits is
//     [ErrAmbiguous]: "185.000", "1,234", "$ 185.000", "-1.234", "2.675"
//     and "1234.567" do not normalise, and the operator is told to set
//     `decimal`. Only when nothing but zeros stands before it ("0.005",
//     ".500") is it read as decimals: no group of thousands is zero;
//   - a separator that appears once followed by any other number of digits
//     separates decimals ("1,5" → "1.50", "12.50" → "12.50", "1234.5678" →
//     "1234.57", "5." → "5.00");
//   - plain digits, and digits grouped only by spaces or apostrophes, are
//     integers ("185000", "1 234").
//
// An exponent's mantissa then takes '.' as its decimal separator. A JSON
// number ([Number]) is never ambiguous: "1.234" → "1.23".
//
// Bounds keep hostile input cheap: at most 64 significant digits and 30
// before the decimal separator ("1e999999999" is refused at once, and
// "1e-999999999" is "0.00").
//
// # Dates
//
// [Layouts.Date] gives RFC 3339 with an offset, at seconds precision (a
// fraction of a second is truncated): "2026-03-14T09:12:00-03:00". A time
// with its own offset keeps it; a zone-less one is read in the source's
// time zone; a date without a time is midnight there. Years are 1 to 9999.
//
// Without `layout` (the zero [Layouts]) the default forms are read:
//
//   - ISO 8601: "2006-01-02", optionally followed by 'T' or spaces and a
//     time "15:04", "15:04:05" or "15:04:05.999999999" (',' also introduces
//     the fraction), optionally followed by an offset "Z", "-03:00",
//     "-0300", "-03", "UTC" or "GMT";
//   - day first: "02/01/2006", "02-01-2006" or "02.01.2006" (day and month
//     of one or two digits, a four-digit year), with the same optional time
//     and offset ("4/3/2026 9:05");
//   - a string of nine or more digits: Unix epoch seconds (milliseconds
//     when it exceeds 1e12, as a JSON number);
//   - "/Date(1773490320000)/" and "/Date(1773490320000-0300)/" (ASP.NET):
//     epoch milliseconds, shown at their offset when they have one;
//   - a JSON number: Unix epoch seconds, or milliseconds when its magnitude
//     exceeds 1e12 (a fraction is dropped, "1.77349032e9" is read too).
//
// A `layout` is a list of Unicode TR35 patterns, compiled once by
// [CompileLayouts] and tried in order: the first that reads the whole value
// (white space around the value trimmed) wins. A JSON number is read by
// its literal, like text ("yyyyMMdd" reads 20260314). A pattern is made of:
//
//	d     day, 1 or 2 digits          dd    day, 2 digits
//	M     month, 1 or 2 digits        MM    month, 2 digits
//	MMM   month name (abbreviated or full)
//	MMMM  month name (full or abbreviated)
//	yy    year, 2 digits: within 80 years before and 20 after today (ICU)
//	yyyy  year, 4 digits
//	H     hour 0–23, 1 or 2 digits    HH    hour 0–23, 2 digits
//	h     hour 1–12, 1 or 2 digits    hh    hour 1–12, 2 digits (with a)
//	m     minutes, 1 or 2 digits      mm    minutes, 2 digits
//	s     seconds, 1 or 2 digits      ss    seconds, 2 digits
//	S…    fraction of a second: one or more digits, whatever the count
//	a     AM or PM: "AM", "pm", "a.m.", "P.M.", "p. m." (12 AM is 00:xx)
//	X     offset: "Z", "-03" or "-0300"
//	XX    offset: "Z" or "-0300"
//	XXX   offset: "Z" or "-03:00"
//	'…'   quoted literal text ('às', 'HS', 'T'); '' is a quote
//
// Any other character is literal text. Literals match case and accents
// ignored ('às' reads "AS"), and white space in a pattern reads one or more
// white-space characters (non-breaking spaces too). Any other ASCII letter
// outside quotes is an error, and so are "y", "yyy", fields given twice,
// h without a (or a without h), a pattern without a year, a month and a
// day, minutes without an hour, seconds without minutes, S without
// seconds, a field of variable width (d, M, H, h, m, s, S, X) followed
// directly by digits ("dMyyyy": use "ddMMyyyy"), and a field touching a
// non-ASCII letter (unquoted "às": quote literal text).
//
// Month names are read in Spanish, Portuguese and English, full or
// abbreviated, case and accents ignored, an abbreviation optionally
// followed by '.': ene/jan, feb/fev, mar, abr/apr, may/mai, jun, jul,
// ago/aug, sep/sept/set, oct/out, nov, dic/dez/dec; enero … diciembre
// (setiembre too), janeiro … dezembro (março, Março, MARÇO), january …
// december. No name stands for two months.
//
// Values are checked: the day within its month (leap years included),
// hours 0–23 (1–12 with a), minutes and seconds 0–59.
//
// Two whole-pattern keywords read epochs: "epoch_s" (seconds) and
// "epoch_ms" (milliseconds), from a JSON number or from text written as a
// number ("1773490320", "-86400", "1773490320.5").
//
// Examples: "dd/MM/yyyy 'AS' HH:mm" reads "20/05/2017 AS 16:08";
// "dd/MM/yyyy 'às' HH:mm:ss" reads "10/06/2016 às 12:36:11";
// "d/M/yy HH:mm 'HS'" reads "5/3/24 14:05 HS"; "d 'de' MMMM 'de' yyyy"
// reads "14 de marzo de 2026"; "dd-MMM-yyyy" reads "14-MAR-2026";
// "d MMM yyyy" reads "14 mar. 2026"; "yyyy-MM-dd'T'HH:mm:ssXX" reads
// "2026-03-14T09:12:00-0300"; "MM/dd/yyyy hh:mm a" reads
// "03/14/2026 09:12 PM".
//
// # Text
//
// [Text] cuts a mapped text value to [MaxText] runes, ending a cut one in
// "…"; an id longer than [MaxID] runes does not normalise. [Detail] makes
// portal text a problem's detail: trimmed, white space collapsed, control
// and format characters and invalid UTF-8 removed, at most 200 runes.
// [Suspect] flags U+FFFD, invalid UTF-8 and mojibake ("Ã©", "ï¿½"): the
// charset is wrong. [IsCurrency] tells ISO 4217 codes, which `units.code`
// must not be. [Plate] and [Digits] give a value the form of the query's
// subject, for `match`.
package normalize
