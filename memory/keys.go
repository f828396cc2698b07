package memory

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// KeySize is the length of memory.key and each of memory.previous_keys.
const KeySize = 32

// The HKDF info strings: each derived key has one purpose only.
const (
	infoHash  = "aggregator memory v1: subject hash"
	infoSeal  = "aggregator memory v1: sealing"
	infoValue = "aggregator memory v1: value"
)

// sealed value layout: version, salt, nonce, then the AES-GCM ciphertext
// and tag.
const (
	sealVersion = 1
	saltSize    = 32
	nonceSize   = 12
	// Overhead is what sealing adds to a plaintext.
	Overhead = 1 + saltSize + nonceSize + 16
)

// ErrUnopenable is returned by Open for a value that no key opens: another
// key sealed it, it was sealed for another store key, or it is not a
// sealed value at all.
var ErrUnopenable = errors.New("memory: value cannot be opened")

// Keys are the keys derived from memory.key (SPEC 14): one hashes subjects
// (HMAC-SHA256), one seals values (AES-256-GCM, under a subkey of its own
// per value). The previous keys of a rotation open and hash, never seal.
// Watches (SPEC 15) seal their last known infractions with the same Keys.
type Keys struct {
	sets []keySet // current first
}

type keySet struct {
	hash, seal []byte
}

// NewKeys derives the keys of current and of every previous key; each must
// be KeySize bytes.
func NewKeys(current []byte, previous ...[]byte) (*Keys, error) {
	k := &Keys{}
	for i, master := range append([][]byte{current}, previous...) {
		if len(master) != KeySize {
			if i == 0 {
				return nil, fmt.Errorf("memory: the key is %d bytes, want %d", len(master), KeySize)
			}
			return nil, fmt.Errorf("memory: previous key %d is %d bytes, want %d", i-1, len(master), KeySize)
		}
		hash, err := hkdf.Key(sha256.New, master, nil, infoHash, 32)
		if err != nil {
			return nil, err
		}
		seal, err := hkdf.Key(sha256.New, master, nil, infoSeal, 32)
		if err != nil {
			return nil, err
		}
		k.sets = append(k.sets, keySet{hash: hash, seal: seal})
	}
	return k, nil
}

// Hashes are the HMACs of subject under every key, current first, as hex:
// a subject is looked up under each in turn, and written under the first.
func (k *Keys) Hashes(subject string) []string {
	out := make([]string, len(k.sets))
	for i, s := range k.sets {
		out[i] = hashWith(s.hash, subject)
	}
	return out
}

// Hash is the HMAC of subject under the current key, as hex.
func (k *Keys) Hash(subject string) string { return hashWith(k.sets[0].hash, subject) }

// hashWith is the first 16 bytes of HMAC-SHA256(key, subject), in hex: 128
// bits name a subject without a collision in any realistic fleet.
func hashWith(key []byte, subject string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(subject))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// Seal encrypts plaintext under the current key, bound to ad (the value's
// store key): a random salt makes the value's own AES-256-GCM key by HKDF,
// and ad must be given again to open it.
func (k *Keys) Seal(ad, plaintext []byte) ([]byte, error) {
	out := make([]byte, 1+saltSize+nonceSize, Overhead+len(plaintext))
	out[0] = sealVersion
	salt, nonce := out[1:1+saltSize], out[1+saltSize:]
	if _, err := rand.Read(out[1:]); err != nil {
		return nil, err
	}
	aead, err := valueAEAD(k.sets[0].seal, salt)
	if err != nil {
		return nil, err
	}
	return aead.Seal(out, nonce, plaintext, ad), nil
}

// Open decrypts a value Seal made under any of the keys, current first,
// for the same ad; otherwise it returns ErrUnopenable.
func (k *Keys) Open(ad, sealed []byte) ([]byte, error) {
	if len(sealed) < Overhead || sealed[0] != sealVersion {
		return nil, ErrUnopenable
	}
	salt := sealed[1 : 1+saltSize]
	nonce := sealed[1+saltSize : 1+saltSize+nonceSize]
	body := sealed[1+saltSize+nonceSize:]
	for _, s := range k.sets {
		aead, err := valueAEAD(s.seal, salt)
		if err != nil {
			return nil, err
		}
		if plain, err := aead.Open(nil, nonce, body, ad); err == nil {
			return plain, nil
		}
	}
	return nil, ErrUnopenable
}

// valueAEAD is the AES-256-GCM of one value: its key is HKDF-SHA256 of the
// sealing key and the value's salt.
func valueAEAD(seal, salt []byte) (cipher.AEAD, error) {
	key, err := hkdf.Key(sha256.New, seal, salt, infoValue, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
