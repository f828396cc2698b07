package memory_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/multas/aggregator/memory"
	"github.com/multas/aggregator/memory/memorytest"
)

func TestNewKeysWantsThirtyTwoBytes(t *testing.T) {
	t.Parallel()
	good := memorytest.Key(t)
	tests := []struct {
		name     string
		current  []byte
		previous [][]byte
		ok       bool
	}{
		{"current only", good, nil, true},
		{"with previous", good, [][]byte{memorytest.Key(t)}, true},
		{"short", good[:31], nil, false},
		{"long", append(append([]byte{}, good...), 0), nil, false},
		{"empty", nil, nil, false},
		{"short previous", good, [][]byte{good[:16]}, false},
	}
	for _, tt := range tests {
		_, err := memory.NewKeys(tt.current, tt.previous...)
		if (err == nil) != tt.ok {
			t.Errorf("%s: got error %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

func TestSealOpen(t *testing.T) {
	t.Parallel()
	oldKey, newKey := memorytest.Key(t), memorytest.Key(t)
	old, _ := memory.NewKeys(oldKey)
	rotated, _ := memory.NewKeys(newKey, oldKey)
	alone, _ := memory.NewKeys(newKey)
	plain := []byte(`{"infractions":[{"id":"Q-1"}]}`)
	ad := []byte("aggregator/memory/v1/subject/caba:by_domain:f:0")

	sealed, err := old.Seal(ad, plain)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := old.Seal(ad, plain)
	if bytes.Equal(sealed, again) {
		t.Errorf("two seals of one plaintext are equal: the salt is not random")
	}
	if bytes.Contains(sealed, []byte("Q-1")) {
		t.Errorf("the sealed value holds the plaintext")
	}
	flipped := append([]byte{}, sealed...)
	flipped[len(flipped)-1] ^= 1
	tests := []struct {
		name   string
		keys   *memory.Keys
		ad     []byte
		sealed []byte
		ok     bool
	}{
		{"same key", old, ad, sealed, true},
		{"a previous key", rotated, ad, sealed, true},
		{"another key", alone, ad, sealed, false},
		{"another store key", old, []byte("aggregator/memory/v1/other/caba:by_domain:f:0"), sealed, false},
		{"a flipped bit", old, ad, flipped, false},
		{"truncated", old, ad, sealed[:memory.Overhead-1], false},
		{"another version", old, ad, append([]byte{2}, sealed[1:]...), false},
		{"nothing", old, ad, nil, false},
	}
	for _, tt := range tests {
		got, err := tt.keys.Open(tt.ad, tt.sealed)
		switch {
		case tt.ok && (err != nil || !bytes.Equal(got, plain)):
			t.Errorf("%s: got %q, %v; want the plaintext", tt.name, got, err)
		case !tt.ok && !errors.Is(err, memory.ErrUnopenable):
			t.Errorf("%s: got %q, %v; want ErrUnopenable", tt.name, got, err)
		}
	}
	// Only the current key seals.
	resealed, _ := rotated.Seal(ad, plain)
	if _, err := old.Open(ad, resealed); err == nil {
		t.Errorf("a value sealed after the rotation opens with the old key alone")
	}
}

func TestHashes(t *testing.T) {
	t.Parallel()
	a, b := memorytest.Key(t), memorytest.Key(t)
	k, _ := memory.NewKeys(a, b)
	hs := k.Hashes("domain:AB123CD")
	if len(hs) != 2 || hs[0] == hs[1] || hs[0] != k.Hash("domain:AB123CD") {
		t.Fatalf("Hashes: got %v", hs)
	}
	if k.Hash("domain:AB123CD") == k.Hash("domain:AB123CE") {
		t.Errorf("two subjects hash alike")
	}
	kb, _ := memory.NewKeys(b)
	if kb.Hash("domain:AB123CD") != hs[1] {
		t.Errorf("a previous key hashes otherwise than as the current key")
	}
	for _, h := range hs {
		if len(h) != 32 || bytes.ContainsAny([]byte(h), "ABCD{}:") {
			t.Errorf("hash %q: want 32 lower-case hex digits", h)
		}
	}
}
