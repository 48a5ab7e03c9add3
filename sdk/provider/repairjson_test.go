package provider

import (
	"encoding/json"
	"testing"
)

func TestRepairJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{``, ``},
		{`{`, `{}`},
		{`{"`, `{}`},
		{`{"ci`, `{}`},
		{`{"city"`, `{}`},
		{`{"city":`, `{}`},
		{`{"city": "Lis`, `{"city":"Lis"}`},
		{`{"city": "Lisbon"`, `{"city":"Lisbon"}`},
		{`{"city": "Lisbon",`, `{"city":"Lisbon"}`},
		{`{"city": "Lisbon", "da`, `{"city":"Lisbon"}`},
		{`{"n": 12`, `{"n":12}`},
		{`{"n": 12.`, `{}`},
		{`{"ok": tr`, `{}`},
		{`{"a": 1, "b": tr`, `{"a":1}`},
		{`{"a": [1, 2`, `{"a":[1,2]}`},
		{`{"a": [1, {"b": "c`, `{"a":[1,{"b":"c"}]}`},
		{`{"a": [{"b": "c\`, `{"a":[{"b":"c"}]}`},
		{`{"a": [1, {"b": "c"}], "d": {`, `{"a":[1,{"b":"c"}],"d":{}}`},
		{`{"a": {"b": "x"}, "c": [true`, `{"a":{"b":"x"},"c":[true]}`},
		{`{"a": "x\`, `{"a":"x"}`},
		{`{"a": "\u00e`, `{"a":""}`},
		{`{"a": "x\u00`, `{"a":"x"}`},
		{`{"a": "x\u00e9`, `{"a":"xé"}`},
		{`{"q": "say \"hi`, `{"q":"say \"hi"}`},
		{`[`, `[]`},
		{`"hal`, `"hal"`},
		{`{"a":1}`, `{"a":1}`},
		{`}`, ``},
	} {
		v, ok := RepairJSON(tc.in)
		got := ""
		if ok {
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			got = string(b)
		}
		if got != tc.want {
			t.Errorf("RepairJSON(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
