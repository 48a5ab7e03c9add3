package main

import (
	"strings"
	"testing"
)

func TestScan(t *testing.T) {
	for _, tc := range []struct {
		text, name, city, likes string
	}{
		{"Hi! My name is Ada Lovelace and I live in London. I like tea and mathematics.", "Ada Lovelace", "London", "tea|mathematics"},
		{"my name is bob", "bob", "", ""},
		{"MY NAME IS Zoë, I LIVE IN New York City now", "Zoë", "New York City", ""},
		{"I like cats, dogs and long walks, and I live in Paris", "", "Paris", "cats|dogs|long walks"},
		{"I really like jazz but I hate noise", "", "", "jazz"},
		{"I love chess; my name is Kasparov", "Kasparov", "", "chess"},
		{"Nothing to see here, I liked it", "", "", ""},
	} {
		var f facts
		scan(tc.text, &f)
		if f.name != tc.name || f.city != tc.city || strings.Join(f.likes, "|") != tc.likes {
			t.Errorf("scan(%q) = %q %q %q; want %q %q %q", tc.text, f.name, f.city, f.likes, tc.name, tc.city, tc.likes)
		}
	}
}
