package config

import (
	"reflect"
	"slices"

	"go.yaml.in/yaml/v3"
)

// Parse reads a configuration from data; filename is used in messages
// only. Every ${NAME} in a value is replaced by getenv(NAME) (nil getenv
// means an empty environment). When anything is wrong, the error is an
// Errors listing every problem, and the Config is nil.
func Parse(data []byte, filename string, getenv func(string) string) (*Config, error) {
	return parse(data, filename, getenv, false)
}

// parse is Parse, or ParseOffline when offline is set.
func parse(data []byte, filename string, getenv func(string) string, offline bool) (*Config, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	root, err := parseYAML(data, filename)
	if err != nil {
		return nil, err
	}
	d := newDecoder(filename, getenv)
	d.offline = offline
	cfg := builtin()
	var sources *yaml.Node
	if root != nil {
		pairs, _ := d.mapping(root, "")
		v := reflect.ValueOf(cfg).Elem()
		for _, p := range pairs {
			if p.key == "sources" {
				// Sources are decoded over the defaults, which must be
				// known first wherever they are written.
				d.lines[p.key] = p.keyNode.Line
				sources = p.value
				continue
			}
			d.field(v, p, "")
		}
	}
	if sources != nil {
		cfg.Sources = d.sources(sources, cfg.Defaults)
	}
	cfg.fill()
	errs := d.errs
	for _, e := range validate(cfg, !offline) {
		if d.hasFailed(e.Key) || d.masked[e.Key] {
			continue
		}
		e.File, e.Line = filename, d.line(e.Key)
		errs = append(errs, e)
	}
	if len(errs) > 0 {
		// In file order; problems of the file as a whole (line 0) first.
		slices.SortStableFunc(errs, func(a, b Error) int { return a.Line - b.Line })
		return nil, compact(errs)
	}
	return cfg, nil
}

// sources decodes the list of sources, each over the defaults d.
func (d *decoder) sources(n *yaml.Node, defaults Defaults) []Source {
	line := n.Line
	if n = resolve(n); n == nil {
		d.fail(line, "sources", "alias cannot be resolved")
		return nil
	}
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		d.fail(n.Line, "sources", "want a list of sources, got "+kindName(n))
		return nil
	}
	out := make([]Source, len(n.Content))
	for i, e := range n.Content {
		p := index("sources", i)
		d.lines[p] = e.Line
		out[i] = inherit(defaults)
		d.sourceEnv = nil
		d.decode(e, reflect.ValueOf(&out[i]).Elem(), p)
		for _, v := range slices.Concat(d.defaultsEnv, d.sourceEnv) {
			if !slices.Contains(out[i].FromEnv, v) {
				out[i].FromEnv = append(out[i].FromEnv, v)
			}
		}
	}
	return out
}

// compact drops repeated problems (an alias reports its target's problems
// once per use).
func compact(errs Errors) Errors {
	seen := map[Error]bool{}
	return slices.DeleteFunc(errs, func(e Error) bool {
		if seen[e] {
			return true
		}
		seen[e] = true
		return false
	})
}
