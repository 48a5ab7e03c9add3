package session

import (
	"hash/maphash"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// costCache is a least-recently-used cache bounded by the summed cost (an estimate of
// the bytes each value keeps alive) of what it holds rather than by a count, since one
// cached snapshot of a long conversation can weigh as much as thousands of short ones.
// A large cache is split into shards, each with its own lock and its share of the
// budget, so that concurrent saves of different sessions do not queue on one lock;
// each shard evicts on its own. A value costing more than a shard's share is not kept.
type costCache[V any] struct {
	seed   maphash.Seed
	cost   func(V) int
	shards []costShard[V]
}

type costShard[V any] struct {
	mu     sync.Mutex
	lru    *simplelru.LRU[string, V]
	used   int
	budget int
}

// A costCache has up to maxShards shards: enough that a few dozen cores saving at once
// rarely meet on one lock. Each gets at least minShardBudget, so that it holds hundreds
// of entries and evicts about as one LRU of the whole budget would.
const (
	maxShards      = 32
	minShardBudget = 1 << 20
)

func newCostCache[V any](budget int, cost func(V) int) *costCache[V] {
	n := min(max(budget/minShardBudget, 1), maxShards)
	c := &costCache[V]{seed: maphash.MakeSeed(), cost: cost, shards: make([]costShard[V], n)}
	for i := range c.shards {
		sh := &c.shards[i]
		sh.budget = budget / n
		// The count bound is never reached (every entry costs more than a byte): the
		// budget is what evicts. The callback keeps the shard's total.
		sh.lru, _ = simplelru.NewLRU(max(sh.budget, 1), func(_ string, v V) { sh.used -= cost(v) })
	}
	return c
}

func (c *costCache[V]) shard(key string) *costShard[V] {
	return &c.shards[maphash.String(c.seed, key)%uint64(len(c.shards))]
}

// Get returns the value cached under key and marks it recently used.
func (c *costCache[V]) Get(key string) (V, bool) {
	sh := c.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.lru.Get(key)
}

// Add caches v under key unless something is cached there already (keys are content
// addresses: what is there stands for the same content), and evicts the least recently
// used entries of its shard until the shard is within its budget.
func (c *costCache[V]) Add(key string, v V) {
	cost := c.cost(v)
	sh := c.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.lru.Get(key); ok || cost > sh.budget {
		return
	}
	sh.lru.Add(key, v)
	sh.used += cost
	for sh.used > sh.budget {
		sh.lru.RemoveOldest()
	}
}

// Remove drops the entry under key, if any.
func (c *costCache[V]) Remove(key string) {
	sh := c.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.lru.Remove(key)
}
