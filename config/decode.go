package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/multas/aggregator/sources/mapping"
)

// maxSteps bounds the work of one decode, so that aliases and merge keys
// cannot make a small file expensive.
const maxSteps = 1 << 20

// maxMergeDepth bounds merge keys (<<) that merge mappings with merges.
const maxMergeDepth = 32

// decoder walks a yaml.Node tree into Go values, guided by their yaml
// tags. It writes only the keys present in the file, so a value decoded
// over a default keeps every default it does not mention. It records the
// line of every key path it sees and reports every problem it meets.
type decoder struct {
	file   string
	getenv func(string) string
	errs   Errors
	// lines maps key paths to the line they were written on.
	lines map[string]int
	// failed holds the key paths whose value could not be decoded, so that
	// validation does not report them a second time.
	failed     map[string]bool
	steps      int
	tooComplex bool
	// defaultsEnv and sourceEnv collect the values ${NAME} put under
	// defaults and in the source being decoded (Source.FromEnv).
	defaultsEnv, sourceEnv []string
	// offline: a ${NAME} without a value is Masked (ParseOffline), and
	// masked holds the key paths of the values it went into.
	offline bool
	masked  map[string]bool
}

func newDecoder(file string, getenv func(string) string) *decoder {
	return &decoder{file: file, getenv: getenv, lines: map[string]int{}, failed: map[string]bool{}}
}

// pair is one key and value of a mapping.
type pair struct {
	key     string
	keyNode *yaml.Node
	value   *yaml.Node
}

// fail records that the value at path could not be decoded.
func (d *decoder) fail(line int, path, msg string) {
	d.report(line, path, msg)
	d.failed[path] = true
}

// report records a problem at line with key path.
func (d *decoder) report(line int, path, msg string) {
	d.errs = append(d.errs, Error{File: d.file, Line: line, Key: path, Msg: msg})
}

// step charges one unit of work; it is false once the budget is spent.
func (d *decoder) step() bool {
	d.steps++
	if d.steps <= maxSteps {
		return true
	}
	if !d.tooComplex {
		d.tooComplex = true
		d.fail(0, "", "document too complex (excessive aliasing or merging)")
	}
	return false
}

// line is the line of path, or of its closest ancestor that has one.
func (d *decoder) line(path string) int {
	for {
		if l, ok := d.lines[path]; ok {
			return l
		}
		p, ok := parentPath(path)
		if !ok {
			return 0
		}
		path = p
	}
}

// hasFailed reports whether path or an ancestor of it failed to decode.
func (d *decoder) hasFailed(path string) bool {
	for {
		if d.failed[path] {
			return true
		}
		p, ok := parentPath(path)
		if !ok {
			return false
		}
		path = p
	}
}

// resolve follows aliases; it returns nil for an alias it cannot follow.
func resolve(n *yaml.Node) *yaml.Node {
	for range 64 {
		if n == nil || n.Kind != yaml.AliasNode {
			return n
		}
		n = n.Alias
	}
	return nil
}

// isNull reports whether n is an explicit or implicit YAML null, which
// leaves the value it would set untouched.
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// kindName describes a node's kind for messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a single value"
	}
	return "nothing"
}

// parseYAML parses data as one YAML document; it returns a nil node for an
// empty document.
func parseYAML(data []byte, file string) (n *yaml.Node, err error) {
	defer func() {
		// The parser has panicked on hostile input in the past; a broken
		// config must be an error, never a crash.
		if r := recover(); r != nil {
			n, err = nil, Errors{{File: file, Msg: fmt.Sprintf("cannot parse YAML: %v", r)}}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, Errors{syntaxError(file, err)}
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, Errors{syntaxError(file, err)}
	default:
		return nil, Errors{{File: file, Line: extra.Line, Msg: "more than one YAML document; the configuration is a single document"}}
	}
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil, nil
		}
		return doc.Content[0], nil
	}
	return &doc, nil
}

// syntaxError turns a yaml.v3 parse error into an Error with its line.
// yaml.v3 numbers lines from 0 in parser errors and from 1 in scanner
// errors, and leaves the number out for the first line.
func syntaxError(file string, err error) Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, text, ok := strings.Cut(rest, ": "); ok {
			if n, err := strconv.Atoi(num); err == nil {
				line, msg = n, text
			}
		}
	}
	switch {
	case parserError(msg):
		line++
	case line == 0 && (strings.HasPrefix(msg, "found ") || strings.HasPrefix(msg, "did not find ") ||
		strings.HasPrefix(msg, "mapping values ") || strings.HasPrefix(msg, "could not find ") ||
		strings.HasPrefix(msg, "block sequence entries ")):
		line = 1
	}
	return Error{File: file, Line: line, Msg: "invalid YAML: " + msg}
}

// parserError reports whether msg is one of the yaml.v3 parser's (not
// scanner's) problems, whose line numbers count from 0.
func parserError(msg string) bool {
	switch msg {
	case "did not find expected <stream-start>", "did not find expected <document start>",
		"did not find expected node content", "did not find expected '-' indicator",
		"did not find expected key", "did not find expected ',' or ']'",
		"did not find expected ',' or '}'", "found duplicate %YAML directive",
		"found incompatible YAML document", "found duplicate %TAG directive",
		"found undefined tag handle":
		return true
	}
	return false
}

