package server

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestOpenAPIDocumentsEveryRoute keeps openapi.json true to the routes: every route is
// documented, and everything documented is routed.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	routed := []string{"GET /openapi.json", "GET /metrics"}
	for _, r := range append((&Server{}).apiRoutes(), (&Server{}).adminRoutes()...) {
		routed = append(routed, r.method+" "+r.pattern)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			if method != "parameters" {
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	for _, r := range routed {
		if !slices.Contains(documented, r) {
			t.Errorf("%s is routed but not documented", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(routed, d) {
			t.Errorf("%s is documented but not routed", d)
		}
	}
}
