package document

import (
	"reflect"
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
			p, err := CompilePointer(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Errorf("CompilePointer(%q) = %q, want an error", tt.in, p.Tokens)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(p.Tokens, tt.want) {
				t.Errorf("CompilePointer(%q) = %q, %v; want %q", tt.in, p.Tokens, err, tt.want)
			}
		})
	}
}

func TestPointerResolve(t *testing.T) {
	t.Parallel()
	const doc = `{"a": {"b/c": [10, {"d~e": "x"}], "": "empty", "n": null}, "01": 1, "dup": 1, "dup": 2,
		"esc\\\"aped\u00e9": 3}`
	tests := []struct {
		ptr       string
		want      string
		wantFound bool
	}{
		{"", doc, true},
		{"/a/b~1c/0", `10`, true},
		{"/a/b~1c/1", `{"d~e": "x"}`, true},
		{"/a/b~1c/1/d~0e", `"x"`, true},
		{"/a/", `"empty"`, true},
		{"/01", `1`, true},
		{"/a/n", `null`, true},
		{"/a/n/deeper", `null`, true},
		{"/dup", `2`, true},
		{`/esc\"apedé`, `3`, true},
		{"/a/b~1c/2", "", false},
		{"/a/b~1c/-", "", false},
		{"/a/b~1c/01", "", false},
		{"/a/b~1c/x", "", false},
		{"/a/missing", "", false},
		{"/a/b~1c/0/x", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.ptr, func(t *testing.T) {
			t.Parallel()
			p, err := CompilePointer(tt.ptr)
			if err != nil {
				t.Fatal(err)
			}
			got, found := p.Resolve([]byte(doc))
			if found != tt.wantFound || string(got) != tt.want {
				t.Errorf("resolve(%q) = %v, %v; want %v, %v", tt.ptr, got, found, tt.want, tt.wantFound)
			}
		})
	}
}
