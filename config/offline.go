package config

// Masked is the value ParseOffline gives every ${NAME} that has no value:
// what `aggregator sources check -record` writes in place of each secret,
// and what a recording's `***` matches (SPEC 13).
const Masked = "***"

// LoadOffline reads and parses the configuration file at path as
// ParseOffline does.
func LoadOffline(path string, getenv func(string) string) (*Config, error) {
	data, err := readConfig(path)
	if err != nil {
		return nil, err
	}
	return parse(data, path, getenv, true)
}

// ParseOffline reads a configuration as `aggregator sources test` replays
// recorded answers with it: on a machine without the portals' secrets (a
// CI runner). It is Parse but for three things:
//   - every ${NAME} reference that has no value and no default, anywhere
//     in the configuration, secrets included, is Masked, as the secret it
//     stands for is in a recording (${NAME:-default} still gives its
//     default, and ${NAME:-} the empty string);
//   - a value holding such a reference is not validated (a signing secret
//     of the wrong form, say): it is not the value it will be;
//   - no file that the configuration names is read: TLS CA files,
//     certificates and keys are only checked to be given as they must be.
func ParseOffline(data []byte, filename string, getenv func(string) string) (*Config, error) {
	return parse(data, filename, getenv, true)
}
