package sources

import "github.com/multas/aggregator/sources/mapping"

// items is the items block of one selector.
func items(sel string) mapping.Items { return mapping.Items{{Select: sel}} }

// fields is a fields block of plain selectors.
func fields(m map[string]string) map[string]mapping.Field {
	out := make(map[string]mapping.Field, len(m))
	for k, v := range m {
		out[k] = mapping.Field{Select: mapping.List{v}}
	}
	return out
}
