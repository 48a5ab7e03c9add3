package server

import (
	"slices"
	"testing"
	"time"
)

func TestFirstWords(t *testing.T) {
	for _, c := range []struct {
		text string
		n    int
		want string
	}{
		{"Hello there", 60, "Hello there"},
		{"  Hello \n\t there  ", 60, "Hello there"},
		{"one two three four", 13, "one two three…"},
		{"one two three", 13, "one two three"},
		{"one two three four", 12, "one two…"},
		{"one two three four", 3, "one…"},
		{"supercalifragilistic", 5, "super…"},
		{"héllo wörld", 5, "héllo…"},
		{"", 5, ""},
	} {
		if got := firstWords(c.text, c.n); got != c.want {
			t.Errorf("firstWords(%q, %d) = %q, want %q", c.text, c.n, got, c.want)
		}
	}
}

func TestCmpNewest(t *testing.T) {
	t1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t2 := t1.Add(time.Hour)
	got := []time.Time{t1, {}, t2, t1}
	slices.SortStableFunc(got, cmpNewest)
	if want := []time.Time{{}, t2, t1, t1}; !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Errorf("sorted %v, want %v", got, want)
	}
}
