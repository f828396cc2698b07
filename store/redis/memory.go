package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"regexp"
	"sync"
	"time"

	"github.com/multas/aggregator/memory"
)

var (
	memoryGetScript    = lua("memory_get.lua")
	memoryPutScript    = lua("memory_put.lua")
	memoryForgetScript = lua("memory_forget.lua")
)

// sourceGenTTL bounds, on the wall clock, how long a source's generation
// read from Redis is trusted without reading it again, should the
// invalidation of a ForgetSource be lost.
const sourceGenTTL = time.Second

// MemoryStore implements memory.Store on Redis: the remembered answers the
// fleet shares (SPEC 14). A subject's keys share the hash tag of its hash,
// {memory/<subject>}, so that every script touches one slot:
//
//	<prefix>{memory/<subject>}:e:<entry>  a sealed value, expiring after max(fresh, stale)
//	<prefix>{memory/<subject>}:gen        the subject's generation, set when it is forgotten
//	<prefix>{memory/<subject>}:index      the names of its entries, for Forget
//	<prefix>{memory-source/<source>}:gen  the source's generation, part of its entries' names
//
// Subjects are HMACs, entries name a source, an operation, a configuration
// fingerprint and a generation, and values are sealed: no plate or id is
// in a key or a value. Without Redis (the stores degraded) nothing is read
// or written: memory is absent, which costs portal calls, never answers.
// Forget and ForgetSource try Redis all the same, and fail when it does
// not answer: an erasure is never reported done when it was not.
type MemoryStore struct {
	st *Stores

	mu      sync.Mutex
	sources map[string]sourceGen
	inval   uint64 // invalidations received: a read that spans one is not kept
}

type sourceGen struct {
	gen    string
	readAt time.Time
}

var _ memory.Store = (*MemoryStore)(nil)

func newMemoryStore(s *Stores) *MemoryStore {
	return &MemoryStore{st: s, sources: map[string]sourceGen{}}
}

