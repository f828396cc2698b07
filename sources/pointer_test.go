package sources

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestCompilePointer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{in: "", want: nil},
		{in: "/", want: []string{""}},
		{in: "/a/b", want: []string{"a", "b"}},
		{in: "/a~1b/c~0d", want: []string{"a/b", "c~d"}},
		{in: "/~01", want: []string{"~1"}},
		{in: "/~10", want: []string{"/0"}},
		{in: "a/b", wantErr: true},
		{in: "/a~2", wantErr: true},
		{in: "/a~", wantErr: true},
		{in: "#/a", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			p, err := compilePointer(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Errorf("compilePointer(%q) = %q, want an error", tt.in, p.tokens)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(p.tokens, tt.want) {
				t.Errorf("compilePointer(%q) = %q, %v; want %q", tt.in, p.tokens, err, tt.want)
			}
		})
	}
}

func TestPointerResolve(t *testing.T) {
	t.Parallel()
	const doc = `{"a": {"b/c": [10, {"d~e": "x"}], "": "empty", "n": null}, "01": 1}`
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		ptr       string
		want      any
		wantFound bool
	}{
		{"/a/b~1c/0", json.Number("10"), true},
		{"/a/b~1c/1/d~0e", "x", true},
		{"/a/", "empty", true},
		{"/01", json.Number("1"), true},
		{"/a/n", nil, true},
		{"/a/n/deeper", nil, true},
		{"/a/b~1c/2", nil, false},
		{"/a/b~1c/-", nil, false},
		{"/a/b~1c/01", nil, false},
		{"/a/b~1c/x", nil, false},
		{"/a/missing", nil, false},
		{"/a/b~1c/0/x", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.ptr, func(t *testing.T) {
			t.Parallel()
			p, err := compilePointer(tt.ptr)
			if err != nil {
				t.Fatal(err)
			}
			got, found := p.resolve(v)
			if found != tt.wantFound || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("resolve(%q) = %v, %v; want %v, %v", tt.ptr, got, found, tt.want, tt.wantFound)
			}
		})
	}
}
