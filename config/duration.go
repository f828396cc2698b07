package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written as a Go duration string ("3s",
// "500ms", "1h30m"); a bare 0 is accepted too. It is written back the same
// way, as time.Duration.String() gives it.
type Duration time.Duration

// errDuration is the error of every unparseable duration.
func errDuration() error { return errors.New(`want a Go duration such as "3s" or "500ms"`) }

// parseDuration parses s as a Go duration.
func parseDuration(s string) (Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errDuration()
	}
	return Duration(d), nil
}

// String is the Go duration string of d.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes d as a JSON string such as "30s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a Go duration string, or the number 0.
func (d *Duration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return errDuration()
		}
		v, err := parseDuration(s)
		if err != nil {
			return err
		}
		*d = v
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return errDuration()
	}
	if f, err := n.Float64(); err != nil || f != 0 {
		return errDuration()
	}
	*d = 0
	return nil
}

// MarshalYAML writes d as a Go duration string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML reads a Go duration string (or 0) from a scalar node. It
// does not expand ${NAME}; Parse does that before it decodes.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errDuration()
	}
	v, err := parseDuration(n.Value)
	if err != nil {
		return err
	}
	*d = v
	return nil
}
