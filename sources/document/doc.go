// Package document parses portals' answers (JSON, XML, HTML) and
// evaluates the selectors that configurations write into them (SPEC 8,
// 12): RFC 6901 JSON pointers and RFC 9535 JSONPath for JSON, XPath 1.0
// for XML, CSS selectors for HTML.
//
//	sel, err := document.Compile(document.HTML, nil, "input[name=__RequestVerificationToken]@value")
//	…
//	d, err := document.Parse(ctx, document.HTML, document.Charset{}, body, resp.Header.Get("Content-Type"))
//	v, ok, err := d.First(sel, d.Root()) // the value of the first match, as text
//
// Selectors, by format:
//
//   - json: an RFC 6901 pointer ("" or starting with "/"), or an RFC 9535
//     JSONPath (starting with "$"; "$" is the context: the document, or
//     an item). A pointer gives one value; a JSONPath every node it
//     selects. As values, strings read as their text (trimmed), numbers as
//     their literal, booleans as true or false; null reads as absent;
//     objects and arrays are present but not text.
//   - xml: an XPath 1.0 expression, compiled with the configured
//     namespaces. A prefixed name (m:acta) matches its namespace URI, and
//     an undeclared prefix is a compile error; an unprefixed name matches
//     its local name in any namespace (SOAP answers often put their items
//     in a default namespace). A value is the string value of a node
//     selected (trimmed), or the expression's own value when it is a
//     string, number or boolean. "" is ".", the context node.
//   - html: a CSS selector (groups with ',' allowed), optionally followed
//     by "@attr" to read attribute attr of the matches instead of their
//     text. Text is the element's text content, trimmed, with every run of
//     white space (non-breaking spaces included) collapsed to one space. A
//     selector matches descendants of its context (the document, or an
//     item); "" and "." are the context element itself, and "@attr" (no
//     selector) reads the context element's own attribute. The selectors
//     are cascadia's: CSS Level 3 and the extensions :contains("text")
//     (case-sensitive text content), :containsOwn(), :matches(regexp),
//     :matchesOwn(), :has(selector), :haschild(selector), :not(), :empty,
//     :root, :first-of-type/:last-of-type/:only-of-type/:only-child, the
//     :nth-* family, :input, :checked, :disabled, :enabled, :selected.
//
// Presence (not_found, unavailable, errors rules' `when`): JSON, a value
// other than null, false, 0, "", [] or {}; XML, XPath's boolean() of the
// expression; HTML, a matching element, which has the attribute when one
// is named.
//
// Items that nest (an item selector matching an element and some of its
// descendants) are kept apart: once a document's items are known
// (Exclude), evaluation below one item never enters another, so no
// subtree is copied once per level of nesting.
//
// Limits: XML and HTML deeper than 512 open elements are refused
// (x/net/html's own bound, applied to XML too); XML entities are the
// predefined and HTML ones, never DTD declarations (no entity expansion,
// no external entities); CSS matching and XPath evaluation stop when the
// call's context ends.
package document
