package server

import (
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docs/serving.md's table of request fields names every field the server knows, and
// no other: a field added to chatFields is documented.
func TestOpenAIFieldsAreDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/serving.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "| request field | what Terrarium does |")
	if !ok {
		t.Fatal("docs/serving.md has no table of request fields")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	var documented []string
	for _, row := range strings.Split(table, "\n")[2:] {
		cell, _, _ := strings.Cut(strings.TrimPrefix(row, "| "), " |")
		for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(cell, -1) {
			documented = append(documented, m[1])
		}
	}
	slices.Sort(documented)
	if known := slices.Sorted(maps.Keys(chatFields)); !slices.Equal(documented, known) {
		t.Errorf("docs/serving.md documents the request fields\n  %v\nthe server knows\n  %v", documented, known)
	}
}
