package provider

import (
	"encoding/json"
	"maps"

	"github.com/terrarium-ai/terrarium/abi"
)

// ConfigObject returns a request's config (abi.GenerateRequest.Config) as a JSON
// object: nil gives an empty object, an object a copy of it, and any other value (a
// struct from Go code) the object its JSON encodes. A config whose JSON is not an
// object is invalid_input, its message starting with the provider's name.
func ConfigObject(provider string, config any) (map[string]any, error) {
	switch c := config.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		if c == nil {
			return map[string]any{}, nil
		}
		return maps.Clone(c), nil
	}
	b, err := json.Marshal(config)
	if err != nil {
		return nil, abi.Errorf(abi.CodeInvalidInput, "%sconfig: %v", prefix(provider), err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return nil, abi.Errorf(abi.CodeInvalidInput, "%sconfig is %s: want a JSON object", prefix(provider), b)
	}
	return m, nil
}
