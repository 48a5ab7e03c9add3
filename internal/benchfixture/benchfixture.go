// Package benchfixture holds the structured tool input the plugin benchmarks share, so
// that the plugin taking it, the host's benchmarks sending it and the SDK's benchmark
// dispatching it agree by construction: hostcheck's order tool (host/testdata/hostcheck)
// takes an Order, and OrderInput is what the benchmarks send it.
package benchfixture

import (
	"fmt"
	"strings"
)

// Order is a structured input of several fields, a nested object and arrays: what a
// real tool takes, where a log tool takes one string.
type Order struct {
	ID       string `json:"id"`
	Customer struct {
		Name  string `json:"name"`
		Email string `json:"email"`
	} `json:"customer"`
	Items []struct {
		SKU   string  `json:"sku"`
		Qty   int     `json:"qty"`
		Price float64 `json:"price"`
	} `json:"items"`
	Tags  []string `json:"tags"`
	Notes string   `json:"notes"`
}

// OrderInput returns an Order as a tool's input arrives from a model, decoded JSON:
// 993 bytes encoded, about 60 values (a nested object, an array of 8 objects, an array
// of 5 strings), the structured counterpart of 1 KiB of text.
func OrderInput() map[string]any {
	items := make([]any, 8)
	for i := range items {
		items[i] = map[string]any{"sku": fmt.Sprintf("SKU-%04d-blue-large", i), "qty": i + 1, "price": 19.99 + float64(i)}
	}
	return map[string]any{
		"id":       "order-7f3c2a91-5b1e-4c8d-9a2f-1e6b7d0c4a55",
		"customer": map[string]any{"name": "Ada Lovelace", "email": "ada@example.org"},
		"items":    items,
		"tags":     []any{"priority", "gift", "international", "fragile", "returning-customer"},
		"notes":    strings.Repeat("Leave the parcel with the neighbour. ", 10),
	}
}
