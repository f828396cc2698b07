package config

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/multas/aggregator/sources/mapping"
)

// keyPaths lists the configuration keys of t, as docs/configuration.md
// writes them: sources[].id, sources[].operations.<op>.method,
// sources[].response.fields.<name>.layout; a map of free names to values
// (headers, status_map, …) is one key, and so is a key that may be
// written as one value (items, fields, when).
func keyPaths(t reflect.Type, prefix string, out *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		path := prefix + name
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		elem := ft
		if ft.Kind() == reflect.Slice || ft.Kind() == reflect.Map {
			elem = ft.Elem()
		}
		if _, short := shortField(elem); short {
			// A key that may be written as one value is a key of its own.
			*out = append(*out, path)
		}
		switch {
		case ft == reflect.TypeFor[Duration](), ft == reflect.TypeFor[JSONValue](), ft == reflect.TypeFor[mapping.Scalar]():
			*out = append(*out, path)
		case ft.Kind() == reflect.Struct:
			keyPaths(ft, path+".", out)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			keyPaths(ft.Elem(), path+"[].", out)
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct && name == "operations":
			keyPaths(ft.Elem(), path+".<op>.", out)
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
			keyPaths(ft.Elem(), path+".<name>.", out)
		default:
			*out = append(*out, path)
		}
	}
}

// TestReferenceDocumentsEveryKey fails when docs/configuration.md and the
// code disagree on the set of configuration keys.
func TestReferenceDocumentsEveryKey(t *testing.T) {
	t.Parallel()
	var code []string
	keyPaths(reflect.TypeFor[Config](), "", &code)
	data, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_.\\[\\]<>0-9]+)` \\|")
	var doc []string
	for _, m := range row.FindAllStringSubmatch(string(data), -1) {
		doc = append(doc, m[1])
	}
	for _, k := range code {
		if !slices.Contains(doc, k) {
			t.Errorf("key %s is in the code but not in docs/configuration.md", k)
		}
	}
	for _, k := range doc {
		if !slices.Contains(code, k) {
			t.Errorf("docs/configuration.md documents %s, which the code does not know", k)
		}
	}
	seen := map[string]bool{}
	for _, k := range doc {
		if seen[k] {
			t.Errorf("docs/configuration.md documents %s twice", k)
		}
		seen[k] = true
	}
}