// subjectShape and entryShape are the names the memory package gives;
// anything else is refused before it reaches a key.
var (
	subjectShape = regexp.MustCompile(`^[0-9a-f]{32}$`)
	entryShape   = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,99}:[a-z_]{1,20}:[0-9a-f]{1,64}:[0-9a-f]{1,32}$`)
)

var errName = errors.New("memory store: not a subject or entry name the memory package gives")

func (m *MemoryStore) base(subject string) string {
	return m.st.opts.Prefix + "{memory/" + subject + "}:"
}

func (m *MemoryStore) sourceKey(source string) string {
	return m.st.opts.Prefix + "{memory-source/" + source + "}:gen"
}

// Get implements memory.Store: the generation and every entry asked for,
// in one script (one slot).
func (m *MemoryStore) Get(ctx context.Context, subject string, entries []string) ([][]byte, string, error) {
	if !subjectShape.MatchString(subject) {
		return nil, "", errName
	}
	base := m.base(subject)
	keys := make([]string, 0, 1+len(entries))
	keys = append(keys, base+"gen")
	for _, e := range entries {
		if !entryShape.MatchString(e) {
			return nil, "", errName
		}
		keys = append(keys, base+"e:"+e)
	}
	if m.st.Degraded() {
		return nil, "", ErrDegraded
	}
	cctx, cancel := m.st.callCtx(ctx)
	res, err := memoryGetScript.Run(cctx, m.st.client, keys).Slice()
	cancel()
	if err != nil {
		m.st.failed(ctx, err)
		return nil, "", err
	}
	values := make([][]byte, len(entries))
	for i, k := range keys {
		switch intAt(res, 2*i+1) {
		case 1:
			if i > 0 {
				values[i-1] = []byte(strAt(res, 2*i))
			}
		case 2:
			m.st.bad.Unreadable(k, "", false)
		}
	}
	return values, strAt(res, 0), nil
}

// Generation implements memory.Store.
func (m *MemoryStore) Generation(ctx context.Context, subject string) (string, error) {
	if !subjectShape.MatchString(subject) {
		return "", errName
	}
	if m.st.Degraded() {
		return "", ErrDegraded
	}
	key := m.base(subject) + "gen"
	cctx, cancel := m.st.callCtx(ctx)
	gen, _, err := m.st.get(cctx, key)
	cancel()
	if err != nil {
		m.st.failed(ctx, err)
		return "", err
	}
	return gen, nil
}

// Put implements memory.Store.
func (m *MemoryStore) Put(ctx context.Context, subject, entry string, value []byte, gen string, ttl time.Duration) (bool, error) {
	if !subjectShape.MatchString(subject) || !entryShape.MatchString(entry) {
		return false, errName
	}
	if m.st.Degraded() {
		return false, ErrDegraded
	}
	ms := ttl.Milliseconds()
	if ms <= 0 {
		return false, nil
	}
	base := m.base(subject)
	cctx, cancel := m.st.callCtx(ctx)
	res, err := memoryPutScript.Run(cctx, m.st.client, []string{base + "e:" + entry, base + "gen", base + "index"},
		gen, value, ms, entry).Slice()
	cancel()
	if err != nil {
		m.st.failed(ctx, err)
		return false, err
	}
	if intAt(res, 1) == 1 {
		m.st.bad.Unreadable(base+"gen", "or index", true)
	}
	return intAt(res, 0) == 1, nil
}

// maxDelete bounds the keys of one DEL.
const maxDelete = 100

// Forget implements memory.Store: one script sets the new generation and
// takes the index, then the entries it named are deleted, in the same slot.
func (m *MemoryStore) Forget(ctx context.Context, subject string, hold time.Duration) error {
	if !subjectShape.MatchString(subject) {
		return errName
	}
	base := m.base(subject)
	cctx, cancel := m.st.callCtx(ctx)
	defer cancel()
	names, err := memoryForgetScript.Run(cctx, m.st.client, []string{base + "gen", base + "index"},
		newGeneration(), max(hold.Milliseconds(), 1)).StringSlice()
	if err != nil {
		m.st.failed(ctx, err)
		return err
	}
	var keys []string
	for _, n := range names {
		if !entryShape.MatchString(n) {
			m.st.bad.Unreadable(base+"index", "a member", true)
			continue
		}
		keys = append(keys, base+"e:"+n)
	}
	for len(keys) > 0 {
		batch := keys[:min(len(keys), maxDelete)]
		keys = keys[len(batch):]
		if err := m.st.client.Del(cctx, batch...).Err(); err != nil {
			m.st.failed(ctx, err)
			return err
		}
	}
	return nil
}

// SourceGeneration implements memory.Store. It is read from Redis at most
// once per sourceGenTTL while the replica listens to the stores' channel,
// and at once after another replica's ForgetSource (published on it); on
// every call while it does not.
func (m *MemoryStore) SourceGeneration(ctx context.Context, source string) (string, error) {
	if m.st.Degraded() {
		return "", ErrDegraded
	}
	m.mu.Lock()
	g, ok := m.sources[source]
	inval := m.inval
	m.mu.Unlock()
	// Only a replica that hears the fleet's invalidations may trust what
	// it read before (a ForgetSource published while it was deaf would be
	// missed): otherwise every read asks Redis.
	if ok && time.Since(g.readAt) < sourceGenTTL && m.st.Listening() {
		return g.gen, nil
	}
	key := m.sourceKey(source)
	cctx, cancel := m.st.callCtx(ctx)
	gen, found, err := m.st.get(cctx, key)
	cancel()
	if err != nil {
		m.st.failed(ctx, err)
		return "", err
	}
	switch {
	case !found:
		gen = "0"
	case !generationShape.MatchString(gen):
		// Not what ForgetSource writes: the source's memory is off until
		// ForgetSource writes a generation again.
		m.st.bad.Unreadable(key, "", false)
		return "", errName
	}
	m.mu.Lock()
	if m.inval == inval {
		m.sources[source] = sourceGen{gen: gen, readAt: time.Now()}
	}
	m.mu.Unlock()
	return gen, nil
}

var generationShape = regexp.MustCompile(`^[0-9a-f]{1,32}$`)

// ForgetSource implements memory.Store: a new generation, published so that
// every replica reads it at once.
func (m *MemoryStore) ForgetSource(ctx context.Context, source string) error {
	gen := newGeneration()
	msg, _ := json.Marshal(message{Memory: source})
	cctx, cancel := m.st.callCtx(ctx)
	defer cancel()
	err := m.st.client.Set(cctx, m.sourceKey(source), gen, 0).Err()
	if err == nil {
		err = m.st.client.Publish(cctx, m.st.channel, msg).Err()
	}
	if err != nil {
		m.st.failed(ctx, err)
		return err
	}
	m.mu.Lock()
	m.sources[source] = sourceGen{gen: gen, readAt: time.Now()}
	m.mu.Unlock()
	return nil
}

// invalidate forgets the generation of source, which another replica
// changed; with source empty, every one (invalidations may have been lost).
func (m *MemoryStore) invalidate(source string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inval++
	if source == "" {
		clear(m.sources)
		return
	}
	delete(m.sources, source)
}

// newGeneration is a random generation: never one a subject or a source
// had before, even after Redis lost its keys.
func newGeneration() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
