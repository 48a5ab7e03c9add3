package session

import (
	"fmt"
	"testing"
)

func TestCostCacheKeepsWithinBudget(t *testing.T) {
	c := newCostCache(100, func(v int) int { return v })
	for i := range 1000 {
		c.Add(fmt.Sprint(i), 10)
		if used := c.used.Load(); used > 100 {
			t.Fatalf("after %d adds the cache holds %d, over its budget of 100", i+1, used)
		}
		if _, ok := c.Get(fmt.Sprint(i)); !ok {
			t.Fatalf("entry %d, just added, is not kept", i)
		}
	}
	// A value of most of the budget is kept, whatever the shards.
	c.Add("large", 90)
	if v, ok := c.Get("large"); !ok || v != 90 || c.used.Load() > 100 {
		t.Errorf("Get(large) = %d, %v, with %d held: want it kept within the budget", v, ok, c.used.Load())
	}
	c.Add("too large", 101)
	if _, ok := c.Get("too large"); ok {
		t.Error("a value over the whole budget was kept")
	}
	c.Remove("large")
	if _, ok := c.Get("large"); ok || c.used.Load() > 10 {
		t.Errorf("after Remove the cache holds %d", c.used.Load())
	}
}

// TestCostCacheSparesWhatIsInUse fills a sharded cache with entries of a sixteenth of
// its budget, so that its shards hold one or none, while using one entry between adds:
// that entry must stay, as in one LRU list.
func TestCostCacheSparesWhatIsInUse(t *testing.T) {
	const budget = 64 << 20
	c := newCostCache(budget, func(v int) int { return v })
	if len(c.shards) < 2 {
		t.Fatalf("%d shards, want several", len(c.shards))
	}
	c.Add("in use", budget/16)
	for i := range 1000 {
		if _, ok := c.Get("in use"); !ok {
			t.Fatalf("the entry in use was evicted after %d adds", i)
		}
		c.Add(fmt.Sprint(i), budget/16)
	}
}
