package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestPluginsExample(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, "../../plugins"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"loaded calculator 1.0.0: [/tool/calculator/calc]",
		"echo: Hi, my name is Ada and I live in Lisbon.",
		"59.97",
		"profile: map[city:Lisbon name:Ada]",
		"scratchpad: [three books]",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