// mapping returns n's key/value pairs, with merge keys (<<) applied and
// duplicate keys reported; ok is false when n is not a mapping.
func (d *decoder) mapping(n *yaml.Node, path string) ([]pair, bool) {
	if n.Kind != yaml.MappingNode {
		d.fail(n.Line, path, "want a mapping (key: value), got "+kindName(n))
		return nil, false
	}
	return d.pairs(n, path, 0), true
}

// pairs lists a mapping node's pairs. Explicit keys win over merged ones,
// and earlier merged mappings over later ones, as YAML merge keys specify.
func (d *decoder) pairs(n *yaml.Node, path string, depth int) []pair {
	var out, merged []pair
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if !d.step() {
			return out
		}
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Value == "<<" && k.ShortTag() == "!!merge" {
			merged = append(merged, d.merge(v, path, depth)...)
			continue
		}
		if k = resolve(k); k == nil || k.Kind != yaml.ScalarNode {
			d.report(n.Content[i].Line, path, "keys must be plain strings")
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.report(k.Line, child(path, k.Value), fmt.Sprintf("duplicate key (first written on line %d)", first))
			continue
		}
		seen[k.Value] = k.Line
		out = append(out, pair{key: k.Value, keyNode: k, value: v})
	}
	for _, p := range merged {
		if _, dup := seen[p.key]; !dup {
			seen[p.key] = p.keyNode.Line
			out = append(out, p)
		}
	}
	return out
}

// merge lists the pairs a merge key brings in: one mapping or a list of them.
func (d *decoder) merge(v *yaml.Node, path string, depth int) []pair {
	line := v.Line
	if depth >= maxMergeDepth {
		d.report(line, path, "merge keys (<<) nested too deeply")
		return nil
	}
	v = resolve(v)
	if v != nil && v.Kind == yaml.MappingNode {
		return d.pairs(v, path, depth+1)
	}
	if v != nil && v.Kind == yaml.SequenceNode {
		var out []pair
		for _, e := range v.Content {
			if e = resolve(e); e == nil || e.Kind != yaml.MappingNode {
				d.report(line, path, "a merge key (<<) takes a mapping or a list of mappings")
				continue
			}
			out = append(out, d.pairs(e, path, depth+1)...)
		}
		return out
	}
	d.report(line, path, "a merge key (<<) takes a mapping or a list of mappings")
	return nil
}

