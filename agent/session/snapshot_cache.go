package session

import (
	"hash/maphash"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// costCache is a least-recently-used cache bounded by the summed cost (an estimate of
// the bytes each value keeps alive) of what it holds rather than by a count, since one
// cached snapshot of a long conversation can weigh as much as thousands of short ones.
//
// A large cache is split into shards, each an LRU list under its own lock: under
// 10,000 concurrent turns one lock was by far the most contended in the process
// (BenchmarkSessionFlowConcurrent's mutex profile), 32 shards are not. The budget is
// the whole cache's, so that any value up to the budget can be kept. Going over it
// evicts the older of the least recently used entries of two shards, drawn from a
// random place: close to one LRU list of the whole cache, even when shards hold few
// entries (evicting from each shard in turn would then evict entries in use), without
// taking every shard's lock for every eviction (which, measured, makes a full cache
// under 10,000 concurrent turns queue on the shards' locks again).
type costCache[V any] struct {
	seed   maphash.Seed
	cost   func(V) int
	budget int64
	used   atomic.Int64
	clock  atomic.Uint64 // ticks at every use, to compare entries of different shards
	shards []costShard[V]
}

type costShard[V any] struct {
	mu  sync.Mutex
	lru *simplelru.LRU[string, *costEntry[V]]
}

type costEntry[V any] struct {
	v        V
	cost     int64
	lastUsed uint64 // the clock when last added or got
}

// A costCache has up to maxShards shards, enough that a few dozen cores saving at once
// seldom meet on one lock, and no more than a shard per shardBytes of budget, so that
// a small cache is one exact LRU list.
const (
	maxShards  = 32
	shardBytes = 1 << 20
)

func newCostCache[V any](budget int, cost func(V) int) *costCache[V] {
	n := min(max(budget/shardBytes, 1), maxShards)
	c := &costCache[V]{seed: maphash.MakeSeed(), cost: cost, budget: int64(budget), shards: make([]costShard[V], n)}
	for i := range c.shards {
		// The budget evicts, not the count.
		c.shards[i].lru, _ = simplelru.NewLRU(math.MaxInt, func(_ string, e *costEntry[V]) { c.used.Add(-e.cost) })
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
	e, ok := sh.lru.Get(key)
	if !ok {
		var zero V
		return zero, false
	}
	e.lastUsed = c.clock.Add(1)
	return e.v, true
}

// Add caches v under key unless something is cached there already (keys are content
// addresses: what is there stands for the same content), then evicts until the cache
// is within its budget. A value costing more than the whole budget is not kept.
func (c *costCache[V]) Add(key string, v V) {
	e := &costEntry[V]{v: v, cost: int64(c.cost(v))}
	if e.cost > c.budget {
		return
	}
	sh := c.shard(key)
	sh.mu.Lock()
	if old, ok := sh.lru.Get(key); ok {
		old.lastUsed = c.clock.Add(1)
	} else {
		e.lastUsed = c.clock.Add(1)
		sh.lru.Add(key, e)
		c.used.Add(e.cost)
	}
	sh.mu.Unlock()
	for c.used.Load() > c.budget {
		if !c.evictOldest(key) {
			break
		}
	}
}

// evictOldest evicts the older of the least recently used entries of two shards, the
// first from a random place that hold one, sparing key, which was just added and is
// within the budget on its own. It holds one shard's lock at a time, so that it cannot
// deadlock with another Add, and reports false if there was nothing to evict.
func (c *costCache[V]) evictOldest(key string) bool {
	var victim *costShard[V]
	oldest := uint64(math.MaxUint64)
	n := len(c.shards)
	start, found := rand.N(n), 0
	for i := 0; i < n && found < 2; i++ {
		sh := &c.shards[(start+i)%n]
		sh.mu.Lock()
		if k, e, ok := sh.lru.GetOldest(); ok && k != key {
			found++
			if e.lastUsed < oldest {
				victim, oldest = sh, e.lastUsed
			}
		}
		sh.mu.Unlock()
	}
	if victim == nil {
		return false
	}
	victim.mu.Lock()
	defer victim.mu.Unlock()
	// Another Add may have evicted it meanwhile: then this evicts the next oldest.
	if k, _, ok := victim.lru.GetOldest(); ok && k != key {
		victim.lru.RemoveOldest()
	}
	return true
}

// Remove drops the entry under key, if any.
func (c *costCache[V]) Remove(key string) {
	sh := c.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.lru.Remove(key)
}
