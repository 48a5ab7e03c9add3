package routes

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Missing says what a template does with a variable its context lacks.
type Missing int

const (
	// MissingEmpty renders a missing variable as nothing, as Handlebars does: the
	// default of an agent, whose turns report the variables rendered so (a warning in
	// the turn's result, an event in its trace, a log line) rather than fail.
	MissingEmpty Missing = iota
	// MissingError makes rendering fail with an error wrapping ErrMissingVariable that
	// names the variable: a turn whose prompt names one fails, so that a typo shows at
	// once.
	MissingError
)

// placeholder is a {{variable}} or {{dotted.path}}, spaces allowed inside the braces.
var placeholder = regexp.MustCompile(`\{\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\s*\}\}`)

// RenderTemplate replaces every {{name}} in template by the value at that path of vars
// (dots reach into nested objects: {{user.firstName}}), as seed 002's renderTemplate:
// strings as they are, numbers and booleans in their JSON form, arrays with their
// elements joined by ", ", objects as JSON, null as nothing. A variable vars lacks is
// an error or nothing, as missing says.
func RenderTemplate(template string, vars map[string]any, missing Missing) (string, error) {
	out, absent := render(template, vars)
	if len(absent) > 0 && missing == MissingError {
		return "", missingVariable(absent[0], template)
	}
	return out, nil
}

// missingVariable is the error of a template naming a variable its context lacks.
func missingVariable(path, template string) error {
	return fmt.Errorf("routes: %w: {{%s}} in %q", ErrMissingVariable, path, template)
}

// render renders template with the variables vars lacks as nothing, and returns their
// paths, in order.
func render(template string, vars map[string]any) (string, []string) {
	if !strings.Contains(template, "{{") {
		return template, nil
	}
	var absent []string
	out := placeholder.ReplaceAllStringFunc(template, func(m string) string {
		path := placeholder.FindStringSubmatch(m)[1]
		v, ok := lookup(vars, path)
		if !ok {
			absent = append(absent, path)
			return ""
		}
		return format(v)
	})
	return out, absent
}

// RenderTemplates renders each template of a list (RenderTemplate).
func RenderTemplates(templates []string, vars map[string]any, missing Missing) ([]string, error) {
	out := make([]string, len(templates))
	for i, t := range templates {
		s, err := RenderTemplate(t, vars, missing)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// lookup finds the value at a dotted path.
func lookup(vars map[string]any, path string) (any, bool) {
	var cur any = vars
	for name := range strings.SplitSeq(path, ".") {
		m, ok := generic(cur).(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[name]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// generic turns a Go value into its JSON-decoded form (maps, slices, float64...), so
// that a context may hold structs and still be read by path.
func generic(v any) any {
	switch v.(type) {
	case nil, string, bool, float64, json.Number, map[string]any, []any:
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return v
	}
	return out
}

// format writes a value as seed 002's templates do.
func format(v any) string {
	switch v := generic(v).(type) {
	case nil:
		return ""
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case json.Number:
		return v.String()
	case []any:
		items := make([]string, len(v))
		for i, e := range v {
			if _, obj := e.(map[string]any); obj {
				items[i] = asJSON(e)
			} else {
				items[i] = format(e)
			}
		}
		return strings.Join(items, ", ")
	default:
		return asJSON(v)
	}
}

func asJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
