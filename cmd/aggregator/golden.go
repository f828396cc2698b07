package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/multas/aggregator"
)

// flatItem is an infraction as its JSON members, nested ones by dotted
// name (units.value), each value as JSON text.
type flatItem struct {
	id     string
	fields map[string]string
}

// flatten reads one infraction's JSON into a flatItem; a value that is no
// object is a single field named "".
func flatten(raw []byte) flatItem {
	it := flatItem{fields: map[string]string{}}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		it.fields[""] = string(raw)
		return it
	}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if o, ok := v.(map[string]any); ok && len(o) > 0 {
			for k, x := range o {
				name := k
				if prefix != "" {
					name = prefix + "." + k
				}
				walk(name, x)
			}
			return
		}
		b, _ := json.Marshal(v)
		it.fields[prefix] = string(b)
	}
	walk("", v)
	if o, ok := v.(map[string]any); ok {
		it.id, _ = o["id"].(string)
	}
	return it
}

// diffInfractions says how the infractions replayed differ from the golden
// ones, in lines a person reads: per infraction id, field by field, those
// only on one side, and the order when only it differs. None: the same.
func diffInfractions(want []json.RawMessage, got []aggregator.Infraction) []string {
	var a, b []flatItem
	for _, raw := range want {
		a = append(a, flatten(raw))
	}
	for _, inf := range got {
		raw, _ := json.Marshal(inf)
		b = append(b, flatten(raw))
	}
	// The k-th golden item of an id goes with the k-th replayed item of it.
	nth := func(items []flatItem) []string {
		seen := map[string]int{}
		keys := make([]string, len(items))
		for i, it := range items {
			keys[i] = it.id + "\x00" + strconv.Itoa(seen[it.id])
			seen[it.id]++
		}
		return keys
	}
	ka, kb := nth(a), nth(b)
	var out []string
	for i, k := range ka {
		j := slices.Index(kb, k)
		if j < 0 {
			out = append(out, label(a[i], i)+": only in the golden file")
			continue
		}
		for _, f := range slices.Sorted(maps.Keys(union(a[i].fields, b[j].fields))) {
			va, inA := a[i].fields[f]
			vb, inB := b[j].fields[f]
			switch {
			case inA && inB && va == vb:
			case !inB:
				out = append(out, fmt.Sprintf("%s: %s: golden %s, replayed nothing", label(a[i], i), f, va))
			case !inA:
				out = append(out, fmt.Sprintf("%s: %s: golden nothing, replayed %s", label(a[i], i), f, vb))
			default:
				out = append(out, fmt.Sprintf("%s: %s: golden %s, replayed %s", label(a[i], i), f, va, vb))
			}
		}
	}
	for j, k := range kb {
		if !slices.Contains(ka, k) {
			raw, _ := json.Marshal(got[j])
			out = append(out, label(b[j], j)+": only in the replay: "+string(raw))
		}
	}
	if len(out) == 0 && !slices.Equal(ka, kb) {
		out = append(out, "the order differs: golden "+ids(a)+"; replayed "+ids(b))
	}
	return out
}

// label names an infraction in a difference: by its id, else its place.
func label(it flatItem, i int) string {
	if it.id == "" {
		return fmt.Sprintf("infraction #%d (no id)", i+1)
	}
	return "infraction " + strconv.Quote(it.id)
}

// ids lists the ids of items, in order.
func ids(items []flatItem) string {
	var s []string
	for _, it := range items {
		s = append(s, it.id)
	}
	return strings.Join(s, ", ")
}

// union is the keys of a and b.
func union(a, b map[string]string) map[string]bool {
	out := make(map[string]bool, len(a)+len(b))
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}
