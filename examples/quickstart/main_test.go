package main

import (
	"bytes"
	"context"
	"testing"
)

func TestQuickstart(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	want := "model call 1 saw 2 messages\nmodel call 2 saw 4 messages\ntool said: -3.5\nforecast: Oslo, -3.5°C, Cold: wear a hat.\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}