// decode writes the value of n into v. A null leaves v untouched.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if !d.step() {
		return
	}
	line := n.Line
	if n = resolve(n); n == nil {
		d.fail(line, path, "alias cannot be resolved")
		return
	}
	if isNull(n) {
		return
	}
	if v.Type() == reflect.TypeFor[JSONValue]() {
		d.jsonValue(n, v.Addr().Interface().(*JSONValue), path)
		return
	}
	if t := v.Type(); t == reflect.TypeFor[mapping.Scalar]() {
		if n.Kind != yaml.ScalarNode {
			d.fail(n.Line, path, "want a single value (a string, a number, true or false), got "+kindName(n))
			return
		}
		var b bytes.Buffer
		if d.writeJSON(&b, n, path, 0) {
			v.Set(reflect.ValueOf(mapping.Scalar{Raw: b.Bytes()}))
		}
		return
	}
	if t := v.Type(); t == reflect.TypeFor[Duration]() || t == reflect.TypeFor[time.Duration]() {
		s, fromEnv, ok := d.scalar(n, path, "a duration")
		if !ok {
			return
		}
		dur, err := parseDuration(s)
		if err != nil {
			d.fail(n.Line, path, err.Error()+", "+got(s, fromEnv))
			return
		}
		v.SetInt(int64(dur))
		return
	}
	if oneOrMany(v.Type()) && n.Kind != yaml.SequenceNode {
		// One value stands for a list of one.
		s := reflect.MakeSlice(v.Type(), 1, 1)
		d.decode(n, s.Index(0), path)
		v.Set(s)
		return
	}
	if v.Kind() == reflect.Struct && n.Kind != yaml.MappingNode {
		if i, ok := shortField(v.Type()); ok {
			// The whole value is the struct's short field ("select").
			d.decode(n, v.Field(i), path)
			return
		}
	}
	switch v.Kind() {
	case reflect.Struct:
		pairs, ok := d.mapping(n, path)
		if !ok {
			return
		}
		for _, p := range pairs {
			d.field(v, p, path)
		}
	case reflect.Map:
		pairs, ok := d.mapping(n, path)
		if !ok {
			return
		}
		if v.IsNil() {
			v.Set(reflect.MakeMapWithSize(v.Type(), len(pairs)))
		}
		for _, p := range pairs {
			kp := child(path, p.key)
			d.lines[kp] = p.keyNode.Line
			elem := reflect.New(v.Type().Elem()).Elem()
			d.decode(p.value, elem, kp)
			v.SetMapIndex(reflect.ValueOf(p.key).Convert(v.Type().Key()), elem)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.fail(n.Line, path, "want a list, got "+kindName(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, e := range n.Content {
			ep := index(path, i)
			d.lines[ep] = e.Line
			d.decode(e, s.Index(i), ep)
		}
		v.Set(s)
	case reflect.Pointer:
		if v.IsNil() {
			nv := reflect.New(v.Type().Elem())
			// A block whose presence turns something on starts from its
			// defaults (Watches).
			if d, ok := nv.Interface().(interface{ setDefaults() }); ok {
				d.setDefaults()
			}
			v.Set(nv)
		}
		d.decode(n, v.Elem(), path)
	case reflect.String:
		if s, _, ok := d.scalar(n, path, "a string"); ok {
			v.SetString(s)
		}
	case reflect.Int, reflect.Int64:
		s, fromEnv, ok := d.scalar(n, path, "an integer")
		if !ok {
			return
		}
		i, err := strconv.ParseInt(s, 10, v.Type().Bits())
		if err != nil {
			d.fail(n.Line, path, "want an integer, "+got(s, fromEnv))
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		s, fromEnv, ok := d.scalar(n, path, "a number")
		if !ok {
			return
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			d.fail(n.Line, path, "want a finite number, "+got(s, fromEnv))
			return
		}
		v.SetFloat(f)
	case reflect.Bool:
		s, fromEnv, ok := d.scalar(n, path, "true or false")
		if !ok {
			return
		}
		switch strings.ToLower(s) {
		case "true":
			v.SetBool(true)
		case "false":
			v.SetBool(false)
		default:
			d.fail(n.Line, path, "want true or false, "+got(s, fromEnv))
		}
	default:
		d.fail(n.Line, path, "cannot be set from YAML")
	}
}

// oneOrMany reports whether a list of type t may be written as one value.
func oneOrMany(t reflect.Type) bool {
	return t == reflect.TypeFor[mapping.List]() || t == reflect.TypeFor[mapping.Items]()
}

// shortField is the index of the field of struct type t tagged
// config:"short": the one that a value written alone, instead of a
// mapping, sets.
func shortField(t reflect.Type) (int, bool) {
	if t.Kind() != reflect.Struct {
		return 0, false
	}
	for i := range t.NumField() {
		if t.Field(i).Tag.Get("config") == "short" {
			return i, true
		}
	}
	return 0, false
}

// field decodes one key of a mapping into the matching field of struct v,
// or reports the key as unknown.
func (d *decoder) field(v reflect.Value, p pair, path string) {
	fp := child(path, p.key)
	d.lines[fp] = p.keyNode.Line
	t := v.Type()
	var known []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		if name == p.key {
			d.decode(p.value, v.Field(i), fp)
			return
		}
		known = append(known, name)
	}
	msg := "unknown key"
	if s := suggest(p.key, known); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	d.report(p.keyNode.Line, fp, msg)
}

// scalar returns the expanded text of a scalar node; ok is false when it
// reported a problem instead.
func (d *decoder) scalar(n *yaml.Node, path, want string) (s string, fromEnv, ok bool) {
	if n.Kind != yaml.ScalarNode {
		d.fail(n.Line, path, "want "+want+", got "+kindName(n))
		return "", false, false
	}
	var vars []string
	s, fromEnv, unset, err := expand(n.Value, func(name string) string {
		v := d.getenv(name)
		vars = append(vars, v)
		return v
	})
	if err != nil {
		d.fail(n.Line, path, err.Error())
		return "", false, false
	}
	if len(unset) > 0 && d.offline {
		vars = vars[:0]
		s, _, _, _ = expand(n.Value, func(name string) string {
			v := d.getenv(name)
			if v == "" && slices.Contains(unset, name) {
				v = Masked
			}
			vars = append(vars, v)
			return v
		})
		if d.masked == nil {
			d.masked = map[string]bool{}
		}
		d.masked[path] = true
		unset = nil
	}
	if len(unset) > 0 && secretKey(path) {
		d.fail(n.Line, path, unsetSecret(unset))
		return "", false, false
	}
	if fromEnv {
		d.noteEnv(path, append(vars, s))
	}
	return s, fromEnv, true
}

// noteEnv records values that ${NAME} references put at path (each
// variable's, and the whole scalar's) for the sources they reach: one
// source's, or every source's when they are under defaults.
func (d *decoder) noteEnv(path string, values []string) {
	var to *[]string
	switch {
	case path == "defaults" || strings.HasPrefix(path, "defaults.") || strings.HasPrefix(path, "defaults["):
		to = &d.defaultsEnv
	case strings.HasPrefix(path, "sources["):
		to = &d.sourceEnv
	default:
		return
	}
	for _, v := range values {
		if v != "" && !slices.Contains(*to, v) {
			*to = append(*to, v)
		}
	}
}

// got quotes a bad value for a message, unless it came from the
// environment, where it may be a secret.
func got(s string, fromEnv bool) string {
	if fromEnv {
		return "got the value of an environment variable (not shown)"
	}
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return "got " + strconv.Quote(s)
}
